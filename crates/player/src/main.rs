//! `xrun-player`: parses the command line and calls the library.

use std::process::ExitCode;

/// `eprintln!` that never panics (stderr may be a log on a full disk).
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

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
            eprintln!("xrun-player: {}", one_line(&rendered));
            return ExitCode::from(2);
        }
    };
    if cli.list_devices {
        print!("{}", xrunbench_player::list_devices());
        return ExitCode::SUCCESS;
    }
    match xrunbench_player::run(&cli) {
        Ok(done) => ExitCode::from(done.exit_code),
        Err(e) => {
            eprintln!("xrun-player: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// clap's first line, completed by the next one when it ends in a colon
/// ("the following required arguments were not provided: <FILE>").
fn one_line(rendered: &str) -> String {
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.trim_start_matches("error: ");
    match lines.next() {
        Some(next) if first.ends_with(':') => format!("{first} {next}"),
        _ => first.to_string(),
    }
}
