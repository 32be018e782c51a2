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
    /// The kept rounds' times, µs, from CLOCK_MONOTONIC (wake byte to last
    /// reap); the same values as `rounds[].us`, kept flat for quick reading.
    /// Every round while there are few; past 1024 an evenly spread sample
    /// (see `rounds_kept_every`), so that a report stays small however
    /// long the load ran.
    pub rounds_us: Vec<u64>,
    /// Number of rounds completed (all of them, kept or not).
    pub rounds_completed: u64,
    /// k: `rounds_us` and `rounds` hold rounds 1, 1+k, 1+2k, … of the run
    /// (1: every round). A power of two.
    #[serde(default = "every_round")]
    pub rounds_kept_every: u64,
    /// The times of every completed round summed, µs: exact however the
    /// rounds were thinned. Absent from reports written before rounds were
    /// thinned, whose `rounds_us` holds every round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_us_total: Option<u64>,
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
    /// The kept rounds in detail (those of `rounds_us`).
    pub rounds: Vec<HackbenchRound>,
    /// Why the run ended: `rounds`, `duration`, `signal` or `error`.
    pub ended: String,
    /// With `ended == "error"`: the failure, as printed on stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn every_round() -> u64 {
    1
}

impl HackbenchReport {
    /// (rounds, their summed time in µs) over every completed round;
    /// `None` without rounds or when the times overflow a sum. For a report
    /// from before rounds were thinned, what `rounds_us` holds.
    pub fn round_totals(&self) -> Option<(u64, u64)> {
        let (n, total) = match self.rounds_us_total {
            Some(total) => (self.rounds_completed, total),
            None => (
                self.rounds_us.len() as u64,
                self.rounds_us
                    .iter()
                    .try_fold(0u64, |sum, &us| sum.checked_add(us))?,
            ),
        };
        (n > 0).then_some((n, total))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(
        rounds_us: Vec<u64>,
        completed: u64,
        every: u64,
        total: Option<u64>,
    ) -> HackbenchReport {
        HackbenchReport {
            schema: HACKBENCH_SCHEMA.into(),
            version: "0".into(),
            params: HackbenchParams {
                groups: 1,
                fds: 1,
                loops: 1,
                datasize: 100,
                mode: "process".into(),
                transport: "socket".into(),
                fifo: false,
                repeat: None,
                duration_s: None,
            },
            rounds_us,
            rounds_completed: completed,
            rounds_kept_every: every,
            rounds_us_total: total,
            messages: 0,
            bytes: 0,
            voluntary_ctxsw: 0,
            involuntary_ctxsw: 0,
            ctxsw_source: String::new(),
            rounds: vec![],
            ended: "rounds".into(),
            error: None,
        }
    }

    #[test]
    fn totals_count_every_round_and_old_reports_read_as_before() {
        // Thinned: the exact count and total, not the sample's.
        let thinned = report(vec![10, 30], 4, 2, Some(100));
        assert_eq!(thinned.round_totals(), Some((4, 100)));
        // From before thinning (no total): what rounds_us holds, whatever
        // rounds_completed says, exactly as the tables computed it.
        let old = report(vec![10, 30], 9, 1, None);
        assert_eq!(old.round_totals(), Some((2, 40)));
        assert_eq!(report(vec![], 0, 1, None).round_totals(), None);
        assert_eq!(report(vec![u64::MAX, 1], 2, 1, None).round_totals(), None);
        // An old report without the new fields still reads.
        let mut v = serde_json::to_value(&old).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("rounds_kept_every");
        o.remove("rounds_us_total");
        let back: HackbenchReport = serde_json::from_value(v).unwrap();
        assert_eq!((back.rounds_kept_every, back.rounds_us_total), (1, None));
    }
}
