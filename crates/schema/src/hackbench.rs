//! `xrunbench.hackbench/1`: the report `xrun-hackbench --json` writes.

use serde::{Deserialize, Serialize};

/// Schema identifier of [`HackbenchReport`].
pub const HACKBENCH_SCHEMA: &str = "xrunbench.hackbench/1";

/// Everything one `xrun-hackbench` invocation measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HackbenchReport {
    /// Always [`HACKBENCH_SCHEMA`].
    pub schema: String,
    /// Version of the tool that wrote the report.
    pub version: String,
    /// The load's parameters.
    pub params: HackbenchParams,
    /// Each round's time, µs, from a monotonic clock (wake byte to last reap).
    pub rounds_us: Vec<u64>,
    /// Number of rounds completed.
    pub rounds_completed: u64,
    /// Messages moved over all completed rounds.
    pub messages: u64,
    /// Bytes moved over all completed rounds.
    pub bytes: u64,
    /// Voluntary context switches of the workers (getrusage children/self).
    pub voluntary_ctxsw: u64,
    /// Involuntary context switches of the workers.
    pub involuntary_ctxsw: u64,
    /// Why the run ended: `rounds`, `duration` or `signal`.
    pub ended: String,
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
}
