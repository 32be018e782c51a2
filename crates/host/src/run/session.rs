//! The run session `run` and `bisect` share: the target (this machine, or
//! a board over SSH: connected, its architecture found), the board
//! binaries built for it (the player with the features the scenario's cpal
//! hosts need) and put there, journals a killed trial left replayed there,
//! the scenario validated against the target (all problems at once,
//! nothing touched), the audio staged; then a run directory with its
//! `run.json`, and each planned trial run as `xrun-trial run -` on the
//! target and kept on disk — a trial lost to the link is run again after
//! the target recovered, up to its `retries`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use xrunbench_schema::doc::one_line;

use anyhow::Result;
use xrunbench_schema::probe::{CheckedKnob, Probe};
use xrunbench_schema::trial::{AudioInput, MachineFingerprint, TrialOutcome, TrialRecord};
use xrunbench_schema::Backend;

use crate::target::{binaries, Guests, Local, Ssh, Target, TrialRun};
use xrunbench_analysis::results::{LostTrial, RunManifest, RunWriter, RunnerInfo, RUN_SCHEMA};
use xrunbench_lab::lab::vm::VmSettings;
use xrunbench_lab::signals;
use xrunbench_scenario::plan::PlannedTrial;
use xrunbench_scenario::{guests_of, AudioSource, Scenario, ScenarioFile, SshTarget};
use xrunbench_scenario::{spec, validate};

/// Why a session could not be opened.
#[derive(Debug)]
pub enum SetupError {
    /// The scenario or the options do not fit this target: one line each
    /// (exit 2; nothing was touched).
    BadInput(Vec<String>),
    /// SIGINT/SIGTERM arrived (the signal).
    Interrupted(i32),
    /// Anything else (a build failed, the target did not answer).
    Failed(anyhow::Error),
}

impl SetupError {
    fn from_error(e: anyhow::Error) -> SetupError {
        match signals::stop_requested() {
            Some(sig) => SetupError::Interrupted(sig),
            None => SetupError::Failed(e),
        }
    }
}

/// What opening a session needs.
pub struct SessionArgs<'a> {
    /// The scenario as written.
    pub file: ScenarioFile,
    /// The scenario resolved (options applied).
    pub scenario: Scenario,
    /// `--only`: the configurations to run (empty: all).
    pub only: &'a [String],
    /// `--bin-dir`: prebuilt board binaries (else they are built).
    pub bin_dir: Option<PathBuf>,
    /// A dry run: validation reads only (no knob written and read back, no
    /// journal replayed).
    pub read_only: bool,
}

/// A validated scenario on a target, ready to run trials.
pub struct Session {
    /// The scenario as written.
    pub file: ScenarioFile,
    /// The scenario narrowed to what runs on this target.
    pub scenario: Scenario,
    /// One line per configuration skipped for its kernel.
    pub skipped: Vec<String>,
    /// Where the trials run.
    pub target: Box<dyn Target>,
    /// The target's machine (the first guest's, when configurations boot
    /// guests of their own).
    pub machine: MachineFingerprint,
    /// Each configuration's machine, in configuration order: the same as
    /// `machine` unless configurations boot guests of their own.
    pub machines: Vec<MachineFingerprint>,
    /// Each configuration's sound, as the target reads it.
    pub audio: Vec<AudioInput>,
    /// Every knob file the configurations write, with the value found.
    pub knobs: Vec<CheckedKnob>,
}

/// The cargo features `xrun-player` needs for the scenario's cpal hosts.
pub fn player_features(s: &Scenario) -> Vec<String> {
    let mut f: Vec<String> = s
        .configs
        .iter()
        .filter(|c| c.audio.backend == Backend::Cpal)
        .filter_map(|c| c.audio.host.and_then(|h| h.player_feature()))
        .map(|f| format!("xrunbench-player/{f}"))
        .collect();
    f.sort();
    f.dedup();
    f
}

