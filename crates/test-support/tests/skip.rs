//! A skip is seen: on stderr past the harness's capture, in the log
//! `cargo xtask test` reads, and as a failure where skipping is forbidden.
//! Each case re-runs this test binary on the probe below in a child.

use std::process::Command;

use xrunbench_test_support::skip::{read_log, NO_SKIP_ENV, SKIP_LOG_ENV};

/// Set in the child only: the probe skips when it sees it.
const PROBE_ENV: &str = "XRUNBENCH_SKIP_PROBE";

/// The child's body: skips with a known reason. In the suite itself it is
/// the parent's means, not a check, and does nothing.
#[test]
fn probe() {
    if std::env::var_os(PROBE_ENV).is_some() {
        xrunbench_test_support::skip_unless!(1 + 1 == 3, "arithmetic is {}", "off");
        panic!("the skip did not return");
    }
}

/// This binary run on the probe alone, with `env` set and CI cleared.
fn run_probe(env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "probe", "--test-threads", "1"])
        .env(PROBE_ENV, "1")
        .env_remove("CI")
        .env_remove(NO_SKIP_ENV)
        .env_remove(SKIP_LOG_ENV);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn a_skip_passes_but_says_so_on_stderr_and_in_the_log() {
    let dir = std::env::temp_dir().join(format!("xrb-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("skips.log");
    let out = run_probe(&[(SKIP_LOG_ENV, log.to_str().unwrap())]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("SKIPPED skip::probe: arithmetic is off"),
        "{stderr}"
    );
    assert_eq!(
        read_log(&log),
        vec![("skip::probe".to_string(), "arithmetic is off".to_string())]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_skip_fails_in_ci_and_where_forbidden() {
    for env in [("CI", "true"), (NO_SKIP_ENV, "1")] {
        let out = run_probe(&[env]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{env:?}: {all}");
        assert!(
            all.contains(
                "skip::probe cannot run here and no test may skip (CI or root): arithmetic is off"
            ),
            "{env:?}: {all}"
        );
    }
}
