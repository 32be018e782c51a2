//! `cargo xtask run scenario.toml`: configurations × trials of the player
//! under load, each trial run by `xrun-trial` on the target (knobs applied,
//! read back and always restored there), results on disk; and `cargo xtask
//! restore`, which has the target replay journals left by a killed trial.
//!
//! Flow: parse and resolve the scenario (`--target` and `--ssh-option`
//! applied) → open the session (target connected, board binaries built and
//! put there, journals replayed, validation against the target, all errors
//! before anything runs) → plan → for each planned trial, its spec to
//! `xrun-trial run -` and its record back (a trial lost to the link run
//! again) → the target's staged files removed, its link closed → summary
//! and comparison.

pub mod session;
pub mod summary;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use xrunbench_schema::trial::{AudioInput, TrialRecord};

use self::session::{Session, SessionArgs, SetupError, TrialEnd};
use xrunbench_analysis::results::{default_results_root, Outcome, RunDir, RunWriter};
use xrunbench_lab::signals;
use xrunbench_scenario::lava::LavaTargetArgs;
use xrunbench_scenario::plan::PlannedTrial;
use xrunbench_scenario::{self as scenario, plan, validate, Scenario, ScenarioFile, SshTarget};

/// Exit code for bad input (scenario, options).
const EXIT_BAD_INPUT: u8 = 2;
/// Exit code with `--gate` when a gate failed.
const EXIT_GATE_FAILED: u8 = 1;
/// Exit code after SIGINT/SIGTERM (as a shell reports 128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

/// Arguments of `cargo xtask run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The scenario file (see scenarios/README.md).
    pub scenario: PathBuf,
    /// Appended to the run directory's name: `<timestamp>-<label>`.
    #[arg(long)]
    pub label: Option<String>,
    /// Trials per configuration (overrides the file's `trials`).
    #[arg(long)]
    pub trials: Option<u32>,
    /// Run only this configuration (repeatable).
    #[arg(long, value_name = "CONFIG")]
    pub only: Vec<String>,
    /// Print the plan, the knob changes and the command lines; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where run directories go (default: results/ in the current directory).
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// `--bin-dir`: prebuilt board binaries.
    #[command(flatten)]
    pub bins: crate::target::binaries::BinDirArg,
    /// Judge the scenario's [gate] table after the run: exit 1 when a
    /// gate failed.
    #[arg(long)]
    pub gate: bool,
    /// Write a JUnit XML file of the run (a testsuite per configuration,
    /// a testcase per metric, failed gates as failures).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// The board to run on.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Or a LAVA lab to run on.
    #[command(flatten)]
    pub lava: xrunbench_scenario::lava::LavaTargetArgs,
}

/// Where the trials run, from the command line: a board over SSH.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Run on this board over SSH: an OpenSSH destination (root@rpi4.lab,
    /// a Host of ~/.ssh/config), replacing the scenario's [target] ssh; or
    /// `vm:KERNEL`: a kernel image booted under QEMU (the VM lab).
    #[arg(long, value_name = "DEST")]
    pub target: Option<String>,
    /// An ssh_config option for the board's connection (Port=2222,
    /// IdentityFile=…, UserKnownHostsFile=…, ProxyJump=…); repeatable,
    /// before the scenario's [target] options.
    #[arg(short = 'o', long = "ssh-option", value_name = "KEY=VALUE")]
    pub ssh_options: Vec<String>,
}

