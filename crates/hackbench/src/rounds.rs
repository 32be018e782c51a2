//! The rounds of a run, kept in bounded memory.
//!
//! A load runs rounds back to back for as long as a trial plays: a
//! 60-minute trial of `-l 1` rounds on a fast machine completes about 10⁶
//! of them, whose report (a board's tmpfs, the host's `compare`) must not
//! grow with them. So the totals are kept exactly, and the rounds
//! themselves are thinned uniformly: every round is kept until [`CAP`] are
//! held, then every other one is dropped and only every second round is
//! kept from then on, and so on (rounds 1, 1+k, 1+2k, … with k a power of
//! two). What is kept is an evenly spread sample of the whole run, never
//! its first minutes only.

use crate::RoundResult;

/// At most this many rounds are kept (at least half as many once the run
/// was long enough to thin them).
pub const CAP: usize = 1024;

/// Sums over every completed round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundTotals {
    /// Completed rounds.
    pub rounds: u64,
    /// Their CLOCK_MONOTONIC times summed, µs.
    pub elapsed_us: u64,
    /// Messages the receivers read.
    pub messages: u64,
    /// Bytes the receivers read.
    pub bytes: u64,
    /// Voluntary context switches of the workers.
    pub voluntary_ctxsw: u64,
    /// Involuntary context switches of the workers.
    pub involuntary_ctxsw: u64,
}

/// Every completed round counted, an evenly spread sample of them kept.
#[derive(Debug, Clone)]
pub struct RoundLog {
    cap: usize,
    every: u64,
    kept: Vec<RoundResult>,
    totals: RoundTotals,
}

impl Default for RoundLog {
    fn default() -> Self {
        RoundLog::with_cap(CAP)
    }
}

impl RoundLog {
    /// A log that keeps at most `cap` rounds (at least 2).
    pub fn with_cap(cap: usize) -> RoundLog {
        let cap = cap.max(2);
        RoundLog {
            cap,
            every: 1,
            kept: Vec::with_capacity(cap),
            totals: RoundTotals::default(),
        }
    }

    /// Counts a completed round, and keeps it when its turn comes.
    pub fn push(&mut self, r: RoundResult) {
        let t = &mut self.totals;
        let index = t.rounds;
        t.rounds += 1;
        t.elapsed_us = t
            .elapsed_us
            .saturating_add(u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX));
        t.messages = t.messages.saturating_add(r.messages);
        t.bytes = t.bytes.saturating_add(r.bytes);
        t.voluntary_ctxsw = t.voluntary_ctxsw.saturating_add(r.voluntary_ctxsw);
        t.involuntary_ctxsw = t.involuntary_ctxsw.saturating_add(r.involuntary_ctxsw);
        if index % self.every != 0 {
            return;
        }
        if self.kept.len() == self.cap {
            // Keep rounds 0, 2k, 4k, …: the even positions of what is held.
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.every *= 2;
            if index % self.every != 0 {
                return;
            }
        }
        self.kept.push(r);
    }

    /// The rounds kept, in order: rounds 0, k, 2k, … (0-based) of the run.
    pub fn kept(&self) -> &[RoundResult] {
        &self.kept
    }

    /// k: every how many completed rounds one is kept (1: all of them).
    pub fn every(&self) -> u64 {
        self.every
    }

    /// The sums over every completed round.
    pub fn totals(&self) -> &RoundTotals {
        &self.totals
    }

    /// Completed rounds.
    pub fn completed(&self) -> u64 {
        self.totals.rounds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn round(i: u64) -> RoundResult {
        RoundResult {
            wall_sec: 0,
            wall_usec: i,
            elapsed: Duration::from_micros(1000 + i),
            messages: 2,
            bytes: 200,
            voluntary_ctxsw: 3,
            involuntary_ctxsw: 1,
        }
    }

    #[test]
    fn a_short_run_keeps_every_round() {
        let mut log = RoundLog::with_cap(8);
        for i in 0..8 {
            log.push(round(i));
        }
        assert_eq!(log.every(), 1);
        assert_eq!(log.kept().len(), 8);
        assert_eq!(log.kept(), &(0..8).map(round).collect::<Vec<_>>()[..]);
    }

    #[test]
    fn a_long_run_is_bounded_evenly_spread_and_counted_exactly() {
        for n in [9u64, 100, 1000, 12_345, 1_000_000] {
            let cap = 16;
            let mut log = RoundLog::with_cap(cap);
            for i in 0..n {
                log.push(round(i));
            }
            let k = log.every();
            let kept = log.kept();
            // Bounded, and never thinner than half the cap.
            assert!(
                kept.len() <= cap && kept.len() > cap / 2,
                "n {n}: {}",
                kept.len()
            );
            // Rounds 0, k, 2k, …: every one whose turn it was, up to the end.
            let expect: Vec<RoundResult> = (0..n).step_by(k as usize).map(round).collect();
            assert_eq!(kept, &expect[..], "n {n}, k {k}");
            assert_eq!(kept.len() as u64, n.div_ceil(k));
            // The totals count every round, kept or not.
            let t = log.totals();
            assert_eq!(t.rounds, n);
            assert_eq!(t.elapsed_us, (0..n).map(|i| 1000 + i).sum::<u64>());
            assert_eq!((t.messages, t.bytes), (2 * n, 200 * n));
            assert_eq!((t.voluntary_ctxsw, t.involuntary_ctxsw), (3 * n, n));
        }
    }
}
