//! The scenario file: what the user writes (TOML, every table closed with
//! `deny_unknown_fields`), and the resolved form the runner executes (each
//! configuration with its `[audio]` and `[load]` overrides merged and every
//! default filled in). Checks that need no system access live here; those
//! that look at the machine live in `validate`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use xrunbench_schema::monitor::MonitorSpec;
use xrunbench_schema::trial::{HackbenchArgs, HackbenchMode, HackbenchTransport, ToneSpec};
use xrunbench_schema::{Backend, CpalHost, CpuList, Priority};

pub use xrunbench_schema::trial::KnobSpec;

use super::units::Span;

/// A problem with the scenario file: one line, naming the file and where.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ScenarioError(pub String);

/// The file as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Names the results directory `results/<name>/`.
    pub name: String,
    /// Free text for people.
    #[serde(default)]
    pub description: String,
    /// Trials per configuration.
    #[serde(default)]
    pub trials: Option<u32>,
    /// How long the player plays in each trial.
    #[serde(default)]
    pub duration: Option<Span>,
    /// Pause after the knobs are applied (and the load started) before the
    /// player starts.
    #[serde(default)]
    pub warmup: Option<Span>,
    /// Trial order.
    #[serde(default)]
    pub order: Order,
    /// The player's settings.
    #[serde(default)]
    pub audio: AudioSpec,
    /// The background load; absent means none.
    #[serde(default)]
    pub load: Option<LoadSetting>,
    /// The configurations to compare.
    #[serde(default, rename = "config")]
    pub configs: Vec<ConfigSpec>,
    /// Where the trials run; absent: this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetSpec>,
    /// The latency monitor and scheduler trace beside playback; absent:
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorSetting>,
    /// `[gate]`: pass/fail criteria for CI, per configuration and metric
    /// (see [`crate::gate`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub gate: crate::gate::GateTable,
}

/// `[monitor]` as written: cyclictest's measurement beside playback, and
/// the scheduler's account of every gap (`trace = true`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorSetting {
    /// Measure wake-up latency (default true).
    #[serde(default)]
    pub latency: Option<bool>,
    /// CPUs to measure (default: those the playback thread may run on).
    #[serde(default)]
    pub cpus: Option<CpuList>,
    /// SCHED_FIFO priority of the measuring threads (default 99).
    #[serde(default)]
    pub priority: Option<u8>,
    /// Interval between wake-ups (default 1ms).
    #[serde(default)]
    pub interval: Option<Span>,
    /// A wake-up later than this is a spike (default 1ms).
    #[serde(default)]
    pub threshold: Option<Span>,
    /// Trace the scheduler and account for every underrun and spike
    /// (default false).
    #[serde(default)]
    pub trace: Option<bool>,
    /// The kernel's trace buffer per CPU, KiB (default 16384).
    #[serde(default)]
    pub trace_buffer_kb: Option<u32>,
}

/// `[target]`: a board reached over SSH (`ssh`), or a kernel booted under
/// QEMU as the board (`vm`). Every other key is optional; the defaults are
/// in scenarios/README.md.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// An OpenSSH destination (`root@rpi4.lab`, a `Host` of
    /// ~/.ssh/config, `ssh://user@host:port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
    /// The VM lab: `{ kernel = "bzImage", sound = "dummy", … }` (see
    /// `cargo xtask lab kernel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<crate::lab::vm::VmSpec>,
    /// TCP port (`Port`); default: ssh's (its config, else 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Private key file (`IdentityFile`), relative to the scenario file
    /// or `~/…`; default: ssh's (agent, ~/.ssh/config, ~/.ssh/id_*).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<PathBuf>,
    /// known_hosts file (`UserKnownHostsFile`); default: ssh's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<PathBuf>,
    /// More ssh_config options, `Key=Value` (`ServerAliveInterval=1`,
    /// `ProxyJump=gw`); never ones that turn host-key checking off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Where the board binaries go on the board (relative: under the
    /// login's home).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// `auto` (from `uname -m`), `aarch64`, `armv7` or `x86_64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// How long connecting may take (`ConnectTimeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<Span>,
    /// A trial still running this long after it started is stopped on the
    /// board and counted lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_timeout: Option<Span>,
    /// How often a lost trial is run again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// How long to keep reconnecting after the link dropped before the
    /// run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_timeout: Option<Span>,
    /// A host command line (`sh -c`) that power-cycles the board, run when
    /// the board is lost, before reconnecting (`labgrid-client -p rpi4
    /// power cycle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cycle: Option<String>,
    /// `bisect`: the command that builds this commit's kernel, installs it
    /// and reboots the board (run on the host, in the kernel tree, by
    /// `sh -c`; exit 125: the commit cannot be built, skip it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<String>,
    /// `bisect`: how long the board may take to come back after `deploy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_timeout: Option<Span>,
    /// `bisect`: the command (run like `deploy`, after it) that prints the
    /// string the board's /proc/version must contain; default: `make -s
    /// kernelrelease` in a kernel tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_kernel: Option<String>,
}

/// Trial order: `interleaved` (A B A B …, default: slow drift of the
/// machine, thermal or otherwise, spreads over all configurations) or
/// `blocked` (A A … B B …).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// A B A B …
    #[default]
    Interleaved,
    /// A A … B B …
    Blocked,
}

/// `[audio]` (and a configuration's `[config.audio]` override): the
/// player's options. Every key is optional so an override names only what
/// it changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioSpec {
    /// A WAV file, relative to the scenario file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// Or a tone generated into /dev/shm for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<ToneSpec>,
    /// `auto`, `alsa`, `virtual` or `cpal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// cpal's host with `backend = "cpal"`: `alsa` (default), `jack`,
    /// `pulseaudio`, `pipewire`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<CpalHost>,
    /// ALSA PCM name (with cpal: a device as `xrun-player --list-devices` names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Ring buffer length (aplay -B).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_time: Option<Span>,
    /// Period length (aplay -F).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_time: Option<Span>,
    /// Scheduling policy of the player.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// CPU affinity of the player.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuList>,
}

/// `load = "none"` or a `[load]` table.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LoadSetting {
    /// No background load (written `load = "none"`).
    None(NoneWord),
    /// A load table.
    Table(LoadSpec),
}

/// The word `none`, serialized back as itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoneWord {
    /// `"none"`.
    None,
}

