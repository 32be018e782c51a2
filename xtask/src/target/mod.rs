//! Where trials run. The runner never touches a knob or starts a player
//! itself: it talks to `xrun-trial` on the target through a spawned
//! command and its pipes — the spec on stdin (kept open: closing it stops
//! the trial, which then restores itself), progress lines on stderr, the
//! record on stdout. That process I/O is the seam: [`Local`] spawns
//! `xrun-trial` here; [`Ssh`] spawns it through `ssh` on a board (and
//! stages files with its own copy, and reconnects when the link drops),
//! and everything else is shared.

pub mod binaries;
mod local;
pub mod ssh;

pub use local::Local;
pub use ssh::Ssh;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use xrunbench_schema::probe::{CheckReport, Probe, CHECK_SCHEMA, PROBE_SCHEMA};
use xrunbench_schema::trial::{TrialRecord, TrialSpec, TRIAL_SCHEMA};

/// The line a target's trial command prints first on stderr when the pid
/// of `xrun-trial` there is not the pid of the process we spawned (`ssh`):
/// `xrunbench-pid 1234`. It is not shown to people.
pub const PID_MARKER: &str = "xrunbench-pid ";

/// After a trial ran past its timeout and was asked to stop, how long it
/// may take to restore its knobs and exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// What running one trial on a target gave.
#[derive(Debug)]
pub enum TrialRun {
    /// `xrun-trial` wrote a record (whatever its outcome).
    Record(Box<TrialRecord>),
    /// No record came back: `xrun-trial` died, the link to it did, or it
    /// ran past its timeout and was stopped.
    Lost {
        /// Why, one line.
        reason: String,
        /// The pid of `xrun-trial` on the target, when it was known: a
        /// trial cut off by the link may still be running there.
        pid: Option<u32>,
    },
}

/// A target that did not come back after its link dropped: one line.
#[derive(Debug, Clone)]
pub struct Unreachable(pub String);

/// A machine that runs trials.
pub trait Target {
    /// For people and for `run.json`: `local`, `ssh root@rpi4`.
    fn describe(&self) -> String;

    /// `xrun-trial ARGS…` on the target, stdio not yet set.
    fn xrun_trial(&self, args: &[&str]) -> Command;

    /// Puts a host WAV where the target's trials read it (`probe` says
    /// what the target offers); returns its path there.
    fn stage_audio(&mut self, host_path: &Path, probe: &Probe) -> Result<PathBuf>;

    /// Where a trial's player and load logs go (`spec.work_dir`), given the
    /// run directory on the host; `None`: a temporary directory on the
    /// target.
    fn work_dir(&self, run_dir: &Path) -> Option<PathBuf>;

    /// The command of one trial: `xrun-trial run -` there. A target whose
    /// spawned process is not `xrun-trial` itself prints [`PID_MARKER`]
    /// first, so that the trial can be stopped there.
    fn trial_command(&self) -> Command {
        self.xrun_trial(&["run", "-"])
    }

    /// `xrun-trial`'s pid on the target when the spawned process is it
    /// (`spawned`); `None` when the trial command says it with
    /// [`PID_MARKER`].
    fn spawned_trial_pid(&self, spawned: u32) -> Option<u32> {
        Some(spawned)
    }

    /// How long a trial may run before it is stopped and counted lost;
    /// `None`: no limit.
    fn trial_timeout(&self) -> Option<Duration> {
        None
    }

    /// Sends `xrun-trial` (pid `pid` on the target) SIGTERM — it restores
    /// its knobs and exits — or, with `hard`, SIGKILL (its journal is
    /// replayed by the next restore).
    fn signal_trial(&self, pid: u32, hard: bool) {
        let sig = if hard { libc::SIGKILL } else { libc::SIGTERM };
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) on a pid we spawned; at worst ESRCH.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// Why the link to the target went, when it did (added to a lost
    /// trial's reason).
    fn link_note(&self) -> Option<String> {
        None
    }

    /// How often a lost trial is run again (a lost trial here is a crash,
    /// not a link: by default it is not retried).
    fn retries(&self) -> u32 {
        0
    }

    /// After a lost trial: the target back in working order — reconnected
    /// if the link dropped, the trial cut off there (`orphan`) stopped, its
    /// journals replayed (`xrun-trial restore`). Returns lines for people;
    /// `Err` when the target did not come back.
    fn recover(&mut self, orphan: Option<u32>) -> Result<Vec<String>, Unreachable> {
        let _ = orphan;
        match self.restore() {
            Ok((_, lines)) => Ok(lines),
            Err(e) => Ok(vec![format!("restore after a lost trial failed: {e:#}")]),
        }
    }

