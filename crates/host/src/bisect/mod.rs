//! `cargo xtask bisect SCENARIO --baseline RUN_DIR`: one step of
//! `git bisect run`. Runs trials of the scenario's configuration one at a
//! time (each by `xrun-trial` on the target, in the run session `run`
//! uses: knobs journaled, read back and restored there), tests
//! them against the baseline's trials after each one with the sequential
//! rule of [`rule`], and exits as git bisect wants:
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | good: no regression beyond the threshold |
//! | 1 | bad: regression beyond the threshold |
//! | 125 | could not test this commit: the scenario does not load or does not fit this machine (kernel mismatch, device or knob missing), the build or a trial failed; or the rule is still undecided at `--max-trials` |
//! | 128 | usage error or unusable baseline (unreadable, too few trials, or a run of another scenario): aborts the whole bisection (it would fail on every commit) |
//! | 130 | interrupted (SIGINT/SIGTERM): aborts the bisection |
//!
//! A measurement never exits ≥ 128.
//!
//! With a deploy command (`[target] deploy`, `--deploy`) the step first
//! builds, installs and boots the commit's kernel and checks it booted
//! ([`deploy`]); infrastructure failures are retried, then skipped, never a
//! verdict ([`step`]). `bisect-run` ([`run`]) drives a whole bisection.

pub mod alternatives;
pub mod deploy;
mod model;
pub mod population;
pub mod posterior;
pub mod rule;
pub mod run;
pub mod sim;
pub mod step;
pub mod trust;
pub mod whole;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use self::deploy::{Deploy, DeployArgs};
use self::rule::Rule;
use self::step::{Goal, StepSpec, EXIT_ABORT, EXIT_INTERRUPTED, EXIT_SKIP};
use crate::run::TargetArgs;
use xrunbench_analysis::compare::metrics::Metric;
use xrunbench_analysis::results::{default_results_root, RunDir};
use xrunbench_lab::signals;
use xrunbench_scenario as scenario;

/// Arguments of `cargo xtask bisect`.
#[derive(clap::Args, Debug)]
pub struct BisectArgs {
    /// The scenario file as it is at the commit under test.
    pub scenario: PathBuf,
    /// A run directory of the known-good state (e.g. `cargo xtask run
    /// SCENARIO --trials 8` at the good commit).
    #[arg(long, value_name = "RUN_DIR")]
    pub baseline: PathBuf,
    /// The configuration to run (default: the scenario's only one).
    #[arg(long, value_name = "CONFIG")]
    pub config: Option<String>,
    /// The baseline's configuration to compare with (default: the same
    /// name, or the baseline's only configuration).
    #[arg(long, value_name = "CONFIG")]
    pub baseline_config: Option<String>,
    /// How a step decides.
    #[command(flatten)]
    pub decision: Decision,
    /// Where the step's run directory goes (default: results/ in the current directory).
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// `--bin-dir`: prebuilt board binaries.
    #[command(flatten)]
    pub bins: crate::target::binaries::BinDirArg,
    /// The bisection's directory (`bisect-run` gives it): the step's run
    /// directory, with its step record, goes to DIR/steps/ (default: a run
    /// directory of its own under --results-dir).
    #[arg(long, value_name = "DIR")]
    pub bisect_dir: Option<PathBuf>,
    /// The board to run on.
    #[command(flatten)]
    pub target: TargetArgs,
    /// How each step deploys the commit's kernel.
    #[command(flatten)]
    pub deploy: DeployArgs,
    /// Or each step's trials as jobs of a LAVA lab (the job file's
    /// `${XRUNBENCH_COMMIT}` replaced by the step's commit).
    #[command(flatten)]
    pub lava: xrunbench_scenario::lava::LavaTargetArgs,
    /// What the step may run on the host and where it may connect, as
    /// `bisect-run` read it at the start (default: as the baseline's
    /// run.json recorded its scenario); a commit whose scenario changes it
    /// is skipped, and none of it runs.
    #[arg(long, value_name = "FILE", hide = true)]
    pub trusted_hooks: Option<PathBuf>,
    /// The step's label under --bisect-dir (`bisect-run`'s endpoints:
    /// `good-<commit>`, `bad-<commit>`); default `step-<commit>`.
    #[arg(skip)]
    pub step_label: Option<String>,
}