impl<'de> Deserialize<'de> for LoadSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct LoadVisitor;
        impl<'de> Visitor<'de> for LoadVisitor {
            type Value = LoadSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"none\" or a table with `hackbench` and `start_delay`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LoadSetting, E> {
                match v {
                    "none" => Ok(LoadSetting::None(NoneWord::None)),
                    other => Err(E::custom(format!(
                        "load `{other}` is unknown: write load = \"none\" or a [load] table"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LoadSetting, A::Error> {
                LoadSpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(LoadSetting::Table)
            }
        }
        d.deserialize_any(LoadVisitor)
    }
}

/// `[load]`: what runs beside the player.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// hackbench, run in rounds back to back for the whole trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hackbench: Option<HackbenchSpec>,
    /// Start the load this long after the player started (as in the LKML
    /// report, where hackbench was started after aplay). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_delay: Option<Span>,
}

/// hackbench's parameters, with rt-tests' names and defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HackbenchSpec {
    /// `-g`, default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<u32>,
    /// `-f`, default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fds: Option<u32>,
    /// `-l`, default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loops: Option<u32>,
    /// `-s`, bytes, default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasize: Option<u32>,
    /// `process` (default) or `thread`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<HackbenchMode>,
    /// `socket` (default), `pipe` (`-p`) or `inet` (`-i`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<HackbenchTransport>,
}

/// A sysctl or debugfs value: TOML strings and integers are both accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct KnobValue(pub String);

impl<'de> Deserialize<'de> for KnobValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KnobValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KnobValue, E> {
                Ok(KnobValue(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KnobValue, E> {
                Ok(KnobValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KnobValue, E> {
                Ok(KnobValue(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// One `[[config]]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSpec {
    /// Names the configuration in results and tables.
    pub name: String,
    /// The `uname -r` this configuration expects; on another kernel it is
    /// skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// sysctls by dotted name: `{ "kernel.sched_autogroup_enabled" = "0" }`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, KnobValue>,
    /// Words written to /sys/kernel/debug/sched/features.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sched_features: Vec<String>,
    /// Other files under /sys/kernel/debug/sched/: `{ base_slice_ns = 3000000 }`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sched_debug: BTreeMap<String, KnobValue>,
    /// cpufreq governor for every CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<String>,
    /// Value held on /dev/cpu_dma_latency during each trial, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pm_qos_cpu_dma_latency_us: Option<u32>,
    /// Overrides of `[audio]`.
    #[serde(default, skip_serializing_if = "is_default_audio")]
    pub audio: AudioSpec,
    /// Override of `[load]` (`"none"` or a table merged over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSetting>,
}

fn is_default_audio(a: &AudioSpec) -> bool {
    *a == AudioSpec::default()
}

/// Default trials per configuration.
pub const DEFAULT_TRIALS: u32 = 3;
/// Default trial duration.
pub const DEFAULT_DURATION: Span = Span::from_secs(10);
/// Default warm-up.
pub const DEFAULT_WARMUP: Span = Span::from_secs(1);

/// A scenario ready to run: defaults filled, overrides merged. `run.json`
/// records it, and reads back as it was run (see [`Scenario::fingerprint`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scenario {
    /// The file it came from.
    pub path: PathBuf,
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// Trials per configuration.
    pub trials: u32,
    /// Player duration per trial.
    pub duration: Span,
    /// Pause before the player starts.
    pub warmup: Span,
    /// Trial order.
    pub order: Order,
    /// The configurations, in file order.
    pub configs: Vec<Config>,
    /// The board the trials run on (`[target]`, `--target`); `None`: this
    /// machine. Not part of the [`ScenarioFingerprint`]: the same
    /// experiment runs on a board or here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<SshTarget>,
    /// `[monitor]` resolved; `None`: no monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorSpec>,
}

/// Default `[target] workdir`: under the login's home.
pub const DEFAULT_WORKDIR: &str = ".cache/xrunbench";
/// Default `[target] connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Span = Span::from_secs(10);
/// Default `[target] retries`: as often as KernelCI retries a job whose
/// failure is infrastructure.
pub const DEFAULT_RETRIES: u32 = 3;
/// Default `[target] reconnect_timeout`.
pub const DEFAULT_RECONNECT_TIMEOUT: Span = Span::from_secs(60);
/// Default `[target] boot_timeout`.
pub const DEFAULT_BOOT_TIMEOUT: Span = Span::from_secs(300);

/// `[target]` resolved: defaults filled, paths absolute, options checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshTarget {
    /// The OpenSSH destination.
    pub destination: String,
    /// `Port`, if set.
    pub port: Option<u16>,
    /// `IdentityFile`, if set (absolute).
    pub identity: Option<PathBuf>,
    /// `UserKnownHostsFile`, if set (absolute).
    pub known_hosts: Option<PathBuf>,
    /// ssh_config options, `Key=Value`: `--ssh-option`s first (the first
    /// value ssh sees wins), then the file's.
    pub options: Vec<String>,
    /// The board's directory for the binaries.
    pub workdir: String,
    /// `auto`, or the architecture whose binaries the board runs.
    pub arch: String,
    /// Connecting may take this long.
    pub connect_timeout: Span,
    /// A trial running longer is stopped and counted lost.
    pub trial_timeout: Span,
    /// Lost trials are run again this many times; so is a bisect step
    /// whose deployment failed (infrastructure).
    pub retries: u32,
    /// Reconnecting is tried for this long.
    pub reconnect_timeout: Span,
    /// The `power_cycle` hook, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cycle: Option<String>,
    /// `bisect`'s deploy command, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<String>,
    /// How long the board may take to come back after the deploy command.
    #[serde(default = "default_boot_timeout")]
    pub boot_timeout: Span,
    /// The command printing the kernel string expected in /proc/version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_kernel: Option<String>,
    /// The VM lab's guest, when the board is one: booted before the
    /// connection, which then goes to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<crate::lab::vm::VmSettings>,
}

fn default_boot_timeout() -> Span {
    DEFAULT_BOOT_TIMEOUT
}

impl SshTarget {
    /// A target with every default, for `destination` (`--target` without a
    /// `[target]` table), for trials of `duration` after `warmup`.
    pub fn with_defaults(destination: &str, duration: Span, warmup: Span) -> Result<Self, String> {
        check_destination(destination)?;
        Ok(SshTarget {
            destination: destination.to_string(),
            port: None,
            identity: None,
            known_hosts: None,
            options: Vec::new(),
            workdir: DEFAULT_WORKDIR.into(),
            arch: "auto".into(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            trial_timeout: default_trial_timeout(duration, warmup),
            retries: DEFAULT_RETRIES,
            reconnect_timeout: DEFAULT_RECONNECT_TIMEOUT,
            power_cycle: None,
            deploy: None,
            boot_timeout: DEFAULT_BOOT_TIMEOUT,
            expect_kernel: None,
            vm: None,
        })
    }

    /// The VM lab's board for `vm`: root on the guest, reached on
    /// 127.0.0.1 (port, key and known_hosts filled when it boots); trials
    /// given the time an emulated CPU may need under load.
    pub fn lab(vm: crate::lab::vm::VmSettings, duration: Span, warmup: Span) -> Self {
        let mut t = SshTarget::with_defaults("root@127.0.0.1", duration, warmup)
            .expect("a valid destination");
        t.trial_timeout = lab_trial_timeout(duration, warmup);
        t.vm = Some(vm);
        t
    }
}

/// Default `trial_timeout` in the VM lab: six times the trial's length and
/// two minutes (a 10 s trial took 45 s of an emulated guest's time on a
/// busy host); under TCG it is counted in QEMU's CPU time
/// ([`crate::target::TrialClock::CpuOf`]).
pub fn lab_trial_timeout(duration: Span, warmup: Span) -> Span {
    Span::from_micros(6 * (duration.as_micros() + warmup.as_micros()) + 120_000_000)
}

/// Default `[target] trial_timeout`: twice the trial's own length and a
/// minute for starting, stopping and the machine lock.
pub fn default_trial_timeout(duration: Span, warmup: Span) -> Span {
    Span::from_micros(2 * (duration.as_micros() + warmup.as_micros()) + 60_000_000)
}

/// An OpenSSH destination we pass on: not an option, no blanks or control
/// characters.
pub fn check_destination(d: &str) -> Result<(), String> {
    if d.is_empty() || d.starts_with('-') || d.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "`{d}` is not an ssh destination like root@rpi4.lab (no leading `-`, no blanks)"
        ));
    }
    Ok(())
}

/// One configuration, resolved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Its name.
    pub name: String,
    /// The kernel it expects, if any.
    pub kernel: Option<String>,
    /// Knobs to apply, in order.
    pub knobs: Vec<KnobSpec>,
    /// PM-QoS CPU DMA latency to hold, µs.
    pub pm_qos_us: Option<u32>,
    /// The player's settings.
    pub audio: Audio,
    /// The load, if any.
    pub load: Option<Load>,
}

/// Where the audio comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioSource {
    /// A file (absolute, resolved against the scenario's directory).
    File(PathBuf),
    /// A generated tone.
    Generate(ToneSpec),
}

/// The player's settings, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audio {
    /// What to play.
    pub source: AudioSource,
    /// Backend.
    pub backend: Backend,
    /// cpal's host (with the cpal backend only).
    pub host: Option<CpalHost>,
    /// Device (None = the player's default).
    pub device: Option<String>,
    /// Buffer time (None = the player's default).
    pub buffer_time: Option<Span>,
    /// Period time (None = the player's default).
    pub period_time: Option<Span>,
    /// Priority (None = inherited).
    pub priority: Option<Priority>,
    /// Affinity (None = all CPUs).
    pub cpu: Option<CpuList>,
}

