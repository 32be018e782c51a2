//! `cargo xtask bench monitor`: our latency monitor (`xrun-trial monitor`)
//! against rt-tests cyclictest, side by side in one run.
//!
//! cyclictest's figures are the ones users know, so ours must agree with
//! them: per condition (idle, and under rt-tests `hackbench -g 4` run in a
//! loop) the two tools run one after the other, alternating which goes
//! first (ABBA: the slow drift of a shared machine hits both alike), each
//! for `--duration`. cyclictest runs as `cyclictest -m -p 99 -i 1000 -D
//! SECS -t N -q` with `-a -d 0` added, so that its threads are what ours
//! are — one per CPU, pinned, all at the same interval (without them its
//! threads float and thread k runs every 1000 + 500·k µs) — and `--json`,
//! whose average has 0.01 µs (the `T:` lines truncate it). Ours holds
//! /dev/cpu_dma_latency at 0 as cyclictest does by default. The table
//! gives each run's average and maximum over all threads and, per
//! condition, ours/cyclictest of the two (medians over rounds) against the
//! ±15 % band. Nothing here fails on a figure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use xrunbench_schema::monitor::{MonitorAlone, MonitorReport};

use super::stats::median;
use xrunbench_lab::util;

/// Arguments of `cargo xtask bench monitor`.
#[derive(clap::Args)]
pub struct Args {
    /// Seconds per run (cyclictest's `-D`).
    #[arg(long, default_value_t = 30)]
    pub duration: u64,
    /// Rounds per condition (each round runs both tools, alternating
    /// which goes first).
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Measuring threads, one per CPU (default: every CPU).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The reference binary.
    #[arg(long, default_value = "/usr/bin/cyclictest")]
    pub reference: PathBuf,
    /// The load: rt-tests hackbench, run in a loop.
    #[arg(long, default_value = "/usr/bin/hackbench")]
    pub hackbench: PathBuf,
    /// Our xrun-trial (default: build it in release mode first).
    #[arg(long)]
    pub ours: Option<PathBuf>,
}

/// The agreement band of ours/cyclictest.
const BAND: f64 = 0.15;

/// One run's figures over all threads, µs.
#[derive(Debug, Clone, Copy)]
struct Figures {
    avg: f64,
    max: f64,
}

/// `cargo xtask bench monitor`.
pub fn run(args: &Args) -> Result<ExitCode> {
    if !util::is_root() {
        bail!("bench monitor needs root (SCHED_FIFO 99, mlockall, /dev/cpu_dma_latency)");
    }
    let ours = match &args.ours {
        Some(p) => p.clone(),
        None => util::build_release_binaries(&["xrunbench-trial"])?.join("xrun-trial"),
    };
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let mut rows = Vec::new();
    for (condition, loaded) in [("idle", false), ("hackbench -g 4", true)] {
        let load = loaded.then(|| Load::start(&args.hackbench)).transpose()?;
        let mut pairs = Vec::new();
        for round in 0..args.rounds {
            let ours_first = round % 2 == 0;
            let mut pair = [None, None];
            for k in 0..2 {
                let is_ours = (k == 0) == ours_first;
                eprintln!(
                    "xtask: bench monitor: {condition}, round {}, {} ({} s)",
                    round + 1,
                    if is_ours {
                        "xrun-trial monitor"
                    } else {
                        "cyclictest"
                    },
                    args.duration
                );
                let f = if is_ours {
                    run_ours(&ours, args.duration, threads)?
                } else {
                    run_cyclictest(&args.reference, args.duration, threads)?
                };
                pair[usize::from(!is_ours)] = Some(f);
            }
            if let [Some(o), Some(c)] = pair {
                pairs.push((o, c));
            }
        }
        drop(load);
        rows.push((condition, pairs));
    }
    print_table(&rows, args, threads);
    Ok(ExitCode::SUCCESS)
}

/// rt-tests hackbench in a loop until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(hackbench: &Path) -> Result<Load> {
        if !hackbench.exists() {
            bail!(
                "{} not found (Debian package rt-tests)",
                hackbench.display()
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (s, bin) = (stop.clone(), hackbench.to_path_buf());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let child = Command::new(&bin)
                    .args(["-g", "4", "-l", "2000"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn();
                match child {
                    Ok(c) => wait_or_stop(c, &s),
                    Err(_) => return,
                }
            }
        });
        // Let it reach its steady state before measuring.
        std::thread::sleep(Duration::from_secs(2));
        Ok(Load {
            stop,
            thread: Some(thread),
        })
    }
}

