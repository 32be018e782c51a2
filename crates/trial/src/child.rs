//! The player and the load as child processes, each in its own session (as
//! if started from its own terminal, which is what the bug reports did and
//! what autogroup keys on), told to stop should we die, and always stopped
//! and reaped: a [`Child`] that is dropped kills its whole process group.

use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Why a child could not be started or waited for.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// Its log could not be created.
    #[error("creating {path}: {source}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// fork/exec failed.
    #[error("starting {name} ({path}): {source}")]
    Spawn {
        /// `xrun-player`, `xrun-hackbench`.
        name: String,
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// waitpid failed.
    #[error("waiting for {name}: {source}")]
    Wait {
        /// The child.
        name: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The CPU time process `pid` has used so far, all its threads (utime +
/// stime of /proc/PID/stat, which the kernel scales to the scheduler's exact
/// runtime); `None` once it is gone or where /proc cannot tell.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: the fields follow its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of proc(5); `rest` starts at field 3.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// A child in its own session and process group, killed (group and all)
/// and reaped when dropped, so no path leaves one behind.
pub struct Child {
    child: std::process::Child,
    name: String,
    reaped: bool,
    log: PathBuf,
}

impl Child {
    /// Starts `bin args…` with stdin from /dev/null and stdout and stderr
    /// into `log`.
    pub fn spawn(bin: &Path, args: &[String], log: &Path, name: &str) -> Result<Child, ChildError> {
        let log_err = |source| ChildError::Log {
            path: log.to_path_buf(),
            source,
        };
        let out = File::create(log).map_err(log_err)?;
        let err = out.try_clone().map_err(log_err)?;
        let parent = std::process::id();
        let mut cmd = Command::new(bin);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: setsid, prctl and getppid are async-signal-safe; nothing
        // else runs in the child between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Its own session (and so process group, pgid = pid): a
                // terminal's Ctrl-C reaches only us, and we stop children
                // in order.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Should we be SIGKILLed, the child is told to stop too.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // We may have died between fork and prctl: then nobody
                // would ever tell it.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::other("parent exited during spawn"));
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| ChildError::Spawn {
            name: name.to_string(),
            path: bin.to_path_buf(),
            source,
        })?;
        Ok(Child {
            child,
            name: name.to_string(),
            reaped: false,
            log: log.to_path_buf(),
        })
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its exit status if it has exited (then whatever it left in its
    /// process group is killed too).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, ChildError> {
        let s = self.child.try_wait().map_err(|source| ChildError::Wait {
            name: self.name.clone(),
            source,
        })?;
        if s.is_some() {
            self.reaped = true;
            self.kill_group(libc::SIGKILL);
        }
        Ok(s)
    }

    fn kill_group(&self, sig: libc::c_int) {
        // SAFETY: plain syscall; ESRCH (group gone) is fine.
        unsafe {
            libc::kill(-(self.child.id() as libc::pid_t), sig);
        }
    }

    /// SIGTERM to the group, `grace` to exit, then SIGKILL; always reaps.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus, ChildError> {
        if let Some(s) = self.try_wait()? {
            return Ok(s);
        }
        self.kill_group(libc::SIGTERM);
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Some(s) = self.try_wait()? {
                return Ok(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill_group(libc::SIGKILL);
        let s = self.child.wait().map_err(|source| ChildError::Wait {
            name: self.name.clone(),
            source,
        })?;
        self.reaped = true;
        Ok(s)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // Give the player a moment to write its report on SIGTERM.
            let _ = self.stop(Duration::from_secs(3));
        }
    }
}

/// Whether a status is "stopped by our SIGTERM" or a clean exit.
pub fn ended_cleanly_or_by_sigterm(status: ExitStatus) -> bool {
    status.success() || status.signal() == Some(libc::SIGTERM)
}
