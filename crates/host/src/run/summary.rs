//! The per-run summary, as data ([`Summary`]) and as text ([`render_text`]):
//! the few figures a person looks at first, per configuration. It reads
//! the run directory through the results layer and computes every figure
//! with the comparison's metrics ([`Metric::of`]) and statistics
//! ([`Describe`]), so the summary and the comparison table cannot disagree.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use xrunbench_schema::doc::one_line;

use xrunbench_analysis::compare::metrics::Metric;
use xrunbench_analysis::results::{LoadError, Outcome, RunDir};
use xrunbench_analysis::stats::Describe;

/// One measured trial's value of every metric (`null` where the trial
/// does not have it: no load, no wake-up recorded).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialValues {
    /// Trial number within the configuration.
    pub k: u32,
    /// Each metric's value.
    pub values: BTreeMap<Metric, Option<f64>>,
}

/// One configuration's trials and statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigSummary {
    /// Configuration name.
    pub name: String,
    /// Each measured trial, in trial order.
    pub trials: Vec<TrialValues>,
    /// Statistics per metric (`null` when no trial had the metric).
    pub stats: BTreeMap<Metric, Option<Describe>>,
}

/// A trial of the run's log (it failed, was interrupted or was lost).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotMeasured {
    /// `<config>-<k>`.
    pub trial: String,
    /// How it ended, in one line.
    pub outcome: String,
}

/// The summary of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Kernels the trials ran on.
    pub kernels: Vec<String>,
    /// Backend and device the player reported.
    pub sink: String,
    /// Trial duration, s.
    pub duration_s: f64,
    /// Per configuration, in scenario order (those without a measured
    /// trial included).
    pub configs: Vec<ConfigSummary>,
    /// Planned trials that are not measurements.
    pub missing: usize,
    /// Why they are missing, when the run stopped early.
    pub stopped: Option<String>,
    /// The trials that failed, were interrupted or were lost.
    pub not_measured: Vec<NotMeasured>,
}

impl Summary {
    /// The summary of the run directory `dir`, which ended as `outcome`.
    pub fn of(dir: &RunDir, outcome: &Outcome) -> Result<Summary, LoadError> {
        let configs = dir
            .planned_configs()
            .into_iter()
            .map(|name| config_summary(dir, name))
            .collect();
        let mut kernels: Vec<String> = dir
            .records
            .iter()
            .map(|r| one_line(&r.machine.kernel_release))
            .collect();
        kernels.sort();
        kernels.dedup();
        // A board's words, as everything from outside: escaped and capped.
        let mut sinks: Vec<String> = dir.sinks().iter().map(|s| one_line(s)).collect();
        sinks.sort();
        let planned = dir.manifest.as_ref().map_or(0, |m| m.plan.len());
        let not_measured = dir
            .read_log()?
            .iter()
            .map(|e| NotMeasured {
                trial: e.trial().stem(),
                outcome: e.describe(),
            })
            .collect();
        Ok(Summary {
            scenario: dir.scenario.clone(),
            kernels,
            sink: sinks.join(", "),
            duration_s: dir.trial_seconds,
            configs,
            missing: planned.saturating_sub(dir.records.len()),
            stopped: match outcome {
                Outcome::Completed => None,
                Outcome::Interrupted { .. } => Some("the run was interrupted".into()),
                Outcome::Failed { error } => Some(format!("the run stopped: {error}")),
            },
            not_measured,
        })
    }
}

fn config_summary(dir: &RunDir, name: String) -> ConfigSummary {
    let records = dir.trials_of(&name);
    let trials: Vec<TrialValues> = records
        .iter()
        .map(|r| TrialValues {
            k: r.trial.k,
            values: Metric::ALL.iter().map(|&m| (m, m.of(r))).collect(),
        })
        .collect();
    let stats = Metric::ALL
        .iter()
        .map(|&m| {
            let values: Vec<f64> = trials.iter().filter_map(|t| t.values[&m]).collect();
            (m, Describe::of(&values))
        })
        .collect();
    ConfigSummary {
        name,
        trials,
        stats,
    }
}

/// Picks one statistic out of [`Describe`].
type StatPick = fn(&Describe) -> f64;

