//! One measured step at the commit checked out in the kernel tree: the
//! deployment ([`super::deploy`]: deploy command, board back, kernel
//! checked), the run session, trials until the goal is met — the rule's
//! verdict for a bisect step, a fixed count for a baseline or a
//! confirmation. Infrastructure failures (deploy failed, board not back,
//! wrong kernel, link lost mid-trial) are retried with the deploy re-run,
//! up to `retries`, then the step is a skip (125): never good, never bad.
//! Trials finished before an infrastructure failure measured this commit's
//! kernel and are kept; a trial lost mid-way is never a sample.
//!
//! Every step leaves a run directory (`run.json`, `trials/`, `deploy.log`)
//! and in it its step record, `step.json`: commit, kernel string seen,
//! each attempt and why it failed, the trials, the decision with its
//! p-values.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use xrunbench_schema::doc::{rfc3339, write_atomic};

use super::deploy::{self, BoardEnd, Deploy, HOOK_SKIP};
use super::rule::{Decision, Look, Rule};
use crate::run::session::{Session, SessionArgs, SetupError, TrialEnd};
use crate::target::hooks::{Hook, HookOutcome};
use xrunbench_analysis::compare::metrics::Metric;
use xrunbench_analysis::results::{Outcome, RunManifest, RunWriter};
use xrunbench_lab::signals;
use xrunbench_lab::util::git_out;
use xrunbench_scenario::plan::PlannedTrial;
use xrunbench_scenario::{Scenario, ScenarioFile};

/// git bisect: good.
pub const EXIT_GOOD: u8 = 0;
/// git bisect: bad.
pub const EXIT_BAD: u8 = 1;
/// git bisect: skip this commit.
pub const EXIT_SKIP: u8 = 125;
/// Aborts `git bisect run` (anything above 127).
pub const EXIT_ABORT: u8 = 128;
/// Interrupted, as a shell reports SIGINT; also aborts the bisection.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Schema of `step.json`.
pub const STEP_SCHEMA: &str = "xrunbench.bisect-step/1";
/// The step record's file name in the step's run directory.
pub const STEP_FILE: &str = "step.json";
/// The deploy command's log in the step's run directory.
pub const DEPLOY_LOG: &str = "deploy.log";

/// What a step measures until.
pub enum Goal<'a> {
    /// Until the rule decides (a bisect step): at most `max_trials`.
    Decide {
        /// The sequential rule against the baseline.
        rule: &'a Rule,
        /// The cap.
        max_trials: usize,
    },
    /// Exactly this many trials (a baseline, a culprit confirmation).
    Fixed(usize),
}

impl Goal<'_> {
    /// The most trials the step runs.
    pub fn cap(&self) -> usize {
        match self {
            Goal::Decide { max_trials, .. } => *max_trials,
            Goal::Fixed(n) => *n,
        }
    }
}

/// Everything one step needs.
pub struct StepSpec {
    /// The scenario as written (at this commit).
    pub file: ScenarioFile,
    /// The scenario resolved, target options applied.
    pub scenario: Scenario,
    /// The configuration measured.
    pub config: String,
    /// The metric recorded (and decided on).
    pub metric: Metric,
    /// Prebuilt board binaries, else built.
    pub bin_dir: Option<PathBuf>,
    /// The deployment.
    pub deploy: Deploy,
    /// A LAVA lab to run the trials on, as jobs, instead of the board.
    pub lava: Option<xrunbench_scenario::lava::LavaTargetArgs>,
    /// The run directory goes to `<root>/<group>/<stamp>-<label>`.
    pub root: PathBuf,
    /// See `root`.
    pub group: String,
    /// The run's label (`run.json`, the directory name).
    pub label: String,
}

/// One attempt at a step, as the record keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attempt {
    /// 1, 2, …
    pub n: u32,
    /// How the deploy command ended (`ok`, `exited 1`); none without
    /// one.
    pub deploy: Option<String>,
    /// `measured`, `infrastructure`, `skip`, `interrupted`.
    pub ended: String,
    /// Why, when it did not measure.
    pub why: Option<String>,
    /// Trials it measured.
    pub trials: usize,
    /// Its duration, s.
    pub seconds: f64,
}

