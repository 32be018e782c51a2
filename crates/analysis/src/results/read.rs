//! Reading a run directory back: `run.json` for the configuration order,
//! label, scenario and machine, `trials/<stem>.json` for the measurements,
//! and the run's log. Every document is checked as it is read
//! ([`super::check`]); every problem is one line naming the file.

use std::path::{Path, PathBuf};

use xrunbench_schema::metrics::playback_seconds;
use xrunbench_schema::trial::{TrialRecord, TRIAL_SCHEMA};

use super::check::{check_record_text, read_doc, read_text, LoadError};
use super::layout;
use super::log::{LogEntry, LostTrial, LOST_SCHEMA};
use super::manifest::{RunManifest, RUN_SCHEMA};

/// One run directory as read from disk.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// Where it is.
    pub path: PathBuf,
    /// `run.json`, when the directory has one.
    pub manifest: Option<RunManifest>,
    /// `--label` of the run, else the directory's name.
    pub label: String,
    /// Scenario name.
    pub scenario: String,
    /// Trial length, s (from the scenario; else from the reports).
    pub trial_seconds: f64,
    /// CPU model × count, if `run.json` says.
    pub machine: Option<String>,
    /// Configurations with measured trials, in scenario order.
    pub configs: Vec<String>,
    /// Every measured trial record (outcome `ran`), by file name.
    pub records: Vec<TrialRecord>,
    /// Each file under a measurement's name that does not read as one:
    /// one line why. It is left out, and the rest still read.
    pub unreadable: Vec<String>,
}

impl RunDir {
    /// Says on stderr, one line each, which trial files were left out and
    /// why (what reads still serves the table and the plots).
    pub fn name_unreadable(&self) {
        for line in &self.unreadable {
            xrunbench_lab::say!(": {line}: left out");
        }
    }

    /// Reads `dir` for a table or a verdict: a directory without measured
    /// trials is an error (there is nothing to compare), as is one that
    /// does not pass [`RunDir::read`].
    pub fn load(dir: &Path) -> Result<RunDir, LoadError> {
        let run = RunDir::read(dir)?;
        if let (true, Some(first)) = (run.records.is_empty(), run.unreadable.first()) {
            return Err(LoadError(format!(
                "{}: no trial record reads ({} refused, the first: {first})",
                layout::trials_dir(dir).display(),
                run.unreadable.len()
            )));
        }
        if run.records.is_empty() {
            return Err(LoadError(format!(
                "{}: no trial records (expected trials/<config>-<k>.json): did the run finish a trial?",
                layout::trials_dir(dir).display()
            )));
        }
        Ok(run)
    }

    /// Reads `dir` whatever it holds so far (a run that finished no trial
    /// included): `run.json` if there is one, and every measured trial; a
    /// trial file that does not read is left out and said in
    /// [`RunDir::unreadable`] (one bad trial does not cost the others).
    pub fn read(dir: &Path) -> Result<RunDir, LoadError> {
        let trials_dir = layout::trials_dir(dir);
        if !trials_dir.is_dir() {
            return Err(LoadError(format!(
                "{}: not a run directory: expected a trials/ directory \
                 (results/<scenario>/<timestamp>/trials/*.json)",
                dir.display()
            )));
        }
        let (records, unreadable) = read_measured(&trials_dir)?;
        let manifest = read_manifest(dir)?;
        let label = manifest
            .as_ref()
            .and_then(|m| m.label.clone())
            .unwrap_or_else(|| dir_name(dir));
        let mut configs: Vec<String> = planned_configs(manifest.as_ref());
        // Configurations with trials but not in run.json (or no run.json):
        // append in name order so the table is still complete.
        let mut extra: Vec<String> = records
            .iter()
            .map(|r| r.trial.config.clone())
            .filter(|c| !configs.contains(c))
            .collect();
        extra.sort();
        extra.dedup();
        configs.extend(extra);
        configs.retain(|c| records.iter().any(|r| &r.trial.config == c));
        let scenario = match (records.first(), &manifest) {
            (Some(r), _) => r.trial.scenario.clone(),
            (None, Some(m)) => m.scenario.name.clone(),
            (None, None) => dir_name(dir),
        };
        let trial_seconds = match (&manifest, records.first()) {
            (Some(m), _) => m.scenario.duration.as_secs_f64(),
            (None, Some(r)) => playback_seconds(r),
            (None, None) => 0.0,
        };
        let machine = manifest.as_ref().map(|m| {
            format!(
                "{} x {} CPUs",
                m.fingerprint.cpu_model, m.fingerprint.cpu_count
            )
        });
        Ok(RunDir {
            path: dir.to_path_buf(),
            manifest,
            label,
            scenario,
            trial_seconds,
            machine,
            configs,
            records,
            unreadable,
        })
    }

