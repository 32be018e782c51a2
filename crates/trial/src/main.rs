//! `xrun-trial`: one whole trial on the machine under test, and the tools
//! around it (restore, probe, check). See the library's documentation.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use xrunbench_trial::machine::Machine;
use xrunbench_trial::run::{self, RunOptions};
use xrunbench_trial::say::{out, say};
use xrunbench_trial::{
    check, journal, probe, signals, spec, summarize, EXIT_BAD_SPEC, EXIT_FAILED,
};

/// Runs xrunbench trials on this machine: knobs applied, read back and
/// always restored; the load and the player as separate processes.
#[derive(Parser)]
#[command(name = "xrun-trial", version, max_term_width = 100)]
struct Cli {
    /// Where xrun-player and xrun-hackbench are (default: beside xrun-trial).
    #[arg(long, value_name = "DIR", global = true)]
    bin_dir: Option<PathBuf>,
    /// TESTS ONLY: knobs are a private tree under DIR (DIR/proc/sys, …), and
    /// so are the journals; the machine lock stays the real one.
    #[arg(long, value_name = "DIR", global = true, hide = true)]
    test_root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one trial: SPEC is an xrunbench.trial-spec/1 file, or `-` for
    /// exactly one JSON document on stdin (keep stdin open: its end stops
    /// the trial). Exit 0 ran, 1 could not run, 2 bad spec, 128+N signal N.
    Run {
        /// The spec, or `-`.
        #[arg(default_value = "-")]
        spec: PathBuf,
        /// Run the latency monitor beside playback (the spec's `monitor`,
        /// else its defaults: SCHED_FIFO 99, every 1000 us, on the
        /// playback CPUs).
        #[arg(long)]
        monitor: bool,
        /// Trace the scheduler and account for every underrun and spike
        /// (tracefs; said once and skipped where it is missing).
        #[arg(long)]
        trace: bool,
    },
    /// Restore every knob a killed trial left changed (replays the journals).
    Restore,
    /// The latency monitor alone, as cyclictest: one SCHED_FIFO thread per
    /// CPU for SECONDS; prints its xrunbench monitor report (JSON).
    Monitor {
        /// How long, seconds.
        #[arg(long, default_value_t = 30)]
        duration: u64,
        /// CPUs (default: every CPU this process may use).
        #[arg(long)]
        cpus: Option<xrunbench_schema::CpuList>,
        /// SCHED_FIFO priority.
        #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u8).range(1..=99))]
        priority: u8,
        /// Interval, µs.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(100..=1_000_000))]
        interval_us: u32,
        /// Spike threshold, µs.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
        threshold_us: u32,
        /// Hold /dev/cpu_dma_latency at this many µs meanwhile (cyclictest
        /// holds 0 unless given --laptop).
        #[arg(long)]
        pm_qos_us: Option<u32>,
    },
    /// Print what this machine offers (xrunbench.probe/1 JSON).
    Probe,
    /// Check that specs can run here: every problem, one line each; exit 0
    /// none, 1 some. Knobs are written, read back and restored at once.
    Check {
        /// Spec files, or `-` for every JSON document on stdin.
        #[arg(default_value = "-")]
        specs: Vec<PathBuf>,
        /// Do not write the knobs: only check they exist and open for writing.
        #[arg(long)]
        read_only: bool,
        /// Print an xrunbench.check/1 document instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Summarize trial records, one line per configuration × metric (the
    /// mean of its trials) and one per gate: `NAME pass|fail MEASUREMENT
    /// UNITS`, what a LAVA test definition reports with lava-test-case.
    /// Exit 0 whatever the gates say, 2 for a bad file.
    Summarize {
        /// An xrunbench.gates/1 file: limits to judge.
        #[arg(long, value_name = "FILE")]
        gates: Option<PathBuf>,
        /// Trial record files (xrunbench.trial/1).
        #[arg(required = true, value_name = "RECORD")]
        records: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let rendered = e.render().to_string();
            let first = rendered
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("invalid arguments");
            say(first.trim_start_matches("error: "));
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
        Command::Monitor {
            duration,
            cpus,
            priority,
            interval_us,
            threshold_us,
            pm_qos_us,
        } => {
            let spec = xrunbench_schema::monitor::MonitorSpec {
                cpus,
                priority,
                interval_us,
                threshold_us,
                ..Default::default()
            };
            monitor_alone(&machine, &spec, duration, pm_qos_us)
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
