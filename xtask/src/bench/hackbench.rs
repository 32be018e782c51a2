//! `cargo xtask bench hackbench`: xrun-hackbench against rt-tests hackbench.
//!
//! A load generator should not be faster or slower than the one it
//! replaces, it should be the same, and a verdict on that must not be
//! something noise can fake. So, per mode, both tools run in pairs, back
//! to back, alternating which goes first (ABBA: slow drift of a shared
//! machine hits both alike); each pair gives one ratio ours/rt-tests of
//! `Time:`. Pairs are added until the 95 % bootstrap interval of the median
//! ratio is narrow enough (at least `--min-pairs`, at most `--max-pairs`):
//! the rule looks at the interval's width only, never at where it lies, so
//! stopping early cannot steer the verdict. The verdict is then read once:
//! *matches* when the interval lies inside [0.95, 1.05], *differs* when it
//! lies outside, *undecided* otherwise. CPU time and context switches are
//! shown beside it as paired median ratios, and so is the CPU that other
//! processes used meanwhile. Nothing here fails on a figure.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::stats::{median, median_interval, paired_ratios, wait_with_cost, Interval, Verdict};
use xrunbench_lab::util;
use xrunbench_trial::fingerprint;

/// Arguments of `cargo xtask bench hackbench`.
#[derive(clap::Args)]
pub struct Args {
    /// Pairs of runs (one of each tool, back to back) per mode before the
    /// interval is first looked at.
    #[arg(long, default_value_t = 31)]
    pub min_pairs: u32,
    /// At most this many pairs per mode; a mode still too noisy then is
    /// reported undecided.
    #[arg(long, default_value_t = 101)]
    pub max_pairs: u32,
    /// Stop adding pairs once the 95 % interval of the time ratio is at
    /// most this wide (half the width of the [0.95, 1.05] band, so that a
    /// ratio within 2.5 % of 1 can be called a match).
    #[arg(long, default_value_t = 0.05)]
    pub width: f64,
    /// The reference binary.
    #[arg(long, default_value = "/usr/bin/hackbench")]
    pub reference: PathBuf,
    /// Our binary (default: build it in release mode first).
    #[arg(long)]
    pub ours: Option<PathBuf>,
    /// Benchmark these hackbench arguments (e.g. `--args "-g 10 -p"`,
    /// repeatable) instead of the twelve default modes.
    #[arg(long = "args", allow_hyphen_values = true, value_name = "ARGS")]
    pub modes: Vec<String>,
}

/// The default modes: process/thread × socket/pipe at rt-tests' default
/// size and at `-g 4`, then the pipe modes with `-l 1000` (longer rounds,
/// so that start-up and teardown weigh less).
const DEFAULT_MODES: &[&str] = &[
    "",
    "-p",
    "-T",
    "-T -p",
    "-g 4",
    "-p -g 4",
    "-T -g 4",
    "-T -p -g 4",
    "-p -l 1000",
    "-T -p -l 1000",
    "-p -g 4 -l 1000",
    "-T -p -g 4 -l 1000",
];

/// The tolerance band of the time ratio.
const BAND: (f64, f64) = (0.95, 1.05);

/// The confidence level of the interval.
const LEVEL: f64 = 0.95;

/// When to stop adding pairs.
#[derive(Debug, Clone, Copy)]
struct Plan {
    min_pairs: u32,
    max_pairs: u32,
    width: f64,
}

impl Plan {
    fn from_args(args: &Args) -> Result<Plan> {
        if args.min_pairs < 2 {
            bail!(
                "--min-pairs {}: expected at least 2 (an interval needs two pairs)",
                args.min_pairs
            );
        }
        if args.max_pairs < args.min_pairs {
            bail!(
                "--max-pairs {}: expected at least --min-pairs ({})",
                args.max_pairs,
                args.min_pairs
            );
        }
        if !(args.width.is_finite() && args.width > 0.0) {
            bail!("--width {}: expected a number > 0", args.width);
        }
        Ok(Plan {
            min_pairs: args.min_pairs,
            max_pairs: args.max_pairs,
            width: args.width,
        })
    }

