//! The `cpal` sink: playback through one of cpal's hosts (ALSA always;
//! JACK, PulseAudio and PipeWire behind the `cpal-*` cargo features).
//!
//! cpal pulls audio from a real-time data callback; the player pushes. A
//! lock-free byte ring ([`crate::ring`]) sits between them: `write`
//! converts the file's samples to the device's format and pushes them
//! (blocking while the ring is full), the callback pops. The callback never
//! allocates, locks (but see [`Feeder::stats`]) or touches a file.
//!
//! Underruns come from two sources, both reported, each event naming the
//! one that saw it:
//!
//! - **callback gap**, on every host: at each callback,
//!   `gap = callback instant − (previous playback instant + previous
//!   frames / rate)`, the time the device had already run dry when it asked
//!   for more. Above [`GAP_THRESHOLD_NS`] (steady-state noise is < 1 ms on
//!   ALSA and JACK, about 7 ms on PulseAudio) it is an underrun, measured on
//!   cpal's stream clock ([`ClockSource::Cpal`]).
//! - **cpal's `ErrorKind::Xrun`** from the error callback (ALSA and JACK
//!   hosts). It carries no time; the next callback attaches it to the gap
//!   it measured (`also_seen_by`), or reports it alone with the gap it saw.
//!
//! When the ring runs empty while playing, the callback plays silence and
//! that is a third kind of event, [`EventSource::ReaderBehind`]: the
//! player's reader fell behind, not the device.
//!
//! Near misses are measured in the callback: the audio still queued in the
//! device (playback instant − callback instant) and the callback's
//! lateness against the instant it was due (previous callback instant +
//! previous frames / rate).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use xrunbench_schema::player::{ClockSource, EventSource, HostErrorCount, SelftestStall, Underrun};

use super::{
    resolve_frames, BufferRequest, DeviceSide, Setup, Sink, SinkError, StreamFormat, XrunStamp,
};
use crate::clock::{self, frames_to_ns, MonoNs};
use crate::convert::convert;
use crate::nearmiss::NearMiss;
use crate::play::StallSpec;
use crate::ring::{self, Consumer, Producer};
use crate::system::{self, CpuList, Priority};
use crate::wav::SampleFormat;

/// A callback gap above this is an underrun: above the steady-state noise
/// of every host measured (CI notes: < 1 ms; ≈ 7 ms on PulseAudio).
pub const GAP_THRESHOLD_NS: i64 = 10_000_000;

/// The writer gives up when the callback has not run for this long while
/// the stream should be playing (a dead server, a stream cpal gave up on).
const STALLED_STREAM_NS: i64 = 5_000_000_000;

/// Callbacks that belong to the stream starting up: hosts ask for a large
/// first fill, and PulseAudio reports no latency before its first timing
/// poll and then adjusts it (a 30 ms gap at 0.15 s was seen on an idle
/// machine). Gaps and short rings there are not underruns. 32 callbacks
/// are 0.17 s at JACK's 256 frames, 0.32 s at 10 ms.
const STARTUP_CALLBACKS: u64 = 32;

/// The ring between reader and callback holds at least this many callbacks.
const RING_PERIODS: u64 = 8;

/// Bytes of one event record in the callback → main thread ring.
const EVENT_BYTES: usize = 48;

/// Events the record ring holds before the callback must drop one (and
/// count it): far more than the main thread lets pile up between polls.
const EVENT_SLOTS: usize = 1024;

/// cpal's hosts on Linux, as `--host` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostChoice {
    /// cpal's ALSA host (always built).
    Alsa,
    /// cpal's JACK host (cargo feature `cpal-jack`).
    Jack,
    /// cpal's PulseAudio host (cargo feature `cpal-pulseaudio`).
    Pulseaudio,
    /// cpal's PipeWire host (cargo feature `cpal-pipewire`).
    Pipewire,
}

impl HostChoice {
    /// The `--host` spelling.
    pub fn name(self) -> &'static str {
        match self {
            HostChoice::Alsa => "alsa",
            HostChoice::Jack => "jack",
            HostChoice::Pulseaudio => "pulseaudio",
            HostChoice::Pipewire => "pipewire",
        }
    }

    /// cpal's id of the host, or the cargo feature this build lacks.
    pub fn host_id(self) -> Result<cpal::HostId, &'static str> {
        match self {
            HostChoice::Alsa => Ok(cpal::HostId::Alsa),
            #[cfg(feature = "cpal-jack")]
            HostChoice::Jack => Ok(cpal::HostId::Jack),
            #[cfg(not(feature = "cpal-jack"))]
            HostChoice::Jack => Err("cpal-jack"),
            #[cfg(feature = "cpal-pulseaudio")]
            HostChoice::Pulseaudio => Ok(cpal::HostId::PulseAudio),
            #[cfg(not(feature = "cpal-pulseaudio"))]
            HostChoice::Pulseaudio => Err("cpal-pulseaudio"),
            #[cfg(feature = "cpal-pipewire")]
            HostChoice::Pipewire => Ok(cpal::HostId::PipeWire),
            #[cfg(not(feature = "cpal-pipewire"))]
            HostChoice::Pipewire => Err("cpal-pipewire"),
        }
    }
}

/// Why the cpal sink could not start; each maps to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum CpalOpenError {
    /// Usage: a host this build does not have (exit 2).
    #[error("--host {host}: this xrun-player was built without cargo feature `{feature}`")]
    NotBuilt {
        /// The host asked for.
        host: &'static str,
        /// The missing feature.
        feature: &'static str,
    },
    /// The host, device or configuration failed (exit 3).
    #[error("cpal host {host}, device {device:?}: {what}")]
    Device {
        /// The host.
        host: &'static str,
        /// The device name.
        device: String,
        /// What failed.
        what: String,
    },
}

/// How to open the cpal sink.
#[derive(Debug, Clone)]
pub struct CpalOptions {
    /// Which host.
    pub host: HostChoice,
    /// Device name (`-D`): `default`, or a device's id or name as
    /// `--list-devices` shows them.
    pub device: String,
    /// Stalls to inject into the data callback (self-test).
    pub stalls: Vec<StallSpec>,
    /// Print nothing but errors.
    pub quiet: bool,
    /// `--priority` for the thread that runs the data callback.
    pub priority: Option<Priority>,
    /// `--cpu` for the thread that runs the data callback.
    pub cpus: Option<CpuList>,
}

