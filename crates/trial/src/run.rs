//! One whole trial on this machine, from a spec to a record: replay
//! leftover journals, take the lock, generate the tone, journal and apply
//! the knobs (each read back), start the load and the player exactly as a
//! user would (separate processes, their own sessions), wait, stop and
//! reap them, restore the knobs, and gather the record.
//!
//! Every way out — the end, an error, a panic, SIGINT, SIGTERM, SIGHUP, the
//! link closing — goes through the same guards: children are stopped and
//! reaped ([`Child`]), knobs restored and the journal removed ([`Knobs`]),
//! the tone deleted ([`PreparedAudio`]).

use std::os::unix::fs::PermissionsExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde::de::DeserializeOwned;
use xrunbench_schema::doc::rfc3339;
use xrunbench_schema::trial::{
    AudioInput, TrialFacts, TrialOutcome, TrialRecord, TrialSpec, TRIAL_SCHEMA,
};
use xrunbench_schema::{HackbenchReport, PlayerReport};

use crate::child::{cpu_time, ended_cleanly_or_by_sigterm, Child};
use crate::fingerprint;
use crate::journal::{self, JournalError, Knobs, MachineLock};
use crate::knobs::{self, PmQosHold};
use crate::machine::Machine;
use crate::monitor::{self, Monitor};
use crate::say::{phase, say};
use crate::signals::{self, StopReason};
use crate::trace::{GapTracker, Keep, Tracer};
use crate::{EXIT_FAILED, EXIT_RAN};

/// How a trial is run here.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Knob roots, journal directory, lock.
    pub machine: Machine,
    /// Where `xrun-player` and `xrun-hackbench` are.
    pub bin_dir: PathBuf,
}

/// A trial's end: its record and the exit code that goes with it.
#[derive(Debug)]
pub struct Finished {
    /// The record (outcome Ran, Failed or Interrupted).
    pub record: TrialRecord,
    /// 0 ran, 1 failed, 128 + N interrupted.
    pub exit_code: u8,
}

/// Why a trial did not run to the end.
enum Stop {
    /// It could not run: one line.
    Failed(String),
    /// A signal or the link closing stopped it.
    Interrupted(StopReason),
}

impl From<JournalError> for Stop {
    fn from(e: JournalError) -> Stop {
        match e {
            JournalError::Interrupted(r) => Stop::Interrupted(r),
            e => Stop::Failed(e.to_string()),
        }
    }
}

fn failed(msg: impl std::fmt::Display) -> Stop {
    Stop::Failed(msg.to_string())
}

/// Fails with the stop reason if one was requested.
fn check_stop() -> Result<(), Stop> {
    match signals::stop_reason() {
        Some(r) => Err(Stop::Interrupted(r)),
        None => Ok(()),
    }
}

/// The directory `xrun-trial` itself is in: where a board's workdir and a
/// LAVA overlay hold the player and hackbench beside it.
pub fn default_bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Whether `path` is a regular file someone may execute.
pub fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs the trial `spec` asks for. Never panics and never returns before
/// every child is reaped and every knob restored.
pub fn run(spec: &TrialSpec, opts: &RunOptions) -> Finished {
    let stem = spec.trial.stem();
    let mut record = TrialRecord {
        schema: TRIAL_SCHEMA.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        trial: spec.trial.clone(),
        outcome: TrialOutcome::Ran,
        started_at: rfc3339(SystemTime::now()),
        ended_at: String::new(),
        knobs: Vec::new(),
        pm_qos_us: spec.pm_qos_us,
        player_command: Vec::new(),
        load_command: None,
        player: None,
        load: None,
        machine: fingerprint::collect(),
        facts: TrialFacts {
            loadavg_before: fingerprint::loadavg(),
            ..TrialFacts::default()
        },
        monitor: None,
    };
    let result = catch_unwind(AssertUnwindSafe(|| trial(spec, opts, &stem, &mut record)))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(failed(format!("xrun-trial panicked: {what}")))
        });
    record.ended_at = rfc3339(SystemTime::now());
    if record.facts.loadavg_after.is_empty() {
        record.facts.loadavg_after = fingerprint::loadavg();
    }
    let exit_code = match result {
        Ok(()) => {
            let n = record.player.as_ref().map_or(0, |p| p.totals.count);
            phase(&stem, format_args!("done: {n} underrun(s)"));
            EXIT_RAN
        }
        Err(Stop::Failed(reason)) => {
            say(format_args!("{stem}: could not run: {reason}"));
            record.outcome = TrialOutcome::Failed { reason };
            EXIT_FAILED
        }
        Err(Stop::Interrupted(r)) => {
            phase(
                &stem,
                format_args!("interrupted ({}): knobs restored", r.describe()),
            );
            record.outcome = TrialOutcome::Interrupted { by: r.describe() };
            r.exit_code()
        }
    };
    Finished { record, exit_code }
}

