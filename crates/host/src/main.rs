//! `xrunbench <verb>`: run scenarios on this machine, a board or the VM
//! lab, compare and plot their results, bisect. Only argument parsing
//! lives here; the verbs are the library's.

use std::process::ExitCode;

use clap::Parser;
use xrunbench_host::{board, exit_code, parse_command_line, Verb};

#[derive(Parser)]
#[command(
    name = "xrunbench",
    version,
    about = "Audio-underrun regression harness: run scenarios, compare, bisect"
)]
struct Cli {
    #[command(subcommand)]
    verb: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    #[command(flatten)]
    Product(Box<Verb>),
    /// Boards: `board build` (the board binaries, cross-built for aarch64
    /// and armv7), `board check` (what a board offers against what a
    /// scenario needs).
    Board(board::BoardArgs),
}

fn main() -> ExitCode {
    let cli = match parse_command_line::<Cli>("xrunbench") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match &cli.verb {
        Command::Product(verb) => verb.run(),
        Command::Board(args) => board::run(args),
    };
    exit_code(result)
}