/// The step's decision, with the rule's last look.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDecision {
    /// `good`, `bad`, `skip`, `measured` (a fixed count), `interrupted`.
    pub verdict: String,
    /// The exit code of the step (git bisect's).
    pub exit: u8,
    /// Why, for a skip or an interruption.
    pub why: Option<String>,
    /// One-sided p that the commit is worse than the baseline.
    pub p_worse: Option<f64>,
    /// Its level at the last look.
    pub level: Option<f64>,
    /// One-sided p that the commit is better than the bad state.
    pub p_better: Option<f64>,
    /// Its level at the last look.
    pub level_better: Option<f64>,
}

/// `step.json`: one step of a bisection.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRecord {
    /// [`STEP_SCHEMA`].
    pub schema: String,
    /// The run's label (`step-<commit>`, `good-…`, `parent-…`).
    pub label: String,
    /// The commit measured (`git rev-parse HEAD` in the tree), if a git
    /// tree.
    pub commit: Option<String>,
    /// Its subject line.
    pub subject: Option<String>,
    /// The configuration.
    pub config: String,
    /// The metric.
    pub metric: String,
    /// When the step began (RFC 3339).
    pub started_at: String,
    /// How long it took, s.
    pub seconds: f64,
    /// The string /proc/version had to contain, if checked.
    pub kernel_expected: Option<String>,
    /// The board's /proc/version after the last deployment, if deployed.
    pub kernel_seen: Option<String>,
    /// Each attempt.
    pub attempts: Vec<Attempt>,
    /// The metric of each measured trial, in order.
    pub trials: Vec<f64>,
    /// The decision.
    pub decision: StepDecision,
}

/// How a step ended.
pub struct StepOutcome {
    /// Its exit code ([`EXIT_GOOD`]… for a decision, 0 for a fixed count
    /// measured, 125, 130, 128).
    pub exit: u8,
    /// The run directory, once created.
    pub run_dir: Option<PathBuf>,
    /// The record (also in `run_dir/step.json`).
    pub record: StepRecord,
}

/// How an attempt ended.
enum AttemptEnd {
    /// The goal was met: the exit code and the last look.
    Done(u8, Option<Look>),
    /// Infrastructure: retried.
    Infra(String),
    /// The commit cannot be measured: skip.
    Skip(String),
    /// A signal arrived.
    Interrupted(String),
}

/// What lives across attempts.
struct Progress<'a> {
    spec: &'a StepSpec,
    goal: &'a Goal<'a>,
    out: RunWriter,
    manifest: Option<RunManifest>,
    values: Vec<f64>,
    record: StepRecord,
}

/// Runs the step; see the module documentation.
pub fn measure(spec: &StepSpec, goal: &Goal) -> StepOutcome {
    let started = Instant::now();
    let mut record = new_record(spec);
    let out = match RunWriter::create(&spec.root, &spec.group, Some(&spec.label)) {
        Ok(o) => o,
        Err(e) => {
            record.decision = decided(EXIT_SKIP, Some(format!("{e:#}")), None);
            return StepOutcome {
                exit: EXIT_SKIP,
                run_dir: None,
                record,
            };
        }
    };
    let mut p = Progress {
        spec,
        goal,
        out,
        manifest: None,
        values: Vec::new(),
        record,
    };
    let (exit, why, look) = run_attempts(&mut p);
    let mut record = p.record;
    record.trials = p.values;
    record.seconds = started.elapsed().as_secs_f64();
    record.decision = decided_by(goal, exit, why, look.as_ref());
    let run_dir = p.out.dir().to_path_buf();
    if let Some(m) = p.manifest {
        write_outcome(&p.out, m, exit, &record);
    }
    if let Ok(text) = serde_json::to_string_pretty(&record) {
        if let Err(e) = write_atomic(&run_dir.join(STEP_FILE), text.as_bytes()) {
            xrunbench_lab::say!(" bisect: writing the step record: {e}");
        }
    }
    StepOutcome {
        exit,
        run_dir: Some(run_dir),
        record,
    }
}