/// The trial proper; every early return has already stopped what it
/// started (the guards' drops).
fn trial(
    spec: &TrialSpec,
    opts: &RunOptions,
    stem: &str,
    record: &mut TrialRecord,
) -> Result<(), Stop> {
    let machine = &opts.machine;
    let lock = lock_and_replay(machine, stem)?;
    check_stop()?;
    let work = WorkDir::for_spec(spec)?;
    let audio = PreparedAudio::prepare(spec, machine)?;
    // The tools' reports are scratch: read into the record, then removed
    // on every path (a full disk, a failing tool), never left beside it.
    // Named as temporaries of this process, so that after a SIGKILL the
    // runner's sweep knows them for a dead writer's.
    let me = std::process::id();
    let player_json = &work.path.join(format!(".{stem}.player.json.tmp-{me}"));
    let load_json = &work.path.join(format!(".{stem}.load.json.tmp-{me}"));
    let mut scratch = Scratch(vec![player_json.clone(), load_json.clone()]);
    let duration_s = spec.duration_us as f64 / 1e6;
    let player_args = spec.player.to_args(&audio.path, duration_s, player_json);
    let load_args = spec
        .load
        .as_ref()
        .map(|l| l.to_args(spec.warmup_us, spec.duration_us, load_json));
    let bins = Binaries::find(&opts.bin_dir, load_args.is_some())?;
    record.player_command = command_line(&bins.player, &player_args);
    record.load_command = load_args.as_ref().map(|a| command_line(&bins.hackbench, a));
    let mut writes = Vec::new();
    for k in &spec.knobs {
        writes.extend(knobs::expand(k, &machine.roots).map_err(failed)?);
    }
    check_stop()?;
    let mut knobs = Knobs::journal(machine, &lock, stem, writes)?;
    if !knobs.is_empty() {
        phase(stem, format_args!("applying {} knob file(s)", knobs.len()));
    }
    let applied = knobs.apply();
    record.knobs = knobs.records();
    if let Err(e) = applied {
        let _ = knobs.restore();
        record.knobs = knobs.records();
        return Err(failed(e));
    }
    let pm_qos = match spec.pm_qos_us {
        Some(us) => Some(PmQosHold::hold(&machine.roots.pm_qos, us).map_err(failed)?),
        None => None,
    };
    record.facts.governors = fingerprint::governors(&machine.roots.cpu);
    let mut side = Beside::start(spec, machine, &lock, stem)?;
    fault_injection_point()?;
    let played = play_under_load(
        spec,
        stem,
        &bins,
        &work,
        &player_args,
        load_args.as_deref(),
        |pid| side.watch_player(pid),
    );
    let side_player = side.player;
    // A player that could not write its report where we said (a full
    // disk) keeps it elsewhere; it is scratch like the rest.
    if let Some(pid) = side_player {
        scratch
            .0
            .extend(xrunbench_schema::player::kept_report_paths(pid));
    }
    let (monitor_report, tracker) = side.finish(stem);
    record.monitor = monitor_report;
    drop(pm_qos);
    let restored = knobs.restore();
    record.knobs = knobs.records();
    record.facts.loadavg_after = fingerprint::loadavg();
    if !knobs.is_empty() && restored.is_ok() {
        phase(stem, "knobs restored");
    }
    let (player_status, load_status) = played?;
    restored.map_err(failed)?;
    check_player_status(player_status, &work.log(stem, "player"))?;
    let player = read_player_report(player_json)?;
    if let Some(report) = record.monitor.as_mut() {
        if let Some(start) = player_start_mono(&player) {
            place_spikes(report, start);
        }
        if let Some((tracker, pid)) = tracker.as_ref().zip(side_player) {
            account_for_spikes(report, tracker);
            account_for_underruns(stem, report, &player, tracker, pid);
        }
    }
    record.player = Some(player);
    if let Some(status) = load_status {
        record.load = Some(read_load_report(
            load_json,
            status,
            &work.log(stem, "load"),
        )?);
    }
    drop(scratch);
    drop(audio);
    Ok(())
}

