//! `cargo xtask bisect-run SCENARIO --good G --bad B`, in the kernel tree:
//! the whole bisection as one command.
//!
//! 1. The endpoints first: the baseline is taken at G (with the deploy)
//!    unless one is given — then G must measure good against it; B is
//!    checked against it by the step's rule (at α / 5,
//!    [`posterior::endpoint_alpha`]): shown not worse by the threshold,
//!    there is nothing to bisect and it stops with both figures.
//! 2. The search ([`posterior`]): a posterior over where in G..B the
//!    culprit is, from every trial of every commit, the endpoints' too;
//!    each visit checks out the commit the posterior asks about, deploys
//!    it and runs `--per-visit` trials, until one candidate holds
//!    `--confidence` or `--search-trials` are spent (exit 125). A commit
//!    that cannot be measured (125) joins the next one as a candidate.
//!    The series is G's first-parent line to B (`git rev-list
//!    --first-parent`); `git bisect` itself stays for a step under `git
//!    bisect run` (`bisect`), and the search leaves its verdicts in
//!    `git-bisect.log` for `git bisect replay`.
//! 3. The culprit confirmed with fresh trials of its parent and of it,
//!    look by look (`--confirm-batch` 8 a side a look, up to
//!    `--confirm-trials` 40) and, with `--confirm-revert`, of the bad
//!    commit with the culprit reverted — in a temporary worktree, the
//!    user's tree untouched — tested by [`super::rule::Confirmer`].
//! 4. The report (`report.txt`, `report.md`): the culprit's `git log
//!    --oneline -1`, the posterior, board and kernel fingerprints, the
//!    mmtests-style table of parent vs culprit (vs revert), steps,
//!    trials, total time.
//!
//! The tree goes back to the branch (or commit) it was on, on every way
//! out, Ctrl-C included (the running trial stops and restores the
//! board's knobs itself).
//!
//! Exit: 0 culprit named and confirmed; 1 no culprit (B not worse, G not
//! good, or the confirmation did not hold); 2 bad input; 125 the
//! posterior did not settle on one candidate; 130 interrupted.
//!
//! Everything lands in `results/<scenario>/bisect-<stamp>/`: `steps/`
//! (each visit's run directory with `step.json` and `deploy.log`), the
//! report, `posterior.txt`, `git-bisect.log`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Instant, SystemTime};

use anyhow::Result;
use xrunbench_schema::doc::{utc_stamp, write_atomic};

use super::deploy::{Deploy, DeployArgs};
use super::posterior::{self, Family, Measured, SearchArgs, Series};
use super::rule::{self, ConfirmArgs, Confirmation, Confirmer};
use super::step::{self, short, Goal, StepRecord, StepSpec, STEP_FILE};
use super::trust::HostHooks;
use super::{whole, BisectArgs, Decision, Stop};
use crate::run::TargetArgs;
use xrunbench_analysis::compare::export::{exporter, Format};
use xrunbench_analysis::compare::metrics::Metric;
use xrunbench_analysis::compare::table::Significance;
use xrunbench_analysis::results::{default_results_root, LoadError, RunDir};
use xrunbench_lab::signals;
use xrunbench_lab::util::git_out;
use xrunbench_scenario as scenario;

/// Culprit named and confirmed.
const EXIT_CONFIRMED: u8 = 0;
/// No (confirmed) culprit.
const EXIT_NO_CULPRIT: u8 = 1;
/// Bad input: one line.
const EXIT_BAD_INPUT: u8 = 2;
/// The search ended without one candidate holding the confidence.
const EXIT_UNDECIDED: u8 = 125;
/// SIGINT/SIGTERM.
const EXIT_INTERRUPTED: u8 = 130;

/// Arguments of `cargo xtask bisect-run`.
#[derive(clap::Args, Debug)]
pub struct BisectRunArgs {
    /// The scenario file (a path in the kernel tree is read as it is at
    /// each commit).
    pub scenario: PathBuf,
    /// A commit without the regression.
    #[arg(long, value_name = "COMMIT")]
    pub good: String,
    /// A commit with it.
    #[arg(long, value_name = "COMMIT")]
    pub bad: String,
    /// A run directory of the good state; default: taken at --good.
    #[arg(long, value_name = "RUN_DIR")]
    pub baseline: Option<PathBuf>,
    /// Trials of the baseline taken at --good (default: the scenario's
    /// `trials`).
    #[arg(long, value_name = "N")]
    pub baseline_trials: Option<usize>,
    /// The configuration to run (default: the scenario's only one).
    #[arg(long, value_name = "CONFIG")]
    pub config: Option<String>,
    /// How the endpoints are checked (the good one against a given
    /// baseline, the bad one against the baseline) and the culprit
    /// confirmed.
    #[command(flatten)]
    pub decision: Decision,
    /// How the search goes.
    #[command(flatten)]
    pub search: SearchArgs,
    /// How the culprit is confirmed: fresh trials of it and of its
    /// parent (and of the revert).
    #[command(flatten)]
    pub confirm: ConfirmArgs,
    /// Also measure the bad commit with the culprit reverted (where the
    /// revert applies cleanly), in a temporary worktree.
    #[arg(long)]
    pub confirm_revert: bool,
    /// Where the bisection's directory goes (default: results/ in the current directory).
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// `--bin-dir`: prebuilt board binaries.
    #[command(flatten)]
    pub bins: crate::target::binaries::BinDirArg,
    /// Also write a JUnit XML report (endpoints, bisection, confirmation).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
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
}

/// Why the bisection ended without a culprit to report.
enum End {
    /// Nothing to bisect, or no single commit: one line (exit 1).
    NoCulprit(String),
    /// The posterior did not settle: one line (exit 125).
    Undecided(String),
    /// Bad input: one line (exit 2).
    BadInput(String),
    /// A signal.
    Interrupted,
}

