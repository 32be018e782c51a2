//! `xrunbench.trial-spec/1` (what one trial must do, handed to `xrun-trial
//! run` on the machine under test) and `xrunbench.trial/1` (what it did and
//! measured, handed back).
//!
//! The spec is complete and portable: it names no host path but the WAV's
//! (or asks for a generated tone), so the same spec runs on this machine,
//! on a board over SSH, or from a LAVA test definition with no host at all.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::hackbench::HackbenchReport;
use crate::monitor::{MonitorReport, MonitorSpec};
use crate::player::PlayerReport;
use crate::vocab::{Backend, CpalHost, CpuList, Priority, SampleFormat};

/// Schema identifier of [`TrialSpec`].
pub const TRIAL_SPEC_SCHEMA: &str = "xrunbench.trial-spec/1";
/// Schema identifier of [`TrialRecord`].
pub const TRIAL_SCHEMA: &str = "xrunbench.trial/1";

/// One trial, as the runner (or a LAVA test definition) asks for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialSpec {
    /// Always [`TRIAL_SPEC_SCHEMA`].
    pub schema: String,
    /// Which trial of which run this is (copied into the record).
    pub trial: TrialId,
    /// Knobs to apply before the load starts, in order; each is read first,
    /// journaled, written, read back, and restored after the trial.
    #[serde(default)]
    pub knobs: Vec<KnobSpec>,
    /// A PM-QoS CPU DMA latency request (µs) held on /dev/cpu_dma_latency
    /// for the whole trial.
    #[serde(default)]
    pub pm_qos_us: Option<u32>,
    /// What the player plays.
    pub audio: AudioInput,
    /// The player's settings.
    pub player: PlayerArgs,
    /// The background load; absent means none.
    #[serde(default)]
    pub load: Option<LoadArgs>,
    /// Pause after the knobs are applied and the load started, before the
    /// player starts, µs.
    pub warmup_us: u64,
    /// Audio the player plays, µs.
    pub duration_us: u64,
    /// Where to write the record: a file, or standard output when absent
    /// (how the runner reads it back over a pipe or an SSH channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<PathBuf>,
    /// Where the player's and the load's logs and reports go while the
    /// trial runs (kept afterwards for people to read); absent: a private
    /// temporary directory, removed when the trial ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<PathBuf>,
    /// The latency monitor (and scheduler trace) beside playback; absent:
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorSpec>,
}

/// Identifies a trial within a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialId {
    /// Scenario name.
    pub scenario: String,
    /// Configuration name.
    pub config: String,
    /// Trial number within the configuration, 1-based.
    pub k: u32,
    /// Position in the run, 1-based.
    pub seq: u32,
}

impl TrialId {
    /// `<config>-<k>`: the trial's file stem in a run directory.
    pub fn stem(&self) -> String {
        format!("{}-{}", self.config, self.k)
    }

    /// `<scenario>/<config>-<k>`, escaped onto one printable line (the
    /// names may come from a board): the trial as people read it.
    pub fn display_name(&self) -> String {
        crate::doc::one_line(&format!("{}/{}", self.scenario, self.stem()))
    }
}

/// A knob setting: what to write where, in the scenario's terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum KnobSpec {
    /// `/proc/sys/<name with dots as slashes>`.
    Sysctl {
        /// Dotted name (`kernel.sched_autogroup_enabled`).
        name: String,
        /// Value to write.
        value: String,
    },
    /// A word for /sys/kernel/debug/sched/features (`NEXT_BUDDY`, `NO_NEXT_BUDDY`).
    SchedFeature {
        /// The word as written.
        word: String,
    },
    /// Another file under /sys/kernel/debug/sched/ (`base_slice_ns`).
    SchedDebug {
        /// File name.
        file: String,
        /// Value to write.
        value: String,
    },
    /// cpufreq governor of every CPU.
    Governor {
        /// Governor name.
        value: String,
    },
}

impl fmt::Display for KnobSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobSpec::Sysctl { name, value } => write!(f, "sysctl {name} = {value}"),
            KnobSpec::SchedFeature { word } => write!(f, "sched_features {word}"),
            KnobSpec::SchedDebug { file, value } => write!(f, "sched_debug {file} = {value}"),
            KnobSpec::Governor { value } => write!(f, "governor = {value}"),
        }
    }
}

/// Where the audio comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AudioInput {
    /// A WAV file on the machine under test.
    File(PathBuf),
    /// A tone `xrun-trial` generates into tmpfs and removes afterwards.
    Tone(ToneSpec),
}

