//! Killed at random: `cargo xtask run` (the built binary) on a short
//! scenario that changes two real knobs (`kernel.sched_rr_timeslice_ms`,
//! `kernel.sched_autogroup_enabled`), stopped at 20 moments spread over the
//! whole run — validation, knobs applied, playing, between trials, writing
//! the results — by SIGKILL of the runner, SIGKILL of its `xrun-trial`
//! alone, SIGINT and SIGTERM. After each: (for the SIGKILLs) `cargo xtask
//! restore`, then every knob is back to the value found first, no process
//! of ours is left, no `*.tmp*` file is left, every document in the run
//! directory parses, and `compare` works on it (or says, in one line, that
//! no trial finished).
//!
//! The moments are drawn from a seeded generator (`XRUNBENCH_KILL_SEED`,
//! default 15; printed) over the length of an undisturbed run measured
//! first, one in each twentieth of it, so they cover the whole run on a
//! fast or a slow machine alike. Every wait is bounded and polls; nothing
//! depends on how fast the machine is beyond those bounds.
//!
//! Needs root (real sysctls); skips itself otherwise.

mod support;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::*;
use xrunbench_schema::trial::TrialRecord;
use xrunbench_trial::journal::MachineLock;
use xrunbench_trial::machine::Machine;

const MOMENTS: usize = 20;

/// The knobs as they are when no trial holds the machine: read under the
/// machine lock, so another trial on this machine (other tests, other
/// worktrees) is never caught with its own values applied.
fn knobs_at_rest() -> (String, String) {
    let _lock = MachineLock::acquire(&Machine::real().lock_path, |_| {}).unwrap();
    (sysctl(RR), sysctl(AG))
}

/// splitmix64: a small seeded generator (the test must not depend on a
/// random crate's stream across versions).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn seed() -> u64 {
    std::env::var("XRUNBENCH_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15)
}

/// One moment in each twentieth of `run`, at a seeded place within it.
fn moments(run: Duration, salt: u64) -> Vec<Duration> {
    let mut rng = Rng(seed() ^ salt);
    (0..MOMENTS)
        .map(|i| run.mul_f64((i as f64 + rng.unit()) / MOMENTS as f64))
        .collect()
}

/// Two configurations, one trial each: `a` changes both knobs.
fn scenario_file(dir: &Path, at_rest: &(String, String)) -> PathBuf {
    // From the values found at rest: the knobs may be changed right now.
    let sysctls = sysctls_line(&[
        (RR, other_timeslice(&at_rest.0)),
        (AG, other_autogroup(&at_rest.1)),
    ]);
    ScenarioText::virtual_sink("killed")
        .duration("500ms")
        .warmup("100ms")
        .audio("buffer_time", "40ms")
        .hackbench("{ groups = 1, fds = 2, loops = 200 }")
        .config_with("a", &sysctls)
        .config("b")
        .write(dir)
}

