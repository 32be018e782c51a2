//! `cargo xtask <verb>`: xrunbench's project automation (test, lint,
//! bench, fuzz, soak, the board stage), and the product's verbs forwarded
//! to the host library (`run`, `compare`, `bisect-run`, …: the same as
//! the `xrunbench` binary's).
//!
//! Only argument parsing lives here; each verb is a module.

mod bench;
mod fuzz;
mod lanes;
mod needs;
mod qemu_user;
mod session_dirs;
mod soak;
mod test;

use clap::{Parser, Subcommand};
use xrunbench_host::{bisect, board, exit_code, parse_command_line, Verb as ProductVerb};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "xrunbench automation: run scenarios, test, benchmark"
)]
struct Cli {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Subcommand)]
enum Verb {
    /// Lint, then run the whole test suite, installing the Debian packages
    /// they need.
    Test(test::TestArgs),
    /// Check formatting and clippy -D warnings in every feature set.
    Lint(test::LintArgs),
    /// Benchmark against the reference tools (aplay, rt-tests hackbench).
    Bench(bench::BenchArgs),
    #[command(flatten)]
    Product(Box<ProductVerb>),
    /// Boards: `board build` (the board binaries, cross-built for aarch64
    /// and armv7), `board check` (what a board offers against what a
    /// scenario needs), `board test` (the suite's board stage).
    Board(BoardArgs),
    /// Fuzz every parser of outside input (cargo fuzz, nightly), one
    /// target at a time: executions and coverage per target.
    Fuzz(fuzz::FuzzArgs),
    /// The player for N minutes on the virtual sink under hackbench, with
    /// stalls injected at known moments: RSS, fds, threads, every stall.
    Soak(soak::SoakArgs),
    /// Monte Carlo: trials per bisect step vs a fixed-n test.
    #[command(hide = true)]
    BisectSim(bisect::sim::SimArgs),
}

/// Arguments of `cargo xtask board`.
#[derive(clap::Args)]
struct BoardArgs {
    #[command(subcommand)]
    verb: BoardVerb,
}

#[derive(Subcommand)]
enum BoardVerb {
    #[command(flatten)]
    Product(board::BoardVerb),
    /// The board stage of `cargo xtask test` alone: build, sizes, the
    /// binaries and the board crates' unit tests under qemu-user.
    Test(test::BoardTestArgs),
}

fn main() -> std::process::ExitCode {
    let cli = match parse_command_line::<Cli>("xtask") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.verb {
        Verb::Test(args) => test::run(&args),
        Verb::Lint(args) => test::lint(&args),
        Verb::Bench(args) => bench::run(&args),
        Verb::Product(verb) => verb.run(),
        Verb::Board(BoardArgs {
            verb: BoardVerb::Product(verb),
        }) => board::run_verb(&verb),
        Verb::Board(BoardArgs {
            verb: BoardVerb::Test(args),
        }) => test::board_test(&args),
        Verb::BisectSim(args) => bisect::sim::run(&args),
        Verb::Fuzz(args) => fuzz::run(&args),
        Verb::Soak(args) => soak::run(&args),
    };
    exit_code(result)
}