/// The bisection as it goes.
struct Bisection<'a> {
    args: &'a BisectRunArgs,
    /// The kernel tree's top directory.
    top: PathBuf,
    /// The scenario, absolute.
    scenario: PathBuf,
    config: String,
    dir: PathBuf,
    good: String,
    bad: String,
    /// The series: `good`, its first-parent line, `bad`.
    series: Vec<String>,
    /// Each commit's subject.
    subjects: Vec<String>,
    /// The commit this bisection last checked out: the tree must still be
    /// on it.
    at: Option<String>,
    started: Instant,
    /// JUnit cases: (name, failure).
    cases: Vec<(String, Option<String>)>,
    /// What runs on the host, as the scenario said at the start: every
    /// commit's scenario is held to it.
    trusted: HostHooks,
}

/// The hooks every step is held to, in the bisection's directory.
const TRUSTED_HOOKS: &str = "trusted-hooks.json";

/// `cargo xtask bisect-run`.
pub fn run(args: &BisectRunArgs) -> Result<ExitCode> {
    signals::install()?;
    let mut b = match prepare(args) {
        Ok(b) => b,
        Err(line) => {
            xrunbench_lab::say!(" bisect-run: {line}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    println!("bisect-run: the bisection's directory: {}", b.dir.display());
    let result = {
        let _back = ReturnTo::here(&b.top);
        bisection(&mut b)
    };
    let code = match result {
        Ok(confirmed) => {
            if confirmed {
                EXIT_CONFIRMED
            } else {
                EXIT_NO_CULPRIT
            }
        }
        Err(End::NoCulprit(line)) => {
            println!("bisect-run: {line}");
            EXIT_NO_CULPRIT
        }
        Err(End::Undecided(line)) => {
            println!("bisect-run: {line}");
            EXIT_UNDECIDED
        }
        Err(End::BadInput(line)) => {
            xrunbench_lab::say!(" bisect-run: {line}");
            EXIT_BAD_INPUT
        }
        Err(End::Interrupted) => {
            xrunbench_lab::say!(
                " bisect-run: interrupted; the tree is back where it was, knobs restored"
            );
            b.cases
                .push(("interrupted".into(), Some("stopped by a signal".into())));
            EXIT_INTERRUPTED
        }
    };
    if let Some(path) = &args.junit {
        if let Err(e) = write_atomic(
            path,
            xrunbench_analysis::junit::stages(
                "xrunbench bisect-run",
                "bisect-run",
                &b.cases,
                b.started.elapsed(),
            )
            .as_bytes(),
        ) {
            xrunbench_lab::say!(" bisect-run: {}: {e}", path.display());
        }
    }
    Ok(ExitCode::from(code))
}

/// Checks out, when dropped, the branch (or the commit) the tree was on
/// when the bisection began: every way out of it.
struct ReturnTo {
    top: PathBuf,
    to: Option<String>,
}

impl ReturnTo {
    fn here(top: &Path) -> ReturnTo {
        let to = git_out(top, &["symbolic-ref", "-q", "--short", "HEAD"])
            .or_else(|| git_out(top, &["rev-parse", "HEAD"]));
        ReturnTo {
            top: top.to_path_buf(),
            to,
        }
    }
}

impl Drop for ReturnTo {
    fn drop(&mut self) {
        let Some(to) = &self.to else { return };
        let o = Command::new("git")
            .current_dir(&self.top)
            .args(["checkout", "-q", to])
            .stdin(Stdio::null())
            .output();
        match o {
            Ok(o) if o.status.success() => println!("bisect-run: the tree is back on {to}"),
            Ok(o) => xrunbench_lab::say!(
                " bisect-run: git checkout {to} failed: {}; check it out yourself",
                crate::target::run::last(&o.stderr)
            ),
            Err(e) => {
                xrunbench_lab::say!(" bisect-run: git checkout {to}: {e}; check it out yourself")
            }
        }
    }
}

/// The series from `good` to `bad`: `good`, then `bad`'s first-parent
/// line down to it, oldest first, each commit with its subject; `good`
/// must be on that line.
fn series(top: &Path, good: &str, bad: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let listed = git_out(
        top,
        &[
            "log",
            "--reverse",
            "--first-parent",
            "--format=%H %s",
            &format!("{good}..{bad}"),
        ],
    )
    .ok_or("git log failed")?;
    let good_subject = git_out(top, &["log", "-1", "--format=%s", good]).unwrap_or_default();
    let (ids, subjects): (Vec<String>, Vec<String>) =
        std::iter::once((good.to_string(), good_subject))
            .chain(listed.lines().map(|l| {
                let (id, subject) = l.split_once(' ').unwrap_or((l, ""));
                (id.to_string(), subject.to_string())
            }))
            .unzip();
    let oldest = ids.get(1).ok_or("--bad is --good: nothing to bisect")?;
    if git_out(top, &["rev-parse", &format!("{oldest}^1")]).as_deref() != Some(good) {
        return Err(format!(
            "--good {} is not on the first-parent line of --bad {}: bisect-run searches a \
             linear series; bisect across the merge with `git bisect run {} bisect …`",
            short(good),
            short(bad),
            xrunbench_lab::util::invocation()
        ));
    }
    Ok((ids, subjects))
}

/// Checks the command line, the tree and the scenario; creates the
/// bisection's directory.
fn prepare(args: &BisectRunArgs) -> Result<Bisection<'_>, String> {
    let here = std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?;
    let top = git_out(&here, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .ok_or("not in a git work tree: run bisect-run in the kernel tree")?;
    if git_out(&top, &["bisect", "log"]).is_some() {
        return Err("a bisection is already in progress here: `git bisect reset` first".into());
    }
    let rev = |name: &str, c: &str| {
        git_out(
            &top,
            &["rev-parse", "--verify", "-q", &format!("{c}^{{commit}}")],
        )
        .ok_or(format!("--{name} {c}: not a commit of this repository"))
    };
    let good = rev("good", &args.good)?;
    let bad = rev("bad", &args.bad)?;
    if git_out(&top, &["merge-base", "--is-ancestor", &good, &bad]).is_none() {
        return Err(format!(
            "--good {} is not an ancestor of --bad {}",
            args.good, args.bad
        ));
    }
    args.decision.check()?;
    args.search.check()?;
    let (series, subjects) = series(&top, &good, &bad)?;
    args.confirm.check()?;
    if args.baseline_trials == Some(1) {
        return Err("--baseline-trials 1: expected at least 2 trials".into());
    }
    let scenario = here.join(&args.scenario);
    let (_, mut s) = scenario::load(&scenario).map_err(|e| e.0)?;
    args.target.apply(&mut s)?;
    Deploy::resolve(&s, &args.deploy, &top)?;
    let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
    let config = match &args.config {
        Some(c) if names.contains(&c.as_str()) => c.clone(),
        Some(c) => {
            return Err(format!(
                "{}: no configuration `{c}` (have: {})",
                scenario.display(),
                names.join(", ")
            ))
        }
        None if names.len() == 1 => names[0].to_string(),
        None => {
            return Err(format!(
                "{}: {} configurations ({}): say which with --config",
                scenario.display(),
                names.len(),
                names.join(", ")
            ))
        }
    };
    xrunbench_lab::deps::ensure(xrunbench_lab::deps::for_run(
        args.bins.bin_dir.is_some(),
        s.runs_on(),
    ))
    .map_err(|e| e.to_string())?;
    let root = args
        .results_dir
        .clone()
        .unwrap_or_else(default_results_root)
        .join(&s.name);
    let dir = fresh_dir(&root, &format!("bisect-{}", utc_stamp(SystemTime::now())))?;
    // What runs on the host, as the scenario says it now: every step
    // holds its commit's scenario to it.
    let trusted = HostHooks::of(&s, &args.deploy, &args.lava);
    trusted
        .write(&dir.join(TRUSTED_HOOKS))
        .map_err(|e| format!("{e:#}"))?;
    Ok(Bisection {
        args,
        top,
        scenario,
        config,
        dir,
        good,
        bad,
        series,
        subjects,
        at: None,
        started: Instant::now(),
        cases: Vec::new(),
        trusted,
    })
}

/// `root/name`, or `root/name.N` when taken; created, absolute.
fn fresh_dir(root: &Path, name: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    for n in 0..100 {
        let d = match n {
            0 => root.join(name),
            n => root.join(format!("{name}.{n}")),
        };
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(std::fs::canonicalize(&d).unwrap_or(d)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating {}: {e}", d.display())),
        }
    }
    Err(format!(
        "no fresh directory {name} under {}",
        root.display()
    ))
}

/// Steps 1 to 4; `Ok(confirmed)` once the report is written.
fn bisection(b: &mut Bisection) -> Result<bool, End> {
    // 1. The endpoints.
    let baseline = good_endpoint(b)?;
    let (base_values, seconds) = values_of(b, &baseline)?;
    print_expectation(b, &baseline);
    let bad_values = bad_endpoint(b, &baseline, &base_values)?;
    // 2. The search.
    let (family, mut series) = start_search(b, seconds, &base_values, &bad_values);
    let out = posterior::search(&mut series, family, b.args.search.plan(), |i, k, post| {
        visit(b, i, k, post.bad_probability(i))
    })?;
    let table = posterior_table(b, &series, &out);
    println!("{table}");
    let _ = write_atomic(&b.dir.join("posterior.txt"), table.as_bytes());
    let Some(g) = out.found else {
        let why = format!(
            "no commit holds {:.0} % of the posterior ({}; {} trials in {} visits): no \
             culprit named",
            100.0 * b.args.search.confidence,
            out.why.unwrap_or_default(),
            out.trials,
            out.visits
        );
        b.cases.push(("bisection".into(), Some(why.clone())));
        return Err(End::Undecided(why));
    };
    let culprit = b.series[g.last].clone();
    write_replay_log(b, &series, g.last);
    let oneline = git_out(&b.top, &["log", "--oneline", "-1", &culprit]).unwrap_or_default();
    println!("{culprit} is the first bad commit");
    if !g.single() {
        println!(
            "bisect-run: or one of the commits before it that could not be measured: {}",
            b.series[g.first..g.last]
                .iter()
                .map(|c| short(c))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    println!(
        "bisect-run: first bad commit: {oneline} (posterior {:.3})",
        g.mass
    );
    b.cases.push(("bisection".into(), None));
    // 3. The confirmation, against the last commit before the candidate
    // (its parent, unless the parent could not be measured).
    let parent = b.series[g.first - 1].clone();
    let confirmer = confirmer(b, seconds);
    let (mut parents, mut culprits) = (Vec::new(), Vec::new());
    let seq = confirmer.run(|look, n| {
        let (p, c) = confirmation_look(b, (&parent, &culprit), look, n)?;
        let values = (values_of(b, &p)?.0, values_of(b, &c)?.0);
        parents.push(p);
        culprits.push(c);
        Ok(values)
    })?;
    let revert = if b.args.confirm_revert {
        Some(measure_revert(b, &culprit, seq.culprit.len())?)
    } else {
        None
    };
    // 4. The report.
    let measured = ConfirmationDirs {
        parents,
        culprits,
        revert,
    };
    report(b, &oneline, &table, &confirmer, &measured)
}

/// The confirmation's options for this bisection (its trials are `seconds`
/// long).
fn confirmer(b: &Bisection, seconds: f64) -> Confirmer {
    let d = &b.args.decision;
    Confirmer {
        direction: d.metric.direction(),
        resolution: d.metric.resolution(seconds),
        threshold_pct: d.threshold,
        alpha: d.alpha,
        plan: b.args.confirm.plan(),
    }
}

/// One look's trials of the confirmation: `n` of the parent, then `n` of
/// the culprit, each deployed; their run directories.
fn confirmation_look(
    b: &mut Bisection,
    (parent, culprit): (&str, &str),
    look: usize,
    n: usize,
) -> Result<(PathBuf, PathBuf), End> {
    let suffix = if look == 1 {
        String::new()
    } else {
        format!("-{look}")
    };
    let (top, scen) = (b.top.clone(), b.scenario.clone());
    checkout(b, parent)?;
    let label = format!("parent-{}{suffix}", short(parent));
    let p = measure_fixed(b, &top, &scen, &label, n)?;
    checkout(b, culprit)?;
    let label = format!("culprit-{}{suffix}", short(culprit));
    let c = measure_fixed(b, &top, &scen, &label, n)?;
    Ok((p, c))
}

/// The confirmation's run directories: one per look and side, and the
/// revert's.
struct ConfirmationDirs {
    parents: Vec<PathBuf>,
    culprits: Vec<PathBuf>,
    revert: Option<Result<PathBuf, String>>,
}

/// The baseline at the good commit: taken there, or the one given, which
/// the good commit must measure good against.
fn good_endpoint(b: &mut Bisection) -> Result<PathBuf, End> {
    checkout(b, &b.good.clone())?;
    match &b.args.baseline {
        Some(d) => {
            RunDir::load(d).map_err(|e| End::BadInput(e.0))?;
            let (code, _, _) = decide(b, &format!("good-{}", short(&b.good)), d, None)?;
            endpoint(b, "good", code, 0, None)?;
            Ok(d.clone())
        }
        None => {
            let n = match b.args.baseline_trials {
                Some(n) => n,
                None => load_here(b, &b.top, &b.scenario)?.1.trials as usize,
            };
            let label = format!("baseline-{}", short(&b.good));
            let dir = measure_fixed(b, &b.top.clone(), &b.scenario.clone(), &label, n.max(2))?;
            println!(
                "bisect-run: the baseline taken at the good commit {}: {}",
                short(&b.good),
                dir.display()
            );
            b.cases.push(("endpoint good (baseline)".into(), None));
            Ok(dir)
        }
    }
}

/// The bad commit checked against the baseline ([`posterior::nothing_to_bisect`]):
/// its trials when there is something to bisect.
fn bad_endpoint(b: &mut Bisection, baseline: &Path, base_values: &[f64]) -> Result<Vec<f64>, End> {
    checkout(b, &b.bad.clone())?;
    let alpha = posterior::endpoint_alpha(b.args.decision.alpha);
    let label = format!("bad-{}", short(&b.bad));
    let (code, bad_values, p_worse) = decide(b, &label, baseline, Some(alpha))?;
    let figures = figures(b, base_values, &bad_values);
    let undecided = code == super::step::EXIT_SKIP && !bad_values.is_empty();
    let lean = p_worse.unwrap_or(1.0);
    if undecided && posterior::nothing_to_bisect(rule::Decision::Undecided, lean) {
        let why = format!(
            "the bad commit {} is not worse than the baseline ({figures}; p(worse) {:.3}): there \
             is nothing to bisect",
            short(&b.bad),
            lean
        );
        b.cases.push(("endpoint bad".into(), Some(why.clone())));
        return Err(End::NoCulprit(why));
    }
    if undecided {
        println!(
            "bisect-run: the bad commit {} is not yet shown worse ({figures}); the search goes \
             on, and the confirmation decides",
            short(&b.bad)
        );
        b.cases.push(("endpoint bad".into(), None));
    } else {
        endpoint(b, "bad", code, 1, Some(&figures))?;
    }
    Ok(bad_values)
}

/// The metric of each trial of the configuration in a run directory, and
/// its trials' length (s).
fn values_of(b: &Bisection, dir: &Path) -> Result<(Vec<f64>, f64), End> {
    let run = RunDir::load(dir).map_err(|e| End::BadInput(e.0))?;
    let config = if run.configs.contains(&b.config) || run.configs.len() != 1 {
        b.config.clone()
    } else {
        run.configs[0].clone()
    };
    let values = run
        .trials_of(&config)
        .iter()
        .filter_map(|t| b.args.decision.metric.of(t))
        .collect();
    Ok((values, run.trial_seconds))
}

/// Both endpoints' figures, for the lines that stop or go on.
fn figures(b: &Bisection, base: &[f64], bad: &[f64]) -> String {
    let d = |v: &[f64]| {
        xrunbench_analysis::stats::Describe::of(v).map_or("no trials".to_string(), |d| {
            format!("mean {:.2} over {} trials", d.mean, v.len())
        })
    };
    format!(
        "{}: baseline {}, bad commit {}",
        b.args.decision.metric.label(),
        d(base),
        d(bad)
    )
}

/// The search's model for trials of `seconds`, and its series, the
/// endpoints' trials in it.
fn start_search(b: &Bisection, seconds: f64, base: &[f64], bad: &[f64]) -> (Family, Series) {
    let metric = b.args.decision.metric;
    let family = Family::of(metric, metric.resolution(seconds));
    let n = b.series.len() - 1;
    let mut series = Series::new(n);
    series.add(0, base);
    series.add(n, bad);
    println!(
        "bisect-run: searching {} commits ({}; --confidence {}, {} trials a visit, at most {})",
        n,
        family.describe(),
        b.args.search.confidence,
        b.args.search.per_visit,
        b.args.search.search_trials
    );
    (family, series)
}

/// One visit of the search: commit `i` of the series checked out,
/// deployed and measured `k` times.
fn visit(b: &mut Bisection, i: usize, k: usize, p_bad: f64) -> Result<Measured, End> {
    let commit = b.series[i].clone();
    println!(
        "bisect-run: {} (commit {i} of {}, P(bad) {p_bad:.3}): {k} trials",
        short(&commit),
        b.series.len() - 1
    );
    checkout(b, &commit)?;
    let (top, scen) = (b.top.clone(), b.scenario.clone());
    let label = format!("step-{}", short(&commit));
    let (file, s) = match load_here(b, &top, &scen) {
        Ok(x) => x,
        Err(End::NoCulprit(why)) => {
            println!("bisect-run: {}: cannot be measured: {why}", short(&commit));
            return Ok(Measured::Unusable);
        }
        Err(e) => return Err(e),
    };
    let spec = step_spec(b, &top, file, s, label)?;
    let out = step::measure(&spec, &Goal::Fixed(k));
    match out.exit {
        0 => Ok(Measured::Trials(out.record.trials)),
        super::step::EXIT_INTERRUPTED => Err(End::Interrupted),
        _ => {
            println!(
                "bisect-run: {}: cannot be measured: {}",
                short(&commit),
                out.record.decision.why.unwrap_or_default()
            );
            Ok(Measured::Unusable)
        }
    }
}

/// A step of this bisection in `tree`, with the scenario as it is there:
/// its run directory under `steps/` as `label`.
fn step_spec(
    b: &Bisection,
    tree: &Path,
    file: scenario::ScenarioFile,
    s: scenario::Scenario,
    label: String,
) -> Result<StepSpec, End> {
    let deploy = Deploy::resolve(&s, &b.args.deploy, tree).map_err(End::BadInput)?;
    let lava = s.lava_lab(&b.args.lava);
    Ok(StepSpec {
        file,
        scenario: s,
        config: b.config.clone(),
        metric: b.args.decision.metric,
        bin_dir: b.args.bins.bin_dir.clone(),
        deploy,
        root: b.dir.clone(),
        group: "steps".into(),
        label,
        lava,
    })
}

/// The posterior as the report shows it: the model, then every commit
/// measured or holding any mass, oldest first, with its mass, its chance
/// of being bad and its trials; the candidate named marked.
fn posterior_table(b: &Bisection, series: &Series, out: &posterior::Outcome) -> String {
    let p = &out.posterior;
    let unit = b.args.decision.metric.label();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "posterior ({}, spread {:.2}): good level {:.2} {unit}, bad level {:.2} {unit}; {} \
         trials in {} visits",
        p.fit.family.describe(),
        p.fit.spread,
        p.fit.good_mean,
        p.fit.bad_mean,
        out.trials,
        out.visits
    );
    let _ = writeln!(s, "  mass  P(bad) trials  commit");
    let named = out.found.as_ref().map(|g| g.first..=g.last);
    for (i, c) in b.series.iter().enumerate() {
        let n = series.trials(i).len();
        if n == 0 && p.mass[i] < 0.001 && !series.unusable(i) {
            continue;
        }
        let subject = &b.subjects[i];
        let mark = match (&named, series.unusable(i)) {
            (Some(r), _) if r.contains(&i) => "<",
            (_, true) => "125",
            _ => "",
        };
        let line = format!(
            "  {:.3} {:.3} {n:>6}  {} {subject}",
            p.mass[i],
            p.bad_probability(i),
            short(c)
        );
        let line: String = line.chars().take(76).collect();
        let _ = writeln!(s, "{line} {mark}");
    }
    s
}

/// `git-bisect.log`: the search's verdicts as `git bisect replay` reads
/// them — each measured commit good before the culprit and bad from it,
/// the unmeasurable ones skipped. The bad ones come newest first: git
/// keeps one bad ref, the last one marked, which must be the culprit.
fn write_replay_log(b: &Bisection, series: &Series, culprit: usize) {
    let measured = |i: &usize| series.unusable(*i) || !series.trials(*i).is_empty();
    let before = (0..culprit).filter(measured);
    let from = (culprit..b.series.len()).rev().filter(measured);
    let mut log = String::from("git bisect start\n");
    for i in before.chain(from) {
        let verdict = match (series.unusable(i), i >= culprit) {
            (true, _) => "skip",
            (false, true) => "bad",
            (false, false) => "good",
        };
        let c = &b.series[i];
        let _ = write!(
            log,
            "# {verdict}: [{c}] {}\ngit bisect {verdict} {c}\n",
            b.subjects[i]
        );
    }
    let c = &b.series[culprit];
    let _ = writeln!(log, "# first bad commit: [{c}] {}", b.subjects[culprit]);
    let _ = write_atomic(&b.dir.join("git-bisect.log"), log.as_bytes());
}

/// An endpoint's verdict: `want` (0 good, 1 bad), else the end.
fn endpoint(
    b: &mut Bisection,
    which: &str,
    code: u8,
    want: u8,
    figures: Option<&str>,
) -> Result<(), End> {
    let (commit, other) = if which == "good" {
        (&b.good, "bad")
    } else {
        (&b.bad, "good")
    };
    let why = match code {
        c if c == want => {
            println!(
                "bisect-run: the {which} commit {} measured {which}",
                short(commit)
            );
            b.cases.push((format!("endpoint {which}"), None));
            return Ok(());
        }
        super::step::EXIT_INTERRUPTED => return Err(End::Interrupted),
        0 | 1 if which == "bad" => format!(
            "the bad commit {} is not worse than the baseline by the threshold (measured \
             {other}; {}): there is nothing to bisect",
            short(commit),
            figures.unwrap_or_default()
        ),
        0 | 1 => format!(
            "the good commit {} is worse than the baseline (measured {other}): the baseline is \
             not of this good state",
            short(commit)
        ),
        _ => format!(
            "the {which} commit {} could not be measured (step exit {code}): see {}",
            short(commit),
            b.dir.join("steps").display()
        ),
    };
    b.cases
        .push((format!("endpoint {which}"), Some(why.clone())));
    Err(End::NoCulprit(why))
}

/// `git checkout` of `commit` (detached, as git bisect does), after
/// checking that the tree is still where this bisection left it.
fn checkout(b: &mut Bisection, commit: &str) -> Result<(), End> {
    if signals::stop_requested().is_some() {
        return Err(End::Interrupted);
    }
    if let Some(at) = &b.at {
        let head = git_out(&b.top, &["rev-parse", "HEAD"]).unwrap_or_default();
        if head != *at {
            return Err(End::BadInput(format!(
                "the tree changed under the search: HEAD is {}, this bisection left it at {}",
                short(&head),
                short(at)
            )));
        }
    }
    let o = Command::new("git")
        .current_dir(&b.top)
        .args(["checkout", "-q", "--detach", commit])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| End::BadInput(format!("git checkout: {e}")))?;
    if !o.status.success() {
        return Err(End::BadInput(format!(
            "git checkout {}: {}",
            short(commit),
            crate::target::run::last(&o.stderr)
        )));
    }
    b.at = git_out(&b.top, &["rev-parse", "HEAD"]);
    Ok(())
}

/// The scenario at the commit checked out in `tree`, target options
/// applied.
fn load_here(
    b: &Bisection,
    tree: &Path,
    path: &Path,
) -> Result<(scenario::ScenarioFile, scenario::Scenario), End> {
    let (file, mut s) = scenario::load_from_tree(path).map_err(|e| End::NoCulprit(e.0))?;
    b.args.target.apply(&mut s).map_err(End::BadInput)?;
    // A revert is measured in a worktree of its own: its files stand for
    // the tree's.
    HostHooks::of(&s, &b.args.deploy, &b.args.lava)
        .moved(tree, &b.top)
        .check(&b.trusted, path)
        .map_err(End::NoCulprit)?;
    Ok((file, s))
}

/// One bisect step in this process (the endpoints), at `alpha` if given:
/// its exit code, the metric of each trial it measured and its last
/// p (worse than the baseline).
fn decide(
    b: &Bisection,
    label: &str,
    baseline: &Path,
    alpha: Option<f64>,
) -> Result<(u8, Vec<f64>, Option<f64>), End> {
    let mut a = step_args(b, baseline, Some(label.to_string()));
    if let Some(alpha) = alpha {
        a.decision.alpha = alpha;
    }
    match super::step_outcome(&a) {
        Ok(out) if out.exit == super::step::EXIT_INTERRUPTED => Err(End::Interrupted),
        Ok(out) => {
            if let Some(why) = out.record.decision.why.as_deref() {
                xrunbench_lab::say!(" bisect-run: {label}: {why}");
            }
            Ok((out.exit, out.record.trials, out.record.decision.p_worse))
        }
        Err(Stop(super::step::EXIT_INTERRUPTED, _)) => Err(End::Interrupted),
        Err(Stop(code, msg)) => {
            xrunbench_lab::say!(" bisect-run: {label}: {msg}");
            Ok((code, Vec::new(), None))
        }
    }
}

/// The arguments of a step of this bisection.
fn step_args(b: &Bisection, baseline: &Path, label: Option<String>) -> BisectArgs {
    let a = b.args;
    BisectArgs {
        scenario: b.scenario.clone(),
        baseline: baseline.to_path_buf(),
        config: Some(b.config.clone()),
        baseline_config: None,
        decision: a.decision.clone(),
        results_dir: a.results_dir.clone(),
        bins: a.bins.clone(),
        bisect_dir: Some(b.dir.clone()),
        target: a.target.clone(),
        deploy: a.deploy.clone(),
        lava: a.lava.clone(),
        trusted_hooks: Some(b.dir.join(TRUSTED_HOOKS)),
        step_label: label,
    }
}

/// `n` trials at the commit checked out in `tree` (a baseline, a
/// confirmation), deployed; the run directory.
fn measure_fixed(
    b: &mut Bisection,
    tree: &Path,
    scenario_path: &Path,
    label: &str,
    n: usize,
) -> Result<PathBuf, End> {
    let (file, s) = load_here(b, tree, scenario_path)?;
    let spec = step_spec(b, tree, file, s, label.to_string())?;
    println!("bisect-run: {label}: {n} trials");
    let out = step::measure(&spec, &Goal::Fixed(n));
    match (out.exit, out.run_dir) {
        (0, Some(dir)) => Ok(dir),
        (super::step::EXIT_INTERRUPTED, _) => Err(End::Interrupted),
        (_, _) => {
            let why = format!(
                "{label}: could not measure: {}",
                out.record.decision.why.unwrap_or_default()
            );
            b.cases.push((label.into(), Some(why.clone())));
            Err(End::NoCulprit(why))
        }
    }
}

/// The bad commit with the culprit reverted, `n` trials measured in a
/// temporary worktree (removed afterwards); `Err` text when the revert
/// does not apply cleanly.
fn measure_revert(
    b: &mut Bisection,
    culprit: &str,
    n: usize,
) -> Result<Result<PathBuf, String>, End> {
    let tmp = tempfile::Builder::new()
        .prefix("xrunbench-revert-")
        .tempdir()
        .map_err(|e| End::BadInput(format!("a temporary directory: {e}")))?;
    let wt = tmp.path().join("tree");
    let git = |dir: &Path, args: &[&str]| {
        Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=xrunbench",
                "-c",
                "user.email=xrunbench@localhost",
            ])
            .args(args)
            .stdin(Stdio::null())
            .output()
    };
    let wt_text = wt.display().to_string();
    let added = git(
        &b.top,
        &["worktree", "add", "-q", "--detach", &wt_text, &b.bad],
    );
    if !added.as_ref().is_ok_and(|o| o.status.success()) {
        return Ok(Err("git worktree add failed".into()));
    }
    let result = match git(&wt, &["revert", "--no-edit", culprit]) {
        Ok(o) if o.status.success() => {
            let scen = match b.scenario.strip_prefix(&b.top) {
                Ok(rel) => wt.join(rel),
                Err(_) => b.scenario.clone(),
            };
            let label = format!("revert-{}", short(culprit));
            measure_fixed(b, &wt, &scen, &label, n).map(Ok)
        }
        _ => {
            let _ = git(&wt, &["revert", "--abort"]);
            Ok(Err(format!(
                "the revert of {} does not apply cleanly on {}",
                short(culprit),
                short(&b.bad)
            )))
        }
    };
    let _ = git(&b.top, &["worktree", "remove", "--force", &wt_text]);
    let _ = git(&b.top, &["worktree", "prune"]);
    result
}

/// The step records of the bisection, in time order.
fn step_records(dir: &Path) -> Vec<StepRecord> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir.join("steps"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.iter()
        .filter_map(|d| std::fs::read_to_string(d.join(STEP_FILE)).ok())
        .filter_map(|t| serde_json::from_str(&t).ok())
        .collect()
}

/// Before the bisection: how often one with these settings names the
/// right culprit, at the spread the baseline showed (`bisect-sim
/// --bisections` with the model fitted to it). Underrun counts only: the
/// model is a count model.
fn print_expectation(b: &Bisection, baseline: &Path) {
    if b.args.decision.metric != Metric::Underruns {
        return;
    }
    let Ok(run) = RunDir::load(baseline) else {
        return;
    };
    // The metric is a rate; the model counts events per trial.
    let counts: Vec<f64> = run
        .trials_of(&b.config)
        .iter()
        .filter_map(|t| t.player.as_ref().map(|p| p.totals.count as f64))
        .collect();
    let commits = b.series.len() - 1;
    let d = &b.args.decision;
    match whole::expect_from_baseline(
        &counts,
        commits,
        d.threshold,
        d.max_trials,
        d.alpha,
        b.args.confirm,
        b.args.search,
    ) {
        Some(e) => {
            let t = &e.tally;
            println!(
                "bisect-run: at the baseline's spread ({:.1} underruns a trial, shape {:.1}) a \
                 bisection of {commits} commits with these settings names the right culprit and \
                 confirms it in {:.0} % of simulated runs, a wrong one in {:.1} %, none in \
                 {:.0} %, in {:.0} trials on average (cargo xtask bisect-sim --bisections \
                 {commits} --mean {:.1} --shape {:.1} … for more)",
                e.mean,
                e.shape,
                100.0 * t.rate(t.right),
                100.0 * t.rate(t.wrong),
                100.0 * t.rate(t.none),
                t.rate(t.trials),
                e.mean,
                e.shape,
            );
        }
        None => println!(
            "bisect-run: no expectation weighed: the baseline has under half an underrun a \
             trial (or too few trials) to fit the model to"
        ),
    }
}

/// Writes and prints the report; whether the culprit was confirmed.
fn report(
    b: &mut Bisection,
    oneline: &str,
    posterior: &str,
    confirmer: &Confirmer,
    measured: &ConfirmationDirs,
) -> Result<bool, End> {
    let load = |paths: &[PathBuf]| -> Result<RunDir, End> {
        let mut dirs = paths.iter().map(|p| RunDir::load(p));
        let first = dirs
            .next()
            .unwrap_or_else(|| Err(LoadError("the confirmation measured nothing".into())));
        dirs.fold(first, |all, d| Ok(all?.with_trials_of(d?)))
            .map_err(|e| End::NoCulprit(e.0))
    };
    let revert = measured.revert.as_ref();
    let mut dirs = vec![load(&measured.parents)?, load(&measured.culprits)?];
    if let Some(Ok(r)) = revert {
        dirs.push(load(std::slice::from_ref(r))?);
    }
    let values = |d: &RunDir| -> Vec<f64> {
        d.trials_of(&b.config)
            .iter()
            .filter_map(|t| b.args.decision.metric.of(t))
            .collect()
    };
    let (parent, culprit) = (values(&dirs[0]), values(&dirs[1]));
    let looks = measured.parents.len();
    let c = confirmer.look(looks, &parent, &culprit, dirs.get(2).map(values).as_deref());
    let verdict = verdict_line(c.verdict);
    let revert_line = revert_line(revert, &c);
    let tail = tally_line(b);
    let board = board_line(&dirs[1]);
    let kernels = kernel_lines(&dirs);
    let table = xrunbench_analysis::compare::build(
        &dirs,
        Significance::Mwu,
        xrunbench_analysis::compare::ALPHA,
    );
    let sizes = (culprit.len(), looks);
    let head = |md: bool| report_head(b, oneline, verdict, (&c, sizes), &revert_line, md);
    let text = format!(
        "{}\n{}\nkernels:\n{}\n\n{}\n{}\n{}",
        wrap(&head(false)),
        wrap(&format!("board: {board}")),
        wrap(&kernels.join("\n")),
        exporter(Format::Text).render(&table),
        wrap(posterior),
        wrap(&tail),
    );
    let md = format!(
        "{}\nboard: {board}\n\nkernels:\n\n```\n{}\n```\n\n{}\n```\n{posterior}```\n\n{tail}",
        head(true),
        kernels.join("\n"),
        exporter(Format::Markdown).render(&table)
    );
    write_reports(&b.dir, &text, &md)?;
    println!("\n{text}");
    println!(
        "bisect-run: report in {}",
        b.dir.join("report.txt").display()
    );
    let ok = c.verdict == Confirmation::Confirmed;
    b.cases.push((
        "culprit confirmation".into(),
        (!ok).then(|| verdict.to_string()),
    ));
    Ok(ok)
}

/// The report's verdict line: what the confirmation showed about the
/// culprit.
fn verdict_line(verdict: Confirmation) -> &'static str {
    match verdict {
        Confirmation::Confirmed => "CONFIRMED: the culprit is worse than its parent",
        Confirmation::Refuted => {
            "REFUTED: the culprit is not worse than its parent; a step was wrong"
        }
        Confirmation::Inconclusive => "INCONCLUSIVE: neither shown with these trials",
        Confirmation::RevertDoesNotHelp => {
            "NOT CONFIRMED: the culprit is worse than its parent, but reverting it does not help"
        }
    }
}

