//! `cargo xtask bisect-run SCENARIO --good G --bad B`, in the kernel tree:
//! the whole bisection as one command (issue 12 §2).
//!
//! 1. The endpoints first: the baseline is taken at G (with the deploy)
//!    unless one is given — then G must measure good against it; B must
//!    measure bad, else there is nothing to bisect and it stops.
//! 2. `git bisect start B G`, `git bisect run` with `cargo xtask bisect`
//!    itself as the step (this binary, so git reads its exit codes as they
//!    are: 0 good, 1 bad, 125 skip, ≥ 128 abort).
//! 3. The culprit confirmed with fresh trials of it and its parent
//!    (`--confirm-trials`, 8) and, with `--confirm-revert`, of the bad
//!    commit with the culprit reverted — in a temporary worktree, the
//!    user's tree untouched — tested by [`super::rule::confirm`].
//! 4. The report (`report.txt`, `report.md`): the culprit's `git log
//!    --oneline -1`, board and kernel fingerprints, the mmtests-style
//!    table of parent vs culprit (vs revert), steps, trials, total time.
//!
//! `git bisect reset` on every way out, Ctrl-C included (the running
//! trial stops and restores the board's knobs itself).
//!
//! Exit: 0 culprit named and confirmed; 1 no culprit (B not worse, G not
//! good, no single commit, or the confirmation did not hold); 2 bad input;
//! 130 interrupted.
//!
//! Everything lands in `results/<scenario>/bisect-<stamp>/`: `steps/`
//! (each step's run directory with `step.json` and `deploy.log`), the
//! report, `git-bisect.log`.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use xrunbench_schema::doc::{utc_stamp, write_atomic};

use super::deploy::{Deploy, DeployArgs};
use super::rule::{self, Confirmation, CONFIRM_TRIALS};
use super::step::{self, git_out, short, Goal, StepRecord, StepSpec, STEP_FILE};
use super::trust::HostHooks;
use super::{whole, BisectArgs, Decision, Stop};
use crate::compare::export::{exporter, Format};
use crate::compare::metrics::Metric;
use crate::compare::table::Significance;
use crate::results::{default_results_root, RunDir};
use crate::run::{scenario, signals, TargetArgs};
use crate::target::hooks::{kill_group, wait_group_gone};

/// Culprit named and confirmed.
const EXIT_CONFIRMED: u8 = 0;
/// No (confirmed) culprit.
const EXIT_NO_CULPRIT: u8 = 1;
/// Bad input: one line.
const EXIT_BAD_INPUT: u8 = 2;
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
    /// How each step decides.
    #[command(flatten)]
    pub decision: Decision,
    /// Fresh trials of the culprit and of its parent (and of the revert).
    #[arg(long, value_name = "N", default_value_t = CONFIRM_TRIALS)]
    pub confirm_trials: usize,
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
    pub lava: crate::lava::submit::LavaTargetArgs,
}