/// State shared by the callbacks and the main thread: atomics only.
struct Shared {
    /// cpal `Xrun` errors not yet attached to an event by the data callback.
    xruns_pending: AtomicU64,
    /// Callbacks so far.
    callbacks: AtomicU64,
    /// CLOCK_MONOTONIC of the last callback (0 before the first).
    last_callback_mono: AtomicI64,
    /// Audio the device held at the last callback, ns.
    device_queued_ns: AtomicI64,
    /// End of file: the ring runs empty on purpose, not a reader underrun.
    draining: AtomicBool,
    /// Events dropped because the record ring was full.
    events_lost: AtomicU64,
    /// Host errors by kind (index: [`error_index`]).
    error_counts: [AtomicU64; ERROR_KINDS],
    /// The main thread, unparked when the callback frees ring space.
    writer: std::thread::Thread,
    /// Outcome of `--priority` / `--cpu` in the callback's thread:
    /// [`NOT_YET`], 0 or the errno.
    priority_errno: std::sync::atomic::AtomicI32,
    affinity_errno: std::sync::atomic::AtomicI32,
}

/// The callback has not run yet: its scheduling is not applied.
const NOT_YET: i32 = i32::MIN;

/// Scheduling for the callback's thread, prepared so that applying it is
/// system calls only.
struct Sched {
    priority: Option<Priority>,
    cpus: Option<libc::cpu_set_t>,
}

const ERROR_KINDS: usize = 16;

fn error_index(kind: cpal::ErrorKind) -> usize {
    use cpal::ErrorKind as K;
    match kind {
        K::DeviceBusy => 0,
        K::DeviceChanged => 1,
        K::DeviceNotAvailable => 2,
        K::HostUnavailable => 3,
        K::InvalidInput => 4,
        K::PermissionDenied => 5,
        K::RealtimeDenied => 6,
        K::ResourceExhausted => 7,
        K::StreamInvalidated => 8,
        K::UnsupportedConfig => 9,
        K::UnsupportedOperation => 10,
        K::Xrun => 11,
        K::BackendError => 12,
        _ => 13,
    }
}

const ERROR_NAMES: [&str; ERROR_KINDS] = [
    "DeviceBusy",
    "DeviceChanged",
    "DeviceNotAvailable",
    "HostUnavailable",
    "InvalidInput",
    "PermissionDenied",
    "RealtimeDenied",
    "ResourceExhausted",
    "StreamInvalidated",
    "UnsupportedConfig",
    "UnsupportedOperation",
    "Xrun",
    "BackendError",
    "Other",
    "",
    "",
];

/// Kinds after which the stream does not play on: the writer stops waiting.
fn is_fatal(kind: cpal::ErrorKind) -> bool {
    matches!(
        kind,
        cpal::ErrorKind::DeviceNotAvailable
            | cpal::ErrorKind::StreamInvalidated
            | cpal::ErrorKind::HostUnavailable
    )
}

/// What the callback hands back once the stream is gone.
struct CallbackStats {
    near_miss: NearMiss,
    stalls: Vec<SelftestStall>,
}

/// One event as the callback records it (stream-clock nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
struct EventRecord {
    source: EventSource,
    with_xrun: bool,
    began_ns: i64,
    gap_ns: i64,
    stream_frame: u64,
    queued_ns: i64,
}

fn source_code(s: EventSource) -> u8 {
    match s {
        EventSource::DeviceEpipe => 0,
        EventSource::CpalXrun => 1,
        EventSource::CallbackGap => 2,
        EventSource::ReaderBehind => 3,
    }
}

fn source_from(code: u8) -> EventSource {
    match code {
        1 => EventSource::CpalXrun,
        2 => EventSource::CallbackGap,
        3 => EventSource::ReaderBehind,
        _ => EventSource::DeviceEpipe,
    }
}

impl EventRecord {
    fn encode(&self) -> [u8; EVENT_BYTES] {
        let mut b = [0u8; EVENT_BYTES];
        b[0] = source_code(self.source);
        b[1] = u8::from(self.with_xrun);
        b[8..16].copy_from_slice(&self.began_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.gap_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.stream_frame.to_le_bytes());
        b[32..40].copy_from_slice(&self.queued_ns.to_le_bytes());
        b
    }

    fn decode(b: &[u8; EVENT_BYTES]) -> EventRecord {
        let word = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        EventRecord {
            source: source_from(b[0]),
            with_xrun: b[1] != 0,
            began_ns: word(8),
            gap_ns: word(16),
            stream_frame: word(24) as u64,
            queued_ns: word(32),
        }
    }
}

/// The previous callback, on the stream clock.
#[derive(Debug, Clone, Copy)]
struct Prev {
    callback_ns: i64,
    playback_ns: i64,
    frames: i64,
    /// Whether its playback instant was already meaningful.
    steady: bool,
}

/// A run of callbacks that found the ring short.
#[derive(Debug, Clone, Copy)]
struct Starving {
    began_ns: i64,
    silent_frames: i64,
    stream_frame: u64,
    queued_ns: i64,
}

/// Everything the data callback owns.
struct Feeder {
    audio: Consumer,
    events: Producer,
    shared: Arc<Shared>,
    /// Near misses and stall records. Locked only with `try_lock`, and
    /// uncontended by construction: the main thread locks it only after the
    /// stream (and with it this callback) has been dropped, and cpal calls
    /// the callback from one thread at a time (`FnMut`).
    stats: Arc<Mutex<CallbackStats>>,
    frame_bytes: usize,
    silence: u8,
    rate: u32,
    start_ns: Option<i64>,
    prev: Option<Prev>,
    frames_played: u64,
    starving: Option<Starving>,
    stalls: Vec<StallSpec>,
    next_stall: usize,
    /// The device has held audio at a callback: from then on (until the
    /// drain) an empty queue is a near miss, not the start-up.
    steady: bool,
    /// cpal xruns seen at the previous callback, not yet attached to a gap.
    held_xruns: u64,
    /// Callbacks so far (for the start-up allowance).
    callbacks_seen: u64,
    /// Applied at the first callback, then `None`.
    sched: Option<Sched>,
}