/// Takes the machine lock (saying whom it waits for) and replays the
/// journals of trials killed before; fails if any of their knobs could not
/// be restored, as a trial must not start on a machine left changed.
fn lock_and_replay(machine: &Machine, stem: &str) -> Result<MachineLock, Stop> {
    let lock = MachineLock::acquire(&machine.lock_path, |holder| {
        say(format_args!(
            "waiting for the machine lock (held by pid {holder}) before trial {stem}"
        ));
    })?;
    let replay = journal::replay_all(machine, &lock);
    for line in &replay.lines {
        say(line);
    }
    if replay.unrestored > 0 {
        return Err(failed(
            "knobs a killed trial left changed could not be restored (see above): \
             fix that, then run `xrun-trial restore`",
        ));
    }
    Ok(lock)
}

/// The player's report, refused unless it has the schema this build reads.
fn read_player_report(path: &Path) -> Result<PlayerReport, Stop> {
    let player: PlayerReport = read_report(path, "xrun-player")?;
    if player.schema != xrunbench_schema::player::PLAYER_SCHEMA {
        return Err(failed(format!(
            "xrun-player's report has schema `{}`, expected `{}`",
            player.schema,
            xrunbench_schema::player::PLAYER_SCHEMA
        )));
    }
    Ok(player)
}

/// Test hook (feature `fault-injection`, never in a release build):
/// `XRUNBENCH_FAULT=panic` panics, `=error` fails and `=sleep` waits
/// (until stopped) right after the knobs were applied and the monitor and
/// trace started, so tests can prove those paths restore them.
#[cfg(feature = "fault-injection")]
fn fault_injection_point() -> Result<(), Stop> {
    match std::env::var("XRUNBENCH_FAULT").as_deref() {
        Ok("panic") => panic!("XRUNBENCH_FAULT=panic: injected panic after applying knobs"),
        Ok("error") => Err(failed(
            "XRUNBENCH_FAULT=error: injected error after applying knobs",
        )),
        Ok("sleep") => {
            signals::sleep_unless_stopped(Duration::from_secs(3600));
            check_stop()
        }
        _ => Ok(()),
    }
}

/// Without the `fault-injection` feature there is no hook: the variable
/// means nothing.
#[cfg(not(feature = "fault-injection"))]
fn fault_injection_point() -> Result<(), Stop> {
    Ok(())
}

fn command_line(bin: &Path, args: &[String]) -> Vec<String> {
    std::iter::once(bin.display().to_string())
        .chain(args.iter().cloned())
        .collect()
}

/// The board binaries a trial starts.
struct Binaries {
    player: PathBuf,
    hackbench: PathBuf,
}

