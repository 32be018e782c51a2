//! The playback loop and its underrun accounting.
//!
//! Per period: wait until the device has room, measure how much audio is
//! still queued (near misses), write, and after each write predict the
//! moment the queue will run dry (our own clock: now + delay/rate). When a
//! write or wait reports an underrun, its start comes from the clock we
//! trust for this device (kernel stamp on hardware, virtual device clock,
//! or our prediction on plugin PCMs) and its full gap ends when the stream
//! is running again.

use std::sync::atomic::{AtomicBool, Ordering};

use xrunbench_schema::player::{
    ClockSource, EndReason, EventSource, HostErrorCount, SelftestStall, Underrun,
};

use crate::clock::{self, frames_to_ns, ms, MonoNs};
use crate::nearmiss::NearMiss;
use crate::sink::{Setup, Sink, SinkError};
use crate::system;
use xrunbench_wav::WavStream;

/// Periods read from the file at once.
const READ_AHEAD_PERIODS: usize = 16;

/// A stall of the writer thread, injected on purpose (self-test option).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StallSpec {
    /// Seconds after playback started.
    pub at_s: f64,
    /// Length, ms.
    pub ms: f64,
}

impl std::str::FromStr for StallSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?}: expected AT_SECONDS:MILLISECONDS, e.g. 1.5:300");
        let (at, len) = s.split_once(':').ok_or_else(bad)?;
        let at_s: f64 = at.parse().map_err(|_| bad())?;
        let ms: f64 = len.parse().map_err(|_| bad())?;
        if !(at_s.is_finite() && at_s >= 0.0 && ms.is_finite() && ms > 0.0) {
            return Err(bad());
        }
        Ok(StallSpec { at_s, ms })
    }
}

/// How to play.
#[derive(Debug, Clone, Default)]
pub struct PlayOptions {
    /// Stop after this many seconds of audio.
    pub duration_s: Option<f64>,
    /// Play the file this many times (`None`: until `duration_s`).
    pub loops: Option<u64>,
    /// End at the first underrun.
    pub fatal_errors: bool,
    /// No per-underrun lines on stderr.
    pub quiet: bool,
    /// Writer stalls to inject, in time order.
    pub stalls: Vec<StallSpec>,
}

/// What the loop measured.
#[derive(Debug, Clone)]
pub struct PlayOutcome {
    /// Why it ended.
    pub ended: EndReason,
    /// Every underrun.
    pub events: Vec<Underrun>,
    /// Near-miss histograms.
    pub near_miss: NearMiss,
    /// Frames handed to the device.
    pub frames_written: u64,
    /// Wall-clock seconds from the first write to the end.
    pub wall_seconds: f64,
    /// CLOCK_MONOTONIC when playback started: what `at_s` counts from (on
    /// the cpal sink, the first data callback).
    pub started_mono_ns: Option<u64>,
    /// The kernel thread id of the thread that fed the device: this one,
    /// or the sink's own (cpal's callback thread).
    pub feeder_tid: Option<u32>,
    /// Stalls injected.
    pub stalls: Vec<SelftestStall>,
    /// Host errors that were not underruns (cpal sink), counted.
    pub host_errors: Vec<HostErrorCount>,
    /// `--priority` / `--cpu` as applied to the device-feeding thread when
    /// the sink has one of its own (cpal's callback thread).
    pub feeder_scheduling: (Option<String>, Option<String>),
    /// Reading the file failed mid-playback (it was truncated, say):
    /// playback ended there, and what played is still reported.
    pub read_error: Option<String>,
}

/// Underrun lines printed per second at most: a one-frame buffer underruns
/// thousands of times a second, and printing each would itself starve the
/// writer. The rest are counted and said once; every one is in the report.
const MAX_LINES_PER_SECOND: u32 = 10;

/// Rate limit of the underrun lines on stderr.
struct Lines {
    window_start: MonoNs,
    in_window: u32,
    suppressed: u64,
}

impl Lines {
    fn new() -> Self {
        Lines {
            window_start: 0,
            in_window: 0,
            suppressed: 0,
        }
    }

