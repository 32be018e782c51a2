//! The `alsa` sink: any ALSA PCM by name, blocking interleaved writes.
//!
//! Parameters are negotiated the way aplay does it (period first, then
//! buffer; start and stop thresholds = buffer; avail_min = period), with
//! MONOTONIC trigger timestamps so that a hardware PCM's own stamp of the
//! underrun compares with our clock.

use alsa::pcm::{Access, Format, Frames, HwParams, State, TstampType, PCM};
use alsa::{Direction, ValueOr};

use super::{
    BufferRequest, Setup, Sink, SinkError, StreamFormat, XrunStamp, DEFAULT_BUFFER_TIME_US,
};
use crate::clock;
use xrunbench_schema::player::ClockSource;
use xrunbench_schema::{Backend, SampleFormat};

/// Why a PCM could not be opened or configured.
#[derive(Debug, thiserror::Error)]
#[error("device {device:?}: {what}")]
pub struct OpenError {
    /// The PCM name.
    pub device: String,
    /// What failed, and what the device accepts where that helps.
    pub what: String,
}

/// An ALSA playback PCM.
pub struct AlsaSink {
    pcm: PCM,
    setup: Setup,
}

impl std::fmt::Debug for AlsaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlsaSink")
            .field("setup", &self.setup)
            .finish()
    }
}

pub(crate) fn alsa_format(f: SampleFormat) -> Format {
    match f {
        SampleFormat::U8 => Format::U8,
        SampleFormat::S16Le => Format::S16LE,
        SampleFormat::S24_3Le => Format::S243LE,
        SampleFormat::S32Le => Format::S32LE,
        SampleFormat::FloatLe => Format::FloatLE,
    }
}

/// Formats worth listing when a device refuses the file's.
const COMMON_FORMATS: &[Format] = &[
    Format::U8,
    Format::S16LE,
    Format::S24LE,
    Format::S243LE,
    Format::S32LE,
    Format::FloatLE,
    Format::Float64LE,
];

fn err(device: &str, what: impl Into<String>) -> OpenError {
    OpenError {
        device: device.to_string(),
        what: what.into(),
    }
}

impl AlsaSink {
    /// Opens `device` for playback of `fmt` with aplay's buffer rules.
    pub fn open(
        device: &str,
        fmt: StreamFormat,
        req: &BufferRequest,
    ) -> Result<AlsaSink, OpenError> {
        // alsa-lib and sound-server client libraries (libjack) print their
        // own diagnostics on stderr; catch them so that an error stays one
        // line, with their words in it.
        let (opened, said) = capture_stderr(|| {
            let pcm = PCM::new(device, Direction::Playback, false)
                .map_err(|e| err(device, format!("cannot open PCM: {}", describe_errno(&e))))?;
            let (buffer_frames, period_frames) = configure_hw(&pcm, device, fmt, req)?;
            let thresholds = configure_sw(&pcm, device, buffer_frames, period_frames)?;
            Ok((pcm, buffer_frames, period_frames, thresholds))
        });
        let (pcm, buffer_frames, period_frames, (start, stop)) =
            opened.map_err(|mut e: OpenError| {
                let words: Vec<&str> = said
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                if !words.is_empty() {
                    e.what = format!("{} (it said: {})", e.what, words.join("; "));
                }
                e
            })?;
        if !said.trim().is_empty() {
            // It opened after all: pass the diagnostics on untouched.
            eprint!("{said}");
        }
        // On a card (hw:, plughw:) the kernel stamps the underrun; ioplug
        // servers (jack, pulse, pipewire) report card -1 and do not.
        let hardware = pcm.info().map(|i| i.get_card() >= 0).unwrap_or(false);
        let mut notes = Vec::new();
        let clock = match (hardware, super::alsa_time::timestamps_are_safe()) {
            (true, true) if !is_hw_pcm(&pcm) => {
                notes.push(format!(
                    "the kernel's underrun timestamps are read on a hw: PCM only; {device} \
                     reaches the card through libasound's plugins (plug, dmix), whose \
                     snd_pcm_status can abort the player after an underrun (its assertion \
                     `status->appl_ptr == *pcm->appl.ptr`, on ARM), so the player's own clock \
                     times underruns"
                ));
                ClockSource::Player
            }
            (true, true) => ClockSource::Kernel,
            (true, false) => {
                notes.push(format!(
                    "the kernel's underrun timestamps are not read: {}; the player's own clock times underruns",
                    super::alsa_time::mismatch()
                ));
                ClockSource::Player
            }
            (false, _) => ClockSource::Player,
        };
        let setup = Setup {
            backend: Backend::Alsa,
            device: device.to_string(),
            hardware,
            clock,
            format: fmt.format,
            rate: fmt.rate,
            channels: fmt.channels as u32,
            buffer_frames,
            period_frames,
            start_threshold: start,
            stop_threshold: stop,
            notes,
        };
        Ok(AlsaSink { pcm, setup })
    }
}

