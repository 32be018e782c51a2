//! `cargo xtask run SCENARIO --lava URL --lava-job FILE`: a scenario's
//! trials run as jobs of a LAVA lab, on as many devices at once as asked.
//!
//! The lab's own part of a job — its device type, tags, deploy and boot,
//! which differ from lab to lab — is the user's job file; this adds an
//! `interactive` test that types the definition's script into the
//! device's shell (base64, in lines a console takes), runs it, and reads
//! the trial records back out of the job's log. An `interactive` test
//! needs no overlay disk (which a QEMU device builds with libguestfs) and
//! no `lava-test-shell` on the device: any console with a shell prompt
//! will do.
//!
//! The trials are shared out by trial number (device 1 runs trials 1, 3,
//! 5 … of every configuration, interleaved as `run` does, device 2 runs
//! 2, 4, 6 …), so every configuration sees every device alike, and a
//! device effect can be told apart from a configuration effect: when one
//! configuration's trials differ from one device to another, it is said.
//!
//! The outcome is read from each job's health and our own records, never
//! from an exit status. A job that ends Incomplete or Canceled is the
//! lab's failure, not the scenario's: it is submitted again, up to
//! [`RETRIES`] times, then reported.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_norway::{Mapping, Value};
use xrunbench_schema::doc::one_line;
use xrunbench_schema::metrics::Metric;
use xrunbench_schema::trial::TrialRecord;

use super::definition::{script, test_minutes};
use super::results::{parse_log, write_run, Brought};
use super::server::{Job, JobHealth, JobState, Server, ServerError, Token};
use xrunbench_analysis::gate::Gate;
use xrunbench_scenario::lava::{LavaTargetArgs, TOKEN_ENV};
use xrunbench_scenario::plan::{make_plan, PlannedTrial};
use xrunbench_scenario::{Scenario, ScenarioFile};

/// The environment variable holding the lab's API token when no
/// In the job file, replaced by a bisect step's commit (the deploy
/// command puts that commit's kernel where the URL says).
pub const COMMIT_PLACEHOLDER: &str = "${XRUNBENCH_COMMIT}";
/// Times a job that ended Incomplete or Canceled is submitted again.
pub const RETRIES: usize = 1;
/// Base64 characters per line typed into the device's shell: a console's
/// line editor takes 1024 (busybox's default), a tty 4095.
const CHUNK: usize = 512;
/// Where the script goes on the device.
const SCRIPT_B64: &str = "/tmp/xrunbench-run.b64";
/// See [`SCRIPT_B64`].
const SCRIPT: &str = "/tmp/xrunbench-run.sh";
/// The script's own directory (`$(pwd)/xrunbench`, run in /tmp).
const WORK: &str = "/tmp/xrunbench";
/// How often the jobs are read while they wait and run.
const POLL: Duration = Duration::from_secs(2);
/// Minutes a job may wait in the lab's queue before this gives up on it,
/// beyond its own timeout.
const QUEUE_MINUTES: u64 = 120;
/// Minutes of the lab's deploy and boot when the job file gives no job
/// timeout.
const BOOT_MINUTES: u64 = 10;

/// One share of the trials: the job that runs it, and its tries.
struct Share {
    /// The trials, in plan order.
    trials: Vec<PlannedTrial>,
    /// The job definition (YAML).
    job: String,
    /// Its job timeout, minutes.
    minutes: u64,
    /// The job now running it, if submitted.
    id: Option<u64>,
    /// Submissions so far.
    tries: usize,
    /// The job that ran it to its end (Complete), once there is one.
    done: Option<Job>,
    /// Why it has no Complete job, once it is given up.
    failed: Option<String>,
}

/// A lab to run trials on: its server, the user's part of every job,
/// how many jobs at once.
pub struct Lab {
    server: Server,
    template: Mapping,
    template_path: PathBuf,
    devices: usize,
}

/// What a lab's jobs brought back.
pub struct LabRun {
    /// Every record read back, with the device that ran it.
    pub records: Vec<(String, TrialRecord)>,
    /// What went wrong: a job given up, a log not read, a record refused
    /// (one line each, said already).
    pub problems: Vec<String>,
    /// The signal that stopped the run (the jobs were canceled).
    pub interrupted: Option<i32>,
    /// `lava URL: job 12 on qemu01 (a-1 b-1), …`: where each share ran.
    pub target: String,
}

/// Why no job ran.
pub enum LabRefused {
    /// The input (token, job file, the jobs) was refused: exit 2.
    BadInput(String),
    /// The lab could not be reached or did not take the jobs: exit 1.
    Failed(String),
}