    /// Whether a line may be printed now (else it is counted).
    fn allow(&mut self, now: MonoNs) -> bool {
        if now - self.window_start >= 1_000_000_000 {
            self.flush();
            self.window_start = now;
            self.in_window = 0;
        }
        if self.in_window < MAX_LINES_PER_SECOND {
            self.in_window += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// Says how many lines were not printed, if any.
    fn flush(&mut self) {
        if self.suppressed > 0 {
            eprintln!(
                "xrun-player: {} more underrun lines not printed (every underrun is in the report)",
                self.suppressed
            );
            self.suppressed = 0;
        }
    }
}

/// A device or file failure that ends playback.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    /// The device failed.
    #[error("device {device:?}: {what}")]
    Device {
        /// Device name.
        device: String,
        /// What failed.
        what: String,
    },
    /// Reading the file failed.
    #[error("reading the audio data: {0}")]
    Read(#[from] std::io::Error),
}

/// An underrun noticed, waiting for the stream to run again.
#[derive(Debug, Clone, Copy)]
struct Pending {
    began: MonoNs,
    at_least_ms: Option<f64>,
    clock: ClockSource,
    file_frame: u64,
    file_loop: u64,
    queued_before_us: Option<u64>,
}

/// The state of one playback.
struct Player<'a> {
    sink: &'a mut dyn Sink,
    stop: &'a AtomicBool,
    opts: &'a PlayOptions,
    rate: u32,
    buffer: i64,
    period: i64,
    /// The sink's clock: the one behind a stamp `xrun_stamp` gives.
    device_clock: ClockSource,
    start: MonoNs,
    /// Our prediction of the moment the queue runs dry.
    dry_at: Option<MonoNs>,
    queued_us: Option<u64>,
    /// A write that came back after `dry_at`: by our clock the queue ran
    /// dry then, though the device may not say so until a later call.
    overdue: Option<Overdue>,
    pending: Option<Pending>,
    events: Vec<Underrun>,
    near_miss: NearMiss,
    frames_written: u64,
    stalls_done: Vec<SelftestStall>,
    next_stall: usize,
    /// Frames in one pass of the file (to place device-side events).
    file_frames: u64,
    /// Where the sink's device-side events land before they are accounted
    /// (allocated once).
    device_events: Vec<Underrun>,
    /// The underrun lines' rate limit.
    lines: Lines,
}

/// The dry moment a late write overran, and what was queued before it.
#[derive(Debug, Clone, Copy)]
struct Overdue {
    dry_at: MonoNs,
    queued_us: Option<u64>,
    /// Frames written when it was noticed (it expires a buffer later).
    frames_written: u64,
}

enum Step {
    Continue,
    End(EndReason),
}

/// Plays `stream` into `sink` until the end of the file (and its loops),
/// `duration_s`, a signal (`stop`), or a fatal underrun.
pub fn play(
    sink: &mut dyn Sink,
    stream: &mut WavStream,
    opts: &PlayOptions,
    stop: &AtomicBool,
) -> Result<PlayOutcome, PlayError> {
    let setup = sink.setup().clone();
    let frame_bytes = stream.spec().frame_bytes();
    let period_bytes = setup.period_frames as usize * frame_bytes;
    // The only buffer of the steady state, allocated (and touched) once. It
    // holds several periods so that the file is read in large chunks (one
    // read per READ_AHEAD_PERIODS writes) while writes stay period-sized.
    let mut buf = vec![setup.format.silence_byte(); READ_AHEAD_PERIODS * period_bytes];
    let frame_limit = opts
        .duration_s
        .map(|d| (d * setup.rate as f64).round() as u64);
    let loops = opts.loops.or(if opts.duration_s.is_some() {
        None
    } else {
        Some(1)
    });
    let mut p = Player::new(sink, stop, opts, &setup, stream);
    let mut read_error = None;
    let mut file_loop = 0u64;
    let ended = loop {
        if stop.load(Ordering::Relaxed) {
            break EndReason::Signal;
        }
        let room = frame_limit.map_or(u64::MAX, |l| l - p.frames_written.min(l));
        if room == 0 {
            break EndReason::Duration;
        }
        let room_frames = usize::try_from(room).unwrap_or(usize::MAX);
        let want = (buf.len() / frame_bytes).min(room_frames) * frame_bytes;
        let frames = match stream.read_frames(&mut buf[..want]) {
            Ok(n) => n,
            Err(e) => {
                // What played so far is still a measurement: end here and
                // report it, with the error.
                read_error = Some(e.to_string());
                break EndReason::EndOfFile;
            }
        };
        if frames == 0 {
            file_loop += 1;
            if loops.is_some_and(|n| file_loop >= n) {
                break EndReason::EndOfFile;
            }
            stream.rewind();
            continue;
        }
        let first_frame = stream.position() - frames as u64;
        let mut step = Step::Continue;
        for (k, chunk) in buf[..frames * frame_bytes].chunks(period_bytes).enumerate() {
            let chunk_first = first_frame + (k * period_bytes / frame_bytes) as u64;
            step = p.write_chunk(chunk, frame_bytes, chunk_first, file_loop)?;
            if matches!(step, Step::End(_)) {
                break;
            }
        }
        if let Step::End(reason) = step {
            break reason;
        }
    };
    p.finish(ended, read_error)
}

impl<'a> Player<'a> {
    /// The state at the start of playback: the sink's setup, nothing
    /// written yet, and every buffer of the steady state allocated here.
    fn new(
        sink: &'a mut dyn Sink,
        stop: &'a AtomicBool,
        opts: &'a PlayOptions,
        setup: &Setup,
        stream: &WavStream,
    ) -> Self {
        Player {
            sink,
            stop,
            opts,
            rate: setup.rate,
            buffer: setup.buffer_frames as i64,
            period: setup.period_frames as i64,
            device_clock: setup.clock,
            start: clock::now(),
            dry_at: None,
            queued_us: None,
            overdue: None,
            pending: None,
            events: Vec::with_capacity(1024),
            near_miss: NearMiss::new(),
            frames_written: 0,
            stalls_done: Vec::with_capacity(opts.stalls.len()),
            next_stall: 0,
            file_frames: stream.spec().frames.max(1),
            device_events: Vec::with_capacity(64),
            lines: Lines::new(),
        }
    }

