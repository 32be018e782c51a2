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
    // The disk has room for everything at first and fills up the moment
    // the first trial's record is kept: however much a trial writes on
    // this machine (its load's rounds follow the machine's speed), one
    // trial is kept and a later one cannot be written. Twenty trials are
    // planned, so a test that notices the record late still fills the
    // disk long before the run could end.
    let disk = SmallDisk::mount(8 << 20);
    let kept_before = kept_player_reports();
    let results = disk.path().join("results");
    let s = ScenarioText::virtual_sink("full")
        .trials(10)
        .hackbench("{ groups = 1, fds = 2, loops = 2000 }")
        .config("a")
        .config("b")
        .write(dir.path());
    let mut child = xtask()
        .args(["run", s.to_str().unwrap(), "--results-dir"])
        .arg(&results)
        .arg("--bin-dir")
        .arg(bin_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let filled = fill_when_kept(&disk, &results, "a-1.json", &mut child);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        filled,
        "the run ended before its first trial was kept:\n{stderr}"
    );
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
    let runs = find_named(&results, "run.json");
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
    let tmp: Vec<_> = files_under(&results)
        .into_iter()
        .filter(|p| {
            let rel = p.strip_prefix(&results).unwrap().to_string_lossy();
            rel.contains(".tmp") || rel.starts_with('.') || rel.contains("/.")
        })
        .collect();
    assert!(tmp.is_empty(), "temporaries left: {tmp:?}\n{stderr}");
    // Nor elsewhere: the player whose report did not fit kept it in the
    // temporary directory, and the trial that ran it took it away.
    assert_eq!(kept_player_reports(), kept_before, "{stderr}");
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

/// Waits until a record named `name` is kept under `results` (an atomic
/// rename: it is whole), then fills the disk to the last byte; returns
/// false when `child` (the run) ended first.
fn fill_when_kept(
    disk: &SmallDisk,
    results: &std::path::Path,
    name: &str,
    child: &mut std::process::Child,
) -> bool {
    loop {
        if !find_named(results, name).is_empty() {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    use std::io::Write;
    let mut ballast = std::fs::File::create(disk.path().join("ballast")).unwrap();
    let chunk = vec![0xa5u8; 64 * 1024];
    // Whole chunks, then what is left byte by byte: nothing stays free.
    while ballast.write_all(&chunk).is_ok() {}
    while ballast.write_all(&[0xa5]).is_ok() {}
    assert_eq!(disk.free(), 0, "the disk is full");
    true
}

/// The reports players kept outside where they were asked to write them
/// (`xrun-player-report-PID.json`, any PID, where the player keeps them).
fn kept_player_reports() -> std::collections::BTreeSet<std::path::PathBuf> {
    xrunbench_schema::player::kept_report_paths(0)
        .iter()
        .filter_map(|p| p.parent())
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("xrun-player-report-"))
        })
        .collect()
}