/// `cargo xtask run` in a process group of its own.
fn spawn_run(scenario: &Path, results: &Path) -> Child {
    xtask()
        .args(["run", scenario.to_str().unwrap(), "--results-dir"])
        .arg(results)
        .arg("--bin-dir")
        .arg(bin_dir())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Processes of ours: anything started from the suite's board binaries,
/// or naming this test's results directory.
fn ours(results: &Path) -> Vec<String> {
    let bins = bin_dir().to_string_lossy().into_owned();
    let mut found = processes_mentioning(&bins);
    found.extend(processes_mentioning(results.to_str().unwrap()));
    found.retain(|p| !p.contains(" restore"));
    found
}

/// What must hold after the run ended however it ended; `Err` says what
/// does not.
fn check_aftermath(results: &Path, at_rest: &(String, String)) -> Result<(), String> {
    if !wait_for(60, || ours(results).is_empty()) {
        return Err(format!("processes left: {:?}", ours(results)));
    }
    let now = knobs_at_rest();
    if now != *at_rest {
        return Err(format!(
            "knobs {now:?}, found {at_rest:?} at first (journals: {:?})",
            journals()
        ));
    }
    let files = xrunbench_test_support::disk::files_under(results);
    let tmp: Vec<_> = files
        .iter()
        .filter(|p| {
            let rel = p.strip_prefix(results).unwrap_or(p);
            rel.to_string_lossy().contains(".tmp")
        })
        .collect();
    if !tmp.is_empty() {
        return Err(format!("temporaries left: {tmp:?}"));
    }
    for f in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        // A trial's document is typed: it must read back as one.
        let in_trials = f.parent().is_some_and(|d| d.ends_with("trials"));
        match v["schema"].as_str().unwrap_or_default() {
            "xrunbench.trial/1" => {
                serde_json::from_value::<TrialRecord>(v)
                    .map_err(|e| format!("{}: {e}", f.display()))?;
            }
            "xrunbench.lost-trial/1" | "xrunbench.run/1" => {}
            other if in_trials => return Err(format!("{}: schema `{other}`", f.display())),
            _ => {}
        }
    }
    for run in find_named(results, "run.json") {
        let dir = run.parent().unwrap();
        let out = xtask().arg("compare").arg(dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Nothing finished is an answer too, as long as it is one line.
        let nothing = out.status.code() == Some(2)
            && stderr.contains("no trial records")
            && stderr.lines().count() == 1;
        if !out.status.success() && !nothing {
            return Err(format!("compare {}: {stderr}", dir.display()));
        }
    }
    Ok(())
}

/// `cargo xtask restore` over the test's results.
fn restore(results: &Path) -> Result<(), String> {
    let out = xtask()
        .args(["restore", "--results-dir"])
        .arg(results)
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "restore failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// How a run is stopped.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// SIGKILL to the runner, then `cargo xtask restore`.
    KillRunner,
    /// SIGKILL to the runner's `xrun-trial` (whichever runs at that
    /// moment: probe, check or a trial), then `cargo xtask restore`.
    KillTrial,
    /// A signal to the runner only, no restore.
    Signal(libc::c_int),
}

/// The pid of an `xrun-trial` child of `runner`, waiting up to 30 s for
/// one (between two of them the runner has none).
fn trial_of(runner: u32) -> Option<u32> {
    let mut pid = None;
    wait_for(30, || {
        pid = children_named(runner, "xrun-trial").into_iter().next();
        pid.is_some()
    });
    pid
}

/// Runs the scenario and stops it after `at`; returns how the run ended.
fn stop_run_at(scenario: &Path, results: &Path, at: Duration, how: Stop) -> String {
    let mut child = spawn_run(scenario, results);
    let runner = child.id();
    let began = Instant::now();
    while began.elapsed() < at {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let (pid, sig) = match how {
        Stop::KillRunner => (Some(runner), libc::SIGKILL),
        Stop::KillTrial => (trial_of(runner), libc::SIGKILL),
        Stop::Signal(s) => (Some(runner), s),
    };
    let alive = child.try_wait().unwrap().is_none();
    if let (Some(pid), true) = (pid, alive) {
        // SAFETY: signalling a process we started (or its child, found by
        // its parent pid).
        unsafe { libc::kill(pid as libc::pid_t, sig) };
    }
    // A runner that was not killed ends by itself: bounded by the trial
    // timeout and then some.
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    format!(
        "{:?} after {:?} (alive: {alive}): {}\n{}",
        how,
        at,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The length of one undisturbed run, which must itself leave all as found.
fn undisturbed_run(scenario: &Path, results: &Path, at_rest: &(String, String)) -> Duration {
    let began = Instant::now();
    let child = spawn_run(scenario, results);
    let out = child.wait_with_output().unwrap();
    let took = began.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_aftermath(results, at_rest).unwrap();
    took
}

fn stopped_at_random(how: Stop, salt: u64) {
    let _g = knob_lock();
    let at_rest = knobs_at_rest();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let s = scenario_file(dir.path(), &at_rest);
    let run = undisturbed_run(&s, &results, &at_rest);
    let at = moments(run, salt);
    eprintln!(
        "{how:?}: seed {} (XRUNBENCH_KILL_SEED), run {run:?}, moments {at:?}",
        seed()
    );
    let mut failures = Vec::new();
    for moment in at {
        let ended = stop_run_at(&s, &results, moment, how);
        let restored = match how {
            Stop::KillRunner | Stop::KillTrial => {
                // The orphaned trial restores itself and exits; restore
                // replays what it could not (it waits for the machine lock).
                wait_for(60, || ours(&results).is_empty());
                restore(&results)
            }
            Stop::Signal(_) => Ok(()),
        };
        if let Err(e) = restored.and_then(|()| check_aftermath(&results, &at_rest)) {
            failures.push(format!("{e}\n  run: {ended}"));
            // Leave the machine as found for the next moment and test.
            let _ = restore(&results);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {MOMENTS} moments failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sigkill_of_the_runner_at_random_moments_then_restore() {
    xrunbench_test_support::skip_unless_root!();
    stopped_at_random(Stop::KillRunner, 1);
}

#[test]
fn sigkill_of_the_trial_alone_at_random_moments_then_restore() {
    xrunbench_test_support::skip_unless_root!();
    stopped_at_random(Stop::KillTrial, 2);
}

#[test]
fn sigint_at_random_moments() {
    xrunbench_test_support::skip_unless_root!();
    stopped_at_random(Stop::Signal(libc::SIGINT), 3);
}

#[test]
fn sigterm_at_random_moments() {
    xrunbench_test_support::skip_unless_root!();
    stopped_at_random(Stop::Signal(libc::SIGTERM), 4);
}