    /// Whether `pairs` pairs whose ratios have `interval` are enough.
    fn enough(&self, pairs: usize, interval: Option<Interval>) -> bool {
        pairs >= self.max_pairs as usize
            || (pairs >= self.min_pairs as usize
                && interval.is_some_and(|i| i.width() <= self.width))
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
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

/// One mode's runs: pair i is `ours[i]`, `reference[i]`.
struct Measured {
    ours: Vec<Sample>,
    reference: Vec<Sample>,
    /// CPUs that other processes kept busy meanwhile, on average.
    other_cpus: Option<f64>,
}

/// Runs the benchmark and prints the table.
pub fn run(args: &Args) -> Result<ExitCode> {
    let plan = Plan::from_args(args)?;
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
    let modes: Vec<&str> = if args.modes.is_empty() {
        DEFAULT_MODES.to_vec()
    } else {
        args.modes.iter().map(|m| m.trim()).collect()
    };
    let load_before = loadavg();
    let mut rows = Vec::new();
    for mode in modes {
        let measured = bench_mode(&ours, &args.reference, mode, plan)?;
        let row = Row::new(label(mode), &measured);
        eprintln!("{}", row.progress());
        rows.push(row);
    }
    print_table(&rows, &args.reference, plan, &load_before);
    Ok(ExitCode::SUCCESS)
}

/// How a mode is shown: its arguments, or `(default)`.
fn label(mode: &str) -> String {
    if mode.is_empty() {
        "(default)".into()
    } else {
        mode.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// One mode's figures: medians and paired ratios (ours / rt-tests).
struct Row {
    label: String,
    pairs: usize,
    ours_s: f64,
    ref_s: f64,
    ratio: f64,
    interval: Option<Interval>,
    cpu: f64,
    vcsw: f64,
    icsw: f64,
    other_cpus: Option<f64>,
}

impl Row {
    fn new(label: String, m: &Measured) -> Row {
        let col = |v: &[Sample], f: fn(&Sample) -> f64| v.iter().map(f).collect::<Vec<_>>();
        let paired = |f: fn(&Sample) -> f64| paired_ratios(&col(&m.ours, f), &col(&m.reference, f));
        let time = paired(|s| s.time_s);
        let med = |v: &[f64]| median(v).unwrap_or(f64::NAN);
        Row {
            label,
            pairs: time.len(),
            ours_s: med(&col(&m.ours, |s| s.time_s)),
            ref_s: med(&col(&m.reference, |s| s.time_s)),
            ratio: med(&time),
            interval: median_interval(&time, LEVEL),
            cpu: med(&paired(|s| s.cpu_ms)),
            vcsw: med(&paired(|s| s.vcsw)),
            icsw: med(&paired(|s| s.icsw)),
            other_cpus: m.other_cpus,
        }
    }

    fn verdict(&self) -> Verdict {
        self.interval
            .map_or(Verdict::Undecided, |i| Verdict::of(i, BAND))
    }

    /// The row of the table.
    fn line(&self) -> String {
        let interval = self.interval.map_or_else(
            || format!("{:<14}", "n/a"),
            |i| format!("[{:.3}, {:.3}]", i.lo, i.hi),
        );
        let other = self
            .other_cpus
            .map_or_else(|| "?".into(), |c| format!("{c:.2}"));
        format!(
            "{:<18} {:>5} {:>6.3} {:>6.3} {:>5.3} {} {:<9} {:>4.2} {:>4.2} {:>4.2} {:>5}",
            self.label,
            self.pairs,
            self.ref_s,
            self.ours_s,
            self.ratio,
            interval,
            self.verdict().as_str(),
            self.cpu,
            self.vcsw,
            self.icsw,
            other
        )
    }

    /// One line on stderr when a mode is done.
    fn progress(&self) -> String {
        format!(
            "  {}: {} pairs, ratio {:.3}, {}",
            self.label,
            self.pairs,
            self.ratio,
            self.verdict().as_str()
        )
    }
}

/// The header, the rows and the legend, ready to paste into
/// docs/measurements/benchmarks.md.
fn print_table(rows: &[Row], reference: &Path, plan: Plan, load_before: &str) {
    let fp = fingerprint::collect();
    println!(
        "{:<18} {:>5} {:>6} {:>6} {:>5} {:<14} {:<9} {:>4} {:>4} {:>4} {:>5}",
        "args",
        "pairs",
        "rt s",
        "ours s",
        "ratio",
        "95% interval",
        "verdict",
        "cpu",
        "vcsw",
        "icsw",
        "other"
    );
    for row in rows {
        println!("{}", row.line());
    }
    println!();
    for line in legend(reference, plan) {
        println!("{line}");
    }
    println!(
        "Kernel {}; {} x {} CPUs.\nLoad average before/after: {} / {}.",
        fp.kernel_release,
        fp.cpu_model,
        fp.cpu_count,
        load_before,
        loadavg()
    );
    println!("{}", verdict_counts(rows));
}

/// How many modes got each verdict, in one line.
fn verdict_counts(rows: &[Row]) -> String {
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict() == v).count();
    format!(
        "Modes: {} match, {} differ, {} undecided.",
        count(Verdict::Matches),
        count(Verdict::Differs),
        count(Verdict::Undecided)
    )
}

/// What the columns mean.
fn legend(reference: &Path, plan: Plan) -> Vec<String> {
    vec![
        format!(
            "ours = xrun-hackbench, rt = {} ({}).",
            reference.display(),
            reference_version(reference)
        ),
        format!(
            "pairs: one run of each, back to back, alternating which runs first; \
             added until\n  the 95% interval is at most {:.3} wide \
             (at least {}, at most {} pairs).",
            plan.width, plan.min_pairs, plan.max_pairs
        ),
        "rt s, ours s: median Time:. ratio: median over pairs of ours/rt Time:, with a\n  \
         95% percentile-bootstrap interval (10000 resamples)."
            .into(),
        format!(
            "verdict: matches = interval inside [{:.2}, {:.2}], differs = entirely \
             outside,\n  undecided = neither (too noisy to tell: more pairs or a \
             quieter machine).",
            BAND.0, BAND.1
        ),
        "cpu, vcsw, icsw: median over pairs of ours/rt user+sys CPU, voluntary and\n  \
         involuntary context switches (wait4 rusage of the whole run, workers\n  \
         included: creation and teardown count too, not just the timed part)."
            .into(),
        "other: CPUs kept busy by other processes meanwhile (/proc/stat busy time\n  \
         minus our runs' CPU, per second of wall time)."
            .into(),
    ]
}

/// Runs both tools in pairs on one mode until `plan` says enough.
fn bench_mode(ours: &Path, reference: &Path, mode: &str, plan: Plan) -> Result<Measured> {
    let args: Vec<&str> = mode.split_whitespace().collect();
    eprint!("{}: ", label(mode));
    // One untimed warm-up each: the first run after a mode change pays for
    // cold caches and page-cache misses of the binary.
    one_run(ours, &args)?;
    one_run(reference, &args)?;
    let busy_before = busy_seconds();
    let began = Instant::now();
    let (mut o, mut r) = (Vec::new(), Vec::new());
    loop {
        if o.len() % 2 == 0 {
            o.push(one_run(ours, &args)?);
            r.push(one_run(reference, &args)?);
        } else {
            r.push(one_run(reference, &args)?);
            o.push(one_run(ours, &args)?);
        }
        eprint!(".");
        if plan.enough(o.len(), interval_so_far(&o, &r)) {
            break;
        }
    }
    eprintln!();
    let ours_cpu_s: f64 = o.iter().chain(&r).map(|s| s.cpu_ms / 1e3).sum();
    let other_cpus = busy_seconds().zip(busy_before).map(|(after, before)| {
        ((after - before - ours_cpu_s) / began.elapsed().as_secs_f64()).max(0.0)
    });
    Ok(Measured {
        ours: o,
        reference: r,
        other_cpus,
    })
}

/// The interval of the time ratios of the pairs so far.
fn interval_so_far(ours: &[Sample], reference: &[Sample]) -> Option<Interval> {
    let t = |v: &[Sample]| v.iter().map(|s| s.time_s).collect::<Vec<_>>();
    median_interval(&paired_ratios(&t(ours), &t(reference)), LEVEL)
}

/// Runs one tool once; its `Time:` and its costs.
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

/// rt-tests' version as its usage header says it (`hackbench V 2.40`).
fn reference_version(bin: &Path) -> String {
    Command::new(bin)
        .arg("-h")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "version unknown".into())
}

/// Seconds the CPUs spent busy since boot (every /proc/stat `cpu` field
/// but idle and iowait; steal counts: the hypervisor gave it to others).
fn busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    busy_ticks(&stat).map(|t| t as f64 / clock_ticks_per_second())
}

/// Busy ticks from the `cpu ` line of /proc/stat's text.
fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already inside user and nice.
    let field = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(field(0) + field(1) + field(2) + field(5) + field(6) + field(7))
}

