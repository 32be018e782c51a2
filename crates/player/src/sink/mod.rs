//! Where the audio goes: one trait, one implementation per backend.
//!
//! The playback loop (`crate::play`) owns the underrun accounting and the
//! near-miss statistics; a sink only moves frames and reports the device's
//! own state, so every backend gets the same figures.

pub mod alsa;
pub mod alsa_time;
pub mod cpal_sink;
pub mod virtual_pcm;

use xrunbench_schema::player::{ClockSource, HostErrorCount, SelftestStall, Underrun};
use xrunbench_schema::Backend;

use crate::clock::MonoNs;
use crate::nearmiss::NearMiss;
use xrunbench_schema::SampleFormat;

/// Buffer and period as the user asked for them (aplay's options).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BufferRequest {
    /// `-B/--buffer-time`, µs.
    pub buffer_time_us: Option<u32>,
    /// `-F/--period-time`, µs.
    pub period_time_us: Option<u32>,
    /// `--buffer-size`, frames.
    pub buffer_frames: Option<u64>,
    /// `--period-size`, frames.
    pub period_frames: Option<u64>,
}

/// aplay's default buffer time when nothing is asked: 500 ms (capped by the
/// device's maximum).
pub const DEFAULT_BUFFER_TIME_US: u32 = 500_000;

/// The stream format to open the device with (the file's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamFormat {
    /// Sample encoding.
    pub format: SampleFormat,
    /// Rate, Hz.
    pub rate: u32,
    /// Channels.
    pub channels: u16,
}

/// What the device agreed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// Which backend this is (never `auto`).
    pub backend: Backend,
    /// Device name.
    pub device: String,
    /// Whether the PCM is a card's (hardware) rather than a plugin's.
    pub hardware: bool,
    /// The clock that times this sink's underruns ("at least" and gap):
    /// the kernel's trigger stamp on a hardware PCM, the simulated device's
    /// on the virtual sink (both through [`Sink::xrun_stamp`]), cpal's
    /// stream instants, or the player's own prediction of the dry moment
    /// where the device stamps nothing usable.
    pub clock: ClockSource,
    /// Format handed to the device.
    pub format: SampleFormat,
    /// Rate, Hz.
    pub rate: u32,
    /// Channels.
    pub channels: u32,
    /// Buffer size, frames.
    pub buffer_frames: u64,
    /// Period size, frames.
    pub period_frames: u64,
    /// Start threshold, frames.
    pub start_threshold: u64,
    /// Stop threshold, frames.
    pub stop_threshold: u64,
    /// What the device changed from the request, one sentence each (said on
    /// stderr and kept in the report).
    pub notes: Vec<String>,
}

/// What a sink measured on the device side itself (in a real-time
/// callback, say), handed over once playback has finished. Sinks whose
/// playback loop does the measuring leave it empty.
#[derive(Debug, Default)]
pub struct DeviceSide {
    /// Near misses measured by the device side; replaces the playback
    /// loop's own histograms.
    pub near_miss: Option<NearMiss>,
    /// Self-test stalls the device side injected (into its own thread).
    pub stalls: Option<Vec<SelftestStall>>,
    /// Host errors that are not underruns, counted.
    pub host_errors: Vec<HostErrorCount>,
    /// `--priority` as applied to the device-feeding thread, when that is
    /// not the writer (the report's words).
    pub feeder_priority: Option<String>,
    /// `--cpu` as applied to the device-feeding thread, likewise.
    pub feeder_affinity: Option<String>,
    /// CLOCK_MONOTONIC when the device side started measuring (what its
    /// events' `at_s` count from), when it did.
    pub started_mono_ns: Option<u64>,
    /// The kernel thread id of the device-feeding thread, when it ran.
    pub feeder_tid: Option<u32>,
}

/// A failure of a sink operation.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The buffer ran dry (EPIPE): the stream is stopped until recovered.
    #[error("underrun")]
    Xrun,
    /// A signal interrupted a blocking call.
    #[error("interrupted")]
    Interrupted,
    /// The device went away or failed.
    #[error("{0}")]
    Device(String),
}

/// What the device itself says about an underrun it just reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XrunStamp {
    /// When the device stopped the stream for the underrun, on
    /// CLOCK_MONOTONIC: only from sinks whose [`Setup::clock`] is the
    /// device's own (kernel, virtual), `None` from the others.
    pub stopped_at: Option<MonoNs>,
}

/// A playback device.
pub trait Sink {
    /// The negotiated setup.
    fn setup(&self) -> &Setup;

    /// Blocks until at least one period can be written, the stream is not
    /// running, or a signal arrives.
    fn wait(&mut self) -> Result<(), SinkError>;

    /// Writes up to `data.len()` bytes of whole frames, blocking while the
    /// buffer is full; returns the frames written.
    fn write(&mut self, data: &[u8]) -> Result<usize, SinkError>;

    /// Frames queued and not yet played, if the device can tell.
    fn delay(&mut self) -> Option<i64>;

    /// Whether the stream is running (started and not stopped).
    fn is_running(&mut self) -> bool;

    /// The device's account of the underrun just reported by `Xrun`.
    fn xrun_stamp(&mut self) -> XrunStamp;

    /// Recovers from an underrun (ALSA's `prepare`), ready to be refilled.
    fn recover(&mut self) -> Result<(), SinkError>;

    /// Plays out what is queued (end of file) or drops it (`immediately`).
    fn finish(&mut self, immediately: bool) -> Result<(), SinkError>;

    /// Human-readable setup for `-v` (aplay prints alsa-lib's dump).
    fn describe(&mut self) -> String;

    /// Moves the underruns the device side saw on its own (not through a
    /// `write` or `wait` error) into `out`, oldest first. `at_s` counts from
    /// the stream's start and `file_frame` is the frame position in the
    /// whole stream (all loops); the playback loop splits it into loop and
    /// frame.
    fn drain_events(&mut self, _out: &mut Vec<Underrun>) {}

    /// What the device side measured itself; called once, after `finish`.
    fn device_side(&mut self) -> DeviceSide {
        DeviceSide::default()
    }
}

/// Resolves a buffer request into (buffer, period) frames the way aplay
/// does for a device without limits: buffer = 500 ms unless asked,
/// period = buffer / 4 unless asked.
pub fn resolve_frames(req: &BufferRequest, rate: u32) -> (u64, u64) {
    let us_to_frames = |us: u32| (us as u64 * rate as u64 + 500_000) / 1_000_000;
    let buffer = match (req.buffer_frames, req.buffer_time_us) {
        (Some(f), _) => f,
        (None, Some(us)) => us_to_frames(us),
        (None, None) => us_to_frames(DEFAULT_BUFFER_TIME_US),
    };
    let period = match (req.period_frames, req.period_time_us) {
        (Some(f), _) => f,
        (None, Some(us)) => us_to_frames(us),
        (None, None) => buffer / 4,
    };
    (buffer.max(1), period.clamp(1, buffer.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aplay_defaults_are_500ms_in_four_periods() {
        assert_eq!(
            resolve_frames(&BufferRequest::default(), 48_000),
            (24_000, 6_000)
        );
    }

    #[test]
    fn explicit_times_and_sizes() {
        let req = BufferRequest {
            buffer_time_us: Some(20_000),
            period_time_us: Some(5_000),
            ..Default::default()
        };
        assert_eq!(resolve_frames(&req, 48_000), (960, 240));
        let req = BufferRequest {
            buffer_frames: Some(1024),
            ..Default::default()
        };
        assert_eq!(resolve_frames(&req, 44_100), (1024, 256));
    }
}
