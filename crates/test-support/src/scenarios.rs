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
