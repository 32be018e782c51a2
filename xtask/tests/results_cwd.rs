//! Where a run writes without `--results-dir`: `results/` in the directory
//! the user runs it from (a kernel tree, for `bisect-run`), never the
//! xrunbench checkout the binary was built from.

mod support;

use support::*;

#[test]
fn a_run_without_results_dir_writes_under_the_directory_it_runs_from() {
    let dir = tempfile::tempdir().unwrap();
    let s = one_trial_scenario(dir.path(), "here");
    let out = xtask()
        .current_dir(dir.path())
        .args(["run", s.to_str().unwrap(), "--bin-dir"])
        .arg(bin_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let records = find_named(&dir.path().join("results/here"), "a-1.json");
    assert_eq!(records.len(), 1, "{stderr}");
    // And nothing under the checkout's own results/ for this scenario.
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/here");
    assert!(!checkout.exists(), "{} was written", checkout.display());
}
