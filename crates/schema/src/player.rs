//! `xrunbench.player/1`: the report `xrun-player --json` writes.

use serde::{Deserialize, Serialize};

use crate::HistogramSummary;

/// Schema identifier of [`PlayerReport`].
pub const PLAYER_SCHEMA: &str = "xrunbench.player/1";

/// Everything one `xrun-player` run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayerReport {
    /// Always [`PLAYER_SCHEMA`].
    pub schema: String,
    /// Version of the player that wrote the report.
    pub version: String,
    /// Wall-clock start, RFC 3339 UTC.
    pub started_at: String,
    /// The WAV file that was played.
    pub file: FileInfo,
    /// Parameters as negotiated with the device (not as requested).
    pub params: Negotiated,
    /// Why playback ended.
    pub ended: EndReason,
    /// Seconds of audio handed to the device.
    pub audio_seconds: f64,
    /// Frames handed to the device.
    pub frames_written: u64,
    /// Wall-clock seconds from the first write to the end of playback.
    pub wall_seconds: f64,
    /// Every underrun, in order.
    pub events: Vec<Underrun>,
    /// Totals over `events`.
    pub totals: Totals,
    /// Queued audio (buffer fill) at each wake-up while running, in µs.
    pub fill: HistogramSummary,
    /// Wake-up lateness against the period, in µs (0 = on time).
    pub lateness: HistogramSummary,
    /// What the player process cost and which of its settings took.
    pub process: ProcessInfo,
    /// Stalls injected by the documented self-test option, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selftest_stalls: Vec<SelftestStall>,
}

/// The input file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Path as given on the command line.
    pub path: String,
    /// Path actually streamed from (a tmpfs copy when one was made).
    pub played_from: String,
    /// Whether a temporary tmpfs copy was made (and removed at exit).
    pub copied_to_tmpfs: bool,
    /// Sample format of the file, in ALSA's spelling (`S16_LE`, `FLOAT_LE`…).
    pub format: String,
    /// Sample rate of the file, Hz.
    pub rate: u32,
    /// Channels of the file.
    pub channels: u16,
    /// Frames in the file's data chunk.
    pub frames: u64,
}

/// Which clock a figure was measured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The kernel's status trigger timestamp (hardware PCM).
    Kernel,
    /// The player's own CLOCK_MONOTONIC: dry moment = write time + delay/rate.
    Player,
    /// The virtual sink's simulated device clock (exact by construction).
    Virtual,
}

/// Device parameters as negotiated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Negotiated {
    /// `alsa`, `virtual` or `cpal`.
    pub backend: String,
    /// Device name (`hw:0`, `plug:jack`, `virtual`…).
    pub device: String,
    /// Whether `--backend auto` chose this backend (and why).
    pub backend_choice: String,
    /// True for a hardware PCM (kernel timestamps are trusted), false for a
    /// plugin or virtual PCM.
    pub hardware: bool,
    /// Sample format handed to the device.
    pub format: String,
    /// Rate, Hz.
    pub rate: u32,
    /// Channels.
    pub channels: u32,
    /// Buffer size in frames.
    pub buffer_frames: u64,
    /// Period size in frames.
    pub period_frames: u64,
    /// Buffer time in µs.
    pub buffer_us: u64,
    /// Period time in µs.
    pub period_us: u64,
    /// Start threshold in frames.
    pub start_threshold: u64,
    /// Stop threshold in frames.
    pub stop_threshold: u64,
    /// Clock used for the underruns' start and "at least" figures.
    pub underrun_clock: ClockSource,
}

/// Why playback ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The file (and all `--loops`) was played to the end.
    EndOfFile,
    /// `--duration` elapsed.
    Duration,
    /// SIGINT or SIGTERM.
    Signal,
    /// An underrun with `--fatal-errors`.
    FatalUnderrun,
}

/// One underrun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Underrun {
    /// Seconds since playback started when the buffer ran dry.
    pub at_s: f64,
    /// Frame position in the file (within the current loop) of the first
    /// frame that was late.
    pub file_frame: u64,
    /// Which loop of the file was playing (0-based).
    pub file_loop: u64,
    /// aplay's "at least" figure: from the buffer running dry to the player
    /// noticing, ms. `None` when no trustworthy clock gave it.
    pub at_least_ms: Option<f64>,
    /// Clock behind `at_s` and `at_least_ms`.
    pub at_least_clock: ClockSource,
    /// Full gap from the buffer running dry until the stream was running
    /// again, ms.
    pub gap_ms: f64,
    /// Clock behind `gap_ms`.
    pub gap_clock: ClockSource,
    /// Audio queued at the last successful write before the underrun, µs.
    pub queued_before_us: Option<u64>,
}

/// Totals over all underruns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Number of underruns (episodes, not callbacks).
    pub count: u64,
    /// Sum of all gaps, ms.
    pub gap_ms_sum: f64,
    /// Longest gap, ms.
    pub gap_ms_max: f64,
    /// Underruns per minute of wall-clock playback.
    pub per_minute: f64,
}

/// Cost of the player process and whether its settings took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// User CPU time, ms.
    pub cpu_user_ms: f64,
    /// System CPU time, ms.
    pub cpu_sys_ms: f64,
    /// Peak resident set size, KiB.
    pub max_rss_kib: u64,
    /// mlockall outcome: `locked`, `off` or the error.
    pub mlock: String,
    /// Scheduling policy requested and whether it took (`fifo:80`, or
    /// `fifo:80 failed: …`).
    pub priority: String,
    /// CPU affinity requested and whether it took.
    pub affinity: String,
}

/// A stall injected by the self-test option.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelftestStall {
    /// Seconds since playback started when the stall began.
    pub at_s: f64,
    /// Requested length, ms.
    pub requested_ms: f64,
    /// Measured length, ms.
    pub actual_ms: f64,
    /// Audio queued when the stall began, µs (from the device's delay).
    pub queued_us: Option<u64>,
}
