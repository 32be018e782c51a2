//! xrunbench's command layer: the verbs a user runs from the machine that
//! drives the trials, and what only they need — `run` and `restore`, the
//! targets trials run on (this machine, a board over SSH, a kernel booted
//! in the VM lab), `bisect` and `bisect-run`, `board check`. It chooses
//! between a board and a LAVA lab. The scenario, the analysis of runs,
//! LAVA and the lab are crates of their own below it
//! (docs/dev/architecture.md).
//!
//! Two binaries drive it: `xrunbench` (this crate's, for users: `cargo
//! install --path crates/host`) and `cargo xtask`, the project's
//! automation, which forwards these same verbs. Both parse the command
//! line with [`Verb`] and hand it to [`Verb::run`].

pub mod bisect;
pub mod board;
pub mod carried;
pub mod run;
pub mod target;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use xrunbench_analysis::{compare, plot};
use xrunbench_lab::{lab, say, util};
use xrunbench_lava as lava;

/// The product's verbs, shared by `xrunbench` and `cargo xtask`.
#[derive(clap::Subcommand)]
pub enum Verb {
    /// Run a scenario file (configurations × trials).
    Run(run::RunArgs),
    /// Restore knobs a killed trial left changed (`xrun-trial restore`),
    /// here or on a board (--target).
    Restore(run::RestoreArgs),
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
}

impl Verb {
    /// Runs the verb; its exit code, or the error that ended it.
    pub fn run(&self) -> Result<ExitCode> {
        match self {
            Verb::Run(args) => run::run(args),
            Verb::Restore(args) => run::restore(args),
            Verb::Compare(args) => compare::run(args),
            Verb::Plot(args) => plot::run(args),
            Verb::Lab(args) => lab::run(args),
            Verb::Lava(args) => lava::run(args),
            Verb::LavaResults(args) => lava::results::run(args),
            Verb::Bisect(args) => bisect::run(args),
            Verb::BisectRun(args) => bisect::run::run(args),
        }
    }
}

/// Parses the command line into `C`, exiting on a usage error as clap
/// does — except under `bisect`: clap exits 2 on a usage error, which `git
/// bisect run` would read as "bad", so a mistyped bisect step exits 128
/// and aborts the bisection instead.
///
/// `program` is the name the process goes by in what it prints.
pub fn parse_command_line<C: Parser>(program: &'static str) -> std::result::Result<C, ExitCode> {
    util::set_program(program);
    match C::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if e.use_stderr() && std::env::args().nth(1).as_deref() == Some("bisect") => {
            let _ = e.print();
            Err(ExitCode::from(128))
        }
        Err(e) => e.exit(),
    }
}

/// A verb's outcome as the process's exit code, the error (with its
/// context chain) on one line after the program's name.
pub fn exit_code(result: Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            say!(": {err:#}");
            ExitCode::FAILURE
        }
    }
}