    /// Ends the session with the target: staged files removed, the
    /// connection closed. Returns lines for people. Also done on drop.
    fn finish(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// What the target offers (`xrun-trial probe`).
    fn probe(&self) -> Result<Probe> {
        let out = capture(self.xrun_trial(&["probe"]), None, "xrun-trial probe")?;
        if !out.status.success() {
            bail!(
                "xrun-trial probe failed ({}): {}",
                out.status,
                last(&out.stderr)
            );
        }
        let p: Probe = serde_json::from_slice(&out.stdout)
            .context("xrun-trial probe printed something that is not xrunbench.probe/1")?;
        if p.schema != PROBE_SCHEMA {
            bail!(
                "xrun-trial probe printed schema `{}`, expected `{PROBE_SCHEMA}`",
                p.schema
            );
        }
        Ok(p)
    }

    /// Whether `specs` can run there (`xrun-trial check`); with
    /// `read_only`, knobs are not written and read back. Lines the target
    /// prints meanwhile (journals it replayed) are shown on our stderr.
    fn check(&self, specs: &[TrialSpec], read_only: bool) -> Result<CheckReport> {
        let mut args = vec!["check", "--json"];
        if read_only {
            args.push("--read-only");
        }
        args.push("-");
        let mut input = String::new();
        for s in specs {
            input.push_str(&serde_json::to_string(s).context("serializing a trial spec")?);
            input.push('\n');
        }
        let out = capture(self.xrun_trial(&args), Some(input), "xrun-trial check")?;
        match out.status.code() {
            Some(0 | 1) => {}
            _ => bail!(
                "xrun-trial check failed ({}): {}",
                out.status,
                last(&out.stderr)
            ),
        }
        let r: CheckReport = serde_json::from_slice(&out.stdout)
            .context("xrun-trial check printed something that is not xrunbench.check/1")?;
        if r.schema != CHECK_SCHEMA {
            bail!(
                "xrun-trial check printed schema `{}`, expected `{CHECK_SCHEMA}`",
                r.schema
            );
        }
        Ok(r)
    }

    /// Replays the journals a killed trial left (`xrun-trial restore`);
    /// returns whether all went well and one line per journal.
    fn restore(&self) -> Result<(bool, Vec<String>)> {
        let out = capture(self.xrun_trial(&["restore"]), None, "xrun-trial restore")?;
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        match out.status.code() {
            Some(0) => Ok((true, lines)),
            Some(1) => Ok((false, lines)),
            _ => bail!(
                "xrun-trial restore failed ({}): {}",
                out.status,
                last(&out.stderr)
            ),
        }
    }

    /// Runs one trial: the spec on stdin, each stderr line to `progress`,
    /// the record from stdout. While it runs, `stop()` returning true
    /// closes the trial's stdin — the trial then stops, restores its knobs
    /// and still writes its record. Past [`Target::trial_timeout`] it is
    /// sent SIGTERM there (and its stdin closed), and SIGKILL if it is
    /// still running [`STOP_GRACE`] later: lost either way.
    fn run_trial(
        &self,
        spec: &TrialSpec,
        progress: &mut dyn FnMut(&str),
        stop: &dyn Fn() -> bool,
    ) -> TrialRun {
        run_trial_on(self, spec, progress, stop)
    }
}

/// [`Target::run_trial`] on `target`: the shared engine a target that
/// overrides `run_trial` (to check its link first) still runs.
pub fn run_trial_on<T: Target + ?Sized>(
    target: &T,
    spec: &TrialSpec,
    progress: &mut dyn FnMut(&str),
    stop: &dyn Fn() -> bool,
) -> TrialRun {
    let mut cmd = target.trial_command();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return TrialRun::Lost {
                reason: format!("cannot start xrun-trial: {e}"),
                pid: None,
            }
        }
    };
    let mut pid = target.spawned_trial_pid(child.id());
    let mut stdin = child.stdin.take();
    if let Some(w) = stdin.as_mut() {
        let mut text = serde_json::to_string(spec).unwrap_or_default();
        text.push('\n');
        // A write error means it is already gone: its status says why.
        let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
    }
    let reader = read_all(child.stdout.take());
    let lines = stderr_lines(child.stderr.take());
    let mut tail: Vec<String> = Vec::new();
    let mut show = |line: String, pid: &mut Option<u32>| {
        if let Some(n) = line.strip_prefix(PID_MARKER) {
            *pid = n.trim().parse().ok();
            return;
        }
        progress(&line);
        tail.push(line);
        if tail.len() > 3 {
            tail.remove(0);
        }
    };
    let deadline = target.trial_timeout().map(|t| started + t);
    let mut overran: Option<Instant> = None;
    let status = loop {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(50)) {
            show(line, &mut pid);
        }
        if stdin.is_some() && stop() {
            stdin = None;
        }
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(e) => {
                return TrialRun::Lost {
                    reason: format!("waiting for xrun-trial: {e}"),
                    pid,
                }
            }
        }
        let now = Instant::now();
        match overran {
            None if deadline.is_some_and(|d| now >= d) => {
                if let Some(p) = pid {
                    target.signal_trial(p, false);
                }
                stdin = None;
                overran = Some(now);
            }
            Some(t) if now - t >= STOP_GRACE => {
                if let Some(p) = pid {
                    target.signal_trial(p, true);
                }
                let _ = child.kill();
                break child.wait().ok();
            }
            _ => {}
        }
    };
    drop(stdin);
    for line in lines.iter() {
        show(line, &mut pid);
    }
    let out = reader.join().unwrap_or_default();
    if overran.is_some() {
        let limit = target.trial_timeout().unwrap_or_default();
        return TrialRun::Lost {
            reason: format!(
                "it ran past its trial_timeout of {} s and was stopped on the target",
                limit.as_secs()
            ),
            pid,
        };
    }
    let status = status.map_or_else(|| "unknown status".to_string(), |s| s.to_string());
    let lost = |reason: String| TrialRun::Lost {
        reason: match target.link_note() {
            Some(note) => format!("{reason} ({note})"),
            None => reason,
        },
        pid,
    };
    match serde_json::from_slice::<TrialRecord>(&out) {
        Ok(r) if r.schema == TRIAL_SCHEMA => TrialRun::Record(Box::new(r)),
        Ok(r) => lost(format!(
            "xrun-trial wrote schema `{}`, expected `{TRIAL_SCHEMA}`",
            r.schema
        )),
        Err(_) => lost(format!(
            "xrun-trial ended ({status}) without a record: {}",
            if tail.is_empty() {
                "no message".to_string()
            } else {
                tail.join(" / ")
            }
        )),
    }
}

