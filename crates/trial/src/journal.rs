//! The promise that every knob goes back. Before anything is written, each
//! knob's state is read and journaled (atomically, in the machine's journal
//! directory); after the trial, and on every way out, it is written back and
//! the journal removed. A journal left by a SIGKILL is replayed by the next
//! `xrun-trial run`, `check` or `restore`.
//!
//! Only one trial may touch knobs at a time on a machine (two would save
//! each other's values and restore the wrong ones), so trials hold a
//! machine-wide lock; holding it also means any journal found belongs to a
//! dead trial.
//!
//! Replay trusts nothing in a journal: every path is checked against its
//! knob kind's root before anything is written (a crafted journal is moved
//! aside untouched), one unreadable journal never stops the others from
//! being replayed, and a journal from another boot is discarded (the reboot
//! already reset its knobs).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use xrunbench_schema::doc::one_line;
use xrunbench_schema::trial::KnobRecord;

use crate::fingerprint::boot_id;
use crate::knobs::{self, KnobError, KnobKind, KnobWrite};
use crate::machine::{KnobRoots, Machine};
use crate::signals::{self, StopReason};

/// Schema of a journal file.
pub const JOURNAL_SCHEMA: &str = "xrunbench.journal/1";

/// A journal: enough to restore without the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalDoc {
    /// Always [`JOURNAL_SCHEMA`].
    pub schema: String,
    /// /proc/sys/kernel/random/boot_id when written: after a reboot the
    /// kernel has reset every knob and the journal must not be replayed.
    pub boot_id: String,
    /// The `xrun-trial` that wrote it.
    pub pid: u32,
    /// Which trial it covers (`<config>-<k>`, or `check`).
    pub trial: String,
    /// When it was written (RFC 3339 UTC).
    pub written_at: String,
    /// Each knob, in the order applied.
    pub entries: Vec<JournalEntry>,
}

/// One knob file in a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalEntry {
    /// Its kind: the root its path must lie under.
    pub kind: KnobKind,
    /// For people.
    pub what: String,
    /// The file.
    pub path: PathBuf,
    /// The value the trial writes.
    pub requested: String,
    /// The state found, which restoring writes back.
    pub restore: String,
    /// For a sched feature: its bare name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
}

impl JournalEntry {
    /// The write that restores this entry.
    fn restoring_write(&self) -> KnobWrite {
        KnobWrite {
            kind: self.kind,
            what: self.what.clone(),
            path: self.path.clone(),
            value: self.restore.clone(),
            feature: self.feature.clone(),
        }
    }
}