/// Why the bisection ended without a culprit to report.
enum End {
    /// Nothing to bisect, or no single commit: one line (exit 1).
    NoCulprit(String),
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
            crate::say!(" bisect-run: {line}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    println!("bisect-run: the bisection's directory: {}", b.dir.display());
    let start = Command::new("git")
        .current_dir(&b.top)
        .args(["bisect", "start", &b.bad, &b.good])
        .output()
        .context("running git")?;
    if !start.status.success() {
        crate::say!(
            " bisect-run: git bisect start {} {} failed: {}",
            short(&b.bad),
            short(&b.good),
            crate::target::last(&start.stderr)
        );
        return Ok(ExitCode::from(EXIT_BAD_INPUT));
    }
    let result = {
        let _reset = BisectReset(b.top.clone());
        let out = String::from_utf8_lossy(&start.stdout).into_owned();
        bisection(&mut b, &out)
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
        Err(End::BadInput(line)) => {
            crate::say!(" bisect-run: {line}");
            EXIT_BAD_INPUT
        }
        Err(End::Interrupted) => {
            crate::say!(" bisect-run: interrupted; git bisect reset done, knobs restored");
            b.cases
                .push(("interrupted".into(), Some("stopped by a signal".into())));
            EXIT_INTERRUPTED
        }
    };
    if let Some(path) = &args.junit {
        if let Err(e) = write_atomic(
            path,
            crate::junit::stages(
                "xrunbench bisect-run",
                "bisect-run",
                &b.cases,
                b.started.elapsed(),
            )
            .as_bytes(),
        ) {
            crate::say!(" bisect-run: {}: {e}", path.display());
        }
    }
    Ok(ExitCode::from(code))
}

/// `git bisect reset` when dropped: every way out of the bisection.
struct BisectReset(PathBuf);

impl Drop for BisectReset {
    fn drop(&mut self) {
        let o = Command::new("git")
            .current_dir(&self.0)
            .args(["bisect", "reset"])
            .stdin(Stdio::null())
            .output();
        match o {
            Ok(o) if o.status.success() => println!("bisect-run: git bisect reset"),
            Ok(o) => crate::say!(
                " bisect-run: git bisect reset failed: {}; run it yourself",
                crate::target::last(&o.stderr)
            ),
            Err(e) => crate::say!(" bisect-run: git bisect reset: {e}; run it yourself"),
        }
    }
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
    if args.confirm_trials < 2 || args.baseline_trials == Some(1) {
        return Err("--confirm-trials and --baseline-trials must be at least 2".into());
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
    crate::deps::ensure(crate::deps::for_run(
        args.bins.bin_dir.is_some(),
        s.target.as_ref(),
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

/// The commit `git bisect` names in `text`: `<id> is the first bad commit`.
fn first_bad(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (id, rest) = l.split_once(' ')?;
        (rest.trim() == "is the first bad commit" && id.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| id.to_string())
    })
}

/// Steps 1 to 4; `Ok(confirmed)` once the report is written.
fn bisection(b: &mut Bisection, started: &str) -> Result<bool, End> {
    let midpoint = git_out(&b.top, &["rev-parse", "HEAD"]);
    let named_at_start = first_bad(started);
    // 1. The endpoints.
    checkout(b, &b.good.clone())?;
    let baseline = match &b.args.baseline {
        Some(d) => {
            RunDir::load(d).map_err(|e| End::BadInput(e.0))?;
            let code = decide(b, &format!("good-{}", short(&b.good)), d)?;
            endpoint(b, "good", code, 0)?;
            d.clone()
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
            dir
        }
    };
    print_expectation(b, &baseline);
    checkout(b, &b.bad.clone())?;
    let code = decide(b, &format!("bad-{}", short(&b.bad)), &baseline)?;
    endpoint(b, "bad", code, 1)?;
    // 2. The bisection.
    let culprit = match named_at_start {
        Some(c) => c,
        None => {
            if let Some(m) = &midpoint {
                checkout(b, m)?;
            }
            git_bisect_run(b, &baseline)?
        }
    };
    let oneline = git_out(&b.top, &["log", "--oneline", "-1", &culprit]).unwrap_or_default();
    println!("bisect-run: first bad commit: {oneline}");
    b.cases.push(("bisection".into(), None));
    // 3. The confirmation.
    let parent = git_out(&b.top, &["rev-parse", &format!("{culprit}^")])
        .ok_or_else(|| End::NoCulprit(format!("{oneline}: a root commit has no parent")))?;
    let n = b.args.confirm_trials;
    checkout(b, &parent)?;
    let (top, scen) = (b.top.clone(), b.scenario.clone());
    let parent_dir = measure_fixed(b, &top, &scen, &format!("parent-{}", short(&parent)), n)?;
    checkout(b, &culprit)?;
    let culprit_dir = measure_fixed(b, &top, &scen, &format!("culprit-{}", short(&culprit)), n)?;
    let revert = if b.args.confirm_revert {
        Some(measure_revert(b, &culprit)?)
    } else {
        None
    };
    // 4. The report.
    let confirmed = report(b, &oneline, &parent_dir, &culprit_dir, revert.as_ref())?;
    Ok(confirmed)
}

/// An endpoint's verdict: `want` (0 good, 1 bad), else the end.
fn endpoint(b: &mut Bisection, which: &str, code: u8, want: u8) -> Result<(), End> {
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
            "the bad commit {} is not worse than the baseline (measured {other}): there is \
             nothing to bisect",
            short(commit)
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

/// `git checkout` of `commit` (detached, as git bisect does).
fn checkout(b: &Bisection, commit: &str) -> Result<(), End> {
    if signals::stop_requested().is_some() {
        return Err(End::Interrupted);
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
            crate::target::last(&o.stderr)
        )));
    }
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

/// One bisect step in this process (the endpoints): its exit code.
fn decide(b: &Bisection, label: &str, baseline: &Path) -> Result<u8, End> {
    let a = step_args(b, baseline, Some(label.to_string()));
    match super::step(&a) {
        Ok(code) => Ok(code),
        Err(Stop(super::step::EXIT_INTERRUPTED, _)) => Err(End::Interrupted),
        Err(Stop(code, msg)) => {
            crate::say!(" bisect-run: {label}: {msg}");
            Ok(code)
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

/// The same step as a command line of this binary, for `git bisect run`.
fn step_command_line(b: &Bisection, baseline: &Path) -> Result<Vec<String>, End> {
    let a = b.args;
    let exe =
        std::env::current_exe().map_err(|e| End::BadInput(format!("finding this program: {e}")))?;
    let path = |p: &Path| p.display().to_string();
    let mut v = vec![
        path(&exe),
        "bisect".into(),
        path(&b.scenario),
        "--baseline".into(),
        path(baseline),
        "--bisect-dir".into(),
        path(&b.dir),
        "--config".into(),
        b.config.clone(),
        "--trusted-hooks".into(),
        path(&b.dir.join(TRUSTED_HOOKS)),
    ];
    v.extend(a.decision.to_args());
    let mut opt = |name: &str, value: Option<String>| {
        if let Some(x) = value {
            v.push(name.into());
            v.push(x);
        }
    };
    opt("--results-dir", a.results_dir.as_deref().map(path));
    opt("--bin-dir", a.bins.bin_dir.as_deref().map(path));
    opt("--target", a.target.target.clone());
    for o in &a.target.ssh_options {
        opt("--ssh-option", Some(o.clone()));
    }
    opt("--deploy", a.deploy.deploy.clone());
    opt(
        "--boot-timeout",
        a.deploy.boot_timeout.map(|s| s.to_string()),
    );
    opt("--expect-kernel", a.deploy.expect_kernel.clone());
    opt("--retries", a.deploy.retries.map(|r| r.to_string()));
    // The lab's token goes by its file or the environment the step
    // inherits, never on a command line.
    if a.lava.lava.is_some() {
        opt("--lava", a.lava.lava.clone());
        opt("--lava-job", a.lava.lava_job.as_deref().map(path));
        opt("--lava-devices", Some(a.lava.lava_devices.to_string()));
        opt(
            "--lava-token-file",
            a.lava.lava_token_file.as_deref().map(path),
        );
    }
    Ok(v)
}

/// `git bisect run` with this binary's `bisect` as the step, in a process
/// group of its own: on Ctrl-C we pass SIGINT on to it and wait until
/// every process of that group (the step restoring the board's knobs) is
/// gone. Its output is shown and kept in `git-bisect.log`. Returns the
/// first bad commit.
fn git_bisect_run(b: &Bisection, baseline: &Path) -> Result<String, End> {
    let line = step_command_line(b, baseline)?;
    let mut child = Command::new("git")
        .current_dir(&b.top)
        .args(["bisect", "run"])
        .args(&line)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| End::BadInput(format!("git bisect run: {e}")))?;
    let pgid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
    }
    let mut text = String::new();
    let mut forwarded = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                println!("{l}");
                text.push_str(&l);
                text.push('\n');
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if !forwarded && signals::stop_requested().is_some() {
            kill_group(pgid, libc::SIGINT);
            forwarded = true;
        }
    }
    let _ = child.wait();
    let _ = std::fs::write(b.dir.join("git-bisect.log"), &text);
    if forwarded || signals::stop_requested().is_some() {
        wait_group_gone(pgid);
        return Err(End::Interrupted);
    }
    first_bad(&text).ok_or_else(|| {
        let why = text
            .lines()
            .skip_while(|l| !l.contains("could be any of"))
            .take_while(|l| !l.contains("We cannot bisect more"))
            .collect::<Vec<_>>()
            .join(" ");
        End::NoCulprit(if why.is_empty() {
            format!(
                "git bisect run named no commit: see {}",
                b.dir.join("git-bisect.log").display()
            )
        } else {
            format!("git bisect run could not name one commit (commits skipped): {why}")
        })
    })
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
    let deploy = Deploy::resolve(&s, &b.args.deploy, tree).map_err(End::BadInput)?;
    println!("bisect-run: {label}: {n} trials");
    let lava = b.args.lava.or_scenario(&s);
    let spec = StepSpec {
        file,
        scenario: s,
        config: b.config.clone(),
        metric: b.args.decision.metric,
        bin_dir: b.args.bins.bin_dir.clone(),
        deploy,
        root: b.dir.clone(),
        group: "steps".into(),
        label: label.into(),
        lava,
    };
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

/// The bad commit with the culprit reverted, measured in a temporary
/// worktree (removed afterwards); `Err` text when the revert does not
/// apply cleanly.
fn measure_revert(b: &mut Bisection, culprit: &str) -> Result<Result<PathBuf, String>, End> {
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
            measure_fixed(b, &wt, &scen, &label, b.args.confirm_trials).map(Ok)
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
    let commits = git_out(
        &b.top,
        &["rev-list", "--count", &format!("{}..{}", b.good, b.bad)],
    )
    .and_then(|n| n.parse::<usize>().ok())
    .unwrap_or(0);
    let d = &b.args.decision;
    match whole::expect_from_baseline(
        &counts,
        commits,
        d.threshold,
        d.max_trials,
        d.alpha,
        b.args.confirm_trials,
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
    parent: &Path,
    culprit: &Path,
    revert: Option<&Result<PathBuf, String>>,
) -> Result<bool, End> {
    let mut dirs = vec![
        RunDir::load(parent).map_err(|e| End::NoCulprit(e.0))?,
        RunDir::load(culprit).map_err(|e| End::NoCulprit(e.0))?,
    ];
    if let Some(Ok(r)) = revert {
        dirs.push(RunDir::load(r).map_err(|e| End::NoCulprit(e.0))?);
    }
    let values = |d: &RunDir| -> Vec<f64> {
        d.trials_of(&b.config)
            .iter()
            .filter_map(|t| b.args.decision.metric.of(t))
            .collect()
    };
    let seconds = dirs[0].trial_seconds;
    let c = rule::confirm(
        &values(&dirs[0]),
        &values(&dirs[1]),
        dirs.get(2).map(values).as_deref(),
        b.args.decision.metric.direction(),
        b.args.decision.metric.resolution(seconds),
        b.args.decision.threshold,
        b.args.decision.alpha,
    );
    let verdict = verdict_line(c.verdict);
    let revert_line = revert_line(revert, &c);
    let tail = tally_line(b);
    let board = board_line(&dirs[1]);
    let kernels = kernel_lines(&dirs);
    let table = crate::compare::build(&dirs, Significance::Mwu, crate::compare::ALPHA);
    let head = |md: bool| report_head(b, oneline, verdict, &c, &revert_line, md);
    let text = format!(
        "{}\n{}\nkernels:\n{}\n\n{}\n{}",
        wrap(&head(false)),
        wrap(&format!("board: {board}")),
        wrap(&kernels.join("\n")),
        exporter(Format::Text).render(&table),
        wrap(&tail),
    );
    let md = format!(
        "{}\nboard: {board}\n\nkernels:\n\n```\n{}\n```\n\n{}\n{tail}",
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
    let bisect_steps: Vec<&StepRecord> = steps
        .iter()
        .filter(|s| s.label.starts_with("step-"))
        .collect();
    let skipped = bisect_steps
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
        "good {}, bad {}; {} bisect steps ({skipped} skipped), {} steps in all with the \
         endpoints and the confirmation; {trials} trials; {infra} infrastructure failures \
         retried; total time {}h{:02}m{:02}s\n",
        short(&b.good),
        short(&b.bad),
        bisect_steps.len(),
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
    c: &rule::Confirmed,
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
        "{verdict} ({} vs its parent, {} fresh trials each: p(worse) {:.4}, p(better than \
         the bad state) {:.4}, alpha {})",
        b.args.decision.metric.label(),
        b.args.confirm_trials,
        c.p_culprit_worse,
        c.p_culprit_better,
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
    fn the_first_bad_commit_is_read_from_git_bisect() {
        let id = "0123456789abcdef0123456789abcdef01234567";
        let out = format!("running ...\n{id} is the first bad commit\ncommit {id}\n");
        assert_eq!(first_bad(&out).as_deref(), Some(id));
        assert_eq!(
            first_bad("There are only 'skip'ped commits left to test."),
            None
        );
    }

    #[test]
    fn report_lines_fit_a_mail() {
        let long = "word ".repeat(40);
        let w = wrap(&format!("{long}\nshort"));
        assert!(w.lines().all(|l| l.len() <= 80), "{w}");
        assert!(w.ends_with("\nshort\n"), "{w}");
    }
}
