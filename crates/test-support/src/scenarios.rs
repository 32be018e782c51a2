//! Scenario files written for a test: the runner's and the `xrunbench`
//! binary's tests read the same ones.

use std::path::{Path, PathBuf};

/// Writes `body` as `<dir>/<name>.toml`.
pub fn scenario(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, body).unwrap();
    p
}

/// The smallest scenario that runs: one 1 s trial of one configuration
/// on the virtual sink, named `name`, written into `dir`.
pub fn one_trial_scenario(dir: &Path, name: &str) -> PathBuf {
    scenario(
        dir,
        name,
        &format!(
            "name = \"{name}\"\ntrials = 1\nduration = \"1s\"\nwarmup = \"0s\"\n\
             [audio]\ngenerate = {{ seconds = 1, rate = 8000, channels = 1 }}\nbackend = \"virtual\"\n\
             [[config]]\nname = \"a\"\n"
        ),
    )
}

/// What [`run_one_trial_here`] left: the directory it ran in, the trial
/// records found under its `results/<name>/`, and the run's output.
pub struct RunHere {
    /// The directory the run was started from (removed on drop).
    pub dir: tempfile::TempDir,
    /// `a-1.json` files under `dir/results/<name>/`.
    pub records: Vec<PathBuf>,
    /// The run's exit status and streams.
    pub output: std::process::Output,
}

/// Runs `binary run <one-trial scenario> --bin-dir <the suite's board
/// binaries>` (the runner of xtask or of xrunbench) from a fresh temporary
/// directory, without `--results-dir`: where its results land.
pub fn run_one_trial_here(binary: &str, name: &str) -> RunHere {
    let dir = tempfile::tempdir().unwrap();
    let s = one_trial_scenario(dir.path(), name);
    let output = std::process::Command::new(binary)
        .current_dir(dir.path())
        .args(["run", s.to_str().unwrap(), "--bin-dir"])
        .arg(crate::boards::bin_dir())
        .output()
        .unwrap();
    let records = crate::disk::files_under(&dir.path().join("results").join(name))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "a-1.json"))
        .collect();
    RunHere {
        dir,
        records,
        output,
    }
}
