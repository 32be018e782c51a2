//! `cargo xtask bench hackbench`: xrun-hackbench against rt-tests hackbench.
//!
//! A load generator should not be faster or slower than the one it
//! replaces, it should be the same: for each mode (process/thread ×
//! socket/pipe, at the default 10 groups and at `-g 4`), both tools run
//! alternately (ABBA order, so slow drift of the machine hits both alike),
//! and the table shows the median `Time:` ratio and the median ratio of
//! context switches (voluntary + involuntary, from wait4(2) on the tool's
//! process, which includes the workers it reaped). The target for every
//! time ratio is [0.95, 1.05]. Nothing here fails on a figure.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};

use super::stats::{median, wait_with_cost};
use crate::util;

/// Arguments of `cargo xtask bench hackbench`.
#[derive(clap::Args)]
pub struct Args {
    /// Runs of each tool per mode.
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
    /// The reference binary.
    #[arg(long, default_value = "/usr/bin/hackbench")]
    pub reference: PathBuf,
    /// Our binary (default: build it in release mode first).
    #[arg(long)]
    pub ours: Option<PathBuf>,
}

/// One benchmarked mode: a label and the arguments both tools get.
struct Mode {
    label: &'static str,
    args: &'static [&'static str],
}

const MODES: &[Mode] = &[
    Mode {
        label: "process socket",
        args: &[],
    },
    Mode {
        label: "process pipe",
        args: &["-p"],
    },
    Mode {
        label: "thread socket",
        args: &["-T"],
    },
    Mode {
        label: "thread pipe",
        args: &["-T", "-p"],
    },
    Mode {
        label: "process socket -g4",
        args: &["-g", "4"],
    },
    Mode {
        label: "process pipe -g4",
        args: &["-p", "-g", "4"],
    },
    Mode {
        label: "thread socket -g4",
        args: &["-T", "-g", "4"],
    },
    Mode {
        label: "thread pipe -g4",
        args: &["-T", "-p", "-g", "4"],
    },
];

/// The target band for time ratios.
const BAND: (f64, f64) = (0.95, 1.05);

/// One run's figures.
#[derive(Clone, Copy)]
struct Sample {
    /// `Time:` in seconds.
    time_s: f64,
    /// Voluntary + involuntary context switches of the whole run.
    ctxsw: f64,
}