/// A sine tone written as a WAV file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToneSpec {
    /// Frequency, Hz (default 440).
    #[serde(default = "default_tone_hz")]
    pub tone_hz: f64,
    /// Length of the file, seconds (default: the trial's duration; the
    /// player repeats the file when it is shorter).
    #[serde(default)]
    pub seconds: Option<f64>,
    /// Sample rate, Hz (default 48000).
    #[serde(default = "default_rate")]
    pub rate: u32,
    /// Channels (default 2).
    #[serde(default = "default_channels")]
    pub channels: u16,
    /// Sample format (default `S16_LE`).
    #[serde(default)]
    pub format: SampleFormat,
}

fn default_tone_hz() -> f64 {
    440.0
}
fn default_rate() -> u32 {
    48_000
}
fn default_channels() -> u16 {
    2
}

impl Default for ToneSpec {
    fn default() -> Self {
        ToneSpec {
            tone_hz: default_tone_hz(),
            seconds: None,
            rate: default_rate(),
            channels: default_channels(),
            format: SampleFormat::default(),
        }
    }
}

/// The player's settings: every `xrun-player` option a scenario may set.
/// The trial adds the file, the duration and where the report goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlayerArgs {
    /// `--backend`.
    #[serde(default)]
    pub backend: Backend,
    /// `--host` (with the cpal backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<CpalHost>,
    /// `-D`: the PCM (or cpal device) name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `-B`: buffer time, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_time_us: Option<u32>,
    /// `-F`: period time, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_time_us: Option<u32>,
    /// `--priority` of the playback thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// `--cpu`: affinity of the playback thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuList>,
}

impl PlayerArgs {
    /// The `xrun-player` command line (without the program) that plays
    /// `wav` for `duration_s` seconds of audio, quietly, writing its report
    /// to `json`. Each value is one argument: nothing is ever parsed by a
    /// shell.
    pub fn to_args(&self, wav: &Path, duration_s: f64, json: &Path) -> Vec<String> {
        let mut args: Vec<String> = vec!["--backend".into(), self.backend.as_str().into()];
        if let Some(h) = self.host {
            args.extend(["--host".into(), h.as_str().into()]);
        }
        if let Some(d) = &self.device {
            args.extend(["-D".into(), d.clone()]);
        }
        if let Some(b) = self.buffer_time_us {
            args.extend(["-B".into(), b.to_string()]);
        }
        if let Some(p) = self.period_time_us {
            args.extend(["-F".into(), p.to_string()]);
        }
        if let Some(p) = self.priority {
            args.extend(["--priority".into(), p.to_string()]);
        }
        if let Some(c) = &self.cpu {
            args.extend(["--cpu".into(), c.as_str().into()]);
        }
        args.extend([
            "--duration".into(),
            seconds_arg(duration_s),
            "--json".into(),
            json.display().to_string(),
            "-q".into(),
            // After `--`: a WAV named `-x.wav` is a file, not an option.
            "--".into(),
            wav.display().to_string(),
        ]);
        args
    }
}

/// The background load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadArgs {
    /// hackbench's parameters.
    pub hackbench: HackbenchArgs,
    /// Start the load this long after the player started, µs (0: before
    /// the warm-up, so the player starts into a running load).
    #[serde(default)]
    pub start_delay_us: u64,
}

impl LoadArgs {
    /// The `xrun-hackbench` command line (without the program) of a trial
    /// with this warm-up and duration: rounds until the trial stops it,
    /// with a backstop after the longest the trial may take (its player
    /// may run four times its duration past it, starved; then 30 s more),
    /// so that a load whose trial was SIGKILLed still ends by itself;
    /// report to `json`.
    pub fn to_args(&self, warmup_us: u64, duration_us: u64, json: &Path) -> Vec<String> {
        let busy_us = warmup_us
            .saturating_add(self.start_delay_us)
            .saturating_add(duration_us.saturating_mul(5));
        self.hackbench
            .to_args(busy_us.div_ceil(1_000_000).saturating_add(60), json)
    }
}

/// hackbench's parameters with rt-tests' meanings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HackbenchArgs {
    /// `-g`: groups.
    pub groups: u32,
    /// `-f`: receivers (and senders) per group.
    pub fds: u32,
    /// `-l`: messages each sender sends each receiver, per round.
    pub loops: u32,
    /// `-s`: bytes per message.
    pub datasize: u32,
    /// `-P` / `-T`.
    pub mode: HackbenchMode,
    /// Sockets, `-p` or `-i`.
    pub transport: HackbenchTransport,
}

