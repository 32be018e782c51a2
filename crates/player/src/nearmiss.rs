//! Near-miss statistics: how close playback came to an underrun.
//!
//! Underruns are rare; a regression shows earlier as lost headroom. At
//! every wake-up the queued audio and the lateness against the period go
//! into fixed-size histograms (allocated once, before playback: recording
//! never allocates).

use hdrhistogram::Histogram;
use xrunbench_schema::HistogramSummary;

/// Largest value kept, µs (10 s: far beyond any buffer; larger values are
/// clamped to it).
const MAX_US: u64 = 10_000_000;

/// Buffer fill and wake-up lateness at every wake-up.
#[derive(Debug, Clone)]
pub struct NearMiss {
    fill: Histogram<u32>,
    lateness: Histogram<u32>,
}

impl Default for NearMiss {
    fn default() -> Self {
        Self::new()
    }
}

fn new_histogram() -> Histogram<u32> {
    // u32 counts halve the memory; 4 billion wake-ups is years of playback.
    // Three significant digits: 1 µs resolution up to 2 ms, ±0.05 % above.
    Histogram::new_with_bounds(1, MAX_US, 3).expect("constant bounds are valid")
}

impl NearMiss {
    /// Empty histograms.
    pub fn new() -> NearMiss {
        NearMiss {
            fill: new_histogram(),
            lateness: new_histogram(),
        }
    }

    /// Records one wake-up: `queued_us` of audio in the buffer, woken
    /// `late_us` after the moment a period of space opened.
    pub fn record(&mut self, queued_us: u64, late_us: u64) {
        self.fill.saturating_record(queued_us.min(MAX_US));
        self.lateness.saturating_record(late_us.min(MAX_US));
    }

    /// Summary of the buffer fill.
    pub fn fill_summary(&self) -> HistogramSummary {
        HistogramSummary::of_hdr(&self.fill)
    }

    /// Summary of the lateness.
    pub fn lateness_summary(&self) -> HistogramSummary {
        HistogramSummary::of_hdr(&self.lateness)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut n = NearMiss::new();
        for v in 1..=1000u64 {
            n.record(v * 10, 0);
        }
        let f = n.fill_summary();
        assert_eq!(f.count, 1000);
        assert_eq!(f.min, 10);
        assert_eq!(f.p1, 100);
        // Above 2048 µs values share buckets: within 0.1 % (3 digits).
        assert!((5000..=5005).contains(&f.p50), "{}", f.p50);
        assert!((10000..=10010).contains(&f.max), "{}", f.max);
        assert_eq!(f.buckets.iter().map(|b| b[1]).sum::<u64>(), 1000);
        let l = n.lateness_summary();
        assert_eq!((l.min, l.max, l.count), (0, 0, 1000));
    }

    #[test]
    fn empty_histograms_summarise_to_zero() {
        let n = NearMiss::new();
        assert_eq!(n.fill_summary().count, 0);
        assert_eq!(n.fill_summary().unit, "us");
    }
}
