//! `cargo xtask bench player`: xrun-player against aplay on the same PCM.
//!
//! Three players play the same file with the same buffer settings to the
//! same PCM, in turn (aplay, our ALSA sink, our cpal sink, aplay …) so that
//! drifts in the machine's state hit all alike; each run's CPU time and
//! peak RSS come from wait4(2). The figures are medians, reported as ratios
//! to aplay's. The PCM is a hinted `plug` over the JACK server
//! (`xrunbench_jack`), the one PCM all three can open: cpal's ALSA host
//! finds devices by hint only.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use xrunbench_test_support::servers::{
    HintedJackPcm, JackConfig, JackLeftovers, JackServer, HINTED_JACK_PCM,
};

use super::stats::{median, wait_with_cost, ChildCost};
use xrunbench_lab::util::build_release_binaries;
use xrunbench_schema::trial::ToneSpec;
use xrunbench_schema::SampleFormat;

/// Arguments of `cargo xtask bench player`.
#[derive(clap::Args)]
pub struct Args {
    /// Runs of each tool.
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Seconds of audio per run.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Buffer time, µs (both tools' -B).
    #[arg(long, default_value_t = 20_000)]
    pub buffer_time: u32,
    /// Period time, µs (both tools' -F).
    #[arg(long, default_value_t = 5_000)]
    pub period_time: u32,
    /// ALSA PCM to play to (it must be hinted, for cpal's ALSA host to find
    /// it); by default a JACK dummy server is started and all play to a
    /// hinted `plug` over it.
    #[arg(short = 'D', long)]
    pub device: Option<String>,
}

/// A generated WAV on /dev/shm, removed on drop.
struct ShmWav(PathBuf);

impl Drop for ShmWav {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// 16-bit stereo 48 kHz, 440 Hz (crates/wav's tone writer): what aplay
/// plays by default.
fn write_tone(seconds: f64) -> Result<ShmWav> {
    let wav = ShmWav(PathBuf::from(format!(
        "/dev/shm/xrunbench-bench-{}.wav",
        std::process::id()
    )));
    let tone = ToneSpec {
        tone_hz: 440.0,
        seconds: Some(seconds),
        rate: 48_000,
        channels: 2,
        format: SampleFormat::S16Le,
    };
    xrunbench_wav::write_tone(&wav.0, &tone, 10.0)?;
    Ok(wav)
}

/// One run of one tool.
#[derive(Debug, Clone, Copy)]
struct Run {
    cost: ChildCost,
    underruns: usize,
}

fn run_once(mut cmd: Command) -> Result<Run> {
    let shown = format!("{cmd:?}");
    let stderr = tempfile_for_stderr()?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.try_clone()?)
        .spawn()
        .with_context(|| format!("starting {shown}"))?;
    let cost = wait_with_cost(child).with_context(|| format!("waiting for {shown}"))?;
    let text = read_back(stderr)?;
    if !cost.success {
        bail!("{shown} failed: {text}");
    }
    Ok(Run {
        cost,
        underruns: text.matches("underrun!!!").count(),
    })
}

fn tempfile_for_stderr() -> Result<std::fs::File> {
    let path = std::env::temp_dir().join(format!("xrunbench-bench-stderr-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

fn read_back(mut f: std::fs::File) -> Result<String> {
    use std::io::{Read, Seek};
    let mut s = String::new();
    f.rewind()?;
    f.read_to_string(&mut s)?;
    Ok(s)
}

/// The players compared, in the order they run.
const TOOLS: [&str; 3] = ["aplay", "xrun-player alsa", "xrun-player cpal"];

/// Runs the benchmark.
pub fn run(args: &Args) -> Result<ExitCode> {
    let bin = build_release_binaries(&["xrunbench-player"])?.join("xrun-player");
    // Dropped after the server (declared before it): libjack's registry
    // goes with the benchmark.
    let _jack = JackLeftovers::note();
    let server = match args.device {
        Some(_) => None,
        None => Some(JackServer::start(&JackConfig::default())?),
    };
    let hinted = match server {
        Some(_) => Some(HintedJackPcm::create().context("writing the ALSA configuration")?),
        None => None,
    };
    let device = args
        .device
        .clone()
        .unwrap_or_else(|| HINTED_JACK_PCM.to_string());
    let wav = write_tone(args.seconds)?;
    let common = [
        "-D".to_string(),
        device.clone(),
        "-B".into(),
        args.buffer_time.to_string(),
        "-F".into(),
        args.period_time.to_string(),
    ];
    println!(
        "bench player: {:.1} s of S16_LE 48000 Hz stereo from tmpfs, -B {} -F {}, device {device}{}, {} runs each, in turn",
        args.seconds,
        args.buffer_time,
        args.period_time,
        if server.is_some() { " (plug over a JACK dummy server)" } else { "" },
        args.runs
    );
    let mut results: Vec<(&str, Vec<Run>)> = TOOLS.iter().map(|t| (*t, Vec::new())).collect();
    for k in 0..args.runs {
        for (tool, runs) in results.iter_mut() {
            let mut cmd = match *tool {
                "aplay" => Command::new("aplay"),
                _ => Command::new(&bin),
            };
            if *tool == "xrun-player cpal" {
                cmd.args(["--backend", "cpal"]);
            }
            cmd.args(&common).arg(&wav.0);
            if let Some(s) = &server {
                s.configure(&mut cmd);
            }
            if let Some(h) = &hinted {
                h.configure(&mut cmd);
            }
            let r = run_once(cmd)?;
            println!(
                "  run {}/{} {tool:18} cpu {:8.1} ms  max rss {:7} KiB  underruns {}",
                k + 1,
                args.runs,
                r.cost.cpu_ms,
                r.cost.max_rss_kib,
                r.underruns
            );
            runs.push(r);
        }
    }
    print_table(&results);
    Ok(ExitCode::SUCCESS)
}

fn medians(runs: &[Run]) -> (f64, f64) {
    let cpu: Vec<f64> = runs.iter().map(|r| r.cost.cpu_ms).collect();
    let rss: Vec<f64> = runs.iter().map(|r| r.cost.max_rss_kib as f64).collect();
    (median(&cpu).unwrap_or(0.0), median(&rss).unwrap_or(0.0))
}

fn print_table(results: &[(&str, Vec<Run>)]) {
    println!();
    println!(
        "{:18} {:>16} {:>20} {:>10} {:>10} {:>10}",
        "tool", "cpu ms (median)", "max RSS KiB (median)", "underruns", "cpu/aplay", "rss/aplay"
    );
    let (aplay_cpu, aplay_rss) = medians(&results[0].1);
    for (tool, runs) in results {
        let (cpu, rss) = medians(runs);
        let xruns: usize = runs.iter().map(|r| r.underruns).sum();
        println!(
            "{tool:18} {cpu:>16.1} {rss:>20.0} {xruns:>10} {:>9.2}x {:>9.3}x",
            cpu / aplay_cpu,
            rss / aplay_rss
        );
    }
    println!("targets for xrun-player: cpu <= 0.80x aplay's, max rss <= 1.00x");
}
