//! The command line, with aplay's option names where aplay has one.

use std::path::PathBuf;

use clap::Parser;

use crate::play::StallSpec;
use crate::sink::cpal_sink::HostChoice;
use crate::system::{CpuList, Priority};
use crate::tmpfs::TmpfsPolicy;

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// ALSA when the machine has a sound card (or -D names a device), else virtual.
    Auto,
    /// Any ALSA PCM by name (-D).
    Alsa,
    /// A simulated PCM on CLOCK_MONOTONIC: measures whether the player keeps up.
    Virtual,
    /// cpal, on the host --host names (-D: a device as --list-devices shows it).
    Cpal,
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?}: expected a positive number of seconds")),
    }
}

/// Streams a WAV file from tmpfs to a PCM and reports every underrun.
#[derive(Debug, Parser)]
#[command(name = "xrun-player", version, about, max_term_width = 100)]
pub struct Cli {
    /// PCM device name (aplay's -D): hw:0, plughw:1,0, default, plug:jack…
    #[arg(short = 'D', long, default_value = "default")]
    pub device: String,
    /// Buffer time in µs (aplay's -B); default min(device max, 500000).
    #[arg(short = 'B', long = "buffer-time", value_name = "US", value_parser = clap::value_parser!(u32).range(1..))]
    pub buffer_time: Option<u32>,
    /// Period time in µs (aplay's -F); default buffer / 4.
    #[arg(short = 'F', long = "period-time", value_name = "US", value_parser = clap::value_parser!(u32).range(1..))]
    pub period_time: Option<u32>,
    /// Buffer size in frames (aplay's --buffer-size).
    #[arg(long = "buffer-size", value_name = "FRAMES", value_parser = clap::value_parser!(u64).range(1..))]
    pub buffer_size: Option<u64>,
    /// Period size in frames (aplay's --period-size).
    #[arg(long = "period-size", value_name = "FRAMES", value_parser = clap::value_parser!(u64).range(1..))]
    pub period_size: Option<u64>,
    /// Stop at the first underrun, exit 1 (aplay's --fatal-errors).
    #[arg(long)]
    pub fatal_errors: bool,
    /// Print the negotiated setup (aplay's -v).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
    /// Where the audio goes.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// cpal's host for --backend cpal (jack, pulseaudio and pipewire need
    /// the cargo features cpal-jack, cpal-pulseaudio, cpal-pipewire).
    #[arg(long, value_enum, default_value_t = HostChoice::Alsa)]
    pub host: HostChoice,
    /// List cpal's hosts, their output devices and supported configurations, then exit.
    #[arg(long)]
    pub list_devices: bool,
    /// Stop after SECS of audio; the file repeats until then unless --loops.
    #[arg(long, value_name = "SECS", value_parser = positive_seconds, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Play the file N times.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: Option<u64>,
    /// Scheduling of the playback thread: fifo:N, rr:N or other[:NICE].
    #[arg(long, value_name = "POLICY")]
    pub priority: Option<Priority>,
    /// Pin the playback thread to these CPUs (taskset syntax: 1 or 0,2-3).
    #[arg(long, value_name = "LIST")]
    pub cpu: Option<CpuList>,
    /// Write the xrunbench.player/1 report to FILE (- for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// When the file is not on tmpfs: copy it to /dev/shm, refuse, or play it in place.
    #[arg(long, value_enum, default_value_t = TmpfsPolicy::Copy)]
    pub tmpfs: TmpfsPolicy,
    /// Do not mlockall.
    #[arg(long)]
    pub no_mlock: bool,
    /// SELF-TEST ONLY: stall the writer thread (with --backend cpal: the
    /// data callback, the thread that feeds the device) for MS milliseconds
    /// at AT seconds after playback starts (repeatable, or comma-separated),
    /// to check the underrun timing against a known stall.
    #[arg(
        long = "selftest-stall",
        value_name = "AT:MS",
        value_delimiter = ',',
        help_heading = "Self-test"
    )]
    pub selftest_stall: Vec<StallSpec>,
    /// The WAV file to play.
    #[arg(required_unless_present = "list_devices")]
    pub file: Option<PathBuf>,
}
