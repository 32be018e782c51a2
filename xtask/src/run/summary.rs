//! The per-run summary, as data ([`Summary`], built from trial records) and
//! as text ([`render_text`]). The comparison tables of `cargo xtask compare`
//! build on the same [`TrialMetrics`] and [`Stats`].

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use xrunbench_schema::trial::TrialRecord;

/// The metrics one trial contributes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrialMetrics {
    /// Underruns per minute of playback.
    pub underruns_per_min: f64,
    /// Longest gap, ms (0 without underruns).
    pub max_gap_ms: f64,
    /// Minimum buffer fill seen at a wake-up, ms.
    pub min_fill_ms: f64,
    /// Mean hackbench round time, ms (None without load or rounds).
    pub hackbench_round_ms: Option<f64>,
}

/// What a metric is called, its unit, and which statistic of it the summary
/// shows first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Underruns per minute.
    UnderrunsPerMin,
    /// Longest gap, ms.
    MaxGapMs,
    /// Minimum buffer fill, ms.
    MinFillMs,
    /// hackbench round time, ms.
    HackbenchRoundMs,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 4] = [
        Metric::UnderrunsPerMin,
        Metric::MaxGapMs,
        Metric::MinFillMs,
        Metric::HackbenchRoundMs,
    ];

    /// Row label.
    pub fn label(self) -> &'static str {
        match self {
            Metric::UnderrunsPerMin => "underruns/min",
            Metric::MaxGapMs => "max gap (ms)",
            Metric::MinFillMs => "min fill (ms)",
            Metric::HackbenchRoundMs => "hackbench round (ms)",
        }
    }

    /// This metric's value in one trial.
    pub fn of(self, m: &TrialMetrics) -> Option<f64> {
        match self {
            Metric::UnderrunsPerMin => Some(m.underruns_per_min),
            Metric::MaxGapMs => Some(m.max_gap_ms),
            Metric::MinFillMs => Some(m.min_fill_ms),
            Metric::HackbenchRoundMs => m.hackbench_round_ms,
        }
    }
}

impl TrialMetrics {
    /// Extracts the metrics of a trial record (`None` unless it is a
    /// measurement).
    pub fn of(t: &TrialRecord) -> Option<Self> {
        let p = t.measured()?;
        let rounds = t
            .load
            .as_ref()
            .map(|l| &l.rounds_us)
            .filter(|r| !r.is_empty());
        Some(TrialMetrics {
            underruns_per_min: p.totals.per_minute,
            max_gap_ms: p.totals.gap_ms_max,
            min_fill_ms: p.fill.min as f64 / 1000.0,
            hackbench_round_ms: rounds
                .map(|r| r.iter().sum::<u64>() as f64 / r.len() as f64 / 1000.0),
        })
    }
}

/// n, mean, median, min, max of a sample (no NaN: empty samples have none).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    /// Sample size.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (mean of the middle two for even n).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Stats {
    /// Statistics of `values`; None when empty.
    pub fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stats {
            n,
            mean: v.iter().sum::<f64>() / n as f64,
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// One configuration's trials and statistics.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigSummary {
    /// Configuration name.
    pub name: String,
    /// Each trial's metrics, in trial order.
    pub trials: Vec<TrialMetrics>,
    /// Statistics per metric (absent when no trial had the metric).
    pub stats: Vec<(Metric, Option<Stats>)>,
}

/// The summary of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Kernel the trials ran on.
    pub kernels: Vec<String>,
    /// Backend and device the player reported.
    pub sink: String,
    /// Trial duration, s.
    pub duration_s: f64,
    /// Per configuration, in scenario order.
    pub configs: Vec<ConfigSummary>,
    /// Trials planned but not run (interrupted).
    pub missing: usize,
}

impl Summary {
    /// Builds the summary from trial records; `order` gives the
    /// configurations' order (configurations without trials still appear).
    pub fn build(
        scenario: &str,
        order: &[String],
        duration_s: f64,
        records: &[TrialRecord],
        missing: usize,
    ) -> Summary {
        let configs = order
            .iter()
            .map(|name| {
                let mut mine: Vec<&TrialRecord> =
                    records.iter().filter(|r| &r.trial.config == name).collect();
                mine.sort_by_key(|r| r.trial.k);
                let trials: Vec<TrialMetrics> =
                    mine.iter().filter_map(|r| TrialMetrics::of(r)).collect();
                let stats = Metric::ALL
                    .iter()
                    .map(|&m| {
                        (
                            m,
                            Stats::of(&trials.iter().filter_map(|t| m.of(t)).collect::<Vec<_>>()),
                        )
                    })
                    .collect();
                ConfigSummary {
                    name: name.clone(),
                    trials,
                    stats,
                }
            })
            .collect();
        let mut kernels: Vec<String> = records
            .iter()
            .map(|r| r.machine.kernel_release.clone())
            .collect();
        kernels.sort();
        kernels.dedup();
        let mut sinks: Vec<String> = records
            .iter()
            .filter_map(TrialRecord::measured)
            .map(|p| format!("{} ({})", p.params.backend, p.params.device))
            .collect();
        sinks.sort();
        sinks.dedup();
        Summary {
            scenario: scenario.into(),
            kernels,
            sink: sinks.join(", "),
            duration_s,
            configs,
            missing,
        }
    }

