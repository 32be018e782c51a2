//! `cargo xtask <verb>`: xrunbench's project automation and runner.
//!
//! Only argument parsing lives here; each verb is a module.

mod bench;
mod deps;
mod run;
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
    /// Run the whole test suite, installing the Debian packages it needs.
    Test(test::TestArgs),
    /// Benchmark against the reference tools (aplay, rt-tests hackbench).
    Bench(bench::BenchArgs),
    /// Run a scenario file (configurations × trials).
    Run(run::RunArgs),
    /// Restore knobs left changed by a killed run (replays its journal).
    Restore(run::RestoreArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.verb {
        Verb::Test(args) => test::run(&args),
        Verb::Bench(args) => bench::run(&args),
        Verb::Run(args) => run::run(&args),
        Verb::Restore(args) => run::restore(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