/// USER_HZ, the unit of /proc/stat.
fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// /proc/loadavg's first three fields, to show how busy the machine was.
fn loadavg() -> String {
    let all = fingerprint::loadavg();
    let three: Vec<&str> = all.split_whitespace().take(3).collect();
    if three.is_empty() {
        "?".into()
    } else {
        three.join(" ")
    }
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

    fn sample(time_s: f64, c: f64) -> Sample {
        Sample {
            time_s,
            vcsw: c,
            icsw: c,
            cpu_ms: c,
        }
    }

    #[test]
    fn ratios_are_paired_medians() {
        let m = Measured {
            ours: vec![sample(1.0, 10.0), sample(3.0, 30.0), sample(2.0, 20.0)],
            reference: vec![sample(2.0, 40.0), sample(2.0, 40.0)],
            other_cpus: Some(0.25),
        };
        let row = Row::new(label(""), &m);
        assert_eq!(row.label, "(default)");
        assert_eq!(row.pairs, 2, "the third run has no partner");
        assert_eq!((row.ours_s, row.ref_s), (2.0, 2.0));
        assert_eq!(row.ratio, 1.0, "median of 1/2 and 3/2");
        assert_eq!((row.cpu, row.vcsw), (0.5, 0.5));
    }

    #[test]
    fn verdict_comes_from_the_interval() {
        let near = |k: f64| sample(1.0 + k * 0.001, 1.0);
        let m = Measured {
            ours: (0..31).map(|k| near(f64::from(k % 5))).collect(),
            reference: (0..31).map(|_| sample(1.0, 1.0)).collect(),
            other_cpus: None,
        };
        let row = Row::new(label("-p"), &m);
        assert_eq!(row.verdict(), Verdict::Matches);
        assert!(row.line().contains("matches"), "{}", row.line());
        let slow = Measured {
            ours: (0..31).map(|k| near(f64::from(k % 5) + 200.0)).collect(),
            ..m
        };
        let slow = Row::new(label("-p"), &slow);
        assert_eq!(slow.verdict(), Verdict::Differs);
        assert_eq!(
            verdict_counts(&[row, slow]),
            "Modes: 1 match, 1 differ, 0 undecided."
        );
    }

    #[test]
    fn stops_on_width_only_after_the_minimum() {
        let plan = Plan {
            min_pairs: 31,
            max_pairs: 101,
            width: 0.05,
        };
        let narrow = Some(Interval { lo: 0.9, hi: 0.94 });
        let wide = Some(Interval { lo: 0.9, hi: 1.0 });
        assert!(!plan.enough(30, narrow));
        assert!(
            plan.enough(31, narrow),
            "decided by width, wherever it lies"
        );
        assert!(!plan.enough(31, wide));
        assert!(!plan.enough(31, None));
        assert!(plan.enough(101, wide));
    }

    #[test]
    fn bad_plans_are_refused_in_one_line() {
        let args = |min, max, width| Args {
            min_pairs: min,
            max_pairs: max,
            width,
            reference: PathBuf::new(),
            ours: None,
            modes: Vec::new(),
        };
        let err = |a: Args| Plan::from_args(&a).unwrap_err().to_string();
        assert!(err(args(1, 10, 0.05)).starts_with("--min-pairs 1:"));
        assert!(err(args(31, 10, 0.05)).starts_with("--max-pairs 10:"));
        assert!(err(args(31, 101, 0.0)).starts_with("--width 0:"));
        assert!(Plan::from_args(&args(31, 101, 0.05)).is_ok());
    }

    #[test]
    fn busy_ticks_leave_out_idle_and_iowait() {
        let stat = "cpu  10 1 5 1000 7 2 3 4 9 0\ncpu0 5 0 2 500 3 1 1 2 0 0\n";
        assert_eq!(busy_ticks(stat), Some(10 + 1 + 5 + 2 + 3 + 4));
        assert_eq!(busy_ticks("intr 1\n"), None);
    }

    #[test]
    fn labels_normalise_spacing() {
        assert_eq!(label("-g  4 -p"), "-g 4 -p");
    }
}
