//! The resolved scenario the runner executes: every configuration with its
//! `[audio]` and `[load]` overrides merged and every default filled in, and
//! the limits a scenario must keep.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use xrunbench_schema::monitor::MonitorSpec;
use xrunbench_schema::trial::{HackbenchArgs, HackbenchMode, HackbenchTransport, ToneSpec};
use xrunbench_schema::{Backend, CpalHost, CpuList, Priority};

use crate::error::ScenarioError;
use crate::file::{
    AudioSpec, ConfigSpec, ConfigVmSpec, HackbenchSpec, LoadSetting, LoadSpec, MonitorSetting,
    Order, ScenarioFile, TargetSpec,
};
use crate::target::{check_trial_timeout, resolve_lava, resolve_target, LavaTarget, SshTarget};
use crate::units::Span;
use xrunbench_schema::trial::KnobSpec;

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
    /// `[target] trial_timeout` alone: this machine's trial timeout
    /// (`None`: [`crate::target::default_trial_timeout`]); a board's is its target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_trial_timeout: Option<Span>,
    /// `[target] lava` resolved: the trials run as the lab's jobs. Not
    /// recorded here: a lab run's `run.json` target names its jobs and
    /// devices.
    #[serde(skip)]
    pub lava: Option<LavaTarget>,
    /// `[monitor]` resolved; `None`: no monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorSpec>,
}

/// One configuration, resolved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Its name.
    pub name: String,
    /// The kernel it expects, if any.
    pub kernel: Option<String>,
    /// Kernel command-line parameters it boots with (the VM lab), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// A kernel of its own (the VM lab), paths absolute, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<ConfigVmSpec>,
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
    /// Kernel command-line parameters the configuration boots with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// Its own kernel, as the scenario names it (relative to its
    /// directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<ConfigVmSpec>,
}

impl Config {
    /// The guest this configuration boots on the run's `target` guest: its
    /// own kernel (and modules) if it names one, its command-line
    /// parameters after `append`; the rest as `target`'s.
    pub fn vm_of(
        &self,
        target: &xrunbench_lab::lab::vm::VmSettings,
    ) -> xrunbench_lab::lab::vm::VmSettings {
        let c = self;
        let mut vm = target.clone();
        if let Some(kernel) = c.vm.as_ref().and_then(|own| own.kernel.clone()) {
            vm.kernel = kernel;
            vm.modules = c.vm.as_ref().and_then(|own| own.modules.clone());
        }
        if let Some(cmdline) = &c.cmdline {
            if !vm.append.is_empty() {
                vm.append.push(' ');
            }
            vm.append.push_str(cmdline);
        }
        vm
    }
}

/// The VM lab's guests a run of `s` needs: one per distinct kernel and
/// command line its configurations boot (`vm` for those that name
/// neither), and which one each configuration runs on.
pub fn guests_of(
    s: &Scenario,
    vm: &xrunbench_lab::lab::vm::VmSettings,
) -> (
    Vec<xrunbench_lab::lab::vm::VmSettings>,
    std::collections::BTreeMap<String, usize>,
) {
    let mut guests: Vec<xrunbench_lab::lab::vm::VmSettings> = Vec::new();
    let mut of_config = std::collections::BTreeMap::new();
    for c in &s.configs {
        let g = c.vm_of(vm);
        let i = match guests.iter().position(|x| *x == g) {
            Some(i) => i,
            None => {
                guests.push(g);
                guests.len() - 1
            }
        };
        of_config.insert(c.name.clone(), i);
    }
    if guests.is_empty() {
        guests.push(vm.clone());
    }
    (guests, of_config)
}

impl Scenario {
    /// The lab a command runs on: the command line's `--lava …` (`cli`),
    /// else the scenario's `[target] lava`; `None`: no lab.
    pub fn lava_lab(
        &self,
        cli: &crate::lava::LavaTargetArgs,
    ) -> Option<crate::lava::LavaTargetArgs> {
        match &cli.lava {
            Some(_) => Some(cli.clone()),
            None => self.lava.as_ref().map(|l| l.lab.clone()),
        }
    }