impl Default for HackbenchArgs {
    /// rt-tests' defaults: 10 groups of 20, 100 loops, 100 bytes, processes
    /// over socket pairs.
    fn default() -> Self {
        HackbenchArgs {
            groups: 10,
            fds: 20,
            loops: 100,
            datasize: 100,
            mode: HackbenchMode::Process,
            transport: HackbenchTransport::Socket,
        }
    }
}

impl HackbenchArgs {
    /// The `xrun-hackbench` command line (without the program): rounds back
    /// to back for at most `backstop_s` seconds (the trial stops it with
    /// SIGTERM long before; the backstop only ends a load whose trial was
    /// SIGKILLed), report to `json`.
    pub fn to_args(&self, backstop_s: u64, json: &Path) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "-g".into(),
            self.groups.to_string(),
            "-f".into(),
            self.fds.to_string(),
            "-l".into(),
            self.loops.to_string(),
            "-s".into(),
            self.datasize.to_string(),
        ];
        args.push(
            match self.mode {
                HackbenchMode::Process => "-P",
                HackbenchMode::Thread => "-T",
            }
            .into(),
        );
        match self.transport {
            HackbenchTransport::Socket => {}
            HackbenchTransport::Pipe => args.push("-p".into()),
            HackbenchTransport::Inet => args.push("-i".into()),
        }
        args.extend([
            "--duration".into(),
            backstop_s.to_string(),
            "--json".into(),
            json.display().to_string(),
        ]);
        args
    }
}

/// hackbench's workers: `-P` (processes, rt-tests' default) or `-T`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HackbenchMode {
    /// Worker processes (`-P`).
    #[default]
    Process,
    /// Worker threads (`-T`).
    Thread,
}

/// hackbench's transport: socket pairs (default), pipes (`-p`) or loopback
/// TCP (`-i`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HackbenchTransport {
    /// `socketpair(AF_UNIX, SOCK_STREAM)`.
    #[default]
    Socket,
    /// `pipe()` (`-p`).
    Pipe,
    /// Loopback TCP (`-i`).
    Inet,
}

/// Seconds as a command-line argument: whole seconds as integers (so an
/// integer parser accepts them), else three decimals.
pub fn seconds_arg(seconds: f64) -> String {
    if seconds.fract() == 0.0 && (0.0..1e15).contains(&seconds) {
        format!("{}", seconds as u64)
    } else {
        format!("{seconds:.3}")
    }
}

/// Everything one trial did and measured, written by `xrun-trial run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialRecord {
    /// Always [`TRIAL_SCHEMA`].
    pub schema: String,
    /// Version of `xrun-trial` that ran it.
    pub version: String,
    /// Which trial.
    pub trial: TrialId,
    /// How it ended; only [`TrialOutcome::Ran`] is a measurement.
    pub outcome: TrialOutcome,
    /// When it began (RFC 3339 UTC).
    pub started_at: String,
    /// When it ended, knobs restored (RFC 3339 UTC).
    pub ended_at: String,
    /// Each knob write: found, requested, read back, restored.
    pub knobs: Vec<KnobRecord>,
    /// PM-QoS CPU DMA latency held during the trial, µs.
    #[serde(default)]
    pub pm_qos_us: Option<u32>,
    /// The player's command line as run.
    pub player_command: Vec<String>,
    /// The load's command line as run, if any.
    #[serde(default)]
    pub load_command: Option<Vec<String>>,
    /// The player's report (absent when the trial could not run).
    #[serde(default)]
    pub player: Option<PlayerReport>,
    /// The load's report, if there was a load and it reported.
    #[serde(default)]
    pub load: Option<HackbenchReport>,
    /// The machine it ran on.
    pub machine: MachineFingerprint,
    /// Facts sampled around the trial.
    pub facts: TrialFacts,
    /// What the latency monitor measured (when the spec asked for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorReport>,
}

impl TrialRecord {
    /// The player's report when the trial ran to the end: what a table or a
    /// bisect verdict may use.
    pub fn measured(&self) -> Option<&PlayerReport> {
        match self.outcome {
            TrialOutcome::Ran => self.player.as_ref(),
            _ => None,
        }
    }
}