/// The scenario's target, with its board binaries in place: this machine
/// (`--bin-dir`, or built here), or the board of `[target]`: connected,
/// the binaries for its architecture put in its workdir.
pub fn open_target(s: &Scenario, bin_dir: Option<PathBuf>) -> Result<Box<dyn Target>> {
    let features = player_features(s);
    let Some(t) = &s.target else {
        let dir = match bin_dir {
            Some(d) => d,
            None => binaries::host_build(&features)?,
        };
        let timeout = s
            .local_trial_timeout
            .unwrap_or_else(|| xrunbench_scenario::default_trial_timeout(s.duration, s.warmup));
        return Ok(Box::new(Local::new(&dir, timeout.to_std())?));
    };
    if let Some(vm) = &t.vm {
        // The guest's libraries are those of the binaries it will run:
        // they come first, then the guest, then the connection to it.
        let dir = binaries::for_arch(&vm.arch, bin_dir, &features)?;
        let (guests, of_config) = guests_of(s, vm);
        if let [only] = &guests[..] {
            return Ok(Box::new(lab_board(t, only, &dir)?));
        }
        let mut boards = Vec::new();
        for (i, g) in guests.iter().enumerate() {
            xrunbench_lab::say!(": guest {} of {}", i + 1, guests.len());
            let mut board = lab_board(t, g, &dir)?;
            if i > 0 {
                // The first runs on; the others wait frozen.
                board.pause()?;
            }
            boards.push(board);
        }
        return Ok(Box::new(Guests::new(boards, of_config)));
    }
    xrunbench_lab::say!(": connecting to {}", t.destination);
    let mut ssh = Ssh::connect(t)?;
    let arch = ssh.board_arch()?;
    let dir = binaries::for_arch(&arch, bin_dir, &features)?;
    deploy(&mut ssh, &dir)?;
    Ok(Box::new(ssh))
}

/// Guest `vm` booted for the board `t`, connected, the binaries of `dir`
/// on it.
fn lab_board(t: &SshTarget, vm: &VmSettings, dir: &Path) -> Result<Ssh> {
    let lab = xrunbench_lab::lab::vm::boot(vm, dir)?;
    xrunbench_lab::say!(": connecting to {}", lab.describe);
    // A guest that booted but whose sshd does not answer: what its
    // console said last is the likeliest why.
    let mut ssh = Ssh::connect(&t.to_guest(&lab.reach)).map_err(|e| {
        anyhow::anyhow!(
            "{e:#}; the guest's console's last lines: {}",
            lab.console_tail(6)
        )
    })?;
    ssh.hold(lab);
    deploy(&mut ssh, dir)?;
    Ok(ssh)
}

/// The board binaries of `dir` put on the board.
fn deploy(ssh: &mut Ssh, dir: &Path) -> Result<()> {
    match ssh.deploy(dir)? {
        Some(line) => xrunbench_lab::say!(": {line}"),
        None => xrunbench_lab::say!(": board binaries in {} are up to date", ssh.board_bin_dir()),
    }
    Ok(())
}