/// The load, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// hackbench's parameters.
    pub hackbench: HackbenchArgs,
    /// Delay after the player started.
    pub start_delay: Span,
}

/// What must be the same for trials of two configurations to be compared
/// as one experiment (a bisect step against its baseline): the trial
/// durations, the audio, the load and the knobs. Names are not part of it
/// (scenario, configuration, file, directory), nor the description, trial
/// count, trial order, or the kernel a configuration expects — a bisection
/// runs the same experiment on other kernels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioFingerprint {
    /// How long the player plays.
    pub duration: Span,
    /// Pause before the player starts.
    pub warmup: Span,
    /// The player's settings; a WAV file as the scenario names it, relative
    /// to the scenario's directory.
    pub audio: Audio,
    /// The load.
    pub load: Option<Load>,
    /// The knobs, in order.
    pub knobs: Vec<KnobSpec>,
    /// PM-QoS CPU DMA latency held, µs.
    pub pm_qos_us: Option<u32>,
    /// The monitor beside playback (real-time threads on the audio's
    /// CPUs: part of the experiment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorSpec>,
}

impl Scenario {
    /// The fingerprint of configuration `config`; `None` when the scenario
    /// has no such configuration.
    pub fn fingerprint(&self, config: &str) -> Option<ScenarioFingerprint> {
        let c = self.configs.iter().find(|c| c.name == config)?;
        let mut audio = c.audio.clone();
        if let AudioSource::File(wav) = &mut audio.source {
            // resolve() joined it to the scenario's directory: undo that, so
            // the same checkout in another place has the same fingerprint.
            if let Some(rel) = self.path.parent().and_then(|d| wav.strip_prefix(d).ok()) {
                *wav = rel.to_path_buf();
            }
        }
        Some(ScenarioFingerprint {
            duration: self.duration,
            warmup: self.warmup,
            audio,
            load: c.load.clone(),
            knobs: c.knobs.clone(),
            pm_qos_us: c.pm_qos_us,
            monitor: self.monitor.clone(),
        })
    }
}

impl ScenarioFingerprint {
    /// The scenario keys in which `other` differs (`audio.priority`,
    /// `load.hackbench`, `knobs`…); empty when the two are the same.
    pub fn differences(&self, other: &ScenarioFingerprint) -> Vec<&'static str> {
        let (a, b) = (&self.audio, &other.audio);
        let loads = self.load.as_ref().zip(other.load.as_ref());
        [
            ("duration", self.duration != other.duration),
            ("warmup", self.warmup != other.warmup),
            ("audio.source", a.source != b.source),
            ("audio.backend", a.backend != b.backend),
            ("audio.host", a.host != b.host),
            ("audio.device", a.device != b.device),
            ("audio.buffer_time", a.buffer_time != b.buffer_time),
            ("audio.period_time", a.period_time != b.period_time),
            ("audio.priority", a.priority != b.priority),
            ("audio.cpu", a.cpu != b.cpu),
            ("load", self.load.is_some() != other.load.is_some()),
            (
                "load.hackbench",
                loads.is_some_and(|(x, y)| x.hackbench != y.hackbench),
            ),
            (
                "load.start_delay",
                loads.is_some_and(|(x, y)| x.start_delay != y.start_delay),
            ),
            ("knobs", self.knobs != other.knobs),
            (
                "pm_qos_cpu_dma_latency_us",
                self.pm_qos_us != other.pm_qos_us,
            ),
            ("monitor", self.monitor != other.monitor),
        ]
        .into_iter()
        .filter(|&(_, differs)| differs)
        .map(|(key, _)| key)
        .collect()
    }
}

/// Reads, parses and resolves a scenario; checks needing no system access.
pub fn load(path: &Path) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError(format!("{}: cannot read: {e}", path.display())))?;
    let file = parse(path, &text)?;
    let scenario = resolve(path, &file)?;
    // Gates are judged after the run; a bad one is bad input now.
    crate::gate::resolve(path, &file, &scenario)?;
    Ok((file, scenario))
}

/// Parses TOML text; errors read `FILE:LINE:COL: message`.
pub fn parse(path: &Path, text: &str) -> Result<ScenarioFile, ScenarioError> {
    toml::from_str(text).map_err(|e| {
        let place = match e.span() {
            Some(span) => {
                let (line, col) = line_col(text, span.start);
                format!("{}:{line}:{col}", path.display())
            }
            None => path.display().to_string(),
        };
        ScenarioError(format!("{place}: {}", one_line(e.message())))
    })
}