    /// This run with `more`'s measured trials added: one sample of the
    /// same configurations measured in several runs (a confirmation's
    /// looks). The label, manifest and path stay this run's.
    pub fn with_trials_of(mut self, more: RunDir) -> RunDir {
        for c in more.configs {
            if !self.configs.contains(&c) {
                self.configs.push(c);
            }
        }
        self.records.extend(more.records);
        self.unreadable.extend(more.unreadable);
        self
    }

    /// Where its `run.json` is (or would be).
    pub fn manifest_path(&self) -> PathBuf {
        self.path.join(layout::MANIFEST)
    }

    /// This configuration's records, in trial order.
    pub fn trials_of(&self, config: &str) -> Vec<&TrialRecord> {
        let mut v: Vec<&TrialRecord> = self
            .records
            .iter()
            .filter(|r| r.trial.config == config)
            .collect();
        v.sort_by_key(|r| r.trial.k);
        v
    }

    /// Every configuration the run planned, in scenario order (those with
    /// no measured trial included); without `run.json`, [`RunDir::configs`].
    pub fn planned_configs(&self) -> Vec<String> {
        match &self.manifest {
            Some(_) => planned_configs(self.manifest.as_ref()),
            None => self.configs.clone(),
        }
    }

    /// The sinks the player reported (`backend (device)`), each once, in
    /// the order the records show them.
    pub fn sinks(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in self.records.iter().filter_map(TrialRecord::measured) {
            let s = format!("{} ({})", p.params.backend, p.params.device);
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// The run's log: every trial that failed, was interrupted or was
    /// lost, in run order.
    pub fn read_log(&self) -> Result<Vec<LogEntry>, LoadError> {
        let mut entries = Vec::new();
        for p in trial_files(&layout::trials_dir(&self.path), layout::is_log_entry_name)? {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            let entry = if name.ends_with(".lost.json") {
                LogEntry::Lost(read_doc::<LostTrial>(&p, LOST_SCHEMA, "lost-trial entry")?)
            } else {
                let r: TrialRecord = read_doc(&p, TRIAL_SCHEMA, "trial record")?;
                if r.measured().is_some() {
                    return Err(LoadError(format!(
                        "{}: outcome `ran` in the run's log: expected a trial that failed or \
                         was interrupted (a measurement is kept as {}.json)",
                        p.display(),
                        r.trial.stem()
                    )));
                }
                LogEntry::Record(Box::new(r))
            };
            entries.push(entry);
        }
        entries.sort_by_key(|e| e.trial().seq);
        Ok(entries)
    }
}

fn planned_configs(manifest: Option<&RunManifest>) -> Vec<String> {
    manifest
        .map(|m| m.scenario.configs.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default()
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// `run.json`, if the directory has one.
fn read_manifest(dir: &Path) -> Result<Option<RunManifest>, LoadError> {
    let p = dir.join(layout::MANIFEST);
    if !p.exists() {
        return Ok(None);
    }
    read_doc(&p, RUN_SCHEMA, "run manifest").map(Some)
}

/// The files of `trials/` whose names pass `keep`, sorted.
fn trial_files(dir: &Path, keep: fn(&str) -> bool) -> Result<Vec<PathBuf>, LoadError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| LoadError(format!("{}: cannot list: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| keep(&n))
        })
        .collect();
    paths.sort();
    Ok(paths)
}

/// Every measured record in `trials/`, and one line for each file under a
/// measurement's name that does not read as one. A file whose trial did
/// not run to the end does not count (it is a log entry under the wrong
/// name), but it must still parse.
fn read_measured(dir: &Path) -> Result<(Vec<TrialRecord>, Vec<String>), LoadError> {
    let mut out = Vec::new();
    let mut unreadable = Vec::new();
    for p in trial_files(dir, layout::is_measured_record_name)? {
        match read_text(&p).and_then(|text| check_record_text(&p, &text)) {
            Ok(r) if r.measured().is_some() => out.push(r),
            Ok(_) => {}
            Err(e) => unreadable.push(e.0),
        }
    }
    Ok((out, unreadable))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{json, Value};

    use super::*;
    use crate::results::testing::{manifest, trial, write_run};
    use crate::results::{Outcome, RunWriter, RunnerInfo};
    use xrunbench_scenario::{self as scenario, plan};

    #[test]
    fn a_manifest_reads_back_as_written() {
        let text = "name = \"rt\"\ntrials = 2\nduration = \"300ms\"\n\
                    [audio]\ngenerate = {}\n[load]\nhackbench = { groups = 1 }\n\
                    [[config]]\nname = \"a\"\nsysctl = { \"kernel.sched_autogroup_enabled\" = 0 }\n\
                    sched_features = [\"NO_PLACE_LAG\"]\npm_qos_cpu_dma_latency_us = 0\n\
                    [[config]]\nname = \"b\"\nload = \"none\"\n\
                    [config.audio]\nbackend = \"cpal\"\nhost = \"jack\"\npriority = \"fifo:80\"\ncpu = \"0-1\"\n";
        let p = Path::new("rt.toml");
        let file = scenario::parse(p, text).unwrap();
        let resolved = scenario::resolve(p, &file).unwrap();
        let names = ["a".to_string(), "b".to_string()];
        let m = RunManifest {
            schema: RUN_SCHEMA.into(),
            started_at: "2026-11-30T23:47:05Z".into(),
            label: Some("x".into()),
            target: "local".into(),
            plan: plan::make_plan(&names, 2, resolved.order),
            scenario_file: file,
            scenario: resolved,
            skipped: vec!["c: expects kernel 9.9".into()],
            fingerprint: manifest(&[]).fingerprint,
            runner: RunnerInfo::here(),
            outcome: Some(Outcome::Interrupted { signal: 2 }),
        };
        let root = tempfile::tempdir().unwrap();
        let dir = write_run(root.path(), &m, &[]);
        let read = RunDir::read(&dir).unwrap();
        let back = read.manifest.as_ref().unwrap();
        assert_eq!(
            serde_json::to_value(back).unwrap(),
            serde_json::to_value(&m).unwrap()
        );
        assert_eq!(read.planned_configs(), ["a", "b"]);
        assert_eq!((read.label.as_str(), read.trial_seconds), ("x", 0.3));
        // Nothing measured yet: readable, but nothing to compare.
        assert!(read.records.is_empty());
        let e = RunDir::load(&dir).unwrap_err().0;
        assert!(e.contains("no trial records"), "{e}");
    }

    /// Writes a run of `a-1` (good) and `a-2` edited by `edit`, and returns
    /// why `a-2` is refused: the run still reads, with `a-1` alone.
    fn error_with(edit: impl FnOnce(&mut Value)) -> String {
        let root = tempfile::tempdir().unwrap();
        let good = trial("a", 1, |_| {});
        let dir = write_run(root.path(), &manifest(&["a"]), std::slice::from_ref(&good));
        let mut bad = serde_json::to_value(trial("a", 2, |_| {})).unwrap();
        edit(&mut bad);
        std::fs::write(dir.join("trials/a-2.json"), bad.to_string()).unwrap();
        let run = RunDir::load(&dir).unwrap();
        assert_eq!(run.records, [good]);
        let [e] = &run.unreadable[..] else {
            panic!("{:?}", run.unreadable)
        };
        assert_eq!(e.lines().count(), 1, "{e}");
        e.clone()
    }

    #[test]
    fn a_bad_number_is_one_line_naming_file_field_and_value() {
        let cases: [(&str, Value, &str); 8] = [
            (
                "/player/wall_seconds",
                json!(-1.0),
                "player.wall_seconds = -1: expected a duration in s",
            ),
            (
                "/player/wall_seconds",
                json!(1e308),
                "player.wall_seconds = 1e308: expected a duration in s",
            ),
            (
                "/player/events/0/gap_ms",
                json!(-5.5),
                "player.events[0].gap_ms = -5.5: expected a duration in ms",
            ),
            (
                "/player/totals/gap_ms_max",
                json!(1e300),
                "player.totals.gap_ms_max = 1e300",
            ),
            (
                "/player/process/cpu_sys_ms",
                json!(-0.5),
                "player.process.cpu_sys_ms = -0.5",
            ),
            (
                "/player/fill/mean",
                json!(-1),
                "player.fill.mean = -1: expected a duration in us",
            ),
            (
                "/player/totals/per_minute",
                json!(1e308),
                "player.totals.per_minute = 1e308: expected underruns per minute of playback, \
                 totals.count 100 x 60 / wall_seconds 12.988501027 = 461.94707053011194",
            ),
            (
                "/player/totals/per_minute",
                json!(-461.94707053011194),
                "player.totals.per_minute = -461.9",
            ),
        ];
        for (pointer, value, want) in cases {
            let e = error_with(|v| *v.pointer_mut(pointer).unwrap() = value);
            assert!(
                e.contains("trials/a-2.json: ") && e.contains(want),
                "{pointer}: {e}"
            );
        }
        // A count below 0 is not even a count.
        let e = error_with(|v| v["player"]["fill"]["count"] = json!(-1));
        assert!(
            e.contains(
                "a-2.json: not a valid xrunbench.trial/1 trial record: invalid value: integer `-1`"
            ),
            "{e}"
        );
    }

    #[test]
    fn kept_rounds_that_disagree_with_their_counts_are_refused() {
        let e = error_with(|v| {
            v["load"]["rounds_completed"] = json!(10);
            v["load"]["rounds_kept_every"] = json!(4);
            v["load"]["rounds_us_total"] = json!(50_000_000);
        });
        assert!(
            e.contains("trials/a-2.json: load.rounds_us holds ")
                && e.contains("every 4th of 10 completed"),
            "{e}"
        );
        let e = error_with(|v| v["load"]["rounds_kept_every"] = json!(3));
        assert!(
            e.contains("load.rounds_kept_every is 3: expected a power of two"),
            "{e}"
        );
    }

    #[test]
    fn load_rounds_that_overflow_a_sum_are_refused() {
        let e = error_with(|v| v["load"]["rounds_us"] = json!([u64::MAX, 1]));
        assert!(
            e.contains("trials/a-2.json: load.rounds_us sums to more than ")
                && e.contains("expected the round times of one trial in us"),
            "{e}"
        );
    }

    #[test]
    fn unknown_schemas_are_named() {
        let e = error_with(|v| v["player"]["schema"] = json!("xrunbench.player/2"));
        assert!(
            e.ends_with(
                "a-2.json: player.schema is `xrunbench.player/2`: expected `xrunbench.player/1`"
            ),
            "{e}"
        );
        let e = error_with(|v| v["load"]["schema"] = json!("xrunbench.hackbench/0"));
        assert!(e.contains("load.schema is `xrunbench.hackbench/0`"), "{e}");
        let e = error_with(|v| v["schema"] = json!("xrunbench.trial/2"));
        assert!(
            e.contains("a-2.json: expected schema `xrunbench.trial/1`, found `xrunbench.trial/2`"),
            "{e}"
        );

        let root = tempfile::tempdir().unwrap();
        let dir = write_run(root.path(), &manifest(&["a"]), &[trial("a", 1, |_| {})]);
        let p = dir.join("run.json");
        let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        m["schema"] = json!("xrunbench.run/9");
        std::fs::write(&p, m.to_string()).unwrap();
        let e = RunDir::load(&dir).unwrap_err().0;
        assert!(
            e.ends_with("run.json: expected schema `xrunbench.run/1`, found `xrunbench.run/9`"),
            "{e}"
        );
        m["schema"] = json!("xrunbench.run/1");
        m["plan"] = json!("all of it");
        std::fs::write(&p, m.to_string()).unwrap();
        let e = RunDir::load(&dir).unwrap_err().0;
        assert!(
            e.contains("run.json: not a valid xrunbench.run/1 run manifest: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn a_trial_of_millions_of_empty_strings_is_left_out_naming_the_limit() {
        let root = tempfile::tempdir().unwrap();
        let good = trial("a", 1, |_| {});
        let dir = write_run(root.path(), &manifest(&["a"]), std::slice::from_ref(&good));
        let n = xrunbench_schema::bounded::Limits::DOCUMENT.strings;
        let text = serde_json::to_string(&trial("a", 2, |_| {})).unwrap();
        let huge = xrunbench_test_support::hostile::with_empty_strings(&text, "player_command", n);
        std::fs::write(dir.join("trials/a-2.json"), huge).unwrap();
        let run = RunDir::load(&dir).unwrap();
        assert_eq!(run.records, [good]);
        let [why] = &run.unreadable[..] else {
            panic!("{:?}", run.unreadable)
        };
        assert!(
            why.contains(&format!("a-2.json: more than {n} strings: refused")),
            "{why}"
        );
    }

    #[test]
    fn a_measurement_under_another_trials_name_is_refused() {
        let e = error_with(|v| v["trial"]["k"] = json!(1));
        assert!(e.contains("a-2.json: holds trial `a-1`"), "{e}");
    }

    #[test]
    fn real_records_pass_the_checks() {
        // The template is a record a real run wrote: its rate, durations and
        // schemas are what the checks expect.
        let root = tempfile::tempdir().unwrap();
        let records = [trial("a", 1, |_| {}), trial("a", 2, |_| {})];
        let dir = write_run(root.path(), &manifest(&["a", "b"]), &records);
        let read = RunDir::load(&dir).unwrap();
        assert_eq!(read.records, records);
        assert_eq!(read.configs, ["a"], "only configurations with trials");
        assert_eq!(read.planned_configs(), ["a", "b"]);
        assert_eq!(read.sinks(), ["virtual (virtual)"]);
    }

    #[test]
    fn the_log_reads_typed_and_in_run_order() {
        let root = tempfile::tempdir().unwrap();
        let failed = trial("b", 1, |v| {
            v["trial"]["seq"] = json!(3);
            v["outcome"] = json!({ "status": "failed", "reason": "no device" });
            v["player"] = Value::Null;
        });
        let interrupted = trial("a", 2, |v| {
            v["trial"]["seq"] = json!(4);
            v["outcome"] = json!({ "status": "interrupted", "by": "SIGINT" });
        });
        let dir = write_run(
            root.path(),
            &manifest(&["a", "b"]),
            &[trial("a", 1, |_| {}), failed, interrupted],
        );
        let mut lost_id = trial("b", 2, |_| {}).trial;
        lost_id.seq = 2;
        RunWriter::at(&dir)
            .lost_trial(&LostTrial::new(lost_id, 1, "xrun-trial died".into()))
            .unwrap();
        let run = RunDir::load(&dir).unwrap();
        assert_eq!(run.records.len(), 1, "the log is not measured");
        let log: Vec<(String, String)> = run
            .read_log()
            .unwrap()
            .iter()
            .map(|e| (e.trial().stem(), e.describe()))
            .collect();
        assert_eq!(
            log,
            [
                ("b-2".into(), "lost: xrun-trial died".into()),
                ("b-1".into(), "failed: no device".into()),
                ("a-2".into(), "interrupted by SIGINT".into()),
            ]
        );
        // A measurement filed in the log is a contradiction.
        let ran = serde_json::to_string(&trial("a", 3, |_| {})).unwrap();
        std::fs::write(dir.join("trials/a-3.failed.json"), ran).unwrap();
        let e = run.read_log().unwrap_err().0;
        assert!(
            e.contains("a-3.failed.json: outcome `ran` in the run's log"),
            "{e}"
        );
    }
}