/// How a step decides good or bad: the options `bisect` and `bisect-run`
/// share (one declaration, so their names, defaults and checks agree).
#[derive(clap::Args, Debug, Clone)]
pub struct Decision {
    /// The metric that decides.
    #[arg(long, value_enum, default_value_t = Metric::Underruns)]
    pub metric: Metric,
    /// Regression size that counts as bad, percent of the baseline mean
    /// (of one trial's resolution when the baseline is 0). 100 = twice as bad.
    #[arg(long, value_name = "PCT", default_value_t = 100.0)]
    pub threshold: f64,
    /// Most trials per step; still undecided then: skip (125).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_trials: usize,
    /// Probability of each wrong verdict (false bad, false good) allowed.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
}

impl Decision {
    /// One line for the first value out of range.
    pub fn check(&self) -> Result<(), String> {
        if self.max_trials == 0 {
            return Err("--max-trials must be at least 1".into());
        }
        if !(self.threshold > 0.0 && self.threshold.is_finite()) {
            return Err("--threshold must be a positive percentage".into());
        }
        if !(self.alpha > 0.0 && self.alpha < 0.5) {
            return Err("--alpha must be between 0 and 0.5".into());
        }
        Ok(())
    }
}

/// A step that ends without a measurement: exit code and why.
struct Stop(u8, String);

fn skip(msg: impl Into<String>) -> Stop {
    Stop(EXIT_SKIP, msg.into())
}

fn abort(msg: impl Into<String>) -> Stop {
    Stop(EXIT_ABORT, msg.into())
}

/// `cargo xtask bisect`. Never returns an error: every failure is mapped
/// to 125 (skip) or ≥ 128 (abort), so that git bisect never reads a
/// harness problem as "bad".
pub fn run(args: &BisectArgs) -> anyhow::Result<ExitCode> {
    let code = match step(args) {
        Ok(code) => code,
        Err(Stop(code, msg)) => {
            let what = match code {
                EXIT_SKIP => "cannot test this commit (skip)",
                EXIT_INTERRUPTED => "interrupted",
                _ => "aborting the bisection",
            };
            xrunbench_lab::say!(" bisect: {what}: {msg}");
            code
        }
    };
    Ok(ExitCode::from(code))
}

fn step(args: &BisectArgs) -> Result<u8, Stop> {
    let outcome = step_outcome(args)?;
    match outcome.record.decision.why {
        Some(why) if outcome.exit >= EXIT_SKIP => Err(Stop(outcome.exit, why)),
        _ => Ok(outcome.exit),
    }
}