/// The step record as it starts: the commit and its subject read from the
/// tree now, nothing measured yet.
fn new_record(spec: &StepSpec) -> StepRecord {
    let tree = &spec.deploy.tree;
    StepRecord {
        schema: STEP_SCHEMA.into(),
        label: spec.label.clone(),
        commit: git_out(tree, &["rev-parse", "HEAD"]),
        subject: git_out(tree, &["log", "-1", "--format=%s"]),
        config: spec.config.clone(),
        metric: spec.metric.label().into(),
        started_at: rfc3339(SystemTime::now()),
        seconds: 0.0,
        kernel_expected: None,
        kernel_seen: None,
        attempts: Vec::new(),
        trials: Vec::new(),
        decision: StepDecision::default(),
    }
}

/// Attempts until one ends the step or the retries run out: the exit
/// code, why (for a skip or an interruption) and the rule's last look.
/// Each attempt is added to the record as it ends.
fn run_attempts(p: &mut Progress) -> (u8, Option<String>, Option<Look>) {
    let spec = p.spec;
    // Without a deployment there is nothing to redo: one attempt.
    let attempts = if spec.deploy.command.is_some() {
        spec.deploy.retries + 1
    } else {
        1
    };
    let mut last_infra = String::new();
    for n in 1..=attempts {
        let t0 = Instant::now();
        let before = p.values.len();
        let (deployed, end) = attempt(p, n);
        let (ended, why) = attempt_ended(&end);
        p.record.attempts.push(Attempt {
            n,
            deploy: deployed,
            ended: ended.into(),
            why,
            trials: p.values.len() - before,
            seconds: t0.elapsed().as_secs_f64(),
        });
        match end {
            AttemptEnd::Done(code, look) => return (code, None, look),
            AttemptEnd::Skip(w) => return (EXIT_SKIP, Some(w), None),
            AttemptEnd::Interrupted(w) => return (EXIT_INTERRUPTED, Some(w), None),
            AttemptEnd::Infra(w) => {
                xrunbench_lab::say!(
                    " bisect: attempt {n} of {attempts}: infrastructure failure, not a \
                     verdict: {w}"
                );
                last_infra = w;
            }
        }
    }
    (
        EXIT_SKIP,
        Some(format!(
            "infrastructure failed {attempts} time(s) (retries {}): {last_infra}",
            spec.deploy.retries
        )),
        None,
    )
}

/// How an attempt ended and why, as its [`Attempt`] records them.
fn attempt_ended(end: &AttemptEnd) -> (&'static str, Option<String>) {
    match end {
        AttemptEnd::Done(..) => ("measured", None),
        AttemptEnd::Infra(w) => ("infrastructure", Some(w.clone())),
        AttemptEnd::Skip(w) => ("skip", Some(w.clone())),
        AttemptEnd::Interrupted(w) => ("interrupted", Some(w.clone())),
    }
}

/// Records in the run's manifest how the step ended and writes it; a
/// failure to write is reported, not fatal (the step record still
/// follows).
fn write_outcome(out: &RunWriter, mut m: RunManifest, exit: u8, record: &StepRecord) {
    m.outcome = Some(match exit {
        EXIT_INTERRUPTED => Outcome::Interrupted {
            signal: signals::stop_requested().unwrap_or(libc::SIGINT),
        },
        EXIT_SKIP | EXIT_ABORT => Outcome::Failed {
            error: record.decision.why.clone().unwrap_or_default(),
        },
        _ => Outcome::Completed,
    });
    if let Err(e) = out.manifest(&m) {
        xrunbench_lab::say!(" bisect: {e:#}");
    }
}

fn decided(exit: u8, why: Option<String>, look: Option<&Look>) -> StepDecision {
    let verdict = match exit {
        EXIT_GOOD => "good",
        EXIT_BAD => "bad",
        EXIT_INTERRUPTED => "interrupted",
        _ => "skip",
    };
    StepDecision {
        verdict: verdict.into(),
        exit,
        why,
        p_worse: look.map(|l| l.p_worse),
        level: look.map(|l| l.level),
        p_better: look.map(|l| l.p_better),
        level_better: look.map(|l| l.level_better),
    }
}

fn decided_by(goal: &Goal, exit: u8, why: Option<String>, look: Option<&Look>) -> StepDecision {
    let mut d = decided(exit, why, look);
    if matches!(goal, Goal::Fixed(_)) && exit == EXIT_GOOD {
        d.verdict = "measured".into();
    }
    d
}

