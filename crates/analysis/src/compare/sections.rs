//! What goes under the table when the trials ran the monitor: per
//! configuration, who took the CPU from the audio (the scheduler trace's
//! account of every underrun, summed over all trials), and the latency
//! monitor per CPU.
//!
//! Tasks are grouped by name and policy, not pid: a pid names one trial's
//! process, the name what a kernel developer recognises across trials.

use std::collections::BTreeMap;

use serde::Serialize;
use xrunbench_schema::trial::TrialRecord;

/// Tasks listed per configuration.
const TOP: usize = 5;

/// The sections of one comparison (empty when no trial ran the monitor).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sections {
    /// Per column with traced underruns: who ran while the audio waited.
    pub waiting: Vec<Waiting>,
    /// Per column with the latency monitor: per CPU figures.
    pub latency: Vec<CpuColumn>,
}

/// One configuration's underruns, accounted.
#[derive(Debug, Clone, Serialize)]
pub struct Waiting {
    /// The column's name.
    pub column: String,
    /// Underruns in its trials.
    pub underruns: usize,
    /// Of those, how many the trace accounts for.
    pub accounted: usize,
    /// The playback thread's runnable wait, summed, ms.
    pub runnable_ms: f64,
    /// Its not-runnable time in the same gaps, summed, ms.
    pub not_runnable_ms: f64,
    /// The tasks that ran meanwhile, largest first (at most five).
    pub tasks: Vec<Culprit>,
    /// Time of tasks the accounts did not name (beyond their eight
    /// largest), summed, ms.
    pub unnamed_ms: f64,
}

/// A task (by name and policy) and the audio's waiting time it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Culprit {
    /// `comm`.
    pub comm: String,
    /// Its scheduling policy.
    pub policy: String,
    /// Its time on the CPU while the audio waited, summed, ms.
    pub ms: f64,
    /// That as a share of the runnable wait, %.
    pub share: f64,
    /// In how many trials it appears.
    pub trials: usize,
}

/// One configuration's latency monitor, per CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CpuColumn {
    /// The column's name.
    pub column: String,
    /// Per CPU: (cpu, mean over trials of the trial's max, of its p99), µs.
    pub cpus: Vec<(usize, f64, f64)>,
}

/// The sections of one column's trials.
pub fn of_column(column: &str, trials: &[&TrialRecord], s: &mut Sections) {
    if let Some(w) = waiting(column, trials) {
        s.waiting.push(w);
    }
    if let Some(c) = latency(column, trials) {
        s.latency.push(c);
    }
}

fn waiting(column: &str, trials: &[&TrialRecord]) -> Option<Waiting> {
    let mut w = Waiting {
        column: column.to_string(),
        underruns: 0,
        accounted: 0,
        runnable_ms: 0.0,
        not_runnable_ms: 0.0,
        tasks: Vec::new(),
        unnamed_ms: 0.0,
    };
    let mut traced = false;
    let mut by_task: BTreeMap<(String, String), (f64, usize)> = BTreeMap::new();
    for t in trials {
        let Some(m) = t.monitor.as_ref().filter(|m| m.trace.is_some()) else {
            continue;
        };
        traced = true;
        w.underruns += t.measured().map_or(0, |p| p.events.len());
        let mut seen: Vec<(String, String)> = Vec::new();
        for a in m.underruns.iter().filter_map(|u| u.account.as_ref()) {
            w.accounted += 1;
            w.runnable_ms += a.runnable_ms;
            w.not_runnable_ms += a.not_runnable_ms;
            w.unnamed_ms += a.others_ms;
            for task in &a.tasks {
                let key = (task.comm.clone(), task.policy.clone());
                let e = by_task.entry(key.clone()).or_insert((0.0, 0));
                e.0 += task.ms;
                if !seen.contains(&key) {
                    e.1 += 1;
                    seen.push(key);
                }
            }
        }
    }
    if !traced {
        return None;
    }
    let mut tasks: Vec<Culprit> = by_task
        .into_iter()
        .map(|((comm, policy), (ms, trials))| Culprit {
            share: if w.runnable_ms > 0.0 {
                ms * 100.0 / w.runnable_ms
            } else {
                0.0
            },
            comm,
            policy,
            ms,
            trials,
        })
        .collect();
    tasks.sort_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.comm.cmp(&b.comm)));
    tasks.truncate(TOP);
    w.tasks = tasks;
    Some(w)
}

fn latency(column: &str, trials: &[&TrialRecord]) -> Option<CpuColumn> {
    let mut per: BTreeMap<usize, (f64, f64, usize)> = BTreeMap::new();
    for t in trials.iter().filter(|t| t.measured().is_some()) {
        for c in t.monitor.iter().flat_map(|m| &m.cpus) {
            if c.latency.count == 0 {
                continue;
            }
            let e = per.entry(c.cpu).or_insert((0.0, 0.0, 0));
            e.0 += c.latency.max as f64;
            e.1 += c.latency.p99 as f64;
            e.2 += 1;
        }
    }
    if per.is_empty() {
        return None;
    }
    Some(CpuColumn {
        column: column.to_string(),
        cpus: per
            .into_iter()
            .map(|(cpu, (max, p99, n))| (cpu, max / n as f64, p99 / n as f64))
            .collect(),
    })
}