impl Session {
    /// Builds, replays, validates and stages; see the module documentation.
    pub fn open(args: SessionArgs<'_>) -> Result<Session, SetupError> {
        validate::check_only(&args.scenario, args.only).map_err(SetupError::BadInput)?;
        let mut booted = args.scenario.clone();
        if !args.only.is_empty() {
            booted.configs.retain(|c| args.only.contains(&c.name));
        }
        let refused = validate::boot_checks(&booted, false);
        if !refused.is_empty() {
            return Err(SetupError::BadInput(refused));
        }
        let mut target = open_target(&booted, args.bin_dir).map_err(SetupError::from_error)?;
        if let Some(sig) = signals::stop_requested() {
            return Err(SetupError::Interrupted(sig));
        }
        if !args.read_only {
            // Knobs a killed trial left changed go back before anything
            // reads them as "found".
            let (_, lines) = target.restore().map_err(SetupError::from_error)?;
            for l in lines
                .iter()
                .filter(|l| !l.starts_with("nothing to restore"))
            {
                xrunbench_lab::say!(": {l}");
            }
        }
        let own_boots = booted
            .configs
            .iter()
            .any(|c| c.cmdline.is_some() || c.vm.is_some());
        let (probe, of_config, unknown) = if own_boots {
            probe_each(target.as_mut(), &booted).map_err(SetupError::from_error)?
        } else {
            let p = target.probe().map_err(SetupError::from_error)?;
            (p, BTreeMap::new(), BTreeMap::new())
        };
        let machine_of = |name: &str| {
            of_config
                .get(name)
                .cloned()
                .unwrap_or_else(|| probe.machine.clone())
        };
        let (scenario, skipped) = validate::narrow(args.scenario, args.only, &|name| {
            machine_of(name).kernel_release
        })
        .map_err(SetupError::BadInput)?;
        let machines: Vec<MachineFingerprint> = scenario
            .configs
            .iter()
            .map(|c| machine_of(&c.name))
            .collect();
        let unknown: Vec<Vec<String>> = scenario
            .configs
            .iter()
            .map(|c| unknown.get(&c.name).cloned().unwrap_or_default())
            .collect();
        let not_applied = validate::cmdline_read_back(&scenario, &machines, &unknown);
        if !not_applied.is_empty() {
            return Err(SetupError::BadInput(not_applied));
        }
        let host = validate::host_checks(&scenario);
        let audio = stage_audio(&scenario, &host, target.as_mut(), &probe)
            .map_err(SetupError::from_error)?;
        let specs: Vec<_> = (0..scenario.configs.len())
            .map(|i| {
                let planned = PlannedTrial {
                    seq: i + 1,
                    config: i,
                    config_name: scenario.configs[i].name.clone(),
                    k: 1,
                };
                spec::trial_spec(&scenario, &planned, audio[i].clone(), None)
            })
            .collect();
        let report = target
            .check(&specs, args.read_only)
            .map_err(SetupError::from_error)?;
        if let Some(sig) = signals::stop_requested() {
            return Err(SetupError::Interrupted(sig));
        }
        let mut errors: Vec<String> = host.iter().map(|(_, l)| l.clone()).collect();
        errors.extend(validate::target_lines(&scenario, &report, &host));
        if !errors.is_empty() {
            return Err(SetupError::BadInput(errors));
        }
        Ok(Session {
            file: args.file,
            scenario,
            skipped,
            target,
            machine: probe.machine,
            machines,
            audio,
            knobs: report.knobs,
        })
    }

    /// The spec of a planned trial whose logs go to `run_dir`.
    pub fn spec(&self, planned: &PlannedTrial, run_dir: &Path) -> xrunbench_schema::TrialSpec {
        spec::trial_spec(
            &self.scenario,
            planned,
            self.audio[planned.config].clone(),
            self.target.work_dir(run_dir),
        )
    }