/// The step as it ended, its record with the metric of each trial
/// (`bisect-run`'s search takes the bad endpoint's into its posterior,
/// an undecided one's too).
fn step_outcome(args: &BisectArgs) -> Result<step::StepOutcome, Stop> {
    check_args(args)?;
    signals::install().map_err(|e| abort(format!("{e:#}")))?;
    let base = RunDir::load(&args.baseline).map_err(|e| abort(e.0))?;
    let (file, mut scenario) = scenario::load_from_tree(&args.scenario).map_err(|e| skip(e.0))?;
    args.target.apply(&mut scenario).map_err(abort)?;
    let tree = std::env::current_dir().map_err(|e| abort(format!("the current directory: {e}")))?;
    let trusted = trusted_hooks(args, &base)?;
    trust::HostHooks::of(&scenario, &args.deploy, &args.lava)
        .check(&trusted, &args.scenario)
        .map_err(skip)?;
    let deploy = Deploy::resolve(&scenario, &args.deploy, &tree).map_err(abort)?;
    let config = pick_config(args, &scenario)?;
    let base_config = baseline_config(args, &base, &config)?;
    check_same_scenario(args, &base, &base_config, &scenario, &config)?;
    let baseline = baseline_values(args, &base, &base_config)?;
    // A machine that cannot build or run the binaries fails on every
    // commit alike: abort rather than skip.
    xrunbench_lab::deps::ensure(xrunbench_lab::deps::for_run(
        args.bins.bin_dir.is_some(),
        scenario.runs_on(),
    ))
    .map_err(|e| abort(e.to_string()))?;
    let resolution = args
        .decision
        .metric
        .resolution(scenario.duration.as_secs_f64());
    let rule = Rule::new(
        &baseline,
        args.decision.metric.direction(),
        resolution,
        args.decision.threshold,
        args.decision.alpha,
        args.decision.max_trials,
    );
    print_plan(args, &scenario, &config, &base, &baseline, &rule);
    let (root, group, label) = step_place(args, &tree, &scenario);
    let lava = scenario.lava_lab(&args.lava);
    let spec = StepSpec {
        file,
        scenario,
        config,
        metric: args.decision.metric,
        bin_dir: args.bins.bin_dir.clone(),
        deploy,
        root,
        group,
        label,
        lava,
    };
    let outcome = step::measure(
        &spec,
        &Goal::Decide {
            rule: &rule,
            max_trials: args.decision.max_trials,
        },
    );
    if let Some(dir) = &outcome.run_dir {
        println!("bisect: trials in {}", dir.display());
    }
    Ok(outcome)
}

/// What the trusted hooks are: as `bisect-run` handed them over, else as
/// the baseline's run.json recorded its scenario (none without one).
fn trusted_hooks(args: &BisectArgs, base: &RunDir) -> Result<trust::HostHooks, Stop> {
    Ok(match &args.trusted_hooks {
        Some(path) => trust::HostHooks::read(path).map_err(abort)?,
        None => match &base.manifest {
            Some(m) => trust::HostHooks::of(&m.scenario, &args.deploy, &args.lava),
            None => trust::HostHooks::default(),
        },
    })
}

/// Prints what the step compares with what and how the rule decides,
/// before any trial.
fn print_plan(
    args: &BisectArgs,
    scenario: &scenario::Scenario,
    config: &str,
    base: &RunDir,
    baseline: &[f64],
    rule: &Rule,
) {
    println!(
        "bisect: {} `{config}` vs baseline {} ({} trials, mean {:.3} {} = {}); bad if worse by {}%: \
         bad state mean {:.3}{}; per-look level {} for bad, {} for good; undecided at {} trials = \
         skip",
        scenario.name,
        base.path.display(),
        baseline.len(),
        rule.baseline_mean(),
        args.decision.metric.label(),
        args.decision.metric.describe(),
        args.decision.threshold,
        rule.reference_mean(),
        if rule.sparse() {
            " (sparse baseline: good = fewer than half the trials with any, by a sign test)"
        } else {
            ""
        },
        describe_levels(rule.levels()),
        describe_levels(rule.levels_better()),
        args.decision.max_trials,
    );
}

/// Where the step's run directory goes: root, group and label. Under
/// `--bisect-dir` it is a step of the bisection, named by its commit;
/// alone, a run of its own under the results directory.
fn step_place(
    args: &BisectArgs,
    tree: &Path,
    scenario: &scenario::Scenario,
) -> (PathBuf, String, String) {
    match &args.bisect_dir {
        Some(dir) => {
            let commit =
                xrunbench_lab::util::git_out(tree, &["rev-parse", "HEAD"]).unwrap_or_default();
            let label = args
                .step_label
                .clone()
                .unwrap_or_else(|| format!("step-{}", step::short(&commit)));
            (dir.clone(), "steps".to_string(), label)
        }
        None => (
            args.results_dir
                .clone()
                .unwrap_or_else(default_results_root),
            scenario.name.clone(),
            "bisect".to_string(),
        ),
    }
}

