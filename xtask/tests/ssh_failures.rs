//! When the board or the link fails, for real, on the test board (a
//! private sshd on 127.0.0.1; the board is this machine, so its trials
//! change the real `kernel.sched_rr_timeslice_ms` through the real machine
//! lock):
//!
//! - the link cut mid-trial (the connection's sshd frozen; keep-alives 1 s
//!   × 3): the knob is restored within seconds, long before the cut-off
//!   trial would have ended, the trial is run again and the run completes;
//! - the board powered off for longer than `reconnect_timeout`: the run
//!   ends with exit 1, one clear line, and the finished trials kept;
//! - Ctrl-C on the host: the board's trial stops, restores its knob and
//!   its record still comes back (exit 130);
//! - a trial past its `trial_timeout` is stopped on the board and counted
//!   lost (every retry too), its knob restored.
//!
//! Needs root; skipped otherwise. Each test takes the suite's knob lock.

mod ssh_support;
mod support;

use std::time::Instant;

use ssh_support::*;
use support::{ScenarioText, RR};

/// One configuration `a` changing the rr timeslice, on the virtual sink,
/// on the test board (`target_extra`: more `[target]` lines).
fn knob_scenario(
    board: &xrunbench_test_support::testboard::TestBoard,
    dir: &std::path::Path,
    trials: u32,
    duration: &str,
    target_extra: &str,
) -> std::path::PathBuf {
    ScenarioText::virtual_sink("cut")
        .trials(trials)
        .duration(duration)
        .warmup("200ms")
        .config_with("a", &support::changed_sysctls(&[RR]))
        .tail(&board.keepalive_target(&dir.join("board"), target_extra))
        .write(dir)
}

fn run(s: &std::path::Path, res: &std::path::Path, dir: &std::path::Path) -> Xtask {
    Xtask::spawn(
        &[
            "run",
            s.to_str().unwrap(),
            "--results-dir",
            res.to_str().unwrap(),
        ],
        dir,
    )
}

/// Waits until a trial runs on the board with the knob applied; its pid.
fn wait_trial_applied(board: &xrunbench_test_support::testboard::TestBoard, before: &str) -> u32 {
    let mut pid = None;
    assert!(
        support::wait_for(300, || {
            pid = trial_on_board(board);
            pid.is_some() && support::sysctl(RR) != before
        }),
        "no trial applied its knob on the board"
    );
    pid.unwrap()
}

#[test]
fn a_link_cut_mid_trial_restores_the_knob_then_the_trial_runs_again() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let before = support::sysctl(RR);
    let mut board = board("");
    let dir = tempfile::tempdir().unwrap();
    // 30 s trials: the cut-off one would restore its knob by itself only
    // 30 s after it applied it; the runner's recovery must be far faster.
    let s = knob_scenario(
        &board,
        dir.path(),
        1,
        "30s",
        "retries = 2\nreconnect_timeout = \"60s\"",
    );
    let res = dir.path().join("results");
    let mut x = run(&s, &res, dir.path());
    let orphan = wait_trial_applied(&board, &before);
    let frozen = board.freeze_sessions();
    assert!(!frozen.is_empty());
    let cut = Instant::now();
    assert!(
        support::wait_for(60, || support::sysctl(RR) == before),
        "knob not restored after the cut: {}",
        x.output()
    );
    let restored_after = cut.elapsed();
    eprintln!(
        "knob restored {:.1} s after the link was cut",
        restored_after.as_secs_f64()
    );
    assert!(
        support::wait_for(30, || !is_trial(orphan)),
        "the cut-off trial still runs"
    );
    assert_eq!(x.wait(300), Some(0), "{}", x.output());
    // Restored by the runner's recovery, which found the cut-off trial
    // still running and stopped it (it restores on SIGTERM) — not by the
    // trial ending by itself, which takes its 30 s of playback however
    // fast or slow the machine is.
    assert!(
        x.output().contains(&format!(
            "stopped the trial the link cut off (pid {orphan})"
        )),
        "{}",
        x.output()
    );
    let run = run_dir(&res);
    assert_eq!(
        trial_files(&run),
        ["a-1.json", "a-1.lost.json"],
        "{}",
        x.output()
    );
    let lost = json(&run.join("trials/a-1.lost.json"));
    assert!(
        lost["reason"].as_str().unwrap().contains("link lost"),
        "{lost}"
    );
    let err = x.stderr();
    assert!(err.contains("reconnected to ssh"), "{err}");
    assert!(
        err.contains(&format!(
            "stopped the trial the link cut off (pid {orphan})"
        )),
        "{err}"
    );
    assert!(err.contains("running it again (retry 1 of 2)"), "{err}");
    assert_eq!(
        json(&run.join("run.json"))["outcome"]["status"],
        "completed"
    );
    assert_eq!(support::sysctl(RR), before);
    drop(board);
    assert!(support::journals().is_empty(), "{:?}", support::journals());
}

