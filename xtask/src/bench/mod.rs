//! `cargo xtask bench <what>`: side-by-side measurements against the
//! reference tools, in one run, reported as ratios.
//!
//! Benchmarks measure; they never fail on a figure. Tests assert
//! behaviour, never speed.

mod hackbench;
mod lava;
mod micro;
mod monitor;
mod player;
pub mod stats;

use std::process::ExitCode;

use anyhow::Result;

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// What to benchmark.
    #[command(subcommand)]
    pub what: What,
}

/// The benchmarks.
#[derive(clap::Subcommand)]
pub enum What {
    /// xrun-player against aplay on the same PCM: CPU time and max RSS.
    Player(player::Args),
    /// xrun-hackbench against rt-tests hackbench: per mode, the paired
    /// time ratio with its 95 % interval and a matches/differs/undecided
    /// verdict; CPU time and context switches beside it.
    Hackbench(hackbench::Args),
    /// Our latency monitor against rt-tests cyclictest, idle and under
    /// hackbench -g 4: average and max, and ours/cyclictest of each.
    Monitor(monitor::Args),
    /// One scenario on the VM lab over SSH and as LAVA jobs on one device
    /// and on two: the lab's setup, per-trial overhead, the 2/1 ratio.
    Lava(lava::Args),
    /// The criterion micro-benchmarks of the per-period hot path and of
    /// bisect's statistics; the per-period cost against a 1 ms period.
    Micro(micro::Args),
}

/// Installs what the chosen benchmark needs, then runs it.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    let needs = match &args.what {
        What::Player(_) => &crate::needs::BENCH_PLAYER,
        What::Hackbench(_) => &crate::needs::BENCH_HACKBENCH,
        What::Monitor(_) => &crate::needs::BENCH_MONITOR,
        What::Micro(_) => &crate::needs::BENCH_MICRO,
        What::Lava(_) => &crate::needs::BENCH_LAVA,
    };
    if let Err(e) = xrunbench_lab::deps::ensure(needs) {
        return Ok(e.report());
    }
    match &args.what {
        What::Player(a) => player::run(a),
        What::Hackbench(a) => hackbench::run(a),
        What::Monitor(a) => monitor::run(a),
        What::Micro(a) => micro::run(a),
        What::Lava(a) => lava::run(a),
    }
}