impl Feeder {
    /// `--priority` and `--cpu` go to the thread that feeds the device:
    /// the hosts create it (ALSA, PulseAudio: cpal's own; JACK: libjack's,
    /// real-time at libjack's own priority until here), so it is only
    /// reachable from inside. The host's other threads that it left at
    /// SCHED_OTHER got the same settings when the stream was built
    /// ([`share_callback_scheduling`]).
    fn apply_sched(&mut self) {
        let Some(sched) = self.sched.take() else {
            return;
        };
        if let Some(p) = sched.priority {
            let r = system::set_priority_raw(p);
            self.shared.priority_errno.store(r, Ordering::Release);
        }
        if let Some(set) = &sched.cpus {
            let r = system::set_affinity_raw(set);
            self.shared.affinity_errno.store(r, Ordering::Release);
        }
    }

    fn on_data(&mut self, out: &mut [u8], info: &cpal::OutputCallbackInfo) {
        self.apply_sched();
        let ts = info.timestamp();
        let cb = ts.callback.as_nanos() as i64;
        let pb = ts.playback.as_nanos() as i64;
        let queued = (pb - cb).max(0);
        let start = *self.start_ns.get_or_insert(cb);
        self.maybe_stall(cb - start, queued);
        let frames = (out.len() / self.frame_bytes) as i64;
        let want = frames as usize * self.frame_bytes;
        let got = self.audio.pop(&mut out[..want]) / self.frame_bytes * self.frame_bytes;
        out[got..].fill(self.silence);
        self.shared.writer.unpark();
        // The first STARTUP_CALLBACKS callbacks are the stream starting up:
        // neither gaps nor short rings then are underruns.
        // After the end of the file the ring runs dry on purpose and the
        // callbacks play silence: nothing to measure.
        let tail = got < want && self.shared.draining.load(Ordering::Relaxed);
        self.callbacks_seen += 1;
        self.steady |= self.callbacks_seen > STARTUP_CALLBACKS;
        if self.steady && !tail {
            self.check_gap(cb);
            self.check_reader(got / self.frame_bytes, frames, pb);
            self.record_near_miss(cb, queued);
        }
        self.prev = Some(Prev {
            callback_ns: cb,
            playback_ns: pb,
            frames,
            steady: self.steady,
        });
        self.frames_played += frames as u64;
        let s = &self.shared;
        s.device_queued_ns.store(queued, Ordering::Relaxed);
        s.last_callback_mono.store(clock::now(), Ordering::Relaxed);
        s.callbacks.fetch_add(1, Ordering::Release);
    }

