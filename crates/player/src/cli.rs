//! The command line, with aplay's option names where aplay has one. The
//! words it shares with scenarios and trial specs (backend, cpal host,
//! priority, CPU list) are the schema's ([`xrunbench_schema::vocab`]):
//! `PlayerArgs::to_args` builds this command line from them.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Parser;
use xrunbench_schema::{Backend, CpalHost, CpuList, Priority};

use crate::play::StallSpec;
use crate::tmpfs::TmpfsPolicy;

/// What each `--backend` does, for `--help`.
fn backend_help(b: Backend) -> &'static str {
    match b {
        Backend::Auto => {
            "ALSA when the machine has a sound card (or -D names a device), else virtual"
        }
        Backend::Alsa => "Any ALSA PCM by name (-D)",
        Backend::Virtual => {
            "A simulated PCM on CLOCK_MONOTONIC: measures whether the player keeps up"
        }
        Backend::Cpal => "cpal, on the host --host names (-D: a device as --list-devices shows it)",
    }
}

/// `--backend`: the schema's words, listed in `--help`.
fn backend_parser() -> impl TypedValueParser<Value = Backend> {
    let values = Backend::ALL.map(|b| PossibleValue::new(b.as_str()).help(backend_help(b)));
    PossibleValuesParser::new(values).try_map(|s| s.parse::<Backend>())
}

/// `--host`: the schema's words, listed in `--help`.
fn host_parser() -> impl TypedValueParser<Value = CpalHost> {
    let values = CpalHost::ALL.map(|h| PossibleValue::new(h.as_str()));
    PossibleValuesParser::new(values).try_map(|s| s.parse::<CpalHost>())
}

/// `--priority`: the schema's [`Priority`], said the way aplay users read it.
fn priority_arg(s: &str) -> Result<Priority, String> {
    s.parse().map_err(|_| {
        format!("{s:?}: expected fifo:N or rr:N (N in 1..=99), or other[:NICE] (NICE in -20..=19)")
    })
}

/// `--cpu`: the schema's [`CpuList`], limited to the CPUs a `cpu_set_t`
/// can name (the affinity call takes one).
fn cpu_list_arg(s: &str) -> Result<CpuList, String> {
    let max = libc::CPU_SETSIZE as usize - 1;
    match s.parse::<CpuList>() {
        Ok(list) if list.cpus().iter().all(|&c| c <= max) => Ok(list),
        _ => Err(format!(
            "{s:?}: expected a CPU list like 0 or 0,2 or 1-3 (CPUs 0..={max})"
        )),
    }
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
    // Like aplay's getopt, the next argument is the value even when it
    // starts with '-' (a trial passes whatever its spec names).
    #[arg(
        short = 'D',
        long,
        default_value = "default",
        allow_hyphen_values = true
    )]
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
    #[arg(long, value_parser = backend_parser(), default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// cpal's host for --backend cpal (jack, pulseaudio and pipewire need
    /// the cargo features cpal-jack, cpal-pulseaudio, cpal-pipewire).
    #[arg(long, value_parser = host_parser(), default_value_t = CpalHost::Alsa)]
    pub host: CpalHost,
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
    #[arg(long, value_name = "POLICY", value_parser = priority_arg)]
    pub priority: Option<Priority>,
    /// Pin the playback thread to these CPUs (taskset syntax: 1 or 0,2-3).
    #[arg(long, value_name = "LIST", value_parser = cpu_list_arg)]
    pub cpu: Option<CpuList>,
    /// Write the xrunbench.player/1 report to FILE (- for stdout).
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use xrunbench_schema::trial::PlayerArgs;

    /// A trial builds this command line from its spec's typed
    /// [`PlayerArgs`]: every field must arrive here as it was sent.
    #[test]
    fn every_field_of_a_trials_player_args_arrives() {
        let sent = PlayerArgs {
            backend: Backend::Cpal,
            host: Some(CpalHost::Pulseaudio),
            device: Some("-my dev; rm -rf /".into()),
            buffer_time_us: Some(20_000),
            period_time_us: Some(5_000),
            priority: Some(Priority::Rr(42)),
            cpu: Some("3,0-1".parse().unwrap()),
        };
        let argv = sent.to_args(Path::new("/dev/shm/-x.wav"), 2.5, Path::new("/tmp/p.json"));
        let cli = Cli::try_parse_from(std::iter::once("xrun-player".to_string()).chain(argv))
            .unwrap_or_else(|e| panic!("{e}"));
        // Destructured without `..`: a field added to PlayerArgs fails to
        // compile here until it is checked.
        let PlayerArgs {
            backend,
            host,
            device,
            buffer_time_us,
            period_time_us,
            priority,
            cpu,
        } = sent;
        assert_eq!(cli.backend, backend);
        assert_eq!(Some(cli.host), host);
        assert_eq!(Some(cli.device), device);
        assert_eq!(cli.buffer_time, buffer_time_us);
        assert_eq!(cli.period_time, period_time_us);
        assert_eq!(cli.priority, priority);
        assert_eq!(cli.cpu, cpu);
        assert_eq!(cli.duration, Some(2.5));
        assert_eq!(cli.json.as_deref(), Some(Path::new("/tmp/p.json")));
        assert_eq!(cli.file.as_deref(), Some(Path::new("/dev/shm/-x.wav")));
        assert!(cli.quiet);
    }

    /// The defaults a spec leaves out are the player's own defaults.
    #[test]
    fn default_player_args_are_the_players_defaults() {
        let argv =
            PlayerArgs::default().to_args(Path::new("a.wav"), 10.0, Path::new("-report.json"));
        let cli = Cli::try_parse_from(std::iter::once("xrun-player".to_string()).chain(argv))
            .unwrap_or_else(|e| panic!("{e}"));
        let plain = Cli::try_parse_from(["xrun-player", "a.wav"]).unwrap();
        assert_eq!(
            (cli.backend, cli.host, &cli.device, cli.priority, &cli.cpu),
            (
                plain.backend,
                plain.host,
                &plain.device,
                plain.priority,
                &plain.cpu
            )
        );
        assert_eq!((cli.buffer_time, cli.period_time), (None, None));
        assert_eq!(cli.json.as_deref(), Some(Path::new("-report.json")));
    }

    #[test]
    fn vocabulary_errors_keep_the_players_wording() {
        let e = Cli::try_parse_from(["xrun-player", "--priority", "batch", "a.wav"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected fifo:N"), "{e}");
        let e = Cli::try_parse_from(["xrun-player", "--cpu", "1024", "a.wav"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a CPU list"), "{e}");
        let e = Cli::try_parse_from(["xrun-player", "--backend", "oss", "a.wav"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("auto, alsa, virtual, cpal"), "{e}");
    }
}
