//! The results directory: `results/<scenario>/<UTC timestamp>[-<label>]/`.
//! Every document in it is written atomically (the schema's
//! [`write_atomic`]), so an interrupted run never leaves a half-written
//! JSON behind.
//!
//! Only trials that ran to the end are measurements (`trials/<stem>.json`);
//! one that failed, was interrupted or was lost stays in the run's log as
//! `trials/<stem>.failed.json`, `.interrupted.json` or `.lost.json`, and no
//! table or verdict reads it.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use xrunbench_schema::doc::{utc_stamp, write_atomic};
use xrunbench_schema::trial::{TrialId, TrialOutcome, TrialRecord};

/// Serializes `value` as pretty JSON and writes it atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("serializing JSON")?;
    text.push('\n');
    write_atomic(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// The default results root: `<workspace>/results`.
pub fn default_results_root() -> PathBuf {
    crate::util::workspace_root().join("results")
}

/// Creates a fresh run directory (with `trials/`), never reusing one.
pub fn create_run_dir(root: &Path, scenario: &str, label: Option<&str>) -> Result<PathBuf> {
    let stamp = utc_stamp(SystemTime::now());
    let base = match label {
        Some(l) => format!("{stamp}-{l}"),
        None => stamp,
    };
    let parent = root.join(scenario);
    fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    // Two runs in the same second (tests do this) get a suffix.
    for n in 0..100 {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}.{n}")
        };
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => {
                fs::create_dir(dir.join("trials"))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    anyhow::bail!(
        "could not create a fresh run directory under {}",
        parent.display()
    )
}

/// Suffixes of trial files that are not measurements.
const NOT_MEASURED: [&str; 3] = [".failed.json", ".interrupted.json", ".lost.json"];

/// Whether a file in `trials/` is a measured trial record (not a log
/// entry of a failed, interrupted or lost trial, nor a hidden temporary).
pub fn is_measured_record_name(name: &str) -> bool {
    !name.starts_with('.')
        && name.ends_with(".json")
        && !NOT_MEASURED.iter().any(|s| name.ends_with(s))
}

/// Where a trial record goes: `<stem>.json` when it is a measurement,
/// else named by how it ended.
pub fn record_path(trials_dir: &Path, record: &TrialRecord) -> PathBuf {
    let stem = record.trial.stem();
    let suffix = match record.outcome {
        TrialOutcome::Ran => "json",
        TrialOutcome::Failed { .. } => "failed.json",
        TrialOutcome::Interrupted { .. } => "interrupted.json",
    };
    trials_dir.join(format!("{stem}.{suffix}"))
}

/// Schema of [`LostTrial`].
pub const LOST_SCHEMA: &str = "xrunbench.lost-trial/1";

/// `trials/<stem>.lost.json` (`<stem>.attempt<N>.lost.json` for a retry):
/// a trial that left no record (its `xrun-trial` died, the link to it did,
/// or it ran past its timeout).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LostTrial {
    /// Always [`LOST_SCHEMA`].
    pub schema: String,
    /// Which trial.
    pub trial: TrialId,
    /// Which attempt at it (1: the first run).
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// When it was given up (RFC 3339 UTC).
    pub at: String,
    /// Why: one line.
    pub reason: String,
}

fn first_attempt() -> u32 {
    1
}

impl LostTrial {
    /// Attempt `attempt` at a trial, lost now.
    pub fn new(trial: TrialId, attempt: u32, reason: String) -> Self {
        LostTrial {
            schema: LOST_SCHEMA.into(),
            trial,
            attempt,
            at: xrunbench_schema::doc::rfc3339(SystemTime::now()),
            reason,
        }
    }

    /// Its file in `trials/`.
    pub fn path(&self, trials_dir: &Path) -> PathBuf {
        let stem = self.trial.stem();
        trials_dir.join(match self.attempt {
            0 | 1 => format!("{stem}.lost.json"),
            n => format!("{stem}.attempt{n}.lost.json"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dirs_are_never_reused() {
        let root = tempfile::tempdir().unwrap();
        let a = create_run_dir(root.path(), "s", Some("x")).unwrap();
        let b = create_run_dir(root.path(), "s", Some("x")).unwrap();
        assert_ne!(a, b);
        assert!(a.join("trials").is_dir());
    }

    #[test]
    fn only_measurements_are_records() {
        assert!(is_measured_record_name("a-1.json"));
        assert!(is_measured_record_name("x.failed-2.json"));
        for n in [
            "a-1.failed.json",
            "a-1.lost.json",
            "a-1.interrupted.json",
            "a-1.attempt2.lost.json",
            ".a-1.player.json",
        ] {
            assert!(!is_measured_record_name(n), "{n}");
        }
    }
}
