//! The promise that every knob goes back: values are read and journaled
//! (atomically, in the run directory) before anything changes, restored
//! after each trial and on every way out, and a journal left behind by a
//! SIGKILL is replayed by the next `cargo xtask run` or `cargo xtask restore`.
//!
//! Only one run may touch knobs at a time on a machine (two would save each
//! other's values and restore the wrong ones), so runs hold a machine-wide
//! lock; holding it also means any journal found belongs to a dead run.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::knobs::{self, PmQosHold, Saved, SysPaths};
use super::scenario::Config;
use super::store::write_json;

/// Schema of the journal file.
pub const JOURNAL_SCHEMA: &str = "xrunbench.journal/1";
/// Name of the journal in a run directory.
pub const JOURNAL_NAME: &str = "journal.json";

/// What the journal records: enough to restore without the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalDoc {
    /// Always [`JOURNAL_SCHEMA`].
    pub schema: String,
    /// /proc/sys/kernel/random/boot_id when written: after a reboot the
    /// kernel has reset every knob and the journal must not be replayed.
    pub boot_id: String,
    /// The runner that wrote it.
    pub pid: u32,
    /// Which trial it covers.
    pub trial: String,
    /// Each knob, with the value to restore, in the order applied.
    pub entries: Vec<Saved>,
}

/// Where the machine-wide lock and the pointers to live journals live
/// (tmpfs: cleared by a reboot, exactly like the knobs themselves).
pub fn state_dir() -> PathBuf {
    if crate::util::is_root() {
        return PathBuf::from("/run/xrunbench");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("xrunbench"),
        // SAFETY: getuid cannot fail.
        None => std::env::temp_dir().join(format!("xrunbench-{}", unsafe { libc::getuid() })),
    }
}

fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The machine-wide run lock (flock; released by the kernel if we die).
pub struct MachineLock {
    _file: File,
}

