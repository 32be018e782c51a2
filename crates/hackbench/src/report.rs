//! Builds the `xrunbench.hackbench/1` report from a run.

use xrunbench_hackbench::cli::Options;
use xrunbench_hackbench::{Ended, Mode, RunSummary, Transport};
use xrunbench_schema::hackbench::{
    HackbenchParams, HackbenchReport, HackbenchRound, HACKBENCH_SCHEMA,
};

/// The report of `summary`, run with `opts`.
pub fn build(opts: &Options, summary: &RunSummary) -> HackbenchReport {
    let p = &opts.params;
    let log = &summary.rounds;
    let totals = log.totals();
    let rounds: Vec<HackbenchRound> = log
        .kept()
        .iter()
        .map(|r| HackbenchRound {
            us: r.elapsed.as_micros() as u64,
            wall_us: r.wall_sec * 1_000_000 + r.wall_usec,
            messages: r.messages,
            bytes: r.bytes,
            voluntary_ctxsw: r.voluntary_ctxsw,
            involuntary_ctxsw: r.involuntary_ctxsw,
        })
        .collect();
    HackbenchReport {
        schema: HACKBENCH_SCHEMA.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        params: HackbenchParams {
            groups: p.groups,
            fds: p.fds,
            loops: p.loops,
            datasize: p.datasize,
            mode: match p.mode {
                Mode::Process => "process",
                Mode::Thread => "thread",
            }
            .to_string(),
            transport: match p.transport {
                Transport::Socket => "socket",
                Transport::Pipe => "pipe",
                Transport::Inet => "inet",
            }
            .to_string(),
            fifo: p.fifo,
            repeat: opts.repeat,
            duration_s: opts.duration.map(|d| d.as_secs_f64()),
        },
        rounds_us: rounds.iter().map(|r| r.us).collect(),
        rounds_completed: totals.rounds,
        rounds_kept_every: log.every(),
        rounds_us_total: Some(totals.elapsed_us),
        messages: totals.messages,
        bytes: totals.bytes,
        voluntary_ctxsw: totals.voluntary_ctxsw,
        involuntary_ctxsw: totals.involuntary_ctxsw,
        ctxsw_source: match p.mode {
            Mode::Process => "wait4-per-worker",
            Mode::Thread => "rusage-thread-per-worker",
        }
        .to_string(),
        rounds,
        ended: summary.ended.as_str().to_string(),
        error: match &summary.ended {
            Ended::Failed(e) => Some(e.to_string()),
            _ => None,
        },
    }
}