fn one_line(msg: &str) -> String {
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[line_start..].chars().count() + 1)
}

/// Names used in file names: letters, digits, `.`, `_`, `-`.
fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Fills defaults, merges overrides, and checks what needs no system access.
/// The most trials per configuration a scenario may ask for (mmtests
/// runs tens; a thousand already takes days at 10 s).
pub const MAX_TRIALS: u32 = 10_000;
/// The longest trial (`duration`), and the longest warm-up.
pub const MAX_DURATION: Span = Span::from_secs(24 * 3600);
/// The longest warm-up.
pub const MAX_WARMUP: Span = Span::from_secs(3600);
/// The most configurations in one scenario.
pub const MAX_CONFIGS: usize = 100;
/// The longest a whole run may be planned to take (trials × configurations
/// × their length): a month.
pub const MAX_RUN: Span = Span::from_secs(31 * 24 * 3600);

/// Checks the scenario's size: trials, lengths and their product within
/// bounds a real run has (values far beyond them are typos, and they would
/// make a plan and its `run.json` of hundreds of MB, or timeouts no record
/// can carry). An error is one line naming the field.
pub fn check_size(s: &Scenario) -> Result<(), (String, String)> {
    if s.trials == 0 || s.trials > MAX_TRIALS {
        return Err((
            "trials".into(),
            format!("{} is out of range: expected 1 to {MAX_TRIALS}", s.trials),
        ));
    }
    if s.duration > MAX_DURATION {
        return Err((
            "duration".into(),
            format!("{} is too long: at most {MAX_DURATION}", s.duration),
        ));
    }
    if s.warmup > MAX_WARMUP {
        return Err((
            "warmup".into(),
            format!("{} is too long: at most {MAX_WARMUP}", s.warmup),
        ));
    }
    let per_trial = s.duration.as_micros() + s.warmup.as_micros();
    let total = u128::from(per_trial) * u128::from(s.trials) * s.configs.len() as u128;
    if total > u128::from(MAX_RUN.as_micros()) {
        return Err((
            "trials".into(),
            format!(
                "{} configuration(s) × {} trials × ({} + {} warm-up) is {:.0} days of trials: \
                 expected a run of at most {} days",
                s.configs.len(),
                s.trials,
                s.duration,
                s.warmup,
                total as f64 / 86_400e6,
                MAX_RUN.as_micros() / 86_400_000_000
            ),
        ));
    }
    Ok(())
}

pub fn resolve(path: &Path, file: &ScenarioFile) -> Result<Scenario, ScenarioError> {
    let err =
        |field: &str, msg: String| ScenarioError(format!("{}: {field}: {msg}", path.display()));
    if file.configs.len() > MAX_CONFIGS {
        return Err(err(
            "config",
            format!(
                "{} [[config]] tables: expected at most {MAX_CONFIGS}",
                file.configs.len()
            ),
        ));
    }
    if !is_safe_name(&file.name) {
        return Err(err(
            "name",
            format!(
                "`{}` must be non-empty letters, digits, `.`, `_` or `-` (it names a directory)",
                file.name
            ),
        ));
    }
    let trials = file.trials.unwrap_or(DEFAULT_TRIALS);
    if trials == 0 {
        return Err(err("trials", "must be at least 1".into()));
    }
    let duration = file.duration.unwrap_or(DEFAULT_DURATION);
    if duration.as_micros() < 100_000 {
        return Err(err(
            "duration",
            format!("{duration} is too short (at least 100ms)"),
        ));
    }
    if file.configs.is_empty() {
        return Err(err(
            "config",
            "no [[config]] table: a scenario needs at least one configuration".into(),
        ));
    }
    let base_dir = path.parent().unwrap_or(Path::new("."));
    let mut configs = Vec::new();
    for (i, c) in file.configs.iter().enumerate() {
        let at = format!("config[{i}]");
        if !is_safe_name(&c.name) {
            return Err(err(
                &format!("{at}.name"),
                format!(
                    "`{}` must be non-empty letters, digits, `.`, `_` or `-` (it names files)",
                    c.name
                ),
            ));
        }
        if configs.iter().any(|d: &Config| d.name == c.name) {
            return Err(err(
                &format!("{at}.name"),
                format!("`{}` is used twice", c.name),
            ));
        }
        let at = format!("config `{}`", c.name);
        let audio = resolve_audio(&file.audio, &c.audio, base_dir, duration)
            .map_err(|m| err(&format!("{at}: audio"), m))?;
        let load = resolve_load(file.load.as_ref(), c.load.as_ref(), duration)
            .map_err(|m| err(&format!("{at}: load"), m))?;
        let knobs = collect_knobs(c).map_err(|m| err(&at, m))?;
        configs.push(Config {
            name: c.name.clone(),
            kernel: c.kernel.clone(),
            knobs,
            pm_qos_us: c.pm_qos_cpu_dma_latency_us,
            audio,
            load,
        });
    }
    let warmup = file.warmup.unwrap_or(DEFAULT_WARMUP);
    let target = match &file.target {
        Some(t) => Some(
            resolve_target(t, base_dir, duration, warmup)
                .map_err(|(k, m)| err(&format!("target.{k}"), m))?,
        ),
        None => None,
    };
    let monitor = match &file.monitor {
        Some(m) => Some(resolve_monitor(m).map_err(|(k, m)| err(&format!("monitor.{k}"), m))?),
        None => None,
    };
    let s = Scenario {
        path: path.to_path_buf(),
        name: file.name.clone(),
        description: file.description.clone(),
        trials,
        duration,
        warmup,
        order: file.order,
        configs,
        target,
        monitor,
    };
    check_size(&s).map_err(|(field, msg)| err(&field, msg))?;
    Ok(s)
}