    /// Where its trials run, as far as what a run installs goes.
    pub fn runs_on(&self) -> xrunbench_lab::deps::RunsOn {
        match &self.target {
            None => xrunbench_lab::deps::RunsOn::ThisMachine,
            Some(t) if t.vm.is_some() => xrunbench_lab::deps::RunsOn::LabGuest,
            Some(_) => xrunbench_lab::deps::RunsOn::Board,
        }
    }

    /// A scenario with no configurations, only defaults and `target`: what
    /// `restore`, `board check` and `--target` alone work from. `path`
    /// names where it came from in messages.
    pub fn without_configs(path: &str, target: Option<SshTarget>) -> Scenario {
        Scenario {
            path: PathBuf::from(path),
            name: String::new(),
            description: String::new(),
            trials: 1,
            duration: DEFAULT_DURATION,
            warmup: DEFAULT_WARMUP,
            order: Order::Interleaved,
            configs: Vec::new(),
            target,
            local_trial_timeout: None,
            lava: None,
            monitor: None,
        }
    }

    /// The fingerprint of configuration `config`; `None` when the scenario
    /// has no such configuration.
    pub fn fingerprint(&self, config: &str) -> Option<ScenarioFingerprint> {
        let c = self.configs.iter().find(|c| c.name == config)?;
        // resolve() joined paths to the scenario's directory: undo that, so
        // the same checkout in another place has the same fingerprint.
        let relative = |p: &mut PathBuf| {
            if let Some(rel) = self.path.parent().and_then(|d| p.strip_prefix(d).ok()) {
                *p = rel.to_path_buf();
            }
        };
        let mut audio = c.audio.clone();
        if let AudioSource::File(wav) = &mut audio.source {
            relative(wav);
        }
        let mut vm = c.vm.clone();
        if let Some(vm) = &mut vm {
            if vm.debian.is_some() {
                // Named by version: where the lab's cache keeps it is no
                // part of the experiment.
                vm.kernel = None;
                vm.modules = None;
            }
            for p in vm.kernel.iter_mut().chain(vm.modules.iter_mut()) {
                relative(p);
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
            cmdline: c.cmdline.clone(),
            vm,
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
            ("cmdline", self.cmdline != other.cmdline),
            ("vm", self.vm != other.vm),
        ]
        .into_iter()
        .filter(|&(_, differs)| differs)
        .map(|(key, _)| key)
        .collect()
    }
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

/// Resolves a parsed scenario: defaults filled, overrides merged, every
/// value checked; an error names the file and the field.
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
        let config = resolve_config(file, c, base_dir, duration).map_err(|(field, m)| {
            let at = format!("config `{}`", c.name);
            match field.as_str() {
                "" => err(&at, m),
                f => err(&format!("{at}: {f}"), m),
            }
        })?;
        configs.push(config);
    }
    let warmup = file.warmup.unwrap_or(DEFAULT_WARMUP);
    let (target, lava) = resolve_place(file.target.as_ref(), base_dir, duration, warmup)
        .map_err(|(k, m)| err(&format!("target.{k}"), m))?;
    let local_trial_timeout = local_trial_timeout(file.target.as_ref(), duration, warmup)
        .map_err(|(k, m)| err(&format!("target.{k}"), m))?;
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
        local_trial_timeout,
        lava,
        monitor,
    };
    check_size(&s).map_err(|(field, msg)| err(&field, msg))?;
    Ok(s)
}

/// One `[[config]]` resolved over the scenario's `[audio]` and `[load]`;
/// an error is (where in the configuration, one line).
fn resolve_config(
    file: &ScenarioFile,
    c: &ConfigSpec,
    base_dir: &Path,
    duration: Span,
) -> Result<Config, (String, String)> {
    fn at(field: &'static str) -> impl Fn(String) -> (String, String) {
        move |m| (field.to_string(), m)
    }
    let audio = resolve_audio(&file.audio, &c.audio, base_dir, duration).map_err(at("audio"))?;
    let load = resolve_load(file.load.as_ref(), c.load.as_ref(), duration).map_err(at("load"))?;
    let knobs = collect_knobs(c).map_err(|m| (String::new(), m))?;
    let cmdline = c
        .cmdline
        .as_deref()
        .map(check_cmdline)
        .transpose()
        .map_err(at("cmdline"))?;
    let vm =
        c.vm.as_ref()
            .map(|v| resolve_config_vm(v, base_dir))
            .transpose()
            .map_err(|(k, m)| (format!("vm.{k}"), m))?;
    Ok(Config {
        name: c.name.clone(),
        kernel: c.kernel.clone(),
        cmdline,
        vm,
        knobs,
        pm_qos_us: c.pm_qos_cpu_dma_latency_us,
        audio,
        load,
    })
}

