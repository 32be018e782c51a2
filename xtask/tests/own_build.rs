//! The runner's own build of the board binaries (no `--bin-dir`): the
//! release build users run. It must hold no test hook: with
//! `XRUNBENCH_FAULT=panic` in its environment, which the suite's own
//! builds obey by panicking once the knobs are applied, a trial runs to
//! its end.

mod support;

use support::*;

#[test]
fn a_release_build_ignores_the_fault_injection_variable() {
    let dir = tempfile::tempdir().unwrap();
    let s = one_trial_scenario(dir.path(), "release");
    let results = dir.path().join("results");
    let out = xtask()
        .args(["run", s.to_str().unwrap(), "--results-dir"])
        .arg(&results)
        .env("XRUNBENCH_FAULT", "panic")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("building xrun-trial, xrun-player and xrun-hackbench (release"),
        "the runner built its own binaries: {stderr}"
    );
    assert!(!stderr.contains("XRUNBENCH_FAULT"), "{stderr}");
    let records = find_named(&results, "a-1.json");
    assert_eq!(records.len(), 1, "{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&records[0]).unwrap()).unwrap();
    assert_eq!(record["outcome"]["status"], "ran", "{record}");
}
