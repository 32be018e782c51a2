//! The promise that knobs go back, tested for real on this machine's
//! `kernel.sched_rr_timeslice_ms` and `kernel.sched_autogroup_enabled`:
//! after a normal end, a failing trial, a panic, SIGINT, SIGTERM, and
//! SIGKILL followed by `cargo xtask restore` or the next `cargo xtask run`.
//! Every test saves the values it found and checks they are back.
//!
//! Changing sysctls needs root; without it these tests skip themselves.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};

use support::*;

const RR: &str = "kernel.sched_rr_timeslice_ms";
const AG: &str = "kernel.sched_autogroup_enabled";

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A scenario on the virtual sink whose config `a` changes both sysctls.
fn knob_scenario(
    dir: &Path,
    name: &str,
    duration: &str,
    trials: u32,
    load: bool,
) -> std::path::PathBuf {
    let rr = other_timeslice(&sysctl(RR));
    let ag = other_autogroup(&sysctl(AG));
    let load = if load {
        "[load]\nhackbench = { groups = 1, fds = 2, loops = 20 }\n"
    } else {
        ""
    };
    scenario(
        dir,
        name,
        &format!(
            "name = \"{name}\"\ntrials = {trials}\nduration = \"{duration}\"\nwarmup = \"200ms\"\n\
             [audio]\ngenerate = {{ seconds = 1, rate = 8000, channels = 1 }}\nbackend = \"virtual\"\nbuffer_time = \"40ms\"\n\
             {load}\
             [[config]]\nname = \"a\"\nsysctl = {{ \"{RR}\" = {rr}, \"{AG}\" = {ag} }}\n\
             [[config]]\nname = \"b\"\n"
        ),
    )
}

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

/// Waits until config `a`'s knobs are applied (the values changed).
fn wait_applied(before: &(String, String)) -> bool {
    wait_for(120, || snapshot() != *before)
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

#[test]
fn end_to_end_two_configs_two_trials_restores_and_records() {
    if !is_root() {
        return;
    }
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "e2e", "1s", 2, true);
    let child = spawn_run(&s, &res, None);
    let tone_prefix = format!("xrunbench-{}-", child.id());
    let (code, stderr) = output_of(child);
    assert_eq!(snapshot(), before, "knobs restored after a normal run");
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&tone_prefix))
        .collect();
    assert!(left.is_empty(), "generated tone removed: {left:?}");
    assert_eq!(code, Some(0), "{stderr}");
    let runs = find_named(&res, "run.json");
    assert_eq!(runs.len(), 1);
    let run_dir = runs[0].parent().unwrap();
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    let plan: Vec<String> = run["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{}-{}", t["config_name"].as_str().unwrap(), t["k"]))
        .collect();
    assert_eq!(plan, ["a-1", "b-1", "a-2", "b-2"], "interleaved");
    assert_eq!(run["outcome"]["status"], "completed");
    assert!(run["fingerprint"]["uname"]
        .as_str()
        .unwrap()
        .contains("Linux"));
    for stem in ["a-1", "a-2", "b-1", "b-2"] {
        let t: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run_dir.join(format!("trials/{stem}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(t["schema"], "xrunbench.trial/1");
        assert_eq!(t["player"]["params"]["backend"], "virtual");
        assert!(
            t["load"]["rounds_completed"].as_u64().unwrap() >= 1,
            "{stem}: load ran"
        );
        let knobs = t["knobs"].as_array().unwrap();
        assert_eq!(knobs.len(), if stem.starts_with('a') { 2 } else { 0 });
    }
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    assert!(
        summary.contains("underruns/min mean") && summary.contains("hackbench round (ms) mean"),
        "{summary}"
    );
    assert!(!run_dir.join("journal.json").exists());
    assert_no_children_left(&res);
}

#[test]
fn failing_trial_restores_knobs_and_keeps_nothing_changed() {
    if !is_root() {
        return;
    }
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "err", "1s", 1, true);
    let (code, stderr) = output_of(spawn_run(&s, &res, Some("error")));
    assert_eq!(snapshot(), before, "knobs restored after an error");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("injected error"), "{stderr}");
    assert!(find_named(&res, "journal.json").is_empty());
    assert_no_children_left(&res);
}

#[test]
fn player_that_cannot_open_its_device_fails_the_run_cleanly() {
    if !is_root() {
        return;
    }
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = scenario(
        dir.path(),
        "nodev",
        &format!(
            "name = \"nodev\"\ntrials = 1\nduration = \"1s\"\nwarmup = \"0s\"\n\
             [audio]\ngenerate = {{ seconds = 1 }}\nbackend = \"alsa\"\ndevice = \"hw:97\"\n\
             [[config]]\nname = \"a\"\nsysctl = {{ \"{RR}\" = {} }}\n",
            other_timeslice(&before.0)
        ),
    );
    let (code, stderr) = output_of(spawn_run(&s, &res, None));
    assert_eq!(snapshot(), before);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("xrun-player"), "{stderr}");
}

