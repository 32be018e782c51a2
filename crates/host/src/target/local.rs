//! This machine: `xrun-trial` from the board binaries' directory, files
//! where they already are.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use xrunbench_schema::probe::Probe;

use super::run::Target;

/// The local machine, with the board binaries in `bin_dir`.
pub struct Local {
    bin_dir: PathBuf,
    trial_timeout: Duration,
}

impl Local {
    /// Uses `xrun-trial`, `xrun-player` and `xrun-hackbench` from
    /// `bin_dir` (they must all be there: `xrun-trial` finds the other two
    /// beside itself); a trial running past `trial_timeout` is stopped
    /// and counted lost.
    pub fn new(bin_dir: &Path, trial_timeout: Duration) -> Result<Local> {
        for b in xrunbench_lab::board::BINARIES {
            let p = bin_dir.join(b.name);
            if !p.is_file() {
                bail!("{} not found", p.display());
            }
        }
        let bin_dir = std::fs::canonicalize(bin_dir)
            .with_context(|| format!("resolving {}", bin_dir.display()))?;
        Ok(Local {
            bin_dir,
            trial_timeout,
        })
    }
}

impl Target for Local {
    fn describe(&self) -> String {
        "local".into()
    }

    fn xrun_trial(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.bin_dir.join("xrun-trial"));
        // Named explicitly rather than found beside xrun-trial's own
        // executable: a wrapper script in bin_dir (tests, a user's own
        // build of one binary) must still bring its siblings along.
        cmd.args(args).arg("--bin-dir").arg(&self.bin_dir);
        cmd
    }

    fn trial_command(&self) -> Command {
        let mut cmd = self.xrun_trial(&["run", "-"]);
        // A group of its own: what a trial that will not stop leaves
        // behind is ended with it (see `signal_trial`), and nothing else.
        cmd.process_group(0);
        cmd
    }

    fn trial_timeout(&self) -> Option<Duration> {
        Some(self.trial_timeout)
    }

    fn signal_trial(&self, pid: u32, hard: bool) {
        // `pid` is always the child we spawned (`spawned_trial_pid`), the
        // leader of its own group: SIGTERM asks it (it restores its knobs
        // and stops its children), SIGKILL ends the whole group.
        if hard {
            super::hooks::kill_group(pid, libc::SIGKILL);
        } else if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) on the child we spawned; at worst ESRCH.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }

    fn stage_audio(&mut self, host_path: &Path, _probe: &Probe) -> Result<PathBuf> {
        std::fs::canonicalize(host_path).with_context(|| format!("{}", host_path.display()))
    }

    fn work_dir(&self, run_dir: &Path) -> Option<PathBuf> {
        Some(run_dir.join("trials"))
    }
}