/// Why the lock or the journal failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Creating, opening or locking the lock file failed.
    #[error("the machine lock {path}: {source}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A stop was requested while waiting for the lock.
    #[error("stopped ({}) while waiting for the machine lock", .0.describe())]
    Interrupted(StopReason),
    /// The journal could not be written: nothing was changed.
    #[error("cannot write the journal {path}: {source}")]
    Write {
        /// The journal file (or directory).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A knob could not be read, or is not where its kind lives.
    #[error("{0}")]
    Knob(#[from] KnobError),
}

/// The machine-wide lock (flock; released by the kernel if we die).
pub struct MachineLock {
    _file: File,
}

impl MachineLock {
    /// Takes the lock at `path`; when another trial holds it, `waiting` is
    /// told its pid once, and we wait (a stop request ends the wait).
    pub fn acquire(path: &Path, waiting: impl FnOnce(&str)) -> Result<Self, JournalError> {
        let err = |source| JournalError::Lock {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(err)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(err)?;
        if !try_flock(&file).map_err(err)? {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            waiting(holder.trim());
            // Poll rather than block, so that a signal or a closed link
            // still gets us out of the wait.
            while !try_flock(&file).map_err(err)? {
                if let Some(r) = signals::stop_reason() {
                    return Err(JournalError::Interrupted(r));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = write!(file, "{}", std::process::id());
        Ok(MachineLock { _file: file })
    }
}

/// A non-blocking exclusive flock(2); Ok(false) when it is taken.
fn try_flock(file: &File) -> std::io::Result<bool> {
    loop {
        // SAFETY: a valid fd for the life of `file`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

/// One knob through a trial.
#[derive(Debug, Clone)]
struct Entry {
    write: KnobWrite,
    found: String,
    read_back: Option<String>,
    restored: Option<String>,
}

/// The knobs of one trial: read and journaled, then applied; restored when
/// told, or when dropped (error paths and panics).
pub struct Knobs {
    journal: Option<PathBuf>,
    entries: Vec<Entry>,
    restored: bool,
}

/// Tells journals of one process apart.
static SEQ: AtomicU32 = AtomicU32::new(0);

impl Knobs {
    /// Checks every path against its kind's root, reads every knob's state
    /// and journals it. Nothing is written to a knob yet.
    pub fn journal(
        machine: &Machine,
        _lock: &MachineLock,
        trial: &str,
        writes: Vec<KnobWrite>,
    ) -> Result<Knobs, JournalError> {
        let mut entries = Vec::new();
        for w in writes {
            knobs::check_path(&w, &machine.roots)?;
            let found = knobs::state(&w)?;
            entries.push(Entry {
                write: w,
                found,
                read_back: None,
                restored: None,
            });
        }
        let mut me = Knobs {
            journal: None,
            entries,
            restored: false,
        };
        if me.entries.is_empty() {
            return Ok(me);
        }
        let dir = machine
            .journal_dir()
            .map_err(|source| JournalError::Write {
                path: machine
                    .state_dirs
                    .first()
                    .cloned()
                    .unwrap_or_default()
                    .join("journal"),
                source,
            })?;
        let path = dir.join(format!(
            "trial-{}-{}.json",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let doc = JournalDoc {
            schema: JOURNAL_SCHEMA.into(),
            boot_id: boot_id(),
            pid: std::process::id(),
            trial: trial.into(),
            written_at: xrunbench_schema::doc::rfc3339(SystemTime::now()),
            entries: me
                .entries
                .iter()
                .map(|e| JournalEntry {
                    kind: e.write.kind,
                    what: e.write.what.clone(),
                    path: e.write.path.clone(),
                    requested: e.write.value.clone(),
                    restore: e.found.clone(),
                    feature: e.write.feature.clone(),
                })
                .collect(),
        };
        let mut text = serde_json::to_string_pretty(&doc).expect("a journal serializes");
        text.push('\n');
        xrunbench_schema::doc::write_atomic(&path, text.as_bytes()).map_err(|source| {
            JournalError::Write {
                path: path.clone(),
                source,
            }
        })?;
        me.journal = Some(path);
        Ok(me)
    }

    /// Writes every knob in order and reads each back. The first one that
    /// fails (or that the kernel did not keep) is the error; the caller
    /// restores (or drop does).
    pub fn apply(&mut self) -> Result<(), KnobError> {
        for e in &mut self.entries {
            match knobs::write_and_read_back(&e.write) {
                Ok(read) => e.read_back = Some(read),
                Err(err) => {
                    e.read_back = match &err {
                        KnobError::NotKept { read, .. } => Some(read.clone()),
                        _ => None,
                    };
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// How many knob files.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes back every state found (last applied first), reads each, and
    /// removes the journal; if a restore fails the journal stays for
    /// `xrun-trial restore`. Idempotent.
    pub fn restore(&mut self) -> Result<(), String> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let mut failures = Vec::new();
        for e in self.entries.iter_mut().rev() {
            match knobs::write_value(&e.write, &e.found).and_then(|()| knobs::state(&e.write)) {
                Ok(now) => e.restored = Some(now),
                Err(err) => failures.push(err.to_string()),
            }
        }
        if !failures.is_empty() {
            return Err(format!(
                "could not restore {}; journal kept at {} — run `xrun-trial restore` once fixed",
                failures.join("; "),
                self.journal
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ));
        }
        if let Some(j) = &self.journal {
            let _ = fs::remove_file(j);
        }
        Ok(())
    }

    /// Each knob as found, requested, read back and restored.
    pub fn records(&self) -> Vec<KnobRecord> {
        self.entries
            .iter()
            .map(|e| KnobRecord {
                what: e.write.what.clone(),
                path: e.write.path.clone(),
                found: e.found.clone(),
                requested: e.write.value.clone(),
                read_back: e.read_back.clone(),
                restored: e.restored.clone(),
            })
            .collect()
    }
}

impl Drop for Knobs {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            crate::say::say(e);
        }
    }
}

/// What a replay did: one line per journal handled.
#[derive(Debug, Default)]
pub struct ReplayReport {
    /// What happened to each journal (and each orphaned file removed).
    pub lines: Vec<String>,
    /// Journals refused or unreadable (moved aside, nothing written).
    pub rejected: usize,
    /// Valid journals whose knobs could not all be written back (kept).
    pub unrestored: usize,
}

/// Replays every journal left by a dead trial, each on its own: a bad one
/// is reported and moved aside, never blocking the others. Requires the
/// machine lock. Also removes tones and temporary files dead trials left.
pub fn replay_all(machine: &Machine, _lock: &MachineLock) -> ReplayReport {
    let mut report = ReplayReport::default();
    for dir in machine.existing_journal_dirs() {
        let mut files: Vec<PathBuf> = match fs::read_dir(&dir) {
            Ok(it) => it.flatten().map(|e| e.path()).collect(),
            Err(e) => {
                report
                    .lines
                    .push(format!("cannot list {}: {e}", dir.display()));
                continue;
            }
        };
        files.sort();
        for path in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with('.') {
                remove_dead_temp(&path, &name, &mut report);
                continue;
            }
            if !name.ends_with(".json") || path.is_dir() {
                continue;
            }
            replay_one(machine, &dir, &path, &mut report);
        }
    }
    sweep_tones(machine, &mut report);
    report
}

fn replay_one(machine: &Machine, dir: &Path, path: &Path, report: &mut ReplayReport) {
    let doc = match read_journal(path) {
        Ok(doc) => doc,
        Err(why) => {
            report.rejected += 1;
            report.lines.push(move_aside(dir, path, &why));
            return;
        }
    };
    if doc.boot_id != boot_id() {
        let _ = fs::remove_file(path);
        report.lines.push(format!(
            "discarded {} from an earlier boot (the reboot already reset its knobs)",
            path.display()
        ));
        return;
    }
    // Every path is checked before anything is written.
    let writes = match vetted_writes(&doc, &machine.roots) {
        Ok(w) => w,
        Err(why) => {
            report.rejected += 1;
            report.lines.push(move_aside(dir, path, &why));
            return;
        }
    };
    let mut failures = Vec::new();
    for w in writes.iter().rev() {
        if let Err(e) = knobs::write_value(w, &w.value) {
            failures.push(e.to_string());
        }
    }
    if !failures.is_empty() {
        report.unrestored += 1;
        report.lines.push(format!(
            "could not restore from {}: {}; kept it for the next `xrun-trial restore`",
            path.display(),
            failures.join("; ")
        ));
        return;
    }
    let _ = fs::remove_file(path);
    let what: Vec<String> = writes
        .iter()
        .map(|w| format!("{} = {}", w.what, w.value))
        .collect();
    report.lines.push(format!(
        "restored from {} (left by pid {} during {}): {}",
        path.display(),
        doc.pid,
        doc.trial,
        what.join(", ")
    ));
}

/// Reads and parses a journal; the error is one line saying why not.
fn read_journal(path: &Path) -> Result<JournalDoc, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("unreadable: {e}"))?;
    parse_journal(&text)
}

/// The writes that would restore what `doc` journaled, each checked (one
/// line, a file of its kind under its root) before any is written; the
/// error names the first entry that is not to be trusted.
pub fn vetted_writes(doc: &JournalDoc, roots: &KnobRoots) -> Result<Vec<KnobWrite>, String> {
    let writes: Vec<KnobWrite> = doc
        .entries
        .iter()
        .map(JournalEntry::restoring_write)
        .collect();
    for (i, w) in writes.iter().enumerate() {
        if !knobs::is_one_line(&w.value) {
            return Err(format!("entries[{i}].restore is not one line"));
        }
        knobs::check_path(w, roots).map_err(|e| format!("entries[{i}]: {e}"))?;
    }
    Ok(writes)
}

/// Parses a journal's text (schema checked); the error is one line.
pub fn parse_journal(text: &str) -> Result<JournalDoc, String> {
    // The journal's own strings (a field's name, the schema) are quoted in
    // these errors: escaped, so that each stays one line.
    let doc: JournalDoc = serde_json::from_str(text)
        .map_err(|e| format!("not a journal ({})", one_line(&e.to_string())))?;
    if doc.schema != JOURNAL_SCHEMA {
        return Err(format!(
            "schema `{}`, expected `{JOURNAL_SCHEMA}`",
            one_line(&doc.schema)
        ));
    }
    Ok(doc)
}

/// Moves a journal that cannot be trusted to `<dir>/rejected/` (kept for
/// a human, out of the replay's way); returns the line that says so.
fn move_aside(dir: &Path, path: &Path, why: &str) -> String {
    let aside = dir.join("rejected");
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut dest = aside.join(&*name);
    for n in 1.. {
        if !dest.exists() {
            break;
        }
        dest = aside.join(format!("{name}.{n}"));
    }
    let moved = fs::create_dir_all(&aside).and_then(|()| fs::rename(path, &dest));
    match moved {
        Ok(()) => format!(
            "refused journal {}: {why}; nothing written, moved to {}",
            path.display(),
            dest.display()
        ),
        Err(e) => {
            // It must not block every later replay: remove it instead.
            let _ = fs::remove_file(path);
            format!(
                "refused journal {}: {why}; nothing written, removed (moving it aside failed: {e})",
                path.display()
            )
        }
    }
}

/// Whether a process with this pid runs. A zombie does not: a SIGKILLed
/// trial whose parent died too may wait a long time for a reaper (in a
/// container, PID 1 often reaps nobody).
fn alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) else {
        return false;
    };
    // `pid (comm) STATE …`: the comm may hold anything, so read after ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}

/// Removes `.NAME.tmp-PID` files an atomic write of a dead process left.
fn remove_dead_temp(path: &Path, name: &str, report: &mut ReplayReport) {
    let pid = name
        .rsplit_once(".tmp-")
        .and_then(|(_, p)| p.parse::<u32>().ok());
    if let Some(pid) = pid {
        if !alive(pid) && fs::remove_file(path).is_ok() {
            report.lines.push(format!(
                "removed {}, a half-written journal of a killed trial",
                path.display()
            ));
        }
    }
}

/// The name a trial's generated tone gets in tmpfs.
pub fn tone_name(pid: u32) -> String {
    format!("xrunbench-{pid}-tone.wav")
}

/// Removes generated tones (`xrunbench-<pid>-….wav`) left in tmpfs by
/// trials that were SIGKILLed (their pid is gone). Called under the
/// machine lock, so no live trial owns them.
fn sweep_tones(machine: &Machine, report: &mut ReplayReport) {
    let Ok(entries) = fs::read_dir(&machine.tmpfs) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("xrunbench-")
            .filter(|_| name.ends_with(".wav"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !alive(pid) && fs::remove_file(e.path()).is_ok() {
            report.lines.push(format!(
                "removed {} left by a killed trial",
                e.path().display()
            ));
        }
    }
}