    fn push_event(&mut self, e: EventRecord) {
        if !self.events.push_all(&e.encode()) {
            self.shared.events_lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The callback-gap source, with any pending cpal `Xrun` attached.
    fn check_gap(&mut self, cb: i64) {
        let Some(prev) = self.prev.filter(|p| p.steady) else {
            return;
        };
        let dry = prev.playback_ns + frames_to_ns(prev.frames, self.rate);
        let gap = cb - dry;
        // An xrun reported during a stalled callback (JACK reports them
        // from another thread, every cycle) belongs to the gap the *next*
        // callback measures: hold it for one callback before reporting it
        // on its own.
        let fresh = self.shared.xruns_pending.swap(0, Ordering::AcqRel);
        let held = std::mem::replace(&mut self.held_xruns, fresh);
        let (source, began) = if gap > GAP_THRESHOLD_NS {
            self.held_xruns = 0;
            (EventSource::CallbackGap, dry)
        } else if held > 0 {
            (EventSource::CpalXrun, cb)
        } else {
            return;
        };
        self.push_event(EventRecord {
            source,
            with_xrun: held + fresh > 0 && source == EventSource::CallbackGap,
            began_ns: began - self.start_ns.unwrap_or(0),
            gap_ns: gap.max(0),
            stream_frame: self.frames_played,
            queued_ns: prev.playback_ns - prev.callback_ns,
        });
    }

    /// The reader-behind source: silence played because the ring was short.
    fn check_reader(&mut self, got: usize, frames: i64, pb: i64) {
        let missing = frames - got as i64;
        if missing > 0 && !self.shared.draining.load(Ordering::Relaxed) {
            let st = self.starving.get_or_insert(Starving {
                began_ns: pb + frames_to_ns(got as i64, self.rate),
                silent_frames: 0,
                stream_frame: self.frames_played + got as u64,
                queued_ns: 0,
            });
            st.silent_frames += missing;
            return;
        }
        if let Some(st) = self.starving.take() {
            self.push_event(EventRecord {
                source: EventSource::ReaderBehind,
                with_xrun: false,
                began_ns: st.began_ns - self.start_ns.unwrap_or(0),
                gap_ns: frames_to_ns(st.silent_frames, self.rate),
                stream_frame: st.stream_frame,
                queued_ns: st.queued_ns,
            });
        }
    }

    fn record_near_miss(&mut self, cb: i64, queued: i64) {
        if self.shared.draining.load(Ordering::Relaxed) {
            return;
        }
        let late = self.prev.map_or(0, |p| {
            (cb - p.callback_ns - frames_to_ns(p.frames, self.rate)).max(0)
        });
        if let Ok(mut stats) = self.stats.try_lock() {
            stats
                .near_miss
                .record(queued as u64 / 1000, late as u64 / 1000);
        }
    }

    /// The self-test option: stall this (the device-feeding) thread.
    fn maybe_stall(&mut self, since_start_ns: i64, queued: i64) {
        let Some(spec) = self.stalls.get(self.next_stall).copied() else {
            return;
        };
        if (since_start_ns as f64) < spec.at_s * 1e9 {
            return;
        }
        self.next_stall += 1;
        let t0 = clock::now();
        let end = t0 + (spec.ms * 1e6) as MonoNs;
        while !clock::sleep_until(end) {}
        let actual = clock::now() - t0;
        if let Ok(mut stats) = self.stats.try_lock() {
            // Capacity reserved at creation: this push does not allocate.
            if stats.stalls.len() < stats.stalls.capacity() {
                stats.stalls.push(SelftestStall {
                    at_s: since_start_ns as f64 / 1e9,
                    requested_ms: spec.ms,
                    actual_ms: actual as f64 / 1e6,
                    queued_us: Some(queued as u64 / 1000),
                });
            }
        }
    }
}

/// Gives the threads the host started while opening the stream, where it
/// left them at SCHED_OTHER, the callback's `--priority` and `--cpu`;
/// returns a note saying so, or `None` when there is nothing to do.
///
/// The callback's thread waits for them, and a real-time thread must not
/// wait for one it can preempt (traced under load, `xrun-hackbench -g 4`
/// beside): cpal's PulseAudio host polls the latency from a thread of its
/// own that hands each request to the callback's thread through a std mpsc
/// channel; preempted halfway by that thread on their shared CPU, it left
/// the callback's thread spinning in `sched_yield` for up to 144 ms while
/// the server ran dry. cpal's PipeWire host is woken through libpipewire's
/// data-loop thread, which waited up to 38 ms for a CPU. Threads the host
/// made real-time itself (libjack's) keep their own priority; the callback
/// still applies its own to the thread it runs on (`Feeder::apply_sched`).
fn share_callback_scheduling(before: &[libc::pid_t], opts: &CpalOptions) -> Option<String> {
    if opts.priority.is_none() && opts.cpus.is_none() {
        return None;
    }
    let set = opts.cpus.as_ref().map(system::cpu_set);
    let mut moved = Vec::new();
    let mut failed = Vec::new();
    for tid in system::thread_ids() {
        // Gone already (cpal's stream-building thread), or real-time by
        // the host's own choice.
        if before.contains(&tid) || system::is_real_time(tid) != Some(false) {
            continue;
        }
        let mut errno = opts
            .priority
            .map_or(0, |p| system::set_thread_priority_raw(tid, p));
        if errno == 0 {
            errno = set.map_or(0, |s| system::set_thread_affinity_raw(tid, &s));
        }
        match errno {
            0 => moved.push(tid.to_string()),
            libc::ESRCH => {}
            e => failed.push(format!("{tid}: {}", std::io::Error::from_raw_os_error(e))),
        }
    }
    let what = [
        opts.priority.map(|p| p.to_string()),
        opts.cpus.as_ref().map(|c| format!("CPU {c}")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" on ");
    match (moved.is_empty(), failed.is_empty()) {
        (true, true) => None,
        (_, true) => Some(format!(
            "the host's own threads {} run at {what} like the callback, which waits for them",
            moved.join(", ")
        )),
        _ => Some(format!(
            "the host's own threads could not all get {what} (the callback waits for them): {}",
            failed.join("; ")
        )),
    }
}

/// Host errors as the error callback leaves them: counts in atomics, the
/// first message of each kind behind a lock the main thread takes rarely.
type FirstMessages = Arc<Mutex<[Option<String>; ERROR_KINDS]>>;

fn on_error(shared: &Shared, first: &FirstMessages, e: cpal::Error) {
    if e.kind() == cpal::ErrorKind::Xrun {
        shared.xruns_pending.fetch_add(1, Ordering::AcqRel);
    }
    let k = error_index(e.kind());
    if shared.error_counts[k].fetch_add(1, Ordering::AcqRel) == 0 {
        // Once per kind: floods (the pulse plugin's EIO through the ALSA
        // host) are counted, not stored. try_lock: never wait here.
        if let Ok(mut m) = first.try_lock() {
            m[k] = Some(e.to_string());
        }
    }
}

/// A cpal output stream fed from a ring.
pub struct CpalSink {
    stream: Option<cpal::Stream>,
    audio: Producer,
    events: Consumer,
    shared: Arc<Shared>,
    stats: Arc<Mutex<CallbackStats>>,
    first_errors: FirstMessages,
    errors_said: [u64; ERROR_KINDS],
    file_format: SampleFormat,
    file_frame_bytes: usize,
    dev_frame_bytes: usize,
    scratch: Vec<u8>,
    started: bool,
    period_frames: u64,
    setup: Setup,
    quiet: bool,
    describe: String,
    feeder_priority: Option<Priority>,
    feeder_cpus: Option<CpuList>,
}

impl std::fmt::Debug for CpalSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpalSink")
            .field("setup", &self.setup)
            .finish()
    }
}

fn to_cpal(f: SampleFormat) -> Option<cpal::SampleFormat> {
    match f {
        SampleFormat::U8 => Some(cpal::SampleFormat::U8),
        SampleFormat::S16Le => Some(cpal::SampleFormat::I16),
        SampleFormat::S32Le => Some(cpal::SampleFormat::I32),
        SampleFormat::FloatLe => Some(cpal::SampleFormat::F32),
        // cpal's I24 is 4 bytes wide, not packed: convert instead.
        SampleFormat::S24_3Le => None,
    }
}

/// Formats to try, best first: the file's own, then float, then integers.
fn format_preference(file: SampleFormat) -> Vec<SampleFormat> {
    let mut v = vec![file];
    for f in [
        SampleFormat::FloatLe,
        SampleFormat::S32Le,
        SampleFormat::S16Le,
    ] {
        if !v.contains(&f) {
            v.push(f);
        }
    }
    v.retain(|f| to_cpal(*f).is_some());
    v
}

fn describe_config(c: &cpal::SupportedStreamConfigRange) -> String {
    let buffer = match c.buffer_size() {
        cpal::SupportedBufferSize::Range { min, max } => format!("period {min}..={max}"),
        cpal::SupportedBufferSize::Unknown => "period ?".into(),
    };
    format!(
        "{:?} {} ch {}..={} Hz {buffer}",
        c.sample_format(),
        c.channels(),
        c.min_sample_rate(),
        c.max_sample_rate()
    )
}

/// One line per format, rate range and period range, with the channel
/// counts merged (`I16 1..=32 ch …`): a device can list hundreds of ranges.
fn compact_configs(cfgs: Vec<cpal::SupportedStreamConfigRange>) -> Vec<String> {
    let mut lines: Vec<(String, u16, u16)> = Vec::new();
    for c in cfgs {
        let key = format!(
            "{:?} {}..={} Hz period {}",
            c.sample_format(),
            c.min_sample_rate(),
            c.max_sample_rate(),
            match c.buffer_size() {
                cpal::SupportedBufferSize::Range { min, .. } => format!("{min}.."),
                cpal::SupportedBufferSize::Unknown => "?".into(),
            }
        );
        match lines.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, lo, hi)) => {
                *lo = (*lo).min(c.channels());
                *hi = (*hi).max(c.channels());
            }
            None => lines.push((key, c.channels(), c.channels())),
        }
    }
    lines
        .into_iter()
        .map(|(k, lo, hi)| match (lo == hi, k.split_once(' ')) {
            (true, Some((f, rest))) => format!("{f} {lo} ch {rest}"),
            (false, Some((f, rest))) => format!("{f} {lo}..={hi} ch {rest}"),
            _ => k,
        })
        .collect()
}

