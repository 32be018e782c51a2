//! The promise that knobs go back, through the runner and `xrun-trial`
//! (the local target), tested for real on this machine's
//! `kernel.sched_rr_timeslice_ms` and `kernel.sched_autogroup_enabled`:
//! after a normal end, a failing trial, a panic, SIGINT (to the whole
//! process group, as a terminal sends it), SIGTERM (to the runner only), a
//! SIGKILLed runner (the trial sees its stdin close and restores itself), a
//! SIGKILLed trial (the runner replays its journal), and SIGKILL of both
//! followed by `cargo xtask restore` or the next `cargo xtask run`. Every
//! test saves the values it found and checks they are back; a value the
//! kernel does not keep fails validation before anything runs.
//!
//! Changing sysctls needs root; without it these tests skip themselves.

mod support;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use support::*;

/// A scenario on the virtual sink whose config `a` changes both sysctls.
fn knob_scenario(dir: &Path, name: &str, duration: &str, trials: u32) -> PathBuf {
    ScenarioText::virtual_sink(name)
        .trials(trials)
        .duration(duration)
        .warmup("200ms")
        .audio("buffer_time", "40ms")
        .hackbench("{ groups = 1, fds = 2, loops = 20 }")
        .config_with("a", &changed_sysctls(&[RR, AG]))
        .config("b")
        .write(dir)
}

/// `cargo xtask run` in a process group of its own (so a test can signal
/// it and its `xrun-trial` together, as a terminal's Ctrl-C does).
fn spawn_run(scenario: &Path, results: &Path, fault: Option<&str>) -> Child {
    let mut cmd = xtask();
    cmd.args([
        "run",
        scenario.to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
    ])
    .arg("--bin-dir")
    .arg(bin_dir())
    .process_group(0)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(f) = fault {
        cmd.env("XRUNBENCH_FAULT", f);
    }
    cmd.spawn().unwrap()
}

fn snapshot() -> (String, String) {
    (sysctl(RR), sysctl(AG))
}

/// Waits until a trial of the run `runner` (not its validation, which
/// writes each knob for a moment) has applied config `a`'s knobs.
fn wait_applied(before: &(String, String), runner: u32) -> bool {
    wait_for(120, || {
        !children_named(runner, "xrun-trial run").is_empty() && snapshot() != *before
    })
}

fn assert_no_children_left(results: &Path) {
    // Every child's command line names its JSON file under the results dir.
    let needle = results.to_str().unwrap();
    assert!(
        wait_for(10, || processes_mentioning(needle)
            .iter()
            .all(|p| p.contains("xtask"))),
        "children left behind: {:?}",
        processes_mentioning(needle)
    );
}

fn output_of(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The WAV a trial record says the player played.
fn played_wav(record: &serde_json::Value) -> PathBuf {
    PathBuf::from(
        record["player_command"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .as_str()
            .unwrap(),
    )
}

#[test]
fn end_to_end_two_configs_two_trials_restores_and_records() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "e2e", "1s", 2);
    let (code, stderr) = output_of(spawn_run(&s, &res, None));
    assert_eq!(snapshot(), before, "knobs restored after a normal run");
    assert_eq!(code, Some(0), "{stderr}");
    let runs = find_named(&res, "run.json");
    assert_eq!(runs.len(), 1);
    let run_dir = runs[0].parent().unwrap();
    let run = json(&runs[0]);
    let plan: Vec<String> = run["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{}-{}", t["config_name"].as_str().unwrap(), t["k"]))
        .collect();
    assert_eq!(plan, ["a-1", "b-1", "a-2", "b-2"], "interleaved");
    assert_eq!(run["outcome"]["status"], "completed");
    assert_eq!(run["target"], "local");
    assert!(!run["fingerprint"]["kernel_release"]
        .as_str()
        .unwrap()
        .is_empty());
    for stem in ["a-1", "a-2", "b-1", "b-2"] {
        let t = json(&run_dir.join(format!("trials/{stem}.json")));
        assert_eq!(t["schema"], "xrunbench.trial/1");
        assert_eq!(t["outcome"]["status"], "ran");
        assert_eq!(t["player"]["params"]["backend"], "virtual");
        // The load ran beside the player until the trial stopped it (how
        // many rounds it finished meanwhile is the machine's business).
        assert_eq!(t["load"]["ended"], "signal", "{stem}: load ran");
        assert!(!played_wav(&t).exists(), "{stem}: generated tone removed");
        let knobs = t["knobs"].as_array().unwrap();
        assert_eq!(knobs.len(), if stem.starts_with('a') { 2 } else { 0 });
        for k in knobs {
            assert_eq!(k["read_back"], k["requested"], "{k}");
            assert_eq!(k["restored"], k["found"], "{k}");
        }
        assert!(run_dir.join(format!("trials/{stem}.player.log")).exists());
    }
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    assert!(
        summary.contains("underruns/min mean") && summary.contains("hackbench round (ms) mean"),
        "{summary}"
    );
    assert!(journals().is_empty(), "journals left: {:?}", journals());
    assert_no_children_left(&res);
}

