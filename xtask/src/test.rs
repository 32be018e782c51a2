//! `cargo xtask test`: the lint, then the whole suite, with what they need
//! installed; and `cargo xtask lint` on its own.
//!
//! The tests start their own sound servers (a JACK dummy server per test
//! binary, see `crates/soundserver`), so a plain `cargo test` works too once
//! the packages are there; this verb makes that true on a fresh machine.

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::deps;
use crate::util::{cargo, run_checked};

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Extra arguments passed to `cargo test` (after `--`, to the harness).
    #[arg(trailing_var_arg = true)]
    pub rest: Vec<String>,
}

/// Arguments of `cargo xtask lint` (none).
#[derive(clap::Args)]
pub struct LintArgs {}

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

/// The feature sets the lint checks: code compiled only with a cpal host
/// (or only without one) must be clean in both.
const LINT_FEATURE_SETS: [(&str, Option<&str>); 2] = [
    ("default features", None),
    ("all player features", Some(PLAYER_FEATURES)),
];

/// `cargo fmt --check` and clippy `-D warnings` in every feature set; all
/// run, so that one failure does not hide another.
fn lint_steps() -> Result<()> {
    let mut steps: Vec<(String, std::process::Command)> = Vec::new();
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    steps.push(("cargo fmt --check".into(), fmt));
    for (label, features) in LINT_FEATURE_SETS {
        let mut clippy = cargo();
        clippy.args(["clippy", "--workspace", "--all-targets"]);
        if let Some(f) = features {
            clippy.args(["--features", f]);
        }
        clippy.args(["--", "-D", "warnings"]);
        steps.push((format!("clippy, {label}"), clippy));
    }
    let mut failed = Vec::new();
    for (label, mut cmd) in steps {
        eprintln!("xtask lint: {label}");
        if let Err(e) = run_checked(&mut cmd) {
            eprintln!("xtask lint: {e:#}");
            failed.push(label);
        }
    }
    if !failed.is_empty() {
        bail!("lint failed: {}", failed.join("; "));
    }
    Ok(())
}

/// `cargo xtask lint`: installs what clippy needs, then lints.
pub fn lint(_args: &LintArgs) -> Result<ExitCode> {
    if let Err(e) = deps::ensure(&deps::LINT).and_then(|()| deps::ensure_rust_components()) {
        return Ok(e.report());
    }
    lint_steps()?;
    Ok(ExitCode::SUCCESS)
}

/// Installs what the suite needs, lints, then runs the suite.
pub fn run(args: &TestArgs) -> Result<ExitCode> {
    if let Err(e) = deps::ensure(&deps::TEST).and_then(|()| deps::ensure_rust_components()) {
        return Ok(e.report());
    }
    lint_steps()?;
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