/// Runs the benchmark and prints the table.
pub fn run(args: &Args) -> Result<ExitCode> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if !args.reference.exists() {
        bail!(
            "{} not found: install Debian's rt-tests (cargo xtask test installs it)",
            args.reference.display()
        );
    }
    let ours = match &args.ours {
        Some(p) => p.clone(),
        None => util::build_release_binaries(&["xrunbench-hackbench"])?.join("xrun-hackbench"),
    };
    let load_before = loadavg();
    println!(
        "xrun-hackbench ({}) vs {} — {} runs each per mode, alternating",
        ours.display(),
        args.reference.display(),
        args.runs
    );
    println!();
    println!(
        "{:<20} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}",
        "mode", "ours s", "rt s", "time", "ours csw", "rt csw", "csw"
    );
    println!(
        "{:<20} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}",
        "", "median", "median", "ratio", "median", "median", "ratio"
    );
    let mut misses = Vec::new();
    for mode in MODES {
        let (o, r) = bench_mode(&ours, &args.reference, mode, args.runs)?;
        let row = Row::new(&o, &r);
        println!(
            "{:<20} {:>9.3} {:>9.3} {:>7.3} {:>10.0} {:>10.0} {:>7.3}{}",
            mode.label,
            row.ours_s,
            row.ref_s,
            row.time_ratio,
            row.ours_csw,
            row.ref_csw,
            row.csw_ratio,
            if row.in_band() { "" } else { "  *" }
        );
        if !row.in_band() {
            misses.push(mode.label);
        }
    }
    println!();
    println!(
        "time ratio = median(ours)/median(rt-tests); target [{:.2}, {:.2}]; * = outside.",
        BAND.0, BAND.1
    );
    println!("csw = voluntary + involuntary context switches of the run (wait4 rusage, workers included).");
    println!("load average before/after: {load_before} / {}", loadavg());
    if !misses.is_empty() {
        println!("outside the band: {}", misses.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// The medians of one mode.
struct Row {
    ours_s: f64,
    ref_s: f64,
    time_ratio: f64,
    ours_csw: f64,
    ref_csw: f64,
    csw_ratio: f64,
}

impl Row {
    fn new(ours: &[Sample], reference: &[Sample]) -> Row {
        let m = |v: &[Sample], f: fn(&Sample) -> f64| {
            median(&v.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let (ours_s, ref_s) = (m(ours, |s| s.time_s), m(reference, |s| s.time_s));
        let (ours_csw, ref_csw) = (m(ours, |s| s.ctxsw), m(reference, |s| s.ctxsw));
        Row {
            ours_s,
            ref_s,
            time_ratio: ours_s / ref_s,
            ours_csw,
            ref_csw,
            csw_ratio: ours_csw / ref_csw,
        }
    }

    fn in_band(&self) -> bool {
        (BAND.0..=BAND.1).contains(&self.time_ratio)
    }
}

/// Runs both tools `runs` times each on one mode, in ABBA order.
fn bench_mode(
    ours: &Path,
    reference: &Path,
    mode: &Mode,
    runs: u32,
) -> Result<(Vec<Sample>, Vec<Sample>)> {
    let (mut o, mut r) = (Vec::new(), Vec::new());
    for i in 0..runs {
        if i % 2 == 0 {
            o.push(one_run(ours, mode.args)?);
            r.push(one_run(reference, mode.args)?);
        } else {
            r.push(one_run(reference, mode.args)?);
            o.push(one_run(ours, mode.args)?);
        }
    }
    Ok((o, r))
}

/// Runs one tool once; its `Time:` and its context switches.
fn one_run(bin: &Path, args: &[&str]) -> Result<Sample> {
    let shown = format!("{} {}", bin.display(), args.join(" "));
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("running {shown}"))?;
    // Three short lines fit in the pipe, so reading after the wait is safe;
    // the handle is taken out because wait_with_cost forgets the Child.
    let mut stdout = child.stdout.take().context("stdout")?;
    let cost = wait_with_cost(child).with_context(|| format!("waiting for {shown}"))?;
    let mut out = String::new();
    stdout.read_to_string(&mut out)?;
    if !cost.success {
        bail!("{shown} failed");
    }
    let time_s = parse_time(&out).with_context(|| format!("{shown}: no Time: line in {out:?}"))?;
    Ok(Sample {
        time_s,
        ctxsw: (cost.nvcsw + cost.nivcsw) as f64,
    })
}

/// The value of the last `Time: S.mmm` line.
fn parse_time(out: &str) -> Option<f64> {
    out.lines()
        .rev()
        .find_map(|l| l.strip_prefix("Time: ")?.trim().parse().ok())
}

/// /proc/loadavg's first three fields, to show how busy the machine was.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_last_time_line() {
        assert_eq!(parse_time("Running...\nTime: 0.700\n"), Some(0.7));
        assert_eq!(parse_time("Time: 1.000\nTime: 2.500\n"), Some(2.5));
        assert_eq!(parse_time("nothing\n"), None);
    }

    #[test]
    fn ratios_use_medians() {
        let s = |t, c| Sample {
            time_s: t,
            ctxsw: c,
        };
        let row = Row::new(
            &[s(1.0, 10.0), s(3.0, 30.0), s(2.0, 20.0)],
            &[s(2.0, 40.0), s(2.0, 40.0)],
        );
        assert_eq!((row.time_ratio, row.csw_ratio), (1.0, 0.5));
        assert!(row.in_band());
    }
}