impl Lab {
    /// The lab `args` name, its job file read with `${XRUNBENCH_COMMIT}`
    /// replaced by `commit` (a bisect step's: where the deploy command
    /// put that commit's kernel for the lab to fetch); an error is one
    /// line.
    pub fn open(args: &LavaTargetArgs, commit: Option<&str>) -> Result<Lab> {
        let url = args.lava.as_deref().unwrap_or_default();
        let token = token(args)?;
        let server = Server::new(url, Some(token)).map_err(|e| anyhow::anyhow!("--lava: {e}"))?;
        let template_path = args.lava_job.clone().unwrap_or_default();
        let template = read_template(&template_path, commit)?;
        if args.lava_devices == 0 {
            bail!("--lava-devices 0: expected at least 1");
        }
        Ok(Lab {
            server,
            template,
            template_path,
            devices: args.lava_devices,
        })
    }

    /// Runs the plan of `scenario` as jobs: validated, submitted, waited
    /// for (Incomplete and Canceled jobs submitted again), their records
    /// read back.
    pub fn run(
        &self,
        file: &ScenarioFile,
        scenario: &Scenario,
        gates: &[Gate],
    ) -> Result<LabRun, LabRefused> {
        let mut shares =
            shares(file, scenario, gates, &self.template, self.devices).map_err(|e| {
                LabRefused::BadInput(format!("{}: {e:#}", self.template_path.display()))
            })?;
        for s in &shares {
            self.server.validate(&s.job).map_err(refusal)?;
        }
        submit_all(&self.server, &mut shares)?;
        let ended = run_shares(&self.server, &mut shares);
        for sh in &shares {
            if let Some(f) = &sh.failed {
                xrunbench_lab::say!(": lava: {f}");
            }
        }
        let (records, mut problems) = fetch_records(&shares, &|id| self.server.log(id));
        for p in &problems {
            xrunbench_lab::say!(": lava: {p}");
        }
        problems.extend(shares.iter().filter_map(|sh| sh.failed.clone()));
        Ok(LabRun {
            records,
            problems,
            interrupted: match ended {
                Ended::Interrupted(sig) => Some(sig),
                Ended::AllDone => None,
            },
            target: target_line(self.server.base_url(), &shares),
        })
    }
}