/// One attempt: deploy, board back, session, trials. Returns how the
/// deploy command ended (if any) and how the attempt did.
fn attempt(p: &mut Progress, n: u32) -> (Option<String>, AttemptEnd) {
    let spec = p.spec;
    let d = &spec.deploy;
    let log = p.out.dir().join(DEPLOY_LOG);
    let mut deployed = None;
    if let Some(cmd) = &d.command {
        let commit = p.record.commit.clone().unwrap_or_default();
        deploy::log_line(&log, &format!("attempt {n}: {cmd} (commit {commit})"));
        println!("bisect: deploying {} (attempt {n}): {cmd}", short(&commit));
        let attempt = n.to_string();
        let destination = spec
            .scenario
            .target
            .as_ref()
            .map(|t| t.destination.clone())
            .unwrap_or_default();
        let env = [
            ("XRUNBENCH_COMMIT", commit.as_str()),
            ("XRUNBENCH_ATTEMPT", attempt.as_str()),
            ("XRUNBENCH_TARGET", destination.as_str()),
        ];
        let hook = Hook {
            name: "deploy",
            command: cmd,
            dir: Some(&d.tree),
            env: &env,
            timeout: None,
        };
        match hook.run(&log) {
            HookOutcome::Succeeded => deployed = Some("ok".to_string()),
            HookOutcome::Failed(HOOK_SKIP) => {
                let why = HookOutcome::Failed(HOOK_SKIP).describe();
                return (
                    Some(why),
                    AttemptEnd::Skip(format!(
                        "the deploy command exited {HOOK_SKIP}: this commit cannot be built; \
                         see {}",
                        log.display()
                    )),
                );
            }
            HookOutcome::Interrupted => {
                return (
                    Some("stopped".into()),
                    AttemptEnd::Interrupted("stopped by a signal while deploying".into()),
                )
            }
            other => {
                let why = other.describe();
                return (
                    Some(why.clone()),
                    AttemptEnd::Infra(format!(
                        "the deploy command failed ({why}); see {}",
                        log.display()
                    )),
                );
            }
        }
        let expected = match deploy::expected_kernel(d, &log) {
            Ok(e) => e,
            Err(why) => return (deployed, AttemptEnd::Skip(why)),
        };
        p.record.kernel_expected.clone_from(&expected);
        if spec.lava.is_some() {
            // The lab boots the commit's kernel itself, in each job.
            return (deployed, lab_trials(p));
        }
        if deploy::boots_itself(spec.scenario.target.as_ref()) {
            // A VM lab: the session boots the image the deploy command
            // built; its kernel is checked once it is up.
            return (deployed, session_trials(p));
        }
        match deploy::wait_for_board(
            spec.scenario.target.as_ref(),
            d.boot_timeout,
            expected.as_deref(),
        ) {
            BoardEnd::Up(v) => {
                println!("bisect: the board is up: {v}");
                p.record.kernel_seen = Some(v);
            }
            BoardEnd::Infra(why) => return (deployed, AttemptEnd::Infra(why)),
            BoardEnd::Interrupted => {
                return (
                    deployed,
                    AttemptEnd::Interrupted(
                        "stopped by a signal while waiting for the board".into(),
                    ),
                )
            }
        }
    }
    if spec.lava.is_some() {
        return (deployed, lab_trials(p));
    }
    (deployed, session_trials(p))
}