/// `[monitor]` with its defaults (cyclictest's: FIFO 99, every 1 ms); an
/// error names the key.
fn resolve_monitor(m: &MonitorSetting) -> Result<MonitorSpec, (&'static str, String)> {
    let d = MonitorSpec::default();
    let priority = m.priority.unwrap_or(d.priority);
    if !(1..=99).contains(&priority) {
        return Err((
            "priority",
            format!("{priority} is not a SCHED_FIFO priority (1-99)"),
        ));
    }
    let us = |s: Option<Span>, default: u32| -> Option<u64> {
        Some(s.map_or(u64::from(default), Span::as_micros))
    };
    let interval = us(m.interval, d.interval_us).unwrap_or_default();
    if !(100..=1_000_000).contains(&interval) {
        return Err((
            "interval",
            format!("{interval} us must be between 100us and 1s"),
        ));
    }
    let threshold = us(m.threshold, d.threshold_us).unwrap_or_default();
    if threshold == 0 || threshold > u64::from(u32::MAX) {
        return Err(("threshold", "must be above 0 (and below an hour)".into()));
    }
    let trace_buffer_kb = m.trace_buffer_kb.unwrap_or(d.trace_buffer_kb);
    if !(64..=1_048_576).contains(&trace_buffer_kb) {
        return Err((
            "trace_buffer_kb",
            format!("{trace_buffer_kb} must be between 64 and 1048576"),
        ));
    }
    let spec = MonitorSpec {
        latency: m.latency.unwrap_or(true),
        cpus: m.cpus.clone(),
        priority,
        interval_us: interval as u32,
        threshold_us: threshold as u32,
        trace: m.trace.unwrap_or(false),
        trace_buffer_kb,
    };
    if !spec.latency && !spec.trace {
        return Err((
            "latency",
            "false with trace false: the monitor would do nothing (remove [monitor])".into(),
        ));
    }
    Ok(spec)
}

/// `[target]` with its defaults; an error names the key.
fn resolve_target(
    t: &TargetSpec,
    base_dir: &Path,
    duration: Span,
    warmup: Span,
) -> Result<SshTarget, (&'static str, String)> {
    let mut out = match (&t.ssh, &t.vm) {
        (Some(_), Some(_)) => {
            return Err((
                "vm",
                "a board is reached over ssh or booted as a vm, not both: drop one".into(),
            ))
        }
        (None, None) => {
            return Err((
                "ssh",
                "missing: name the board, e.g. ssh = \"root@rpi4.lab\", or boot one: vm = { \
                 kernel = \"bzImage\" }"
                    .into(),
            ))
        }
        (Some(ssh), None) => {
            SshTarget::with_defaults(ssh, duration, warmup).map_err(|m| ("ssh", m))?
        }
        (None, Some(vm)) => {
            for (key, given) in [
                ("port", t.port.is_some()),
                ("identity", t.identity.is_some()),
                ("known_hosts", t.known_hosts.is_some()),
            ] {
                if given {
                    return Err((
                        key,
                        "the VM lab sets it (its own port, key and host key)".into(),
                    ));
                }
            }
            let settings =
                crate::lab::vm::VmSettings::resolve(vm, base_dir).map_err(|(k, m)| {
                    (
                        match k {
                            "kernel" => "vm.kernel",
                            "modules" => "vm.modules",
                            "arch" => "vm.arch",
                            "cpus" => "vm.cpus",
                            "memory" => "vm.memory",
                            "sound" => "vm.sound",
                            "accel" => "vm.accel",
                            _ => "vm.append",
                        },
                        m,
                    )
                })?;
            SshTarget::lab(settings, duration, warmup)
        }
    };
    apply_connection_keys(t, base_dir, &mut out)?;
    apply_trial_and_boot_keys(t, duration, warmup, &mut out)?;
    Ok(out)
}

/// The keys of `[target]` about reaching the board (port, key files,
/// ssh options, workdir, arch, connect timeout) checked and set on `out`;
/// an error names the key.
fn apply_connection_keys(
    t: &TargetSpec,
    base_dir: &Path,
    out: &mut SshTarget,
) -> Result<(), (&'static str, String)> {
    if t.port == Some(0) {
        return Err(("port", "must be 1 to 65535".into()));
    }
    out.port = t.port;
    out.identity = t
        .identity
        .as_deref()
        .map(|p| host_file(p, base_dir))
        .transpose()
        .map_err(|m| ("identity", m))?;
    out.known_hosts = t
        .known_hosts
        .as_deref()
        .map(|p| host_file(p, base_dir))
        .transpose()
        .map_err(|m| ("known_hosts", m))?;
    if out.known_hosts.as_deref() == Some(Path::new("/dev/null")) {
        return Err((
            "known_hosts",
            "/dev/null would accept any host key: host keys are always checked".into(),
        ));
    }
    for o in &t.options {
        crate::target::ssh::check_option(o).map_err(|m| ("options", m))?;
    }
    out.options = t.options.clone();
    if let Some(w) = &t.workdir {
        check_workdir(w).map_err(|m| ("workdir", m))?;
        out.workdir = w.clone();
    }
    if let Some(a) = &t.arch {
        use crate::board::arch::Arch;
        if a != "auto" && Arch::from_name(a).is_none() {
            return Err(("arch", format!("`{a}` is not auto, {}", Arch::names())));
        }
        out.arch = a.clone();
    }
    if let Some(c) = t.connect_timeout {
        if !(1_000_000..=3_600_000_000).contains(&c.as_micros()) {
            return Err(("connect_timeout", format!("{c} is outside 1s..1h")));
        }
        out.connect_timeout = c;
    }
    Ok(())
}

/// The keys of `[target]` about running trials and bringing the board
/// back or up (trial timeout, retries, reconnect timeout, power cycle,
/// deploy, boot timeout, expected kernel) checked and set on `out`; an
/// error names the key.
fn apply_trial_and_boot_keys(
    t: &TargetSpec,
    duration: Span,
    warmup: Span,
    out: &mut SshTarget,
) -> Result<(), (&'static str, String)> {
    if let Some(tt) = t.trial_timeout {
        let trial = Span::from_micros(duration.as_micros() + warmup.as_micros());
        if tt <= trial {
            return Err((
                "trial_timeout",
                format!("{tt} must be longer than a trial (warmup + duration = {trial})"),
            ));
        }
        out.trial_timeout = tt;
    }
    if let Some(r) = t.retries {
        if r > 100 {
            return Err(("retries", format!("{r} is more than 100")));
        }
        out.retries = r;
    }
    if let Some(r) = t.reconnect_timeout {
        out.reconnect_timeout = r;
    }
    if let Some(c) = &t.power_cycle {
        if c.trim().is_empty() {
            return Err((
                "power_cycle",
                "is empty: a host command line like \"labgrid-client -p rpi4 power cycle\"".into(),
            ));
        }
        out.power_cycle = Some(c.clone());
    }
    if let Some(d) = &t.deploy {
        check_command(d).map_err(|m| ("deploy", m))?;
        out.deploy = Some(d.clone());
    }
    if let Some(b) = t.boot_timeout {
        if !(1_000_000..=86_400_000_000).contains(&b.as_micros()) {
            return Err(("boot_timeout", format!("{b} is outside 1s..24h")));
        }
        out.boot_timeout = b;
    }
    if let Some(k) = &t.expect_kernel {
        check_command(k).map_err(|m| ("expect_kernel", m))?;
        out.expect_kernel = Some(k.clone());
    }
    Ok(())
}

