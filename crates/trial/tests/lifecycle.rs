//! `xrun-trial` by itself: every way a trial can end restores every knob
//! and reaps every child — SIGHUP, a closed stdout, a closed stdin (what a
//! dropped SSH session looks like), SIGKILL followed by `xrun-trial
//! restore` — on this machine's real `kernel.sched_rr_timeslice_ms`, under
//! the real machine lock; a value the kernel does not keep fails `check`
//! and `run`; journals are never trusted (a crafted one is refused and
//! writes nothing, a corrupt one does not block a valid one); and a trial
//! runs from a spec file with nothing but the three binaries and a clean
//! `PATH`, as on a board.
//!
//! Tests that change real sysctls need root and skip themselves otherwise;
//! the journal tests use a private knob tree (`--test-root`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Instant;
use xrunbench_test_support::boards::bin_dir;
use xrunbench_test_support::knob_lock;
use xrunbench_test_support::knobs::{other_timeslice, sysctl, RR};
use xrunbench_test_support::{procs, wait_for};

use serde_json::{json, Value};

/// The xrun-trial under test, with the player and hackbench from `bin_dir`.
fn xrun_trial() -> Command {
    let mut c = Command::new(bin_dir().join("xrun-trial"));
    c.arg("--bin-dir").arg(bin_dir());
    c
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

/// A spec on the virtual sink, with a small load, whose logs go to `work`.
fn spec(work: &Path, knobs: Value, duration_s: u64) -> Value {
    json!({
        "schema": "xrunbench.trial-spec/1",
        "trial": { "scenario": "t", "config": "a", "k": 1, "seq": 1 },
        "knobs": knobs,
        "audio": { "tone": { "rate": 8000, "channels": 1, "seconds": 1 } },
        "player": { "backend": "virtual", "buffer_time_us": 40000 },
        "load": { "hackbench": { "groups": 1, "fds": 2, "loops": 20, "datasize": 100,
                                 "mode": "process", "transport": "socket" } },
        "warmup_us": 200000,
        "duration_us": duration_s * 1_000_000,
        "work_dir": work,
    })
}

fn rr_knob(value: &str) -> Value {
    json!([{ "kind": "sysctl", "name": RR, "value": value }])
}

/// Processes whose command line contains `needle`, `xrun-trial` itself
/// left out: the trial's children.
fn processes_mentioning(needle: &str) -> Vec<String> {
    procs::processes_mentioning(needle)
        .into_iter()
        .filter(|p| !p.contains("xrun-trial"))
        .collect()
}

/// Starts `xrun-trial run -` with the spec on its stdin, kept open.
fn start_trial(spec: &Value) -> Child {
    procs::spawn_with_open_stdin(xrun_trial().args(["run", "-"]), spec.to_string().as_bytes())
}

/// How a link-loss test cuts the trial off.
enum Cut {
    Sighup,
    CloseStdout,
    CloseStdin,
}

/// Starts a 30 s trial changing the real RR timeslice, cuts it off once
/// the player plays, and checks the knob is back, the children are gone
/// and the exit code is 129 (128 + SIGHUP; a closed link counts as one).
fn cut_off(cut: Cut) -> (Output, String) {
    let _g = knob_lock();
    let before = sysctl(RR);
    let work = tempfile::tempdir().unwrap();
    let mut child = start_trial(&spec(work.path(), rr_knob(other_timeslice(&before)), 30));
    let needle = work.path().to_str().unwrap().to_string();
    assert!(
        wait_for(60, || sysctl(RR) != before
            && processes_mentioning(&needle)
                .iter()
                .any(|p| p.contains("xrun-player"))),
        "the trial never started playing"
    );
    // `wait_with_output` closes the child's stdin, which is itself a cut:
    // keep it open until the child has exited, so that each test makes
    // exactly one cut and the record names that one.
    let stdin = match cut {
        Cut::CloseStdin => None,
        _ => child.stdin.take(),
    };
    let started = Instant::now();
    match cut {
        // SAFETY: signalling our own child.
        Cut::Sighup => unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGHUP);
        },
        Cut::CloseStdout => drop(child.stdout.take()),
        Cut::CloseStdin => drop(child.stdin.take()),
    }
    let out = child.wait_with_output().unwrap();
    let stopped_in = started.elapsed();
    drop(stdin);
    assert_eq!(sysctl(RR), before, "knob restored");
    assert_eq!(
        out.status.code(),
        Some(129),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        processes_mentioning(&needle).is_empty(),
        "children reaped: {:?}",
        processes_mentioning(&needle)
    );
    // How long the stop took is printed, never judged: a slow machine is
    // slower. That the cut, not the end of the 30 s, stopped it is in the
    // outcome each caller checks.
    eprintln!("stopped {stopped_in:?} after the cut");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