/// The device's id (ALSA: the PCM name) and its human name.
fn device_names(d: &cpal::Device) -> (String, String) {
    let id = d.id().map(|i| i.id().to_string()).unwrap_or_default();
    let name = d
        .description()
        .map(|x| x.name().to_string())
        .unwrap_or_default();
    (id, name)
}

fn find_device(host: &cpal::Host, name: &str) -> Result<cpal::Device, String> {
    if name == "default" {
        return host
            .default_output_device()
            .ok_or_else(|| "the host has no default output device".to_string());
    }
    let devices = host
        .output_devices()
        .map_err(|e| format!("cannot list devices: {e}"))?;
    let mut seen = Vec::new();
    for d in devices {
        let (id, human) = device_names(&d);
        if id == name || human == name {
            return Ok(d);
        }
        seen.push(if human.is_empty() || human == id {
            id
        } else {
            format!("{id} ({human})")
        });
    }
    Err(format!(
        "no such output device; the host lists: {}",
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    ))
}

/// The period (callback size) to ask for: `--period-*` when given, else
/// half of `--buffer-*` (cpal double-buffers: its hosts make the device
/// buffer two callbacks long), else aplay's default period.
fn requested_period(req: &BufferRequest, rate: u32) -> u64 {
    let (buffer, period) = resolve_frames(req, rate);
    let period_given = req.period_frames.is_some() || req.period_time_us.is_some();
    let buffer_given = req.buffer_frames.is_some() || req.buffer_time_us.is_some();
    if !period_given && buffer_given {
        return (buffer / 2).max(1);
    }
    period
}

/// The sample format, config and callback size for this file on `device`.
struct Choice {
    format: SampleFormat,
    period: u32,
    notes: Vec<String>,
}

