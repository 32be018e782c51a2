//! `cargo xtask board …`: the binaries that run on a board (cross-built
//! for aarch64 and armv7, or native), and their checks under qemu-user.

pub mod arch;
pub mod build;
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
    /// Cross-build xrun-player and xrun-hackbench for boards; print their
    /// stripped sizes and the oldest glibc they run on.
    Build(build::BuildArgs),
}

/// `cargo xtask board …`.
pub fn run(args: &BoardArgs) -> Result<ExitCode> {
    match &args.verb {
        BoardVerb::Build(a) => build::run(a),
    }
}
