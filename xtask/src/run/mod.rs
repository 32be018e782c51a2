//! `cargo xtask run scenario.toml`: configurations × trials of the player
//! under load, knobs applied and always restored, results on disk; and
//! `cargo xtask restore`, which replays journals left by a killed run.
//!
//! Flow: parse and check the scenario (nothing touched on any error) →
//! replay leftover journals → build the board binaries → for each planned
//! trial apply knobs, run load and player, restore → summary.

pub mod fingerprint;
pub mod journal;
pub mod knobs;
pub mod plan;
pub mod scenario;
pub mod signals;
pub mod store;
pub mod summary;
pub mod trial;
pub mod units;
pub mod validate;
pub mod wav;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use serde::Serialize;

use self::journal::MachineLock;
use self::knobs::SysPaths;
use self::plan::PlannedTrial;
use self::scenario::{AudioSource, Scenario, ScenarioFile, ToneSpec};
use self::trial::{Binaries, TrialContext, TrialEnd, TrialRecord};

/// Exit code for bad input (scenario, options).
const EXIT_BAD_INPUT: u8 = 2;
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
    /// Print the plan and the knob changes, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where run directories go (default: <workspace>/results).
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// Use xrun-player and xrun-hackbench from DIR instead of building them.
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
}

/// Arguments of `cargo xtask restore`.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// Also look for journals under DIR (default: <workspace>/results).
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
}

