//! `cargo xtask <verb>`: xrunbench's project automation and runner.
//!
//! Only argument parsing lives here; each verb is a module.

mod bench;
mod bisect;
mod board;
mod compare;
mod deps;
mod fuzz;
mod gate;
mod junit;
mod lab;
mod lava;
mod plot;
mod results;
mod run;
mod soak;
mod stats;
mod target;
mod test;
mod util;

use clap::{Parser, Subcommand};

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
    /// Run a scenario file (configurations × trials).
    Run(run::RunArgs),
    /// Restore knobs a killed trial left changed (`xrun-trial restore`),
    /// here or on a board (--target).
    Restore(run::RestoreArgs),
    /// Boards: `board build` (the board binaries, cross-built for aarch64
    /// and armv7), `board check` (what a board offers against what a
    /// scenario needs), `board test` (the suite's board stage).
    Board(board::BoardArgs),
    /// Compare run directories: mmtests-style table with significance.
    Compare(compare::CompareArgs),
    /// SVG plots of a run directory (fill CDF, underrun gaps, hackbench).
    Plot(plot::PlotArgs),
    /// The VM lab: `lab kernel` fetches a kernel to boot as a board.
    Lab(lab::LabArgs),
    /// A LAVA test definition (and a job for an SSH board) that runs a
    /// scenario's trials on the board with no host in the loop.
    Lava(lava::LavaArgs),
    /// A LAVA job's log (or records) back into a run directory.
    LavaResults(lava::results::LavaResultsArgs),
    /// One `git bisect run` step: exit 0 good, 1 bad, 125 skip.
    Bisect(bisect::BisectArgs),
    /// The whole bisection on a board: endpoints confirmed, `git bisect
    /// run` with a deploying step, the culprit confirmed, the report.
    BisectRun(bisect::run::BisectRunArgs),
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

fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap exits 2 on a usage error, which `git bisect run` would read
        // as "bad": a mistyped bisect command line aborts instead.
        Err(e) if e.use_stderr() && std::env::args().nth(1).as_deref() == Some("bisect") => {
            let _ = e.print();
            return std::process::ExitCode::from(128);
        }
        Err(e) => e.exit(),
    };
    let result = match cli.verb {
        Verb::Test(args) => test::run(&args),
        Verb::Lint(args) => test::lint(&args),
        Verb::Bench(args) => bench::run(&args),
        Verb::Run(args) => run::run(&args),
        Verb::Restore(args) => run::restore(&args),
        Verb::Board(args) => board::run(&args),
        Verb::Compare(args) => compare::run(&args),
        Verb::Plot(args) => plot::run(&args),
        Verb::Lab(args) => lab::run(&args),
        Verb::Lava(args) => lava::run(&args),
        Verb::LavaResults(args) => lava::results::run(&args),
        Verb::Bisect(args) => bisect::run(&args),
        Verb::BisectRun(args) => bisect::run::run(&args),
        Verb::BisectSim(args) => bisect::sim::run(&args),
        Verb::Fuzz(args) => fuzz::run(&args),
        Verb::Soak(args) => soak::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
