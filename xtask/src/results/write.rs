//! Writing a run directory. Every document goes through the schema's
//! [`write_atomic`] (temporary file, fsync, rename; the temporary removed
//! on failure), so an interrupted run never leaves a half-written file and
//! a reader sees the old document or the whole new one.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::Serialize;
use xrunbench_schema::doc::{utc_stamp, write_atomic};
use xrunbench_schema::trial::TrialRecord;

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

    /// `run.json`.
    pub fn manifest(&self, manifest: &RunManifest) -> Result<()> {
        write_json(&self.dir.join(layout::MANIFEST), manifest)
    }

    /// A trial record: `trials/<stem>.json` when it is a measurement, else
    /// in the run's log beside it (`.failed.json`, `.interrupted.json`).
    /// Returns where it went.
    pub fn trial_record(&self, record: &TrialRecord) -> Result<PathBuf> {
        let path = layout::trials_dir(&self.dir).join(layout::record_file_name(record));
        write_json(&path, record)?;
        Ok(path)
    }

    /// A trial that left no record: `trials/<stem>.lost.json`
    /// (`<stem>.attempt<N>.lost.json` for a retry).
    pub fn lost_trial(&self, lost: &LostTrial) -> Result<PathBuf> {
        let path = layout::trials_dir(&self.dir)
            .join(layout::lost_file_name(&lost.trial.stem(), lost.attempt));
        write_json(&path, lost)?;
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

/// Serializes `value` as pretty JSON (with a final newline) and writes it
/// atomically.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)
        .with_context(|| format!("serializing {}", path.display()))?;
    text.push('\n');
    write_text(path, &text)
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
    fn a_failed_write_names_the_file_and_leaves_no_temporary() {
        let root = tempfile::tempdir().unwrap();
        let w = RunWriter::at(&root.path().join("gone"));
        let e = w.comparison("txt", "x").unwrap_err();
        assert!(format!("{e:#}").contains("comparison.txt"), "{e:#}");
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }
}
