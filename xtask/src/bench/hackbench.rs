//! `cargo xtask bench hackbench`: xrun-hackbench against rt-tests hackbench.

use std::process::ExitCode;

use anyhow::{bail, Result};

/// Arguments of `cargo xtask bench hackbench`.
#[derive(clap::Args)]
pub struct Args {
    /// Runs of each tool per mode.
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
}

/// Runs the benchmark.
pub fn run(_args: &Args) -> Result<ExitCode> {
    bail!("bench hackbench: not yet implemented")
}
