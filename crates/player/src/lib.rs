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

pub mod cli;
mod clock;
mod convert;
mod nearmiss;
mod play;
mod report;
mod ring;
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
    /// The exit code: 0, or 1 after a fatal underrun.
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
            let copy = TmpCopy::create(path, Path::new(tmpfs::SHM_DIR)).map_err(|e| {
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

fn open_sink(cli: &Cli, choice: Backend, fmt: StreamFormat) -> Result<Box<dyn Sink>, PlayerError> {
    let req = BufferRequest {
        buffer_time_us: cli.buffer_time,
        period_time_us: cli.period_time,
        buffer_frames: cli.buffer_size,
        period_frames: cli.period_size,
    };
    match choice {
        Backend::Virtual => Ok(Box::new(sink::virtual_pcm::VirtualPcm::open(fmt, &req))),
        Backend::Cpal => {
            let opts = sink::cpal_sink::CpalOptions {
                host: cli.host,
                device: cli.device.clone(),
                stalls: cli.selftest_stall.clone(),
                quiet: cli.quiet,
                priority: cli.priority,
                cpus: cli.cpu.clone(),
            };
            sink::cpal_sink::CpalSink::open(&opts, fmt, &req)
                .map(|s| Box::new(s) as Box<dyn Sink>)
                .map_err(|e| match e {
                    sink::cpal_sink::CpalOpenError::NotBuilt { .. } => {
                        PlayerError::Input(e.to_string())
                    }
                    _ => PlayerError::Device(e.to_string()),
                })
        }
        _ => sink::alsa::AlsaSink::open(&cli.device, fmt, &req)
            .map(|s| Box::new(s) as Box<dyn Sink>)
            .map_err(|e| PlayerError::Device(e.to_string())),
    }
}

fn check_json_destination(dest: &Path) -> Result<(), PlayerError> {
    if dest == Path::new("-") {
        return Ok(());
    }
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(PlayerError::Input(format!(
            "--json {}: directory {} does not exist",
            dest.display(),
            parent.display()
        )));
    }
    Ok(())
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
    if let Some(dest) = &cli.json {
        check_json_destination(dest)?;
    }
    // Validate the file as given (errors name the user's path), then stream
    // from tmpfs.
    drop(WavStream::open(file).map_err(|e| PlayerError::Input(e.to_string()))?);
    let (source, _copy) = stream_source(file, cli.tmpfs)?;
    let mut stream = WavStream::open(&source).map_err(|e| PlayerError::Input(e.to_string()))?;
    let spec = stream.spec().clone();
    let fmt = StreamFormat {
        format: spec.format,
        rate: spec.rate,
        channels: spec.channels,
    };
    let (choice, why) = choose_backend(cli);
    if !cli.quiet && cli.backend == Backend::Auto {
        eprintln!("xrun-player: backend {why}");
    }
    let mut sink = open_sink(cli, choice, fmt)?;
    if cli.verbose > 0 {
        eprint!("{}", sink.describe());
    }
    // After the device is open, so that a sound server's client threads
    // keep their own scheduling: only the playback thread is changed (and
    // with cpal, the thread that runs its data callback: the sink applies
    // the same settings there itself).
    let (mut priority, mut affinity) = apply_scheduling(cli, choice);
    let mlock = if cli.no_mlock {
        "off".into()
    } else {
        system::lock_memory()
    };
    for (what, value) in [
        ("priority", &priority),
        ("affinity", &affinity),
        ("mlock", &mlock),
    ] {
        if value.contains("failed") && !cli.quiet {
            eprintln!("xrun-player: warning: {what} {value}");
        }
    }
    let opts = PlayOptions {
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
    };
    let started_at = xrunbench_schema::doc::rfc3339_millis(std::time::SystemTime::now());
    let outcome = play::play(sink.as_mut(), &mut stream, &opts, signals::stop_flag())
        .map_err(|e| PlayerError::Other(e.to_string()))?;
    if let (Some(p), _) = &outcome.feeder_scheduling {
        priority = format!("{priority} (writer); {p} (device callback thread)");
    }
    if let (_, Some(a)) = &outcome.feeder_scheduling {
        affinity = format!("{affinity} (writer); {a} (device callback thread)");
    }
    let usage = system::usage();
    let file = FileInfo {
        path: file.display().to_string(),
        played_from: source.display().to_string(),
        copied_to_tmpfs: _copy.is_some(),
        format: spec.format.alsa_name().to_string(),
        rate: spec.rate,
        channels: spec.channels,
        frames: spec.frames,
    };
    let process = ProcessInfo {
        cpu_user_ms: usage.user_ms,
        cpu_sys_ms: usage.sys_ms,
        max_rss_kib: usage.max_rss_kib,
        mlock,
        priority,
        affinity,
    };
    let params = report::negotiated(sink.setup(), &why);
    let report = report::build(started_at, file, params, outcome, process);
    if let Some(dest) = &cli.json {
        report::write_json(&report, dest)
            .map_err(|e| PlayerError::Other(format!("--json: cannot write the report: {e}")))?;
    }
    if !cli.quiet {
        eprint!("{}", report::summary(&report));
    }
    let exit_code = u8::from(report.ended == EndReason::FatalUnderrun);
    Ok(Finished { report, exit_code })
}
