//! The player's fixtures ([`xrunbench_test_support::player`]), and the
//! three only its own integration tests can have: its binary and cargo's
//! scratch directory for these tests (`env!` values cargo sets for them
//! alone) and the player's own tmpfs check (test-support does not link the
//! player).
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;
use std::process::Command;

pub use xrunbench_test_support::player::*;

/// Why no directory on a disk (not tmpfs) is to be had here; `None` when
/// [`disk_dir`] is one. The temporary directory may well be tmpfs; the
/// target directory's scratch space rarely is.
pub fn no_disk_dir() -> Option<String> {
    let dir = disk_dir();
    xrunbench_player::is_on_tmpfs(&dir)
        .unwrap()
        .then(|| format!("{} is on tmpfs: no disk to copy from", dir.display()))
}

/// Cargo's scratch directory for this crate's tests, for files the player
/// must find on a disk (see [`no_disk_dir`]).
pub fn disk_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The player binary.
pub fn player() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xrun-player"))
}
