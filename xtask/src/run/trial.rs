//! One trial: apply the knobs, start the load, wait the warm-up, play,
//! stop the load, restore the knobs, and gather the record. The player and
//! hackbench are separate processes, as aplay and hackbench were in the bug
//! reports, each in its own session (as if started from its own terminal),
//! so a terminal's Ctrl-C reaches only us and we decide the order things
//! stop in.

use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xrunbench_schema::{HackbenchReport, PlayerReport};

use super::fingerprint::{self, TrialFacts};
use super::journal::{Applied, MachineLock};
use super::knobs::{Saved, SysPaths};
use super::plan::PlannedTrial;
use super::scenario::{Config, HackbenchMode, Load, Scenario, Transport};
use super::signals;
use super::store;

/// Schema of a trial record.
pub const TRIAL_SCHEMA: &str = "xrunbench.trial/1";

/// The release binaries a trial runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// `xrun-player`.
    pub player: PathBuf,
    /// `xrun-hackbench`.
    pub hackbench: PathBuf,
}

/// `trials/<config>-<k>.json`: everything one trial measured and how.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialRecord {
    /// Always [`TRIAL_SCHEMA`].
    pub schema: String,
    /// Scenario name.
    pub scenario: String,
    /// Configuration name.
    pub config: String,
    /// Trial number within the configuration, 1-based.
    pub k: u32,
    /// Position in the run, 1-based.
    pub seq: usize,
    /// When the trial began (RFC 3339 UTC).
    pub started_at: String,
    /// `uname -r`.
    pub kernel: String,
    /// Knobs applied, each with the value found before (and restored after).
    pub knobs: Vec<Saved>,
    /// PM-QoS CPU DMA latency held during the trial, µs.
    pub pm_qos_us: Option<u32>,
    /// The player's command line.
    pub player_command: Vec<String>,
    /// The load's command line, if any.
    pub load_command: Option<Vec<String>>,
    /// The player's report.
    pub player: PlayerReport,
    /// The load's report, if any.
    pub load: Option<HackbenchReport>,
    /// System facts around the trial.
    pub facts: TrialFacts,
}

/// How a trial ended.
pub enum TrialEnd {
    /// It ran to the end.
    Done(Box<TrialRecord>),
    /// SIGINT/SIGTERM arrived; everything was stopped and restored.
    Interrupted,
}

/// Everything a trial needs from the run.
pub struct TrialContext<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// Knob roots.
    pub sys: &'a SysPaths,
    /// Run directory.
    pub run_dir: &'a Path,
    /// Binaries.
    pub bins: &'a Binaries,
    /// The WAV each configuration plays (index = configuration).
    pub wavs: &'a [PathBuf],
    /// The run lock (knobs may only change under it).
    pub lock: &'a MachineLock,
}

/// Runs one planned trial.
pub fn run_trial(ctx: &TrialContext<'_>, planned: &PlannedTrial) -> Result<TrialEnd> {
    let config = &ctx.scenario.configs[planned.config];
    let stem = planned.stem();
    let trials_dir = ctx.run_dir.join("trials");
    let player_json = trials_dir.join(format!(".{stem}.player.json"));
    let load_json = trials_dir.join(format!(".{stem}.load.json"));
    let started_at = store::rfc3339(SystemTime::now());
    let loadavg_before = fingerprint::loadavg();
    let wav = &ctx.wavs[planned.config];
    let player_args = player_args(ctx.scenario, config, wav, &player_json);
    let load_args = config
        .load
        .as_ref()
        .map(|l| load_args(ctx.scenario, l, &load_json));

    let applied = Applied::apply(config, ctx.sys, ctx.run_dir, &stem, ctx.lock)
        .with_context(|| format!("trial {stem}: applying knobs"))?;
    fault_injection_point();
    let governors = fingerprint::governors_now();
    let outcome = play_under_load(ctx, config, planned, &player_args, load_args.as_deref());
    let saved = applied.saved().to_vec();
    // Restore before anything else can fail.
    applied.restore()?;
    let (player_status, load_status) = match outcome? {
        Some(statuses) => statuses,
        None => return Ok(TrialEnd::Interrupted),
    };
    check_player_status(player_status, &trials_dir, &stem)?;
    let player: PlayerReport = read_report(&player_json, "player")?;
    if player.schema != xrunbench_schema::player::PLAYER_SCHEMA {
        bail!("trial {stem}: player report has schema `{}`", player.schema);
    }
    let load = match (&load_args, load_status) {
        (Some(_), Some(status)) => Some(read_load_report(&load_json, status, &stem)?),
        _ => None,
    };
    let _ = std::fs::remove_file(&player_json);
    let _ = std::fs::remove_file(&load_json);
    Ok(TrialEnd::Done(Box::new(TrialRecord {
        schema: TRIAL_SCHEMA.into(),
        scenario: ctx.scenario.name.clone(),
        config: config.name.clone(),
        k: planned.k,
        seq: planned.seq,
        started_at,
        kernel: super::validate::kernel_release(),
        knobs: saved,
        pm_qos_us: config.pm_qos_us,
        player_command: display_cmd(&ctx.bins.player, &player_args),
        load_command: load_args
            .as_ref()
            .map(|a| display_cmd(&ctx.bins.hackbench, a)),
        player,
        load,
        facts: TrialFacts {
            loadavg_before,
            loadavg_after: fingerprint::loadavg(),
            governors,
        },
    })))
}