/// The report's line on the revert: its p-value when it was measured,
/// else why not.
fn revert_line(revert: Option<&Result<PathBuf, String>>, c: &rule::Confirmed) -> String {
    match revert {
        None => "revert: not measured (--confirm-revert)".to_string(),
        Some(Err(why)) => format!("revert: not measured: {why}"),
        Some(Ok(_)) => format!(
            "revert on the bad commit: p(better than the culprit) {:.4}",
            c.p_revert_better.unwrap_or(1.0)
        ),
    }
}

/// The report's last paragraph: endpoints, steps (skips among them),
/// trials, infrastructure failures and the time the whole bisection took,
/// counted from the step records on disk.
fn tally_line(b: &Bisection) -> String {
    let steps = step_records(&b.dir);
    let visits: Vec<&StepRecord> = steps
        .iter()
        .filter(|s| s.label.starts_with("step-"))
        .collect();
    let skipped = visits
        .iter()
        .filter(|s| s.decision.verdict == "skip")
        .count();
    let trials: usize = steps.iter().map(|s| s.trials.len()).sum();
    let infra: usize = steps
        .iter()
        .flat_map(|s| &s.attempts)
        .filter(|a| a.ended == "infrastructure")
        .count();
    let total = b.started.elapsed().as_secs();
    format!(
        "good {}, bad {}; {} search visits ({skipped} could not be measured), {} steps in all \
         with the endpoints and the confirmation; {trials} trials; {infra} infrastructure \
         failures retried; total time {}h{:02}m{:02}s\n",
        short(&b.good),
        short(&b.bad),
        visits.len(),
        steps.len(),
        total / 3600,
        total / 60 % 60,
        total % 60
    )
}