    /// After the loop ended for `ended`: finishes the sink (draining it
    /// unless stopped), accounts for what it still has to say, and gathers
    /// the outcome.
    fn finish(
        mut self,
        ended: EndReason,
        read_error: Option<String>,
    ) -> Result<PlayOutcome, PlayError> {
        let finish_at = clock::now();
        let immediately = matches!(ended, EndReason::Signal | EndReason::FatalUnderrun);
        let ended = match self.sink.finish(immediately) {
            Ok(()) => ended,
            Err(SinkError::Interrupted) => {
                let _ = self.sink.finish(true);
                EndReason::Signal
            }
            Err(e) => return Err(self.device_error(e)),
        };
        // An underrun just before the end restarts with the drain.
        if let Some(pending) = self.pending.take() {
            self.complete(pending, finish_at);
        }
        let fatal_seen = self.take_device_events();
        let ended = if fatal_seen && self.opts.fatal_errors && ended != EndReason::Signal {
            EndReason::FatalUnderrun
        } else {
            ended
        };
        self.lines.flush();
        let side = self.sink.device_side();
        Ok(PlayOutcome {
            ended,
            events: self.events,
            near_miss: side.near_miss.unwrap_or(self.near_miss),
            frames_written: self.frames_written,
            wall_seconds: ms(clock::now() - self.start) / 1e3,
            started_mono_ns: if self.sink.setup().clock == ClockSource::Cpal {
                side.started_mono_ns
            } else {
                u64::try_from(self.start).ok()
            },
            feeder_tid: if self.sink.setup().clock == ClockSource::Cpal {
                side.feeder_tid
            } else {
                Some(system::current_tid())
            },
            stalls: side.stalls.unwrap_or(self.stalls_done),
            host_errors: side.host_errors,
            feeder_scheduling: (side.feeder_priority, side.feeder_affinity),
            read_error,
        })
    }

    fn device_error(&self, e: SinkError) -> PlayError {
        PlayError::Device {
            device: self.sink.setup().device.clone(),
            what: e.to_string(),
        }
    }