fn check_args(args: &BisectArgs) -> Result<(), Stop> {
    args.decision.check().map_err(abort)
}

fn pick_config(args: &BisectArgs, s: &scenario::Scenario) -> Result<String, Stop> {
    let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
    match &args.config {
        Some(c) if names.contains(&c.as_str()) => Ok(c.clone()),
        // The configuration may not exist at every commit: skip those.
        Some(c) => Err(skip(format!(
            "{}: no configuration `{c}` at this commit (have: {})",
            args.scenario.display(),
            names.join(", ")
        ))),
        None if names.len() == 1 => Ok(names[0].to_string()),
        None => Err(abort(format!(
            "{}: {} configurations ({}): say which with --config",
            args.scenario.display(),
            names.len(),
            names.join(", ")
        ))),
    }
}

/// The baseline's configuration to compare with.
fn baseline_config(args: &BisectArgs, base: &RunDir, config: &str) -> Result<String, Stop> {
    match &args.baseline_config {
        Some(c) => Ok(c.clone()),
        None if base.configs.iter().any(|c| c == config) => Ok(config.to_string()),
        None if base.configs.len() == 1 => Ok(base.configs[0].clone()),
        None => Err(abort(format!(
            "{}: no configuration `{config}` (have: {}): say which with --baseline-config",
            base.path.display(),
            base.configs.join(", ")
        ))),
    }
}

/// Refuses a baseline that ran another experiment: its configuration's
/// [`scenario::ScenarioFingerprint`], from the scenario its `run.json`
/// recorded, must equal this one's. Deciding against it would compare
/// apples with oranges on every commit, so this aborts the bisection.
fn check_same_scenario(
    args: &BisectArgs,
    base: &RunDir,
    base_config: &str,
    scenario: &scenario::Scenario,
    config: &str,
) -> Result<(), Stop> {
    let manifest = base.manifest_path();
    let Some(recorded) = &base.manifest else {
        return Err(abort(format!(
            "{}: not found: the baseline must be a run directory of `{} run`, which \
             records its scenario there",
            manifest.display(),
            xrunbench_lab::util::invocation()
        )));
    };
    let Some(theirs) = recorded.scenario.fingerprint(base_config) else {
        return Err(abort(format!(
            "{}: its scenario has no configuration `{base_config}`: cannot check that the \
             baseline ran the same scenario",
            manifest.display()
        )));
    };
    let ours = scenario.fingerprint(config).ok_or_else(|| {
        abort(format!(
            "{}: no configuration `{config}`",
            args.scenario.display()
        ))
    })?;
    let differ = theirs.differences(&ours);
    if differ.is_empty() {
        return Ok(());
    }
    Err(abort(format!(
        "{}: the baseline ran a different scenario than {} `{config}`: it differs in {}; \
         record a baseline with this scenario",
        base.path.display(),
        args.scenario.display(),
        differ.join(", "),
    )))
}

fn baseline_values(args: &BisectArgs, base: &RunDir, name: &str) -> Result<Vec<f64>, Stop> {
    let values: Vec<f64> = base
        .trials_of(name)
        .iter()
        .filter_map(|t| args.decision.metric.of(t))
        .collect();
    if values.len() < 2 {
        return Err(abort(format!(
            "{}: configuration `{name}` has {} trial(s) with {}; the baseline needs at least 2 \
             (8 or more decide faster)",
            base.path.display(),
            values.len(),
            args.decision.metric.label()
        )));
    }
    Ok(values)
}

fn describe_levels(levels: &[f64]) -> String {
    match levels.iter().position(|l| *l > 0.0) {
        Some(i) => format!("{:.4} from trial {}", levels[i], i + 1),
        None => "none: the baseline is too small to decide before --max-trials".into(),
    }
}
