//! `cargo xtask bench micro`: the criterion micro-benchmarks (`cargo
//! bench`) of the per-period hot path — the player's wake-up (fill
//! computation and histogram records), the reader→callback ring, sample
//! conversion, the latency monitor's wake-up — and of bisect's statistics,
//! then the per-period cost as a fraction of a 1 ms period, read from
//! criterion's own estimates (`target/criterion/*/new/estimates.json`).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use xrunbench_lab::util;

/// Arguments of `cargo xtask bench micro`.
#[derive(clap::Args)]
pub struct Args {
    /// Passed to criterion (e.g. a filter, or `--quick`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub criterion: Vec<String>,
}

/// The benchmarks that run once per period of the playback loop (with
/// cpal: the ring and, for a device that does not take the file's format,
/// one conversion): criterion's directory for each (it writes `>` and `:`
/// as `_`), and its name.
const PER_PERIOD: &[(&str, &str)] = &[
    (
        "wake-up_ fill computation + 2 histogram records",
        "wake-up: fill computation + 2 histogram records",
    ),
    (
        "ring/push + pop one period (48 frames f32 stereo)",
        "ring: push + pop one period (48 frames f32 stereo)",
    ),
    (
        "convert one period/S16_LE -_ FLOAT_LE",
        "convert one period: S16_LE -> FLOAT_LE",
    ),
];

/// `cargo xtask bench micro`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let mut cmd = util::cargo();
    cmd.current_dir(xrunbench_paths::workspace_root())
        .args(["bench", "-p", "xrunbench-player", "-p", "xrunbench-trial"])
        .args(["-p", "xrunbench-host", "--"])
        .args(&args.criterion);
    util::run_checked(&mut cmd).context("cargo bench")?;
    let dir = xrunbench_paths::target_dir().join("criterion");
    let mut total = 0.0;
    println!();
    println!("per period (1 ms at 48 kHz stereo), criterion's mean estimate:");
    for (id, name) in PER_PERIOD {
        match mean_ns(&dir, id) {
            Some(ns) => {
                total += ns;
                println!("  {name:<56} {ns:>9.1} ns");
            }
            None => println!("  {name:<56} (not run)"),
        }
    }
    println!(
        "  {:<56} {:>9.1} ns = {:.4} % of a 1 ms period",
        "total",
        total,
        total / 1e6 * 100.0
    );
    Ok(ExitCode::SUCCESS)
}

/// The mean estimate (ns) criterion wrote for benchmark `id`.
fn mean_ns(dir: &Path, id: &str) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(id).join("new/estimates.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("mean")?.get("point_estimate")?.as_f64()
}