    /// Writes one chunk completely, handling underruns on the way.
    fn write_chunk(
        &mut self,
        chunk: &[u8],
        frame_bytes: usize,
        first_frame: u64,
        file_loop: u64,
    ) -> Result<Step, PlayError> {
        let mut off = 0;
        while off < chunk.len() {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Step::End(EndReason::Signal));
            }
            if self.take_device_events() && self.opts.fatal_errors {
                if !self.opts.quiet {
                    eprintln!("xrun-player: fatal underrun (--fatal-errors)");
                }
                return Ok(Step::End(EndReason::FatalUnderrun));
            }
            self.maybe_stall();
            let frame = first_frame + (off / frame_bytes) as u64;
            let result = self.sink.wait().and_then(|()| {
                self.measure_wakeup();
                self.sink.write(&chunk[off..])
            });
            match result {
                Ok(n) => {
                    off += n * frame_bytes;
                    self.frames_written += n as u64;
                    self.after_write();
                }
                Err(SinkError::Xrun) => {
                    if let Step::End(r) = self.on_underrun(frame, file_loop)? {
                        return Ok(Step::End(r));
                    }
                }
                Err(SinkError::Interrupted) => {}
                Err(e) => return Err(self.device_error(e)),
            }
        }
        Ok(Step::Continue)
    }

    /// Accounts for the underruns the sink's device side saw on its own
    /// (cpal: callback gaps, cpal's xruns, the reader falling behind),
    /// printing one line each; returns whether there were any.
    fn take_device_events(&mut self) -> bool {
        self.sink.drain_events(&mut self.device_events);
        if self.device_events.is_empty() {
            return false;
        }
        for mut e in self.device_events.drain(..) {
            // The sink counts frames over the whole stream; the report
            // says which loop of the file and where in it.
            e.file_loop = e.file_frame / self.file_frames;
            e.file_frame %= self.file_frames;
            if !self.opts.quiet && self.lines.allow(clock::now()) {
                eprintln!("{}", device_event_line(&e));
            }
            self.events.push(e);
        }
        true
    }

    /// At a wake-up while running: the queued audio, and how late we woke
    /// against the moment a period of space opened (fill = buffer − period).
    fn measure_wakeup(&mut self) {
        if !self.sink.is_running() {
            return;
        }
        if let Some(queued) = self.sink.delay() {
            let queued = queued.clamp(0, self.buffer);
            let late = (self.buffer - self.period - queued).max(0);
            self.near_miss.record(
                frames_to_ns(queued, self.rate) as u64 / 1000,
                frames_to_ns(late, self.rate) as u64 / 1000,
            );
        }
    }

    fn after_write(&mut self) {
        let now = clock::now();
        self.note_overdue(now);
        if let Some(queued) = self.sink.delay() {
            self.dry_at = Some(now + frames_to_ns(queued.max(0), self.rate));
            self.queued_us = Some(frames_to_ns(queued.max(0), self.rate) as u64 / 1000);
        }
        if self.pending.is_some() && self.sink.is_running() {
            let pending = self.pending.take().expect("checked above");
            self.complete(pending, now);
        }
    }

    /// Keeps the predicted dry moment when a write came back after it.
    ///
    /// A plugin PCM (jack's ioplug) notices an underrun in its own thread:
    /// a writer preempted past the dry moment can have its next write
    /// accepted and a full queue reported, and only the call after that
    /// fails with EPIPE, when the fresh prediction lies in the future. The
    /// underrun began at the old prediction; it is kept for an EPIPE within
    /// the next buffer's worth of frames, and forgotten after that (the
    /// device played on: by its account there was no underrun).
    fn note_overdue(&mut self, now: MonoNs) {
        if self
            .overdue
            .is_some_and(|o| self.frames_written > o.frames_written + self.buffer as u64)
        {
            self.overdue = None;
        }
        match self.dry_at {
            Some(dry) if self.overdue.is_none() && dry < now => {
                self.overdue = Some(Overdue {
                    dry_at: dry,
                    queued_us: self.queued_us,
                    frames_written: self.frames_written,
                });
            }
            _ => {}
        }
    }

    /// A plausible underrun start lies within this run and not in the future.
    fn plausible(&self, t: MonoNs, now: MonoNs) -> bool {
        t >= self.start && t <= now
    }

    fn on_underrun(&mut self, file_frame: u64, file_loop: u64) -> Result<Step, PlayError> {
        let now = clock::now();
        let stamp = self.sink.xrun_stamp().stopped_at;
        let overdue = self.overdue.take();
        // Our own prediction: a write that came back late saw the queue run
        // dry first; else the prediction after the last write.
        let (predicted, queued_before_us) = match overdue {
            Some(o) => (Some(o.dry_at), o.queued_us),
            None => (self.dry_at, self.queued_us),
        };
        let (began, clock_used, trusted) = match stamp {
            Some(t) if self.plausible(t, now) => (t, self.device_clock, true),
            _ => match predicted {
                Some(t) if self.plausible(t, now) => (t, ClockSource::Player, true),
                // No figure we could trust: the gap runs from now, and the
                // "at least" figure is left out rather than invented.
                _ => (now, ClockSource::Player, false),
            },
        };
        let at_least_ms = trusted.then(|| ms(now - began));
        if !self.opts.quiet && self.lines.allow(now) {
            match at_least_ms {
                Some(v) => eprintln!("underrun!!! (at least {v:.3} ms long)"),
                None => eprintln!("underrun!!! (length unknown: no trustworthy clock)"),
            }
        }
        let pending = Pending {
            began,
            at_least_ms,
            clock: clock_used,
            file_frame,
            file_loop,
            queued_before_us,
        };
        self.dry_at = None;
        if self.opts.fatal_errors {
            self.complete(pending, now);
            if !self.opts.quiet {
                eprintln!("xrun-player: fatal underrun (--fatal-errors)");
            }
            return Ok(Step::End(EndReason::FatalUnderrun));
        }
        self.pending = Some(pending);
        self.sink.recover().map_err(|e| self.device_error(e))?;
        Ok(Step::Continue)
    }

    fn complete(&mut self, p: Pending, running_again: MonoNs) {
        self.events.push(Underrun {
            at_s: ms(p.began - self.start) / 1e3,
            file_frame: p.file_frame,
            file_loop: p.file_loop,
            at_least_ms: p.at_least_ms,
            at_least_clock: p.clock,
            gap_ms: ms(running_again - p.began),
            gap_clock: p.clock,
            queued_before_us: p.queued_before_us,
            source: EventSource::DeviceEpipe,
            also_seen_by: Vec::new(),
        });
    }

    /// The self-test option: stall this (the writer) thread when due.
    fn maybe_stall(&mut self) {
        let Some(spec) = self.opts.stalls.get(self.next_stall).copied() else {
            return;
        };
        let t0 = clock::now();
        if ms(t0 - self.start) / 1e3 < spec.at_s {
            return;
        }
        self.next_stall += 1;
        let queued_us = self
            .sink
            .delay()
            .map(|d| frames_to_ns(d.max(0), self.rate) as u64 / 1000);
        let end = t0 + (spec.ms * 1e6) as MonoNs;
        while !clock::sleep_until(end) {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let t1 = clock::now();
        self.stalls_done.push(SelftestStall {
            at_s: ms(t0 - self.start) / 1e3,
            requested_ms: spec.ms,
            actual_ms: ms(t1 - t0),
            queued_us,
        });
    }
}