/// A child's stdout, read to its end in a thread.
fn read_all(stdout: Option<std::process::ChildStdout>) -> std::thread::JoinHandle<Vec<u8>> {
    let mut stdout = stdout;
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(o) = stdout.as_mut() {
            let _ = o.read_to_end(&mut buf);
        }
        buf
    })
}

/// Runs a command to its end with `input` on stdin, capturing stdout; its
/// stderr is shown on ours as it comes (a wait for the machine lock, the
/// journals it replays) and captured too.
fn capture(cmd: Command, input: Option<String>, what: &str) -> Result<std::process::Output> {
    run_to_end(cmd, input.map(String::into_bytes), None, true, what)
}

/// Runs `cmd` to its end: `input` on stdin (else none), stdout and stderr
/// captured, stderr also shown on ours with `show_stderr`. Past `timeout`
/// it is killed and this fails.
pub(crate) fn run_to_end(
    mut cmd: Command,
    input: Option<Vec<u8>>,
    timeout: Option<Duration>,
    show_stderr: bool,
    what: &str,
) -> Result<std::process::Output> {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    if let (Some(bytes), Some(mut w)) = (input, child.stdin.take()) {
        // Written from a thread: a large input must not dead-lock against
        // a full stdout pipe.
        std::thread::spawn(move || {
            let _ = w.write_all(&bytes);
        });
    }
    let stdout = read_all(child.stdout.take());
    let lines = stderr_lines(child.stderr.take());
    let shown = std::thread::spawn(move || {
        let mut all = Vec::new();
        for l in lines {
            if show_stderr {
                eprintln!("{l}");
            }
            all.extend_from_slice(l.as_bytes());
            all.push(b'\n');
        }
        all
    });
    let status = wait_until(&mut child, timeout.map(|t| Instant::now() + t))
        .with_context(|| format!("waiting for {what}"))?;
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        bail!(
            "{what} did not finish within {} s",
            timeout.unwrap_or_default().as_secs()
        );
    };
    Ok(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: shown.join().unwrap_or_default(),
    })
}

/// Waits for `child` until `deadline` (none: for ever); `None` when it is
/// still running then.
fn wait_until(
    child: &mut Child,
    deadline: Option<Instant>,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    let Some(deadline) = deadline else {
        return child.wait().map(Some);
    };
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The target's stderr, line by line, from a thread.
fn stderr_lines(stderr: Option<std::process::ChildStderr>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(e) = stderr {
        std::thread::spawn(move || {
            for line in BufReader::new(e).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// The last non-empty line of a captured output.
pub(crate) fn last(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .to_string()
}
