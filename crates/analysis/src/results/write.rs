//! Writing a run directory. Every document goes through the schema's
//! [`write_atomic`] (temporary file, fsync, rename; the temporary removed
//! on failure), so an interrupted run never leaves a half-written file and
//! a reader sees the old document or the whole new one.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::Serialize;
use xrunbench_schema::doc::{one_line, utc_stamp, write_atomic};
use xrunbench_schema::trial::{TrialId, TrialOutcome, TrialRecord};

use super::layout;
use super::log::LostTrial;
use super::manifest::RunManifest;

/// A run directory to write into.
#[derive(Debug, Clone)]
pub struct RunWriter {
    dir: PathBuf,
}

impl RunWriter {
    /// Creates a fresh run directory `root/<scenario>/<UTC timestamp>[-<label>]`
    /// (with `trials/`), never reusing one.
    pub fn create(root: &Path, scenario: &str, label: Option<&str>) -> Result<RunWriter> {
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
                    let trials = layout::trials_dir(&dir);
                    fs::create_dir(&trials)
                        .with_context(|| format!("creating {}", trials.display()))?;
                    // Absolute, so that the paths the trials are given and
                    // the one printed at the end do not depend on our cwd.
                    let dir = fs::canonicalize(&dir).unwrap_or(dir);
                    return Ok(RunWriter { dir });
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

    /// An existing run directory (its `trials/` already made).
    pub fn at(dir: &Path) -> RunWriter {
        RunWriter {
            dir: dir.to_path_buf(),
        }
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `run.json` as the run starts. It also sets aside room for the
    /// run's last word: a hidden file as large as this `run.json` will be
    /// with its outcome, which [`RunWriter::final_manifest`] frees first,
    /// so a disk the trials filled still takes how the run ended.
    pub fn manifest(&self, manifest: &RunManifest) -> Result<()> {
        let path = self.dir.join(layout::MANIFEST);
        let text = json_text(&path, manifest)?;
        write_text(&path, &text)?;
        // Best effort: without the room the outcome may still fit.
        let _ = reserve(&self.reserve_path(), text.len() as u64 + OUTCOME_ROOM);
        Ok(())
    }

    /// `run.json` as the run ends, outcome included: the room set aside
    /// freed first; if it still cannot be written, the manifest goes to a
    /// file in the temporary directory (or /dev/shm) and the error says
    /// where, so how the run ended is never lost.
    pub fn final_manifest(&self, manifest: &RunManifest) -> Result<()> {
        let _ = fs::remove_file(self.reserve_path());
        let path = self.dir.join(layout::MANIFEST);
        let text = json_text(&path, manifest)?;
        let Err(e) = write_text(&path, &text) else {
            return Ok(());
        };
        let name = format!(
            "xrunbench-{}-{}.run.json",
            manifest.scenario.name,
            self.dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        for dir in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
            let elsewhere = dir.join(&name);
            if write_text(&elsewhere, &text).is_ok() {
                return Err(e.context(format!(
                    "the run's manifest and outcome are in {} instead",
                    elsewhere.display()
                )));
            }
        }
        Err(e.context("the run's outcome could not be written anywhere"))
    }

    /// The room set aside for the final `run.json`.
    fn reserve_path(&self) -> PathBuf {
        self.dir.join(reserve_name())
    }

    /// Removes what killed writers left in the run directory: temporaries
    /// of atomic writes and a trial's scratch files, whose process is gone.
    pub fn sweep(&self) -> Vec<PathBuf> {
        xrunbench_schema::doc::sweep_dead_temporaries(&self.dir)
    }

    /// A trial record: `trials/<stem>.json` when it is a measurement, else
    /// in the run's log beside it (`.failed.json`, `.interrupted.json`).
    /// Returns where it went.
    ///
    /// The name comes from `id`, the trial as the host planned it; a
    /// record of any other trial is refused (a board must not choose
    /// where its record goes).
    pub fn trial_record(&self, id: &TrialId, record: &TrialRecord) -> Result<PathBuf> {
        anyhow::ensure!(
            &record.trial == id,
            "a record of trial {} is not one of {}: refused",
            record.trial.display_name(),
            id.display_name()
        );
        let path = layout::trials_dir(&self.dir).join(layout::record_file_name(id, record));
        match reason_shown(record) {
            Some(shown) => write_json(&path, &shown)?,
            None => write_json(&path, record)?,
        }
        Ok(path)
    }

    /// A trial that left no record: `trials/<stem>.lost.json`
    /// (`<stem>.attempt<N>.lost.json` for a retry).
    pub fn lost_trial(&self, lost: &LostTrial) -> Result<PathBuf> {
        let path = layout::trials_dir(&self.dir)
            .join(layout::lost_file_name(&lost.trial.stem(), lost.attempt));
        let shown = LostTrial {
            reason: one_line(&lost.reason),
            ..lost.clone()
        };
        write_json(&path, &shown)?;
        Ok(path)
    }

    /// `summary.txt` and `summary.json`.
    pub fn summary<T: Serialize>(&self, text: &str, data: &T) -> Result<()> {
        write_text(&self.dir.join(layout::SUMMARY_TEXT), text)?;
        write_json(&self.dir.join(layout::SUMMARY_JSON), data)
    }

    /// `comparison.<extension>`: the comparison table in one format.
    pub fn comparison(&self, extension: &str, body: &str) -> Result<()> {
        let name = format!("{}.{extension}", layout::COMPARISON);
        write_text(&self.dir.join(name), body)
    }

    /// `plots/<name>`; returns its path.
    pub fn plot(&self, name: &str, svg: &str) -> Result<PathBuf> {
        let dir = self.dir.join(layout::PLOTS);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(name);
        write_text(&path, svg)?;
        Ok(path)
    }
}

/// `record` with its failure's words (a board's) as they are kept: on one
/// line and capped, so that a 50 MB reason is not copied into the run's
/// log, its summary and every later read of them; `None` when there is
/// nothing to change (a measurement, a short reason).
fn reason_shown(record: &TrialRecord) -> Option<TrialRecord> {
    let outcome = match &record.outcome {
        TrialOutcome::Ran => return None,
        TrialOutcome::Failed { reason } => TrialOutcome::Failed {
            reason: one_line(reason),
        },
        TrialOutcome::Interrupted { by } => TrialOutcome::Interrupted { by: one_line(by) },
    };
    (outcome != record.outcome).then(|| TrialRecord {
        outcome,
        ..record.clone()
    })
}

/// The hidden file that holds room for the final `run.json` while a run
/// is under way: a temporary of this process, so that what a SIGKILLed
/// runner leaves is swept ([`RunWriter::sweep`], `cargo xtask restore`).
fn reserve_name() -> String {
    format!(".run.json.reserve.tmp-{}", std::process::id())
}

/// Room for the outcome (an error line) beyond the first `run.json`, and
/// for the filesystem's rounding to blocks.
const OUTCOME_ROOM: u64 = 16 * 1024;

/// Fills `path` with `bytes` real zeros (a sparse file would hold no
/// room); removed again if that fails.
fn reserve(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::io::Write;
    let made = (|| {
        let mut f = fs::File::create(path)?;
        let block = [0u8; 4096];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            f.write_all(&block[..n])?;
            left -= n as u64;
        }
        f.sync_all()
    })();
    if made.is_err() {
        let _ = fs::remove_file(path);
    }
    made
}

/// `value` as pretty JSON with a final newline.
fn json_text<T: Serialize>(path: &Path, value: &T) -> Result<String> {
    let mut text = serde_json::to_string_pretty(value)
        .with_context(|| format!("serializing {}", path.display()))?;
    text.push('\n');
    Ok(text)
}

/// Serializes `value` as pretty JSON (with a final newline) and writes it
/// atomically.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    write_text(path, &json_text(path, value)?)
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    // write_atomic's error names the path already.
    write_atomic(path, text.as_bytes()).map_err(anyhow::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dirs_are_never_reused() {
        let root = tempfile::tempdir().unwrap();
        let a = RunWriter::create(root.path(), "s", Some("x")).unwrap();
        let b = RunWriter::create(root.path(), "s", Some("x")).unwrap();
        assert_ne!(a.dir(), b.dir());
        assert!(a.dir().join("trials").is_dir());
        assert!(a.dir().is_absolute());
    }

    #[test]
    fn room_is_set_aside_for_the_outcome_and_freed_for_it() {
        let root = tempfile::tempdir().unwrap();
        let w = RunWriter::create(root.path(), "s", None).unwrap();
        let mut m = crate::results::testing::manifest(&["a"]);
        w.manifest(&m).unwrap();
        let reserve = w.dir().join(reserve_name());
        let run_json = fs::metadata(w.dir().join("run.json")).unwrap().len();
        assert_eq!(
            fs::metadata(&reserve).unwrap().len(),
            run_json + OUTCOME_ROOM
        );
        m.outcome = Some(crate::results::Outcome::Completed);
        w.final_manifest(&m).unwrap();
        assert!(!reserve.exists());
        let names: Vec<_> = fs::read_dir(w.dir()).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "run.json and trials/ only: {names:?}");
    }

    #[test]
    fn an_outcome_that_cannot_go_into_the_run_dir_goes_elsewhere_and_says_where() {
        let root = tempfile::tempdir().unwrap();
        let w = RunWriter::at(&root.path().join("gone"));
        let mut m = crate::results::testing::manifest(&["a"]);
        m.outcome = Some(crate::results::Outcome::Interrupted { signal: 15 });
        let e = format!("{:#}", w.final_manifest(&m).unwrap_err());
        let (_, rest) = e.split_once(" are in ").expect(&e);
        let elsewhere = PathBuf::from(rest.split(" instead").next().unwrap());
        let back: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&elsewhere).unwrap()).unwrap();
        fs::remove_file(&elsewhere).unwrap();
        assert_eq!(back["outcome"]["signal"], 15, "{e}");
        assert!(e.contains("gone/run.json"), "{e}");
    }

    #[test]
    fn a_failed_write_names_the_file_and_leaves_no_temporary() {
        let root = tempfile::tempdir().unwrap();
        let w = RunWriter::at(&root.path().join("gone"));
        let e = w.comparison("txt", "x").unwrap_err();
        assert!(format!("{e:#}").contains("comparison.txt"), "{e:#}");
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }
}
