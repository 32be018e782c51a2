//! The scenario file as the user writes it: TOML, every table closed with
//! `deny_unknown_fields`, and its parser, whose errors name the line.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use xrunbench_schema::trial::{HackbenchMode, HackbenchTransport, ToneSpec};
use xrunbench_schema::{Backend, CpalHost, CpuList, Priority};

use crate::error::ScenarioError;
use crate::units::Span;

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
    /// (see `xrunbench_analysis::gate`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub gate: super::gate::GateTable,
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
    pub vm: Option<xrunbench_lab::lab::vm::VmSpec>,
    /// A LAVA lab: `{ url = "https://lava.example.org/", job =
    /// "board-job.yaml", devices = 2, token_file = "~/.lava-token" }`; the
    /// trials run as its jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lava: Option<LavaSpec>,
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

/// `[target] lava`: the trials run as jobs of a LAVA lab (`run`, `bisect`,
/// `bisect-run`; `--lava` on the command line replaces the whole table).
/// The API token is never written here: it would be copied into every run
/// directory with the scenario. It comes from `token_file`, else
/// `$XRUNBENCH_LAVA_TOKEN`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LavaSpec {
    /// The server (`https://lava.example.org/`).
    pub url: String,
    /// The lab's part of every job (YAML: device type, tags, deploy,
    /// boot), relative to the scenario file or `~/…`.
    pub job: PathBuf,
    /// How many jobs (devices) the trials are shared among, at once
    /// (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<usize>,
    /// A file holding the API token, relative to the scenario file or
    /// `~/…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// A token written into the scenario: accepted by the parser only to
    /// be refused with the reason (and never kept or written back).
    #[serde(default, skip_serializing)]
    pub token: Option<serde::de::IgnoredAny>,
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
    /// Kernel command-line parameters this configuration boots with
    /// (`preempt=full`, `threadirqs`), after `[target] vm`'s `append`: in
    /// the VM lab, its own guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// A kernel of its own in the VM lab (`{ kernel = "…", modules = "…" }`
    /// or `{ debian = "6.12" }`), in place of `[target] vm`'s: its own
    /// guest, in the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<ConfigVmSpec>,
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

/// `[[config]] vm`: the kernel a configuration boots in the VM lab, the
/// rest of the guest as `[target] vm` says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigVmSpec {
    /// The kernel image, relative to the scenario file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<PathBuf>,
    /// Its modules' tree (default: beside a Debian kernel from `lab
    /// kernel`, else none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<PathBuf>,
    /// Or Debian's kernel of this version (`"6.12"`), as in `[target] vm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debian: Option<String>,
    /// With `debian`: its PREEMPT_RT flavour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt: Option<bool>,
}

fn is_default_audio(a: &AudioSpec) -> bool {
    *a == AudioSpec::default()
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