/// The most a configuration's `cmdline` may hold (the kernel's own limit
/// is 2048 bytes on x86, with the lab's console and init on it too).
const MAX_CMDLINE: usize = 1024;

/// A configuration's kernel command-line parameters, checked: one line of
/// printable words, none that the lab itself sets. The words, joined by
/// one space.
fn check_cmdline(text: &str) -> Result<String, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return Err("empty: name a parameter (`preempt=full`) or leave the key out".into());
    }
    if text.len() > MAX_CMDLINE {
        return Err(format!(
            "{} bytes: expected at most {MAX_CMDLINE}",
            text.len()
        ));
    }
    if let Some(c) = text.chars().find(|c| !c.is_ascii_graphic() && *c != ' ') {
        return Err(format!(
            "{:?} holds {c:?}: expected printable ASCII words",
            text
        ));
    }
    // The lab's guest needs these as it sets them: its console (the boot
    // is watched there), its init and its root.
    if let Some(w) = words.iter().find(|w| {
        ["console=", "init=", "rdinit=", "root="]
            .iter()
            .any(|k| w.starts_with(k))
    }) {
        return Err(format!(
            "`{w}`: the lab sets the console, init and root of its guests itself"
        ));
    }
    Ok(words.join(" "))
}

/// `[[config]] vm` resolved against the scenario's directory (a Debian
/// version fetched into the lab's cache): `kernel` and `modules` filled
/// and absolute; an error is (key, one line).
fn resolve_config_vm(
    v: &ConfigVmSpec,
    base_dir: &Path,
) -> Result<ConfigVmSpec, (&'static str, String)> {
    let spec = xrunbench_lab::lab::vm::VmSpec {
        kernel: v.kernel.clone(),
        modules: v.modules.clone(),
        debian: v.debian.clone(),
        rt: v.rt,
        ..Default::default()
    };
    let arch = xrunbench_lab::arch::Arch::host().ok_or((
        "kernel",
        "this machine's architecture is not a lab one".to_string(),
    ))?;
    let (kernel, modules) = xrunbench_lab::lab::vm::kernel_of(&spec, arch, base_dir)?;
    Ok(ConfigVmSpec {
        kernel: Some(kernel),
        modules,
        debian: v.debian.clone(),
        rt: v.rt,
    })
}

/// A scenario's board and lab (at most one of them).
type Place = (Option<SshTarget>, Option<LavaTarget>);

/// Where the trials run: a board (`[target] ssh` or `vm`), a LAVA lab
/// (`[target] lava`), or this machine (neither); an error names the key.
fn resolve_place(
    t: Option<&TargetSpec>,
    base_dir: &Path,
    duration: Span,
    warmup: Span,
) -> Result<Place, (&'static str, String)> {
    Ok(match t {
        Some(t) if is_this_machine(t) => (None, None),
        Some(t) if t.lava.is_some() => (None, Some(resolve_lava(t, base_dir)?)),
        Some(t) => (Some(resolve_target(t, base_dir, duration, warmup)?), None),
        None => (None, None),
    })
}

/// This machine's `trial_timeout`, when `[target]` gives only that
/// (see [`is_this_machine`]); an error names the key.
fn local_trial_timeout(
    t: Option<&TargetSpec>,
    duration: Span,
    warmup: Span,
) -> Result<Option<Span>, (&'static str, String)> {
    t.filter(|t| is_this_machine(t))
        .and_then(|t| t.trial_timeout)
        .map(|tt| check_trial_timeout(tt, duration, warmup))
        .transpose()
}

/// Whether `[target]` names no board nor lab, only this machine's
/// `trial_timeout`: any other key wants a board (and is refused as one
/// without `ssh`).
fn is_this_machine(t: &TargetSpec) -> bool {
    t.trial_timeout.is_some()
        && *t
            == TargetSpec {
                trial_timeout: t.trial_timeout,
                ..TargetSpec::default()
            }
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