#[test]
fn failing_trial_restores_knobs_and_keeps_it_out_of_the_table() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "err", "1s", 1);
    let (code, stderr) = output_of(spawn_run(&s, &res, Some("error")));
    assert_eq!(snapshot(), before, "knobs restored after an error");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("injected error"), "{stderr}");
    let failed = find_named(&res, "a-1.failed.json");
    assert_eq!(failed.len(), 1, "the failed trial is in the run's log");
    let t = json(&failed[0]);
    assert_eq!(t["outcome"]["status"], "failed");
    assert!(find_named(&res, "a-1.json").is_empty(), "not a measurement");
    assert!(journals().is_empty());
    assert_no_children_left(&res);
}

#[test]
fn player_that_cannot_open_its_device_fails_the_run_cleanly() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = ScenarioText::virtual_sink("nodev")
        .generate("{ seconds = 1 }")
        .audio("backend", "alsa")
        .audio("device", "hw:97")
        .config_with("a", &changed_sysctls(&[RR]))
        .write(dir.path());
    let (code, stderr) = output_of(spawn_run(&s, &res, None));
    assert_eq!(snapshot(), before);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("xrun-player"), "{stderr}");
}

#[test]
fn panic_restores_knobs() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "panic", "1s", 1);
    let (code, stderr) = output_of(spawn_run(&s, &res, Some("panic")));
    assert_eq!(snapshot(), before, "knobs restored after a panic: {stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("panicked"), "{stderr}");
    assert!(journals().is_empty());
}

/// Interrupts trial a-2 (a-1 and b-1 finished) with `signal`, sent to the
/// whole process group (`group`) or to the runner only.
fn interrupted_by(signal: libc::c_int, group: bool) {
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "sig", "1500ms", 2);
    let child = spawn_run(&s, &res, None);
    let pid = child.id() as libc::pid_t;
    assert!(
        wait_applied(&before, child.id()),
        "knobs were never applied"
    );
    assert!(
        wait_for(60, || find_named(&res, "b-1.json").len() == 1),
        "b-1 never finished"
    );
    assert!(
        wait_applied(&before, child.id()),
        "a-2 never applied its knobs"
    );
    std::thread::sleep(std::time::Duration::from_millis(400));
    // SAFETY: signalling our own child (and its process group).
    unsafe { libc::kill(if group { -pid } else { pid }, signal) };
    let (code, stderr) = output_of(child);
    assert_eq!(
        snapshot(),
        before,
        "knobs restored after signal {signal}: {stderr}"
    );
    assert_eq!(code, Some(130), "{stderr}");
    let runs = find_named(&res, "run.json");
    let run_dir = runs[0].parent().unwrap();
    assert!(
        run_dir.join("trials/a-1.json").exists() && run_dir.join("trials/b-1.json").exists(),
        "finished trials kept"
    );
    assert!(!run_dir.join("trials/a-2.json").exists());
    let a2 = json(&run_dir.join("trials/a-2.interrupted.json"));
    assert_eq!(a2["outcome"]["status"], "interrupted", "{a2}");
    assert!(std::fs::read_to_string(run_dir.join("summary.txt"))
        .unwrap()
        .contains("not run"));
    assert!(journals().is_empty());
    assert_no_children_left(&res);
}

#[test]
fn sigint_to_the_group_restores_knobs_keeps_finished_trials_and_exits_130() {
    xrunbench_test_support::skip_unless_root!();
    interrupted_by(libc::SIGINT, true);
}

#[test]
fn sigterm_to_the_runner_restores_knobs_keeps_finished_trials_and_exits_130() {
    xrunbench_test_support::skip_unless_root!();
    interrupted_by(libc::SIGTERM, false);
}

#[test]
fn sigkilled_runner_its_trial_sees_stdin_close_and_restores_itself() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "orphan", "30s", 1);
    let mut child = spawn_run(&s, &res, None);
    assert!(
        wait_applied(&before, child.id()),
        "knobs were never applied"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        wait_for(10, || snapshot() == before),
        "the orphaned trial restored its knobs"
    );
    assert!(wait_for(10, || journals().is_empty()), "{:?}", journals());
    assert_no_children_left(&res);
}

#[test]
fn sigkilled_trial_is_lost_and_the_runner_replays_its_journal() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "lost", "30s", 1);
    let child = spawn_run(&s, &res, None);
    assert!(
        wait_applied(&before, child.id()),
        "knobs were never applied"
    );
    let trials = children_named(child.id(), "xrun-trial run");
    assert_eq!(trials.len(), 1, "one xrun-trial child: {trials:?}");
    // SAFETY: killing our own grandchild.
    unsafe { libc::kill(trials[0] as libc::pid_t, libc::SIGKILL) };
    let (code, stderr) = output_of(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("was lost"), "{stderr}");
    assert!(stderr.contains("restored from"), "{stderr}");
    assert_eq!(snapshot(), before, "{stderr}");
    assert_eq!(find_named(&res, "a-1.lost.json").len(), 1);
    assert!(journals().is_empty());
    assert_no_children_left(&res);
}