    /// Runs a planned trial on the target and keeps what came back in
    /// `run_dir/trials/`: a measurement as `<stem>.json`, anything else in
    /// the run's log beside it. A trial lost (no record, or stopped by
    /// anything but us) is logged, the target recovers (reconnect, the
    /// cut-off trial stopped, journals replayed), and it runs again, up to
    /// the target's retries. `progress` sees the target's lines.
    pub fn run_trial(
        &mut self,
        planned: &PlannedTrial,
        run_dir: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<TrialEnd> {
        let spec = self.spec(planned, run_dir);
        let out = RunWriter::at(run_dir);
        let stem = spec.trial.stem();
        if let Err(gone) = self.target.select(&planned.config_name) {
            if signals::stop_requested().is_some() {
                return Ok(TrialEnd::Interrupted);
            }
            return Ok(TrialEnd::Unreachable(gone.0));
        }
        let retries = self.target.retries();
        self.target.keep_logs_in(run_dir);
        let mut attempt = 1;
        loop {
            let run = self
                .target
                .run_trial(&spec, progress, &|| signals::stop_requested().is_some());
            let run = self.of_this_board(run, planned);
            let (reason, pid) = match run {
                TrialRun::Record(record) => {
                    if let Err(e) = out.trial_record(&spec.trial, &record) {
                        let why = unkept(&record.outcome, &e);
                        let asked = signals::stop_requested().is_some();
                        if asked && matches!(record.outcome, TrialOutcome::Interrupted { .. }) {
                            xrunbench_lab::say!(": trial {stem} {why}");
                            return Ok(TrialEnd::Interrupted);
                        }
                        if matches!(record.outcome, TrialOutcome::Ran) {
                            anyhow::bail!("trial {stem} {why}");
                        }
                        // What the trial itself said comes first: a full
                        // disk must not hide why it failed.
                        return Ok(TrialEnd::Failed(why));
                    }
                    match &record.outcome {
                        TrialOutcome::Ran => return Ok(TrialEnd::Done(record)),
                        TrialOutcome::Failed { reason } => {
                            return Ok(TrialEnd::Failed(one_line(reason)))
                        }
                        TrialOutcome::Interrupted { .. } if signals::stop_requested().is_some() => {
                            return Ok(TrialEnd::Interrupted)
                        }
                        TrialOutcome::Interrupted { by } => {
                            (format!("xrun-trial was stopped by {}", one_line(by)), None)
                        }
                    }
                }
                TrialRun::Lost { reason, pid } => {
                    let lost = LostTrial::new(spec.trial.clone(), attempt, reason.clone());
                    if let Err(e) = out.lost_trial(&lost) {
                        return Ok(TrialEnd::Lost(format!(
                            "{reason} (and its log entry could not be kept: {e:#})"
                        )));
                    }
                    (reason, pid)
                }
            };
            // Whatever cut it off may have left its knobs changed, or the
            // link down: the target recovers now, not at the next run.
            match self.target.recover(pid) {
                Ok(lines) => {
                    for l in lines {
                        xrunbench_lab::say!(": {l}");
                    }
                    // A board brought back by a power cycle has booted
                    // again: its records carry the new boot's id.
                    if let Ok(p) = self.target.probe() {
                        self.booted_again(planned.config, &p.machine.boot_id);
                    }
                }
                Err(_) if signals::stop_requested().is_some() => return Ok(TrialEnd::Interrupted),
                Err(gone) => return Ok(TrialEnd::Unreachable(gone.0)),
            }
            if signals::stop_requested().is_some() {
                return Ok(TrialEnd::Interrupted);
            }
            if attempt > retries {
                return Ok(TrialEnd::Lost(if retries == 0 {
                    reason
                } else {
                    format!("{reason} (lost {attempt} times)")
                }));
            }
            xrunbench_lab::say!(
                ": trial {stem} was lost ({reason}): running it again (retry {attempt} of {retries})"
            );
            attempt += 1;
        }
    }

    /// Configuration `config`'s machine came back as boot `boot_id`: so
    /// did every machine that was its boot (configurations sharing a
    /// guest, and the run's own).
    fn booted_again(&mut self, config: usize, boot_id: &str) {
        let Some(was) = self.machines.get(config).map(|m| m.boot_id.clone()) else {
            return;
        };
        let all = self
            .machines
            .iter_mut()
            .chain(std::iter::once(&mut self.machine));
        for m in all.filter(|m| m.boot_id == was) {
            m.boot_id = boot_id.to_string();
        }
    }

    /// `run`, unless it is a record of another machine than the board
    /// the session probed (or than its configuration's pinned kernel):
    /// that record is the board's word against its own probe, and the
    /// trial is lost with the reason.
    fn of_this_board(&self, run: TrialRun, planned: &PlannedTrial) -> TrialRun {
        let TrialRun::Record(r) = run else {
            return run;
        };
        let pinned = self
            .scenario
            .configs
            .get(planned.config)
            .and_then(|c| c.kernel.as_deref());
        let probed = self.machines.get(planned.config).unwrap_or(&self.machine);
        match foreign_machine(&r.machine, probed, pinned) {
            Some(reason) => TrialRun::Lost { reason, pid: None },
            None => TrialRun::Record(r),
        }
    }

    /// Ends the session: the target's staged files removed, its
    /// connection closed (also done when the session is dropped).
    pub fn finish(&mut self) {
        for l in self.target.finish() {
            xrunbench_lab::say!(": {l}");
        }
    }

    /// `run.json` for a run of `plan` in this session.
    pub fn manifest(&self, label: Option<String>, plan: Vec<PlannedTrial>) -> RunManifest {
        RunManifest {
            schema: RUN_SCHEMA.into(),
            started_at: xrunbench_schema::doc::rfc3339(SystemTime::now()),
            label,
            target: self.target.describe(),
            scenario_file: self.file.clone(),
            scenario: self.scenario.clone(),
            skipped: self.skipped.clone(),
            plan,
            fingerprint: self.machine.clone(),
            runner: RunnerInfo::here(),
            outcome: None,
        }
    }
}

/// Probes each configuration's machine (its guest running, the others
/// frozen): the first configuration's probe, every configuration's
/// machine, and the command-line parameters each one's kernel did not
/// know, by configuration name.
#[allow(clippy::type_complexity)]
fn probe_each(
    target: &mut dyn Target,
    s: &Scenario,
) -> Result<(
    Probe,
    BTreeMap<String, MachineFingerprint>,
    BTreeMap<String, Vec<String>>,
)> {
    // Configurations that share a guest share its probe.
    let guest_of = match s.target.as_ref().and_then(|t| t.vm.as_ref()) {
        Some(vm) => guests_of(s, vm).1,
        None => BTreeMap::new(),
    };
    let mut first = None;
    let mut probed: BTreeMap<usize, (MachineFingerprint, Vec<String>)> = BTreeMap::new();
    let mut machines = BTreeMap::new();
    let mut unknown = BTreeMap::new();
    for c in &s.configs {
        let guest = guest_of.get(&c.name).copied();
        let known = guest.and_then(|g| probed.get(&g)).cloned();
        let (machine, words) = match known {
            Some(m) => m,
            None => {
                target.select(&c.name).map_err(|e| anyhow::anyhow!(e.0))?;
                let p = target.probe()?;
                let words = target.unknown_parameters()?;
                let m = (p.machine.clone(), words);
                if let Some(g) = guest {
                    probed.insert(g, m.clone());
                }
                first.get_or_insert(p);
                m
            }
        };
        machines.insert(c.name.clone(), machine);
        unknown.insert(c.name.clone(), words);
    }
    if let Some(c) = s.configs.first() {
        target.select(&c.name).map_err(|e| anyhow::anyhow!(e.0))?;
    }
    let first = match first {
        Some(p) => p,
        None => target.probe()?,
    };
    Ok((first, machines, unknown))
}

/// Why a record saying it ran on `said` is not of the board `probed`
/// (its kernel, boot or architecture differ), or not of a configuration
/// pinned to kernel `pinned`; `None`: it is.
fn foreign_machine(
    said: &MachineFingerprint,
    probed: &MachineFingerprint,
    pinned: Option<&str>,
) -> Option<String> {
    if let Some(k) = pinned.filter(|k| *k != said.kernel_release) {
        return Some(format!(
            "its record says it ran on kernel `{}`, its configuration is pinned to `{}`: refused",
            one_line(&said.kernel_release),
            one_line(k)
        ));
    }
    [
        ("kernel", &said.kernel_release, &probed.kernel_release),
        ("boot id", &said.boot_id, &probed.boot_id),
        ("architecture", &said.arch, &probed.arch),
    ]
    .into_iter()
    .find(|(_, s, p)| s != p)
    .map(|(what, s, p)| {
        format!(
            "its record says it ran on {what} `{}`, the board's probe says `{}`: refused",
            one_line(s),
            one_line(p)
        )
    })
}

/// Why a trial whose record could not be written ends the run: its own
/// outcome first, then the write that failed (`trial <stem> ` goes before
/// it).
fn unkept(outcome: &TrialOutcome, write: &anyhow::Error) -> String {
    let kept = format!("its record could not be kept: {write:#}");
    match outcome {
        TrialOutcome::Ran => format!("ran, but {kept}"),
        TrialOutcome::Failed { reason } => format!("{}; {kept}", one_line(reason)),
        TrialOutcome::Interrupted { by } => format!("interrupted by {}; {kept}", one_line(by)),
    }
}

/// Each configuration's sound as the target reads it: files staged (each
/// once), tones generated there by each trial.
fn stage_audio(
    s: &Scenario,
    host_problems: &[(String, String)],
    target: &mut dyn Target,
    probe: &Probe,
) -> Result<Vec<AudioInput>> {
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut out = Vec::new();
    for c in &s.configs {
        out.push(match &c.audio.source {
            // The host refused it: validation reports that; do not copy it.
            AudioSource::File(p) if host_problems.iter().any(|(n, _)| *n == c.name) => {
                AudioInput::File(p.clone())
            }
            AudioSource::File(p) => match staged.iter().find(|(h, _)| h == p) {
                Some((_, there)) => AudioInput::File(there.clone()),
                None => {
                    let there = target.stage_audio(p, probe)?;
                    staged.push((p.clone(), there.clone()));
                    AudioInput::File(there)
                }
            },
            AudioSource::Generate(tone) => AudioInput::Tone(tone.clone()),
        });
    }
    Ok(out)
}

/// How one trial ended, for the runner.
pub enum TrialEnd {
    /// It ran to the end: a measurement.
    Done(Box<TrialRecord>),
    /// It could not run (the reason); its knobs were restored.
    Failed(String),
    /// No usable record came back (the reason), as often as the target
    /// retries.
    Lost(String),
    /// The target did not come back after its link dropped (one line).
    Unreachable(String),
    /// We were asked to stop; the trial stopped and restored its knobs.
    Interrupted,
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunbench_scenario as scenario;