impl Binaries {
    fn find(dir: &Path, need_load: bool) -> Result<Binaries, Stop> {
        let b = Binaries {
            player: dir.join("xrun-player"),
            hackbench: dir.join("xrun-hackbench"),
        };
        let needed = if need_load {
            vec![&b.player, &b.hackbench]
        } else {
            vec![&b.player]
        };
        for p in needed {
            if !is_executable(p) {
                return Err(failed(format!(
                    "{} is missing or not executable (board binaries go beside xrun-trial, or name their directory with --bin-dir)",
                    p.display()
                )));
            }
        }
        Ok(b)
    }
}

/// Where the player's and the load's logs and reports go: the spec's
/// `work_dir` (kept), or a private temporary directory removed at the end.
struct WorkDir {
    path: PathBuf,
    temporary: bool,
}

impl WorkDir {
    fn for_spec(spec: &TrialSpec) -> Result<WorkDir, Stop> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let (path, temporary) = match &spec.work_dir {
            Some(d) => (d.clone(), false),
            None => (
                std::env::temp_dir().join(format!(
                    "xrun-trial-{}-{}",
                    std::process::id(),
                    SEQ.fetch_add(1, Ordering::Relaxed)
                )),
                true,
            ),
        };
        std::fs::create_dir_all(&path)
            .map_err(|e| failed(format!("work_dir {}: {e}", path.display())))?;
        Ok(WorkDir { path, temporary })
    }

    fn log(&self, stem: &str, who: &str) -> PathBuf {
        self.path.join(format!("{stem}.{who}.log"))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The WAV the player plays; a generated tone lives in tmpfs and is
/// removed when this is dropped (every exit path, panics included; after
/// a SIGKILL the next trial's sweep removes it).
struct PreparedAudio {
    path: PathBuf,
    generated: bool,
}

impl PreparedAudio {
    fn prepare(spec: &TrialSpec, machine: &Machine) -> Result<PreparedAudio, Stop> {
        match &spec.audio {
            AudioInput::File(p) => match std::fs::metadata(p) {
                Ok(m) if m.is_file() => Ok(PreparedAudio {
                    path: p.clone(),
                    generated: false,
                }),
                Ok(_) => Err(failed(format!(
                    "audio.file: {} is not a regular file",
                    p.display()
                ))),
                Err(e) => Err(failed(format!("audio.file: {}: {e}", p.display()))),
            },
            AudioInput::Tone(tone) => {
                let path = machine.tmpfs.join(journal::tone_name(std::process::id()));
                let me = PreparedAudio {
                    path,
                    generated: true,
                };
                xrunbench_wav::write_tone(&me.path, tone, spec.duration_us as f64 / 1e6)
                    .map_err(|e| failed(format!("audio.tone: {e}")))?;
                Ok(me)
            }
        }
    }
}

impl Drop for PreparedAudio {
    fn drop(&mut self) {
        if self.generated {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Starts the load and the player in the spec's order, waits for the
/// player, stops the load.
fn play_under_load(
    spec: &TrialSpec,
    stem: &str,
    bins: &Binaries,
    work: &WorkDir,
    player_args: &[String],
    load_args: Option<&[String]>,
    mut on_player: impl FnMut(u32),
) -> Result<(ExitStatus, Option<ExitStatus>), Stop> {
    let start_delay = spec.load.as_ref().map_or(0, |l| l.start_delay_us);
    let mut load: Option<Child> = None;
    let spawn_load = |load: &mut Option<Child>| -> Result<(), Stop> {
        if let Some(args) = load_args {
            let child = Child::spawn(
                &bins.hackbench,
                args,
                &work.log(stem, "load"),
                "xrun-hackbench",
            )
            .map_err(failed)?;
            phase(
                stem,
                format_args!("load started (xrun-hackbench, pid {})", child.id()),
            );
            *load = Some(child);
        }
        Ok(())
    };
    if start_delay == 0 {
        spawn_load(&mut load)?;
    }
    if spec.warmup_us > 0 {
        phase(
            stem,
            format_args!("warm-up {} s", spec.warmup_us as f64 / 1e6),
        );
        if !signals::sleep_unless_stopped(Duration::from_micros(spec.warmup_us)) {
            check_stop()?;
        }
    }
    check_alive(&mut load)?;
    let mut player = Child::spawn(
        &bins.player,
        player_args,
        &work.log(stem, "player"),
        "xrun-player",
    )
    .map_err(failed)?;
    on_player(player.id());
    phase(
        stem,
        format_args!(
            "playing {} s (xrun-player, pid {})",
            spec.duration_us as f64 / 1e6,
            player.id()
        ),
    );
    if start_delay > 0 {
        if !signals::sleep_unless_stopped(Duration::from_micros(start_delay)) {
            check_stop()?;
        }
        spawn_load(&mut load)?;
    }
    // The player ends itself once it has played its duration of audio;
    // the guard only catches a hang. A player starved of its CPU (the very
    // thing measured: SCHED_OTHER under load, an emulated guest on a busy
    // host) takes that long plus every gap, which can be many times the
    // duration: slowness is a result, not a hang.
    let mut guard = HangGuard::new(Duration::from_micros(spec.duration_us), Instant::now());
    let player_status = loop {
        check_stop()?;
        if let Some(status) = player.try_wait().map_err(failed)? {
            break status;
        }
        // Again at each poll: the player starts threads of its own (cpal's
        // callback thread) after it has started.
        on_player(player.id());
        if let Some(why) = guard.hung(Instant::now(), cpu_time(player.id())) {
            return Err(failed(format!("xrun-player {why}; killed it")));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let load_status = match load.as_mut() {
        Some(l) => {
            let s = l.stop(Duration::from_secs(10)).map_err(failed)?;
            phase(stem, "load stopped");
            Some(s)
        }
        None => None,
    };
    Ok((player_status, load_status))
}

/// How long past its duration the player may take before it can count as
/// hung: 30 s, or four times its duration when that is longer (its gaps
/// add to its wall time).
fn player_grace(duration: Duration) -> Duration {
    (duration * 4).max(Duration::from_secs(30))
}

/// How many times its duration and grace a player that keeps using CPU may
/// run before it is stopped anyway (one spinning, never ending).
const PLAYER_BACKSTOP_FACTOR: u32 = 10;

/// Tells a hung player from a slow one. Past its duration and
/// [`player_grace`] a player still counts as working while its CPU time
/// grows: on a machine busy with other work (a load average of 60, an
/// emulated guest on a busy host) it plays on, slowly, and stopping it
/// would turn the machine's speed into a lost trial. One that has used no
/// CPU for a whole grace is hung; one that never ends is stopped at
/// [`PLAYER_BACKSTOP_FACTOR`] times the limit. Where its CPU time cannot
/// be read, the limit alone decides, as before.
struct HangGuard {
    started: Instant,
    limit: Duration,
    grace: Duration,
    cpu: Option<Duration>,
    progress_at: Instant,
}

impl HangGuard {
    fn new(duration: Duration, now: Instant) -> Self {
        let grace = player_grace(duration);
        HangGuard {
            started: now,
            limit: duration + grace,
            grace,
            cpu: None,
            progress_at: now,
        }
    }

    /// Why the player counts as hung at `now`, having used `cpu` so far.
    fn hung(&mut self, now: Instant, cpu: Option<Duration>) -> Option<String> {
        if cpu.is_some() && cpu != self.cpu {
            self.cpu = cpu;
            self.progress_at = now;
        }
        let ran = now.saturating_duration_since(self.started);
        if ran <= self.limit {
            return None;
        }
        let idle = now.saturating_duration_since(self.progress_at);
        if cpu.is_none() {
            Some(format!(
                "still running {} s after its duration",
                self.grace.as_secs()
            ))
        } else if idle > self.grace {
            Some(format!(
                "used no CPU for {} s, {} s after it started",
                idle.as_secs(),
                ran.as_secs()
            ))
        } else if ran > self.limit * PLAYER_BACKSTOP_FACTOR {
            Some(format!(
                "still running {} s after it started, {PLAYER_BACKSTOP_FACTOR} times its duration and grace",
                ran.as_secs()
            ))
        } else {
            None
        }
    }
}

/// Fails early if the load died during the warm-up (bad arguments, say).
fn check_alive(load: &mut Option<Child>) -> Result<(), Stop> {
    if let Some(l) = load.as_mut() {
        if let Some(status) = l.try_wait().map_err(failed)? {
            return Err(failed(format!(
                "xrun-hackbench exited during the warm-up ({status}): {}",
                last_line(l.log())
            )));
        }
    }
    Ok(())
}

fn check_player_status(status: ExitStatus, log: &Path) -> Result<(), Stop> {
    if status.success() {
        return Ok(());
    }
    let what = match status.code() {
        Some(2) => "rejected its input",
        Some(3) => "could not open or configure the device",
        _ => "failed",
    };
    Err(failed(format!(
        "xrun-player {what} ({status}): {}",
        last_line(log)
    )))
}

/// The last non-empty line of a log (what a failing tool said last).
fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("no output in {}", path.display()))
}

fn read_report<T: DeserializeOwned>(path: &Path, who: &str) -> Result<T, Stop> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| failed(format!("{who} wrote no report at {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        failed(format!(
            "{who}'s report {} does not parse: {e}",
            path.display()
        ))
    })
}

fn read_load_report(path: &Path, status: ExitStatus, log: &Path) -> Result<HackbenchReport, Stop> {
    // We stop hackbench with SIGTERM; it reports and exits 0 (or dies of
    // the signal if it was between rounds' bookkeeping).
    match read_report::<HackbenchReport>(path, "xrun-hackbench") {
        Ok(r) => Ok(r),
        Err(e) if ended_cleanly_or_by_sigterm(status) => Err(e),
        // What it said last is why (a report it could not write, say).
        Err(_) => Err(failed(format!(
            "xrun-hackbench failed ({status}): {}",
            last_line(log)
        ))),
    }
}

/// Files of the trial's own making, removed when it ends however it ends.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What runs beside playback: the latency monitor and the scheduler trace
/// (each when the spec asks for it). Stopped by [`Beside::finish`], or by
/// their own drops on every other way out.
struct Beside {
    monitor: Option<Monitor>,
    tracer: Option<Tracer>,
    /// Why the trace is off although asked for (said once).
    trace_off: Option<String>,
    /// The player's process (its main thread is the playback thread
    /// unless its report names another).
    player: Option<u32>,
    /// The player's threads the trace follows.
    player_threads: Vec<u32>,
}

impl Beside {
    /// Starts the trace first (so it sees the monitor's threads start),
    /// then the monitor.
    fn start(
        spec: &TrialSpec,
        machine: &Machine,
        lock: &MachineLock,
        stem: &str,
    ) -> Result<Beside, Stop> {
        let mut me = Beside {
            monitor: None,
            tracer: None,
            trace_off: None,
            player: None,
            player_threads: Vec::new(),
        };
        let Some(m) = &spec.monitor else {
            return Ok(me);
        };
        if m.trace {
            match Tracer::start(machine, lock, stem, m.trace_buffer_kb) {
                Ok(t) => {
                    phase(stem, "scheduler trace on (sched_switch, sched_wakeup)");
                    me.tracer = Some(t);
                }
                Err(off) => {
                    say(format_args!("{stem}: {off}; carrying on without it"));
                    me.trace_off = Some(off.0);
                }
            }
        }
        if m.latency {
            let cpus = monitor::cpus_to_measure(m, spec.player.cpu.as_ref().map(|c| c.cpus()));
            let mon = Monitor::start(m, &cpus).map_err(failed)?;
            if let Some(t) = &me.tracer {
                for th in mon.threads() {
                    t.watch(
                        th.tid,
                        Keep::Grid {
                            first: th.first_ns,
                            interval: u64::from(m.interval_us) * 1000,
                            // Half the threshold: the trace's µs stamps and
                            // the switch are a little before the clock read.
                            min_late: u64::from(m.threshold_us) * 500,
                        },
                    );
                }
            }
            phase(
                stem,
                format_args!(
                    "latency monitor on CPU {} (SCHED_FIFO {}, every {} us)",
                    cpus.iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    m.priority,
                    m.interval_us
                ),
            );
            me.monitor = Some(mon);
        }
        Ok(me)
    }

    /// Every thread of the player is watched too (called again while it
    /// plays, to follow the threads it starts): which of them fed the
    /// device, its report says only at the end.
    fn watch_player(&mut self, pid: u32) {
        self.player = Some(pid);
        let Some(t) = &self.tracer else {
            return;
        };
        for tid in std::iter::once(pid).chain(threads_of(pid)) {
            if !self.player_threads.contains(&tid) {
                self.player_threads.push(tid);
                t.watch(tid, Keep::All);
            }
        }
    }

    /// Stops both; the monitor's report (with the trace's status) and the
    /// trace's gaps.
    fn finish(
        self,
        stem: &str,
    ) -> (
        Option<xrunbench_schema::monitor::MonitorReport>,
        Option<GapTracker>,
    ) {
        let Beside {
            monitor,
            tracer,
            trace_off,
            ..
        } = self;
        let mut report = monitor.map(Monitor::stop);
        let mut tracker = None;
        let status = match tracer {
            Some(t) => {
                let (tr, status, restored) = t.finish();
                if let Err(e) = restored {
                    say(format_args!("{stem}: {e}"));
                }
                tracker = Some(tr);
                Some(status)
            }
            None => trace_off.map(|why| xrunbench_schema::monitor::TraceStatus {
                state: format!("off: {why}"),
                ..Default::default()
            }),
        };
        if status.is_some() {
            report.get_or_insert_with(Default::default).trace = status;
        }
        (report, tracker)
    }
}

/// Each spike's account: the gap of its CPU's measuring thread that ended
/// when the late wake-up ran.
fn account_for_spikes(report: &mut xrunbench_schema::monitor::MonitorReport, tracker: &GapTracker) {
    let tids: Vec<(usize, u32)> = report.cpus.iter().map(|c| (c.cpu, c.tid)).collect();
    for s in &mut report.spikes {
        let Some(&(_, tid)) = tids.iter().find(|(c, _)| *c == s.cpu) else {
            continue;
        };
        // It read its clock `latency` after the planned moment (µs
        // truncation: +1 µs), after it got the CPU: its gap ended between
        // the two (the trace's µs stamps and its fast clock: 50 µs).
        let ran = s.planned_mono_ns + (s.latency_us + 1) * 1000;
        // A gap that ended late accounts for it; else the thread had the
        // CPU when it read its late clock (time lost beneath the scheduler).
        s.account = tracker
            .account(tid, s.planned_mono_ns, ran + 50_000)
            .or_else(|| tracker.held_account(tid, s.planned_mono_ns, ran));
    }
}

/// The CLOCK_MONOTONIC instant the player's `at_s` counts from, when its
/// report says.
fn player_start_mono(player: &PlayerReport) -> Option<u64> {
    player.started_mono_ns
}

/// Puts each spike on the underruns' timeline (seconds since the player
/// started).
fn place_spikes(report: &mut xrunbench_schema::monitor::MonitorReport, start: u64) {
    for s in &mut report.spikes {
        s.at_s = Some(s.at_s_since(start));
    }
}

/// The ids of process `pid`'s threads (none once it has gone).
fn threads_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Each underrun's account: the gap of the thread that fed the device
/// (the player's report names it; else its main thread) it was in when the
/// buffer ran dry (at `at_s`; it noticed `at_least_ms` later). Printed as
/// the clause after aplay's line, and kept in the record.
fn account_for_underruns(
    stem: &str,
    report: &mut xrunbench_schema::monitor::MonitorReport,
    player: &PlayerReport,
    tracker: &GapTracker,
    pid: u32,
) {
    let Some(start) = player_start_mono(player) else {
        if !player.events.is_empty() {
            say(format_args!(
                "{stem}: the player's report has no started_mono_ns: its underruns cannot be placed in the trace"
            ));
        }
        return;
    };
    let feeder = player.process.feeder_tid.unwrap_or(pid);
    for (i, e) in player.events.iter().enumerate() {
        let dry = start + (e.at_s * 1e9).max(0.0) as u64;
        let long_ms = e.at_least_ms.unwrap_or(e.gap_ms);
        let noticed = dry + (long_ms * 1e6).max(0.0) as u64;
        // The gap it was in when the device ran dry; else (it was on the
        // CPU then, by the trace's µs stamps) the one that ended when it
        // noticed: it ran a little before, and 2 ms covers the stamps and
        // the work between running and noticing.
        let account = tracker.account_covering(feeder, dry).or_else(|| {
            tracker.account(feeder, dry.saturating_sub(1_000_000), noticed + 2_000_000)
        });
        let clause = match &account {
            Some(a) => a.clause(),
            None => "no gap of the playback thread in the trace".into(),
        };
        phase(
            stem,
            format_args!("underrun!!! (at least {long_ms:.3} ms long) — {clause}"),
        );
        report
            .underruns
            .push(xrunbench_schema::monitor::UnderrunAccount {
                event: i,
                at_s: e.at_s,
                clause,
                account,
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_player_still_using_cpu_past_its_limit_is_slow_not_hung() {
        // 10 s of audio: 40 s of grace, so the limit is 50 s.
        let t0 = Instant::now();
        let mut g = HangGuard::new(S(10), t0);
        assert_eq!(g.hung(t0, Some(S(0))), None);
        // Three minutes on, a second of CPU every 10 s of wall time: slow.
        for k in 1..=18 {
            assert_eq!(g.hung(t0 + S(10 * k), Some(S(k))), None, "at {} s", 10 * k);
        }
        // It stops using CPU at 180 s: hung once a whole grace has passed.
        assert_eq!(g.hung(t0 + S(220), Some(S(18))), None);
        let why = g.hung(t0 + S(221), Some(S(18))).unwrap();
        assert!(
            why.starts_with("used no CPU for 41 s, 221 s after"),
            "{why}"
        );
    }

    #[test]
    fn before_its_limit_a_player_is_never_hung() {
        let t0 = Instant::now();
        let mut g = HangGuard::new(S(10), t0);
        assert_eq!(g.hung(t0, Some(S(0))), None);
        // Idle since the start, but within duration and grace.
        assert_eq!(g.hung(t0 + S(50), Some(S(0))), None);
        assert_eq!(g.hung(t0 + S(50), None), None);
        // Just past it, idle since the start: hung.
        assert!(g.hung(t0 + S(51), Some(S(0))).is_some());
    }

    #[test]
    fn without_its_cpu_time_the_limit_alone_decides() {
        let t0 = Instant::now();
        let mut g = HangGuard::new(S(2), t0);
        // 2 s of audio: 30 s of grace.
        assert_eq!(g.hung(t0 + S(32), None), None);
        let why = g.hung(t0 + S(33), None).unwrap();
        assert_eq!(why, "still running 30 s after its duration");
    }

    #[test]
    fn a_player_that_never_ends_is_stopped_at_the_backstop() {
        let t0 = Instant::now();
        let mut g = HangGuard::new(S(2), t0);
        // Limit 32 s, backstop 320 s: spinning all the while.
        for k in 1..=320 {
            assert_eq!(g.hung(t0 + S(k), Some(S(k))), None, "at {k} s");
        }
        let why = g.hung(t0 + S(321), Some(S(321))).unwrap();
        assert!(why.contains("10 times its duration and grace"), "{why}");
    }

    #[test]
    fn this_process_has_a_cpu_time_and_a_gone_one_has_none() {
        assert!(cpu_time(std::process::id()).is_some());
        // Pid 0 has no /proc entry.
        assert_eq!(cpu_time(0), None);
    }
}
