//! `cargo xtask board …`: what a board offers against what a scenario
//! needs (`board check`). (`board build`, the cross-built binaries, lives
//! beside it.)

pub mod check;

use std::process::ExitCode;

use anyhow::Result;

/// Arguments of `cargo xtask board`.
#[derive(clap::Args)]
pub struct BoardArgs {
    #[command(subcommand)]
    verb: BoardVerb,
}

#[derive(clap::Subcommand)]
enum BoardVerb {
    /// Connect to a board (a scenario's [target] or --target) and print
    /// what it offers against what the scenario needs.
    Check(check::CheckArgs),
}

/// `cargo xtask board …`.
pub fn run(args: &BoardArgs) -> Result<ExitCode> {
    match &args.verb {
        BoardVerb::Check(a) => check::run(a),
    }
}
