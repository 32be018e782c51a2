//! The metrics of a trial: what each is called, its unit, which direction
//! is better, how many decimals it deserves, and how it is read out of one
//! trial record.
//!
//! Their one home is here, in a board crate, because two sides compute
//! them: the host's comparison table, bisect verdicts and JUnit file, and
//! a board with no host at all (a LAVA test definition, whose
//! `xrun-trial summarize` reports one measurement per metric).

use serde::{Deserialize, Serialize};

use crate::trial::TrialRecord;

/// Which way a metric improves (mmtests' `preferhigher`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Smaller is better (underruns, gaps, lateness, times, CPU).
    LowerIsBetter,
    /// Larger is better (headroom, throughput).
    HigherIsBetter,
}

/// One row group of the table (ordered as the table shows them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Underruns per minute of playback.
    Underruns,
    /// Sum of underrun gaps per minute of playback, ms.
    GapPerMin,
    /// Longest underrun gap, ms.
    MaxGap,
    /// Smallest buffer fill seen at a wake-up, ms.
    MinFill,
    /// 1st percentile of buffer fill, ms.
    P1Fill,
    /// 99th percentile of wake-up lateness, ms.
    P99Late,
    /// Mean hackbench round time, ms.
    HackbenchRound,
    /// hackbench rounds completed per minute.
    HackbenchRate,
    /// Player CPU time per second of audio, ms.
    PlayerCpu,
    /// The latency monitor's largest wake-up latency, all CPUs, µs.
    LatMax,
    /// The latency monitor's 99th percentile, all CPUs, µs.
    LatP99,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 11] = [
        Metric::Underruns,
        Metric::GapPerMin,
        Metric::MaxGap,
        Metric::MinFill,
        Metric::P1Fill,
        Metric::P99Late,
        Metric::HackbenchRound,
        Metric::HackbenchRate,
        Metric::PlayerCpu,
        Metric::LatMax,
        Metric::LatP99,
    ];

    /// Row label (≤ 14 characters, so a row label fits 24 columns).
    pub fn label(self) -> &'static str {
        match self {
            Metric::Underruns => "underruns/min",
            Metric::GapPerMin => "gap-ms/min",
            Metric::MaxGap => "maxgap-ms",
            Metric::MinFill => "minfill-ms",
            Metric::P1Fill => "p1fill-ms",
            Metric::P99Late => "p99late-ms",
            Metric::HackbenchRound => "hb-round-ms",
            Metric::HackbenchRate => "hb-rounds/min",
            Metric::PlayerCpu => "cpu-ms/audio-s",
            Metric::LatMax => "lat-max-us",
            Metric::LatP99 => "lat-p99-us",
        }
    }

    /// The metric whose row label is `label` (`underruns/min`).
    pub fn from_label(label: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.label() == label)
    }

    /// Its unit alone (`ms`, `underruns/min`), for a measurement reported
    /// without the table around it (LAVA's `--units`, JUnit).
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Underruns => "underruns/min",
            Metric::GapPerMin => "ms/min",
            Metric::MaxGap
            | Metric::MinFill
            | Metric::P1Fill
            | Metric::P99Late
            | Metric::HackbenchRound => "ms",
            Metric::HackbenchRate => "rounds/min",
            Metric::PlayerCpu => "ms/s",
            Metric::LatMax | Metric::LatP99 => "us",
        }
    }

    /// Its name where a machine reads it: compare's `--metric` and JSON,
    /// a `[gate]` key, a LAVA test case (`underruns`, `max-gap`).
    pub fn key(self) -> &'static str {
        match self {
            Metric::Underruns => "underruns",
            Metric::GapPerMin => "gap-per-min",
            Metric::MaxGap => "max-gap",
            Metric::MinFill => "min-fill",
            Metric::P1Fill => "p1-fill",
            Metric::P99Late => "p99-late",
            Metric::HackbenchRound => "hackbench-round",
            Metric::HackbenchRate => "hackbench-rate",
            Metric::PlayerCpu => "player-cpu",
            Metric::LatMax => "lat-max",
            Metric::LatP99 => "lat-p99",
        }
    }

    /// The metric whose [`Metric::key`] is `key`.
    pub fn from_key(key: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == key)
    }

    /// One-line description with the unit, for footers and docs.
    pub fn describe(self) -> &'static str {
        match self {
            Metric::Underruns => "underruns per minute of playback",
            Metric::GapPerMin => "summed underrun gaps, ms per minute of playback",
            Metric::MaxGap => "longest underrun gap, ms",
            Metric::MinFill => "smallest buffer fill at a wake-up, ms",
            Metric::P1Fill => "1st percentile of buffer fill at wake-ups, ms",
            Metric::P99Late => "99th percentile of wake-up lateness, ms",
            Metric::HackbenchRound => "mean hackbench round time, ms",
            Metric::HackbenchRate => "hackbench rounds completed per minute",
            Metric::PlayerCpu => "player CPU (user+sys) per second of audio, ms",
            Metric::LatMax => "latency monitor: largest wake-up latency, all CPUs, us",
            Metric::LatP99 => "latency monitor: 99th percentile wake-up latency, all CPUs, us",
        }
    }

    /// Which way is better.
    pub fn direction(self) -> Direction {
        match self {
            Metric::MinFill | Metric::P1Fill | Metric::HackbenchRate => Direction::HigherIsBetter,
            _ => Direction::LowerIsBetter,
        }
    }

    /// Decimals in the text table: enough to see a change, no more (fill
    /// and lateness come from µs histograms, so 3 decimals of ms is exact).
    pub fn decimals(self) -> usize {
        match self {
            Metric::Underruns | Metric::GapPerMin | Metric::MaxGap => 2,
            Metric::MinFill | Metric::P1Fill | Metric::P99Late => 3,
            Metric::HackbenchRound | Metric::HackbenchRate | Metric::PlayerCpu => 2,
            Metric::LatMax | Metric::LatP99 => 0,
        }
    }

    /// The smallest change that is real rather than resolution: one
    /// underrun per trial for counts, 1 ms for gaps, 1 µs for histogram
    /// figures. Bisect uses it as the scale when the baseline is 0.
    pub fn resolution(self, trial_seconds: f64) -> f64 {
        let per_min = 60.0 / trial_seconds.max(1e-3);
        match self {
            Metric::Underruns => per_min,
            Metric::GapPerMin => per_min,
            Metric::MaxGap => 1.0,
            Metric::MinFill | Metric::P1Fill | Metric::P99Late => 0.001,
            Metric::HackbenchRound | Metric::PlayerCpu => 0.01,
            Metric::HackbenchRate | Metric::LatMax | Metric::LatP99 => 1.0,
        }
    }

    /// This metric in one trial; `None` when the trial does not have it
    /// (no load, no wake-ups recorded).
    pub fn of(self, t: &TrialRecord) -> Option<f64> {
        let p = t.measured()?;
        let minutes = playback_seconds(t) / 60.0;
        // Over every completed round (exact even where the report kept
        // only a sample of them).
        let rounds = t.load.as_ref().and_then(|l| l.round_totals());
        let v = match self {
            Metric::Underruns => p.totals.per_minute,
            Metric::GapPerMin => per(p.totals.gap_ms_sum, minutes)?,
            Metric::MaxGap => p.totals.gap_ms_max,
            Metric::MinFill => fill(p.fill.count, p.fill.min)?,
            Metric::P1Fill => fill(p.fill.count, p.fill.p1)?,
            Metric::P99Late => fill(p.lateness.count, p.lateness.p99)?,
            Metric::HackbenchRound => {
                let (n, total_us) = rounds?;
                total_us as f64 / n as f64 / 1000.0
            }
            Metric::HackbenchRate => {
                // Rounds run back to back while the player plays, so their
                // summed time is the load's busy wall time.
                let (n, total_us) = rounds?;
                per(n as f64, total_us as f64 / 60e6)?
            }
            Metric::PlayerCpu => per(
                p.process.cpu_user_ms + p.process.cpu_sys_ms,
                p.audio_seconds,
            )?,
            Metric::LatMax => latency(t)?.max as f64,
            Metric::LatP99 => latency(t)?.p99 as f64,
        };
        v.is_finite().then_some(v)
    }
}

/// Seconds the player played in a trial (wall clock; audio seconds if that
/// is absent; 0 unless it is a measurement).
pub fn playback_seconds(t: &TrialRecord) -> f64 {
    match t.measured() {
        Some(p) if p.wall_seconds > 0.0 => p.wall_seconds,
        Some(p) => p.audio_seconds,
        None => 0.0,
    }
}

/// The monitor's histogram over every CPU, when it measured anything.
fn latency(t: &TrialRecord) -> Option<&crate::HistogramSummary> {
    t.monitor
        .as_ref()
        .map(|m| &m.overall)
        .filter(|h| h.count > 0)
}

fn per(x: f64, unit: f64) -> Option<f64> {
    (unit > 0.0).then(|| x / unit)
}

fn fill(count: u64, us: u64) -> Option<f64> {
    (count > 0).then(|| us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_keys_name_one_metric_each() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_label(m.label()), Some(m));
            assert_eq!(Metric::from_key(m.key()), Some(m));
            // The key is the serde name: one spelling in JSON and gates.
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.key()));
            assert!(!m.unit().contains(char::is_whitespace));
        }
        assert_eq!(Metric::from_label("nope"), None);
    }
}
