//! The writer's side: [`CpalSink`], the [`Sink`] the playback loop drives.
//! It converts the file's samples to the device's format and pushes them
//! into the ring (parking while it is full), starts the stream once the
//! ring is full, and hands over what the callbacks saw.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cpal::traits::{DeviceTrait, StreamTrait};
use xrunbench_schema::player::{ClockSource, Underrun};
use xrunbench_schema::{Backend, CpuList, Priority, SampleFormat};

use super::callback::{CallbackStats, Feeder, Shared, NOT_YET};
use super::config::{self, Choice};
use super::events::{self, EventRecord, FirstMessages, ERROR_KINDS, EVENT_BYTES, EVENT_SLOTS};
use super::threads::{at_callback_priority, share_callback_scheduling};
use super::{host, CpalOpenError, CpalOptions};
use crate::clock::{self, frames_to_ns};
use crate::convert::convert;
use crate::ring::{self, Consumer, Producer};
use crate::sink::{
    resolve_frames, BufferRequest, DeviceSide, Setup, Sink, SinkError, StreamFormat, XrunStamp,
};
use crate::system;

/// The writer gives up when the callback has not run for this long while
/// the stream should be playing (a dead server, a stream cpal gave up on).
const STALLED_STREAM_NS: i64 = 5_000_000_000;

/// The ring between reader and callback holds at least this many callbacks.
const RING_PERIODS: u64 = 8;

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

impl CpalSink {
    /// Opens `opts.device` on `opts.host` for `fmt`, with a callback of the
    /// requested period (`BufferSize::Fixed`; cpal's defaults are far too
    /// large to ever underrun), and a ring of the requested buffer.
    pub fn open(
        opts: &CpalOptions,
        fmt: StreamFormat,
        req: &BufferRequest,
    ) -> Result<CpalSink, CpalOpenError> {
        let fail = |what: String| CpalOpenError::Device {
            host: opts.host.as_str(),
            device: opts.device.clone(),
            what,
        };
        // Every thread from here on belongs to the host (see
        // `share_callback_scheduling`).
        let threads_before = system::thread_ids();
        let (_host, device) = host::open_device(opts)?;
        let choice = config::negotiate(opts.host, &device, fmt, req).map_err(fail)?;
        let ring_frames = ring_frames(req, fmt.rate, choice.period).map_err(fail)?;
        let dev_frame_bytes = choice.format.bytes() * usize::from(fmt.channels);
        let (audio_tx, audio_rx) = ring::ring(ring_frames * dev_frame_bytes);
        let (events_tx, events_rx) = ring::ring(EVENT_SLOTS * EVENT_BYTES);
        let shared = Arc::new(Shared::new(std::thread::current()));
        let stats = Arc::new(Mutex::new(CallbackStats::new(opts.stalls.len())));
        let first_errors = FirstMessages::default();
        let feeder = Feeder::new(
            audio_rx,
            events_tx,
            shared.clone(),
            stats.clone(),
            choice.format,
            fmt,
            opts,
        );
        let stream =
            build_stream(&device, fmt, &choice, feeder, &shared, &first_errors).map_err(fail)?;
        let mut notes = choice.notes;
        notes.extend(share_callback_scheduling(&threads_before, opts));
        let period = granted_period(&stream, choice.period, &mut notes);
        notes.push(format!(
            "cpal double-buffers: device buffer = 2 callbacks of {period} frames; \
             a ring of {ring_frames} frames lies between the reader and the callback"
        ));
        if !opts.quiet {
            for n in &notes {
                eprintln!("xrun-player: cpal: {n}");
            }
        }
        let (dev_id, dev_name) = host::device_names(&device);
        let describe = format!(
            "cpal host {}, device {dev_id:?} ({dev_name}), {:?} {} Hz {} ch, callback {period} frames (BufferSize::Fixed({})), ring {ring_frames} frames\n",
            opts.host, choice.format, fmt.rate, fmt.channels, choice.period
        );
        let name = if dev_id.is_empty() { dev_name } else { dev_id };
        let setup = Setup {
            backend: Backend::Cpal,
            device: format!("{}/{name}", opts.host),
            hardware: false,
            clock: ClockSource::Cpal,
            format: choice.format,
            rate: fmt.rate,
            channels: u32::from(fmt.channels),
            buffer_frames: 2 * period,
            period_frames: period,
            start_threshold: ring_frames as u64,
            stop_threshold: 0,
            notes,
        };
        Ok(CpalSink {
            stream: Some(stream),
            audio: audio_tx,
            events: events_rx,
            shared,
            stats,
            first_errors,
            errors_said: [0; ERROR_KINDS],
            file_format: fmt.format,
            file_frame_bytes: fmt.format.bytes() * usize::from(fmt.channels),
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

    /// Starts the stream (once): when the ring is full, or the writer must
    /// wait for room anyway.
    fn start(&mut self) -> Result<(), SinkError> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        match &self.stream {
            Some(s) => at_callback_priority(self.feeder_priority, || s.play())
                .map_err(|e| SinkError::Device(format!("cannot start the stream: {e}"))),
            None => Ok(()),
        }
    }

    /// What ended the stream, if the host reported a fatal error.
    fn fatal_error(&self) -> Option<String> {
        for kind in [
            cpal::ErrorKind::DeviceNotAvailable,
            cpal::ErrorKind::StreamInvalidated,
            cpal::ErrorKind::HostUnavailable,
        ] {
            debug_assert!(events::is_fatal(kind));
            if self.shared.error_counts[events::error_index(kind)].load(Ordering::Acquire) > 0 {
                return Some(format!("the stream failed ({kind:?})"));
            }
        }
        None
    }

    /// Whether the callback has been silent for too long while playing.
    fn stream_stalled(&self) -> bool {
        let last = self.shared.last_callback_mono.load(Ordering::Relaxed);
        self.started && last > 0 && clock::now() - last > STALLED_STREAM_NS
    }

    /// One callback's length, ns.
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
            if n == 0 || self.errors_said[k] > 0 || k == events::error_index(cpal::ErrorKind::Xrun)
            {
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
                events::ERROR_NAMES[k]
            );
        }
    }
}