/// Test hook: `XRUNBENCH_FAULT=panic` panics and `=error` fails right after
/// the knobs were applied, so the tests can prove those paths restore them.
fn fault_injection_point() {
    match std::env::var("XRUNBENCH_FAULT").as_deref() {
        Ok("panic") => panic!("XRUNBENCH_FAULT=panic: injected panic after applying knobs"),
        Ok("sleep") => std::thread::sleep(Duration::from_secs(3600)),
        _ => {}
    }
}

fn display_cmd(bin: &Path, args: &[String]) -> Vec<String> {
    std::iter::once(bin.display().to_string())
        .chain(args.iter().cloned())
        .collect()
}

/// Starts the load and the player in the scenario's order, waits for the
/// player, stops the load. `None` when a stop signal arrived.
fn play_under_load(
    ctx: &TrialContext<'_>,
    config: &Config,
    planned: &PlannedTrial,
    player_args: &[String],
    load_args: Option<&[String]>,
) -> Result<Option<(ExitStatus, Option<ExitStatus>)>> {
    if std::env::var("XRUNBENCH_FAULT").as_deref() == Ok("error") {
        bail!("XRUNBENCH_FAULT=error: injected error after applying knobs");
    }
    let stem = planned.stem();
    let log = |what: &str| {
        ctx.run_dir
            .join("trials")
            .join(format!("{stem}.{what}.log"))
    };
    let start_delay = config
        .load
        .as_ref()
        .map(|l| l.start_delay)
        .unwrap_or_default();
    let mut load: Option<Child> = None;
    let spawn_load = |load: &mut Option<Child>| -> Result<()> {
        if let Some(args) = load_args {
            *load = Some(Child::spawn(
                &ctx.bins.hackbench,
                args,
                &log("load"),
                "xrun-hackbench",
            )?);
        }
        Ok(())
    };
    if start_delay.as_micros() == 0 {
        spawn_load(&mut load)?;
    }
    if !signals::sleep_unless_stopped(ctx.scenario.warmup.to_std()) {
        return Ok(None);
    }
    check_alive(&mut load)?;
    let mut player = Child::spawn(&ctx.bins.player, player_args, &log("player"), "xrun-player")?;
    if start_delay.as_micros() > 0 {
        if !signals::sleep_unless_stopped(start_delay.to_std()) {
            return Ok(None);
        }
        spawn_load(&mut load)?;
    }
    // The player ends itself after `duration`; the deadline only guards a hang.
    let deadline = Instant::now() + ctx.scenario.duration.to_std() + Duration::from_secs(30);
    let player_status = loop {
        if signals::stop_requested().is_some() {
            return Ok(None);
        }
        if let Some(status) = player.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            bail!("trial {stem}: xrun-player still running 30 s after its duration; killed it");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let load_status = match load.as_mut() {
        Some(l) => Some(l.stop(Duration::from_secs(10))?),
        None => None,
    };
    Ok(Some((player_status, load_status)))
}

/// Fails early if the load died during the warm-up (bad arguments, say).
fn check_alive(load: &mut Option<Child>) -> Result<()> {
    if let Some(l) = load.as_mut() {
        if let Some(status) = l.try_wait()? {
            bail!(
                "xrun-hackbench exited during the warm-up ({status}); see {}",
                l.log.display()
            );
        }
    }
    Ok(())
}

fn check_player_status(status: ExitStatus, dir: &Path, stem: &str) -> Result<()> {
    if status.success() {
        return Ok(());
    }
    let log = dir.join(format!("{stem}.player.log"));
    let tail = last_line(&log);
    let what = match status.code() {
        Some(2) => "rejected its input",
        Some(3) => "could not open or configure the device",
        _ => "failed",
    };
    bail!("trial {stem}: xrun-player {what} ({status}): {tail}")
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("no output (see {})", path.display()))
}