#[test]
fn panic_restores_knobs() {
    if !is_root() {
        return;
    }
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let s = knob_scenario(dir.path(), "panic", "1s", 1, true);
    let (code, stderr) = output_of(spawn_run(&s, &res, Some("panic")));
    assert_eq!(snapshot(), before, "knobs restored after a panic: {stderr}");
    assert_eq!(code, Some(101), "{stderr}");
    assert!(find_named(&res, "journal.json").is_empty());
}

fn interrupted_by(signal: libc::c_int) {
    let _g = knob_lock();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    // b first and short trials: one finished trial exists when we interrupt a.
    let s = knob_scenario(dir.path(), "sig", "30s", 2, true);
    let text = std::fs::read_to_string(&s)
        .unwrap()
        .replace("duration = \"30s\"", "duration = \"1500ms\"");
    std::fs::write(&s, text).unwrap();
    let child = spawn_run(&s, &res, None);
    let pid = child.id() as libc::pid_t;
    // a-1, b-1 run, then a-2 applies the knobs again: interrupt that one.
    assert!(wait_applied(&before), "knobs were never applied");
    assert!(
        wait_for(60, || find_named(&res, "b-1.json").len() == 1),
        "b-1 never finished"
    );
    assert!(wait_applied(&before), "a-2 never applied its knobs");
    std::thread::sleep(std::time::Duration::from_millis(400));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, signal) };
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
    assert!(std::fs::read_to_string(run_dir.join("summary.txt"))
        .unwrap()
        .contains("not run"));
    assert!(!run_dir.join("journal.json").exists());
    assert_no_children_left(&res);
}

#[test]
fn sigint_restores_knobs_keeps_finished_trials_and_exits_130() {
    if is_root() {
        interrupted_by(libc::SIGINT);
    }
}

#[test]
fn sigterm_restores_knobs_keeps_finished_trials_and_exits_130() {
    if is_root() {
        interrupted_by(libc::SIGTERM);
    }
}

/// SIGKILLs a run while config `a`'s knobs are applied; returns the
/// results dir (whose run holds the journal) and the values found before.
fn killed_run(dir: &Path) -> (std::path::PathBuf, (String, String), String) {
    let before = snapshot();
    let res = dir.join("results");
    let s = knob_scenario(dir, "killed", "30s", 1, true);
    let mut child = spawn_run(&s, &res, None);
    let tone = format!("/dev/shm/xrunbench-{}-0.wav", child.id());
    assert!(wait_applied(&before), "knobs were never applied");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_ne!(snapshot(), before, "SIGKILL leaves the knobs changed");
    assert_eq!(
        find_named(&res, "journal.json").len(),
        1,
        "the journal is left behind"
    );
    // The orphaned children stop on their own (parent-death signal).
    assert_no_children_left(&res);
    assert!(
        Path::new(&tone).exists(),
        "SIGKILL leaves the generated tone"
    );
    (res, before, tone)
}

#[test]
fn after_sigkill_restore_replays_the_journal() {
    if !is_root() {
        return;
    }
    let _g = knob_lock();
    let dir = tempfile::tempdir().unwrap();
    let (res, before, tone) = killed_run(dir.path());
    let out = run_xtask(&["restore", "--results-dir", res.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(), before, "restore put the values back: {stdout}");
    assert!(stdout.contains("restored from"), "{stdout}");
    assert!(
        !Path::new(&tone).exists(),
        "restore removed the orphaned tone: {stdout}"
    );
    assert!(find_named(&res, "journal.json").is_empty());
    let again = run_xtask(&["restore", "--results-dir", res.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to restore"));
}

#[test]
fn after_sigkill_the_next_run_replays_the_journal_first() {
    if !is_root() {
        return;
    }
    let _g = knob_lock();
    let dir = tempfile::tempdir().unwrap();
    let (res, before, tone) = killed_run(dir.path());
    // Another scenario, no knobs, a different results dir: the journal is
    // still found through the machine's state dir.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let s = scenario(
        &other,
        "plain",
        "name = \"plain\"\ntrials = 1\nduration = \"500ms\"\nwarmup = \"0s\"\n\
         [audio]\ngenerate = { seconds = 1 }\nbackend = \"virtual\"\n[[config]]\nname = \"x\"\n",
    );
    let (code, stderr) = output_of(spawn_run(&s, &other.join("results"), None));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("restored from"), "{stderr}");
    assert!(
        !Path::new(&tone).exists(),
        "the next run removed the orphaned tone"
    );
    assert_eq!(snapshot(), before);
    assert!(find_named(&res, "journal.json").is_empty());
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
    let s = scenario(
        dir.path(),
        "dbg",
        &format!(
            "name = \"dbg\"\n[audio]\ngenerate = {{}}\nbackend = \"virtual\"\n\
             [[config]]\nname = \"a\"\nsysctl = {{ \"{RR}\" = {} }}\nsched_features = [\"NO_NEXT_BUDDY\"]\n",
            other_timeslice(&before.0)
        ),
    );
    let (code, stderr) = output_of(spawn_run(&s, &res, None));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("sched_features NO_NEXT_BUDDY: not permitted"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert_eq!(snapshot(), before, "nothing touched");
    assert!(!res.join("dbg").exists(), "no run directory created");
}
