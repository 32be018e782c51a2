//! `xrun-hackbench`: rt-tests hackbench's command line and output, plus
//! `--repeat`, `--duration` and `--json`. Parsing and printing only; the
//! load lives in the library.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use xrunbench_hackbench::cli::{self, Command, JsonTarget, Options};
use xrunbench_hackbench::{run_for, stop, Ended, Limit, RunSummary};

mod report;

fn main() -> ExitCode {
    let mut argv = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    let prog = argv.next().unwrap_or_else(|| "xrun-hackbench".into());
    let args: Vec<String> = argv.collect();
    match cli::parse(&prog, &args) {
        Ok(Command::Help) => {
            print!("{}", cli::usage());
            ExitCode::SUCCESS
        }
        Err(e) => {
            // rt-tests: the diagnostic on stderr, the usage on stdout, exit 1.
            if !e.message.is_empty() {
                eprintln!("{}", e.message);
            }
            print!("{}", cli::usage());
            ExitCode::from(1)
        }
        Ok(Command::Run(opts)) => match run(&prog, &opts) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("{prog}: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}

/// Runs the load as the options say and reports it.
fn run(prog: &str, opts: &Options) -> Result<ExitCode> {
    // With `--json -` stdout carries the report alone; the human lines
    // move to stderr.
    let mut human: Box<dyn Write> = match opts.json {
        Some(JsonTarget::Stdout) => Box::new(std::io::stderr()),
        _ => Box::new(std::io::stdout()),
    };
    // Find out now, not after an hour of load, that the report cannot be
    // written: create the temporary the final write will use, and remove
    // it again (a probe left behind would be a file nobody owns).
    if let Some(JsonTarget::File(path)) = &opts.json {
        let tmp = xrunbench_schema::doc::temp_path_for(path);
        std::fs::File::create(&tmp)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
        let _ = std::fs::remove_file(&tmp);
    }
    write!(human, "{}", opts.params.banner())?;
    human.flush()?;
    stop::install_signal_handlers().context("installing signal handlers")?;

    let limit = Limit {
        rounds: opts.repeat,
        duration: opts.duration,
    };
    let summary = run_for(&opts.params, &limit, |r| {
        // A closed stdout must not stop the load the runner relies on.
        let _ = writeln!(human, "{}", r.time_line());
        let _ = human.flush();
    });
    if let Some(target) = &opts.json {
        write_json(target, &report::build(opts, &summary))?;
    }
    Ok(finish(prog, &summary))
}

/// Says how the run ended; a failed round is exit 1, a stop request is 0
/// (as rt-tests exits 0 after SIGINT/SIGTERM).
fn finish(prog: &str, summary: &RunSummary) -> ExitCode {
    match &summary.ended {
        Ended::Failed(e) => {
            eprintln!("{prog}: {e}");
            ExitCode::from(1)
        }
        Ended::Signal => {
            eprintln!(
                "{prog}: stopped by signal after {} complete round(s); every worker reaped",
                summary.rounds.completed()
            );
            ExitCode::SUCCESS
        }
        Ended::Rounds | Ended::Duration => ExitCode::SUCCESS,
    }
}

/// Writes the report to stdout, or to a file atomically (temp + rename).
fn write_json(target: &JsonTarget, report: &xrunbench_schema::HackbenchReport) -> Result<()> {
    let text = serde_json::to_string_pretty(report)? + "\n";
    match target {
        JsonTarget::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        JsonTarget::File(path) => {
            // The shared atomic write: on a full disk its temporary is
            // removed and the error names the file.
            xrunbench_schema::doc::write_atomic(path, text.as_bytes())?;
        }
    }
    Ok(())
}
