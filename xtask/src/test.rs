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

/// Installs what the suite needs, then runs it.
pub fn run(args: &TestArgs) -> Result<ExitCode> {
    deps::ensure(deps::TEST_PACKAGES)?;
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--all-targets"]);
    if !args.rest.is_empty() {
        cmd.arg("--").args(&args.rest);
    }
    run_checked(&mut cmd)?;
    // Doc tests are not part of --all-targets.
    run_checked(cargo().args(["test", "--workspace", "--doc"]))?;
    Ok(ExitCode::SUCCESS)
}