/// A file on the host named in `[target]`: `~/…` is under $HOME, a
/// relative path under the scenario's directory; it must exist.
fn host_file(p: &Path, base_dir: &Path) -> Result<PathBuf, String> {
    let path = match p.strip_prefix("~") {
        Ok(rest) => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(rest),
            None => return Err(format!("{}: `~` needs $HOME", p.display())),
        },
        Err(_) => base_dir.join(p),
    };
    if path != Path::new("/dev/null") && !path.is_file() {
        return Err(format!("{}: no such file", path.display()));
    }
    Ok(path)
}

/// A host command of `[target]` (`deploy`, `expect_kernel`), run by
/// `sh -c`: not blank.
pub fn check_command(c: &str) -> Result<(), String> {
    if c.trim().is_empty() || c.contains('\0') {
        return Err("must be a shell command, e.g. \"./deploy-to-board.sh\"".into());
    }
    Ok(())
}

/// `[target] workdir`: one path the board's shell gets quoted, so `~` is
/// not expanded there.
pub fn check_workdir(w: &str) -> Result<(), String> {
    if w.is_empty() || w.chars().any(|c| c == '\0' || c == '\n' || c == '\r') {
        return Err(format!("`{w}` must be a non-empty path on one line"));
    }
    if w.starts_with('~') {
        return Err(format!(
            "`{w}`: `~` is not expanded; a relative path is already under the login's home"
        ));
    }
    Ok(())
}

fn resolve_audio(
    base: &AudioSpec,
    over: &AudioSpec,
    base_dir: &Path,
    duration: Span,
) -> Result<Audio, String> {
    // An override naming a source replaces the base's source entirely.
    let (file, generate) = if over.file.is_some() || over.generate.is_some() {
        (&over.file, &over.generate)
    } else {
        (&base.file, &base.generate)
    };
    let source = match (file, generate) {
        (Some(_), Some(_)) => return Err("set either `file` or `generate`, not both".into()),
        (Some(f), None) => AudioSource::File(base_dir.join(f)),
        (None, Some(g)) => AudioSource::Generate(check_tone(g, duration)?),
        (None, None) => return Err(
            "no sound to play: set `file = \"x.wav\"` or `generate = { tone_hz = 440 }` in [audio]"
                .into(),
        ),
    };
    let buffer_time = over.buffer_time.or(base.buffer_time);
    let period_time = over.period_time.or(base.period_time);
    if let (Some(b), Some(p)) = (buffer_time, period_time) {
        if p >= b {
            return Err(format!(
                "period_time {p} must be shorter than buffer_time {b}"
            ));
        }
    }
    if buffer_time.is_some_and(|b| b.as_micros() == 0)
        || period_time.is_some_and(|p| p.as_micros() == 0)
    {
        return Err("buffer_time and period_time must be above 0".into());
    }
    if buffer_time.is_some_and(|b| u32::try_from(b.as_micros()).is_err()) {
        return Err("buffer_time must be shorter than 71 min".into());
    }
    let backend = over.backend.or(base.backend).unwrap_or_default();
    let host = over.host.or(base.host);
    let host = match (backend, host) {
        (Backend::Cpal, h) => Some(h.unwrap_or_default()),
        (_, None) => None,
        (b, Some(h)) => {
            return Err(format!(
                "host `{h}` needs backend = \"cpal\" (backend is `{b}`)"
            ))
        }
    };
    Ok(Audio {
        source,
        backend,
        host,
        device: over.device.clone().or_else(|| base.device.clone()),
        buffer_time,
        period_time,
        priority: over.priority.or(base.priority),
        cpu: over.cpu.clone().or_else(|| base.cpu.clone()),
    })
}

fn check_tone(g: &ToneSpec, duration: Span) -> Result<ToneSpec, String> {
    if !(8_000..=384_000).contains(&g.rate) {
        return Err(format!(
            "generate.rate {} Hz is outside 8000..384000",
            g.rate
        ));
    }
    if !(1..=32).contains(&g.channels) {
        return Err(format!("generate.channels {} is outside 1..32", g.channels));
    }
    if !(g.tone_hz > 0.0 && g.tone_hz < g.rate as f64 / 2.0) {
        return Err(format!(
            "generate.tone_hz {} Hz must be above 0 and below half the rate ({} Hz)",
            g.tone_hz,
            g.rate / 2
        ));
    }
    let seconds = g.seconds.unwrap_or(duration.as_secs_f64().ceil());
    if !(seconds > 0.0 && seconds <= 3600.0) {
        return Err(format!("generate.seconds {seconds} is outside (0, 3600]"));
    }
    Ok(ToneSpec {
        seconds: Some(seconds),
        ..g.clone()
    })
}

fn resolve_load(
    base: Option<&LoadSetting>,
    over: Option<&LoadSetting>,
    duration: Span,
) -> Result<Option<Load>, String> {
    let merged: Option<LoadSpec> = match (base, over) {
        (_, Some(LoadSetting::None(_))) => None,
        (None | Some(LoadSetting::None(_)), Some(LoadSetting::Table(t))) => Some(t.clone()),
        (Some(LoadSetting::Table(b)), Some(LoadSetting::Table(o))) => Some(merge_load(b, o)),
        (Some(LoadSetting::Table(b)), None) => Some(b.clone()),
        (None | Some(LoadSetting::None(_)), None) => None,
    };
    let Some(spec) = merged else { return Ok(None) };
    let Some(hb) = spec.hackbench else {
        return Ok(None);
    };
    let start_delay = spec.start_delay.unwrap_or_default();
    if start_delay >= duration {
        return Err(format!(
            "start_delay {start_delay} must be shorter than duration {duration}"
        ));
    }
    let d = HackbenchArgs::default();
    let h = HackbenchArgs {
        groups: hb.groups.unwrap_or(d.groups),
        fds: hb.fds.unwrap_or(d.fds),
        loops: hb.loops.unwrap_or(d.loops),
        datasize: hb.datasize.unwrap_or(d.datasize),
        mode: hb.mode.unwrap_or(HackbenchMode::Process),
        transport: hb.transport.unwrap_or(HackbenchTransport::Socket),
    };
    if h.groups == 0 || h.fds == 0 || h.loops == 0 || h.datasize == 0 {
        return Err("hackbench groups, fds, loops and datasize must be at least 1".into());
    }
    if h.groups.saturating_mul(h.fds) > 10_000 {
        return Err(format!(
            "hackbench {} groups × {} fds is more tasks than is sane",
            h.groups, h.fds
        ));
    }
    Ok(Some(Load {
        hackbench: h,
        start_delay,
    }))
}

fn merge_load(b: &LoadSpec, o: &LoadSpec) -> LoadSpec {
    let hackbench = match (&b.hackbench, &o.hackbench) {
        (Some(b), Some(o)) => Some(HackbenchSpec {
            groups: o.groups.or(b.groups),
            fds: o.fds.or(b.fds),
            loops: o.loops.or(b.loops),
            datasize: o.datasize.or(b.datasize),
            mode: o.mode.or(b.mode),
            transport: o.transport.or(b.transport),
        }),
        (b, o) => o.clone().or_else(|| b.clone()),
    };
    LoadSpec {
        hackbench,
        start_delay: o.start_delay.or(b.start_delay),
    }
}