/// SIGKILLs the runner and its trial together while config `a`'s knobs are
/// applied; returns the results dir, the values found before, and the
/// generated tone left in tmpfs.
fn killed_run(dir: &Path) -> (PathBuf, (String, String), Vec<PathBuf>) {
    let before = snapshot();
    let res = dir.join("results");
    let s = knob_scenario(dir, "killed", "30s", 1);
    let tones_before = tones();
    let child = spawn_run(&s, &res, None);
    assert!(
        wait_applied(&before, child.id()),
        "knobs were never applied"
    );
    // The trial runs in a process group of its own (the runner ends it
    // whole): a power loss or an OOM kill takes both groups at once.
    let trials = children_named(child.id(), "xrun-trial");
    assert_eq!(trials.len(), 1, "the runner's trial: {trials:?}");
    // SAFETY: killing our own child's and its trial's process groups.
    unsafe {
        libc::kill(-(trials[0] as libc::pid_t), libc::SIGKILL);
        libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
    }
    let _ = output_of(child);
    assert_ne!(snapshot(), before, "SIGKILL leaves the knobs changed");
    assert_eq!(journals().len(), 1, "the journal is left behind");
    // The orphaned children stop on their own (parent-death signal).
    assert_no_children_left(&res);
    let left: Vec<PathBuf> = tones()
        .into_iter()
        .filter(|t| !tones_before.contains(t))
        .collect();
    assert_eq!(left.len(), 1, "SIGKILL leaves the generated tone");
    (res, before, left)
}

fn tones() -> Vec<PathBuf> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("xrunbench-") && n.ends_with("-tone.wav")
        })
        .collect()
}

#[test]
fn after_sigkill_restore_replays_the_journal() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let dir = tempfile::tempdir().unwrap();
    let (_res, before, tone) = killed_run(dir.path());
    let out = run_xtask_with_bins(&["restore"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(), before, "restore put the values back: {stdout}");
    assert!(stdout.contains("restored from"), "{stdout}");
    assert!(
        !tone[0].exists(),
        "restore removed the orphaned tone: {stdout}"
    );
    assert!(journals().is_empty());
    let again = run_xtask_with_bins(&["restore"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to restore"));
}

#[test]
fn after_sigkill_the_next_run_replays_the_journal_first() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let dir = tempfile::tempdir().unwrap();
    let (_res, before, tone) = killed_run(dir.path());
    // Another scenario, no knobs, a different results dir: the journal is
    // on the machine, not in a results directory.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let s = ScenarioText::virtual_sink("plain")
        .duration("500ms")
        .generate("{ seconds = 1 }")
        .config("x")
        .write(&other);
    let (code, stderr) = output_of(spawn_run(&s, &other.join("results"), None));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("restored from"), "{stderr}");
    assert!(!tone[0].exists(), "the next run removed the orphaned tone");
    assert_eq!(snapshot(), before);
    assert!(journals().is_empty());
}

#[test]
fn value_the_kernel_does_not_keep_fails_validation_and_changes_nothing() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    // The kernel accepts the write of -5 and keeps its old value.
    let s = ScenarioText::new("notkept")
        .generate("{}")
        .audio("backend", "virtual")
        .config_with("a", &sysctls_line(&[(RR, "-5")]))
        .write(dir.path());
    let (code, stderr) = output_of(spawn_run(&s, &res, None));
    assert_eq!(code, Some(2), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("xtask: "))
        .unwrap_or_default();
    assert!(
        line.contains("wrote `-5`") && line.contains(&format!("reads back `{}`", before.0)),
        "{stderr}"
    );
    assert_eq!(snapshot(), before, "nothing left changed");
    assert!(!res.join("notkept").exists(), "no run directory created");
    assert!(journals().is_empty());
}

#[test]
fn debugfs_knob_not_writable_fails_validation_and_changes_nothing() {
    let _g = knob_lock();
    let writable = std::fs::OpenOptions::new()
        .write(true)
        .open("/sys/kernel/debug/sched/features")
        .is_ok();
    if writable {
        return; // This machine can run seed-next-buddy; the path under test does not exist here.
    }
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = ScenarioText::new("dbg")
        .generate("{}")
        .audio("backend", "virtual")
        .config_with(
            "a",
            &format!(
                "{}\nsched_features = [\"NO_NEXT_BUDDY\"]",
                changed_sysctls(&[RR])
            ),
        )
        .write(dir.path());
    let (code, stderr) = output_of(spawn_run(&s, &res, None));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("sched_features NO_NEXT_BUDDY: not permitted"),
        "{stderr}"
    );
    // Other lines may say the target waited for the machine lock, or what
    // it cleaned up; the problems name the scenario file.
    let file = s.to_str().unwrap();
    let problems: Vec<&str> = stderr.lines().filter(|l| l.contains(file)).collect();
    assert_eq!(problems.len(), 1, "one line: {stderr}");
    assert_eq!(snapshot(), before, "nothing touched");
    assert!(!res.join("dbg").exists(), "no run directory created");
}
