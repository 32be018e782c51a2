//! A target's hooks: host commands the user writes (`power_cycle`,
//! `deploy`) that drive what we do not — a power switch, a boot, a lab's
//! own tools (`labgrid-client -p PLACE power cycle`, a LAVA job). One
//! runner for all of them: [`Hook::run`] runs one command line with `sh -c`
//! on the host, in its own process group, with a time limit, its output
//! appended to a log file, and tells how it ended as a [`HookOutcome`].

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// After a hook ran past its time limit and was sent SIGTERM, how long it
/// has to end before its process group is killed.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// How a hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// It exited 0.
    Succeeded,
    /// It exited non-zero: the code.
    Failed(i32),
    /// A signal ended it (not one we sent).
    Killed(i32),
    /// It ran past its time limit (the limit) and was stopped (SIGTERM,
    /// then SIGKILL to its whole process group).
    TimedOut(Duration),
    /// We were asked to stop (SIGINT, SIGTERM): it was stopped the same way.
    Interrupted,
    /// It could not be started (no `sh`, the log not writable): one line.
    NotStarted(String),
}

impl HookOutcome {
    /// Whether the hook did its job.
    pub fn succeeded(&self) -> bool {
        *self == HookOutcome::Succeeded
    }

    /// How it ended, for a line like `power_cycle hook failed: …`.
    pub fn describe(&self) -> String {
        match self {
            HookOutcome::Succeeded => "succeeded".into(),
            HookOutcome::Failed(code) => format!("exited {code}"),
            HookOutcome::Killed(sig) => format!("was killed by signal {sig}"),
            HookOutcome::TimedOut(limit) => format!(
                "ran past its {:.1} s limit and was stopped",
                limit.as_secs_f64()
            ),
            HookOutcome::Interrupted => "was stopped: we were asked to stop".into(),
            HookOutcome::NotStarted(why) => format!("could not start: {why}"),
        }
    }
}

/// One hook to run: a command line the user wrote.
#[derive(Debug, Clone, Copy)]
pub struct Hook<'a> {
    /// Its name (`power_cycle`, `deploy`, `expect_kernel`): it heads its
    /// part of the log.
    pub name: &'a str,
    /// One shell command line, run with `sh -c`.
    pub command: &'a str,
    /// Where it runs (`None`: our own working directory).
    pub dir: Option<&'a Path>,
    /// Added to its environment.
    pub env: &'a [(&'a str, &'a str)],
    /// How long it may run; `None`: as long as it takes (a kernel build).
    pub timeout: Option<Duration>,
}

