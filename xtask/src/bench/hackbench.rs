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
    /// Only the modes whose label contains this (e.g. `pipe -g4`).
    #[arg(long)]
    pub only: Option<String>,
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
    /// Voluntary context switches of the whole run.
    vcsw: f64,
    /// Involuntary context switches of the whole run.
    icsw: f64,
    /// User + system CPU of the whole run, ms.
    cpu_ms: f64,
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
        "{:<19} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}",
        "mode", "ours s", "rt s", "time", "paired", "min", "vcsw", "icsw", "cpu"
    );
    let mut misses = Vec::new();
    let chosen = MODES
        .iter()
        .filter(|m| args.only.as_deref().map_or(true, |o| m.label.contains(o)));
    for mode in chosen {
        let (o, r) = bench_mode(&ours, &args.reference, mode, args.runs)?;
        let row = Row::new(&o, &r);
        println!(
            "{:<19} {:>7.3} {:>7.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3}{}",
            mode.label,
            row.ours_s,
            row.ref_s,
            row.time_ratio,
            row.paired_ratio,
            row.min_ratio,
            row.vcsw_ratio,
            row.icsw_ratio,
            row.cpu_ratio,
            if row.in_band() { "" } else { " *" }
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
    println!("ours s, rt s: median Time:. Ratios are ours/rt-tests: time = of medians,");
    println!("paired = median over runs i of ours[i]/rt[i] (neighbours in time, so slow");
    println!("drift of a shared machine cancels),");
    println!("min = of fastest runs, vcsw/icsw = of median voluntary/involuntary context");
    println!("switches, cpu = of median user+sys CPU (wait4 rusage of the whole run,");
    println!("workers included; creation and teardown count too, not just the timed part).");
    println!("load average before/after: {load_before} / {}", loadavg());
    if !misses.is_empty() {
        println!("outside the band: {}", misses.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// The medians of one mode and the ratios (ours / rt-tests).
struct Row {
    ours_s: f64,
    ref_s: f64,
    time_ratio: f64,
    paired_ratio: f64,
    min_ratio: f64,
    vcsw_ratio: f64,
    icsw_ratio: f64,
    cpu_ratio: f64,
}

impl Row {
    fn new(ours: &[Sample], reference: &[Sample]) -> Row {
        let med = |v: &[Sample], f: fn(&Sample) -> f64| {
            median(&v.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let ratio = |f: fn(&Sample) -> f64| med(ours, f) / med(reference, f);
        let min = |v: &[Sample]| v.iter().map(|s| s.time_s).fold(f64::INFINITY, f64::min);
        Row {
            ours_s: med(ours, |s| s.time_s),
            ref_s: med(reference, |s| s.time_s),
            time_ratio: ratio(|s| s.time_s),
            paired_ratio: paired(ours, reference),
            min_ratio: min(ours) / min(reference),
            vcsw_ratio: ratio(|s| s.vcsw),
            icsw_ratio: ratio(|s| s.icsw),
            cpu_ratio: ratio(|s| s.cpu_ms),
        }
    }

    fn in_band(&self) -> bool {
        (BAND.0..=BAND.1).contains(&self.time_ratio)
    }
}

/// Median of the per-run ratios ours[i] / reference[i]: run i of each tool
/// ran back to back (ABBA), so each ratio compares like with like.
fn paired(ours: &[Sample], reference: &[Sample]) -> f64 {
    let ratios: Vec<f64> = ours
        .iter()
        .zip(reference)
        .map(|(o, r)| o.time_s / r.time_s)
        .filter(|r| r.is_finite())
        .collect();
    median(&ratios).unwrap_or(f64::NAN)
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
        vcsw: cost.nvcsw as f64,
        icsw: cost.nivcsw as f64,
        cpu_ms: cost.cpu_ms,
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
            vcsw: c,
            icsw: c,
            cpu_ms: c,
        };
        let row = Row::new(
            &[s(1.0, 10.0), s(3.0, 30.0), s(2.0, 20.0)],
            &[s(2.0, 40.0), s(2.0, 40.0)],
        );
        assert_eq!((row.time_ratio, row.vcsw_ratio), (1.0, 0.5));
        assert_eq!(row.min_ratio, 0.5);
        assert_eq!(
            row.paired_ratio, 1.0,
            "median of 1/2 and 3/2 (third unpaired)"
        );
        assert!(row.in_band());
    }
}