/// Runs `scenario` on `lab` (`run`'s `--lava …`, or the scenario's
/// `[target] lava`), whose run directory goes under `results_root`, named
/// with `label`. The command layer has checked the scenario and the
/// options that cannot go with a lab. Bad input is one line and exit 2;
/// the run directory holds whatever records came back, whatever happened
/// to the jobs.
pub fn run(
    lab: &LavaTargetArgs,
    file: &ScenarioFile,
    scenario: &Scenario,
    gates: &[Gate],
    label: Option<&str>,
    results_root: &Path,
) -> Result<ExitCode> {
    let lab = match Lab::open(lab, None) {
        Ok(l) => l,
        Err(e) => {
            xrunbench_lab::say!(": {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let done = match lab.run(file, scenario, gates) {
        Ok(d) => d,
        Err(LabRefused::BadInput(line)) => {
            xrunbench_lab::say!(": {line}");
            return Ok(ExitCode::from(2));
        }
        Err(LabRefused::Failed(line)) => {
            xrunbench_lab::say!(": {line}");
            return Ok(ExitCode::from(1));
        }
    };
    finish(done, file, scenario, gates, label, results_root)
}

/// The lab's API token: `--lava-token-file`, else the environment.
fn token(lab: &LavaTargetArgs) -> Result<Token> {
    let t = match &lab.lava_token_file {
        Some(p) => Token::from_file(p),
        None => Token::from_env(TOKEN_ENV),
    };
    t.map_err(|e| anyhow::anyhow!("--lava: {e}"))
}

/// The user's job file, a YAML mapping with `device_type` and `actions`,
/// no `test` action among them (the trials are ours).
fn read_template(path: &Path, commit: Option<&str>) -> Result<Mapping> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--lava-job {}: cannot read", path.display()))?;
    let text = match commit {
        Some(c) => text.replace(COMMIT_PLACEHOLDER, c),
        None if text.contains(COMMIT_PLACEHOLDER) => bail!(
            "--lava-job {}: uses {COMMIT_PLACEHOLDER}, which only a bisect step sets",
            path.display()
        ),
        None => text,
    };
    let v: Value = serde_norway::from_str(&text)
        .with_context(|| format!("--lava-job {}: not YAML", path.display()))?;
    let Value::Mapping(m) = v else {
        bail!(
            "--lava-job {}: expected a LAVA job (a mapping)",
            path.display()
        );
    };
    if !m.get("device_type").is_some_and(Value::is_string) {
        bail!(
            "--lava-job {}: `device_type`: expected the lab's device type",
            path.display()
        );
    }
    let Some(Value::Sequence(actions)) = m.get("actions") else {
        bail!(
            "--lava-job {}: `actions`: expected its deploy and boot actions",
            path.display()
        );
    };
    if actions.iter().any(|a| a.get("test").is_some()) {
        bail!(
            "--lava-job {}: `actions`: has a `test` action; leave it out, the trials are the test",
            path.display()
        );
    }
    if prompt(&m).is_none() {
        bail!(
            "--lava-job {}: the `boot` action has no `prompts`: the trials are typed at that prompt",
            path.display()
        );
    }
    Ok(m)
}

/// The first of the boot action's `prompts`.
fn prompt(template: &Mapping) -> Option<String> {
    let actions = template.get("actions")?.as_sequence()?;
    actions.iter().find_map(|a| {
        a.get("boot")?
            .get("prompts")?
            .as_sequence()?
            .first()?
            .as_str()
            .map(str::to_owned)
    })
}

/// The plan shared among `devices` jobs by trial number; one job per
/// share that has trials.
fn shares(
    file: &ScenarioFile,
    s: &Scenario,
    gates: &[Gate],
    template: &Mapping,
    devices: usize,
) -> Result<Vec<Share>> {
    if devices == 0 {
        bail!("--lava-devices 0: expected at least 1");
    }
    let names: Vec<String> = s.configs.iter().map(|c| c.name.clone()).collect();
    let plan = make_plan(&names, s.trials, s.order);
    let mut split: Vec<Vec<PlannedTrial>> = vec![Vec::new(); devices];
    for p in plan {
        split[(p.k as usize - 1) % devices].push(p);
    }
    let n = split.iter().filter(|t| !t.is_empty()).count();
    let mut out = Vec::new();
    for (i, trials) in split.into_iter().filter(|t| !t.is_empty()).enumerate() {
        let body = script(file, s, gates, &trials).map_err(|e| anyhow::anyhow!(e))?;
        let name = format!("xrunbench-{} {}/{n}", s.name, i + 1);
        let (job, minutes) = job(template, &name, &body, test_minutes(s, trials.len()));
        out.push(Share {
            trials,
            job,
            minutes,
            id: None,
            tries: 0,
            done: None,
            failed: None,
        });
    }
    Ok(out)
}

/// The job (and its job timeout, minutes): the user's, named, its
/// timeouts widened by the test's, with the interactive test that writes
/// the script and runs it.
fn job(template: &Mapping, name: &str, script: &str, minutes: u64) -> (String, u64) {
    let mut m = template.clone();
    let prompt = prompt(template).unwrap_or_default();
    m.insert("job_name".into(), name.into());
    let job_minutes =
        minutes_of(m.get("timeouts").and_then(|t| t.get("job"))).unwrap_or(BOOT_MINUTES) + minutes;
    let mut timeouts = m
        .get("timeouts")
        .and_then(Value::as_mapping)
        .cloned()
        .unwrap_or_default();
    timeouts.insert("job".into(), minutes_value(job_minutes));
    m.insert("timeouts".into(), Value::Mapping(timeouts));
    // The device may be a board whose /tmp outlives the job (one reached
    // over SSH): what a killed job left is removed first, what this one
    // writes is removed after it.
    let mut commands = vec![command(&format!("rm -rf {SCRIPT_B64} {WORK}"), None)];
    let b64 = BASE64.encode(script.as_bytes());
    for chunk in b64.as_bytes().chunks(CHUNK) {
        let chunk = std::str::from_utf8(chunk).expect("base64 is ASCII");
        commands.push(command(&format!("echo {chunk} >> {SCRIPT_B64}"), None));
    }
    // `$((40+2))`: the shell's echo of the command line is not the
    // message.
    commands.push(command(
        &format!("base64 -d {SCRIPT_B64} > {SCRIPT} && echo xrunbench-script-$((40+2))"),
        Some(("script", "xrunbench-script-42")),
    ));
    commands.push(command(
        &format!(
            "cd /tmp && sh {SCRIPT}; e=$?; rm -rf {SCRIPT_B64} {SCRIPT} {WORK}; \
             echo xrunbench-trials-exit-$e"
        ),
        Some(("trials", "xrunbench-trials-exit-0")),
    ));
    let test: Value = serde_norway::from_str(&format!(
        "test:\n  timeout: {{minutes: {minutes}}}\n  interactive:\n  - name: xrunbench\n    prompts: []\n    script: []\n"
    ))
    .expect("a fixed YAML");
    let mut test = test;
    let inter = &mut test["test"]["interactive"][0];
    inter["prompts"] = Value::Sequence(vec![prompt.into()]);
    inter["script"] = Value::Sequence(commands);
    if let Some(Value::Sequence(actions)) = m.get_mut("actions") {
        actions.push(test);
    }
    let text = serde_norway::to_string(&Value::Mapping(m)).expect("a YAML value serializes");
    (text, job_minutes)
}

/// One command of an interactive test, a case named `name` passing on
/// `message` if given.
fn command(line: &str, case: Option<(&str, &str)>) -> Value {
    let mut m = Mapping::new();
    m.insert("command".into(), line.into());
    if let Some((name, message)) = case {
        m.insert("name".into(), name.into());
        let mut success = Mapping::new();
        success.insert("message".into(), message.into());
        m.insert(
            "successes".into(),
            Value::Sequence(vec![Value::Mapping(success)]),
        );
    }
    Value::Mapping(m)
}

/// `{minutes: N}` (or seconds, hours) of a LAVA timeout, in minutes.
fn minutes_of(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    let n = |k: &str| v.get(k).and_then(Value::as_u64);
    n("minutes")
        .or_else(|| n("hours").map(|h| h * 60))
        .or_else(|| n("seconds").map(|s| s.div_ceil(60)))
}

fn minutes_value(minutes: u64) -> Value {
    let mut m = Mapping::new();
    m.insert("minutes".into(), minutes.into());
    Value::Mapping(m)
}

/// How the jobs ended as a whole.
enum Ended {
    /// Every share ran to its end or was given up.
    AllDone,
    /// Stopped by a signal: the jobs were cancelled.
    Interrupted(i32),
}

/// Submits every share, waits for them all (printing each job's moves),
/// submits again the ones the lab failed.
fn run_shares(server: &Server, shares: &mut [Share]) -> Ended {
    let n = shares.len();
    let minutes = shares
        .iter()
        .map(|sh| sh.minutes)
        .max()
        .unwrap_or(BOOT_MINUTES);
    let deadline = Instant::now() + Duration::from_secs((minutes + QUEUE_MINUTES) * 60);
    let mut seen: BTreeMap<u64, (JobState, Option<String>)> = BTreeMap::new();
    loop {
        if let Some(sig) = xrunbench_lab::signals::stop_requested() {
            for sh in shares.iter() {
                if let (Some(id), None) = (sh.id, &sh.done) {
                    match server.cancel(id) {
                        Ok(()) => xrunbench_lab::say!(": lava: job {id} canceled"),
                        Err(e) => xrunbench_lab::say!(": lava: job {id}: {e}"),
                    }
                }
            }
            return Ended::Interrupted(sig);
        }
        let mut open = 0;
        for (i, sh) in shares.iter_mut().enumerate() {
            let Some(id) = sh.id else { continue };
            if sh.done.is_some() || sh.failed.is_some() {
                continue;
            }
            open += 1;
            let job = match server.job(id) {
                Ok(j) => j,
                // A lab that does not answer for a moment loses no job.
                Err(e) => {
                    xrunbench_lab::say!(": lava: job {id}: {e}");
                    continue;
                }
            };
            let now = (job.state.clone(), job.actual_device.clone());
            if seen.get(&id) != Some(&now) {
                say_job(&job, i, n);
                seen.insert(id, now);
            }
            if job.state != JobState::Finished {
                continue;
            }
            if job.health == JobHealth::Complete {
                sh.done = Some(job);
            } else if sh.tries <= RETRIES {
                xrunbench_lab::say!(
                    ": lava: job {id} ended {}: the lab's failure, not a verdict; submitting share {}/{n} again",
                    job.health,
                    i + 1
                );
                // A refusal now is said with the share's failure.
                let _ = submit(server, sh, i, n);
            } else {
                sh.failed = Some(format!(
                    "job {id} ended {} ({} tries)",
                    job.health, sh.tries
                ));
            }
        }
        if open == 0 {
            return Ended::AllDone;
        }
        if Instant::now() >= deadline {
            for sh in shares.iter_mut() {
                if let (Some(id), None, None) = (sh.id, &sh.done, &sh.failed) {
                    let _ = server.cancel(id);
                    sh.failed = Some(format!("job {id} did not finish in time: canceled"));
                }
            }
            return Ended::AllDone;
        }
        std::thread::sleep(POLL);
    }
}

/// Submits every share once. A refusal (the job, the token, the
/// server) stops the run before any trial: the jobs already submitted
/// are canceled and the reason returned.
fn submit_all(server: &Server, shares: &mut [Share]) -> Result<(), LabRefused> {
    let n = shares.len();
    for i in 0..n {
        let Err(e) = submit(server, &mut shares[i], i, n) else {
            continue;
        };
        for sh in &shares[..i] {
            if let Some(id) = sh.id {
                match server.cancel(id) {
                    Ok(()) => xrunbench_lab::say!(": lava: job {id} canceled"),
                    Err(e) => xrunbench_lab::say!(": lava: job {id}: {e}"),
                }
            }
        }
        return Err(refusal(e));
    }
    Ok(())
}

/// What a server's refusal of the jobs is: the lab's failure (not there,
/// an error of its own, an answer that is not LAVA's) — a bisect step
/// retries it as infrastructure — or the input's (the token, the job, a
/// URL that is not the API's), the same at every try.
fn refusal(e: ServerError) -> LabRefused {
    let line = e.to_string();
    match e {
        ServerError::Unreachable { .. }
        | ServerError::BadReply { .. }
        | ServerError::TimedOut { .. }
        | ServerError::Interrupted { .. } => LabRefused::Failed(line),
        ServerError::Status { status, .. } if status >= 500 => LabRefused::Failed(line),
        _ => LabRefused::BadInput(line),
    }
}

/// Submits share `i` of `n`; a refusal gives it up (and is returned).
fn submit(server: &Server, sh: &mut Share, i: usize, n: usize) -> Result<(), ServerError> {
    sh.tries += 1;
    let ids = server
        .submit(&sh.job)
        .inspect_err(|e| sh.failed = Some(e.to_string()))?;
    let [id] = ids[..] else {
        let e = ServerError::BadReply {
            url: server.base_url().to_owned(),
            expected: format!("one job id for one job, got {ids:?}"),
        };
        sh.failed = Some(e.to_string());
        return Err(e);
    };
    let stems: Vec<String> = sh.trials.iter().map(PlannedTrial::stem).collect();
    println!(
        "lava: job {id} submitted: share {}/{n}, trials {}",
        i + 1,
        stems.join(" ")
    );
    sh.id = Some(id);
    Ok(())
}

fn say_job(job: &Job, i: usize, n: usize) {
    println!("{}", job_line(job, i, n));
}

/// `lava: job 12 (share 1/2): Running on qemu01`: the lab's words
/// (device, an unknown state or health) escaped.
fn job_line(job: &Job, i: usize, n: usize) -> String {
    let device = job
        .actual_device
        .as_deref()
        .map(|d| format!(" on {}", one_line(d)))
        .unwrap_or_default();
    let health = if job.state == JobState::Finished {
        format!(": {}", job.health)
    } else {
        String::new()
    };
    format!(
        "lava: job {} (share {}/{n}): {}{device}{health}",
        job.id,
        i + 1,
        job.state
    )
}

/// The records every Complete job logged (its log read by `log_of`),
/// each with the device it ran on: only those of the trials its share
/// gave it. Each refusal is one line of the problems.
fn fetch_records(
    shares: &[Share],
    log_of: &dyn Fn(u64) -> Result<String, ServerError>,
) -> (Vec<(String, TrialRecord)>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for sh in shares {
        let Some(job) = &sh.done else { continue };
        // The lab's word: it names the device in the lines shown.
        let device = one_line(job.actual_device.as_deref().unwrap_or_default());
        let log = match log_of(job.id) {
            Ok(text) => parse_log(&text),
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        for b in &log.broken {
            problems.push(format!("job {}: {b}", job.id));
        }
        let (records, refused) = super::results::records_in(&log);
        problems.extend(refused.into_iter().map(|e| format!("job {}: {e}", job.id)));
        let (given, not_given) = given_records(records, &sh.trials);
        out.extend(given.into_iter().map(|r| (device.clone(), r)));
        problems.extend(not_given.iter().map(|r| {
            format!(
                "job {} on {}: a record of trial {}, which this job was not given: refused",
                job.id,
                one_line(&device),
                r.trial.display_name()
            )
        }));
    }
    (out, problems)
}

/// `records` split into those of the trials a job was given (`trials`)
/// and the others: a job's log is its device's word, and a device that
/// answers for another share's trial must not take the place of the
/// device that ran it.
fn given_records(
    records: Vec<TrialRecord>,
    trials: &[PlannedTrial],
) -> (Vec<TrialRecord>, Vec<TrialRecord>) {
    records.into_iter().partition(|r| {
        trials
            .iter()
            .any(|p| p.config_name == r.trial.config && p.k == r.trial.k)
    })
}

/// Writes the run directory of what came back, prints the table, the
/// gates and the device check; the exit code says whether every trial
/// came back.
fn finish(
    done: LabRun,
    file: &ScenarioFile,
    scenario: &Scenario,
    gates: &[Gate],
    label: Option<&str>,
    results_root: &Path,
) -> Result<ExitCode> {
    if done.records.is_empty() {
        xrunbench_lab::say!(": lava: no trial record came back; nothing written");
        return Ok(ExitCode::from(if done.interrupted.is_some() {
            130
        } else {
            1
        }));
    }
    let written = write_run(&Brought {
        file,
        scenario,
        records: done.records.iter().map(|(_, r)| r.clone()).collect(),
        label: label.unwrap_or("lava"),
        target: done.target.clone(),
        results_root,
    })?;
    println!("{}", written.manifest.target);
    xrunbench_analysis::compare::write_comparison_and_plots(&written.writer, &written.dir)?;
    let baseline = scenario
        .configs
        .first()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    for v in xrunbench_analysis::gate::judge(gates, &written.dir, &baseline) {
        println!("gate {}: {}", if v.pass { "pass" } else { "FAIL" }, v.line);
    }
    for line in device_effects(scenario, &done.records) {
        println!("{line}");
    }
    println!("run directory: {}", written.writer.dir().display());
    let complete = matches!(
        written.manifest.outcome,
        Some(xrunbench_analysis::results::Outcome::Completed)
    );
    Ok(match done.interrupted {
        Some(sig) => {
            xrunbench_lab::say!(
                ": lava: stopped by signal {sig}; the jobs still running were canceled"
            );
            ExitCode::from(130)
        }
        None if complete && done.problems.is_empty() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}

/// `lava URL: job 12 on qemu01 (A-1 B-1), job 13 on qemu02 (A-2 B-2)`.
fn target_line(url: &str, shares: &[Share]) -> String {
    let mut out = format!("lava {url}:");
    for (i, sh) in shares.iter().enumerate() {
        let stems: Vec<String> = sh.trials.iter().map(PlannedTrial::stem).collect();
        let _ = match &sh.done {
            Some(j) => write!(
                out,
                "{} job {} on {} ({})",
                if i == 0 { "" } else { "," },
                j.id,
                one_line(j.actual_device.as_deref().unwrap_or("?")),
                stems.join(" ")
            ),
            None => write!(
                out,
                "{} ({}) did not run",
                if i == 0 { "" } else { "," },
                stems.join(" ")
            ),
        };
    }
    out
}

/// One line per configuration and metric whose trials differ from one
/// device to another (Mann-Whitney, two-sided, at the table's level);
/// one line saying so when none does, or when there are too few trials
/// per device to tell.
fn device_effects(s: &Scenario, records: &[(String, TrialRecord)]) -> Vec<String> {
    let devices: std::collections::BTreeSet<&str> =
        records.iter().map(|(d, _)| d.as_str()).collect();
    if devices.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut tested = false;
    for c in &s.configs {
        for metric in Metric::ALL {
            let by_device: Vec<Vec<f64>> = devices
                .iter()
                .map(|d| {
                    records
                        .iter()
                        .filter(|(rd, r)| rd == d && r.trial.config == c.name)
                        .filter_map(|(_, r)| metric.of(r))
                        .collect()
                })
                .collect();
            // Three trials a device at least: with fewer no difference
            // can reach the level.
            if by_device.iter().any(|v| v.len() < 3) {
                continue;
            }
            tested = true;
            for (a, b) in pairs(by_device.len()) {
                let Some(m) = xrunbench_analysis::stats::mann_whitney(&by_device[a], &by_device[b])
                else {
                    continue;
                };
                if m.p_two_sided < xrunbench_analysis::compare::ALPHA {
                    let names: Vec<&str> = devices.iter().copied().collect();
                    out.push(format!(
                        "device effect: config {}: {} differs between {} and {} (p = {:.3}): \
                         the devices are not alike; compare configurations only on one device",
                        c.name,
                        metric.label(),
                        names[a],
                        names[b],
                        m.p_two_sided
                    ));
                }
            }
        }
    }
    if out.is_empty() {
        out.push(if tested {
            format!("devices: no difference between {} at the table's level", join(&devices))
        } else {
            format!(
                "devices: {}: too few trials on each (3 a configuration needed) to tell a device effect",
                join(&devices)
            )
        });
    }
    out
}

fn join(devices: &std::collections::BTreeSet<&str>) -> String {
    devices.iter().copied().collect::<Vec<_>>().join(", ")
}

/// Every pair (a, b), a < b, of `n` items.
fn pairs(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).flat_map(move |a| (a + 1..n).map(move |b| (a, b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunbench_scenario as scenario;

    #[test]
    fn a_labs_device_state_and_health_are_shown_escaped() {
        let hostile = "q\u{1b}[31m\u{7}\u{202e}\u{2066}";
        let shown = "q\\u{1b}[31m\\u{7}\\u{202e}\\u{2066}";
        let job = Job {
            id: 12,
            state: JobState::Finished,
            health: JobHealth::Other(hostile.into()),
            actual_device: Some(hostile.into()),
            submit_time: None,
            start_time: None,
            end_time: None,
        };
        assert_eq!(
            job_line(&job, 0, 1),
            format!("lava: job 12 (share 1/1): Finished on {shown}: {shown}")
        );
        let running = Job {
            state: JobState::Other(hostile.into()),
            ..job.clone()
        };
        assert!(job_line(&running, 0, 1).contains(&format!("): {shown} on {shown}")));
        let share = Share {
            trials: Vec::new(),
            job: String::new(),
            minutes: 1,
            id: Some(12),
            tries: 1,
            done: Some(job),
            failed: None,
        };
        assert_eq!(
            target_line("http://127.0.0.1:1/", &[share]),
            format!("lava http://127.0.0.1:1/: job 12 on {shown} ()")
        );
    }

    #[test]
    fn a_lab_not_there_or_failing_is_the_labs_failure_a_refused_input_is_bad_input() {
        let url = "http://127.0.0.1:1/".to_string();
        let failed = [
            ServerError::Unreachable {
                url: url.clone(),
                reason: "Connection refused".into(),
            },
            ServerError::Status {
                url: url.clone(),
                status: 502,
                body: "Bad Gateway".into(),
            },
            ServerError::BadReply {
                url: url.clone(),
                expected: "JSON".into(),
            },
        ];
        for e in failed {
            let line = e.to_string();
            match refusal(e) {
                LabRefused::Failed(l) => assert_eq!(l, line),
                LabRefused::BadInput(l) => panic!("bad input: {l}"),
            }
        }
        let bad = [
            ServerError::Unauthorized {
                url: url.clone(),
                status: 403,
                detail: "Invalid token.".into(),
                token_sent: true,
            },
            ServerError::Rejected {
                url: url.clone(),
                message: "Device type 'nope' is unavailable".into(),
            },
            ServerError::Status {
                url,
                status: 404,
                body: "Not Found".into(),
            },
        ];
        for e in bad {
            let line = e.to_string();
            match refusal(e) {
                LabRefused::BadInput(l) => assert_eq!(l, line),
                LabRefused::Failed(l) => panic!("the lab's failure: {l}"),
            }
        }
    }

    const TEMPLATE: &str = "device_type: qemu\n\
        tags: [audio]\n\
        timeouts:\n  job: {minutes: 7}\n  connection: {minutes: 2}\n\
        actions:\n\
        - deploy: {to: tmpfs}\n\
        - boot: {method: qemu, prompts: ['lab# ']}\n";

    fn template(text: &str) -> Result<Mapping> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("job.yaml");
        std::fs::write(&p, text).unwrap();
        read_template(&p, None)
    }

    fn scenario(trials: u32) -> (ScenarioFile, Scenario) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.toml");
        std::fs::write(
            &p,
            format!(
                "name = \"s\"\ntrials = {trials}\nduration = \"1s\"\nwarmup = \"0s\"\n\
                 [audio]\nbackend = \"virtual\"\ngenerate = {{ seconds = 1 }}\n\
                 [[config]]\nname = \"a\"\n[[config]]\nname = \"b\"\n"
            ),
        )
        .unwrap();
        scenario::load(&p).map_err(|e| e.0).unwrap()
    }

    #[test]
    fn trials_are_shared_by_number_each_device_running_every_configuration() {
        let (file, s) = scenario(5);
        let t = template(TEMPLATE).unwrap();
        let shares = shares(&file, &s, &[], &t, 2).unwrap();
        let stems: Vec<Vec<String>> = shares
            .iter()
            .map(|sh| sh.trials.iter().map(PlannedTrial::stem).collect())
            .collect();
        assert_eq!(
            stems,
            [
                vec!["a-1", "b-1", "a-3", "b-3", "a-5", "b-5"],
                vec!["a-2", "b-2", "a-4", "b-4"]
            ]
        );
        // More devices than trials: no empty job.
        assert_eq!(shares_of(&file, &s, &t, 9), 5);
        assert!(super::shares(&file, &s, &[], &t, 0)
            .err()
            .unwrap()
            .to_string()
            .contains("--lava-devices 0"));
    }

    fn shares_of(file: &ScenarioFile, s: &Scenario, t: &Mapping, n: usize) -> usize {
        shares(file, s, &[], t, n).unwrap().len()
    }

    #[test]
    fn the_job_is_the_users_with_a_name_wider_timeouts_and_the_trials_typed_at_its_prompt() {
        let (file, s) = scenario(1);
        let t = template(TEMPLATE).unwrap();
        let script = "echo hello\n".repeat(200);
        let (text, minutes) = job(&t, "xrunbench-s 1/1", &script, 9);
        assert_eq!(minutes, 16);
        let v: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(v["device_type"].as_str(), Some("qemu"));
        assert_eq!(v["tags"][0].as_str(), Some("audio"));
        assert_eq!(v["job_name"].as_str(), Some("xrunbench-s 1/1"));
        assert_eq!(v["timeouts"]["job"]["minutes"].as_u64(), Some(16));
        assert_eq!(v["timeouts"]["connection"]["minutes"].as_u64(), Some(2));
        let actions = v["actions"].as_sequence().unwrap();
        assert_eq!(actions.len(), 3);
        let test = &actions[2]["test"];
        assert_eq!(test["timeout"]["minutes"].as_u64(), Some(9));
        let inter = &test["interactive"][0];
        assert_eq!(inter["prompts"][0].as_str(), Some("lab# "));
        // The script comes back whole from the lines typed, none longer
        // than a console's line editor takes.
        let mut b64 = String::new();
        for c in inter["script"].as_sequence().unwrap() {
            let line = c["command"].as_str().unwrap();
            assert!(line.len() < 1024, "{}", line.len());
            if let Some(chunk) = line.strip_prefix("echo ") {
                if let Some(chunk) = chunk.strip_suffix(&format!(" >> {SCRIPT_B64}")) {
                    b64.push_str(chunk);
                }
            }
        }
        assert_eq!(BASE64.decode(&b64).unwrap(), script.as_bytes());
        let trials = inter["script"].as_sequence().unwrap().last().unwrap();
        assert_eq!(trials["name"].as_str(), Some("trials"));
        assert_eq!(
            trials["successes"][0]["message"].as_str(),
            Some("xrunbench-trials-exit-0")
        );
        // What the job wrote on the device is removed, whatever the trials'
        // status (it is said after the removal).
        let last = trials["command"].as_str().unwrap();
        assert!(
            last.contains(&format!("rm -rf {SCRIPT_B64} {SCRIPT} {WORK};")),
            "{last}"
        );
        assert!(last.ends_with("echo xrunbench-trials-exit-$e"), "{last}");
        // The definition's script for the scenario is what is typed.
        let shares = shares(&file, &s, &[], &t, 1).unwrap();
        assert!(shares[0].job.contains("job_name: xrunbench-s 1/1"));
    }

    #[test]
    fn a_job_file_that_cannot_be_the_labs_part_is_refused_in_one_line() {
        for (text, words) in [
            ("- a\n", "expected a LAVA job"),
            ("actions: []\n", "`device_type`"),
            ("device_type: qemu\n", "`actions`"),
            (
                "device_type: qemu\nactions:\n- boot: {prompts: ['# ']}\n- test: {}\n",
                "`test` action",
            ),
            (
                "device_type: qemu\nactions:\n- boot: {method: qemu}\n",
                "no `prompts`",
            ),
            ("device_type: [\n", "not YAML"),
        ] {
            let e = format!("{:#}", template(text).unwrap_err());
            assert!(e.contains(words) && !e.contains('\n'), "{text}: {e}");
        }
    }

    #[test]
    fn lava_timeouts_read_in_minutes() {
        let v = |t: &str| serde_norway::from_str::<Value>(t).unwrap();
        assert_eq!(minutes_of(Some(&v("{minutes: 4}"))), Some(4));
        assert_eq!(minutes_of(Some(&v("{hours: 2}"))), Some(120));
        assert_eq!(minutes_of(Some(&v("{seconds: 61}"))), Some(2));
        assert_eq!(minutes_of(Some(&v("{days: 1}"))), None);
        assert_eq!(minutes_of(None), None);
    }

    fn record(config: &str, k: u32, gap: f64) -> TrialRecord {
        xrunbench_analysis::results::testing::trial(config, k, |j| {
            j["player"]["totals"]["gap_ms_max"] = serde_json::json!(gap);
        })
    }

    fn finished(id: u64, device: &str) -> Job {
        Job {
            id,
            state: JobState::Finished,
            health: JobHealth::Complete,
            actual_device: Some(device.into()),
            submit_time: None,
            start_time: None,
            end_time: None,
        }
    }

    #[test]
    fn a_job_s_records_are_kept_only_for_the_trials_it_was_given() {
        use super::super::results::testing::record_entries;
        let (file, s) = scenario(2);
        let t = template(TEMPLATE).unwrap();
        let mut shares = shares(&file, &s, &[], &t, 2).unwrap();
        shares[0].done = Some(finished(11, "dev1"));
        shares[1].done = Some(finished(12, "dev2"));
        // Job 11's device answers for job 12's trials too, made up, and
        // first: job 12's genuine records must still be the ones kept.
        let log_of = |id: u64| -> Result<String, ServerError> {
            Ok(match id {
                11 => ["a-1", "b-1", "a-2", "b-2"]
                    .iter()
                    .map(|stem| {
                        let (c, k) = stem.split_once('-').unwrap();
                        record_entries(c, k.parse().unwrap(), 1.0)
                    })
                    .collect(),
                _ => record_entries("a", 2, 2.0) + &record_entries("b", 2, 2.0),
            })
        };
        let (records, problems) = fetch_records(&shares, &log_of);
        let kept: Vec<(String, String)> = records
            .iter()
            .map(|(d, r)| (d.clone(), r.trial.stem()))
            .collect();
        assert_eq!(
            kept,
            [
                ("dev1".to_string(), "a-1".to_string()),
                ("dev1".into(), "b-1".into()),
                ("dev2".into(), "a-2".into()),
                ("dev2".into(), "b-2".into()),
            ]
        );
        assert_eq!(
            problems,
            [
                "job 11 on dev1: a record of trial s/a-2, which this job was not given: refused",
                "job 11 on dev1: a record of trial s/b-2, which this job was not given: refused",
            ]
        );
    }

    #[test]
    fn devices_that_differ_are_said_and_too_few_trials_are_said_too() {
        let (_, s) = scenario(1);
        let mut recs = Vec::new();
        for k in 1..=4 {
            recs.push(("dev1".to_owned(), record("a", k, f64::from(k))));
            recs.push(("dev2".to_owned(), record("a", k + 4, 50.0 + f64::from(k))));
        }
        let lines = device_effects(&s, &recs);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("device effect: config a: maxgap-ms")
                    && l.contains("dev1 and dev2")),
            "{lines:?}"
        );
        let few: Vec<_> = recs.iter().take(2).cloned().collect();
        assert_eq!(
            device_effects(&s, &few),
            ["devices: dev1, dev2: too few trials on each (3 a configuration needed) to tell a device effect"]
        );
        let one: Vec<_> = recs.iter().filter(|(d, _)| d == "dev1").cloned().collect();
        assert!(device_effects(&s, &one).is_empty());
    }
}