impl MachineLock {
    /// Takes the lock, saying who holds it while waiting.
    pub fn acquire() -> Result<Self> {
        let dir = state_dir();
        fs::create_dir_all(dir.join("pending"))
            .with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        if !flock(&file, libc::LOCK_EX | libc::LOCK_NB)? {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            eprintln!(
                "xtask: waiting for another xrunbench run to finish (pid {}; lock {})",
                holder.trim(),
                path.display()
            );
            // Poll rather than block: our SIGINT handler restarts a blocked
            // flock(2), and Ctrl-C must still get the user out of the wait.
            while !flock(&file, libc::LOCK_EX | libc::LOCK_NB)? {
                if super::signals::stop_requested().is_some() {
                    bail!("interrupted while waiting for the run lock");
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
        file.set_len(0)?;
        file.rewind()?;
        write!(file, "{}", std::process::id())?;
        Ok(MachineLock { _file: file })
    }
}

/// flock(2); Ok(false) when a non-blocking attempt finds it taken.
fn flock(file: &File, op: libc::c_int) -> Result<bool> {
    loop {
        // SAFETY: a valid fd for the life of `file`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(err).context("flock"),
        }
    }
}

/// Pointer file in the state dir naming a live journal (so `restore` finds
/// journals of runs whose results went to a `--results-dir` elsewhere).
fn pointer_for(journal: &Path) -> PathBuf {
    // FNV-1a of the path: a stable, file-name-safe key.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in journal.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
    state_dir().join("pending").join(format!("{h:016x}"))
}

/// Knobs applied for one trial; restores them when told, or when dropped
/// (error paths and panics).
pub struct Applied {
    journal: PathBuf,
    entries: Vec<Saved>,
    done: bool,
    _pm_qos: Option<PmQosHold>,
}

impl Applied {
    /// Reads every knob, journals the values, then applies the new ones.
    /// If any write fails, everything is restored before returning the error.
    pub fn apply(
        config: &Config,
        sys: &SysPaths,
        run_dir: &Path,
        trial: &str,
        _lock: &MachineLock,
    ) -> Result<Self> {
        let mut entries = Vec::new();
        for spec in &config.knobs {
            for w in knobs::expand(spec, sys)? {
                entries.push(knobs::save(&w)?);
            }
        }
        let journal = run_dir.join(JOURNAL_NAME);
        let doc = JournalDoc {
            schema: JOURNAL_SCHEMA.into(),
            boot_id: boot_id(),
            pid: std::process::id(),
            trial: trial.into(),
            entries: entries.clone(),
        };
        if !entries.is_empty() {
            let journal = fs::canonicalize(run_dir)
                .unwrap_or(run_dir.to_path_buf())
                .join(JOURNAL_NAME);
            write_json(&journal, &doc)?;
            fs::write(
                pointer_for(&journal),
                journal.as_os_str().as_encoded_bytes(),
            )
            .context("writing the journal pointer")?;
        }
        let mut applied = Applied {
            journal,
            entries,
            done: false,
            _pm_qos: None,
        };
        for s in &applied.entries {
            // On error `applied` drops here and restores what it read.
            knobs::write_value(&s.write, &s.write.value)?;
        }
        if let Some(us) = config.pm_qos_us {
            applied._pm_qos = Some(PmQosHold::hold(us)?);
        }
        Ok(applied)
    }

    /// What was saved (for the trial record).
    pub fn saved(&self) -> &[Saved] {
        &self.entries
    }

    /// Restores every knob (reverse order) and removes the journal; if a
    /// restore fails the journal stays for `cargo xtask restore`.
    pub fn restore(mut self) -> Result<()> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        self._pm_qos = None;
        let failures = restore_entries(&self.entries);
        if !failures.is_empty() {
            bail!(
                "could not restore {}; journal kept at {} — run `cargo xtask restore` once fixed",
                failures.join("; "),
                self.journal.display()
            );
        }
        remove_journal(&self.journal);
        Ok(())
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if let Err(e) = self.restore_now() {
            eprintln!("xtask: {e:#}");
        }
    }
}

/// Writes back every saved value, last applied first; returns failures.
fn restore_entries(entries: &[Saved]) -> Vec<String> {
    let mut failures = Vec::new();
    for s in entries.iter().rev() {
        if let Err(e) = knobs::write_value(&s.write, &s.restore) {
            failures.push(e.to_string());
        }
    }
    failures
}

fn remove_journal(journal: &Path) {
    let canon = journal
        .parent()
        .and_then(|d| fs::canonicalize(d).ok())
        .map(|d| d.join(JOURNAL_NAME))
        .unwrap_or(journal.to_path_buf());
    let _ = fs::remove_file(pointer_for(&canon));
    let _ = fs::remove_file(journal);
}

/// Replays every journal left by a dead run: those the state dir points to
/// and any under `results_root` (`<scenario>/<run>/journal.json`). Returns
/// one line per journal handled. Requires the machine lock.
pub fn replay_leftovers(results_root: &Path, _lock: &MachineLock) -> Result<Vec<String>> {
    let mut journals: Vec<PathBuf> = Vec::new();
    if let Ok(entries) = fs::read_dir(state_dir().join("pending")) {
        for e in entries.flatten() {
            match fs::read(e.path()) {
                Ok(bytes) => {
                    let p = PathBuf::from(String::from_utf8_lossy(&bytes).into_owned());
                    if p.exists() {
                        journals.push(p);
                    } else {
                        // Its run directory was deleted: nothing left to replay.
                        let _ = fs::remove_file(e.path());
                    }
                }
                Err(_) => continue,
            }
        }
    }
    for scenario in read_dirs(results_root) {
        for run in read_dirs(&scenario) {
            let j = run.join(JOURNAL_NAME);
            if j.exists() {
                journals.push(fs::canonicalize(&j).unwrap_or(j));
            }
        }
    }
    journals.sort();
    journals.dedup();
    let mut lines = Vec::new();
    for j in journals {
        lines.push(replay(&j)?);
    }
    Ok(lines)
}

fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// Replays one journal; the line says what happened.
pub fn replay(journal: &Path) -> Result<String> {
    let text =
        fs::read_to_string(journal).with_context(|| format!("reading {}", journal.display()))?;
    let doc: JournalDoc = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a journal this version understands",
            journal.display()
        )
    })?;
    if doc.schema != JOURNAL_SCHEMA {
        bail!(
            "{}: schema `{}`, expected `{JOURNAL_SCHEMA}`",
            journal.display(),
            doc.schema
        );
    }
    if doc.boot_id != boot_id() {
        remove_journal(journal);
        return Ok(format!(
            "discarded {} from an earlier boot (a reboot already reset its knobs)",
            journal.display()
        ));
    }
    let failures = restore_entries(&doc.entries);
    if !failures.is_empty() {
        bail!(
            "replaying {}: could not restore {}",
            journal.display(),
            failures.join("; ")
        );
    }
    remove_journal(journal);
    let what: Vec<String> = doc
        .entries
        .iter()
        .map(|s| format!("{} = {}", s.write.what, s.restore))
        .collect();
    Ok(format!(
        "restored from {} (left by pid {} during {}): {}",
        journal.display(),
        doc.pid,
        doc.trial,
        what.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::knobs::KnobWrite;

    #[test]
    fn replay_writes_back_saved_values_and_removes_the_journal() {
        let d = tempfile::tempdir().unwrap();
        let knob = d.path().join("knob");
        fs::write(&knob, "changed\n").unwrap();
        let doc = JournalDoc {
            schema: JOURNAL_SCHEMA.into(),
            boot_id: boot_id(),
            pid: 1,
            trial: "a#1".into(),
            entries: vec![Saved {
                write: KnobWrite {
                    what: "test knob".into(),
                    path: knob.clone(),
                    value: "changed".into(),
                    feature: None,
                },
                restore: "original".into(),
            }],
        };
        let j = d.path().join(JOURNAL_NAME);
        write_json(&j, &doc).unwrap();
        let line = replay(&j).unwrap();
        assert!(line.contains("test knob = original"), "{line}");
        assert_eq!(fs::read_to_string(&knob).unwrap(), "original\n");
        assert!(!j.exists());
    }

    #[test]
    fn journal_from_another_boot_is_discarded_untouched() {
        let d = tempfile::tempdir().unwrap();
        let knob = d.path().join("knob");
        fs::write(&knob, "now\n").unwrap();
        let doc = JournalDoc {
            schema: JOURNAL_SCHEMA.into(),
            boot_id: "another-boot".into(),
            pid: 1,
            trial: "a#1".into(),
            entries: vec![Saved {
                write: KnobWrite {
                    what: "k".into(),
                    path: knob.clone(),
                    value: "x".into(),
                    feature: None,
                },
                restore: "old".into(),
            }],
        };
        let j = d.path().join(JOURNAL_NAME);
        write_json(&j, &doc).unwrap();
        assert!(replay(&j).unwrap().contains("earlier boot"));
        assert_eq!(fs::read_to_string(&knob).unwrap(), "now\n");
        assert!(!j.exists());
    }

    #[test]
    fn garbage_journal_is_an_error_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        let j = d.path().join(JOURNAL_NAME);
        fs::write(&j, "{not json").unwrap();
        assert!(replay(&j).is_err());
        assert!(j.exists(), "an unreadable journal is kept for a human");
    }
}