/// Whether `pcm` is the kernel's own PCM (libasound's `hw` type), not a
/// plugin in front of it: what `snd_pcm_dump` says first.
fn is_hw_pcm(pcm: &PCM) -> bool {
    let Ok(mut out) = alsa::Output::buffer_open() else {
        return false;
    };
    pcm.dump(&mut out).is_ok() && out.buffer_string(|b| b.starts_with(b"Hardware PCM"))
}

/// Runs `f` with file descriptor 2 redirected to an in-memory file, and
/// returns what was written there. If the redirection cannot be set up,
/// `f` runs with stderr untouched.
fn capture_stderr<T>(f: impl FnOnce() -> T) -> (T, String) {
    use std::io::{Read, Seek};
    use std::os::fd::FromRawFd;
    // SAFETY: plain fd syscalls; every fd opened here is closed here (the
    // memfd by the File that takes it over).
    unsafe {
        let mem = libc::memfd_create(c"xrun-player-stderr".as_ptr(), libc::MFD_CLOEXEC);
        let saved = libc::dup(2);
        if mem < 0 || saved < 0 || libc::dup2(mem, 2) < 0 {
            for fd in [mem, saved] {
                if fd >= 0 {
                    libc::close(fd);
                }
            }
            return (f(), String::new());
        }
        let result = f();
        libc::dup2(saved, 2);
        libc::close(saved);
        let mut file = std::fs::File::from_raw_fd(mem);
        let mut text = String::new();
        let _ = file.rewind().and_then(|_| file.read_to_string(&mut text));
        (result, text)
    }
}

fn describe_errno(e: &alsa::Error) -> String {
    let text = std::io::Error::from_raw_os_error(e.errno()).to_string();
    // strerror's words, without Rust's " (os error N)" suffix.
    text.split(" (os error")
        .next()
        .unwrap_or_default()
        .to_string()
}

fn configure_hw(
    pcm: &PCM,
    device: &str,
    fmt: StreamFormat,
    req: &BufferRequest,
) -> Result<(u64, u64), OpenError> {
    let hwp = HwParams::any(pcm).map_err(|e| {
        err(
            device,
            format!("no hardware parameters: {}", describe_errno(&e)),
        )
    })?;
    hwp.set_access(Access::RWInterleaved)
        .map_err(|_| err(device, "does not accept interleaved read/write access"))?;
    let want = alsa_format(fmt.format);
    if hwp.set_format(want).is_err() {
        let accepted: Vec<String> = COMMON_FORMATS
            .iter()
            .filter(|f| hwp.test_format(**f).is_ok())
            .map(|f| f.to_string())
            .collect();
        return Err(err(
            device,
            format!(
                "does not accept sample format {}; it accepts {} (use a plug: device to convert)",
                fmt.format.alsa_name(),
                list_or_none(&accepted)
            ),
        ));
    }
    if hwp.set_channels(fmt.channels as u32).is_err() {
        let (lo, hi) = (
            hwp.get_channels_min().unwrap_or(0),
            hwp.get_channels_max().unwrap_or(0),
        );
        return Err(err(
            device,
            format!(
                "does not accept {} channels; it accepts {lo}..={hi}",
                fmt.channels
            ),
        ));
    }
    if hwp.set_rate(fmt.rate, ValueOr::Nearest).is_err() {
        let (lo, hi) = (
            hwp.get_rate_min().unwrap_or(0),
            hwp.get_rate_max().unwrap_or(0),
        );
        return Err(err(
            device,
            format!("does not accept {} Hz; it accepts {lo}..={hi} Hz", fmt.rate),
        ));
    }
    set_buffer_and_period(&hwp, device, req)?;
    pcm.hw_params(&hwp).map_err(|e| {
        err(
            device,
            format!("cannot apply hardware parameters: {}", describe_errno(&e)),
        )
    })?;
    let cur = pcm.hw_params_current().map_err(|e| {
        err(
            device,
            format!("cannot read back parameters: {}", describe_errno(&e)),
        )
    })?;
    let size = |got: alsa::Result<Frames>, what: &str| {
        got.ok()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| err(device, format!("no {what} size")))
    };
    let buffer = size(cur.get_buffer_size(), "buffer")?;
    let period = size(cur.get_period_size(), "period")?;
    Ok((buffer, period))
}