fn read_report<T: for<'de> Deserialize<'de>>(path: &Path, who: &str) -> Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{who} wrote no report at {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{who} report {} does not parse", path.display()))
}

fn read_load_report(path: &Path, status: ExitStatus, stem: &str) -> Result<HackbenchReport> {
    // We stop hackbench with SIGTERM; it reports and exits 0 (or dies of
    // the signal if it was between rounds' bookkeeping).
    let ok = status.success() || status.signal() == Some(libc::SIGTERM);
    match read_report::<HackbenchReport>(path, "xrun-hackbench") {
        Ok(r) => Ok(r),
        Err(e) if ok => Err(e),
        Err(_) => bail!("trial {stem}: xrun-hackbench failed ({status})"),
    }
}

fn secs_arg(seconds: f64) -> String {
    // Whole seconds print as integers so either an integer or a float
    // parser on the other side accepts them.
    if seconds.fract() == 0.0 {
        format!("{}", seconds as u64)
    } else {
        format!("{seconds:.3}")
    }
}

/// The player's command line (without the binary).
pub fn player_args(s: &Scenario, c: &Config, wav: &Path, json: &Path) -> Vec<String> {
    let a = &c.audio;
    let mut args: Vec<String> = vec!["--backend".into(), a.backend.as_str().into()];
    if let Some(d) = &a.device {
        args.extend(["-D".into(), d.clone()]);
    }
    if let Some(b) = a.buffer_time {
        args.extend(["-B".into(), b.as_micros().to_string()]);
    }
    if let Some(p) = a.period_time {
        args.extend(["-F".into(), p.as_micros().to_string()]);
    }
    if let Some(p) = &a.priority {
        args.extend(["--priority".into(), p.as_str().into()]);
    }
    if let Some(cpu) = &a.cpu {
        args.extend(["--cpu".into(), cpu.as_str().into()]);
    }
    // The player repeats the file until --duration seconds of audio played.
    args.extend([
        "--duration".into(),
        secs_arg(s.duration.as_secs_f64()),
        "--json".into(),
        json.display().to_string(),
        "-q".into(),
        wav.display().to_string(),
    ]);
    args
}

/// hackbench's command line (without the binary).
pub fn load_args(s: &Scenario, l: &Load, json: &Path) -> Vec<String> {
    let h = &l.hackbench;
    let mut args: Vec<String> = vec![
        "-g".into(),
        h.groups.to_string(),
        "-f".into(),
        h.fds.to_string(),
        "-l".into(),
        h.loops.to_string(),
        "-s".into(),
        h.datasize.to_string(),
    ];
    args.push(match h.mode {
        HackbenchMode::Process => "-P".into(),
        HackbenchMode::Thread => "-T".into(),
    });
    if h.transport == Transport::Pipe {
        args.push("-p".into());
    }
    // We stop it with SIGTERM when the player is done; the duration is only
    // a backstop so that it ends by itself should we be SIGKILLed.
    let backstop = s.warmup.as_secs_f64() + s.duration.as_secs_f64() + 30.0;
    args.extend([
        "--duration".into(),
        secs_arg(backstop.ceil()),
        "--json".into(),
        json.display().to_string(),
    ]);
    args
}

/// A child in its own process group, killed (group and all) and reaped
/// when dropped, so no path leaves one behind.
struct Child {
    child: std::process::Child,
    reaped: bool,
    log: PathBuf,
}

impl Child {
    fn spawn(bin: &Path, args: &[String], log: &Path, name: &str) -> Result<Child> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(bin);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: setsid and prctl are async-signal-safe; nothing else runs
        // in the child between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // Its own session (and so process group, pgid = pid): like a
                // program started in another terminal, which is what the bug
                // reports did and what autogroup keys on; and a terminal's
                // Ctrl-C reaches only the runner, which stops children in order.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Should we be SIGKILLed, the child is told to stop too.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({})", bin.display()))?;
        Ok(Child {
            child,
            reaped: false,
            log: log.to_path_buf(),
        })
    }

    fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        let s = self.child.try_wait().context("waiting for a child")?;
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
    fn stop(&mut self, grace: Duration) -> Result<ExitStatus> {
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
        let s = self.child.wait().context("reaping a child")?;
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
