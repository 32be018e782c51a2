//! The board binaries the suites run (`xrun-trial`, `xrun-player`,
//! `xrun-hackbench`), built once per test binary.
//!
//! They are built in their own cargo profile, `test-boards`
//! (`target/test-boards/`): the release profile with the test hooks in
//! (`xrunbench-trial/fault-injection`), so they can never be mistaken for
//! the release binaries a user runs (`target/release/`), and a test that
//! builds one set never rebuilds a binary another test is running.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The cargo profile of the suite's board binaries.
pub const PROFILE: &str = "test-boards";

/// The features every suite's board binaries are built with (one set for
/// every test binary): the player's JACK host, for the cpal scenario
/// test, and the trial's fault injection.
pub const FEATURES: &str = "xrunbench-player/cpal-jack,xrunbench-trial/fault-injection";

pub use xrunbench_paths::{target_dir, workspace_root as workspace};

/// The directory of the suite's board binaries, built on first use in
/// this process (cargo's own lock orders builds across test binaries).
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(workspace())
            .args(["build", "--quiet", "--profile", PROFILE])
            .args(["-p", "xrunbench-trial", "-p", "xrunbench-player"])
            .args(["-p", "xrunbench-hackbench", "--features", FEATURES])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the board binaries failed");
        target_dir().join(PROFILE)
    })
    .clone()
}

/// The board stage's own target directory (cargo holds a target
/// directory's lock while it builds, so the cross builds live apart from
/// the suite's), where `xtask test` builds the cross-compiled board
/// binaries ahead of the stage.
pub fn board_stage_target_dir() -> PathBuf {
    target_dir().join("board-stage")
}