impl Hook<'_> {
    /// Runs it with stdout and stderr appended to `log` (created if
    /// absent). Past its time limit, or when we are asked to stop
    /// (SIGINT/SIGTERM: a terminal's Ctrl-C reaches us, not the hook's own
    /// process group), its process group gets SIGTERM, and SIGKILL
    /// [`KILL_GRACE`] later. Never panics; every way it can end is a
    /// [`HookOutcome`].
    pub fn run(&self, log: &Path) -> HookOutcome {
        self.run_with(log, false).0
    }

    /// As [`Hook::run`], but its stdout is returned instead of logged (a
    /// hook that prints an answer: `expect_kernel`); stderr still goes to
    /// `log`.
    pub fn run_capturing(&self, log: &Path) -> (HookOutcome, String) {
        self.run_with(log, true)
    }

    fn run_with(&self, log: &Path, capture: bool) -> (HookOutcome, String) {
        let mut file = match OpenOptions::new().create(true).append(true).open(log) {
            Ok(f) => f,
            Err(e) => {
                return (
                    HookOutcome::NotStarted(format!("{}: {e}", log.display())),
                    String::new(),
                )
            }
        };
        // The header is best effort: the hook's own output matters more.
        let _ = writeln!(file, "== {} hook: {}", self.name, self.command);
        let (out, err) = match (file.try_clone(), file.try_clone()) {
            (Ok(o), Ok(e)) => (o, e),
            (Err(e), _) | (_, Err(e)) => {
                return (
                    HookOutcome::NotStarted(format!("{}: {e}", log.display())),
                    String::new(),
                )
            }
        };
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(self.command)
            .envs(self.env.iter().copied())
            .stdin(Stdio::null())
            .stdout(if capture { Stdio::piped() } else { out.into() })
            .stderr(err)
            // Its own group: a terminal's Ctrl-C reaches us, not it, and a
            // time-out stops everything it started (ssh, labgrid-client…).
            .process_group(0);
        if let Some(d) = self.dir {
            cmd.current_dir(d);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return (HookOutcome::NotStarted(format!("sh: {e}")), String::new()),
        };
        // Read while it runs: a hook printing more than a pipe holds must
        // not block on us.
        let reader = child.stdout.take().map(|mut o| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut o, &mut s);
                s
            })
        });
        let started = Instant::now();
        let outcome = self.wait(&mut child, started);
        // Whatever the shell left running in its group goes with it.
        kill_group(child.id(), libc::SIGKILL);
        let stdout = reader.and_then(|r| r.join().ok()).unwrap_or_default();
        let _ = writeln!(
            file,
            "== {} hook {} after {:.1} s",
            self.name,
            outcome.describe(),
            started.elapsed().as_secs_f64()
        );
        (outcome, stdout)
    }

    /// Waits for `child`, stopping its group past the limit or on request.
    fn wait(&self, child: &mut std::process::Child, started: Instant) -> HookOutcome {
        let mut term_sent: Option<Instant> = None;
        let mut interrupted = false;
        let stopped = |interrupted: bool| match (interrupted, self.timeout) {
            (false, Some(limit)) => HookOutcome::TimedOut(limit),
            _ => HookOutcome::Interrupted,
        };
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    return match (term_sent, status.code(), status.signal()) {
                        (Some(_), _, _) => stopped(interrupted),
                        (None, Some(0), _) => HookOutcome::Succeeded,
                        (None, Some(code), _) => HookOutcome::Failed(code),
                        (None, None, Some(sig)) => HookOutcome::Killed(sig),
                        (None, None, None) => HookOutcome::Failed(-1),
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    kill_group(child.id(), libc::SIGKILL);
                    let _ = child.wait();
                    return HookOutcome::NotStarted(format!("waiting for it: {e}"));
                }
            }
            match term_sent {
                None if self.timeout.is_some_and(|t| started.elapsed() >= t) => {
                    kill_group(child.id(), libc::SIGTERM);
                    term_sent = Some(Instant::now());
                }
                None if xrunbench_lab::signals::stop_requested().is_some() => {
                    kill_group(child.id(), libc::SIGTERM);
                    term_sent = Some(Instant::now());
                    interrupted = true;
                }
                Some(t) if t.elapsed() >= KILL_GRACE => {
                    kill_group(child.id(), libc::SIGKILL);
                    let _ = child.wait();
                    return stopped(interrupted);
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sends `sig` to the process group led by `pid` (our child's own group).
pub fn kill_group(pid: u32, sig: i32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) on the group of a child we spawned with
        // process_group(0); at worst ESRCH.
        unsafe {
            libc::kill(-pid, sig);
        }
    }
}

/// Waits until no process is left in group `pgid` (what a stopped child
/// started, cleaning up after itself), at most a few minutes.
pub fn wait_group_gone(pgid: u32) {
    let Ok(p) = libc::pid_t::try_from(pgid) else {
        return;
    };
    let end = Instant::now() + Duration::from_secs(180);
    // SAFETY: kill(2) with signal 0 only checks for existence.
    while unsafe { libc::kill(-p, 0) } == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(dir: &tempfile::TempDir) -> std::path::PathBuf {
        dir.path().join("hooks.log")
    }

    fn hook<'a>(
        name: &'a str,
        command: &'a str,
        env: &'a [(&'a str, &'a str)],
        timeout: Duration,
    ) -> Hook<'a> {
        Hook {
            name,
            command,
            dir: None,
            env,
            timeout: Some(timeout),
        }
    }

    #[test]
    fn runs_in_its_directory_and_captures_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_of(&dir);
        std::fs::write(dir.path().join("marker"), "m").unwrap();
        let h = Hook {
            name: "expect_kernel",
            command: "cat marker; echo oops >&2",
            dir: Some(dir.path()),
            env: &[],
            timeout: None,
        };
        let (o, out) = h.run_capturing(&log);
        assert_eq!((o, out.as_str()), (HookOutcome::Succeeded, "m"));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("oops\n") && !text.contains("\nm"), "{text}");
    }

    #[test]
    fn success_and_output_go_to_the_log_with_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_of(&dir);
        let o = hook(
            "deploy",
            "echo out $XRUNBENCH_TEST_VALUE; echo err >&2",
            &[("XRUNBENCH_TEST_VALUE", "42")],
            Duration::from_secs(30),
        )
        .run(&log);
        assert_eq!(o, HookOutcome::Succeeded);
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("== deploy hook: echo out"), "{text}");
        assert!(text.contains("out 42\n"), "{text}");
        assert!(text.contains("err\n"), "{text}");
        assert!(text.contains("== deploy hook succeeded after"), "{text}");
    }

    #[test]
    fn exit_codes_and_signals_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_of(&dir);
        let t = Duration::from_secs(30);
        assert_eq!(
            hook("h", "exit 3", &[], t).run(&log),
            HookOutcome::Failed(3)
        );
        assert_eq!(
            hook("h", "kill -KILL $$", &[], t).run(&log),
            HookOutcome::Killed(libc::SIGKILL)
        );
        assert!(matches!(
            hook("h", "true", &[], t).run(&dir.path().join("no/such/dir/log")),
            HookOutcome::NotStarted(_)
        ));
    }

    #[test]
    fn a_hook_past_its_limit_is_stopped_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_of(&dir);
        let pidfile = dir.path().join("child.pid");
        // A background child that ignores nothing: it must go with the
        // group, not outlive the hook.
        let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let limit = Duration::from_millis(300);
        let o = hook("power_cycle", &cmd, &[], limit).run(&log);
        assert_eq!(o, HookOutcome::TimedOut(limit));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The sleep was in the group: once reaped by init it is gone. Give
        // the reaper a moment rather than a fixed sleep.
        let gone = (0..250).any(|_| {
            // SAFETY: signal 0 only checks the pid exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true);
            if alive {
                std::thread::sleep(Duration::from_millis(20));
            }
            !alive
        });
        assert!(gone, "the hook's background child {pid} outlived it");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("ran past its 0.3 s limit"), "{text}");
    }
}