/// `cargo xtask restore`: replays journals left by killed runs.
pub fn restore(args: &RestoreArgs) -> Result<ExitCode> {
    let root = args
        .results_dir
        .clone()
        .unwrap_or_else(store::default_results_root);
    let lock = MachineLock::acquire()?;
    let mut lines = journal::replay_leftovers(&root, &lock)?;
    lines.extend(remove_orphan_tones());
    if lines.is_empty() {
        println!("nothing to restore: no journal left by an interrupted run");
    }
    for l in lines {
        println!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo xtask run`.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    signals::install()?;
    let sys = SysPaths::default();
    let (file, mut scenario) = match scenario::load(&args.scenario) {
        Ok(v) => v,
        Err(e) => return Ok(bad_input(&[e.0])),
    };
    if let Err(msg) = apply_options(args, &mut scenario) {
        return Ok(bad_input(&[msg]));
    }
    let results_root = args
        .results_dir
        .clone()
        .unwrap_or_else(store::default_results_root);
    if args.dry_run {
        return dry_run(&scenario, &args.only, &sys, &results_root);
    }
    let lock = MachineLock::acquire()?;
    let leftovers = journal::replay_leftovers(&results_root, &lock)?;
    for line in leftovers.iter().chain(&remove_orphan_tones()) {
        eprintln!("xtask: {line}");
    }
    let checked = match validate::check_system(scenario, &args.only, &sys) {
        Ok(c) => c,
        Err(errors) => return Ok(bad_input(&errors)),
    };
    for line in &checked.skipped {
        eprintln!("xtask: {line}");
    }
    let scenario = checked.scenario;
    if let Err(e) = crate::deps::ensure(crate::deps::for_run(args.bin_dir.is_some())) {
        return Ok(e.report());
    }
    let needs_load = scenario.configs.iter().any(|c| c.load.is_some());
    let bins = match binaries(args, needs_load) {
        Ok(b) => b,
        // Ctrl-C during the build reaches cargo too; report it as a stop.
        Err(_) if signals::stop_requested().is_some() => {
            eprintln!("xtask: stopped during the build; nothing was changed");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(e) => return Err(e),
    };
    if let Some(sig) = signals::stop_requested() {
        eprintln!("xtask: stopped by signal {sig} before the first trial");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let audio = PreparedAudio::prepare(&scenario)?;
    let run_dir = store::create_run_dir(&results_root, &scenario.name, args.label.as_deref())?;
    let run_dir = std::fs::canonicalize(&run_dir).unwrap_or(run_dir);
    let names: Vec<String> = scenario.configs.iter().map(|c| c.name.clone()).collect();
    let plan = plan::make_plan(&names, scenario.trials, scenario.order);
    let mut manifest = RunManifest {
        schema: RUN_SCHEMA.into(),
        started_at: store::rfc3339(SystemTime::now()),
        label: args.label.clone(),
        scenario_file: file,
        scenario: scenario.clone(),
        skipped: checked.skipped.clone(),
        plan: plan.clone(),
        fingerprint: fingerprint::collect(),
        outcome: None,
    };
    store::write_json(&run_dir.join("run.json"), &manifest)?;
    eprintln!(
        "xtask: {} trials of {} s; results in {}",
        plan.len(),
        scenario.duration.as_secs_f64(),
        run_dir.display()
    );

    let ctx = TrialContext {
        scenario: &scenario,
        sys: &sys,
        run_dir: &run_dir,
        bins: &bins,
        wavs: &audio.files,
        lock: &lock,
    };
    let (finished, mut outcome) = run_plan(&ctx, &plan);
    drop(audio);
    // The summary reads back what is on disk: what a later `compare` sees.
    let records = match summary::Summary::load_records(&run_dir) {
        Ok(r) => r,
        Err(e) => {
            outcome = Outcome::Failed {
                error: format!("{e:#}"),
            };
            Vec::new()
        }
    };
    debug_assert!(records.len() == finished || matches!(outcome, Outcome::Failed { .. }));

    let summary = summary::Summary::build(
        &scenario.name,
        &names,
        scenario.duration.as_secs_f64(),
        &records,
        plan.len() - records.len(),
    );
    let text = summary::render_text(&summary);
    store::write_atomic(&run_dir.join("summary.txt"), text.as_bytes())?;
    store::write_json(&run_dir.join("summary.json"), &summary)?;
    manifest.outcome = Some(outcome.clone());
    store::write_json(&run_dir.join("run.json"), &manifest)?;
    print!("{text}");
    if !records.is_empty() {
        crate::compare::after_run(&run_dir);
    }
    println!("results: {}", run_dir.display());
    Ok(match outcome {
        Outcome::Completed => ExitCode::SUCCESS,
        Outcome::Interrupted { signal } => {
            eprintln!(
                "xtask: interrupted by signal {signal}: knobs restored, {} finished trial(s) kept",
                records.len()
            );
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Outcome::Failed { error } => {
            eprintln!("xtask: {error}");
            ExitCode::FAILURE
        }
    })
}

fn bad_input(lines: &[String]) -> ExitCode {
    for l in lines {
        eprintln!("xtask: {l}");
    }
    ExitCode::from(EXIT_BAD_INPUT)
}

fn apply_options(args: &RunArgs, s: &mut Scenario) -> Result<(), String> {
    if let Some(t) = args.trials {
        if t == 0 {
            return Err("--trials must be at least 1".into());
        }
        s.trials = t;
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

fn binaries(args: &RunArgs, needs_load: bool) -> Result<Binaries> {
    let dir = match &args.bin_dir {
        Some(d) => d.clone(),
        None => {
            eprintln!("xtask: building xrun-player and xrun-hackbench (release)");
            crate::util::build_release_binaries(&["xrunbench-player", "xrunbench-hackbench"])?
        }
    };
    let bins = Binaries {
        player: dir.join("xrun-player"),
        hackbench: dir.join("xrun-hackbench"),
    };
    let needed: &[&PathBuf] = if needs_load {
        &[&bins.player, &bins.hackbench]
    } else {
        &[&bins.player]
    };
    for b in needed {
        if !b.is_file() {
            anyhow::bail!("{} not found", b.display());
        }
    }
    Ok(bins)
}

/// Schema of `run.json`.
pub const RUN_SCHEMA: &str = "xrunbench.run/1";

/// `run.json`: what was asked, planned, and where it ran.
#[derive(Debug, Serialize)]
pub struct RunManifest {
    /// Always [`RUN_SCHEMA`].
    pub schema: String,
    /// Start time (RFC 3339 UTC).
    pub started_at: String,
    /// `--label`.
    pub label: Option<String>,
    /// The scenario file as parsed.
    pub scenario_file: ScenarioFile,
    /// The scenario resolved (defaults filled, overrides merged, options applied).
    pub scenario: Scenario,
    /// Configurations skipped for their kernel.
    pub skipped: Vec<String>,
    /// The plan.
    pub plan: Vec<PlannedTrial>,
    /// The machine.
    pub fingerprint: fingerprint::Fingerprint,
    /// How the run ended (absent while it runs).
    pub outcome: Option<Outcome>,
}

/// How a run ended.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Every planned trial ran.
    Completed,
    /// SIGINT/SIGTERM.
    Interrupted {
        /// The signal.
        signal: i32,
    },
    /// A trial failed; the run stopped there.
    Failed {
        /// Why.
        error: String,
    },
}

/// Runs the plan; stops at the first failure or signal. Knobs are restored
/// inside each trial whatever happens.
fn run_plan(ctx: &TrialContext<'_>, plan: &[PlannedTrial]) -> (usize, Outcome) {
    let mut progress = Progress::new(plan.len(), expected_trial_time(ctx.scenario));
    let mut finished = 0;
    for t in plan {
        if let Some(signal) = signals::stop_requested() {
            progress.finish();
            return (finished, Outcome::Interrupted { signal });
        }
        progress.start(t);
        match trial::run_trial(ctx, t) {
            Ok(TrialEnd::Done(record)) => {
                let path = ctx
                    .run_dir
                    .join("trials")
                    .join(format!("{}.json", t.stem()));
                if let Err(e) = store::write_json(&path, &record) {
                    progress.finish();
                    return (
                        finished,
                        Outcome::Failed {
                            error: format!("{e:#}"),
                        },
                    );
                }
                progress.done(t, &record);
                finished += 1;
            }
            Ok(TrialEnd::Interrupted) => {
                progress.finish();
                let signal = signals::stop_requested().unwrap_or(libc::SIGINT);
                return (finished, Outcome::Interrupted { signal });
            }
            Err(e) => {
                progress.finish();
                return (
                    finished,
                    Outcome::Failed {
                        error: format!("{e:#}"),
                    },
                );
            }
        }
    }
    progress.finish();
    (finished, Outcome::Completed)
}

fn expected_trial_time(s: &Scenario) -> Duration {
    // Player duration, warm-up, and about a second of process start/stop.
    s.duration.to_std() + s.warmup.to_std() + Duration::from_secs(1)
}

/// Trial k/n with an ETA: a redrawn bar on a terminal, plain lines otherwise
/// (CI logs, pipes).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    began: Instant,
    finished: usize,
    expected: Duration,
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
        let msg = format!(
            "trial {}/{} {}, ETA {}",
            t.seq,
            self.total,
            t.stem(),
            self.eta()
        );
        match &self.bar {
            Some(b) => b.set_message(msg),
            None => eprintln!(
                "xtask: trial {}/{} {} starting, ETA {}",
                t.seq,
                self.total,
                t.stem(),
                self.eta()
            ),
        }
    }

    fn done(&mut self, t: &PlannedTrial, r: &TrialRecord) {
        self.finished += 1;
        let line = format!(
            "trial {}/{} {}: {} underrun(s), max gap {:.1} ms, min fill {:.1} ms",
            t.seq,
            self.total,
            t.stem(),
            r.player.totals.count,
            r.player.totals.gap_ms_max,
            r.player.fill.min as f64 / 1000.0
        );
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.inc(1);
            }
            None => eprintln!("xtask: {line}"),
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// The WAV each configuration plays; generated tones live in /dev/shm and
/// are removed when this is dropped (every exit path, panics included).
pub(crate) struct PreparedAudio {
    /// The WAV of each configuration, in scenario order.
    pub(crate) files: Vec<PathBuf>,
    generated: Vec<PathBuf>,
}

impl PreparedAudio {
    /// Writes the tones the scenario generates; names each config's WAV.
    pub(crate) fn prepare(s: &Scenario) -> Result<Self> {
        let mut me = PreparedAudio {
            files: Vec::new(),
            generated: Vec::new(),
        };
        let mut tones: Vec<(ToneSpec, PathBuf)> = Vec::new();
        for c in &s.configs {
            match &c.audio.source {
                AudioSource::File(p) => me.files.push(p.clone()),
                AudioSource::Generate(tone) => {
                    let path = match tones.iter().find(|(t, _)| t == tone) {
                        Some((_, p)) => p.clone(),
                        None => {
                            let p = tmpfs_dir().join(format!(
                                "xrunbench-{}-{}.wav",
                                std::process::id(),
                                tones.len()
                            ));
                            me.generated.push(p.clone());
                            wav::write_tone(&p, tone)?;
                            tones.push((tone.clone(), p.clone()));
                            p
                        }
                    };
                    me.files.push(path);
                }
            }
        }
        Ok(me)
    }
}

impl Drop for PreparedAudio {
    fn drop(&mut self) {
        for p in &self.generated {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Removes generated tones left in tmpfs by runs that were SIGKILLed (their
/// pid is gone). Called under the machine lock, so no live run owns them.
fn remove_orphan_tones() -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(tmpfs_dir()) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("xrunbench-")
            .filter(|_| name.ends_with(".wav"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = Path::new("/proc").join(pid.to_string()).exists();
        if !alive && std::fs::remove_file(e.path()).is_ok() {
            removed.push(format!(
                "removed {} left by a killed run",
                e.path().display()
            ));
        }
    }
    removed
}

fn tmpfs_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// `--dry-run`: the plan, each configuration's knob changes (current value
/// → new value) and command lines. Reads only.
fn dry_run(s: &Scenario, only: &[String], sys: &SysPaths, results_root: &Path) -> Result<ExitCode> {
    let checked = match validate::check_system(s.clone(), only, sys) {
        Ok(c) => c,
        Err(errors) => return Ok(bad_input(&errors)),
    };
    for line in &checked.skipped {
        println!("{line}");
    }
    let s = &checked.scenario;
    let names: Vec<String> = s.configs.iter().map(|c| c.name.clone()).collect();
    let plan = plan::make_plan(&names, s.trials, s.order);
    println!(
        "scenario {} ({}): {} configuration(s) × {} trial(s), {} order, {} s each after {} s warm-up",
        s.name,
        s.path.display(),
        s.configs.len(),
        s.trials,
        match s.order {
            scenario::Order::Interleaved => "interleaved",
            scenario::Order::Blocked => "blocked",
        },
        s.duration.as_secs_f64(),
        s.warmup.as_secs_f64()
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
    for c in &s.configs {
        println!("config {}:", c.name);
        if c.knobs.is_empty() && c.pm_qos_us.is_none() {
            println!("  knobs: none");
        }
        for spec in &c.knobs {
            for w in knobs::expand(spec, sys)? {
                let now = knobs::save(&w)
                    .map(|s| s.restore)
                    .unwrap_or_else(|e| format!("<{e}>"));
                println!(
                    "  {}: {} -> {} (restored to {} after each trial)",
                    w.what, now, w.value, now
                );
            }
        }
        if let Some(us) = c.pm_qos_us {
            println!(
                "  pm_qos_cpu_dma_latency_us: hold {us} us on {} during each trial",
                knobs::PM_QOS_DEVICE
            );
        }
        let wav = match &c.audio.source {
            AudioSource::File(p) => p.clone(),
            AudioSource::Generate(_) => tmpfs_dir().join("xrunbench-<pid>-<n>.wav"),
        };
        let json = Path::new("trials").join(format!(".{}-K.player.json", c.name));
        println!(
            "  player: xrun-player {}",
            trial::player_args(s, c, &wav, &json).join(" ")
        );
        match &c.load {
            Some(l) => {
                let json = Path::new("trials").join(format!(".{}-K.load.json", c.name));
                println!(
                    "  load:   xrun-hackbench {}",
                    trial::load_args(s, l, &json).join(" ")
                );
            }
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