#[test]
fn a_board_powered_off_past_the_reconnect_limit_ends_the_run_with_the_finished_trials() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let before = support::sysctl(RR);
    let mut board = board("");
    let dir = tempfile::tempdir().unwrap();
    // 6 s trials: the power goes off well inside the second one.
    let s = knob_scenario(
        &board,
        dir.path(),
        3,
        "6s",
        "retries = 1\nreconnect_timeout = \"3s\"",
    );
    let res = dir.path().join("results");
    let mut x = run(&s, &res, dir.path());
    // The first trial finished; the second runs on the board.
    assert!(
        support::wait_for(300, || !support::find_named(&res, "a-1.json").is_empty()),
        "{}",
        x.output()
    );
    let orphan = wait_trial_applied(&board, &before);
    board.power_off();
    let off = Instant::now();
    let code = x.wait(300);
    eprintln!(
        "run ended {:.1} s after the power went off",
        off.elapsed().as_secs_f64()
    );
    assert_eq!(code, Some(1), "{}", x.output());
    let err = x.stderr();
    let last = err
        .lines()
        .rfind(|l| l.starts_with("xtask: "))
        .unwrap_or_default();
    assert!(last.contains("did not come back within 3 s"), "{err}");
    assert!(last.contains("with 1 finished trial(s) kept"), "{err}");
    let run = run_dir(&res);
    assert_eq!(trial_files(&run), ["a-1.json", "a-2.lost.json"], "{err}");
    let manifest = json(&run.join("run.json"));
    assert_eq!(manifest["outcome"]["status"], "failed");
    assert!(std::fs::read_to_string(run.join("summary.txt"))
        .unwrap()
        .contains("a"));
    assert!(x.stdout().contains("results: "), "{}", x.output());
    assert!(ssh_left(&board).is_empty(), "{:?}", ssh_left(&board));
    // The board's own trial restores its knob: when its trial ends, or
    // when its link closes (dropping the board kills the frozen sshd).
    drop(board);
    assert!(
        support::wait_for(60, || support::sysctl(RR) == before && !is_trial(orphan)),
        "knob not restored on the board"
    );
}

#[test]
fn ctrl_c_on_the_host_stops_the_board_trial_which_restores_its_knob() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let before = support::sysctl(RR);
    let board = board("");
    let dir = tempfile::tempdir().unwrap();
    let s = knob_scenario(&board, dir.path(), 2, "30s", "");
    let res = dir.path().join("results");
    let mut x = run(&s, &res, dir.path());
    let trial = wait_trial_applied(&board, &before);
    x.signal_group(libc::SIGINT);
    assert_eq!(x.wait(120), Some(130), "{}", x.output());
    assert_eq!(support::sysctl(RR), before);
    assert!(!is_trial(trial) || support::wait_for(10, || !is_trial(trial)));
    let run = run_dir(&res);
    // The board's record came back over the link, marked interrupted.
    assert_eq!(
        trial_files(&run),
        ["a-1.interrupted.json"],
        "{}",
        x.output()
    );
    let record = json(&run.join("trials/a-1.interrupted.json"));
    assert_eq!(record["outcome"]["status"], "interrupted", "{record}");
    assert_eq!(
        json(&run.join("run.json"))["outcome"]["status"],
        "interrupted"
    );
    assert!(ssh_left(&board).is_empty(), "{:?}", ssh_left(&board));
}

#[test]
fn a_trial_past_its_timeout_is_stopped_on_the_board_and_counted_lost() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let before = support::sysctl(RR);
    // Every trial on this board hangs right after applying its knobs.
    let board = board("SetEnv XRUNBENCH_FAULT=sleep");
    let dir = tempfile::tempdir().unwrap();
    let s = knob_scenario(
        &board,
        dir.path(),
        1,
        "1s",
        "trial_timeout = \"8s\"\nretries = 1",
    );
    let res = dir.path().join("results");
    let mut x = run(&s, &res, dir.path());
    assert_eq!(x.wait(300), Some(1), "{}", x.output());
    let err = x.stderr();
    assert!(
        err.contains("trial a-1 was lost: it ran past its trial_timeout of 8 s and was stopped on the target (lost 2 times)"),
        "{err}"
    );
    let run = run_dir(&res);
    assert_eq!(
        trial_files(&run),
        ["a-1.attempt2.lost.json", "a-1.lost.json"],
        "{err}"
    );
    assert_eq!(support::sysctl(RR), before);
    assert!(trial_on_board(&board).is_none());
    assert!(support::journals().is_empty(), "{:?}", support::journals());
}