/// A metric of the text summary: the metric, its row label, and which of
/// its statistics are shown (name, pick).
type Shown = (Metric, &'static str, &'static [(&'static str, StatPick)]);

/// The rows of the text summary.
const SHOWN: [Shown; 4] = [
    (
        Metric::Underruns,
        "underruns/min",
        &[
            ("mean", |s| s.mean),
            ("median", |s| s.median),
            ("max", |s| s.max),
        ],
    ),
    (Metric::MaxGap, "max gap (ms)", &[("max", |s| s.max)]),
    (
        Metric::MinFill,
        "min fill (ms)",
        &[("min", |s| s.min), ("median", |s| s.median)],
    ),
    (
        Metric::HackbenchRound,
        "hackbench round (ms)",
        &[("mean", |s| s.mean)],
    ),
];

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
    for (m, label, picks) in SHOWN {
        let stats = |c: &ConfigSummary| c.stats.get(&m).copied().flatten();
        if s.configs.iter().all(|c| stats(c).is_none()) {
            continue;
        }
        for (stat_name, pick) in picks {
            let _ = write!(out, "{:label_w$}", format!("{label} {stat_name}"));
            for c in &s.configs {
                let cell = stats(c)
                    .map(|st| format!("{:.2}", pick(&st)))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(out, "  {cell:>width$}");
            }
            out.push('\n');
        }
    }
    match (&s.stopped, s.missing) {
        (_, 0) => {}
        (Some(why), n) => {
            let _ = writeln!(out, "({n} planned trial(s) not run: {why})");
        }
        (None, n) => {
            let _ = writeln!(out, "({n} planned trial(s) not measured)");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};
    use xrunbench_schema::trial::TrialRecord;

    use super::*;
    use xrunbench_analysis::compare::table::{Significance, Stat};
    use xrunbench_analysis::compare::{build, ALPHA};
    use xrunbench_analysis::results::testing::{manifest, trial, write_run};

    /// Trial `k` of `config`, its figures varied with `b` (badness) and `k`.
    fn measured(config: &str, k: u32, b: f64, edit: impl FnOnce(&mut Value)) -> TrialRecord {
        trial(config, k, |v| {
            let p = &mut v["player"];
            let count = (b * k as f64).round() as u64;
            let wall = p["wall_seconds"].as_f64().unwrap();
            p["totals"] = json!({
                "count": count,
                "gap_ms_sum": 7.5 * count as f64,
                "gap_ms_max": if count > 0 { 7.5 + k as f64 } else { 0.0 },
                "per_minute": count as f64 * 60.0 / wall,
            });
            p["fill"]["min"] = json!(9000 / (k as u64 + b as u64));
            p["fill"]["p1"] = json!(12000 - 100 * k as u64);
            p["lateness"]["p99"] = json!(300 * k as u64);
            p["process"]["cpu_user_ms"] = json!(20.0 + k as f64);
            v["load"]["rounds_us"] = json!([1_000_000 + 5_000 * k as u64, 1_100_000]);
            edit(v);
        })
    }

    fn no_fill_samples(v: &mut Value) {
        v["player"]["fill"]["count"] = json!(0);
        v["player"]["fill"]["min"] = json!(0);
        v["player"]["fill"]["p1"] = json!(0);
        v["player"]["fill"]["buckets"] = json!([]);
    }

    fn describe_stat(stat: Stat, d: &Describe) -> Option<f64> {
        match stat {
            Stat::Min => Some(d.min),
            Stat::Amean => Some(d.mean),
            Stat::Median => Some(d.median),
            Stat::Stddev => Some(d.stddev),
            Stat::CoeffVar => d.coeffvar,
            Stat::Max => Some(d.max),
            Stat::N => Some(d.n as f64),
        }
    }

    /// `a`: a trial with no fill samples among others; `b`: worse, one
    /// trial without load; `c`: no fill samples at all.
    fn mixed_run(root: &std::path::Path) -> RunDir {
        let records = vec![
            measured("a", 1, 1.0, |_| {}),
            measured("a", 2, 1.0, no_fill_samples),
            measured("a", 3, 1.0, |_| {}),
            measured("a", 4, 1.0, |_| {}),
            measured("b", 1, 3.0, |_| {}),
            measured("b", 2, 3.0, |v| v["load"] = Value::Null),
            measured("b", 3, 3.0, |_| {}),
            measured("c", 1, 0.0, no_fill_samples),
            measured("c", 2, 0.0, no_fill_samples),
        ];
        let dir = write_run(root, &manifest(&["a", "b", "c", "d"]), &records);
        RunDir::load(&dir).unwrap()
    }

    #[test]
    fn the_summary_and_the_comparison_agree_on_every_metric() {
        let root = tempfile::tempdir().unwrap();
        let dir = mixed_run(root.path());
        let summary = Summary::of(&dir, &Outcome::Completed).unwrap();
        let table = build(std::slice::from_ref(&dir), Significance::Mwu, ALPHA);
        assert_eq!(table.columns.len(), 3);
        for (col, column) in table.columns.iter().enumerate() {
            let c = summary
                .configs
                .iter()
                .find(|c| c.name == column.config)
                .unwrap();
            assert_eq!(c.trials.len(), column.n);
            for m in Metric::ALL {
                let rows: Vec<_> = table.rows.iter().filter(|r| r.metric == m).collect();
                let stats = c.stats[&m];
                if rows.is_empty() {
                    assert_eq!(stats, None, "{m:?}: no column has it");
                }
                for row in rows {
                    assert_eq!(
                        row.cells[col].value,
                        stats.and_then(|d| describe_stat(row.stat, &d)),
                        "{} {m:?} {:?}",
                        column.config,
                        row.stat
                    );
                }
            }
        }
        // A trial without fill samples has no minimum fill (not 0 ms), in
        // both; a column without any has none at all.
        let a = &summary.configs[0];
        assert_eq!(a.trials[1].values[&Metric::MinFill], None);
        assert_eq!(a.stats[&Metric::MinFill].unwrap().n, 3);
        let c = &summary.configs[2];
        assert_eq!(c.stats[&Metric::MinFill], None);
        // The planned configuration without trials is still shown.
        assert_eq!(summary.configs[3].name, "d");
        assert!(summary.configs[3].trials.is_empty());
        // As data, metrics are named as the comparison's JSON names them.
        let js = serde_json::to_value(&summary).unwrap();
        assert_eq!(
            js["configs"][0]["trials"][1]["values"]["min-fill"],
            Value::Null
        );
        assert_eq!(js["configs"][2]["stats"]["min-fill"], Value::Null);
        assert_eq!(js["configs"][0]["stats"]["min-fill"]["n"], 3);

        // The text shows the same numbers, two decimals.
        let text = render_text(&summary);
        let cell = |label: &str, col: usize| {
            let row = text.lines().find(|l| l.starts_with(label)).unwrap();
            row[30..].split_whitespace().nth(col).unwrap().to_string()
        };
        for (m, label, picks) in SHOWN {
            for (stat_name, _) in picks {
                let stat = match *stat_name {
                    "min" => Stat::Min,
                    "mean" => Stat::Amean,
                    "median" => Stat::Median,
                    _ => Stat::Max,
                };
                let row = table
                    .rows
                    .iter()
                    .find(|r| r.metric == m && r.stat == stat)
                    .unwrap();
                for (col, c) in row.cells.iter().enumerate() {
                    let want = c.value.map_or("-".into(), |v| format!("{v:.2}"));
                    assert_eq!(cell(&format!("{label} {stat_name}"), col), want, "{text}");
                }
            }
        }
    }

    #[test]
    fn text_has_one_column_per_config_and_no_tabs() {
        let root = tempfile::tempdir().unwrap();
        let records = vec![
            measured("sched-other", 1, 6.0, |v| v["load"] = Value::Null),
            measured("sched-other", 2, 0.0, |v| v["load"] = Value::Null),
            measured("fifo-80", 1, 0.0, |v| v["load"] = Value::Null),
            measured("fifo-80", 2, 0.0, |v| v["load"] = Value::Null),
        ];
        let m = manifest(&["sched-other", "fifo-80"]);
        let dir = RunDir::load(&write_run(root.path(), &m, &records)).unwrap();
        let s = Summary::of(&dir, &Outcome::Completed).unwrap();
        let text = render_text(&s);
        assert!(!text.contains('\t'));
        assert!(text.lines().all(|l| l.len() <= 80), "{text}");
        assert!(text
            .starts_with("synthetic: 10 s trials on virtual (virtual), kernel 6.18.44-fc-v782\n"));
        let row = text
            .lines()
            .find(|l| l.starts_with("underruns/min mean"))
            .unwrap();
        let wall = records[0].player.as_ref().unwrap().wall_seconds;
        let mean = format!("{:.2}", (6.0 * 60.0 / wall + 0.0) / 2.0);
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["underruns/min", "mean", &mean, "0.00"]
        );
        assert!(
            !text.contains("hackbench"),
            "metric absent everywhere is left out"
        );
        assert!(!text.contains("not run"));
    }

    #[test]
    fn a_run_that_stopped_says_why_and_lists_its_log() {
        let root = tempfile::tempdir().unwrap();
        let failed = trial("b", 1, |v| {
            v["trial"]["seq"] = json!(2);
            v["outcome"] = json!({ "status": "failed", "reason": "no device hw:9" });
            v["player"] = Value::Null;
        });
        let mut m = manifest(&["a", "b"]);
        m.plan = xrunbench_scenario::plan::make_plan(
            &["a".into(), "b".into()],
            2,
            xrunbench_scenario::Order::Interleaved,
        );
        let dir = write_run(root.path(), &m, &[measured("a", 1, 1.0, |_| {}), failed]);
        let dir = RunDir::read(&dir).unwrap();
        let error = "trial b-1 could not run: no device hw:9".to_string();
        let s = Summary::of(&dir, &Outcome::Failed { error }).unwrap();
        assert_eq!(s.missing, 3);
        assert_eq!(
            s.not_measured,
            [NotMeasured {
                trial: "b-1".into(),
                outcome: "failed: no device hw:9".into()
            }]
        );
        assert!(render_text(&s).ends_with(
            "(3 planned trial(s) not run: the run stopped: trial b-1 could not run: no device hw:9)\n"
        ));
        let s = Summary::of(&dir, &Outcome::Interrupted { signal: 2 }).unwrap();
        assert!(
            render_text(&s).ends_with("(3 planned trial(s) not run: the run was interrupted)\n")
        );
    }

    #[test]
    fn a_boards_kernel_and_reason_are_shown_escaped_and_capped() {
        let root = tempfile::tempdir().unwrap();
        let hostile = "6.1\u{1b}]0;owned\u{7}\u{202e}lmth.exe\u{2066}";
        let reason = "r".repeat(50 << 20);
        let failed = trial("b", 1, |v| {
            v["machine"]["kernel_release"] = json!(hostile);
            v["outcome"] = json!({ "status": "failed", "reason": reason });
            v["player"] = Value::Null;
        });
        let a = measured("a", 1, 1.0, |v| {
            v["machine"]["kernel_release"] = json!(hostile)
        });
        let m = manifest(&["a", "b"]);
        let dir = RunDir::read(&write_run(root.path(), &m, &[a, failed])).unwrap();
        let s = Summary::of(&dir, &Outcome::Completed).unwrap();
        let escaped = "6.1\\u{1b}]0;owned\\u{7}\\u{202e}lmth.exe\\u{2066}";
        assert_eq!(s.kernels, [escaped]);
        let text = render_text(&s);
        assert!(text.contains(&format!("kernel {escaped}\n")), "{text}");
        assert!(text
            .chars()
            .all(|c| c == '\n' || !xrunbench_schema::doc::is_hidden(c)));
        let outcome = &s.not_measured[0].outcome;
        assert!(
            outcome.ends_with("r…(52428800 bytes)"),
            "{}",
            &outcome[4000..]
        );
        assert!(outcome.len() <= xrunbench_schema::doc::MAX_SHOWN + 8);
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.len() < 16 << 10,
            "summary.json of {} bytes",
            json.len()
        );
        // The run keeps the reason capped too: its file is small.
        let trials = dir.path.join("trials");
        let kept = std::fs::read_dir(&trials)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("b-1"))
            .expect("the failed trial's file");
        let kept = std::fs::read_to_string(kept.path()).unwrap();
        assert!(kept.contains("r…(52428800 bytes)") && kept.len() < 16 << 10);
    }
}
