//! Faults from outside: a results directory on a disk that fills up
//! mid-run. What must hold: the first error is the one reported, the run's
//! outcome is recorded, and no temporary file is left behind.
//!
//! Mounting a small tmpfs needs root; without it these tests skip
//! themselves.

mod support;

use std::process::Stdio;

use support::*;
use xrunbench_test_support::disk::{files_under, SmallDisk};

#[test]
fn a_full_disk_reports_the_first_error_records_the_outcome_and_leaves_no_temporary() {
    xrunbench_test_support::skip_unless_root!();
    let dir = tempfile::tempdir().unwrap();
    // Room for run.json (and the room it sets aside for its outcome) and
    // a trial or two, not for six trials.
    let disk = SmallDisk::mount(72 * 1024);
    let s = scenario(
        dir.path(),
        "full",
        "name = \"full\"\ntrials = 3\nduration = \"1s\"\nwarmup = \"0s\"\n\
         [audio]\ngenerate = { seconds = 1, rate = 8000, channels = 1 }\nbackend = \"virtual\"\n\
         [load]\nhackbench = { groups = 1, fds = 2, loops = 2000 }\n\
         [[config]]\nname = \"a\"\n[[config]]\nname = \"b\"\n",
    );
    let out = xtask()
        .args(["run", s.to_str().unwrap(), "--results-dir"])
        .arg(disk.path())
        .arg("--bin-dir")
        .arg(bin_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The first error line is what went wrong first: a trial whose files
    // did not fit, named, with the cause.
    let first = stderr
        .lines()
        .find(|l| l.contains("No space left on device"))
        .unwrap_or_default();
    assert!(
        first.starts_with("xtask: trial ") && !first.contains("run.json"),
        "first error: {first}\n{stderr}"
    );
    // Its outcome is recorded: in run.json, or where the runner said.
    let runs = find_named(disk.path(), "run.json");
    assert_eq!(runs.len(), 1, "{stderr}");
    let text = std::fs::read_to_string(&runs[0]).unwrap();
    let run: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(run["outcome"]["status"], "failed", "{text}\n{stderr}");
    assert!(
        run["outcome"]["error"]
            .as_str()
            .unwrap()
            .contains("No space left on device"),
        "{text}"
    );
    // No temporary, no scratch file, no room still set aside: nothing
    // hidden at all.
    let tmp: Vec<_> = files_under(disk.path())
        .into_iter()
        .filter(|p| {
            let rel = p.strip_prefix(disk.path()).unwrap().to_string_lossy();
            rel.contains(".tmp") || rel.starts_with('.') || rel.contains("/.")
        })
        .collect();
    assert!(tmp.is_empty(), "temporaries left: {tmp:?}\n{stderr}");
    // What was kept reads back.
    let run_dir = runs[0].parent().unwrap();
    let cmp = xtask()
        .args(["compare", run_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        cmp.status.success(),
        "{}",
        String::from_utf8_lossy(&cmp.stderr)
    );
}