/// The trials as jobs of a LAVA lab: the step's commit in the job file,
/// the whole count at once (shared over the lab's devices), the records
/// read back; then the rule looks at them in trial order, as if they had
/// come one by one (the trials after its decision are kept, unused).
/// A job the lab did not finish is infrastructure, never a verdict.
fn lab_trials(p: &mut Progress) -> AttemptEnd {
    use xrunbench_lava::submit::{Lab, LabRefused};
    let spec = p.spec;
    let args = spec.lava.as_ref().expect("a lab step has --lava");
    let lab = match Lab::open(args, p.record.commit.as_deref()) {
        Ok(l) => l,
        Err(e) => return AttemptEnd::Skip(format!("{e:#}")),
    };
    let mut s = spec.scenario.clone();
    s.configs.retain(|c| c.name == spec.config);
    s.trials = u32::try_from(p.goal.cap()).unwrap_or(u32::MAX);
    let done = match lab.run(&spec.file, &s, &[]) {
        Ok(d) => d,
        Err(LabRefused::BadInput(why)) => return AttemptEnd::Skip(why),
        Err(LabRefused::Failed(why)) => return AttemptEnd::Infra(why),
    };
    if done.interrupted.is_some() {
        return AttemptEnd::Interrupted("stopped by a signal; the lab's jobs canceled".into());
    }
    if !done.problems.is_empty() {
        return AttemptEnd::Infra(done.problems.join("; "));
    }
    for (_, r) in &done.records {
        let seen = format!("{} {}", r.machine.kernel_release, r.machine.kernel_version);
        if let Some(why) = deploy::wrong_kernel(&seen, p.record.kernel_expected.as_deref()) {
            return AttemptEnd::Infra(why);
        }
        p.record.kernel_seen = Some(seen);
    }
    let brought = xrunbench_lava::results::Brought {
        file: &spec.file,
        scenario: &s,
        records: done.records.into_iter().map(|(_, r)| r).collect(),
        label: &spec.label,
        target: done.target,
        results_root: &spec.root,
    };
    let (manifest, records) = match xrunbench_lava::results::checked(&brought) {
        Ok(v) => v,
        Err(e) => return AttemptEnd::Infra(format!("{e:#}")),
    };
    if let Err(e) = p.out.manifest(&manifest) {
        return AttemptEnd::Skip(format!("{e:#}"));
    }
    p.manifest = Some(manifest);
    for (id, r) in &records {
        if let Err(e) = p.out.trial_record(id, r) {
            return AttemptEnd::Skip(format!("{e:#}"));
        }
    }
    for (k, (_, r)) in records.iter().enumerate() {
        let Some(v) = spec.metric.of(r) else {
            return AttemptEnd::Skip(format!("trial {} has no {}", k + 1, spec.metric.label()));
        };
        if let Some(end) = take_value(p, k + 1, v) {
            return end;
        }
    }
    cap_reached(p.goal)
}

/// Opens the session and runs trials until the goal is met.
fn session_trials(p: &mut Progress) -> AttemptEnd {
    let spec = p.spec;
    let deploying = spec.deploy.command.is_some();
    let mut session = match Session::open(SessionArgs {
        file: spec.file.clone(),
        scenario: spec.scenario.clone(),
        only: std::slice::from_ref(&spec.config),
        bin_dir: spec.bin_dir.clone(),
        read_only: false,
    }) {
        Ok(s) => s,
        Err(SetupError::BadInput(lines)) => return AttemptEnd::Skip(lines.join("; ")),
        Err(SetupError::Interrupted(_)) => {
            return AttemptEnd::Interrupted("stopped by a signal".into())
        }
        Err(SetupError::Failed(e)) if deploying => return AttemptEnd::Infra(format!("{e:#}")),
        Err(SetupError::Failed(e)) => return AttemptEnd::Skip(format!("{e:#}")),
    };
    if deploying && deploy::boots_itself(spec.scenario.target.as_ref()) {
        let m = &session.machine;
        let seen = format!("{} {}", m.kernel_release, m.kernel_version);
        println!("bisect: the guest is up: {seen}");
        p.record.kernel_seen = Some(seen.clone());
        if let Some(why) = deploy::wrong_kernel(&seen, p.record.kernel_expected.as_deref()) {
            session.finish();
            return AttemptEnd::Infra(why);
        }
    }
    if p.manifest.is_none() {
        let m = session.manifest(Some(spec.label.clone()), Vec::new());
        if let Err(e) = p.out.manifest(&m) {
            session.finish();
            return AttemptEnd::Skip(format!("{e:#}"));
        }
        p.manifest = Some(m);
    }
    let end = trials(p, &mut session, deploying);
    session.finish();
    end
}

