//! `cargo xtask bench <what>`: side-by-side measurements against the
//! reference tools, in one run, reported as ratios.
//!
//! Benchmarks measure; they never fail on a figure. Tests assert
//! behaviour, never speed.

mod hackbench;
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
}

/// Installs what the chosen benchmark needs, then runs it.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    let needs = match &args.what {
        What::Player(_) => &crate::deps::BENCH_PLAYER,
        What::Hackbench(_) => &crate::deps::BENCH_HACKBENCH,
    };
    if let Err(e) = crate::deps::ensure(needs) {
        return Ok(e.report());
    }
    match &args.what {
        What::Player(a) => player::run(a),
        What::Hackbench(a) => hackbench::run(a),
    }
}
