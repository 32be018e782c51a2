//! `cargo xtask bench player`: xrun-player against aplay on the same PCM.

use std::process::ExitCode;

use anyhow::{bail, Result};

/// Arguments of `cargo xtask bench player`.
#[derive(clap::Args)]
pub struct Args {
    /// Runs of each tool.
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
}

/// Runs the benchmark.
pub fn run(_args: &Args) -> Result<ExitCode> {
    bail!("bench player: not yet implemented")
}