    #[test]
    fn a_record_of_another_kernel_boot_or_architecture_is_refused() {
        let probed = MachineFingerprint {
            kernel_release: "6.1.0".into(),
            arch: "x86_64".into(),
            boot_id: "b1".into(),
            ..MachineFingerprint::default()
        };
        assert_eq!(foreign_machine(&probed, &probed, Some("6.1.0")), None);
        assert_eq!(foreign_machine(&probed, &probed, None), None);
        for (edit, words) in [
            (
                ("9.9.9-other", "b1", "x86_64"),
                "kernel `9.9.9-other`, its configuration is pinned to `6.1.0`",
            ),
            (
                ("6.1.0", "b2", "x86_64"),
                "boot id `b2`, the board's probe says `b1`",
            ),
            (
                ("6.1.0", "b1", "aarch64"),
                "architecture `aarch64`, the board's probe says `x86_64`",
            ),
        ] {
            let said = MachineFingerprint {
                kernel_release: edit.0.into(),
                boot_id: edit.1.into(),
                arch: edit.2.into(),
                ..probed.clone()
            };
            let why = foreign_machine(&said, &probed, Some("6.1.0")).unwrap();
            assert!(why.contains(words), "{why}");
        }
        let other = MachineFingerprint {
            kernel_release: "9.9.9-other".into(),
            ..probed.clone()
        };
        let why = foreign_machine(&other, &probed, None).unwrap();
        assert!(
            why.contains("kernel `9.9.9-other`, the board's probe says `6.1.0`"),
            "{why}"
        );
    }

    #[test]
    fn cpal_hosts_choose_the_players_features() {
        let text = "name = \"c\"\n[audio]\ngenerate = {}\n\
                    [[config]]\nname = \"a\"\n\
                    [[config]]\nname = \"j\"\n[config.audio]\nbackend = \"cpal\"\nhost = \"jack\"\n\
                    [[config]]\nname = \"p\"\n[config.audio]\nbackend = \"cpal\"\nhost = \"pulseaudio\"\n\
                    [[config]]\nname = \"d\"\n[config.audio]\nbackend = \"cpal\"\n";
        let p = Path::new("c.toml");
        let s = scenario::resolve(p, &scenario::parse(p, text).unwrap()).unwrap();
        assert_eq!(
            player_features(&s),
            [
                "xrunbench-player/cpal-jack",
                "xrunbench-player/cpal-pulseaudio"
            ]
        );
    }
}