fn trials(p: &mut Progress, session: &mut Session, deploying: bool) -> AttemptEnd {
    let spec = p.spec;
    let cap = p.goal.cap();
    let run_dir = p.out.dir().to_path_buf();
    while p.values.len() < cap {
        let k = p.values.len() + 1;
        if signals::stop_requested().is_some() {
            return AttemptEnd::Interrupted("stopped by a signal".into());
        }
        let planned = PlannedTrial {
            seq: k,
            config: 0,
            config_name: spec.config.clone(),
            k: k as u32,
        };
        let lost = |why: String| {
            if deploying {
                AttemptEnd::Infra(why)
            } else {
                AttemptEnd::Skip(why)
            }
        };
        let record = match session.run_trial(&planned, &run_dir, &mut |_| {}) {
            Ok(TrialEnd::Done(r)) => r,
            Ok(TrialEnd::Interrupted) => {
                return AttemptEnd::Interrupted("stopped by a signal; knobs restored".into())
            }
            Ok(TrialEnd::Failed(why)) => {
                return AttemptEnd::Skip(format!("trial {k} could not run: {why}"))
            }
            Ok(TrialEnd::Lost(why)) => return lost(format!("trial {k} was lost: {why}")),
            Ok(TrialEnd::Unreachable(why)) => return lost(format!("trial {k}: {why}")),
            Err(e) => return AttemptEnd::Skip(format!("trial {k}: {e:#}")),
        };
        let Some(v) = spec.metric.of(&record) else {
            return AttemptEnd::Skip(format!("trial {k} has no {}", spec.metric.label()));
        };
        if let Some(end) = take_value(p, k, v) {
            return end;
        }
    }
    cap_reached(p.goal)
}

/// Trial `k`'s value into the step: printed, and for a rule, looked at:
/// the step's end once the rule decides.
fn take_value(p: &mut Progress, k: usize, v: f64) -> Option<AttemptEnd> {
    let spec = p.spec;
    p.values.push(v);
    match p.goal {
        Goal::Fixed(n) => {
            println!(
                "bisect: {} trial {k}/{n}: {} {v:.3}",
                spec.label,
                spec.metric.label()
            );
            None
        }
        Goal::Decide { rule, max_trials } => {
            let look = rule.look(&p.values);
            println!(
                "{}",
                explain(k, *max_trials, spec.metric, rule, &p.values, &look)
            );
            match look.decision {
                Decision::Good => Some(AttemptEnd::Done(EXIT_GOOD, Some(look))),
                Decision::Bad => Some(AttemptEnd::Done(EXIT_BAD, Some(look))),
                Decision::Undecided => Some(AttemptEnd::Done(EXIT_SKIP, Some(look))),
                Decision::Continue => None,
            }
        }
    }
}

/// The end of a step whose trials all ran: a fixed count measured; a
/// rule undecided at its cap (at the latest: it decides there).
fn cap_reached(goal: &Goal) -> AttemptEnd {
    match goal {
        Goal::Fixed(_) => AttemptEnd::Done(EXIT_GOOD, None),
        Goal::Decide { .. } => AttemptEnd::Done(EXIT_SKIP, None),
    }
}

/// The first 12 characters of a commit id.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// The per-trial line: value, running mean vs the baseline's and the bad
/// reference's, both p against the level, and the verdict.
pub fn explain(
    k: usize,
    max_trials: usize,
    metric: Metric,
    rule: &Rule,
    values: &[f64],
    look: &Look,
) -> String {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let verdict = match look.decision {
        Decision::Good if look.between() => format!(
            "GOOD (between the two states, nearer the baseline: median better than the \
             midpoint {:.3})",
            rule.midpoint()
        ),
        Decision::Bad if look.between() => format!(
            "BAD (between the two states, nearer the bad one: median not better than the \
             midpoint {:.3})",
            rule.midpoint()
        ),
        Decision::Good => "GOOD (better than the bad state)".to_string(),
        Decision::Bad => "BAD (worse than the baseline)".to_string(),
        Decision::Undecided => format!(
            "UNDECIDED after --max-trials {max_trials}: skip (125), a guess would be a coin \
             toss; more baseline trials or a higher --max-trials decide more often"
        ),
        Decision::Continue if look.level == 0.0 && look.level_better == 0.0 => {
            "continue (too few trials to reach the level yet)".into()
        }
        Decision::Continue => "continue".into(),
    };
    format!(
        "bisect: trial {k}/{max_trials}: {} {:.3}; mean {:.3} vs baseline {:.3}, bad {:.3}; \
         p(worse than baseline) {:.4} (level {:.4}), p(better than bad) {:.4} (level {:.4}): \
         {verdict}",
        metric.label(),
        values[values.len() - 1],
        mean,
        rule.baseline_mean(),
        rule.reference_mean(),
        look.p_worse,
        look.level,
        look.p_better,
        look.level_better,
    )
}