#[test]
fn sighup_restores_the_knob_and_reaps_the_children() {
    xrunbench_test_support::skip_unless_root!();
    let (out, stderr) = cut_off(Cut::Sighup);
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        record["outcome"],
        json!({ "status": "interrupted", "by": "SIGHUP" })
    );
    assert_eq!(record["knobs"][0]["restored"], record["knobs"][0]["found"]);
    assert!(stderr.contains("interrupted (SIGHUP)"), "{stderr}");
}

#[test]
fn closed_stdout_restores_the_knob_and_reaps_the_children() {
    xrunbench_test_support::skip_unless_root!();
    let (_, stderr) = cut_off(Cut::CloseStdout);
    assert!(stderr.contains("interrupted (stdout closed)"), "{stderr}");
}

#[test]
fn closed_stdin_restores_the_knob_and_reaps_the_children() {
    xrunbench_test_support::skip_unless_root!();
    let (out, stderr) = cut_off(Cut::CloseStdin);
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["outcome"]["by"], "stdin closed", "{stderr}");
}

/// JSON files in the machine's journal directories.
fn journals() -> Vec<PathBuf> {
    ["/var/lib/xrunbench/journal", "/run/xrunbench/journal"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|it| it.flatten().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect()
}

#[test]
fn sigkill_leaves_a_journal_that_restore_replays() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = sysctl(RR);
    let work = tempfile::tempdir().unwrap();
    let mut child = start_trial(&spec(work.path(), rr_knob(other_timeslice(&before)), 30));
    let needle = work.path().to_str().unwrap().to_string();
    assert!(wait_for(60, || sysctl(RR) != before), "never applied");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_ne!(sysctl(RR), before, "SIGKILL leaves the knob changed");
    assert_eq!(journals().len(), 1, "and its journal");
    assert!(
        wait_for(10, || processes_mentioning(&needle).is_empty()),
        "the children stop by themselves (parent-death signal)"
    );
    let out = xrun_trial().arg("restore").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("restored from"), "{stdout}");
    assert_eq!(sysctl(RR), before);
    assert!(journals().is_empty());
}

#[test]
fn a_value_the_kernel_does_not_keep_fails_check_and_run() {
    xrunbench_test_support::skip_unless_root!();
    let _g = knob_lock();
    let before = sysctl(RR);
    let work = tempfile::tempdir().unwrap();
    // The kernel accepts a write of -5 and keeps its old value.
    let s = spec(work.path(), rr_knob("-5"), 1);
    let file = work.path().join("spec.json");
    std::fs::write(&file, s.to_string()).unwrap();
    let out = xrun_trial().arg("check").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.contains("wrote `-5`") && stdout.contains(&format!("reads back `{before}`")),
        "{stdout}"
    );
    assert_eq!(sysctl(RR), before);

    let out = xrun_trial().arg("run").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["outcome"]["status"], "failed");
    let reason = record["outcome"]["reason"].as_str().unwrap();
    assert!(reason.contains("did not keep"), "{reason}");
    assert_eq!(record["knobs"][0]["read_back"], before.as_str());
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not keep"));
    assert_eq!(sysctl(RR), before);
    assert!(journals().is_empty());
}

#[test]
fn a_bad_spec_exits_2_with_one_line_naming_the_field() {
    let work = tempfile::tempdir().unwrap();
    let mut s = spec(work.path(), json!([]), 1);
    s["player"]["bufer_time_us"] = json!(1);
    let mut child = start_trial(&s);
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("stdin: player.bufer_time_us: unknown field"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no record for a bad spec");
}

/// A private knob tree: `<root>/proc/sys/kernel/x` = `value`.
fn fake_tree(value: &str) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let knob = root.path().join("proc/sys/kernel/x");
    std::fs::create_dir_all(knob.parent().unwrap()).unwrap();
    std::fs::write(&knob, format!("{value}\n")).unwrap();
    (root, knob)
}

fn boot_id() -> String {
    read("/proc/sys/kernel/random/boot_id")
}

