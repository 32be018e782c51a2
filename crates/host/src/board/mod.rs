//! `board …`: the binaries that run on a board (`board build`, in
//! [`xrunbench_lab::board`]), and what a board offers against what a
//! scenario needs (`board check`).

pub mod check;

use std::process::ExitCode;

use anyhow::Result;

/// Arguments of `board`: a board verb.
#[derive(clap::Args)]
pub struct BoardArgs {
    #[command(subcommand)]
    verb: BoardVerb,
}

/// The board verbs of the product (the suite's board stage, `board test`,
/// is project automation and lives in xtask).
#[derive(clap::Subcommand)]
pub enum BoardVerb {
    /// Cross-build xrun-trial, xrun-player and xrun-hackbench for boards;
    /// print their stripped sizes and the oldest glibc they run on.
    Build(xrunbench_lab::board::build::BuildArgs),
    /// Connect to a board (a scenario's [target] or --target) and print
    /// what it offers against what the scenario needs.
    Check(check::CheckArgs),
}

/// `board …`.
pub fn run(args: &BoardArgs) -> Result<ExitCode> {
    run_verb(&args.verb)
}

/// One board verb.
pub fn run_verb(verb: &BoardVerb) -> Result<ExitCode> {
    match verb {
        BoardVerb::Build(_) if !xrunbench_paths::built_in_place() => anyhow::bail!(
            "board build cross-builds from the project's checkout: run `cargo xtask board \
             build` in it"
        ),
        BoardVerb::Build(a) => xrunbench_lab::board::build::run(a),
        BoardVerb::Check(a) => check::run(a),
    }
}
