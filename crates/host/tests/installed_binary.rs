//! `cargo install --path crates/host` gives a binary that needs no
//! checkout: installed from a copy of this checkout, with the copy then
//! deleted, `xrunbench run` builds the board binaries for this machine
//! from the sources it carries, runs the trials here and writes
//! `./results`; its cache is `$XDG_CACHE_HOME/xrunbench`. Cross builds
//! still need the checkout, and say so.

use std::path::Path;
use std::process::Command;

use xrunbench_test_support::boards::{target_dir, workspace};
use xrunbench_test_support::scenarios::one_trial_scenario;

/// The tracked files of this checkout (as they are now) copied to `to`.
fn copy_checkout(to: &Path) {
    let listed = Command::new("git")
        .current_dir(workspace())
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .expect("git runs");
    assert!(listed.status.success());
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).expect("UTF-8 file names");
        let from = workspace().join(name);
        if !from.is_file() {
            continue;
        }
        let dest = to.join(name);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&from, &dest).unwrap();
    }
}

#[test]
fn the_installed_binary_runs_a_scenario_after_its_checkout_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let checkout = tmp.path().join("checkout");
    copy_checkout(&checkout);
    let root = tmp.path().join("installed");
    // Offline: what the suite's own build fetched serves (and a test never
    // reaches beyond loopback). A target directory of its own: cargo names
    // a member's build after its place in the workspace, so a copy's build
    // in the suite's directory would pass for the checkout's own.
    let target = target_dir().join("installed-binary");
    // The quickest build that is still cargo's own install: nothing to
    // share with the suite's builds, so unoptimised and without debug info.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let installed = Command::new(&cargo)
        .args(["install", "--quiet", "--debug", "--locked", "--path"])
        .arg(checkout.join("crates/host"))
        .arg("--root")
        .arg(&root)
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_PROFILE_DEV_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env("CARGO_INCREMENTAL", "0")
        .status()
        .expect("cargo runs");
    assert!(installed.success(), "cargo install failed");
    std::fs::remove_dir_all(&checkout).unwrap();

    let here = tmp.path().join("here");
    std::fs::create_dir(&here).unwrap();
    let cache = tmp.path().join("cache");
    let s = one_trial_scenario(&here, "standalone");
    // The board binaries' release build, made quick: what is tested is
    // where they are built from, not how small they come out.
    let out = Command::new(root.join("bin/xrunbench"))
        .current_dir(&here)
        .arg("run")
        .arg(&s)
        .env("XDG_CACHE_HOME", &cache)
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let records: Vec<_> =
        xrunbench_test_support::disk::files_under(&here.join("results/standalone"))
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n == "a-1.json"))
            .collect();
    assert_eq!(records.len(), 1, "{stderr}");
    // Built from the sources it carries, unpacked into its cache.
    let unpacked = xrunbench_test_support::disk::files_under(&cache.join("xrunbench/sources"));
    assert!(
        unpacked
            .iter()
            .any(|p| p.ends_with("crates/trial/src/main.rs")),
        "nothing unpacked under {}: {stderr}",
        cache.display()
    );
    // Cross builds still want the checkout, and say which command.
    let board = Command::new(root.join("bin/xrunbench"))
        .args(["board", "build"])
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&board.stderr);
    assert!(!board.status.success(), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("`cargo xtask board build`"), "{said}");
}
