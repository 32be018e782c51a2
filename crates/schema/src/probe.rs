//! `xrunbench.probe/1` (what a machine under test offers, printed by
//! `xrun-trial probe`) and `xrunbench.check/1` (what `xrun-trial check`
//! found when it tried a set of trial specs there).
//!
//! Validation of a scenario runs against the machine that will run it: the
//! runner reads these documents from the target (this machine, a board over
//! SSH) instead of looking at the host it runs on.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::trial::MachineFingerprint;

/// Schema identifier of [`Probe`].
pub const PROBE_SCHEMA: &str = "xrunbench.probe/1";
/// Schema identifier of [`CheckReport`].
pub const CHECK_SCHEMA: &str = "xrunbench.check/1";

/// What the machine offers for each kind of knob, and what else a trial
/// needs there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Always [`PROBE_SCHEMA`].
    pub schema: String,
    /// Version of `xrun-trial` that probed.
    pub version: String,
    /// The machine: kernel, architecture (`machine.arch`), CPUs, current
    /// governors, boot id, every `kernel.sched_*` sysctl with its value.
    pub machine: MachineFingerprint,
    /// CPUs `xrun-trial` (and so the player it starts) may run on.
    pub allowed_cpus: Vec<usize>,
    /// Whether a real-time priority can be set, and up to which.
    pub realtime: RealtimeProbe,
    /// The scheduler's debugfs directory.
    pub sched_debug: SchedDebugProbe,
    /// cpufreq governors the machine offers (the current ones are in
    /// `machine.governors`).
    pub available_governors: Vec<String>,
    /// The PM-QoS CPU DMA latency device.
    pub pm_qos: PmQosProbe,
    /// ALSA cards and playback devices (from /proc/asound).
    pub sound: SoundProbe,
    /// The tmpfs generated tones are written to.
    pub tmpfs: TmpfsProbe,
    /// The board binaries beside `xrun-trial`.
    pub binaries: BinariesProbe,
    /// Where `xrun-trial` journals knobs before changing them.
    pub journal_dir: PathBuf,
}

/// Real-time scheduling rights of the user `xrun-trial` runs as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RealtimeProbe {
    /// Whether any real-time priority may be set.
    pub allowed: bool,
    /// The highest SCHED_FIFO/SCHED_RR priority allowed (0: none).
    pub max_priority: u8,
    /// Why: `root`, or `RLIMIT_RTPRIO 50`.
    pub reason: String,
}

/// `/sys/kernel/debug/sched`: where `sched_features` and `sched_debug`
/// knobs live.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedDebugProbe {
    /// The directory.
    pub dir: PathBuf,
    /// Whether it exists (debugfs mounted, CONFIG_SCHED_DEBUG).
    pub present: bool,
    /// Whether its `features` file opens for writing.
    pub writable: bool,
    /// The words of the `features` file (`NEXT_BUDDY`, `NO_LAST_BUDDY`…).
    pub features: Vec<String>,
}

/// `/dev/cpu_dma_latency`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PmQosProbe {
    /// The device.
    pub device: PathBuf,
    /// Whether it exists.
    pub present: bool,
    /// Whether it opens for writing.
    pub writable: bool,
}

/// ALSA as /proc/asound shows it (xrun-trial does not link ALSA).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoundProbe {
    /// /proc/asound/cards, one line per card (`0 [PCH]: HDA-Intel - HDA Intel PCH`).
    pub cards: Vec<String>,
    /// Every PCM with a playback stream.
    pub playback: Vec<AlsaPcm>,
}

/// One ALSA PCM device (`hw:CARD,DEVICE`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlsaPcm {
    /// Card number.
    pub card: u32,
    /// Device number on the card.
    pub device: u32,
    /// The device's id.
    pub id: String,
    /// The device's name.
    pub name: String,
}

/// The tmpfs a generated tone goes to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmpfsProbe {
    /// The directory (`/dev/shm`).
    pub dir: PathBuf,
    /// Bytes free there for an unprivileged writer (`None`: no such tmpfs).
    pub free_bytes: Option<u64>,
}

/// Which board binaries `xrun-trial` finds beside itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BinariesProbe {
    /// Where it looks (its own directory, or `--bin-dir`).
    pub dir: PathBuf,
    /// `xrun-player` is there and executable.
    pub player: bool,
    /// `xrun-hackbench` is there and executable.
    pub hackbench: bool,
}

/// What `xrun-trial check` found for a set of trial specs. Nothing was
/// left changed: every knob it tried was restored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckReport {
    /// Always [`CHECK_SCHEMA`].
    pub schema: String,
    /// Every problem, one line each; empty: the specs can run here.
    pub problems: Vec<CheckProblem>,
    /// Every knob file the specs write, with the value found there.
    pub knobs: Vec<CheckedKnob>,
}

/// One reason a spec cannot run on this machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckProblem {
    /// The configuration (`trial.config` of the spec).
    pub config: String,
    /// The spec's field the problem is about (`player.cpu`, `audio.file`,
    /// `pm_qos_us`), so a runner can name its own field instead; `None`
    /// for knobs (the message names the knob).
    #[serde(default)]
    pub field: Option<String>,
    /// One line: the knob or value, and what is wrong.
    pub message: String,
}

/// One knob file a spec writes, as `check` saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckedKnob {
    /// The configuration.
    pub config: String,
    /// What it is, for people: `sysctl kernel.sched_rr_timeslice_ms`.
    pub what: String,
    /// The file.
    pub path: PathBuf,
    /// The value found (what each trial restores).
    pub found: String,
    /// The value the spec asks for.
    pub requested: String,
    /// What the file read after writing `requested`, before it was
    /// restored (`None`: not tried, e.g. `check --read-only`).
    #[serde(default)]
    pub read_back: Option<String>,
}
