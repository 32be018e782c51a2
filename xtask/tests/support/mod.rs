//! Helpers shared by the runner's integration tests: the xtask binary, the
//! board binaries (built once per test binary), scenario files in temp
//! dirs, real sysctls saved and compared, processes found by command line.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// Each test binary uses its own part of this module.
#[allow(unused_imports)]
pub use xrunbench_test_support::{
    boards::bin_dir,
    boards::workspace,
    knob_lock,
    knobs::{changed_sysctls, other_autogroup, other_timeslice, sysctl, sysctls_line, AG, RR},
    procs::{children_named, processes_mentioning},
    scenarios::{one_trial_scenario, scenario, toml_string, ScenarioText},
    wait_for,
};

/// The xtask binary under test.
pub fn xtask() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    c.current_dir(workspace());
    c
}

/// Runs xtask with `args`, returning its output.
pub fn run_xtask(args: &[&str]) -> Output {
    xtask().args(args).output().expect("xtask runs")
}

/// Runs xtask with `args`, which must succeed; its stdout (the test fails
/// with both streams otherwise).
pub fn xtask_stdout(args: &[&str]) -> String {
    let out = run_xtask(args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "xtask {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Runs xtask with `args` and `--bin-dir` (the suite's board binaries).
pub fn run_xtask_with_bins(args: &[&str]) -> Output {
    xtask()
        .args(args)
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .expect("xtask runs")
}

/// The board binaries for `arch` (aarch64, armv7), cross-built into
/// `dir/ARCH` in the board stage's target directory (where `xtask test`
/// builds them ahead: cargo's lock orders the two builds, and the second
/// finds them built).
pub fn cross_board_binaries(arch: &str, dir: &Path) -> PathBuf {
    let out = xtask()
        .args(["board", "build", "--arch", arch, "--out"])
        .arg(dir)
        .env(
            "CARGO_TARGET_DIR",
            xrunbench_test_support::boards::board_stage_target_dir(),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "board build --arch {arch}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(arch)
}

/// JSON files in the machine's journal directories (what a trial left
/// behind; `rejected/` is not a journal).
pub fn journals() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["/var/lib/xrunbench/journal", "/run/xrunbench/journal"] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_file() && p.extension().is_some_and(|x| x == "json") {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Files under `dir` (recursive) named `name`.
pub fn find_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(find_named(&p, name));
            } else if e.file_name() == name {
                out.push(p);
            }
        }
    }
    out
}

/// `git ARGS` in `repo` (a throwaway repository of a test) with a fixed
/// author; its trimmed stdout; panics with git's stderr when it fails.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Writes an executable `sh` script (a deploy hook, a fake build).
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The regression the bisect tests inject: `player` (a quoted path)
/// started with the script's arguments and stopped (SIGSTOP) for 600 ms
/// after every 200 ms it runs — a task the kernel does not run, as a
/// scheduler regression would do. The scenarios give it a 300 ms buffer
/// (50 ms periods), so each stop is an underrun of at least 300 ms, while
/// a pause of the machine itself stays inside the buffer: this kind of VM,
/// with both CPUs saturated (60 busy loops beside the suite), has its
/// vCPUs taken away in slices of 100 ms (the FIFO 99 monitor sees pauses
/// of exactly 100 ms, one at a time), and only a pause of more than
/// 250 ms could dry a buffer refilled every 50 ms. With the 100 ms buffer
/// these tests had before, each such slice was an underrun, and a good
/// commit with one stray trial in eight could not be shown good.
pub fn stopped_player_script(player: &str) -> String {
    format!(
        r#"{player} "$@" &
player=$!
(
    while sleep 0.2; do
        kill -STOP "$player" 2>/dev/null || exit 0
        sleep 0.6
        kill -CONT "$player" 2>/dev/null || exit 0
    done
) &
stopper=$!
wait "$player"
status=$?
kill "$stopper" 2>/dev/null
exit "$status"
"#
    )
}
