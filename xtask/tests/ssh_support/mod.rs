//! Helpers of the SSH board tests (`ssh_board.rs`, `ssh_failures.rs`):
//! the test board (`xrunbench_test_support::testboard::TestBoard`, a private sshd on
//! 127.0.0.1), `cargo xtask` in a process group of its own with its output
//! in files, and the board's processes found through its sshd.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use xrunbench_test_support::testboard::TestBoard;

use crate::support;

/// A fresh test board; `extra`: sshd_config lines.
pub fn board(extra: &str) -> TestBoard {
    TestBoard::start_with(extra).expect("the test board (a private sshd) starts")
}

/// `cargo xtask ARGS` running in its own process group (as from a
/// terminal), stdout and stderr in files under `dir`.
pub struct Xtask {
    pub child: Child,
    pub out: PathBuf,
    pub err: PathBuf,
}

impl Xtask {
    pub fn spawn(args: &[&str], dir: &Path) -> Xtask {
        Xtask::spawn_with_bins(args, dir, &support::bin_dir())
    }

    /// [`Xtask::spawn`] with the board binaries from `bins`.
    pub fn spawn_with_bins(args: &[&str], dir: &Path, bins: &Path) -> Xtask {
        let mut cmd = support::xtask();
        cmd.args(args).arg("--bin-dir").arg(bins);
        Xtask::spawn_command(cmd, dir)
    }

    /// Starts `cmd` (an xtask command line, its directory set) in a
    /// process group of its own, its output in files under `dir`.
    pub fn spawn_command(mut cmd: std::process::Command, dir: &Path) -> Xtask {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = dir.join(format!("xtask-{n}.out"));
        let err = dir.join(format!("xtask-{n}.err"));
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("xtask runs");
        Xtask { child, out, err }
    }

    /// Waits up to `secs` for it to end; its exit code (None: still
    /// running then — it is killed, and the test fails on the code).
    pub fn wait(&mut self, secs: u64) -> Option<i32> {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return code(s);
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Both, for assertion messages.
    pub fn output(&self) -> String {
        format!("--- stderr\n{}--- stdout\n{}", self.stderr(), self.stdout())
    }

    /// Sends `sig` to its whole process group (a terminal's Ctrl-C).
    pub fn signal_group(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on the group we created.
        unsafe {
            libc::kill(-(self.child.id() as libc::pid_t), sig);
        }
    }
}

fn code(s: ExitStatus) -> Option<i32> {
    s.code()
}

/// The pid of an `xrun-trial run` the board's sshd started (a trial
/// running on the board), if any.
pub fn trial_on_board(board: &TestBoard) -> Option<u32> {
    board
        .sessions()
        .into_iter()
        .flat_map(|s| support::children_named(s, "xrun-trial run"))
        .next()
}

/// Whether process `pid` still runs `xrun-trial`.
pub fn is_trial(pid: u32) -> bool {
    xrunbench_test_support::procs::cmdline(pid).is_some_and(|c| c.contains("xrun-trial"))
}

/// ssh processes still using this board's key: a control master or a
/// session left behind.
pub fn ssh_left(board: &TestBoard) -> Vec<String> {
    support::processes_mentioning(&board.identity().display().to_string())
}

/// The run directory under `results` (the only one).
pub fn run_dir(results: &Path) -> PathBuf {
    let runs = support::find_named(results, "run.json");
    assert_eq!(runs.len(), 1, "one run in {}", results.display());
    runs[0].parent().unwrap().to_path_buf()
}

/// `trials/` file names of a run, sorted.
pub fn trial_files(run: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run.join("trials"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
