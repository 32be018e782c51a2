//! `xrun-trial`: one whole trial on the machine under test, and the tools
//! around it (restore, probe, check). See the library's documentation.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use xrunbench_trial::machine::Machine;
use xrunbench_trial::run::{self, RunOptions};
use xrunbench_trial::say::{out, say};
use xrunbench_trial::{
    check, journal, probe, signals, spec, summarize, EXIT_BAD_SPEC, EXIT_FAILED,
};

mod cli;
use cli::{Cli, Command, Parsed};

fn main() -> ExitCode {
    let cli = match cli::parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(cli)) => cli,
        Ok(Parsed::Print(text)) => {
            let _ = out(&text);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            say(e);
            return ExitCode::from(EXIT_BAD_SPEC);
        }
    };
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            say(format_args!("{e:#}"));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn dispatch(cli: Cli) -> Result<u8> {
    let machine = match &cli.test_root {
        Some(dir) => Machine::test_root(dir),
        None => Machine::real(),
    };
    let bin_dir = cli.bin_dir.clone().unwrap_or_else(run::default_bin_dir);
    match cli.command {
        Command::Run {
            spec,
            monitor,
            trace,
        } => run_one(&spec, monitor, trace, RunOptions { machine, bin_dir }),
        Command::Restore => restore(&machine),
        Command::Monitor(ask) => {
            monitor_alone(&machine, &ask.spec(), ask.duration_s, ask.pm_qos_us)
        }
        Command::Probe => {
            let p = probe::probe(&machine, &bin_dir);
            out(&to_json(&p)?).context("writing the probe to stdout")?;
            Ok(0)
        }
        Command::Check {
            specs,
            read_only,
            json,
        } => check_specs(&specs, &machine, &bin_dir, !read_only, json),
        Command::Summarize { gates, records } => summarize(gates.as_deref(), &records),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    let mut text = serde_json::to_string_pretty(v).context("serializing JSON")?;
    text.push('\n');
    Ok(text)
}

fn run_one(source: &std::path::Path, monitor: bool, trace: bool, opts: RunOptions) -> Result<u8> {
    signals::install().context("installing signal handlers")?;
    let mut spec = match spec::load(source) {
        Ok(s) => s,
        Err(e) => {
            say(e);
            return Ok(EXIT_BAD_SPEC);
        }
    };
    spec::monitor_from_flags(&mut spec, monitor, trace);
    signals::watch_link(source == std::path::Path::new("-"));
    let finished = run::run(&spec, &opts);
    let text = to_json(&finished.record)?;
    let written = match &spec.record {
        Some(path) => xrunbench_schema::doc::write_atomic(path, text.as_bytes()),
        None => out(&text),
    };
    match written {
        Ok(()) => Ok(finished.exit_code),
        // A closed stdout after an interruption is expected: the link is gone.
        Err(_) if finished.exit_code > EXIT_BAD_SPEC => Ok(finished.exit_code),
        Err(e) => {
            say(format_args!("cannot write the record: {e}"));
            Ok(EXIT_FAILED)
        }
    }
}

fn summarize(gates: Option<&std::path::Path>, records: &[PathBuf]) -> Result<u8> {
    let read = summarize::read_records(records).and_then(|r| {
        let g = gates.map(summarize::read_gates).transpose()?;
        Ok((r, g.unwrap_or_default()))
    });
    let (records, gates) = match read {
        Ok(x) => x,
        Err(e) => {
            say(e);
            return Ok(EXIT_BAD_SPEC);
        }
    };
    let mut text = String::new();
    for line in summarize::summarize(&records, &gates) {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    out(&text).context("writing to stdout")?;
    Ok(0)
}

fn restore(machine: &Machine) -> Result<u8> {
    signals::install().context("installing signal handlers")?;
    let lock = journal::MachineLock::acquire(&machine.lock_path, |holder| {
        say(format_args!(
            "waiting for the machine lock (held by pid {holder})"
        ));
    })?;
    let report = journal::replay_all(machine, &lock);
    let mut text = String::new();
    if report.lines.is_empty() {
        text.push_str("nothing to restore: no journal left by a killed trial\n");
    }
    for l in &report.lines {
        text.push_str(l);
        text.push('\n');
    }
    let _ = out(&text);
    Ok(if report.rejected + report.unrestored > 0 {
        EXIT_FAILED
    } else {
        0
    })
}

fn check_specs(
    sources: &[PathBuf],
    machine: &Machine,
    bin_dir: &std::path::Path,
    apply: bool,
    json: bool,
) -> Result<u8> {
    signals::install().context("installing signal handlers")?;
    let specs = match spec::load_many(sources) {
        Ok(s) => s,
        Err(e) => {
            say(e);
            return Ok(EXIT_BAD_SPEC);
        }
    };
    let report = match check::check(&specs, machine, bin_dir, apply) {
        Ok(r) => r,
        Err(stop) => {
            say(format_args!(
                "check stopped ({}): every knob tried was restored",
                stop.describe()
            ));
            return Ok(stop.exit_code());
        }
    };
    let text = if json {
        to_json(&report)?
    } else {
        let mut t = String::new();
        for p in &report.problems {
            let field = p
                .field
                .as_deref()
                .map(|f| format!("{f}: "))
                .unwrap_or_default();
            t.push_str(&format!("config `{}`: {field}{}\n", p.config, p.message));
        }
        if report.problems.is_empty() {
            t.push_str(&format!("ok: {} spec(s) can run here\n", specs.len()));
        }
        t
    };
    out(&text).context("writing to stdout")?;
    Ok(if report.problems.is_empty() {
        0
    } else {
        EXIT_FAILED
    })
}

/// `xrun-trial monitor`: the monitor for `seconds`, its report on stdout.
fn monitor_alone(
    machine: &Machine,
    spec: &xrunbench_schema::monitor::MonitorSpec,
    seconds: u64,
    pm_qos_us: Option<u32>,
) -> Result<u8> {
    signals::install().context("installing signal handlers")?;
    let _hold = match pm_qos_us {
        Some(us) => Some(xrunbench_trial::knobs::PmQosHold::hold(
            &machine.roots.pm_qos,
            us,
        )?),
        None => None,
    };
    let cpus = xrunbench_trial::monitor::cpus_to_measure(spec, None);
    let mon = xrunbench_trial::monitor::Monitor::start(spec, &cpus)?;
    signals::sleep_unless_stopped(std::time::Duration::from_secs(seconds));
    let report = mon.stop();
    out(&to_json(&report)?).context("writing the report to stdout")?;
    Ok(match signals::stop_reason() {
        Some(r) => r.exit_code(),
        None => 0,
    })
}