/// How a trial ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum TrialOutcome {
    /// It ran to the end (underruns are results, not failures).
    Ran,
    /// It could not run; every knob was restored.
    Failed {
        /// One line: why.
        reason: String,
    },
    /// A signal (or the link closing) stopped it; every knob was restored.
    Interrupted {
        /// What stopped it: `SIGINT`, `SIGTERM`, `SIGHUP`, `stdin closed`…
        by: String,
    },
}

/// One knob file, through the trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnobRecord {
    /// What it is, for people: `sysctl kernel.sched_autogroup_enabled`.
    pub what: String,
    /// The file.
    pub path: PathBuf,
    /// The value found before the trial (what restoring writes back).
    pub found: String,
    /// The value asked for.
    pub requested: String,
    /// What the file read after writing `requested` (`None`: not applied).
    #[serde(default)]
    pub read_back: Option<String>,
    /// What the file read after restoring (`None`: restoring failed).
    #[serde(default)]
    pub restored: Option<String>,
}

/// The machine a trial ran on: enough to tell boots, kernels and boards
/// apart when runs are compared later.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineFingerprint {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v` (/proc/sys/kernel/version): build number and date.
    pub kernel_version: String,
    /// `uname -m`.
    pub arch: String,
    /// The host name.
    pub hostname: String,
    /// /proc/cmdline.
    pub cmdline: String,
    /// CPU model (x86 `model name`, or the ARM `Hardware`/`CPU part` lines).
    pub cpu_model: String,
    /// Online CPUs.
    pub cpu_count: usize,
    /// cpufreq governor per CPU (`cpu0` → `schedutil`; empty without cpufreq).
    pub governors: BTreeMap<String, String>,
    /// /proc/device-tree/model, on boards that have one.
    #[serde(default)]
    pub board_model: Option<String>,
    /// /proc/sys/kernel/random/boot_id.
    pub boot_id: String,
    /// Every /proc/sys/kernel/sched_* value.
    #[serde(default)]
    pub sched_sysctls: BTreeMap<String, String>,
    /// The preemption mode the kernel runs with (`none`, `voluntary`,
    /// `full`, `lazy`; `, PREEMPT_RT` added on a real-time kernel): the
    /// marked one of debugfs `sched/preempt` where the kernel switches at
    /// run time, else the one its config (and `preempt=`) chose; `None`
    /// where nothing says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt: Option<String>,
    /// The scheduler's features line (debugfs `sched/features`), where
    /// readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_features: Option<String>,
    /// CONFIG_HZ, where the kernel's config can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz: Option<u32>,
}

/// Facts sampled around each trial (what may differ from trial to trial).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialFacts {
    /// /proc/loadavg before the knobs were applied.
    pub loadavg_before: String,
    /// /proc/loadavg after the knobs were restored.
    pub loadavg_after: String,
    /// Governors during the trial (after the knobs were applied).
    pub governors: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn player_args_keep_each_value_one_argument() {
        let p = PlayerArgs {
            backend: Backend::Cpal,
            host: Some(CpalHost::Jack),
            device: Some("my dev; rm -rf /".into()),
            buffer_time_us: Some(20_000),
            period_time_us: Some(5_000),
            priority: Some(Priority::Fifo(80)),
            cpu: Some("1".parse().unwrap()),
        };
        let a = p.to_args(Path::new("/dev/shm/-x.wav"), 10.0, Path::new("p.json"));
        assert_eq!(
            a,
            [
                "--backend",
                "cpal",
                "--host",
                "jack",
                "-D",
                "my dev; rm -rf /",
                "-B",
                "20000",
                "-F",
                "5000",
                "--priority",
                "fifo:80",
                "--cpu",
                "1",
                "--duration",
                "10",
                "--json",
                "p.json",
                "-q",
                "--",
                "/dev/shm/-x.wav"
            ]
        );
    }

    #[test]
    fn hackbench_args_follow_rt_tests_flags() {
        let h = HackbenchArgs {
            mode: HackbenchMode::Thread,
            transport: HackbenchTransport::Pipe,
            ..HackbenchArgs::default()
        };
        let a = h.to_args(41, Path::new("l.json"));
        assert_eq!(
            a.join(" "),
            "-g 10 -f 20 -l 100 -s 100 -T -p --duration 41 --json l.json"
        );
    }

    #[test]
    fn seconds_print_as_integers_when_whole() {
        assert_eq!(seconds_arg(10.0), "10");
        assert_eq!(seconds_arg(2.5), "2.500");
    }
}