/// `n` frames as ALSA's frame count, which is a C `long`: 32 bits on
/// armv7, where a count above 2^31 - 1 is refused rather than wrapped.
fn frames(n: u64, device: &str, what: &str) -> Result<Frames, OpenError> {
    Frames::try_from(n).map_err(|_| {
        err(
            device,
            format!(
                "{what}: {n} frames, expected at most {} on this platform",
                Frames::MAX
            ),
        )
    })
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none of the common formats".into()
    } else {
        v.join(", ")
    }
}

/// aplay's order and defaults: the period first (the jack plugin refuses a
/// buffer time set first), then the buffer; buffer = min(max, 500 ms),
/// period = buffer / 4 when not asked for.
fn set_buffer_and_period(
    hwp: &HwParams,
    device: &str,
    req: &BufferRequest,
) -> Result<(), OpenError> {
    let mut buffer_time = req.buffer_time_us;
    if buffer_time.is_none() && req.buffer_frames.is_none() {
        let max = hwp.get_buffer_time_max().unwrap_or(DEFAULT_BUFFER_TIME_US);
        buffer_time = Some(max.min(DEFAULT_BUFFER_TIME_US));
    }
    let period_result = match (
        req.period_time_us,
        req.period_frames,
        buffer_time,
        req.buffer_frames,
    ) {
        (Some(us), _, _, _) => hwp.set_period_time_near(us, ValueOr::Nearest).map(|_| ()),
        (None, Some(f), _, _) => hwp
            .set_period_size_near(frames(f, device, "--period-size")?, ValueOr::Nearest)
            .map(|_| ()),
        (None, None, Some(bt), _) => hwp
            .set_period_time_near(bt / 4, ValueOr::Nearest)
            .map(|_| ()),
        (None, None, None, Some(bf)) => hwp
            .set_period_size_near(
                frames(bf / 4, device, "--buffer-size / 4")?,
                ValueOr::Nearest,
            )
            .map(|_| ()),
        (None, None, None, None) => Ok(()),
    };
    period_result.map_err(|e| {
        err(
            device,
            format!("cannot set the period: {}", describe_errno(&e)),
        )
    })?;
    let buffer_result = match (req.buffer_frames, buffer_time) {
        (Some(f), _) => hwp
            .set_buffer_size_near(frames(f, device, "--buffer-size")?)
            .map(|_| ()),
        (None, Some(us)) => hwp.set_buffer_time_near(us, ValueOr::Nearest).map(|_| ()),
        (None, None) => Ok(()),
    };
    buffer_result.map_err(|e| {
        err(
            device,
            format!("cannot set the buffer: {}", describe_errno(&e)),
        )
    })
}

