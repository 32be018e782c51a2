//! The data callback and what it shares with the writer: the lock-free
//! ring it plays from (and the one it records events into), atomics for
//! everything else, the near-miss and gap measurements, and the scheduling
//! of the thread it runs on.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use xrunbench_schema::player::{EventSource, SelftestStall};
use xrunbench_schema::{Priority, SampleFormat};

use super::events::{EventRecord, ERROR_KINDS};
use super::CpalOptions;
use crate::clock::{self, frames_to_ns, MonoNs};
use crate::nearmiss::NearMiss;
use crate::play::StallSpec;
use crate::ring::{Consumer, Producer};
use crate::sink::StreamFormat;
use crate::system;

/// A callback gap above this is an underrun: above the steady-state noise
/// of every host measured (CI notes: < 1 ms; ≈ 7 ms on PulseAudio).
pub const GAP_THRESHOLD_NS: i64 = 10_000_000;

/// Callbacks that belong to the stream starting up: hosts ask for a large
/// first fill, and PulseAudio reports no latency before its first timing
/// poll and then adjusts it (a 30 ms gap at 0.15 s was seen on an idle
/// machine). Gaps and short rings there are not underruns. 32 callbacks
/// are 0.17 s at JACK's 256 frames, 0.32 s at 10 ms.
const STARTUP_CALLBACKS: u64 = 32;

/// State shared by the callbacks and the main thread: atomics only.
pub struct Shared {
    /// cpal `Xrun` errors not yet attached to an event by the data callback.
    pub xruns_pending: AtomicU64,
    /// Callbacks so far.
    pub callbacks: AtomicU64,
    /// CLOCK_MONOTONIC of the last callback (0 before the first).
    pub last_callback_mono: AtomicI64,
    /// Audio the device held at the last callback, ns.
    pub device_queued_ns: AtomicI64,
    /// End of file: the ring runs empty on purpose, not a reader underrun.
    pub draining: AtomicBool,
    /// Events dropped because the record ring was full.
    pub events_lost: AtomicU64,
    /// Host errors by kind (index: [`error_index`](super::events::error_index)).
    pub error_counts: [AtomicU64; ERROR_KINDS],
    /// The main thread, unparked when the callback frees ring space.
    pub writer: std::thread::Thread,
    /// Outcome of `--priority` in the callback's thread: [`NOT_YET`], 0
    /// or the errno.
    pub priority_errno: AtomicI32,
    /// Outcome of `--cpu` there, likewise.
    pub affinity_errno: AtomicI32,
    /// CLOCK_MONOTONIC of the first callback, which every event's time
    /// counts from (0 before it).
    pub first_callback_mono: AtomicI64,
    /// The kernel thread id of the thread the callbacks run on (0 before
    /// the first): the one a scheduler trace must follow.
    pub callback_tid: AtomicU32,
}

impl Shared {
    /// Nothing seen yet; `writer` is the thread the callback unparks.
    pub fn new(writer: std::thread::Thread) -> Shared {
        Shared {
            xruns_pending: AtomicU64::new(0),
            callbacks: AtomicU64::new(0),
            last_callback_mono: AtomicI64::new(0),
            device_queued_ns: AtomicI64::new(0),
            draining: AtomicBool::new(false),
            events_lost: AtomicU64::new(0),
            error_counts: Default::default(),
            writer,
            priority_errno: AtomicI32::new(NOT_YET),
            affinity_errno: AtomicI32::new(NOT_YET),
            first_callback_mono: AtomicI64::new(0),
            callback_tid: AtomicU32::new(0),
        }
    }
}

/// The callback has not run yet: its scheduling is not applied.
pub const NOT_YET: i32 = i32::MIN;

/// Scheduling for the callback's thread, prepared so that applying it is
/// system calls only.
struct Sched {
    priority: Option<Priority>,
    cpus: Option<libc::cpu_set_t>,
}

/// What the callback hands back once the stream is gone.
pub struct CallbackStats {
    /// Buffer fill and lateness at each callback.
    pub near_miss: NearMiss,
    /// Self-test stalls injected, with room reserved for all of them.
    pub stalls: Vec<SelftestStall>,
}

impl CallbackStats {
    /// Empty, with room for `stalls` stall records (pushing them in the
    /// callback must not allocate).
    pub fn new(stalls: usize) -> CallbackStats {
        CallbackStats {
            near_miss: NearMiss::new(),
            stalls: Vec::with_capacity(stalls),
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
pub struct Feeder {
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
    /// CLOCK_MONOTONIC at the first callback (0 before it).
    mono_start: i64,
    /// CLOCK_MONOTONIC − stream clock, read at the current callback: puts
    /// the stream's instants of this callback on CLOCK_MONOTONIC, so that
    /// the stream clock's drift never accumulates over a long run.
    stream_to_mono: i64,
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
    /// The callback's state for a stream fed `format` at `fmt`'s rate and
    /// channels, with `opts`' self-test stalls and scheduling.
    pub fn new(
        audio: Consumer,
        events: Producer,
        shared: Arc<Shared>,
        stats: Arc<Mutex<CallbackStats>>,
        format: SampleFormat,
        fmt: StreamFormat,
        opts: &CpalOptions,
    ) -> Feeder {
        Feeder {
            audio,
            events,
            shared,
            stats,
            frame_bytes: format.bytes() * usize::from(fmt.channels),
            silence: format.silence_byte(),
            rate: fmt.rate,
            mono_start: 0,
            stream_to_mono: 0,
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
        }
    }

    /// `--priority` and `--cpu` go to the thread that feeds the device:
    /// the hosts create it (ALSA, PulseAudio: cpal's own; JACK: libjack's,
    /// real-time at libjack's own priority until here), so it is only
    /// reachable from inside. The host's other threads that it left at
    /// SCHED_OTHER got the same settings when the stream was built
    /// (`threads::share_callback_scheduling`).
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

    /// The data callback: fills `out` from the ring (silence where it is
    /// short), measures the gap and the near miss, records events.
    pub fn on_data(&mut self, out: &mut [u8], info: &cpal::OutputCallbackInfo) {
        self.apply_sched();
        let ts = info.timestamp();
        let cb = ts.callback.as_nanos() as i64;
        let pb = ts.playback.as_nanos() as i64;
        let queued = (pb - cb).max(0);
        let now = clock::now();
        self.stream_to_mono = now - cb;
        if self.mono_start == 0 {
            self.started(now);
        }
        self.maybe_stall(now - self.mono_start, queued);
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

    /// The first callback: every event's time counts from `now`, and the
    /// thread running it is the one the trial's scheduler trace follows.
    fn started(&mut self, now: i64) {
        self.mono_start = now;
        self.shared
            .first_callback_mono
            .store(now, Ordering::Release);
        self.shared
            .callback_tid
            .store(system::current_tid(), Ordering::Release);
    }

    /// A stream-clock instant of this callback as nanoseconds since the
    /// first callback on CLOCK_MONOTONIC (the report's `at_s`).
    fn since_start(&self, stream_ns: i64) -> i64 {
        stream_ns + self.stream_to_mono - self.mono_start
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
            began_ns: self.since_start(began),
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
                began_ns: self.since_start(pb + frames_to_ns(got as i64, self.rate)),
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
                began_ns: st.began_ns,
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