/// The board the culprit ran on, from its run's manifest (`unknown`
/// without one).
fn board_line(culprit: &RunDir) -> String {
    let m = culprit.manifest.as_ref().map(|m| m.fingerprint.clone());
    m.as_ref().map_or_else(
        || "unknown".to_string(),
        |f| {
            format!(
                "{} ({}, {} x {} CPUs, {})",
                f.hostname,
                f.board_model
                    .clone()
                    .unwrap_or_else(|| "no device-tree model".into()),
                f.cpu_model,
                f.cpu_count,
                f.arch
            )
        },
    )
}

/// One line per measured run: its label and the kernel its first trial
/// saw.
fn kernel_lines(dirs: &[RunDir]) -> Vec<String> {
    dirs.iter()
        .map(|d| {
            let k = d.records.first().map_or_else(
                || "unknown".to_string(),
                |r| format!("{} {}", r.machine.kernel_release, r.machine.kernel_version),
            );
            format!("  {:<22} {k}", d.label)
        })
        .collect()
}

/// The report's head: the culprit, the verdict with its p-values, the
/// revert line; `md` bolds the culprit for the Markdown report.
fn report_head(
    b: &Bisection,
    oneline: &str,
    verdict: &str,
    (c, (n, looks)): (&rule::Confirmed, (usize, usize)),
    revert_line: &str,
    md: bool,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}first bad commit: {oneline}{}",
        if md { "**" } else { "" },
        if md { "**" } else { "" }
    );
    let _ = writeln!(
        s,
        "{verdict} ({} vs its parent, {n} fresh trials each, {looks} {}: p(worse) {:.4} at \
         level {:.4}, p(better than the bad state) {:.4} at level {:.4}; alpha {} over the \
         looks)",
        b.args.decision.metric.label(),
        if looks == 1 { "look" } else { "looks" },
        c.p_culprit_worse,
        c.levels.worse,
        c.p_culprit_better,
        c.levels.better,
        b.args.decision.alpha
    );
    let _ = writeln!(s, "{revert_line}");
    s
}

/// Writes `report.txt` and `report.md` to the bisection's directory, in
/// that order; the first that fails ends the bisection as bad input.
fn write_reports(dir: &Path, text: &str, md: &str) -> Result<(), End> {
    for (name, body) in [("report.txt", text), ("report.md", md)] {
        write_atomic(&dir.join(name), body.as_bytes())
            .map_err(|e| End::BadInput(format!("writing {name}: {e}")))?;
    }
    Ok(())
}

/// `text` with every line wrapped at 80 columns (the mail's width), the
/// continuation indented.
fn wrap(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut cur = String::new();
        for word in line.split(' ') {
            if !cur.is_empty() && cur.len() + 1 + word.len() > 80 {
                out.push_str(&cur);
                out.push('\n');
                cur = format!("  {word}");
            } else {
                if !cur.is_empty() {
                    cur.push(' ');
                }
                cur.push_str(word);
            }
        }
        out.push_str(&cur);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_fit_a_mail() {
        let long = "word ".repeat(40);
        let w = wrap(&format!("{long}\nshort"));
        assert!(w.lines().all(|l| l.len() <= 80), "{w}");
        assert!(w.ends_with("\nshort\n"), "{w}");
    }
}
