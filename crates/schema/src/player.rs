//! `xrunbench.player/1`: the report `xrun-player --json` writes.

use serde::{Deserialize, Serialize};

use crate::HistogramSummary;

/// Schema identifier of [`PlayerReport`].
pub const PLAYER_SCHEMA: &str = "xrunbench.player/1";

/// Where xrun-player (pid `pid`) keeps a report it could not write where
/// `--json` said, in the order it tries: the temporary directory, then
/// /dev/shm. The player writes there; whoever ran it (xrun-trial) removes
/// what it finds once the player has ended.
pub fn kept_report_paths(pid: u32) -> [std::path::PathBuf; 2] {
    let name = format!("xrun-player-report-{pid}.json");
    [
        std::env::temp_dir().join(&name),
        std::path::Path::new("/dev/shm").join(name),
    ]
}

/// Everything one `xrun-player` run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayerReport {
    /// Always [`PLAYER_SCHEMA`].
    pub schema: String,
    /// Version of the player that wrote the report.
    pub version: String,
    /// Wall-clock start, RFC 3339 UTC.
    pub started_at: String,
    /// The instant every `at_s` counts from, CLOCK_MONOTONIC ns: what puts
    /// the underruns on the timeline of a latency monitor and a scheduler
    /// trace (on the cpal sink: its first data callback). Absent when no
    /// callback ran, and in reports of players before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_mono_ns: Option<u64>,
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
    /// Errors the audio host reported that are not underruns (cpal sink).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_errors: Vec<HostErrorCount>,
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
    /// cpal's stream instants (the callback and playback timestamps its host
    /// hands to the data callback; CLOCK_MONOTONIC-based on ALSA, JACK's
    /// `jack_get_time`, PulseAudio's `Instant`, PipeWire's stream time).
    Cpal,
}

/// Who saw an underrun.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventSource {
    /// A blocking write (or wait) returned EPIPE: the device stopped the
    /// stream (ALSA and virtual sinks; every report before the cpal sink).
    #[default]
    DeviceEpipe,
    /// cpal's error callback reported `ErrorKind::Xrun` (its ALSA and JACK
    /// hosts); it never says how long, so the figures come from the data
    /// callback's timestamps around it.
    CpalXrun,
    /// The data callback's own timestamps: it was called later than the
    /// moment the previously written audio ran out, by more than the
    /// host's steady-state noise.
    CallbackGap,
    /// The device was fed, but the player's reader did not keep the ring
    /// between it and the callback filled: the callback played silence.
    ReaderBehind,
}

/// Errors a host reported that are not underruns, counted rather than
/// listed (a misbehaving plugin can report thousands).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostErrorCount {
    /// The error's kind (cpal's `ErrorKind`, e.g. `BackendError`).
    pub kind: String,
    /// How many times it was reported.
    pub count: u64,
    /// The first report's message.
    pub first_message: String,
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
    /// What the device changed from the request (e.g. a host rounding the
    /// buffer), one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
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
    /// Who saw it (reports written before this field existed: a device
    /// EPIPE, the only source there was).
    #[serde(default)]
    pub source: EventSource,
    /// Other sources that saw the same episode (e.g. cpal's `Xrun` error
    /// beside the callback gap that measured it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_seen_by: Vec<EventSource>,
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
    /// The kernel thread id of the thread that fed the device (the writer,
    /// or the cpal host's callback thread): the one whose waits a
    /// scheduler trace accounts for. Absent in reports of players before
    /// it, and when no callback ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feeder_tid: Option<u32>,
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
    /// Audio queued when the stall began, µs (from the device's delay; for
    /// the cpal sink, playback − callback instant of the stalled callback).
    pub queued_us: Option<u64>,
}

impl SelftestStall {
    /// Whether an underrun whose sink ran dry at `dry_s` began during this
    /// stall (within 1 ms either side: the two instants are read by
    /// different threads).
    pub fn holds(&self, dry_s: f64) -> bool {
        dry_s >= self.at_s - 0.001 && dry_s <= self.at_s + self.actual_ms / 1e3 + 0.001
    }
}