    /// Loads every measured trial of a run directory (`trials/<stem>.json`;
    /// failed, interrupted and lost trials are in the run's log only).
    pub fn load_records(run_dir: &Path) -> Result<Vec<TrialRecord>> {
        let mut out = Vec::new();
        let dir = run_dir.join("trials");
        for e in std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
        {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if !super::store::is_measured_record_name(&name) {
                continue;
            }
            let text = std::fs::read_to_string(&p)?;
            let record: TrialRecord = serde_json::from_str(&text)
                .with_context(|| format!("{} does not parse", p.display()))?;
            if record.measured().is_some() {
                out.push(record);
            }
        }
        Ok(out)
    }
}

/// Picks one statistic out of [`Stats`].
type StatPick = fn(&Stats) -> f64;

/// Which statistics the text summary prints for each metric.
fn shown(m: Metric) -> &'static [(&'static str, StatPick)] {
    match m {
        Metric::UnderrunsPerMin => &[
            ("mean", |s| s.mean),
            ("median", |s| s.median),
            ("max", |s| s.max),
        ],
        Metric::MaxGapMs => &[("max", |s| s.max)],
        Metric::MinFillMs => &[("min", |s| s.min), ("median", |s| s.median)],
        Metric::HackbenchRoundMs => &[("mean", |s| s.mean)],
    }
}

/// Plain-text summary: one column per configuration, ASCII, no tabs.
pub fn render_text(s: &Summary) -> String {
    let mut out = String::new();
    let width = s
        .configs
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0)
        .max(10);
    let label_w = 30;
    let _ = writeln!(
        out,
        "{}: {:.0} s trials on {}, kernel {}",
        s.scenario,
        s.duration_s,
        if s.sink.is_empty() { "-" } else { &s.sink },
        if s.kernels.is_empty() {
            "-".into()
        } else {
            s.kernels.join(", ")
        }
    );
    let _ = write!(out, "{:label_w$}", "");
    for c in &s.configs {
        let _ = write!(out, "  {:>width$}", c.name);
    }
    out.push('\n');
    let _ = write!(out, "{:label_w$}", "n");
    for c in &s.configs {
        let _ = write!(out, "  {:>width$}", c.trials.len());
    }
    out.push('\n');
    for m in Metric::ALL {
        if s.configs
            .iter()
            .all(|c| c.stats.iter().all(|(mm, st)| *mm != m || st.is_none()))
        {
            continue;
        }
        for (stat_name, pick) in shown(m) {
            let _ = write!(out, "{:label_w$}", format!("{} {stat_name}", m.label()));
            for c in &s.configs {
                let cell = c
                    .stats
                    .iter()
                    .find(|(mm, _)| *mm == m)
                    .and_then(|(_, st)| st.as_ref())
                    .map(|st| format!("{:.2}", pick(st)))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(out, "  {cell:>width$}");
            }
            out.push('\n');
        }
    }
    if s.missing > 0 {
        let _ = writeln!(
            out,
            "({} planned trial(s) not run: the run was interrupted)",
            s.missing
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_small_samples() {
        let s = Stats::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (4, 4.0, 2.5, 1.0, 10.0)
        );
        assert_eq!(Stats::of(&[0.0]).unwrap().median, 0.0);
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn text_has_one_column_per_config_and_no_tabs() {
        let t = |u: f64| TrialMetrics {
            underruns_per_min: u,
            max_gap_ms: u * 2.0,
            min_fill_ms: 5.0,
            hackbench_round_ms: None,
        };
        let mk = |name: &str, v: Vec<TrialMetrics>| ConfigSummary {
            name: name.into(),
            stats: Metric::ALL
                .iter()
                .map(|&m| {
                    (
                        m,
                        Stats::of(&v.iter().filter_map(|x| m.of(x)).collect::<Vec<_>>()),
                    )
                })
                .collect(),
            trials: v,
        };
        let s = Summary {
            scenario: "q".into(),
            kernels: vec!["6.1".into()],
            sink: "virtual (virtual)".into(),
            duration_s: 10.0,
            configs: vec![
                mk("sched-other", vec![t(6.0), t(0.0)]),
                mk("fifo-80", vec![t(0.0), t(0.0)]),
            ],
            missing: 0,
        };
        let text = render_text(&s);
        assert!(!text.contains('\t'));
        assert!(text.lines().all(|l| l.len() <= 80), "{text}");
        assert!(text.contains("underruns/min mean"));
        let row = text
            .lines()
            .find(|l| l.starts_with("underruns/min mean"))
            .unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["underruns/min", "mean", "3.00", "0.00"]
        );
        assert!(
            !text.contains("hackbench"),
            "metric absent everywhere is left out"
        );
    }
}