/// Writes a journal into a test root's journal directory.
fn journal(root: &Path, name: &str, body: &str) -> PathBuf {
    let dir = root.join("state/journal");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn journal_doc(boot: &str, entries: Value) -> String {
    json!({
        "schema": "xrunbench.journal/1",
        "boot_id": boot,
        "pid": 1,
        "trial": "a-1",
        "written_at": "2026-01-01T00:00:00Z",
        "entries": entries,
    })
    .to_string()
}

fn sysctl_entry(path: &Path, restore: &str) -> Value {
    json!({ "kind": "sysctl", "what": "sysctl x", "path": path,
            "requested": "9", "restore": restore })
}

fn restore_in(root: &Path) -> Output {
    xrun_trial()
        .arg("--test-root")
        .arg(root)
        .arg("restore")
        .output()
        .unwrap()
}

#[test]
fn a_crafted_journal_pointing_outside_the_knob_roots_is_refused_and_writes_nothing() {
    let (root, knob) = fake_tree("changed");
    let precious = root.path().join("precious.txt");
    std::fs::write(&precious, "keep me\n").unwrap();
    // One bad entry among good ones: the whole journal is refused before
    // anything is written, the knob under the root included.
    let sneaky = root.path().join("proc/sys/../../precious.txt");
    let planted = root.path().join("proc/sys/kernel/link");
    std::os::unix::fs::symlink(&precious, &planted).unwrap();
    for (name, bad) in [
        ("outside.json", precious.clone()),
        ("dotdot.json", sneaky),
        ("symlink.json", planted),
        ("etc.json", PathBuf::from("/etc/hostname")),
    ] {
        let entries = json!([sysctl_entry(&knob, "orig"), sysctl_entry(&bad, "pwned")]);
        let j = journal(root.path(), name, &journal_doc(&boot_id(), entries));
        let out = restore_in(root.path());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}");
        assert!(stdout.contains("refused journal"), "{name}: {stdout}");
        assert!(stdout.contains("nothing written"), "{name}: {stdout}");
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
        assert_eq!(
            std::fs::read_to_string(&knob).unwrap(),
            "changed\n",
            "{name}"
        );
        assert!(!j.exists(), "{name}: moved out of the replay's way");
        assert!(root
            .path()
            .join("state/journal/rejected")
            .join(name)
            .exists());
    }
    let again = restore_in(root.path());
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to restore"));
}

#[test]
fn a_corrupt_journal_does_not_block_a_valid_one() {
    let (root, knob) = fake_tree("changed");
    journal(root.path(), "a-corrupt.json", "{ not json");
    let valid = journal(
        root.path(),
        "b-valid.json",
        &journal_doc(&boot_id(), json!([sysctl_entry(&knob, "orig")])),
    );
    let old_boot = journal(
        root.path(),
        "c-old-boot.json",
        &journal_doc("another-boot", json!([sysctl_entry(&knob, "stale")])),
    );
    let out = restore_in(root.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        std::fs::read_to_string(&knob).unwrap(),
        "orig\n",
        "{stdout}"
    );
    assert!(
        stdout.contains("refused journal") && stdout.contains("a-corrupt.json"),
        "{stdout}"
    );
    assert!(
        stdout.contains("restored from") && stdout.contains("b-valid.json"),
        "{stdout}"
    );
    assert!(stdout.contains("earlier boot"), "{stdout}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refused journal is reported: {stdout}"
    );
    assert!(!valid.exists() && !old_boot.exists());
    assert!(root
        .path()
        .join("state/journal/rejected/a-corrupt.json")
        .exists());
}

#[test]
fn a_trial_on_a_private_knob_tree_reads_back_and_restores() {
    let (root, knob) = fake_tree("1");
    let work = tempfile::tempdir().unwrap();
    let mut s = spec(
        work.path(),
        json!([{ "kind": "sysctl", "name": "kernel.x", "value": "7" }]),
        1,
    );
    s["load"] = Value::Null;
    let file = work.path().join("spec.json");
    std::fs::write(&file, s.to_string()).unwrap();
    let out = xrun_trial()
        .arg("--test-root")
        .arg(root.path())
        .args(["run"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = &record["knobs"][0];
    assert_eq!(
        (
            k["found"].as_str(),
            k["read_back"].as_str(),
            k["restored"].as_str()
        ),
        (Some("1"), Some("7"), Some("1"))
    );
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1\n");
    assert!(record["player"]["totals"].is_object());
}

#[test]
fn runs_from_a_spec_file_with_only_the_three_binaries_and_a_clean_path() {
    // A real trial replays the machine's journals first: not while another
    // test holds one on purpose.
    let _g = knob_lock();
    let board = tempfile::tempdir().unwrap();
    for b in ["xrun-trial", "xrun-player", "xrun-hackbench"] {
        std::fs::copy(bin_dir().join(b), board.path().join(b)).unwrap();
    }
    let work = board.path().join("work");
    let mut s = spec(&work, json!([]), 1);
    let record = board.path().join("record.json");
    s["record"] = json!(record);
    let file = board.path().join("spec.json");
    std::fs::write(&file, s.to_string()).unwrap();
    let out = Command::new(board.path().join("xrun-trial"))
        .arg("run")
        .arg(&file)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(board.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty(), "the record went to its file");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_eq!(r["outcome"]["status"], "ran");
    let player = r["player_command"][0].as_str().unwrap();
    assert!(
        player.starts_with(board.path().to_str().unwrap()),
        "{player}"
    );
    assert!(r["load"]["rounds_completed"].as_u64().unwrap() >= 1);
    assert!(
        work.join("a-1.player.log").exists(),
        "logs kept in work_dir"
    );

    let probe = Command::new(board.path().join("xrun-trial"))
        .arg("probe")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let p: Value = serde_json::from_slice(&probe.stdout).unwrap();
    assert_eq!(p["schema"], "xrunbench.probe/1");
    assert_eq!(p["binaries"]["player"], true);
    assert_eq!(p["binaries"]["hackbench"], true);
    assert!(!p["machine"]["kernel_release"].as_str().unwrap().is_empty());
}