impl TargetArgs {
    /// Applies `--target` and `--ssh-option` to `s`; an error is one line.
    pub fn apply(&self, s: &mut Scenario) -> Result<(), String> {
        if self.target.is_some() {
            // The command line's board replaces the file's, a lab included.
            s.lava = None;
        }
        if let Some(kernel) = self.target.as_deref().and_then(|d| d.strip_prefix("vm:")) {
            // The VM lab with every default, booting this kernel.
            let spec = xrunbench_lab::lab::vm::VmSpec {
                kernel: Some(kernel.into()),
                ..Default::default()
            };
            let here = std::env::current_dir().map_err(|e| format!("--target: {e}"))?;
            let vm = xrunbench_lab::lab::vm::VmSettings::resolve(&spec, &here)
                .map_err(|(k, m)| format!("--target vm:{kernel}: {k}: {m}"))?;
            s.target = Some(SshTarget::lab(vm, s.duration, s.warmup));
        } else if let Some(dest) = &self.target {
            scenario::check_destination(dest).map_err(|m| format!("--target {m}"))?;
            match &mut s.target {
                Some(t) => t.destination = dest.clone(),
                None => {
                    s.target = Some(
                        SshTarget::with_defaults(dest, s.duration, s.warmup)
                            .map_err(|m| format!("--target {m}"))?,
                    )
                }
            }
        }
        if let Some(t) = &mut s.target {
            // The file's timeout for this machine holds for the board the
            // command line put in its place.
            if let Some(tt) = s.local_trial_timeout.take() {
                t.trial_timeout = tt;
            }
        }
        if self.ssh_options.is_empty() {
            return Ok(());
        }
        let Some(t) = &mut s.target else {
            return Err(
                "--ssh-option needs a board: give --target DEST or a [target] table".into(),
            );
        };
        for o in &self.ssh_options {
            scenario::check_option(o).map_err(|m| format!("--ssh-option {m}"))?;
        }
        let mut options = self.ssh_options.clone();
        options.append(&mut t.options);
        t.options = options;
        Ok(())
    }

    /// The board these options name, alone (no scenario): defaults for
    /// everything but the destination and the options.
    pub fn board(&self) -> Result<Option<SshTarget>, String> {
        let mut s = Scenario::without_configs("--target", None);
        self.apply(&mut s)?;
        Ok(s.target)
    }
}