fn collect_knobs(c: &ConfigSpec) -> Result<Vec<KnobSpec>, String> {
    let mut knobs = Vec::new();
    for (name, value) in &c.sysctl {
        let valid = !name.is_empty()
            && name.split('.').all(|p| {
                !p.is_empty()
                    && p != ".."
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            });
        if !valid {
            return Err(format!(
                "sysctl `{name}` is not a dotted sysctl name like kernel.sched_autogroup_enabled"
            ));
        }
        knobs.push(KnobSpec::Sysctl {
            name: name.clone(),
            value: value.0.clone(),
        });
    }
    for word in &c.sched_features {
        let bare = word.strip_prefix("NO_").unwrap_or(word);
        if bare.is_empty()
            || !bare
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!(
                "sched_features: `{word}` is not a feature word like NEXT_BUDDY or NO_NEXT_BUDDY"
            ));
        }
        knobs.push(KnobSpec::SchedFeature { word: word.clone() });
    }
    for (file, value) in &c.sched_debug {
        if file == "features" {
            return Err(
                "sched_debug: write features with `sched_features = [\"NO_NEXT_BUDDY\"]`".into(),
            );
        }
        if !is_safe_name(file) {
            return Err(format!(
                "sched_debug: `{file}` is not a file name under /sys/kernel/debug/sched/"
            ));
        }
        knobs.push(KnobSpec::SchedDebug {
            file: file.clone(),
            value: value.0.clone(),
        });
    }
    if let Some(g) = &c.governor {
        if !is_safe_name(g) {
            return Err(format!(
                "governor `{g}` is not a governor name like performance"
            ));
        }
        knobs.push(KnobSpec::Governor { value: g.clone() });
    }
    Ok(knobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Scenario, String> {
        let p = Path::new("s.toml");
        parse(p, text).and_then(|f| resolve(p, &f)).map_err(|e| e.0)
    }

    const MIN: &str = "name = \"x\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"a\"\n";

    #[test]
    fn minimal_scenario_gets_defaults() {
        let s = parse_str(MIN).unwrap();
        assert_eq!(s.trials, DEFAULT_TRIALS);
        assert_eq!(s.duration, DEFAULT_DURATION);
        assert_eq!(s.order, Order::Interleaved);
        assert!(s.configs[0].load.is_none());
        let AudioSource::Generate(t) = &s.configs[0].audio.source else {
            panic!()
        };
        assert_eq!((t.rate, t.channels, t.seconds), (48_000, 2, Some(10.0)));
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let e = parse_str("name = \"x\"\n\n[audio]\n  bufer_time = \"20ms\"\n").unwrap_err();
        assert!(
            e.starts_with("s.toml:4:3: unknown field `bufer_time`"),
            "{e}"
        );
    }

    #[test]
    fn overrides_merge_field_by_field() {
        let s = parse_str(
            "name = \"x\"\nduration = \"5s\"\n[audio]\ngenerate = {}\npriority = \"other\"\nbuffer_time = \"20ms\"\n\
             [load]\nhackbench = { groups = 4 }\n\
             [[config]]\nname = \"a\"\n\
             [[config]]\nname = \"b\"\nload = \"none\"\n[config.audio]\npriority = \"fifo:80\"\n\
             [[config]]\nname = \"c\"\n[config.load]\nhackbench = { loops = 7 }\n",
        )
        .unwrap();
        let [a, b, c] = &s.configs[..] else { panic!() };
        assert_eq!(a.audio.priority, Some(Priority::Other(None)));
        assert_eq!(b.audio.priority, Some(Priority::Fifo(80)));
        assert_eq!(b.audio.buffer_time, Some(Span::from_micros(20_000)));
        assert_eq!(a.load.as_ref().unwrap().hackbench.groups, 4);
        assert!(b.load.is_none());
        let hc = &c.load.as_ref().unwrap().hackbench;
        assert_eq!((hc.groups, hc.loops, hc.fds), (4, 7, 20));
    }

    #[test]
    fn knobs_keep_file_order_by_kind() {
        let s = parse_str(&format!(
            "{MIN}sysctl = {{ \"kernel.sched_autogroup_enabled\" = 0 }}\nsched_features = [\"NO_NEXT_BUDDY\"]\ngovernor = \"performance\"\n"
        ))
        .unwrap();
        assert_eq!(
            s.configs[0].knobs,
            vec![
                KnobSpec::Sysctl {
                    name: "kernel.sched_autogroup_enabled".into(),
                    value: "0".into()
                },
                KnobSpec::SchedFeature {
                    word: "NO_NEXT_BUDDY".into()
                },
                KnobSpec::Governor {
                    value: "performance".into()
                },
            ]
        );
    }

    /// A scenario with a bit of everything the fingerprint covers.
    const FULL: &str = "name = \"x\"\ndescription = \"d\"\ntrials = 4\nduration = \"5s\"\nwarmup = \"1s\"\n\
        [audio]\ngenerate = { tone_hz = 440, seconds = 10 }\nbackend = \"virtual\"\nbuffer_time = \"20ms\"\npriority = \"fifo:80\"\n\
        [load]\nhackbench = { groups = 4 }\n\
        [[config]]\nname = \"a\"\nsysctl = { \"kernel.sched_autogroup_enabled\" = 0 }\n";

    fn fingerprint_of(text: &str) -> ScenarioFingerprint {
        let s = parse_str(text).unwrap();
        s.fingerprint(&s.configs[0].name).unwrap()
    }

    #[test]
    fn fingerprint_ignores_names_counts_and_order() {
        let base = fingerprint_of(FULL);
        let renamed = FULL
            .replace("name = \"x\"", "name = \"y\"")
            .replace("name = \"a\"", "name = \"b\"\nkernel = \"6.6.0\"")
            .replace("description = \"d\"", "description = \"other words\"")
            .replace("trials = 4", "trials = 9\norder = \"blocked\"");
        assert_eq!(fingerprint_of(&renamed), base);
        // Another file, elsewhere, same meaning (1000ms is 1s).
        let p = Path::new("/elsewhere/other-name.toml");
        let moved = resolve(p, &parse(p, &FULL.replace("\"1s\"", "\"1000ms\"")).unwrap()).unwrap();
        assert_eq!(moved.fingerprint("a").unwrap(), base);
        assert!(moved.fingerprint("nope").is_none());
    }

    #[test]
    fn fingerprint_names_each_difference() {
        let base = fingerprint_of(FULL);
        for (edit, key) in [
            (("duration = \"5s\"", "duration = \"6s\""), "duration"),
            (("warmup = \"1s\"", "warmup = \"2s\""), "warmup"),
            (("tone_hz = 440", "tone_hz = 441"), "audio.source"),
            (
                ("buffer_time = \"20ms\"", "buffer_time = \"40ms\""),
                "audio.buffer_time",
            ),
            (
                ("priority = \"fifo:80\"", "priority = \"other\""),
                "audio.priority",
            ),
            (
                ("backend = \"virtual\"", "backend = \"alsa\""),
                "audio.backend",
            ),
            (
                ("[load]\n", "[load]\nstart_delay = \"1s\"\n"),
                "load.start_delay",
            ),
            (("groups = 4", "groups = 5"), "load.hackbench"),
            (("hackbench = { groups = 4 }", ""), "load"),
            (("= 0 }", "= 1 }"), "knobs"),
            (
                (
                    "name = \"a\"",
                    "name = \"a\"\npm_qos_cpu_dma_latency_us = 0",
                ),
                "pm_qos_cpu_dma_latency_us",
            ),
        ] {
            let other = fingerprint_of(&FULL.replace(edit.0, edit.1));
            assert_eq!(base.differences(&other), vec![key], "{edit:?}");
            assert_eq!(other.differences(&base), vec![key], "{edit:?}");
        }
        assert!(base.differences(&base).is_empty());
    }

    #[test]
    fn fingerprint_of_a_wav_is_relative_to_the_scenario() {
        let text = "name = \"x\"\n[audio]\nfile = \"wav/a.wav\"\n[[config]]\nname = \"a\"\n";
        let at = |p: &str| {
            let p = Path::new(p);
            resolve(p, &parse(p, text).unwrap())
                .unwrap()
                .fingerprint("a")
                .unwrap()
        };
        let here = at("/home/me/bench/s.toml");
        assert_eq!(here, at("/srv/ci/checkout/s.toml"));
        assert_eq!(here, at("s.toml"));
        assert_eq!(here.audio.source, AudioSource::File("wav/a.wav".into()));
    }

    #[test]
    fn resolved_scenario_reads_back_from_run_json_with_the_same_fingerprint() {
        let s = parse_str(FULL).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: Scenario = serde_json::from_str(&json).unwrap();
        assert_eq!(back.fingerprint("a"), s.fingerprint("a"));
    }
    #[test]
    fn target_gets_its_defaults_and_stays_out_of_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lab_key"), "k").unwrap();
        let p = dir.path().join("s.toml");
        let text = format!(
            "{MIN}[target]\nssh = \"root@rpi4.lab\"\nidentity = \"lab_key\"\n\
             options = [\"ProxyJump=gw\"]\n"
        );
        let s = resolve(&p, &parse(&p, &text).unwrap()).unwrap();
        let t = s.target.clone().unwrap();
        assert_eq!(t.destination, "root@rpi4.lab");
        assert_eq!(
            t.identity.as_deref(),
            Some(dir.path().join("lab_key").as_path())
        );
        assert_eq!(
            (t.workdir.as_str(), t.arch.as_str()),
            (DEFAULT_WORKDIR, "auto")
        );
        assert_eq!(
            (t.retries, t.connect_timeout),
            (DEFAULT_RETRIES, DEFAULT_CONNECT_TIMEOUT)
        );
        // 2 × (10 s + 1 s) + 60 s.
        assert_eq!(t.trial_timeout, Span::from_secs(82));
        assert_eq!(t.options, ["ProxyJump=gw"]);
        assert_eq!(t.power_cycle, None);
        let here = parse_str(MIN).unwrap();
        assert_eq!(s.fingerprint("a"), here.fingerprint("a"));
        let back: Scenario = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.target, s.target);
    }

    #[test]
    fn target_errors_name_the_key() {
        for (table, want) in [
            (
                "ssh = \"b\"\nport = 0",
                "s.toml: target.port: must be 1 to 65535",
            ),
            (
                "ssh = \"b\"\nidentity = \"/no/such/key\"",
                "target.identity: /no/such/key: no such file",
            ),
            (
                "ssh = \"b\"\nworkdir = \"~/x\"",
                "target.workdir: `~/x`: `~` is not expanded",
            ),
            (
                "ssh = \"b\"\noptions = [\"ControlPath=/x\"]",
                "xrunbench sets ControlPath itself",
            ),
            (
                "ssh = \"b c\"",
                "target.ssh: `b c` is not an ssh destination",
            ),
            (
                "ssh = \"b\"\nconnect_timeout = \"10ms\"",
                "target.connect_timeout: 10ms is outside 1s..1h",
            ),
            (
                "ssh = \"b\"\npower_cycle = \" \"",
                "target.power_cycle: is empty",
            ),
            (
                "ssh = \"b\"\ndeploy = \" \"",
                "target.deploy: must be a shell command",
            ),
            (
                "ssh = \"b\"\nboot_timeout = \"0s\"",
                "target.boot_timeout: 0ms is outside 1s..24h",
            ),
            (
                "ssh = \"b\"\nexpect_kernel = \"\"",
                "target.expect_kernel: must be a shell command",
            ),
        ] {
            let e = parse_str(&format!("{MIN}[target]\n{table}\n")).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn monitor_table_resolves_to_cyclictests_defaults_and_errors_name_the_key() {
        let s = parse_str(&format!("{MIN}[monitor]\ntrace = true\n")).unwrap();
        let m = s.monitor.clone().unwrap();
        assert_eq!(
            (m.priority, m.interval_us, m.threshold_us),
            (99, 1000, 1000)
        );
        assert!(m.latency && m.trace);
        let s2 = parse_str(&format!(
            "{MIN}[monitor]\ncpus = \"1\"\ninterval = \"500us\"\nthreshold = \"2ms\"\n"
        ))
        .unwrap();
        let m2 = s2.monitor.clone().unwrap();
        assert_eq!((m2.interval_us, m2.threshold_us), (500, 2000));
        assert_eq!(m2.cpus.unwrap().cpus(), &[1]);
        assert!(
            s.fingerprint("a")
                .unwrap()
                .differences(&s2.fingerprint("a").unwrap())
                == ["monitor"]
        );
        assert!(parse_str(MIN).unwrap().monitor.is_none());
        for (table, want) in [
            (
                "priority = 0",
                "s.toml: monitor.priority: 0 is not a SCHED_FIFO priority",
            ),
            (
                "interval = \"10us\"",
                "monitor.interval: 10 us must be between",
            ),
            ("latency = false", "monitor.latency: false with trace false"),
            (
                "trace_buffer_kb = 1",
                "monitor.trace_buffer_kb: 1 must be between",
            ),
            ("bogus = 1", "unknown field `bogus`"),
        ] {
            let e = parse_str(&format!("{MIN}[monitor]\n{table}\n")).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
