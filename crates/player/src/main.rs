//! `xrun-player`: parses the command line and calls the library.

use std::process::ExitCode;

use clap::Parser;
use xrunbench_player::cli::Cli;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line naming the option and what was expected.
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or("invalid arguments");
            eprintln!("xrun-player: {}", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    match xrunbench_player::run(&cli) {
        Ok(done) => ExitCode::from(done.exit_code),
        Err(e) => {
            eprintln!("xrun-player: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
