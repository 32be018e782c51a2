//! Where trials run. The runner never touches a knob or starts a player
//! itself: it talks to `xrun-trial` on the target through a spawned
//! command and its pipes — the spec on stdin (kept open: closing it stops
//! the trial, which then restores itself), progress lines on stderr, the
//! record on stdout. That process I/O is the seam: [`Local`] spawns
//! `xrun-trial` here; an SSH target only spawns it through `ssh` (and
//! stages files with its own copy), and everything else is shared.

mod local;

pub use local::Local;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use xrunbench_schema::probe::{CheckReport, Probe, CHECK_SCHEMA, PROBE_SCHEMA};
use xrunbench_schema::trial::{TrialRecord, TrialSpec, TRIAL_SCHEMA};

/// What running one trial on a target gave.
#[derive(Debug)]
pub enum TrialRun {
    /// `xrun-trial` wrote a record (whatever its outcome).
    Record(Box<TrialRecord>),
    /// No record came back: `xrun-trial` died, or the link to it did.
    Lost(String),
}

/// A machine that runs trials.
pub trait Target {
    /// For people and for `run.json`: `local`, `ssh root@rpi4`.
    fn describe(&self) -> String;

    /// `xrun-trial ARGS…` on the target, stdio not yet set.
    fn xrun_trial(&self, args: &[&str]) -> Command;

    /// Puts a host WAV where the target's trials read it; returns its path
    /// there.
    fn stage_audio(&mut self, host_path: &Path) -> Result<PathBuf>;

    /// Where a trial's player and load logs go (`spec.work_dir`), given the
    /// run directory on the host; `None`: a temporary directory on the
    /// target.
    fn work_dir(&self, run_dir: &Path) -> Option<PathBuf>;

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
    /// and still writes its record.
    fn run_trial(
        &self,
        spec: &TrialSpec,
        progress: &mut dyn FnMut(&str),
        stop: &dyn Fn() -> bool,
    ) -> TrialRun {
        let mut cmd = self.xrun_trial(&["run", "-"]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return TrialRun::Lost(format!("cannot start xrun-trial: {e}")),
        };
        let mut stdin = child.stdin.take();
        if let Some(w) = stdin.as_mut() {
            let mut text = serde_json::to_string(spec).unwrap_or_default();
            text.push('\n');
            // A write error means it is already gone: its status says why.
            let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
        }
        let mut stdout = child.stdout.take();
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(o) = stdout.as_mut() {
                let _ = o.read_to_end(&mut buf);
            }
            buf
        });
        let lines = stderr_lines(child.stderr.take());
        let mut tail: Vec<String> = Vec::new();
        let mut show = |line: String| {
            progress(&line);
            tail.push(line);
            if tail.len() > 3 {
                tail.remove(0);
            }
        };
        let status = loop {
            match lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => show(line),
                Err(mpsc::RecvTimeoutError::Timeout | mpsc::RecvTimeoutError::Disconnected) => {}
            }
            if stdin.is_some() && stop() {
                stdin = None;
            }
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => {}
                Err(e) => return TrialRun::Lost(format!("waiting for xrun-trial: {e}")),
            }
        };
        drop(stdin);
        for line in lines.iter() {
            show(line);
        }
        let out = reader.join().unwrap_or_default();
        match serde_json::from_slice::<TrialRecord>(&out) {
            Ok(r) if r.schema == TRIAL_SCHEMA => TrialRun::Record(Box::new(r)),
            Ok(r) => TrialRun::Lost(format!(
                "xrun-trial wrote schema `{}`, expected `{TRIAL_SCHEMA}`",
                r.schema
            )),
            Err(_) => TrialRun::Lost(format!(
                "xrun-trial ended ({status}) without a record: {}",
                if tail.is_empty() {
                    "no message".to_string()
                } else {
                    tail.join(" / ")
                }
            )),
        }
    }
}

/// Runs a command to its end with `input` on stdin, capturing stdout; its
/// stderr is shown on ours as it comes (a wait for the machine lock, the
/// journals it replays) and captured too.
fn capture(mut cmd: Command, input: Option<String>, what: &str) -> Result<std::process::Output> {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    if let (Some(text), Some(mut w)) = (input, child.stdin.take()) {
        // Written from a thread: a large input must not dead-lock against
        // a full stdout pipe.
        std::thread::spawn(move || {
            let _ = w.write_all(text.as_bytes());
        });
    }
    let lines = stderr_lines(child.stderr.take());
    let shown = std::thread::spawn(move || {
        let mut all = Vec::new();
        for l in lines {
            eprintln!("{l}");
            all.extend_from_slice(l.as_bytes());
            all.push(b'\n');
        }
        all
    });
    let mut out = child
        .wait_with_output()
        .with_context(|| format!("waiting for {what}"))?;
    out.stderr = shown.join().unwrap_or_default();
    Ok(out)
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
fn last(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .to_string()
}
