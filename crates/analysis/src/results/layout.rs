//! Where each document of a run directory lives, by name.

use std::path::{Path, PathBuf};

use xrunbench_schema::trial::{TrialId, TrialOutcome, TrialRecord};

/// The run manifest, [`super::RunManifest`].
pub const MANIFEST: &str = "run.json";
/// The trials' directory.
pub const TRIALS: &str = "trials";
/// The summary as text.
pub const SUMMARY_TEXT: &str = "summary.txt";
/// The summary as data.
pub const SUMMARY_JSON: &str = "summary.json";
/// Stem of the comparison table's files (`comparison.txt`, `.md`, …).
pub const COMPARISON: &str = "comparison";
/// The plots' directory.
pub const PLOTS: &str = "plots";

/// Suffixes of trial files that are not measurements: the run's log.
const NOT_MEASURED: [&str; 3] = [".failed.json", ".interrupted.json", ".lost.json"];

/// The default results root: `results/` in the directory the user runs us
/// from, never the checkout we were built from (`bisect-run` in a kernel
/// tree writes there, not into the xrunbench checkout); from the
/// checkout's top, `cargo xtask run` writes where it always did.
pub fn default_results_root() -> PathBuf {
    std::env::current_dir().unwrap_or_default().join("results")
}

/// `run_dir/trials`.
pub fn trials_dir(run_dir: &Path) -> PathBuf {
    run_dir.join(TRIALS)
}

/// Whether a file in `trials/` is a measured trial record (not a log
/// entry of a failed, interrupted or lost trial, nor a hidden temporary).
pub fn is_measured_record_name(name: &str) -> bool {
    !name.starts_with('.')
        && name.ends_with(".json")
        && !NOT_MEASURED.iter().any(|s| name.ends_with(s))
}

/// Whether a file in `trials/` is a log entry: a trial that failed, was
/// interrupted or was lost.
pub fn is_log_entry_name(name: &str) -> bool {
    !name.starts_with('.') && NOT_MEASURED.iter().any(|s| name.ends_with(s))
}

/// The file name of the record of trial `id` (the host's own name for
/// it, never the record's): `<stem>.json` when it is a measurement, else
/// named by how it ended.
pub fn record_file_name(id: &TrialId, record: &TrialRecord) -> String {
    let stem = id.stem();
    let suffix = match record.outcome {
        TrialOutcome::Ran => "json",
        TrialOutcome::Failed { .. } => "failed.json",
        TrialOutcome::Interrupted { .. } => "interrupted.json",
    };
    format!("{stem}.{suffix}")
}

/// The file name of attempt `attempt` at trial `stem`, lost.
pub fn lost_file_name(stem: &str, attempt: u32) -> String {
    match attempt {
        0 | 1 => format!("{stem}.lost.json"),
        n => format!("{stem}.attempt{n}.lost.json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_measurements_are_records() {
        assert!(is_measured_record_name("a-1.json"));
        assert!(is_measured_record_name("x.failed-2.json"));
        for n in [
            "a-1.failed.json",
            "a-1.lost.json",
            "a-1.interrupted.json",
            ".a-1.player.json",
        ] {
            assert!(!is_measured_record_name(n), "{n}");
        }
        assert!(is_log_entry_name("a-1.lost.json"));
        assert!(is_log_entry_name(&lost_file_name("a-1", 2)));
        assert!(!is_measured_record_name("a-1.attempt2.lost.json"));
        assert!(!is_log_entry_name("a-1.json"));
        assert!(!is_log_entry_name(".a-1.lost.json.tmp-1"));
    }
}
