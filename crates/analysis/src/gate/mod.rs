//! Gates: pass/fail criteria a scenario declares for CI (`[gate]`), judged
//! on a run's trials. They drive `run --gate`'s exit code, JUnit failures
//! and a LAVA test definition's `fail` cases.
//!
//! Two kinds:
//! - a **limit** (`{ max = 0 }`, `{ min = 2.5, of = "median" }`): a
//!   statistic of the configuration's trials against a fixed value. A
//!   board judges these alone (`xrun-trial summarize`); the host judges
//!   them the same way ([`xrunbench_schema::gate::LimitGate`] is shared);
//! - **against the baseline** (`{ worse_than_baseline = false }`,
//!   `{ worse_by_percent = 10 }`): the configuration's trials against the
//!   first configuration's with the comparison table's significance test
//!   (two-sided Mann–Whitney U, α 0.05). Only the host runs that test: a
//!   LAVA job's are judged by `lava-results`.

use xrunbench_schema::gate::Statistic;
use xrunbench_schema::metrics::Metric;

use crate::compare::table::{self, Significance, Stat};
use crate::compare::ALPHA;
use crate::results::RunDir;
pub use xrunbench_scenario::gate::{limits, resolve, Gate, GateSpec, GateTable};

/// A gate's verdict on a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The gate.
    pub gate: Gate,
    /// The value judged: the statistic (limit), or the percent against
    /// the baseline (positive = better); `None` when there is none.
    pub value: Option<f64>,
    /// Whether it passed.
    pub pass: bool,
    /// One line: the rule and what was found.
    pub line: String,
}

/// Judges `gates` on the run `dir`, whose baseline is `baseline` (the
/// scenario's first configuration).
pub fn judge(gates: &[Gate], dir: &RunDir, baseline: &str) -> Vec<Verdict> {
    let values = |config: &str, m: Metric| -> Vec<f64> {
        dir.trials_of(config)
            .iter()
            .filter_map(|t| m.of(t))
            .collect()
    };
    gates
        .iter()
        .map(|g| {
            let rule = g.rule(baseline);
            let head = format!("{} {}: {rule}", g.config(), g.metric().key());
            match g {
                Gate::Limit(l) => {
                    let (value, pass) = l.judge(&values(&l.config, l.metric));
                    let found = match value {
                        Some(v) => format!("{} is {v:.3} {}", l.of.name(), l.metric.unit()),
                        None => "no trial has this metric".into(),
                    };
                    Verdict {
                        gate: g.clone(),
                        value,
                        pass,
                        line: format!("{head}: {found}"),
                    }
                }
                Gate::NotWorse {
                    config,
                    metric,
                    by_percent,
                } => not_worse(
                    g,
                    &values(baseline, *metric),
                    &values(config, *metric),
                    *metric,
                    *by_percent,
                    head,
                ),
            }
        })
        .collect()
}

/// A [`Gate::NotWorse`] on the two samples.
fn not_worse(
    gate: &Gate,
    base: &[f64],
    new: &[f64],
    metric: Metric,
    by_percent: Option<f64>,
    head: String,
) -> Verdict {
    let fail = |line: String| Verdict {
        gate: gate.clone(),
        value: None,
        pass: false,
        line: format!("{head}: {line}"),
    };
    let (Some(bm), Some(nm)) = (Statistic::Mean.of(base), Statistic::Mean.of(new)) else {
        return fail("no trials to compare (both need this metric)".into());
    };
    let Some(percent) = Stat::Amean.percent(metric.direction(), bm, nm) else {
        return fail("no percent (a non-finite mean)".into());
    };
    let test = table::test(Significance::Mwu, ALPHA, base, new);
    let significant = test.is_some_and(|t| t.significant);
    let worse = percent < 0.0;
    let beyond = by_percent.map_or(true, |p| -percent > p);
    let pass = !(worse && significant && beyond);
    let p = test
        .and_then(|t| t.score)
        .map_or("no test (too few trials)".into(), |p| format!("p = {p:.4}"));
    Verdict {
        gate: gate.clone(),
        value: Some(percent),
        pass,
        line: format!(
            "{head}: mean {nm:.3} vs {bm:.3} {} ({percent:+.2}%, {p}, {})",
            metric.unit(),
            if significant {
                "significant"
            } else {
                "not significant"
            }
        ),
    }
}

/// Every gate passed.
pub fn all_pass(verdicts: &[Verdict]) -> bool {
    verdicts.iter().all(|v| v.pass)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testing;
    use std::path::Path;
    use xrunbench_scenario as scenario;

    const BASE: &str =
        "name = \"g\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"base\"\n[[config]]\nname = \"fifo-80\"\n";

    /// The gates of a scenario with [`BASE`]'s two configurations.
    fn gates_of(text: &str) -> Vec<Gate> {
        let p = Path::new("g.toml");
        let file = scenario::parse(p, text).unwrap();
        let s = scenario::resolve(p, &file).unwrap();
        resolve(p, &file, &s).unwrap()
    }

    fn run_with(base: &[f64], new: &[f64]) -> (tempfile::TempDir, RunDir) {
        let root = tempfile::tempdir().unwrap();
        let mut records = Vec::new();
        for (config, values) in [("base", base), ("fifo-80", new)] {
            for (k, v) in values.iter().enumerate() {
                let v = *v;
                records.push(testing::trial(config, k as u32 + 1, |j| {
                    j["player"]["totals"]["gap_ms_max"] = serde_json::json!(v);
                }));
            }
        }
        let dir = testing::write_run(
            root.path(),
            &testing::manifest(&["base", "fifo-80"]),
            &records,
        );
        let run = RunDir::load(&dir).unwrap();
        (root, run)
    }

    #[test]
    fn limits_and_the_significance_test_decide() {
        let gates = gates_of(&format!(
            "{BASE}[gate.\"fifo-80\"]\nmax-gap = {{ max = 3, worse_than_baseline = false }}\n"
        ));
        // Clearly worse (every trial above every baseline trial) and above
        // the limit: both fail.
        let (_r, run) = run_with(&[0.0, 1.0, 0.0, 1.0, 0.0], &[6.0, 7.0, 8.0, 6.0, 9.0]);
        let v = judge(&gates, &run, "base");
        assert_eq!(v.iter().map(|v| v.pass).collect::<Vec<_>>(), [false, false]);
        assert!(v[0].line.contains("mean is 7.200 ms"), "{}", v[0].line);
        assert!(v[1].line.contains("significant"), "{}", v[1].line);
        // Worse on average but not significantly (overlapping): passes the
        // relative gate, and the limit.
        let (_r, run) = run_with(&[0.0, 3.0, 1.0, 2.0, 0.0], &[1.0, 0.0, 3.0, 2.0, 1.0]);
        let v = judge(&gates, &run, "base");
        assert!(all_pass(&v), "{v:?}");
        // Tolerated by percent: much worse, significant, but the gate
        // allows far more.
        let gates = gates_of(&format!(
            "{BASE}[gate.\"fifo-80\"]\nmax-gap = {{ worse_by_percent = 100000 }}\n"
        ));
        let (_r, run) = run_with(&[1.0, 1.1, 1.2, 1.0, 1.1], &[6.0, 7.0, 8.0, 6.0, 9.0]);
        assert!(all_pass(&judge(&gates, &run, "base")));
    }
}
