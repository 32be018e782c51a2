//! Serde types of every JSON document the xrunbench tools exchange.
//!
//! This crate is deliberately tiny (serde and libc only): the board binaries
//! (`xrun-player`, `xrun-hackbench`, `xrun-trial`) depend on it and must
//! cross-build for aarch64 and armv7 without pulling in host-only crates.
//!
//! It also holds the small vocabulary every tool shares ([`vocab`]) and the
//! one atomic document write and UTC formatter ([`doc`]), and the one
//! bounded reader of documents from outside ([`bounded`]).
//!
//! Every document carries a `schema` string (`xrunbench.<tool>/<major>`);
//! readers check it before trusting anything else in the document.

pub mod bounded;
pub mod doc;
pub mod gate;
pub mod hackbench;
pub mod metrics;
pub mod monitor;
pub mod player;
pub mod probe;
pub mod trial;
pub mod vocab;

pub use hackbench::HackbenchReport;
pub use player::PlayerReport;
pub use probe::{CheckReport, Probe};
pub use trial::{TrialRecord, TrialSpec};
pub use vocab::{Backend, CpalHost, CpuList, Priority, SampleFormat};

/// Summary of a fixed-size histogram of microsecond values.
///
/// Percentiles are those a near-miss analysis needs: the low tail (p0.1,
/// p1) is where lost headroom shows before anything underruns.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HistogramSummary {
    /// Unit of every value below (always `"us"` in schema version 1).
    pub unit: String,
    /// Number of samples recorded.
    pub count: u64,
    /// Smallest recorded value.
    pub min: u64,
    /// 0.1th percentile.
    pub p0_1: u64,
    /// 1st percentile.
    pub p1: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest recorded value.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Non-empty buckets as `[value, count]`, ascending (value is the
    /// bucket's highest equivalent value); enough to draw a CDF.
    pub buckets: Vec<[u64; 2]>,
}

#[cfg(feature = "hdr")]
impl HistogramSummary {
    /// The summary of an HDR histogram of microsecond values: the one
    /// conversion both the player's near-miss histograms (`u32` counts) and
    /// the monitor's (`u64`) go through.
    pub fn of_hdr<C: hdrhistogram::Counter>(h: &hdrhistogram::Histogram<C>) -> Self {
        if h.is_empty() {
            return HistogramSummary {
                unit: "us".into(),
                ..HistogramSummary::default()
            };
        }
        HistogramSummary {
            unit: "us".into(),
            count: h.len(),
            min: h.min(),
            p0_1: h.value_at_quantile(0.001),
            p1: h.value_at_quantile(0.01),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
            mean: h.mean(),
            buckets: h
                .iter_recorded()
                .map(|v| [v.value_iterated_to(), v.count_at_value().as_u64()])
                .collect(),
        }
    }
}
