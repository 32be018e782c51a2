//! `xrun-player`: streams a WAV file from tmpfs through ALSA (or the
//! `virtual` sink) and reports every underrun with its duration, plus
//! near-miss statistics (buffer fill at wake-up, wake-up lateness).
//!
//! This crate runs on the boards under test (aarch64, armv7): it depends on
//! nothing host-only.

//!
//! The library is the binary's body and what its tests reach: [`cli::Cli`],
//! [`run`], [`list_devices`], and two facts the tests ask about the
//! machine. Everything else is private to the crate.

/// `eprintln!` that never panics: the player's stderr is often a log file,
/// and a full disk under it must not turn a measurement into a panic (std's
/// `eprintln!` panics when the write fails). Defined before the modules so
/// that it is the one they see.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics; see `eprintln!` above.
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

pub mod cli;
pub mod clock;
pub mod convert;
pub mod nearmiss;
mod play;
mod report;
pub mod ring;
mod signals;
mod sink;
mod system;
mod tmpfs;

pub use sink::cpal_sink::list_devices;
pub use tmpfs::is_on_tmpfs;

use std::path::{Path, PathBuf};

use xrunbench_schema::player::{EndReason, FileInfo, PlayerReport, ProcessInfo};
use xrunbench_schema::{Backend, Priority};
use xrunbench_wav::WavStream;

use cli::Cli;
use play::PlayOptions;
use sink::{BufferRequest, Sink, StreamFormat};
use tmpfs::{TmpCopy, TmpfsPolicy};

/// Why the player failed; each kind has its exit code.
#[derive(Debug, thiserror::Error)]
pub enum PlayerError {
    /// Bad input or usage: exit 2.
    #[error("{0}")]
    Input(String),
    /// The device could not be opened or configured: exit 3.
    #[error("{0}")]
    Device(String),
    /// Anything else: exit 1.
    #[error("{0}")]
    Other(String),
}

impl PlayerError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            PlayerError::Input(_) => 2,
            PlayerError::Device(_) => 3,
            PlayerError::Other(_) => 1,
        }
    }
}

/// What a finished run produced.
#[derive(Debug)]
pub struct Finished {
    /// The report (already written where `--json` said).
    pub report: PlayerReport,
    /// The exit code: 0, 1 after a fatal underrun, 128 + the signal after
    /// SIGINT, SIGTERM or SIGHUP (the report written first).
    pub exit_code: u8,
}