impl Sections {
    /// Whether there is nothing to show.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.latency.is_empty()
    }

    /// The sections as lines of at most 80 columns (text and Markdown
    /// print them under the table).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.waiting.is_empty() {
            out.push("Who took the CPU from the audio (scheduler trace: the playback".into());
            out.push("  thread's runnable wait at each underrun, summed over all trials):".into());
            for w in &self.waiting {
                out.push(format!(
                    "  {}: {} underrun(s), {} accounted; runnable {:.1} ms, not runnable {:.1} ms",
                    w.column, w.underruns, w.accounted, w.runnable_ms, w.not_runnable_ms
                ));
                for c in &w.tasks {
                    let name = format!("{} ({})", c.comm, c.policy);
                    out.push(format!(
                        "    {:<36} {:>10.1} ms {:>6.1}%  {} trial(s)",
                        name, c.ms, c.share, c.trials
                    ));
                }
                if w.unnamed_ms > 0.0 {
                    out.push(format!(
                        "    {:<36} {:>10.1} ms {:>6.1}%",
                        "(others, not named)",
                        w.unnamed_ms,
                        if w.runnable_ms > 0.0 {
                            w.unnamed_ms * 100.0 / w.runnable_ms
                        } else {
                            0.0
                        }
                    ));
                }
            }
        }
        if !self.latency.is_empty() {
            out.push(
                "Latency monitor per CPU (mean over trials of each trial's figure, us):".into(),
            );
            for c in &self.latency {
                let cells: Vec<String> = c
                    .cpus
                    .iter()
                    .map(|(cpu, max, p99)| {
                        format!("cpu{cpu} lat-max-us {max:.0} lat-p99-us {p99:.0}")
                    })
                    .collect();
                out.push(format!("  {}: {}", c.column, cells.join("; ")));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testing::trial;
    use serde_json::json;

    fn traced(config: &str, k: u32, tasks: serde_json::Value) -> TrialRecord {
        trial(config, k, |v| {
            v["player"]["events"] = json!([]);
            v["monitor"] = json!({
                "priority": 99, "interval_us": 1000, "threshold_us": 1000,
                "mlock": "locked",
                "cpus": [{ "cpu": 1, "tid": 9, "latency": {
                    "unit": "us", "count": 10, "min": 1, "p0_1": 1, "p1": 1, "p50": 5,
                    "p99": 40, "max": 300, "mean": 6.0, "buckets": [] } }],
                "overall": { "unit": "us", "count": 10, "min": 1, "p0_1": 1, "p1": 1,
                    "p50": 5, "p99": 40, "max": 300, "mean": 6.0, "buckets": [] },
                "spikes": [],
                "trace": { "state": "on", "events": 100, "lost": 0 },
                "underruns": [{ "event": 0, "at_s": 1.0, "clause": "c", "account": {
                    "tid": 7, "cpu": 1, "off_mono_ns": 0, "runnable_mono_ns": 1,
                    "ran_mono_ns": 2, "runnable_ms": 10.0, "not_runnable_ms": 1.0,
                    "tasks": tasks, "others_ms": 0.0, "complete": true } }]
            });
        })
    }

    #[test]
    fn culprits_are_summed_by_name_across_trials_largest_first() {
        let a = traced(
            "x",
            1,
            json!([{ "comm": "hackbench", "pid": 100, "prio": 120, "policy": "SCHED_OTHER", "ms": 8.0 },
                   { "comm": "kworker/1:2", "pid": 5, "prio": 120, "policy": "SCHED_OTHER", "ms": 2.0 }]),
        );
        let b = traced(
            "x",
            2,
            json!([{ "comm": "hackbench", "pid": 200, "prio": 120, "policy": "SCHED_OTHER", "ms": 9.0 }]),
        );
        let mut s = Sections::default();
        of_column("x", &[&a, &b], &mut s);
        let w = &s.waiting[0];
        assert_eq!((w.accounted, w.runnable_ms), (2, 20.0));
        assert_eq!(w.tasks[0].comm, "hackbench");
        assert_eq!(
            (w.tasks[0].ms, w.tasks[0].share, w.tasks[0].trials),
            (17.0, 85.0, 2)
        );
        assert_eq!(w.tasks[1].comm, "kworker/1:2");
        assert_eq!(s.latency[0].cpus, vec![(1, 300.0, 40.0)]);
        for l in s.lines() {
            assert!(l.len() <= 80 && l.is_ascii(), "{l}");
        }
    }

    #[test]
    fn no_monitor_no_section() {
        let a = trial("x", 1, |_| {});
        let mut s = Sections::default();
        of_column("x", &[&a], &mut s);
        assert!(s.is_empty());
    }
}