/// Arguments of `cargo xtask restore`.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// `--bin-dir`: prebuilt board binaries.
    #[command(flatten)]
    pub bins: crate::target::binaries::BinDirArg,
    /// Where run directories are (default: results/ in the current directory): what a
    /// killed run left half-written there is removed.
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// On this board instead of here.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `cargo xtask restore`: `xrun-trial restore` on the target (this machine
/// or `--target`).
pub fn restore(args: &RestoreArgs) -> Result<ExitCode> {
    // Ctrl-C ends a restore that hangs (the target's command is stopped
    // and reaped), as it ends a run.
    signals::install()?;
    let board = match args.target.board() {
        Ok(b) => b,
        Err(m) => return Ok(bad_input(&[m])),
    };
    let mut s = Scenario::without_configs("restore", board);
    if let Err(e) = xrunbench_lab::deps::ensure(xrunbench_lab::deps::for_run(
        args.bins.bin_dir.is_some(),
        s.runs_on(),
    )) {
        return Ok(e.report());
    }
    let mut target = session::open_target(&s, args.bins.bin_dir.clone())?;
    s.target = None;
    let restored = target.restore();
    for l in target.finish() {
        xrunbench_lab::say!(": {l}");
    }
    let (ok, lines) = restored?;
    for l in lines {
        println!("{l}");
    }
    // The host's share of what a killed run leaves: temporaries in the
    // results, whose writer is gone.
    let results = args
        .results_dir
        .clone()
        .unwrap_or_else(default_results_root);
    for p in xrunbench_schema::doc::sweep_dead_temporaries(&results) {
        println!("removed {}, left by a killed run", p.display());
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `cargo xtask run`.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    signals::install()?;
    let (file, mut scenario) = match scenario::load(&args.scenario) {
        Ok(v) => v,
        Err(e) => return Ok(bad_input(&[e.0])),
    };
    if let Err(msg) = apply_options(args, &mut scenario) {
        return Ok(bad_input(&[msg]));
    }
    // Resolved before `--only` narrows the scenario: the baseline is the
    // file's first configuration whatever runs.
    let gates = match xrunbench_analysis::gate::resolve(&args.scenario, &file, &scenario) {
        Ok(g) => g,
        Err(e) => return Ok(bad_input(&[e.0])),
    };
    let baseline = scenario
        .configs
        .first()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let results_root = args
        .results_dir
        .clone()
        .unwrap_or_else(default_results_root);
    if let Some(lab) = scenario.lava_lab(&args.lava) {
        return run_on_lab(args, &lab, &file, &scenario, &gates, &results_root);
    }
    // Building the binaries (which validation needs: it asks xrun-trial)
    // needs the build prerequisites; the scenario itself was checked above.
    if let Err(e) = xrunbench_lab::deps::ensure(xrunbench_lab::deps::for_run(
        args.bins.bin_dir.is_some(),
        scenario.runs_on(),
    )) {
        return Ok(e.report());
    }
    let mut session = match Session::open(SessionArgs {
        file,
        scenario,
        only: &args.only,
        bin_dir: args.bins.bin_dir.clone(),
        read_only: args.dry_run,
    }) {
        Ok(s) => s,
        Err(SetupError::BadInput(lines)) => return Ok(bad_input(&lines)),
        Err(SetupError::Interrupted(sig)) => {
            xrunbench_lab::say!(
                ": stopped by signal {sig} before the first trial; nothing was changed"
            );
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(SetupError::Failed(e)) => return Err(e),
    };
    if args.dry_run {
        return dry_run(&session, &results_root);
    }
    for line in &session.skipped {
        xrunbench_lab::say!(": {line}");
    }
    // A copy: the session is borrowed mutably by every trial below.
    let scenario = session.scenario.clone();
    let out = RunWriter::create(&results_root, &scenario.name, args.label.as_deref())?;
    let run_dir = out.dir().to_path_buf();
    let names: Vec<String> = scenario.configs.iter().map(|c| c.name.clone()).collect();
    let plan = plan::make_plan(&names, scenario.trials, scenario.order);
    let mut manifest = session.manifest(args.label.clone(), plan.clone());
    out.manifest(&manifest)?;
    xrunbench_lab::say!(
        ": {} trials of {} s on {}; results in {}",
        plan.len(),
        scenario.duration.as_secs_f64(),
        session.target.describe(),
        run_dir.display()
    );

    let (finished, outcome) = run_plan(&mut session, &run_dir, &plan);
    session.finish();
    // A trial killed on the way (its scratch files) or an earlier writer
    // killed mid-write left files no reader wants.
    for p in out.sweep() {
        xrunbench_lab::say!(": removed {}, left by a killed process", p.display());
    }
    // Everything after the trials reads back what is on disk: what a later
    // `compare` sees.
    let (outcome, dir) = read_back(&run_dir, outcome);
    // How the run ended goes into run.json first: nothing that may fail
    // below (a full disk) may keep it from being recorded.
    manifest.outcome = Some(outcome.clone());
    let mut write_errors = Vec::new();
    write_errors.extend(out.final_manifest(&manifest).err());
    let measured = dir.as_ref().map_or(0, |d| d.records.len());
    if let Some(dir) = &dir {
        debug_assert!(measured == finished || matches!(outcome, Outcome::Failed { .. }));
        write_errors.extend(write_summary(&out, dir, &outcome).err());
        if measured > 0 {
            write_errors
                .extend(xrunbench_analysis::compare::write_comparison_and_plots(&out, dir).err());
        }
    }
    let gates_failed = dir.as_ref().is_some_and(|dir| {
        judge_gates(
            args,
            &scenario,
            gates,
            dir,
            &baseline,
            &manifest.target,
            &mut write_errors,
        )
    });
    println!("results: {}", run_dir.display());
    Ok(exit_code(outcome, gates_failed, measured, &write_errors))
}

/// The run directory `run_dir` read back, with `outcome`; when it cannot
/// be read, no directory and a failed outcome saying why.
fn read_back(run_dir: &Path, outcome: Outcome) -> (Outcome, Option<RunDir>) {
    match RunDir::read(run_dir) {
        Ok(dir) => (outcome, Some(dir)),
        Err(e) => (
            Outcome::Failed {
                error: e.to_string(),
            },
            None,
        ),
    }
}

/// Judges the gates of the configurations that ran on the run `dir` read
/// back and prints the verdicts; writes the JUnit file when asked (what
/// fails there joins `write_errors`, said after the outcome). Whether a
/// gate failed that `--gate` fails the run for.
fn judge_gates(
    args: &RunArgs,
    scenario: &Scenario,
    gates: Vec<xrunbench_analysis::gate::Gate>,
    dir: &RunDir,
    baseline: &str,
    target: &str,
    write_errors: &mut Vec<anyhow::Error>,
) -> bool {
    let ran: Vec<&str> = scenario.configs.iter().map(|c| c.name.as_str()).collect();
    let gates: Vec<_> = gates
        .into_iter()
        .filter(|g| ran.contains(&g.config()))
        .collect();
    let verdicts = xrunbench_analysis::gate::judge(&gates, dir, baseline);
    if args.gate || !verdicts.is_empty() {
        println!();
    }
    for v in &verdicts {
        println!("gate {}: {}", if v.pass { "pass" } else { "FAIL" }, v.line);
    }
    if args.gate && verdicts.is_empty() {
        println!("gate: the scenario has no [gate] table: nothing to fail");
    }
    let gates_failed = args.gate && !xrunbench_analysis::gate::all_pass(&verdicts);
    if let Some(j) = &args.junit {
        write_errors.extend(xrunbench_analysis::junit::write(j, dir, &verdicts, target).err());
    }
    gates_failed
}

/// The exit code of a run that ended with `outcome`, with `measured`
/// trials on disk; says on stderr how it ended, then each of
/// `write_errors`.
fn exit_code(
    outcome: Outcome,
    gates_failed: bool,
    measured: usize,
    write_errors: &[anyhow::Error],
) -> ExitCode {
    // The first thing that went wrong is said first; what could not be
    // written afterwards (often for the same reason) follows.
    let code = match outcome {
        Outcome::Completed if gates_failed => ExitCode::from(EXIT_GATE_FAILED),
        Outcome::Completed => ExitCode::SUCCESS,
        Outcome::Interrupted { signal } => {
            xrunbench_lab::say!(
                ": interrupted by signal {signal}: knobs restored, {measured} finished trial(s) kept"
            );
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Outcome::Failed { error } => {
            xrunbench_lab::say!(": {error}");
            ExitCode::FAILURE
        }
    };
    for e in write_errors {
        xrunbench_lab::say!(": {e:#}");
    }
    if write_errors.is_empty() || code != ExitCode::SUCCESS {
        code
    } else {
        ExitCode::FAILURE
    }
}

/// Prints the summary and writes it (`summary.txt`, `summary.json`).
fn write_summary(out: &RunWriter, dir: &RunDir, outcome: &Outcome) -> Result<()> {
    let summary = summary::Summary::of(dir, outcome)?;
    let text = summary::render_text(&summary);
    print!("{text}");
    out.summary(&text, &summary)
}

/// `run` on a LAVA lab: refused before any job is submitted when the
/// options or the scenario cannot go to a lab.
fn run_on_lab(
    args: &RunArgs,
    lab: &LavaTargetArgs,
    file: &ScenarioFile,
    scenario: &Scenario,
    gates: &[xrunbench_analysis::gate::Gate],
    results_root: &Path,
) -> Result<ExitCode> {
    let refused = lab_refusals(args, scenario);
    if !refused.is_empty() {
        return Ok(bad_input(&refused));
    }
    let label = args.label.as_deref();
    xrunbench_lava::submit::run(lab, file, scenario, gates, label, results_root)
}

/// What a LAVA lab's run refuses before any job is submitted (none: it
/// may go): a second
/// place to run, the options a lab does not take, and what its boards'
/// kernels cannot do.
fn lab_refusals(args: &RunArgs, scenario: &Scenario) -> Vec<String> {
    if let Some(t) = &args.target.target {
        return vec![format!("--lava and --target {t}: give one place to run")];
    }
    if args.dry_run || !args.only.is_empty() {
        return vec!["a lab run (--lava, [target] lava) takes no --dry-run or --only".into()];
    }
    validate::boot_checks(scenario, true)
}

fn bad_input(lines: &[String]) -> ExitCode {
    for l in lines {
        xrunbench_lab::say!(": {l}");
    }
    ExitCode::from(EXIT_BAD_INPUT)
}

fn apply_options(args: &RunArgs, s: &mut Scenario) -> Result<(), String> {
    args.target.apply(s)?;
    if let Some(t) = args.trials {
        if t == 0 {
            return Err("--trials must be at least 1".into());
        }
        s.trials = t;
        scenario::check_size(s).map_err(|(_, msg)| format!("--trials {t}: {msg}"))?;
    }
    if let Some(l) = &args.label {
        let ok = !l.is_empty()
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !ok {
            return Err(format!(
                "--label `{l}`: use letters, digits, `.`, `_` or `-` (it names a directory)"
            ));
        }
    }
    Ok(())
}

/// Runs the plan; stops at the first trial that fails or is lost, or at a
/// signal. Every trial restores its own knobs whatever happens.
fn run_plan(session: &mut Session, run_dir: &Path, plan: &[PlannedTrial]) -> (usize, Outcome) {
    let mut progress = Progress::new(plan.len(), expected_trial_time(&session.scenario));
    let mut finished = 0;
    let outcome = 'plan: {
        for t in plan {
            if let Some(signal) = signals::stop_requested() {
                break 'plan Outcome::Interrupted { signal };
            }
            progress.start(t);
            let stem = t.stem();
            let end = session.run_trial(t, run_dir, &mut |line| progress.line(&stem, line));
            match end {
                Ok(TrialEnd::Done(record)) => {
                    progress.done(t, &record);
                    finished += 1;
                }
                Ok(TrialEnd::Interrupted) => {
                    let signal = signals::stop_requested().unwrap_or(libc::SIGINT);
                    break 'plan Outcome::Interrupted { signal };
                }
                Ok(TrialEnd::Failed(reason)) => {
                    break 'plan Outcome::Failed {
                        error: format!("trial {stem} could not run: {reason}"),
                    }
                }
                Ok(TrialEnd::Lost(reason)) => {
                    break 'plan Outcome::Failed {
                        error: format!("trial {stem} was lost: {reason}"),
                    }
                }
                Ok(TrialEnd::Unreachable(why)) => {
                    break 'plan Outcome::Failed {
                        error: format!(
                            "{why}: the run stops at trial {stem} with {finished} finished \
                             trial(s) kept; a trial the link cut off restores its knobs on the \
                             board itself (`cargo xtask restore --target …` replays what a \
                             killed one left, once the board is back)"
                        ),
                    }
                }
                Err(e) => {
                    break 'plan Outcome::Failed {
                        error: format!("{e:#}"),
                    }
                }
            }
        }
        Outcome::Completed
    };
    progress.finish();
    (finished, outcome)
}