/// Waits for `c`; when told to stop, SIGTERMs it (hackbench then stops
/// its workers) and reaps it.
fn wait_or_stop(mut c: Child, stop: &AtomicBool) {
    loop {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        if stop.load(Ordering::Relaxed) {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            let _ = c.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn cpu_list(threads: usize) -> String {
    format!("0-{}", threads.saturating_sub(1))
}

fn run_ours(bin: &Path, secs: u64, threads: usize) -> Result<Figures> {
    let ask = MonitorAlone {
        duration_s: secs,
        cpus: Some(cpu_list(threads).parse()?),
        pm_qos_us: Some(0),
        ..MonitorAlone::default()
    };
    let out = Command::new(bin)
        .args(ask.to_args())
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "xrun-trial monitor failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let r: MonitorReport =
        serde_json::from_slice(&out.stdout).context("xrun-trial monitor's report")?;
    Ok(Figures {
        avg: r.overall.mean,
        max: r.overall.max as f64,
    })
}

fn run_cyclictest(bin: &Path, secs: u64, threads: usize) -> Result<Figures> {
    // Its JSON has the average to 0.01 us; the T: lines truncate it to
    // whole microseconds (up to 1 us low: 10 % of a 10 us average).
    let json = tempfile::NamedTempFile::new().context("a temporary file for cyclictest's JSON")?;
    let out = Command::new(bin)
        .args(["-m", "-p", "99", "-i", "1000", "-D", &secs.to_string()])
        .args(["-t", &threads.to_string(), "-q", "-a", "-d", "0"])
        .arg(format!("--json={}", json.path().display()))
        .output()
        .with_context(|| format!("running {} (Debian package rt-tests)", bin.display()))?;
    if !out.status.success() {
        bail!(
            "cyclictest failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = std::fs::read_to_string(json.path()).context("reading cyclictest's JSON")?;
    parse_cyclictest_json(&text).context("cyclictest's JSON has no threads")
}

/// `--json`: per thread `cycles`, `avg`, `max`; overall the
/// cycle-weighted average and the largest maximum.
fn parse_cyclictest_json(text: &str) -> Option<Figures> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let (mut cycles, mut sum, mut max) = (0.0, 0.0, 0.0f64);
    for t in v.get("thread")?.as_object()?.values() {
        let c = t.get("cycles")?.as_f64()?;
        cycles += c;
        sum += c * t.get("avg")?.as_f64()?;
        max = max.max(t.get("max")?.as_f64()?);
    }
    (cycles > 0.0).then(|| Figures {
        avg: sum / cycles,
        max,
    })
}

type Rows<'a> = [(&'a str, Vec<(Figures, Figures)>)];

fn print_table(rows: &Rows<'_>, args: &Args, threads: usize) {
    println!(
        "{:<16} {:>5} {:>13} {:>13} {:>13} {:>13}",
        "condition", "round", "ours avg-us", "cyc avg-us", "ours max-us", "cyc max-us"
    );
    for (condition, pairs) in rows {
        for (i, (o, c)) in pairs.iter().enumerate() {
            println!(
                "{:<16} {:>5} {:>13.1} {:>13.1} {:>13.0} {:>13.0}",
                condition,
                i + 1,
                o.avg,
                c.avg,
                o.max,
                c.max
            );
        }
    }
    println!();
    println!(
        "{:<16} {:>14} {:>8} {:>14} {:>8}",
        "condition", "avg ours/cyc", "", "max ours/cyc", ""
    );
    for (condition, pairs) in rows {
        let ratio = |f: fn(&Figures) -> f64| {
            let r: Vec<f64> = pairs
                .iter()
                .filter(|(_, c)| f(c) > 0.0)
                .map(|(o, c)| f(o) / f(c))
                .collect();
            median(&r)
        };
        let avg = ratio(|f| f.avg);
        let max = ratio(|f| f.max);
        let cell = |r: Option<f64>| match r {
            Some(r) => (format!("{r:.3}"), within(r).to_string()),
            None => ("n/a".into(), String::new()),
        };
        let (a, aw) = cell(avg);
        let (m, mw) = cell(max);
        println!("{condition:<16} {a:>14} {aw:>8} {m:>14} {mw:>8}");
    }
    println!();
    println!(
        "Each run {} s, {threads} thread(s) pinned one per CPU, SCHED_FIFO 99, every 1000 us, \
         memory locked, /dev/cpu_dma_latency 0; {} round(s) per condition, order alternating.",
        args.duration, args.rounds
    );
    println!(
        "Reference: {} -m -p 99 -i 1000 -D {} -t {threads} -q -a -d 0 --json=F. Load: {} -g 4 -l 2000 in a loop.",
        args.reference.display(),
        args.duration,
        args.hackbench.display()
    );
    println!("Ratios: median over rounds of ours/cyclictest; `within` = inside 1 +- {BAND}.");
}

fn within(r: f64) -> &'static str {
    if (r - 1.0).abs() <= BAND {
        "within"
    } else {
        "outside"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cyclictest_json_gives_a_weighted_average_and_the_max() {
        let t = r#"{"file_version": 1, "num_threads": 2, "thread": {
            "0": {"histogram": {}, "cycles": 3000, "min": 5, "max": 3788, "avg": 20.0, "cpu": 0, "node": 0},
            "1": {"histogram": {}, "cycles": 1000, "min": 5, "max": 1550, "avg": 40.0, "cpu": 1, "node": 0}}}"#;
        let f = parse_cyclictest_json(t).unwrap();
        assert_eq!((f.avg, f.max), (25.0, 3788.0));
        assert!(parse_cyclictest_json("{}").is_none());
    }
}
