//! Running a trial, a probe or a command on any target: the [`Target`]
//! trait and what every target shares.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use xrunbench_schema::bounded::{scan_json, Limits};
use xrunbench_schema::doc::one_line;
use xrunbench_schema::probe::{CheckReport, Probe, CHECK_SCHEMA, PROBE_SCHEMA};
use xrunbench_schema::trial::{TrialId, TrialRecord, TrialSpec, TRIAL_SCHEMA};

use super::bounded;

/// The line a target's trial command prints first on stderr when the pid
/// of `xrun-trial` there is not the pid of the process we spawned (`ssh`):
/// `xrunbench-pid 1234`. It is not shown to people.
pub const PID_MARKER: &str = "xrunbench-pid ";

/// After a trial ran past its timeout and was asked to stop, how long it
/// may take to restore its knobs and exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long `xrun-trial probe` may take (a few reads of /proc and /sys).
const PROBE_LIMIT: Duration = Duration::from_secs(120);
/// How long `xrun-trial check` may take (each knob written, read back and
/// restored, under the machine lock).
const CHECK_LIMIT: Duration = Duration::from_secs(600);
/// How long `xrun-trial restore` may take at least: it waits for the
/// machine lock, which a trial of another run may hold for its length.
const RESTORE_LIMIT: Duration = Duration::from_secs(600);

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

    /// What [`Target::trial_timeout`] is measured on.
    fn trial_clock(&self) -> TrialClock {
        TrialClock::Wall
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

    /// Drops the link to the target, so that whatever it holds open on
    /// our side ends (an SSH master keeps a session's pipes open after its
    /// client was killed); the next command reconnects. Nothing for a
    /// target without a link.
    fn drop_link(&self) {}

    /// Why the link to the target went, when it did (added to a lost
    /// trial's reason).
    fn link_note(&self) -> Option<String> {
        None
    }

    /// Makes configuration `config`'s machine the one trials run on (in
    /// the VM lab, the guest of its kernel and command line running, the
    /// others frozen); nothing where there is one machine.
    fn select(&mut self, config: &str) -> Result<(), Unreachable> {
        let _ = config;
        Ok(())
    }

    /// The kernel command-line parameters the running kernel said it did
    /// not take (passed on to user space instead); empty where it named
    /// none or the target cannot tell.
    fn unknown_parameters(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// How often a lost trial is run again (a lost trial here is a crash,
    /// not a link: by default it is not retried).
    fn retries(&self) -> u32 {
        0
    }

    /// Where the target's own logs (its hooks' output) go from now on: the
    /// run directory.
    fn keep_logs_in(&mut self, dir: &Path) {
        let _ = dir;
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
        let out = capture(self, &["probe"], None, PROBE_LIMIT)?;
        if !out.status.success() {
            bail!(
                "xrun-trial probe failed ({}): {}",
                out.status,
                last(&out.stderr)
            );
        }
        scan_json(&out.stdout, &Limits::DOCUMENT)
            .map_err(|e| anyhow::anyhow!("xrun-trial probe's output: {e}"))?;
        let p: Probe = serde_json::from_slice(&out.stdout)
            .context("xrun-trial probe printed something that is not xrunbench.probe/1")?;
        if p.schema != PROBE_SCHEMA {
            bail!(
                "xrun-trial probe printed schema `{}`, expected `{PROBE_SCHEMA}`",
                one_line(&p.schema)
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
        let out = capture(self, &args, Some(input), CHECK_LIMIT)?;
        match out.status.code() {
            Some(0 | 1) => {}
            _ => bail!(
                "xrun-trial check failed ({}): {}",
                out.status,
                last(&out.stderr)
            ),
        }
        scan_json(&out.stdout, &Limits::DOCUMENT)
            .map_err(|e| anyhow::anyhow!("xrun-trial check's output: {e}"))?;
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
        let limit = self.trial_timeout().unwrap_or_default().max(RESTORE_LIMIT);
        let out = capture(self, &["restore"], None, limit)?;
        let lines = shown_lines(&out.stdout);
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

/// What a trial's timeout is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrialClock {
    /// The wall clock: a board runs at its own speed whatever the host does.
    Wall,
    /// The CPU time of this host process (QEMU emulating the board): an
    /// emulated board runs only as fast as the host lets it, so on a host
    /// busy with other work the wall clock would cut trials that are merely
    /// slow; the wall clock is kept as a backstop at
    /// [`xrunbench_lab::lab::qemu::TCG_WALL_FACTOR`] times the timeout.
    CpuOf {
        /// QEMU's pid.
        pid: u32,
        /// The guest's emulated CPUs: the limit is per CPU.
        cpus: u32,
    },
}

/// When a trial started at `started` is past its timeout, on its clock
/// ([`xrunbench_lab::lab::qemu::past_limit`], the rule the guest's boot is timed by
/// too).
struct Deadline {
    limit: Duration,
    started: Instant,
    clock: TrialClock,
    /// QEMU's pid, CPU time at the start and emulated CPUs; `None`: the
    /// wall clock (also when QEMU's CPU time cannot be read at the start).
    cpu: Option<(u32, Duration, u32)>,
}

impl Deadline {
    fn new(limit: Duration, clock: TrialClock, started: Instant) -> Deadline {
        let cpu = match clock {
            TrialClock::Wall => None,
            TrialClock::CpuOf { pid, cpus } => {
                xrunbench_trial::child::cpu_time(pid).map(|at| (pid, at, cpus))
            }
        };
        Deadline {
            limit,
            started,
            clock,
            cpu,
        }
    }

    /// Whether it has passed at `now`.
    fn passed(&self, now: Instant) -> bool {
        xrunbench_lab::lab::qemu::past_limit(self.limit, self.started, self.cpu, now).is_some()
    }

    /// The timeout as the cut-off message says it.
    fn describe(&self) -> String {
        match self.clock {
            TrialClock::Wall => format!("{} s", self.limit.as_secs()),
            TrialClock::CpuOf { cpus: 1, .. } => {
                format!("{} s of QEMU's CPU time", self.limit.as_secs())
            }
            TrialClock::CpuOf { cpus, .. } => format!(
                "{} s of QEMU's CPU time per emulated CPU ({cpus})",
                self.limit.as_secs()
            ),
        }
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
    // The pid we may signal is ours: the child we spawned or, where that
    // is a link (ssh), the first marker, which our own command prints
    // before the trial starts. A marker after it, or from a trial we
    // spawned ourselves, is the trial's word: shown, never obeyed.
    let mut marker_awaited = pid.is_none();
    let mut stdin = child.stdin.take();
    if let Some(w) = stdin.as_mut() {
        let mut text = serde_json::to_string(spec).unwrap_or_default();
        text.push('\n');
        // A write error means it is already gone: its status says why.
        let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
    }
    let overflow = bounded::Overflow::default();
    let reader = bounded::read_capped(child.stdout.take(), bounded::RECORD_MAX, &overflow);
    let lines = bounded::lines_capped(child.stderr.take(), &overflow);
    let mut tail: Vec<String> = Vec::new();
    let mut show = |line: String, pid: &mut Option<u32>| {
        if let Some(n) = line.strip_prefix(PID_MARKER).filter(|_| marker_awaited) {
            marker_awaited = false;
            *pid = n.trim().parse().ok();
            return;
        }
        progress(&line);
        tail.push(line);
        if tail.len() > 3 {
            tail.remove(0);
        }
    };
    let deadline = target
        .trial_timeout()
        .map(|t| Deadline::new(t, target.trial_clock(), started));
    // Why we stopped it ourselves, and when: it ran past its timeout, sent
    // more than we read, or did not end within the grace after we asked
    // it to (closing its stdin).
    let mut cut: Option<(Instant, String)> = None;
    let mut asked: Option<Instant> = None;
    let status = loop {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(50)) {
            show(line, &mut pid);
        }
        if stdin.is_some() && stop() {
            stdin = None;
            asked = Some(Instant::now());
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
        let why = cut_reason(&overflow, deadline.as_ref(), asked, now);
        match (&cut, why) {
            (None, Some(why)) => {
                if let Some(p) = pid {
                    target.signal_trial(p, false);
                }
                stdin = None;
                cut = Some((now, why));
            }
            (Some((t, _)), _) if now - *t >= STOP_GRACE => {
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
    // Its output ends when it does, unless something on our side still
    // holds the pipes (an SSH master does, for a trial that would not
    // die): then the link goes, and with it the pipes.
    let drained = Instant::now() + bounded::DRAIN;
    let mut out = bounded::collect(&reader, drained);
    if out.is_none() {
        target.drop_link();
        out = bounded::collect(&reader, Instant::now() + bounded::DRAIN);
    }
    while let Some(line) = bounded::collect(&lines, Instant::now() + Duration::from_millis(200)) {
        show(line, &mut pid);
    }
    let out = out.unwrap_or_default();
    if let Some((_, why)) = cut {
        return TrialRun::Lost { reason: why, pid };
    }
    trial_end(target, &out, &spec.trial, status, &tail, pid)
}

/// Why a trial still running at `now` is to be stopped, if it is: it sent
/// more than we read (`overflow`), ran past its `deadline`, or did not end
/// within twice the grace after we `asked` it to.
fn cut_reason(
    overflow: &bounded::Overflow,
    deadline: Option<&Deadline>,
    asked: Option<Instant>,
    now: Instant,
) -> Option<String> {
    if overflow.passed() {
        Some(format!(
            "it sent more than {} MiB (a record, or stderr past {} MiB): cut off",
            bounded::RECORD_MAX >> 20,
            bounded::STDERR_MAX >> 20
        ))
    } else if let Some(d) = deadline.filter(|d| d.passed(now)) {
        Some(format!(
            "it ran past its trial_timeout of {} and was stopped on the target",
            d.describe()
        ))
    } else if asked.is_some_and(|t| now - t >= STOP_GRACE + STOP_GRACE) {
        Some(format!(
            "it did not stop within {} s of being asked to",
            (STOP_GRACE + STOP_GRACE).as_secs()
        ))
    } else {
        None
    }
}

/// What a trial of `sent` that ended with `status`, not cut off, amounts to:
/// the record in its stdout `out`, else lost, with its last stderr lines
/// (`tail`) when it printed no record and the link's note when there is one.
fn trial_end<T: Target + ?Sized>(
    target: &T,
    out: &[u8],
    sent: &TrialId,
    status: Option<std::process::ExitStatus>,
    tail: &[String],
    pid: Option<u32>,
) -> TrialRun {
    let status = status.map_or_else(|| "unknown status".to_string(), |s| s.to_string());
    let lost = |reason: String| TrialRun::Lost {
        reason: match target.link_note() {
            Some(note) => format!("{reason} ({note})"),
            None => reason,
        },
        pid,
    };
    match record_from(out, sent) {
        Ok(r) => TrialRun::Record(Box::new(r)),
        Err(RecordRefused::Unread) => lost(format!(
            "xrun-trial ended ({status}) without a record: {}",
            if tail.is_empty() {
                "no message".to_string()
            } else {
                tail.join(" / ")
            }
        )),
        Err(RecordRefused::Refused(why)) => lost(why),
    }
}

/// Why what a trial printed on stdout is not its record.
#[derive(Debug)]
pub enum RecordRefused {
    /// It is not a trial record at all.
    Unread,
    /// A record, refused: one line why.
    Refused(String),
}

/// The record of trial `sent` in what its `xrun-trial` printed on stdout
/// (read bounded: [`bounded::RECORD_MAX`], then scanned against
/// [`Limits::DOCUMENT`] before it is parsed). A record names the trial it
/// is of, and the host files it by its own name for the trial it sent: a
/// record of any other trial is refused (a board must not choose where
/// its record goes, nor pass it off as another configuration's), as is
/// one of another schema, and a measurement whose numbers the reader
/// would refuse (stored, it would be a trial no table can read).
pub fn record_from(stdout: &[u8], sent: &TrialId) -> Result<TrialRecord, RecordRefused> {
    scan_json(stdout, &Limits::DOCUMENT)
        .map_err(|e| RecordRefused::Refused(format!("xrun-trial's record: {e}")))?;
    let r: TrialRecord = serde_json::from_slice(stdout).map_err(|_| RecordRefused::Unread)?;
    if r.schema != TRIAL_SCHEMA {
        return Err(RecordRefused::Refused(format!(
            "xrun-trial wrote schema `{}`, expected `{TRIAL_SCHEMA}`",
            one_line(&r.schema)
        )));
    }
    if &r.trial != sent {
        return Err(RecordRefused::Refused(format!(
            "xrun-trial answered for trial {}, not for {}: its record is refused",
            r.trial.display_name(),
            sent.display_name()
        )));
    }
    if r.measured().is_some() {
        let file = PathBuf::from(format!("{}.json", sent.stem()));
        xrunbench_analysis::results::check_measured(&file, &r)
            .map_err(|e| RecordRefused::Refused(format!("xrun-trial's record is refused: {e}")))?;
    }
    Ok(r)
}

/// `xrun-trial ARGS…` on `target` to its end with `input` on stdin,
/// within `limit`; its stderr is shown on ours as it comes (a wait for the
/// machine lock, the journals it replays) and captured too.
fn capture<T: Target + ?Sized>(
    target: &T,
    args: &[&str],
    input: Option<String>,
    limit: Duration,
) -> Result<std::process::Output> {
    let what = format!("xrun-trial {}", args.first().copied().unwrap_or_default());
    run_to_end(
        target.xrun_trial(args),
        input.map(String::into_bytes),
        Some(limit),
        true,
        &what,
        &|| target.drop_link(),
    )
}

/// Runs `cmd` to its end: `input` on stdin (else none), stdout and stderr
/// captured — at most [`bounded::REPORT_MAX`] and [`bounded::STDERR_MAX`]
/// bytes, lines escaped — stderr also shown on ours with `show_stderr`.
/// It is killed and this fails past `timeout`, past those limits, or when
/// we are asked to stop (SIGINT, SIGTERM); then `drop_link` runs if its
/// output still does not end (a link that holds its pipes open).
pub(crate) fn run_to_end(
    mut cmd: Command,
    input: Option<Vec<u8>>,
    timeout: Option<Duration>,
    show_stderr: bool,
    what: &str,
    drop_link: &dyn Fn(),
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
    let overflow = bounded::Overflow::default();
    let stdout = bounded::read_capped(child.stdout.take(), bounded::REPORT_MAX, &overflow);
    let lines = bounded::lines_capped(child.stderr.take(), &overflow);
    let (tx, shown) = mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        for (n, l) in lines.iter().enumerate() {
            if show_stderr && n < SHOWN_LINES {
                eprintln!("{l}");
            } else if show_stderr && n == SHOWN_LINES {
                eprintln!("(more lines not shown)");
            }
            all.extend_from_slice(l.as_bytes());
            all.push(b'\n');
            if all.len() > KEPT_STDERR {
                all.drain(..all.len() - KEPT_STDERR);
            }
        }
        let _ = tx.send(all);
    });
    let deadline = timeout.map(|t| Instant::now() + t);
    let ended = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for {what}"))?
        {
            break Ok(status);
        }
        if let Some(sig) = xrunbench_lab::signals::stop_requested() {
            break Err(format!("{what}: stopped, signal {sig} received"));
        }
        if overflow.passed() {
            break Err(format!(
                "{what} printed more than {} MiB (or {} MiB of stderr): cut off",
                bounded::REPORT_MAX >> 20,
                bounded::STDERR_MAX >> 20
            ));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Err(format!(
                "{what} did not finish within {} s",
                timeout.unwrap_or_default().as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if ended.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut out = bounded::collect(&stdout, Instant::now() + bounded::DRAIN);
    if out.is_none() {
        drop_link();
        out = bounded::collect(&stdout, Instant::now() + bounded::DRAIN);
    }
    let status = ended.map_err(anyhow::Error::msg)?;
    Ok(std::process::Output {
        status,
        stdout: out.with_context(|| format!("{what}: its output did not end"))?,
        stderr: bounded::collect(&shown, Instant::now() + bounded::DRAIN).unwrap_or_default(),
    })
}

/// Lines of a command's stderr shown at most; the rest are kept (the last
/// [`KEPT_STDERR`] bytes) for its error message.
const SHOWN_LINES: usize = 200;
/// The most of a command's stderr kept for its error message, bytes.
const KEPT_STDERR: usize = 64 * 1024;

/// The last non-empty line of a captured output.
pub(crate) fn last(bytes: &[u8]) -> String {
    one_line(
        String::from_utf8_lossy(bytes)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message"),
    )
}

/// A board's output (`xrun-trial restore`'s) as lines to show: each
/// escaped and capped, as every board's word.
pub(crate) fn shown_lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(one_line)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_board_s_trial_is_timed_by_the_wall_clock() {
        let t0 = Instant::now();
        let d = Deadline::new(S(60), TrialClock::Wall, t0);
        assert!(!d.passed(t0 + S(59)));
        assert!(d.passed(t0 + S(60)));
        assert_eq!(d.describe(), "60 s");
    }

    #[test]
    fn an_emulated_board_s_trial_is_timed_by_qemu_s_cpu_time() {
        // This process stands for QEMU: it will not spend an hour of CPU
        // in this test, so only the wall-clock backstop (ten hours) ends
        // the trial, however long the wall clock has run past the hour.
        let t0 = Instant::now();
        let me = std::process::id();
        let cpu = |pid, cpus| TrialClock::CpuOf { pid, cpus };
        let d = Deadline::new(S(3600), cpu(me, 1), t0);
        assert!(!d.passed(t0 + S(5 * 3600)));
        assert!(d.passed(t0 + S(10 * 3600)));
        assert_eq!(d.describe(), "3600 s of QEMU's CPU time");
        assert_eq!(
            Deadline::new(S(300), cpu(me, 2), t0).describe(),
            "300 s of QEMU's CPU time per emulated CPU (2)"
        );
        // No CPU time at all may be spent: past at once.
        assert!(Deadline::new(S(0), cpu(me, 2), t0).passed(t0));
        // QEMU gone: the wall clock decides.
        let gone = Deadline::new(S(60), cpu(0, 2), t0);
        assert!(!gone.passed(t0 + S(59)));
        assert!(gone.passed(t0 + S(60)));
    }

    /// The template record of trial `a-1`, with `edit` applied, as a board
    /// prints it.
    fn printed(edit: impl FnOnce(&mut serde_json::Value)) -> (TrialId, String) {
        let r = xrunbench_analysis::results::testing::trial("a", 1, edit);
        (r.trial.clone(), serde_json::to_string(&r).unwrap())
    }

    #[test]
    fn a_measurement_the_reader_would_refuse_is_not_stored() {
        let (sent, text) = printed(|v| v["player"]["audio_seconds"] = serde_json::json!(-1));
        match record_from(text.as_bytes(), &sent) {
            Err(RecordRefused::Refused(why)) => assert!(
                why.contains("a-1.json: player.audio_seconds = -1: expected a duration in s"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        let (sent, text) = printed(|_| {});
        assert!(record_from(text.as_bytes(), &sent).is_ok());
    }

    #[test]
    fn a_record_of_millions_of_empty_strings_is_refused_naming_the_limit() {
        let (sent, text) = printed(|_| {});
        let n = Limits::DOCUMENT.strings;
        let huge = xrunbench_test_support::hostile::with_empty_strings(&text, "player_command", n);
        match record_from(huge.as_bytes(), &sent) {
            Err(RecordRefused::Refused(why)) => {
                assert!(why.contains(&format!("more than {n} strings")), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }
}
