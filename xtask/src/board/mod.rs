//! `cargo xtask board …`: the binaries that run on a board (`board
//! build`: cross-built for aarch64 and armv7, or native; `board test`:
//! checked under qemu-user), and what a board offers against what a
//! scenario needs (`board check`).

pub mod arch;
pub mod build;
pub mod check;
pub mod elf;
pub mod qemu;
pub mod sysroot;
mod zig;

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
    /// Cross-build xrun-trial, xrun-player and xrun-hackbench for boards;
    /// print their stripped sizes and the oldest glibc they run on.
    Build(build::BuildArgs),
    /// Connect to a board (a scenario's [target] or --target) and print
    /// what it offers against what the scenario needs.
    Check(check::CheckArgs),
    /// The board stage of `cargo xtask test` alone: build, sizes, the
    /// binaries and the board crates' unit tests under qemu-user.
    Test(TestArgs),
}

/// Arguments of `cargo xtask board test`.
#[derive(clap::Args)]
struct TestArgs {
    /// Architectures (default: those cross-built here).
    #[arg(long, value_enum, value_delimiter = ',')]
    arch: Vec<arch::ArchChoice>,
}

/// `cargo xtask board …`.
pub fn run(args: &BoardArgs) -> Result<ExitCode> {
    match &args.verb {
        BoardVerb::Build(a) => build::run(a),
        BoardVerb::Check(a) => check::run(a),
        BoardVerb::Test(a) => test(a),
    }
}

/// `cargo xtask board test`.
fn test(args: &TestArgs) -> Result<ExitCode> {
    let arches = if args.arch.is_empty() {
        crate::test::board_arches()
    } else {
        arch::resolve(&args.arch)
    };
    let request = build::Request {
        arches: arches.clone(),
        out: None,
        glibc: Some("2.28".parse().expect("a version")),
    };
    if let Err(e) = build::install(&request)
        .and_then(|()| crate::deps::ensure_groups(&[&crate::deps::QEMU_USER]))
    {
        return Ok(e.report());
    }
    let failed = crate::test::board_stage(&arches)?;
    if !failed.is_empty() {
        anyhow::bail!("failed: {}", failed.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}