/// aplay's words for an underrun the device side measured, with who saw it
/// when that is not the plain callback gap.
fn device_event_line(e: &Underrun) -> String {
    match e.source {
        EventSource::ReaderBehind => format!(
            "underrun!!! (reader fell behind: {:.3} ms of silence played)",
            e.gap_ms
        ),
        EventSource::CpalXrun => format!(
            "underrun!!! (cpal reported an xrun; callback gap {:.3} ms)",
            e.gap_ms
        ),
        _ => format!("underrun!!! (at least {:.3} ms long)", e.gap_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::XrunStamp;
    use xrunbench_schema::trial::ToneSpec;
    use xrunbench_schema::{Backend, SampleFormat};

    const RATE: u32 = 48_000;
    // A long buffer, so that only the scripted late write can come back
    // after the dry moment: any other write would have to be kept off the
    // CPU for 750 ms, far beyond a busy machine's scheduling delays.
    const BUFFER: u64 = 48_000; // 1 s
    const PERIOD: u64 = 12_000; // 250 ms

    /// What a plugin PCM (jack's ioplug) did when its writer was preempted
    /// past the dry moment: write number `late` comes back `late_ms` late
    /// and is accepted, `delay` then reports a full queue, and EPIPE comes
    /// only `epipe_after` writes later. Before and after, every write is
    /// accepted at once with three periods queued.
    struct LaggingPlugin {
        setup: Setup,
        frame_bytes: usize,
        writes: usize,
        late: usize,
        late_ms: u64,
        epipe_after: usize,
        queued: i64,
    }

    impl LaggingPlugin {
        fn new(late: usize, late_ms: u64, epipe_after: usize) -> Self {
            LaggingPlugin {
                setup: Setup {
                    backend: Backend::Alsa,
                    device: "lagging-plugin".into(),
                    hardware: false,
                    clock: ClockSource::Player,
                    format: SampleFormat::S16Le,
                    rate: RATE,
                    channels: 1,
                    buffer_frames: BUFFER,
                    period_frames: PERIOD,
                    start_threshold: BUFFER,
                    stop_threshold: BUFFER,
                    notes: Vec::new(),
                },
                frame_bytes: 2,
                writes: 0,
                late,
                late_ms,
                epipe_after,
                queued: (BUFFER - PERIOD) as i64,
            }
        }
    }

    impl Sink for LaggingPlugin {
        fn setup(&self) -> &Setup {
            &self.setup
        }
        fn wait(&mut self) -> Result<(), SinkError> {
            Ok(())
        }
        fn write(&mut self, data: &[u8]) -> Result<usize, SinkError> {
            let k = self.writes;
            self.writes += 1;
            self.queued = (BUFFER - PERIOD) as i64;
            if k == self.late {
                std::thread::sleep(std::time::Duration::from_millis(self.late_ms));
                self.queued = BUFFER as i64;
            } else if k == self.late + self.epipe_after {
                return Err(SinkError::Xrun);
            }
            Ok(data.len() / self.frame_bytes)
        }
        fn delay(&mut self) -> Option<i64> {
            Some(self.queued)
        }
        fn is_running(&mut self) -> bool {
            true
        }
        fn xrun_stamp(&mut self) -> XrunStamp {
            XrunStamp { stopped_at: None }
        }
        fn recover(&mut self) -> Result<(), SinkError> {
            Ok(())
        }
        fn finish(&mut self, _immediately: bool) -> Result<(), SinkError> {
            Ok(())
        }
        fn describe(&mut self) -> String {
            String::new()
        }
    }

    fn play_into(sink: &mut LaggingPlugin) -> PlayOutcome {
        let dir = tempfile::tempdir().unwrap();
        let wav = dir.path().join("tone.wav");
        let tone = ToneSpec {
            rate: RATE,
            channels: 1,
            format: SampleFormat::S16Le,
            ..ToneSpec::default()
        };
        xrunbench_wav::tone::write_tone(&wav, &tone, 0.5).unwrap();
        let mut stream = WavStream::open(&wav).unwrap();
        let opts = PlayOptions {
            duration_s: Some(20.0),
            quiet: true,
            ..PlayOptions::default()
        };
        play(sink, &mut stream, &opts, &AtomicBool::new(false)).unwrap()
    }

    #[test]
    fn an_underrun_a_plugin_reports_a_write_late_starts_when_the_late_write_ran_dry() {
        // Write 8 comes back 800 ms late with 750 ms queued before it: the
        // queue ran dry 50 ms (at least) before the writer was back, though
        // EPIPE comes one write later.
        let mut sink = LaggingPlugin::new(8, 800, 1);
        let out = play_into(&mut sink);
        assert_eq!(out.events.len(), 1, "{:#?}", out.events);
        let e = &out.events[0];
        assert_eq!(e.gap_clock, ClockSource::Player);
        assert_eq!(e.queued_before_us, Some(750_000), "{e:#?}");
        assert!(e.at_least_ms.is_some_and(|v| v >= 50.0), "{e:#?}");
        assert!(e.gap_ms >= 50.0, "{e:#?}");
    }

    #[test]
    fn a_late_write_the_device_played_through_is_forgotten_a_buffer_later() {
        // EPIPE 40 writes (10 buffers) after the late write: the device
        // played on through it, so that dry moment is no longer this
        // underrun's start, and with the fresh prediction in the future
        // there is no figure to trust.
        let mut sink = LaggingPlugin::new(8, 800, 40);
        let out = play_into(&mut sink);
        assert_eq!(out.events.len(), 1, "{:#?}", out.events);
        assert_eq!(out.events[0].at_least_ms, None, "{:#?}", out.events[0]);
    }

    #[test]
    fn parses_stall_specs() {
        assert_eq!(
            "1.5:300".parse(),
            Ok(StallSpec {
                at_s: 1.5,
                ms: 300.0
            })
        );
        for bad in ["", "1", "1:", ":3", "-1:3", "1:0", "a:b"] {
            assert!(bad.parse::<StallSpec>().is_err(), "{bad}");
        }
    }
}