/// Whether the machine has a sound card (ALSA's /proc/asound/cards lists one).
pub fn has_sound_card() -> bool {
    std::fs::read_to_string("/proc/asound/cards")
        .map(|s| {
            s.lines()
                .any(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        })
        .unwrap_or(false)
}

/// The backend `--backend` resolves to, and the sentence that says why.
fn choose_backend(cli: &Cli) -> (Backend, String) {
    match cli.backend {
        Backend::Alsa => (Backend::Alsa, "alsa (asked for)".into()),
        Backend::Virtual => (Backend::Virtual, "virtual (asked for)".into()),
        Backend::Cpal => (
            Backend::Cpal,
            format!("cpal, host {} (asked for)", cli.host),
        ),
        Backend::Auto if cli.device != "default" => (
            Backend::Alsa,
            format!("auto: alsa, because -D {} names a device", cli.device),
        ),
        Backend::Auto if has_sound_card() => {
            (Backend::Alsa, "auto: alsa, a sound card is present".into())
        }
        Backend::Auto => (
            Backend::Virtual,
            "auto: virtual, no sound card found (/proc/asound/cards lists none)".into(),
        ),
    }
}

/// The file to stream from, after the tmpfs policy: the original, or a
/// copy on /dev/shm that is removed when the returned guard drops.
fn stream_source(
    path: &Path,
    policy: TmpfsPolicy,
    bytes: u64,
) -> Result<(PathBuf, Option<TmpCopy>), PlayerError> {
    if policy == TmpfsPolicy::Off {
        return Ok((path.to_path_buf(), None));
    }
    let on_tmpfs = tmpfs::is_on_tmpfs(path)
        .map_err(|e| PlayerError::Input(format!("{}: cannot stat: {e}", path.display())))?;
    match (on_tmpfs, policy) {
        (true, _) => Ok((path.to_path_buf(), None)),
        (false, TmpfsPolicy::Require) => Err(PlayerError::Input(format!(
            "{}: not on tmpfs (--tmpfs require); copy it to {} first",
            path.display(),
            tmpfs::SHM_DIR
        ))),
        (false, _) => {
            let shm = Path::new(tmpfs::SHM_DIR);
            if let Some(free) = tmpfs::free_bytes(shm).filter(|&f| f < bytes) {
                return Err(PlayerError::Other(format!(
                    "{}: what will be played takes {bytes} bytes and {} has {free} free \
                     (use --tmpfs off to play in place, or a shorter --duration)",
                    path.display(),
                    tmpfs::SHM_DIR
                )));
            }
            let copy = TmpCopy::create(path, shm, bytes).map_err(|e| {
                PlayerError::Other(format!(
                    "{}: cannot copy to {}: {e} (use --tmpfs off to play in place)",
                    path.display(),
                    tmpfs::SHM_DIR
                ))
            })?;
            Ok((copy.path().to_path_buf(), Some(copy)))
        }
    }
}

/// The buffer and period as the command line asks for them.
fn buffer_request(cli: &Cli) -> BufferRequest {
    BufferRequest {
        buffer_time_us: cli.buffer_time,
        period_time_us: cli.period_time,
        buffer_frames: cli.buffer_size,
        period_frames: cli.period_size,
    }
}

fn open_sink(
    cli: &Cli,
    choice: Backend,
    fmt: StreamFormat,
    req: &BufferRequest,
) -> Result<Box<dyn Sink>, PlayerError> {
    match choice {
        Backend::Virtual => Ok(Box::new(sink::virtual_pcm::VirtualPcm::open(fmt, req))),
        Backend::Cpal => {
            let opts = sink::cpal_sink::CpalOptions {
                host: cli.host,
                device: cli.device.clone(),
                stalls: cli.selftest_stall.clone(),
                quiet: cli.quiet,
                priority: cli.priority,
                cpus: cli.cpu.clone(),
            };
            sink::cpal_sink::CpalSink::open(&opts, fmt, req)
                .map(|s| Box::new(s) as Box<dyn Sink>)
                .map_err(|e| match e {
                    sink::cpal_sink::CpalOpenError::NotBuilt { .. } => {
                        PlayerError::Input(e.to_string())
                    }
                    _ => PlayerError::Device(e.to_string()),
                })
        }
        _ => sink::alsa::AlsaSink::open(&cli.device, fmt, req)
            .map(|s| Box::new(s) as Box<dyn Sink>)
            .map_err(|e| PlayerError::Device(e.to_string())),
    }
}

/// The kernel's default for what one card may allocate for its PCM
/// buffers, 32 MiB (`max_alloc_per_card` in sound/core/pcm_memory.c).
pub const DEFAULT_MAX_ALLOC_PER_CARD: u64 = 32 * 1024 * 1024;

/// Where the running kernel says what it lets one card allocate (a
/// parameter of the `snd_pcm` module, writable by root: 0644).
const MAX_ALLOC_PARAM: &str = "/sys/module/snd_pcm/parameters/max_alloc_per_card";

/// The largest buffer (and period) the player asks for, in bytes, and
/// where that figure comes from: what this kernel lets one card allocate
/// (`snd_pcm.max_alloc_per_card`, read from [`MAX_ALLOC_PARAM`]), or,
/// where snd_pcm is not loaded or sets no limit (0), the kernel's default.
/// A request beyond it is refused as bad input rather than allocated,
/// locked, or overflowed: no hardware PCM could take it.
pub fn max_buffer_bytes() -> (u64, &'static str) {
    max_buffer_bytes_from(std::fs::read_to_string(MAX_ALLOC_PARAM).ok().as_deref())
}

/// [`max_buffer_bytes`] given the parameter's text (`None`: unreadable).
fn max_buffer_bytes_from(param: Option<&str>) -> (u64, &'static str) {
    match param.and_then(|t| t.trim().parse::<u64>().ok()) {
        Some(n) if n > 0 => (n, "this kernel's snd_pcm.max_alloc_per_card"),
        _ => (
            DEFAULT_MAX_ALLOC_PER_CARD,
            "the kernel's default max_alloc_per_card",
        ),
    }
}

/// Checks the buffer and period asked for against [`max_buffer_bytes`]
/// for this file's frame size; returns the note to make when the period
/// is longer than the buffer (the sink then shortens it).
fn check_buffer_request(
    req: &BufferRequest,
    rate: u32,
    frame_bytes: u64,
) -> Result<Option<(u64, u64)>, PlayerError> {
    let (limit, source) = max_buffer_bytes();
    let frames_of_us = |us: u32| (u128::from(us) * u128::from(rate) + 500_000) / 1_000_000;
    let check = |option: String, frames: u128| -> Result<u64, PlayerError> {
        let bytes = frames * u128::from(frame_bytes);
        if bytes > u128::from(limit) {
            return Err(PlayerError::Input(format!(
                "{option}: {bytes} bytes ({frames} frames of {frame_bytes} bytes), more than \
                 ALSA gives one card ({limit} bytes, {source})"
            )));
        }
        // Bounded above by a u64 byte count: the frames fit too.
        Ok(frames as u64)
    };
    let buffer = match (req.buffer_frames, req.buffer_time_us) {
        (Some(f), _) => Some(check(format!("--buffer-size {f}"), u128::from(f))?),
        (None, Some(us)) => Some(check(format!("--buffer-time {us}"), frames_of_us(us))?),
        (None, None) => None,
    };
    let period = match (req.period_frames, req.period_time_us) {
        (Some(f), _) => Some(check(format!("--period-size {f}"), u128::from(f))?),
        (None, Some(us)) => Some(check(format!("--period-time {us}"), frames_of_us(us))?),
        (None, None) => None,
    };
    Ok(match (buffer, period) {
        (Some(b), Some(p)) if p > b => Some((p, b)),
        _ => None,
    })
}

/// Bytes of the file that playback will read: the header and the frames
/// `--duration` plays (all of them without it, or when the file repeats).
fn bytes_to_play(spec: &xrunbench_wav::WavSpec, duration_s: Option<f64>) -> u64 {
    let frames = match duration_s {
        Some(d) => spec.frames.min((d * f64::from(spec.rate)).ceil() as u64),
        None => spec.frames,
    };
    spec.data_offset + frames * spec.frame_bytes() as u64
}

/// The writer's priority. With cpal the device is fed by the callback's
/// thread, which gets `--priority` itself; the writer (the reader of the
/// file) runs one real-time step below it, so that at the same priority on
/// the same CPU it never holds the callback off (SCHED_FIFO does not
/// preempt its equals).
fn writer_priority(cli: &Cli, choice: Backend) -> Option<Priority> {
    use Priority::{Fifo, Rr};
    match (cli.priority, choice) {
        (Some(Fifo(n)), Backend::Cpal) if n > 1 => Some(Fifo(n - 1)),
        (Some(Rr(n)), Backend::Cpal) if n > 1 => Some(Rr(n - 1)),
        (p, _) => p,
    }
}

/// Applies the writer's priority and `--cpu` to the calling thread;
/// returns what took, for the report.
fn apply_scheduling(cli: &Cli, choice: Backend) -> (String, String) {
    let priority = writer_priority(cli, choice).map_or("unchanged".into(), system::apply_priority);
    let affinity = cli
        .cpu
        .as_ref()
        .map_or("unchanged".into(), system::apply_affinity);
    (priority, affinity)
}

/// Plays as the command line says; writes the report; returns it.
pub fn run(cli: &Cli) -> Result<Finished, PlayerError> {
    signals::install();
    let Some(file) = cli.file.as_deref() else {
        return Err(PlayerError::Input("a FILE to play is required".into()));
    };
    let json = cli
        .json
        .as_deref()
        .map(report::JsonDest::check)
        .transpose()
        .map_err(PlayerError::Input)?;
    // Validate the file as given (errors name the user's path), then stream
    // from tmpfs.
    let spec = WavStream::open(file)
        .map_err(|e| PlayerError::Input(e.to_string()))?
        .spec()
        .clone();
    let req = buffer_request(cli);
    let long_period = check_buffer_request(&req, spec.rate, spec.frame_bytes() as u64)?;
    let bytes = bytes_to_play(&spec, cli.duration);
    // Copies of players killed before (their pid is gone) go first.
    tmpfs::sweep_dead_copies(Path::new(tmpfs::SHM_DIR));
    let (source, _copy) = stream_source(file, cli.tmpfs, bytes)?;
    let mut stream = WavStream::open(&source).map_err(|e| PlayerError::Input(e.to_string()))?;
    let mut notes = Vec::new();
    if _copy.is_some() {
        notes.extend(partial_copy_note(file, bytes));
    }
    let fmt = stream_format(&spec);
    let (choice, why) = choose_backend(cli);
    if !cli.quiet && cli.backend == Backend::Auto {
        eprintln!("xrun-player: backend {why}");
    }
    let mut sink = open_sink(cli, choice, fmt, &req)?;
    if let Some((asked, buffer)) = long_period {
        // aplay's -v would show it; we say it, as the device changed it.
        notes.push(format!(
            "period of {asked} frames asked for is longer than the buffer ({buffer} frames): \
             the period is {} frames",
            sink.setup().period_frames
        ));
    }
    print_setup(cli, &notes, sink.as_mut());
    // After the device is open, so that a sound server's client threads
    // keep their own scheduling: only the playback thread is changed (and
    // with cpal, the thread that runs its data callback: the sink applies
    // the same settings there itself).
    let (mut priority, mut affinity) = apply_scheduling(cli, choice);
    let mlock = lock_memory(cli);
    warn_failed_settings(cli, &priority, &affinity, &mlock);
    let opts = play_options(cli, choice);
    let started_at = xrunbench_schema::doc::rfc3339_millis(std::time::SystemTime::now());
    let outcome = play::play(sink.as_mut(), &mut stream, &opts, signals::stop_flag())
        .map_err(|e| PlayerError::Other(e.to_string()))?;
    add_feeder_scheduling(&mut priority, &mut affinity, &outcome.feeder_scheduling);
    let usage = system::usage();
    let file = file_info(file, &source, _copy.is_some(), &spec);
    let process = ProcessInfo {
        cpu_user_ms: usage.user_ms,
        cpu_sys_ms: usage.sys_ms,
        max_rss_kib: usage.max_rss_kib,
        mlock,
        priority,
        affinity,
        feeder_tid: outcome.feeder_tid,
    };
    let mut params = report::negotiated(sink.setup(), &why);
    params.notes.extend(notes);
    let read_error = outcome.read_error.clone();
    let report = report::build(started_at, file, params, outcome, process);
    let written = json.as_ref().map(|d| d.write(&report));
    // The summary comes whatever happened to the report: it is the
    // measurement too.
    if !cli.quiet {
        eprint!("{}", report::summary(&report));
    }
    if let Some(e) = read_error {
        return Err(PlayerError::Other(format!(
            "{}: reading it failed after {:.3} s of audio (was it truncated while playing?): \
             {e}; the report covers what played",
            report.file.path, report.audio_seconds
        )));
    }
    if let (Some(Err(e)), Some(dest)) = (written, &cli.json) {
        return Err(unwritten_report_error(&e, dest, &report));
    }
    let exit_code = exit_code_for(report.ended);
    Ok(Finished { report, exit_code })
}

/// The note to make when the tmpfs copy holds only part of `file`: the
/// `bytes` that `--duration` plays.
fn partial_copy_note(file: &Path, bytes: u64) -> Option<String> {
    let whole = std::fs::metadata(file).map_or(0, |m| m.len());
    if bytes < whole {
        Some(format!(
            "copied {bytes} of {whole} bytes of {} to {}: what --duration plays",
            file.display(),
            tmpfs::SHM_DIR
        ))
    } else {
        None
    }
}

/// The stream format the sink is opened with: the file's.
fn stream_format(spec: &xrunbench_wav::WavSpec) -> StreamFormat {
    StreamFormat {
        format: spec.format,
        rate: spec.rate,
        channels: spec.channels,
    }
}

/// Says the notes (unless `--quiet`) and, with `-v`, the device's setup.
fn print_setup(cli: &Cli, notes: &[String], sink: &mut dyn Sink) {
    if !cli.quiet {
        for n in notes {
            eprintln!("xrun-player: note: {n}");
        }
    }
    if cli.verbose > 0 {
        eprint!("{}", sink.describe());
    }
}

/// Locks the player's memory unless `--no-mlock`; returns what took, for
/// the report.
fn lock_memory(cli: &Cli) -> String {
    if cli.no_mlock {
        "off".into()
    } else {
        system::lock_memory()
    }
}

/// Warns (unless `--quiet`) of each scheduling or memory setting that
/// failed: playback goes on without it, but the measurement is weaker.
fn warn_failed_settings(cli: &Cli, priority: &str, affinity: &str, mlock: &str) {
    for (what, value) in [
        ("priority", priority),
        ("affinity", affinity),
        ("mlock", mlock),
    ] {
        if value.contains("failed") && !cli.quiet {
            eprintln!("xrun-player: warning: {what} {value}");
        }
    }
}

/// How to play, as the command line says, for the sink `choice`.
fn play_options(cli: &Cli, choice: Backend) -> PlayOptions {
    PlayOptions {
        duration_s: cli.duration,
        loops: cli.loops,
        fatal_errors: cli.fatal_errors,
        quiet: cli.quiet,
        // cpal's stalls go into its data callback (given at open), not
        // into this writer thread.
        stalls: if choice == Backend::Cpal {
            Vec::new()
        } else {
            cli.selftest_stall.clone()
        },
    }
}

/// Adds to the writer's priority and affinity those of the thread that
/// fed the device, when the sink had one of its own (cpal's callback).
fn add_feeder_scheduling(
    priority: &mut String,
    affinity: &mut String,
    feeder: &(Option<String>, Option<String>),
) {
    if let Some(p) = &feeder.0 {
        *priority = format!("{priority} (writer); {p} (device callback thread)");
    }
    if let Some(a) = &feeder.1 {
        *affinity = format!("{affinity} (writer); {a} (device callback thread)");
    }
}

/// The report's account of the file: as given, where it played from, and
/// its format.
fn file_info(
    file: &Path,
    source: &Path,
    copied_to_tmpfs: bool,
    spec: &xrunbench_wav::WavSpec,
) -> FileInfo {
    FileInfo {
        path: file.display().to_string(),
        played_from: source.display().to_string(),
        copied_to_tmpfs,
        format: spec.format.alsa_name().to_string(),
        rate: spec.rate,
        channels: spec.channels,
        frames: spec.frames,
    }
}

/// The error for a report `--json` could not take: the report is kept
/// elsewhere if it can be, and the error says where.
fn unwritten_report_error(e: &std::io::Error, dest: &Path, report: &PlayerReport) -> PlayerError {
    let kept = match report::keep_elsewhere(report) {
        Some(p) => format!("the report is in {} instead", p.display()),
        None => "the report could not be kept anywhere".into(),
    };
    PlayerError::Other(format!(
        "--json {}: cannot write the report: {e}; {kept}",
        dest.display()
    ))
}

/// The exit code for a playback that ended for `ended`.
fn exit_code_for(ended: EndReason) -> u8 {
    match (ended, signals::received()) {
        (EndReason::FatalUnderrun, _) => 1,
        // As a shell reports a process a signal ended: 130 for SIGINT.
        (EndReason::Signal, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_bound_is_the_kernels_max_alloc_per_card() {
        let raised = (64 * 1024 * 1024).to_string();
        assert_eq!(
            max_buffer_bytes_from(Some(&format!("{raised}\n"))).0,
            64 << 20
        );
        // Not loaded, no limit (0), or unreadable text: the kernel's default.
        for param in [None, Some("0\n"), Some("lots")] {
            assert_eq!(max_buffer_bytes_from(param).0, DEFAULT_MAX_ALLOC_PER_CARD);
        }
        assert_eq!(DEFAULT_MAX_ALLOC_PER_CARD, 33_554_432);
    }
}
