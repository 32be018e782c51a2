//! `xrunbench.hackbench/1`: the report `xrun-hackbench --json` writes.

use serde::{Deserialize, Serialize};

/// Schema identifier of [`HackbenchReport`].
pub const HACKBENCH_SCHEMA: &str = "xrunbench.hackbench/1";

/// Everything one `xrun-hackbench` invocation measured.
///
/// Only completed rounds are counted: a round cut short by a stop request
/// or a failure contributes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HackbenchReport {
    /// Always [`HACKBENCH_SCHEMA`].
    pub schema: String,
    /// Version of the tool that wrote the report.
    pub version: String,
    /// The load's parameters.
    pub params: HackbenchParams,
    /// Each round's time, µs, from CLOCK_MONOTONIC (wake byte to last reap);
    /// the same values as `rounds[].us`, kept flat for quick reading.
    pub rounds_us: Vec<u64>,
    /// Number of rounds completed.
    pub rounds_completed: u64,
    /// Messages moved over all completed rounds, as counted by the receivers.
    pub messages: u64,
    /// Bytes moved over all completed rounds, as counted by the receivers.
    pub bytes: u64,
    /// Voluntary context switches of the workers over all completed rounds
    /// (see `ctxsw_source`; the main thread is never included).
    pub voluntary_ctxsw: u64,
    /// Involuntary context switches of the workers, likewise.
    pub involuntary_ctxsw: u64,
    /// How the context switches were measured: `wait4-per-worker` (process
    /// mode: each worker's rusage as wait4(2) reaps it) or
    /// `rusage-thread-per-worker` (thread mode: getrusage(RUSAGE_THREAD)
    /// by each worker just before it returns).
    pub ctxsw_source: String,
    /// Every completed round in detail.
    pub rounds: Vec<HackbenchRound>,
    /// Why the run ended: `rounds`, `duration`, `signal` or `error`.
    pub ended: String,
    /// With `ended == "error"`: the failure, as printed on stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One completed round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HackbenchRound {
    /// Time from just before the wake byte to the last reap, µs,
    /// CLOCK_MONOTONIC.
    pub us: u64,
    /// The same window by gettimeofday (what the `Time:` line prints), µs.
    pub wall_us: u64,
    /// Messages the receivers read.
    pub messages: u64,
    /// Bytes the receivers read.
    pub bytes: u64,
    /// Voluntary context switches of the workers.
    pub voluntary_ctxsw: u64,
    /// Involuntary context switches of the workers.
    pub involuntary_ctxsw: u64,
}

/// hackbench's parameters, as rt-tests names them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HackbenchParams {
    /// Groups (`-g`).
    pub groups: u32,
    /// Receivers (and senders) per group (`-f`).
    pub fds: u32,
    /// Messages each sender sends to each receiver (`-l`).
    pub loops: u32,
    /// Bytes per message (`-s`).
    pub datasize: u32,
    /// `process` or `thread`.
    pub mode: String,
    /// `socket`, `pipe` or `inet`.
    pub transport: String,
    /// Whether the main thread ran SCHED_FIFO 1 (`-F`).
    pub fifo: bool,
    /// `--repeat`, if given.
    #[serde(default)]
    pub repeat: Option<u64>,
    /// `--duration` in seconds, if given.
    #[serde(default)]
    pub duration_s: Option<f64>,
}
