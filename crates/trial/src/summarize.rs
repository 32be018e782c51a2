//! `xrun-trial summarize`: a board's trial records as one line per
//! configuration × metric, and one per gate, in the shape Linaro's
//! `send-to-lava.sh` reads — `NAME RESULT MEASUREMENT UNITS` — so that a
//! LAVA test definition turns each line into one `lava-test-case` with one
//! measurement, with no host in the loop. The figures are the host's own
//! ([`Metric::of`], [`Statistic::of`]): a measurement is the mean of the
//! configuration's trials, as the table's Amean row.

use std::fmt;
use std::path::{Path, PathBuf};

use xrunbench_schema::gate::{measurement_case, GateSet, LimitGate, GATES_SCHEMA};
use xrunbench_schema::metrics::Metric;
use xrunbench_schema::trial::{TrialRecord, TRIAL_SCHEMA};

/// A bad record or gate file: one line naming it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SummarizeError(pub String);

/// One line of the summary: a LAVA test case with its measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseLine {
    /// The test case (`fifo-80_underruns`, `gate_fifo-80_underruns_mean-max`).
    pub name: String,
    /// `pass` or `fail`.
    pub pass: bool,
    /// The value (a gate with no value reports 0 and fails).
    pub measurement: f64,
    /// The metric's unit.
    pub units: &'static str,
}

impl fmt::Display for CaseLine {
    /// `NAME pass|fail MEASUREMENT UNITS`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let result = if self.pass { "pass" } else { "fail" };
        write!(
            f,
            "{} {result} {} {}",
            self.name, self.measurement, self.units
        )
    }
}

/// Reads trial records: each file one `xrunbench.trial/1` document.
pub fn read_records(paths: &[PathBuf]) -> Result<Vec<TrialRecord>, SummarizeError> {
    paths.iter().map(|p| read_record(p)).collect()
}

fn read_record(path: &Path) -> Result<TrialRecord, SummarizeError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SummarizeError(format!("{}: cannot read: {e}", path.display())))?;
    let r: TrialRecord = serde_json::from_str(&text).map_err(|e| {
        SummarizeError(format!(
            "{}: not an {TRIAL_SCHEMA} record: {e}",
            path.display()
        ))
    })?;
    if r.schema != TRIAL_SCHEMA {
        return Err(SummarizeError(format!(
            "{}: schema `{}`, expected `{TRIAL_SCHEMA}`",
            path.display(),
            r.schema
        )));
    }
    Ok(r)
}

/// Reads an `xrunbench.gates/1` file.
pub fn read_gates(path: &Path) -> Result<Vec<LimitGate>, SummarizeError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SummarizeError(format!("{}: cannot read: {e}", path.display())))?;
    let set: GateSet = serde_json::from_str(&text).map_err(|e| {
        SummarizeError(format!(
            "{}: not an {GATES_SCHEMA} document: {e}",
            path.display()
        ))
    })?;
    if set.schema != GATES_SCHEMA {
        return Err(SummarizeError(format!(
            "{}: schema `{}`, expected `{GATES_SCHEMA}`",
            path.display(),
            set.schema
        )));
    }
    Ok(set.gates)
}

/// The configurations of `records` in plan order (by `seq`: an
/// interleaved plan starts with one trial of each, in scenario order).
fn configs_in_order(records: &[TrialRecord]) -> Vec<String> {
    let mut sorted: Vec<&TrialRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.trial.seq);
    let mut out: Vec<String> = Vec::new();
    for r in sorted {
        if !out.contains(&r.trial.config) {
            out.push(r.trial.config.clone());
        }
    }
    out
}

/// The per-trial values of `metric` for `config` (measured trials only).
fn values(records: &[TrialRecord], config: &str, metric: Metric) -> Vec<f64> {
    records
        .iter()
        .filter(|r| r.trial.config == config)
        .filter_map(|r| metric.of(r))
        .collect()
}

/// One [`CaseLine`] per configuration × metric that has a value (the mean
/// of its trials, always `pass`: a measurement is not a verdict), then one
/// per gate (`pass` or `fail`).
pub fn summarize(records: &[TrialRecord], gates: &[LimitGate]) -> Vec<CaseLine> {
    let mut lines = Vec::new();
    for config in configs_in_order(records) {
        for metric in Metric::ALL {
            let v = values(records, &config, metric);
            if let Some(mean) = xrunbench_schema::gate::Statistic::Mean.of(&v) {
                lines.push(CaseLine {
                    name: measurement_case(&config, metric),
                    pass: true,
                    measurement: mean,
                    units: metric.unit(),
                });
            }
        }
    }
    for g in gates {
        let (value, pass) = g.judge(&values(records, &g.config, g.metric));
        lines.push(CaseLine {
            name: g.case(),
            pass,
            measurement: value.unwrap_or(0.0),
            units: g.metric.unit(),
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunbench_schema::gate::{Bound, Statistic};

    fn record(config: &str, seq: u32, underruns_per_min: f64) -> TrialRecord {
        let text = include_str!("../../../xtask/tests/golden/trial-template.json");
        let mut r: TrialRecord = serde_json::from_str(text).unwrap();
        r.trial.config = config.into();
        r.trial.seq = seq;
        r.player.as_mut().unwrap().totals.per_minute = underruns_per_min;
        r
    }

    #[test]
    fn one_line_per_config_and_metric_then_gates() {
        let records = [
            record("b", 2, 4.0),
            record("a", 1, 1.0),
            record("a", 3, 2.0),
            record("b", 4, 6.0),
        ];
        let gate = LimitGate {
            config: "b".into(),
            metric: Metric::Underruns,
            of: Statistic::Mean,
            bound: Bound::Max,
            limit: 4.5,
        };
        let lines = summarize(&records, &[gate]);
        let first = lines.iter().position(|l| l.name == "a_underruns").unwrap();
        let b = lines.iter().position(|l| l.name == "b_underruns").unwrap();
        assert!(first < b, "configs in plan order");
        assert_eq!(
            lines[first].to_string(),
            "a_underruns pass 1.5 underruns/min"
        );
        assert_eq!(lines[b].measurement, 5.0);
        let g = lines.last().unwrap();
        assert_eq!(
            g.to_string(),
            "gate_b_underruns_mean-max fail 5 underruns/min"
        );
        // Every metric the template has, per configuration, once.
        let per_a = lines.iter().filter(|l| l.name.starts_with("a_")).count();
        let have = Metric::ALL
            .iter()
            .filter(|m| m.of(&records[1]).is_some())
            .count();
        assert_eq!(per_a, have);
    }
}