fn expected_trial_time(s: &Scenario) -> Duration {
    // Player duration, warm-up, and about a second of process start/stop.
    s.duration.to_std() + s.warmup.to_std() + Duration::from_secs(1)
}

/// Trial k/n with an ETA: a redrawn bar on a terminal (showing the trial's
/// latest phase), plain lines otherwise (CI logs, pipes).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    began: Instant,
    finished: usize,
    expected: Duration,
    current: String,
}

impl Progress {
    fn new(total: usize, expected: Duration) -> Self {
        let tty = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template("[{bar:30}] {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b.enable_steady_tick(Duration::from_millis(500));
            b
        });
        Progress {
            bar,
            total,
            began: Instant::now(),
            finished: 0,
            expected,
            current: String::new(),
        }
    }

    fn eta(&self) -> String {
        let per = if self.finished == 0 {
            self.expected
        } else {
            self.began.elapsed() / self.finished as u32
        };
        let left = per * (self.total - self.finished) as u32;
        format!("{}:{:02}", left.as_secs() / 60, left.as_secs() % 60)
    }

    fn start(&mut self, t: &PlannedTrial) {
        self.current = format!("trial {}/{} {}", t.seq, self.total, t.stem());
        let msg = format!("{}, ETA {}", self.current, self.eta());
        match &self.bar {
            Some(b) => b.set_message(msg),
            None => xrunbench_lab::say!(": {} starting, ETA {}", self.current, self.eta()),
        }
    }

    /// A line from the target: a phase of this trial goes into the bar (on
    /// a terminal only); anything else (journals replayed, warnings) is
    /// printed.
    fn line(&mut self, stem: &str, line: &str) {
        let phase = line
            .strip_prefix("xrun-trial: ")
            .and_then(|l| l.strip_prefix(stem))
            .and_then(|l| l.strip_prefix(": "));
        match (phase, &self.bar) {
            (Some(p), Some(b)) => b.set_message(format!("{}: {p}", self.current)),
            (Some(_), None) => {}
            (None, Some(b)) => b.println(line),
            (None, None) => eprintln!("{line}"),
        }
    }

    fn done(&mut self, t: &PlannedTrial, r: &TrialRecord) {
        self.finished += 1;
        let Some(p) = r.measured() else { return };
        let line = format!(
            "trial {}/{} {}: {} underrun(s), max gap {:.1} ms, min fill {:.1} ms",
            t.seq,
            self.total,
            t.stem(),
            p.totals.count,
            p.totals.gap_ms_max,
            p.fill.min as f64 / 1000.0
        );
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.inc(1);
            }
            None => xrunbench_lab::say!(": {line}"),
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// `--dry-run`: the plan, each configuration's knob changes (value found
/// on the target → new value) and command lines. Writes nothing.
fn dry_run(session: &Session, results_root: &Path) -> Result<ExitCode> {
    for line in &session.skipped {
        println!("{line}");
    }
    let s = &session.scenario;
    let names: Vec<String> = s.configs.iter().map(|c| c.name.clone()).collect();
    let plan = plan::make_plan(&names, s.trials, s.order);
    println!(
        "scenario {} ({}): {} configuration(s) × {} trial(s), {} order, {} s each after {} s warm-up, on {}",
        s.name,
        s.path.display(),
        s.configs.len(),
        s.trials,
        match s.order {
            scenario::Order::Interleaved => "interleaved",
            scenario::Order::Blocked => "blocked",
        },
        s.duration.as_secs_f64(),
        s.warmup.as_secs_f64(),
        session.target.describe()
    );
    let total = expected_trial_time(s) * plan.len() as u32;
    println!(
        "plan ({} trials, about {} min {} s):",
        plan.len(),
        total.as_secs() / 60,
        total.as_secs() % 60
    );
    for t in &plan {
        println!("  {:>3}. {}", t.seq, t.stem());
    }
    for (i, c) in s.configs.iter().enumerate() {
        println!("config {}:", c.name);
        let knobs: Vec<_> = session
            .knobs
            .iter()
            .filter(|k| k.config == c.name)
            .collect();
        if knobs.is_empty() && c.pm_qos_us.is_none() {
            println!("  knobs: none");
        }
        for k in knobs {
            println!(
                "  {}: {} -> {} (restored to {} after each trial)",
                k.what, k.found, k.requested, k.found
            );
        }
        if let Some(us) = c.pm_qos_us {
            println!("  pm_qos_cpu_dma_latency_us: hold {us} us on /dev/cpu_dma_latency during each trial");
        }
        let planned = PlannedTrial {
            seq: i + 1,
            config: i,
            config_name: c.name.clone(),
            k: 1,
        };
        let spec = session.spec(&planned, Path::new("<run>"));
        let wav = match &spec.audio {
            AudioInput::File(p) => p.clone(),
            AudioInput::Tone(_) => PathBuf::from("/dev/shm/xrunbench-<pid>-tone.wav"),
        };
        let json = |who: &str| Path::new("trials").join(format!(".{}-K.{who}.json", c.name));
        let player = spec
            .player
            .to_args(&wav, s.duration.as_secs_f64(), &json("player"));
        println!("  player: xrun-player {}", player.join(" "));
        match &spec.load {
            Some(l) => println!(
                "  load:   xrun-hackbench {}",
                l.to_args(spec.warmup_us, spec.duration_us, &json("load"))
                    .join(" ")
            ),
            None => println!("  load:   none"),
        }
    }
    println!(
        "results would go to {}/{}/<UTC timestamp>/",
        results_root.display(),
        s.name
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quickstart() -> Scenario {
        let p = xrunbench_paths::workspace_root().join("scenarios/quickstart.toml");
        scenario::load(&p).unwrap().1
    }

    #[test]
    fn a_board_given_on_the_command_line_keeps_the_file_s_trial_timeout() {
        let p = std::path::Path::new("s.toml");
        let text = "name = \"x\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"a\"\n\
                    [target]\ntrial_timeout = \"30s\"\n";
        let mut s = scenario::resolve(p, &scenario::parse(p, text).unwrap()).unwrap();
        let args = TargetArgs {
            target: Some("root@127.0.0.1".into()),
            ssh_options: vec![],
        };
        args.apply(&mut s).unwrap();
        assert_eq!(
            s.target.unwrap().trial_timeout,
            xrunbench_scenario::units::Span::from_secs(30)
        );
    }

    #[test]
    fn target_on_the_command_line_makes_or_changes_the_board() {
        let mut s = quickstart();
        let args = TargetArgs {
            target: Some("root@127.0.0.1".into()),
            ssh_options: vec!["Port=2222".into()],
        };
        args.apply(&mut s).unwrap();
        let t = s.target.clone().unwrap();
        assert_eq!(t.destination, "root@127.0.0.1");
        assert_eq!(t.options, ["Port=2222"]);
        assert_eq!(
            t.trial_timeout,
            scenario::default_trial_timeout(s.duration, s.warmup)
        );
        // On a scenario with [target]: the destination replaced, the
        // command line's options first.
        let mut s2 = s.clone();
        s2.target.as_mut().unwrap().options = vec!["ProxyJump=gw".into()];
        let more = TargetArgs {
            target: Some("pi@other".into()),
            ssh_options: vec!["Port=22".into()],
        };
        more.apply(&mut s2).unwrap();
        let t2 = s2.target.unwrap();
        assert_eq!(t2.destination, "pi@other");
        assert_eq!(t2.options, ["Port=22", "ProxyJump=gw"]);
    }

    #[test]
    fn bad_target_options_are_one_line() {
        let mut s = quickstart();
        let only_options = TargetArgs {
            target: None,
            ssh_options: vec!["Port=2".into()],
        };
        assert!(only_options
            .apply(&mut s)
            .unwrap_err()
            .contains("--ssh-option needs a board"));
        let unchecked = TargetArgs {
            target: Some("b".into()),
            ssh_options: vec!["UserKnownHostsFile=/dev/null".into()],
        };
        let e = unchecked.apply(&mut s).unwrap_err();
        assert!(
            e.starts_with("--ssh-option `UserKnownHostsFile=/dev/null`"),
            "{e}"
        );
        let injected = TargetArgs {
            target: Some("-oProxyCommand=x".into()),
            ssh_options: vec![],
        };
        assert!(injected
            .apply(&mut s)
            .unwrap_err()
            .starts_with("--target `-oProxyCommand=x`"));
    }
}
