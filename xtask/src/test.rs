//! `cargo xtask test`: the whole suite, with what it needs installed.
//!
//! The tests start their own sound servers (a JACK dummy server per test
//! binary, see `crates/soundserver`), so a plain `cargo test` works too once
//! the packages are there; this verb makes that true on a fresh machine.

use std::process::ExitCode;

use anyhow::Result;

use crate::deps;
use crate::util::{cargo, run_checked};

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Extra arguments passed to `cargo test` (after `--`, to the harness).
    #[arg(trailing_var_arg = true)]
    pub rest: Vec<String>,
}

/// The player's cpal hosts, all built and tested (the PipeWire host is
/// built, and tested only where a PipeWire server can be started).
const PLAYER_FEATURES: &str =
    "xrunbench-player/cpal-jack,xrunbench-player/cpal-pulseaudio,xrunbench-player/cpal-pipewire";

/// `cargo test` with the suite's features and profile settings.
fn cargo_test() -> std::process::Command {
    let mut cmd = cargo();
    // --no-fail-fast: one failing test binary must not hide the others'.
    cmd.args([
        "test",
        "--no-fail-fast",
        "--workspace",
        "--features",
        PLAYER_FEATURES,
    ])
    // The pulseaudio crate (cpal's PulseAudio host) zero-fills 1 MiB per
    // socket read in the thread that runs the data callback. Unoptimised
    // that alone takes a whole CPU and the host underruns all the time;
    // optimising only that crate does not help, because debug builds
    // share generic code (Vec::resize) compiled in other crates. So the
    // suite is built at opt-level 1 (debug assertions stay on).
    .env("CARGO_PROFILE_DEV_OPT_LEVEL", "1");
    cmd
}

/// Installs what the suite needs, then runs it.
pub fn run(args: &TestArgs) -> Result<ExitCode> {
    deps::ensure(deps::TEST_PACKAGES)?;
    let mut cmd = cargo_test();
    cmd.arg("--all-targets");
    if !args.rest.is_empty() {
        cmd.arg("--").args(&args.rest);
    }
    run_checked(&mut cmd)?;
    // Doc tests are not part of --all-targets.
    run_checked(cargo_test().arg("--doc"))?;
    Ok(ExitCode::SUCCESS)
}
