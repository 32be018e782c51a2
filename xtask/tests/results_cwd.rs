//! Where a run writes without `--results-dir`: `results/` in the directory
//! the user runs it from (a kernel tree, for `bisect-run`), never the
//! xrunbench checkout the binary was built from.

use xrunbench_test_support::scenarios::run_one_trial_here;

#[test]
fn a_run_without_results_dir_writes_under_the_directory_it_runs_from() {
    let run = run_one_trial_here(env!("CARGO_BIN_EXE_xtask"), "here");
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert!(run.output.status.success(), "{stderr}");
    assert_eq!(run.records.len(), 1, "{stderr}");
    // And nothing under the checkout's own results/ for this scenario.
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/here");
    assert!(!checkout.exists(), "{} was written", checkout.display());
}