fn choose_config(
    device: &cpal::Device,
    fmt: StreamFormat,
    want_period: u64,
) -> Result<Choice, String> {
    let ranges: Vec<_> = device
        .supported_output_configs()
        .map_err(|e| format!("cannot query configurations: {e}"))?
        .collect();
    let fits = |r: &&cpal::SupportedStreamConfigRange, f: cpal::SampleFormat| {
        r.channels() == fmt.channels
            && r.sample_format() == f
            && (r.min_sample_rate()..=r.max_sample_rate()).contains(&fmt.rate)
    };
    for format in format_preference(fmt.format) {
        let cf = to_cpal(format).expect("filtered by format_preference");
        let Some(range) = ranges.iter().find(|r| fits(r, cf)) else {
            continue;
        };
        let mut notes = Vec::new();
        if format != fmt.format {
            notes.push(format!(
                "the device does not take {} at {} Hz, {} ch: converting to {} on the reader side",
                fmt.format.alsa_name(),
                fmt.rate,
                fmt.channels,
                format.alsa_name()
            ));
        }
        let want = u32::try_from(want_period).unwrap_or(u32::MAX);
        let period = match range.buffer_size() {
            cpal::SupportedBufferSize::Range { min, max } => want.clamp(*min, *max),
            cpal::SupportedBufferSize::Unknown => want,
        };
        if period != want {
            notes.push(format!(
                "the host allows callbacks of {} frames only: asked for {want}, using {period}",
                describe_range(range.buffer_size())
            ));
        }
        return Ok(Choice {
            format,
            period,
            notes,
        });
    }
    Err(format!(
        "no configuration for {} {} Hz {} ch; it accepts: {}",
        fmt.format.alsa_name(),
        fmt.rate,
        fmt.channels,
        ranges
            .iter()
            .map(describe_config)
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

fn describe_range(b: &cpal::SupportedBufferSize) -> String {
    match b {
        cpal::SupportedBufferSize::Range { min, max } if min == max => format!("{min}"),
        cpal::SupportedBufferSize::Range { min, max } => format!("{min}..={max}"),
        cpal::SupportedBufferSize::Unknown => "?".into(),
    }
}

/// cpal's ALSA host sets the buffer (2 × period) before the period, which
/// the `jack` plugin refuses unless both fit its own period (CI notes: set
/// the period first). So ask alsa-lib first, period before buffer as aplay
/// does, which period it grants, and request exactly that from cpal.
fn alsa_granted_period(
    pcm: &str,
    fmt: StreamFormat,
    format: SampleFormat,
    want: u32,
) -> Option<u32> {
    use alsa::pcm::{Access, HwParams, PCM};
    let pcm = PCM::new(pcm, alsa::Direction::Playback, true).ok()?;
    let hwp = HwParams::any(&pcm).ok()?;
    hwp.set_access(Access::RWInterleaved).ok()?;
    hwp.set_format(super::alsa::alsa_format(format)).ok()?;
    hwp.set_channels(fmt.channels as u32).ok()?;
    hwp.set_rate(fmt.rate, alsa::ValueOr::Nearest).ok()?;
    let period = hwp
        .set_period_size_near(want as alsa::pcm::Frames, alsa::ValueOr::Nearest)
        .ok()?;
    hwp.set_buffer_size_near(2 * period).ok()?;
    pcm.hw_params(&hwp).ok()?;
    let granted = pcm.hw_params_current().ok()?.get_period_size().ok()?;
    u32::try_from(granted).ok()
}

fn silence_of(f: SampleFormat) -> u8 {
    f.silence_byte()
}

impl CpalSink {
    /// Opens `opts.device` on `opts.host` for `fmt`, with a callback of the
    /// requested period (`BufferSize::Fixed`; cpal's defaults are far too
    /// large to ever underrun), and a ring of the requested buffer.
    pub fn open(
        opts: &CpalOptions,
        fmt: StreamFormat,
        req: &BufferRequest,
    ) -> Result<CpalSink, CpalOpenError> {
        let hname = opts.host.name();
        let id = opts
            .host
            .host_id()
            .map_err(|feature| CpalOpenError::NotBuilt {
                host: hname,
                feature,
            })?;
        let fail = |what: String| CpalOpenError::Device {
            host: hname,
            device: opts.device.clone(),
            what,
        };
        // Every thread from here on belongs to the host (see
        // `share_callback_scheduling`).
        let threads_before = system::thread_ids();
        let host = cpal::host_from_id(id).map_err(|e| fail(format!("host unavailable: {e}")))?;
        let device = find_device(&host, &opts.device).map_err(fail)?;
        let (buffer_req, _) = resolve_frames(req, fmt.rate);
        let mut choice =
            choose_config(&device, fmt, requested_period(req, fmt.rate)).map_err(fail)?;
        if opts.host == HostChoice::Alsa {
            let (dev_id, _) = device_names(&device);
            if let Some(p) = alsa_granted_period(&dev_id, fmt, choice.format, choice.period) {
                if p != choice.period {
                    choice.notes.push(format!(
                        "ALSA grants a period of {p} frames, not {}: asking cpal for {p}",
                        choice.period
                    ));
                    choice.period = p;
                }
            }
        }
        let dev_frame_bytes = choice.format.bytes() * fmt.channels as usize;
        // The ring holds the requested buffer, and at least RING_PERIODS
        // callbacks: after an underrun a host asks for several callbacks
        // back to back to refill the device (ALSA: two periods before it
        // restarts), faster than a reader woken per callback refills a
        // smaller ring, and that would show as the reader falling behind.
        let ring_frames = buffer_req.max(RING_PERIODS * choice.period as u64) as usize;
        let (audio_tx, audio_rx) = ring::ring(ring_frames * dev_frame_bytes);
        let (events_tx, events_rx) = ring::ring(EVENT_SLOTS * EVENT_BYTES);
        let shared = Arc::new(Shared {
            xruns_pending: AtomicU64::new(0),
            callbacks: AtomicU64::new(0),
            last_callback_mono: AtomicI64::new(0),
            device_queued_ns: AtomicI64::new(0),
            draining: AtomicBool::new(false),
            events_lost: AtomicU64::new(0),
            error_counts: Default::default(),
            writer: std::thread::current(),
            priority_errno: std::sync::atomic::AtomicI32::new(NOT_YET),
            affinity_errno: std::sync::atomic::AtomicI32::new(NOT_YET),
        });
        let stats = Arc::new(Mutex::new(CallbackStats {
            near_miss: NearMiss::new(),
            stalls: Vec::with_capacity(opts.stalls.len()),
        }));
        let first_errors: FirstMessages = Arc::new(Mutex::new(Default::default()));
        let mut feeder = Feeder {
            audio: audio_rx,
            events: events_tx,
            shared: shared.clone(),
            stats: stats.clone(),
            frame_bytes: dev_frame_bytes,
            silence: silence_of(choice.format),
            rate: fmt.rate,
            start_ns: None,
            prev: None,
            frames_played: 0,
            starving: None,
            stalls: opts.stalls.clone(),
            next_stall: 0,
            steady: false,
            held_xruns: 0,
            callbacks_seen: 0,
            sched: Some(Sched {
                priority: opts.priority,
                cpus: opts.cpus.as_ref().map(system::cpu_set),
            }),
        };
        let config = cpal::StreamConfig {
            channels: fmt.channels,
            sample_rate: fmt.rate,
            buffer_size: cpal::BufferSize::Fixed(choice.period),
        };
        let err_shared = shared.clone();
        let err_first = first_errors.clone();
        let stream = device
            .build_output_stream_raw(
                config,
                to_cpal(choice.format).expect("chosen from cpal formats"),
                move |data: &mut cpal::Data, info: &cpal::OutputCallbackInfo| {
                    feeder.on_data(data.bytes_mut(), info)
                },
                move |e| on_error(&err_shared, &err_first, e),
                Some(Duration::from_secs(5)),
            )
            .map_err(|e| fail(format!("cannot build the output stream: {e}")))?;
        let mut notes = choice.notes;
        notes.extend(share_callback_scheduling(&threads_before, opts));
        let period = match stream.buffer_size() {
            Ok(n) if n != choice.period => {
                notes.push(format!(
                    "the host rounded the callback from {} to {n} frames",
                    choice.period
                ));
                n as u64
            }
            Ok(n) => n as u64,
            Err(_) => choice.period as u64,
        };
        notes.push(format!(
            "cpal double-buffers: device buffer = 2 callbacks of {period} frames; \
             a ring of {ring_frames} frames lies between the reader and the callback"
        ));
        let (dev_id, dev_name) = device_names(&device);
        let setup = Setup {
            backend: "cpal",
            device: format!(
                "{hname}/{}",
                if dev_id.is_empty() {
                    &dev_name
                } else {
                    &dev_id
                }
            ),
            hardware: false,
            format: choice.format,
            rate: fmt.rate,
            channels: fmt.channels as u32,
            buffer_frames: 2 * period,
            period_frames: period,
            start_threshold: ring_frames as u64,
            stop_threshold: 0,
            notes,
        };
        if !opts.quiet {
            for n in &setup.notes {
                eprintln!("xrun-player: cpal: {n}");
            }
        }
        let describe = format!(
            "cpal host {hname}, device {:?} ({dev_name}), {:?} {} Hz {} ch, callback {period} frames (BufferSize::Fixed({})), ring {ring_frames} frames\n",
            dev_id, choice.format, fmt.rate, fmt.channels, choice.period
        );
        Ok(CpalSink {
            stream: Some(stream),
            audio: audio_tx,
            events: events_rx,
            shared,
            stats,
            first_errors,
            errors_said: [0; ERROR_KINDS],
            file_format: fmt.format,
            file_frame_bytes: fmt.format.bytes() * fmt.channels as usize,
            dev_frame_bytes,
            scratch: vec![0; ring_frames * dev_frame_bytes],
            started: false,
            period_frames: period,
            setup,
            quiet: opts.quiet,
            describe,
            feeder_priority: opts.priority,
            feeder_cpus: opts.cpus.clone(),
        })
    }

    fn start(&mut self) -> Result<(), SinkError> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        match &self.stream {
            Some(s) => self
                .at_callback_priority(|| s.play())
                .map_err(|e| SinkError::Device(format!("cannot start the stream: {e}"))),
            None => Ok(()),
        }
    }

    fn fatal_error(&self) -> Option<String> {
        for kind in [
            cpal::ErrorKind::DeviceNotAvailable,
            cpal::ErrorKind::StreamInvalidated,
            cpal::ErrorKind::HostUnavailable,
        ] {
            debug_assert!(is_fatal(kind));
            if self.shared.error_counts[error_index(kind)].load(Ordering::Acquire) > 0 {
                return Some(format!("the stream failed ({kind:?})"));
            }
        }
        None
    }

    /// Runs `f`, a call into the host (play, pause, dropping the stream),
    /// with the calling thread at the callback's real-time priority, then
    /// puts its own back. Such a call can hand a message to the host's
    /// threads through a queue they spin-wait on (cpal's PulseAudio host:
    /// a std mpsc channel, whose receiver spins and yields while a slot is
    /// being written); preempted halfway by them on their CPU, a writer one
    /// step below would wait behind the spinning thread forever.
    fn at_callback_priority<T>(&self, f: impl FnOnce() -> T) -> T {
        let Some(p @ (Priority::Fifo(_) | Priority::Rr(_))) = self.feeder_priority else {
            return f();
        };
        let saved = system::current_scheduling();
        system::set_priority_raw(p);
        let result = f();
        if let Some(saved) = saved {
            system::restore_scheduling(&saved);
        }
        result
    }

    /// Whether the callback has been silent for too long while playing.
    fn stream_stalled(&self) -> bool {
        let last = self.shared.last_callback_mono.load(Ordering::Relaxed);
        self.started && last > 0 && clock::now() - last > STALLED_STREAM_NS
    }

    fn period_ns(&self) -> i64 {
        frames_to_ns(self.period_frames as i64, self.setup.rate)
    }

    /// Sleeps until the callback frees space (it unparks us) or a period
    /// passes; fails when the stream is dead, or a signal asked us to stop.
    fn park(&self) -> Result<(), SinkError> {
        if crate::signals::stop_flag().load(Ordering::Relaxed) {
            return Err(SinkError::Interrupted);
        }
        if let Some(what) = self.fatal_error() {
            return Err(SinkError::Device(what));
        }
        if self.stream_stalled() {
            return Err(SinkError::Device(
                "the host stopped calling back for 5 s".into(),
            ));
        }
        std::thread::park_timeout(Duration::from_nanos(self.period_ns() as u64));
        Ok(())
    }

    /// Says once per kind what the host reported (floods are counted).
    fn say_host_errors(&mut self) {
        for k in 0..ERROR_KINDS {
            let n = self.shared.error_counts[k].load(Ordering::Acquire);
            if n == 0 || self.errors_said[k] > 0 || k == error_index(cpal::ErrorKind::Xrun) {
                continue;
            }
            self.errors_said[k] = n;
            if self.quiet {
                continue;
            }
            let msg = self
                .first_errors
                .lock()
                .ok()
                .and_then(|m| m[k].clone())
                .unwrap_or_default();
            eprintln!(
                "xrun-player: cpal host error ({}): {msg} (repeats are counted, not printed)",
                ERROR_NAMES[k]
            );
        }
    }

    fn to_underrun(e: EventRecord) -> Underrun {
        let gap_ms = e.gap_ns as f64 / 1e6;
        Underrun {
            // Stream clock, from the first callback.
            at_s: e.began_ns.max(0) as f64 / 1e9,
            file_frame: e.stream_frame,
            file_loop: 0,
            at_least_ms: Some(gap_ms),
            at_least_clock: ClockSource::Cpal,
            gap_ms,
            gap_clock: ClockSource::Cpal,
            queued_before_us: Some(e.queued_ns.max(0) as u64 / 1000),
            source: e.source,
            also_seen_by: if e.with_xrun {
                vec![EventSource::CpalXrun]
            } else {
                Vec::new()
            },
        }
    }
}

impl Sink for CpalSink {
    fn setup(&self) -> &Setup {
        &self.setup
    }

    fn wait(&mut self) -> Result<(), SinkError> {
        let need = self.period_frames as usize * self.dev_frame_bytes;
        let need = need.min(self.audio.capacity());
        while self.audio.free() < need {
            // A full ring before the stream runs: the prefill is done.
            self.start()?;
            self.park()?;
        }
        Ok(())
    }

    fn write(&mut self, data: &[u8]) -> Result<usize, SinkError> {
        loop {
            let free_frames = self.audio.free() / self.dev_frame_bytes;
            let frames = (data.len() / self.file_frame_bytes).min(free_frames);
            if frames > 0 {
                let src = &data[..frames * self.file_frame_bytes];
                let n = convert(self.file_format, src, self.setup.format, &mut self.scratch);
                let pushed = self.audio.push(&self.scratch[..n]);
                debug_assert_eq!(pushed, n);
                return Ok(frames);
            }
            self.start()?;
            self.park()?;
        }
    }

    fn delay(&mut self) -> Option<i64> {
        let ring = (self.audio.len() / self.dev_frame_bytes) as i64;
        let device = self.shared.device_queued_ns.load(Ordering::Relaxed) * self.setup.rate as i64
            / 1_000_000_000;
        Some(ring + device)
    }

    fn is_running(&mut self) -> bool {
        self.started && self.shared.callbacks.load(Ordering::Acquire) > 0
    }

    fn xrun_stamp(&mut self) -> XrunStamp {
        XrunStamp { stopped_at: None }
    }

    fn recover(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    fn finish(&mut self, immediately: bool) -> Result<(), SinkError> {
        self.shared.draining.store(true, Ordering::Release);
        if !immediately {
            self.start()?;
            // Let the callback take what the ring holds, then let the
            // device play out what it holds.
            while !self.audio.is_empty() {
                self.park()?;
            }
            let held = self.shared.device_queued_ns.load(Ordering::Relaxed);
            let until = clock::now() + held + 2 * self.period_ns();
            while !clock::sleep_until(until) {
                if crate::signals::stop_flag().load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        // Dropping the stream joins cpal's threads: the callback is gone
        // after this, so `stats` is ours alone.
        if let Some(s) = self.stream.take() {
            self.at_callback_priority(|| {
                let _ = s.pause();
                drop(s);
            });
        }
        Ok(())
    }

    fn describe(&mut self) -> String {
        self.describe.clone()
    }

    fn drain_events(&mut self, out: &mut Vec<Underrun>) {
        self.say_host_errors();
        let mut rec = [0u8; EVENT_BYTES];
        while self.events.pop_all(&mut rec) {
            out.push(Self::to_underrun(EventRecord::decode(&rec)));
        }
    }

    fn device_side(&mut self) -> DeviceSide {
        let (near_miss, stalls) = match self.stats.lock() {
            Ok(mut s) => (
                Some(std::mem::take(&mut s.near_miss)),
                Some(std::mem::take(&mut s.stalls)),
            ),
            Err(_) => (None, None),
        };
        let first = self.first_errors.lock().ok();
        let mut host_errors = Vec::new();
        for k in 0..ERROR_KINDS {
            let count = self.shared.error_counts[k].load(Ordering::Acquire);
            if count == 0 {
                continue;
            }
            host_errors.push(HostErrorCount {
                kind: ERROR_NAMES[k].to_string(),
                count,
                first_message: first
                    .as_ref()
                    .and_then(|m| m[k].clone())
                    .unwrap_or_default(),
            });
        }
        let lost = self.shared.events_lost.load(Ordering::Relaxed);
        if lost > 0 {
            host_errors.push(HostErrorCount {
                kind: "EventsLost".into(),
                count: lost,
                first_message: "the callback's event ring was full; these events are missing"
                    .into(),
            });
        }
        let said = |errno: &std::sync::atomic::AtomicI32, what: Option<String>| {
            what.map(|w| match errno.load(Ordering::Acquire) {
                NOT_YET => format!("{w} not applied (no callback ran)"),
                e => system::describe_result(&w, e),
            })
        };
        DeviceSide {
            near_miss,
            stalls,
            host_errors,
            feeder_priority: said(
                &self.shared.priority_errno,
                self.feeder_priority.map(|p| p.to_string()),
            ),
            feeder_affinity: said(
                &self.shared.affinity_errno,
                self.feeder_cpus.as_ref().map(|c| c.to_string()),
            ),
        }
    }
}

impl Drop for CpalSink {
    fn drop(&mut self) {
        // The stream first: its callback owns the other end of our rings.
        if let Some(s) = self.stream.take() {
            self.at_callback_priority(|| drop(s));
        }
    }
}

/// Lists every host this build has, its output devices and their
/// configurations (`xrun-player --list-devices`).
pub fn list_devices() -> String {
    let mut s = String::new();
    for choice in [
        HostChoice::Alsa,
        HostChoice::Jack,
        HostChoice::Pulseaudio,
        HostChoice::Pipewire,
    ] {
        let id = match choice.host_id() {
            Ok(id) => id,
            Err(feature) => {
                s += &format!(
                    "host {}: not built (cargo feature {feature})\n",
                    choice.name()
                );
                continue;
            }
        };
        let host = match cpal::host_from_id(id) {
            Ok(h) => h,
            Err(e) => {
                s += &format!("host {}: unavailable: {e}\n", choice.name());
                continue;
            }
        };
        s += &format!("host {}:\n", choice.name());
        let devices = match host.output_devices() {
            Ok(d) => d,
            Err(e) => {
                s += &format!("  cannot list devices: {e}\n");
                continue;
            }
        };
        for d in devices {
            let (id, name) = device_names(&d);
            s += &format!("  -D {id}  ({name})\n");
            match d.supported_output_configs() {
                Ok(cfgs) => {
                    for line in compact_configs(cfgs.collect()) {
                        s += &format!("      {line}\n");
                    }
                }
                Err(e) => s += &format!("      configurations unknown: {e}\n"),
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_records_round_trip() {
        let e = EventRecord {
            source: EventSource::CallbackGap,
            with_xrun: true,
            began_ns: 123_456_789_012,
            gap_ns: 278_000_000,
            stream_frame: 96_000,
            queued_ns: -1,
        };
        assert_eq!(EventRecord::decode(&e.encode()), e);
    }

    #[test]
    fn period_follows_the_request() {
        let b = |bt: Option<u32>, pt: Option<u32>| BufferRequest {
            buffer_time_us: bt,
            period_time_us: pt,
            ..Default::default()
        };
        assert_eq!(requested_period(&b(Some(20_000), None), 48_000), 480);
        assert_eq!(requested_period(&b(Some(20_000), Some(5_000)), 48_000), 240);
        assert_eq!(requested_period(&b(None, None), 48_000), 6_000);
    }

    #[test]
    fn formats_prefer_the_files_own() {
        assert_eq!(
            format_preference(SampleFormat::S16Le),
            vec![
                SampleFormat::S16Le,
                SampleFormat::FloatLe,
                SampleFormat::S32Le
            ]
        );
        assert_eq!(
            format_preference(SampleFormat::S24_3Le)[0],
            SampleFormat::FloatLe
        );
    }
}