/// Frames of the ring between the reader and the callback: the requested
/// buffer, and at least [`RING_PERIODS`] callbacks. After an underrun a host
/// asks for several callbacks back to back to refill the device (ALSA: two
/// periods before it restarts), faster than a reader woken per callback
/// refills a smaller ring, and that would show as the reader falling
/// behind.
fn ring_frames(req: &BufferRequest, rate: u32, period: u32) -> Result<usize, String> {
    let (buffer, _) = resolve_frames(req, rate);
    let frames = buffer.max(RING_PERIODS * u64::from(period));
    usize::try_from(frames).map_err(|_| format!("a ring of {frames} frames does not fit in memory"))
}

/// Builds the output stream: the data callback runs `feeder`, the error
/// callback counts into `shared` and `first_errors`.
fn build_stream(
    device: &cpal::Device,
    fmt: StreamFormat,
    choice: &Choice,
    mut feeder: Feeder,
    shared: &Arc<Shared>,
    first_errors: &FirstMessages,
) -> Result<cpal::Stream, String> {
    let config = cpal::StreamConfig {
        channels: fmt.channels,
        sample_rate: fmt.rate,
        buffer_size: cpal::BufferSize::Fixed(choice.period),
    };
    let format = config::to_cpal(choice.format)
        .ok_or_else(|| format!("cpal has no {} format", choice.format))?;
    let (err_shared, err_first) = (shared.clone(), first_errors.clone());
    device
        .build_output_stream_raw(
            config,
            format,
            move |data: &mut cpal::Data, info: &cpal::OutputCallbackInfo| {
                feeder.on_data(data.bytes_mut(), info)
            },
            move |e| events::on_error(&err_shared, &err_first, e),
            Some(Duration::from_secs(5)),
        )
        .map_err(|e| format!("cannot build the output stream: {e}"))
}

/// The callback size the host settled on (said in `notes` when it is not
/// the one asked for).
fn granted_period(stream: &cpal::Stream, asked: u32, notes: &mut Vec<String>) -> u64 {
    match stream.buffer_size() {
        Ok(n) if n != asked => {
            notes.push(format!(
                "the host rounded the callback from {asked} to {n} frames"
            ));
            u64::from(n)
        }
        Ok(n) => u64::from(n),
        Err(_) => u64::from(asked),
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
            at_callback_priority(self.feeder_priority, || {
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
            out.push(events::to_underrun(EventRecord::decode(&rec)));
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
        let host_errors = events::host_errors(&self.shared, &self.first_errors);
        let said = |errno: &AtomicI32, what: Option<String>| {
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
            started_mono_ns: u64::try_from(self.shared.first_callback_mono.load(Ordering::Acquire))
                .ok()
                .filter(|&t| t > 0),
            feeder_tid: Some(self.shared.callback_tid.load(Ordering::Acquire)).filter(|&t| t > 0),
        }
    }
}

impl Drop for CpalSink {
    fn drop(&mut self) {
        // The stream first: its callback owns the other end of our rings.
        if let Some(s) = self.stream.take() {
            at_callback_priority(self.feeder_priority, || drop(s));
        }
    }
}
