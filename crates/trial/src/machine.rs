//! Where things are on the machine under test: the knob kinds' roots, the
//! journal directory, the machine-wide lock, the tmpfs for tones.
//!
//! Tests run trials against a private tree (`--test-root DIR`: a fake
//! `/proc/sys`, debugfs and cpufreq under DIR). Such a [`Machine`] keeps its
//! journals under DIR too and accepts only paths under DIR's roots, so a
//! test can never make a real journal point at arbitrary files, and a real
//! journal can never name a file outside the real roots. The lock is the
//! same machine-wide file in both cases: concurrent trials, test or not,
//! exclude each other.

use std::path::{Path, PathBuf};

/// Roots of the files each kind of knob lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnobRoots {
    /// `/proc/sys`: sysctls.
    pub proc_sys: PathBuf,
    /// `/sys/kernel/debug/sched`: `features` and the other scheduler debug files.
    pub sched_debug: PathBuf,
    /// `/sys/devices/system/cpu`: cpufreq governors.
    pub cpu: PathBuf,
    /// `/dev/cpu_dma_latency`: the PM-QoS request.
    pub pm_qos: PathBuf,
}

impl KnobRoots {
    /// The real ones.
    pub fn real() -> Self {
        Self::under(Path::new("/"))
    }

    /// The same layout under `dir`.
    pub fn under(dir: &Path) -> Self {
        KnobRoots {
            proc_sys: dir.join("proc/sys"),
            sched_debug: dir.join("sys/kernel/debug/sched"),
            cpu: dir.join("sys/devices/system/cpu"),
            pm_qos: dir.join("dev/cpu_dma_latency"),
        }
    }
}

/// The machine under test, as `xrun-trial` sees it.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Roots of the knob files.
    pub roots: KnobRoots,
    /// Directories that may hold journals, the preferred one first.
    pub state_dirs: Vec<PathBuf>,
    /// The machine-wide lock (one place for every trial, tests included).
    pub lock_path: PathBuf,
    /// Where generated tones go.
    pub tmpfs: PathBuf,
    /// `--test-root`, when the knobs are a private tree.
    pub test_root: Option<PathBuf>,
}

impl Machine {
    /// This machine, its real knobs and its real journal directory.
    pub fn real() -> Self {
        Machine {
            roots: KnobRoots::real(),
            state_dirs: real_state_dirs(),
            lock_path: lock_path(),
            tmpfs: tmpfs_dir(),
            test_root: None,
        }
    }

    /// Knobs under `dir` (a test's fake tree), journals in `dir/state`, and
    /// the machine's real lock.
    pub fn test_root(dir: &Path) -> Self {
        Machine {
            roots: KnobRoots::under(dir),
            state_dirs: vec![dir.join("state")],
            lock_path: lock_path(),
            tmpfs: tmpfs_dir(),
            test_root: Some(dir.to_path_buf()),
        }
    }

    /// The directory new journals go to, created if need be: the first
    /// state directory that can be created (a board's read-only root file
    /// system falls back to /run).
    pub fn journal_dir(&self) -> std::io::Result<PathBuf> {
        let mut last = None;
        for dir in &self.state_dirs {
            let j = dir.join("journal");
            match std::fs::create_dir_all(&j) {
                Ok(()) => return Ok(j),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no state directory")))
    }

    /// Every journal directory that exists (replay looks in all of them:
    /// a journal written while /var/lib was read-only is in /run).
    pub fn existing_journal_dirs(&self) -> Vec<PathBuf> {
        self.state_dirs
            .iter()
            .map(|d| d.join("journal"))
            .filter(|j| j.is_dir())
            .collect()
    }
}

/// Whether we run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `/var/lib/xrunbench` for root (fallback `/run/xrunbench`), else
/// `$XDG_STATE_HOME/xrunbench` (or `~/.local/state/xrunbench`), fallback
/// a per-user directory under the temporary directory.
fn real_state_dirs() -> Vec<PathBuf> {
    if is_root() {
        return vec!["/var/lib/xrunbench".into(), "/run/xrunbench".into()];
    }
    let mut dirs = Vec::new();
    match std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(d) => dirs.push(PathBuf::from(d).join("xrunbench")),
        None => {
            if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
                dirs.push(PathBuf::from(home).join(".local/state/xrunbench"));
            }
        }
    }
    dirs.push(std::env::temp_dir().join(format!("xrunbench-{}", uid())));
    dirs
}

/// The lock lives on tmpfs (cleared by a reboot, like the knobs): one file
/// per machine for root, one per user otherwise (a user cannot change the
/// machine's knobs anyway).
fn lock_path() -> PathBuf {
    if is_root() {
        return PathBuf::from("/run/xrunbench/lock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("xrunbench/lock"),
        None => std::env::temp_dir().join(format!("xrunbench-{}/lock", uid())),
    }
}

/// `/dev/shm` where there is one, else the temporary directory.
fn tmpfs_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