fn configure_sw(
    pcm: &PCM,
    device: &str,
    buffer: u64,
    period: u64,
) -> Result<(u64, u64), OpenError> {
    let swp = pcm.sw_params_current().map_err(|e| {
        err(
            device,
            format!("no software parameters: {}", describe_errno(&e)),
        )
    })?;
    let set = |r: alsa::Result<()>, what: &str| {
        r.map_err(|e| err(device, format!("cannot set {what}: {}", describe_errno(&e))))
    };
    set(
        swp.set_avail_min(frames(period, device, "the period")?),
        "avail_min",
    )?;
    let buffer_frames = frames(buffer, device, "the buffer")?;
    set(swp.set_start_threshold(buffer_frames), "start_threshold")?;
    set(swp.set_stop_threshold(buffer_frames), "stop_threshold")?;
    // Timestamps are a nicety: a PCM that refuses them still plays, and
    // the player's own clock covers it.
    let _ = swp.set_tstamp_mode(true);
    let _ = swp.set_tstamp_type(TstampType::Monotonic);
    set(pcm.sw_params(&swp), "software parameters")?;
    Ok((buffer, buffer))
}

fn classify(e: alsa::Error) -> SinkError {
    match e.errno() {
        libc::EPIPE => SinkError::Xrun,
        libc::EINTR => SinkError::Interrupted,
        libc::ESTRPIPE => SinkError::Device("device suspended (ESTRPIPE)".into()),
        _ => SinkError::Device(format!("{}: {}", e.func(), describe_errno(&e))),
    }
}

impl Sink for AlsaSink {
    fn setup(&self) -> &Setup {
        &self.setup
    }

    fn wait(&mut self) -> Result<(), SinkError> {
        self.pcm.wait(None).map(|_| ()).map_err(classify)
    }

    fn write(&mut self, data: &[u8]) -> Result<usize, SinkError> {
        // alsa-rs's IO is a borrow of the PCM and a flag: taking it for
        // each write costs nothing and keeps the sink free of self-borrows.
        match self.pcm.io_bytes().writei(data) {
            Ok(n) => Ok(n),
            Err(e) if e.errno() == libc::EAGAIN => Ok(0),
            Err(e) => Err(classify(e)),
        }
    }

    // Frames is a C long: i32 on armv7, so the conversion is not useless there.
    #[allow(clippy::useless_conversion)]
    fn delay(&mut self) -> Option<i64> {
        // The pulse plugin answers EIO right after prepare: unknown, not fatal.
        self.pcm.delay().ok().map(i64::from)
    }

    fn is_running(&mut self) -> bool {
        matches!(self.pcm.state(), State::Running | State::Draining)
    }

    fn xrun_stamp(&mut self) -> XrunStamp {
        if self.setup.clock != ClockSource::Kernel {
            // ioplug PCMs stamp the trigger only at start/stop, never at the
            // underrun (see CI notes): their figure would be garbage. And
            // where libasound's timespec is not ours, reading it would
            // write past the variable (see `alsa_time`).
            return XrunStamp { stopped_at: None };
        }
        let stopped_at = self
            .pcm
            .status()
            .ok()
            .filter(|s| s.get_state() == State::XRun)
            .map(|s| clock::from_timespec(s.get_trigger_htstamp()))
            .filter(|&t| t > 0);
        XrunStamp { stopped_at }
    }

    fn recover(&mut self) -> Result<(), SinkError> {
        self.pcm.prepare().map_err(classify)
    }

    fn finish(&mut self, immediately: bool) -> Result<(), SinkError> {
        if immediately {
            return self.pcm.drop().map_err(classify);
        }
        match self.pcm.drain() {
            Ok(()) => Ok(()),
            // An underrun during drain, or a signal: nothing left to play.
            Err(e) if e.errno() == libc::EPIPE => Ok(()),
            // The kernel gave up waiting for the queued periods to play
            // (its drain timeout: the stream's pointer did not move for
            // seconds — a driver in trouble, or an emulated guest held off
            // its CPUs). Every frame was written and measured: the rest
            // is dropped, said on stderr, and the run ends as played.
            Err(e) if e.errno() == libc::EIO => {
                eprintln!(
                    "xrun-player: drain: the kernel gave up waiting for the last periods \
                     ({e}); dropped them"
                );
                let _ = self.pcm.drop();
                Ok(())
            }
            Err(e) => {
                let _ = self.pcm.drop();
                Err(classify(e))
            }
        }
    }

    fn describe(&mut self) -> String {
        let mut out = match alsa::Output::buffer_open() {
            Ok(o) => o,
            Err(_) => return String::new(),
        };
        if self.pcm.dump(&mut out).is_err() {
            return String::new();
        }
        out.to_string()
    }
}
