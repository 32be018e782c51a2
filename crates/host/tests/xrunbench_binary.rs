//! The `xrunbench` binary, as a user who installed it (`cargo install
//! --path crates/host`) runs it from any directory: the product's verbs,
//! results under `./results`, and none of xtask's automation.

use std::process::Command;

use xrunbench_test_support::boards::workspace;
use xrunbench_test_support::scenarios::run_one_trial_here;

fn xrunbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xrunbench"))
}

#[test]
fn a_run_from_another_directory_writes_its_results_there() {
    let run = run_one_trial_here(env!("CARGO_BIN_EXE_xrunbench"), "installed");
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert!(run.output.status.success(), "{stderr}");
    assert_eq!(run.records.len(), 1, "{stderr}");
    // The table a user pastes comes with the run.
    let stdout = String::from_utf8_lossy(&run.output.stdout);
    assert!(stdout.contains("installed"), "{stdout}{stderr}");
}

#[test]
fn the_product_verbs_are_offered_and_the_project_automation_is_not() {
    let out = xrunbench().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let verbs: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for verb in [
        "run",
        "restore",
        "compare",
        "plot",
        "lab",
        "lava",
        "lava-results",
        "bisect",
        "bisect-run",
        "board",
    ] {
        assert!(verbs.contains(&verb), "{verb} missing from {verbs:?}");
    }
    for automation in ["test", "lint", "bench", "fuzz", "soak", "bisect-sim"] {
        assert!(!verbs.contains(&automation), "{automation} in {verbs:?}");
    }
    let board = xrunbench().args(["board", "test"]).output().unwrap();
    assert_eq!(board.status.code(), Some(2), "`board test` is xtask's");
}

#[test]
fn a_mistyped_bisect_step_aborts_the_bisection() {
    // clap's usage error is exit 2, which `git bisect run` would take for
    // "bad"; 128 makes it stop.
    let out = xrunbench()
        .args(["bisect", "--no-such-option"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-option"));
}

#[test]
fn its_messages_go_by_its_own_name() {
    let out = xrunbench()
        .args(["compare", "/nonexistent-run-dir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("xrunbench: /nonexistent-run-dir: not a run directory"),
        "{stderr}"
    );
}

#[test]
fn what_it_tells_the_user_to_run_is_its_own_verb() {
    // A baseline with a trial but without the run's record: bisect says
    // what makes one, as this user types it.
    let dir = tempfile::tempdir().unwrap();
    let trials = dir.path().join("base/trials");
    std::fs::create_dir_all(&trials).unwrap();
    let workspace = workspace();
    std::fs::copy(
        workspace.join("xtask/tests/golden/trial-template.json"),
        trials.join("sched-other-1.json"),
    )
    .unwrap();
    let out = xrunbench()
        .arg("bisect")
        .arg(workspace.join("scenarios/quickstart.toml"))
        .args(["--config", "sched-other", "--baseline"])
        .arg(dir.path().join("base"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "run.json: not found: the baseline must be a run directory of `xrunbench run`"
        ),
        "{stderr}"
    );
}
