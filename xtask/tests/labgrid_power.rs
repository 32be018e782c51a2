//! The target's `power_cycle` hook driven by a real labgrid (`pip install
//! labgrid` into a venv in the suite's cache): a labgrid coordinator on
//! 127.0.0.1, a place acquired, an environment file whose target has an
//! `ExternalPowerDriver` whose commands stop and start the test board's
//! sshd. The board loses its power mid-trial; the runner runs
//! `labgrid-client -p PLACE power cycle` (docs/board-farms.md's recipe),
//! the board comes back, the lost trial runs again and the run completes —
//! with host keys checked all along (labgrid's own SSH would not check
//! them).
//!
//! Needs root (the board's sshd); skipped otherwise.

mod lava_support;
mod ssh_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use lava_support::{cache_dir, checked, pip_cache, PYTHON};
use ssh_support::*;
use support::toml_string;
use xrunbench_test_support::testboard::TestBoard;

/// The labgrid release the recipe was tested with.
const LABGRID: &str = "labgrid==26.0.1";

/// A venv with labgrid, made once in the suite's cache; its bin/.
fn labgrid_bin() -> PathBuf {
    let venv = cache_dir("labgrid-venv");
    let done = venv.join(".xrunbench-complete");
    if !done.is_file() {
        // A venv cannot move (its scripts name its path): made in place,
        // marked complete last.
        let _ = std::fs::remove_dir_all(&venv);
        std::fs::create_dir_all(venv.parent().unwrap()).unwrap();
        checked(
            Command::new(PYTHON).args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
        checked(
            Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", LABGRID])
                .env("PIP_CACHE_DIR", pip_cache()),
            "pip install labgrid",
        );
        std::fs::write(&done, LABGRID).unwrap();
    }
    venv.join("bin")
}

/// A labgrid coordinator on 127.0.0.1 (its state in `dir`), stopped on
/// drop.
struct Coordinator {
    child: Child,
    address: String,
}

impl Coordinator {
    fn start(bin: &Path, dir: &Path) -> Coordinator {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let log = dir.join("coordinator.log");
        let child = Command::new(bin.join("labgrid-coordinator"))
            .args(["-l", &address])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("coordinator.err")).unwrap())
            .spawn()
            .expect("labgrid-coordinator starts");
        let c = Coordinator { child, address };
        let ready = support::wait_for(60, || {
            Command::new(bin.join("labgrid-client"))
                .args(["-x", &c.address, "places"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        assert!(
            ready,
            "labgrid-coordinator not ready: {}",
            std::fs::read_to_string(dir.join("coordinator.err")).unwrap_or_default()
        );
        c
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sshd the power switch started (daemonized, its pid in the board's
/// pid file), stopped on drop: the test board only knows its own.
struct SwitchedOn(PathBuf);

impl Drop for SwitchedOn {
    fn drop(&mut self) {
        let Ok(pid) = std::fs::read_to_string(&self.0) else {
            return;
        };
        let Ok(pid) = pid.trim().parse::<u32>() else {
            return;
        };
        if xrunbench_test_support::procs::process(pid).is_some_and(|p| p.comm == "sshd") {
            if let Ok(pid) = libc::pid_t::try_from(pid) {
                // SAFETY: kill(2) on the sshd the test's power switch started.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
    }
}

/// The power switch's two scripts and the log they append to.
struct PowerSwitch {
    log: PathBuf,
    on: PathBuf,
    off: PathBuf,
}

/// Writes the power switch into `dir`: "on" starts the board's sshd from
/// `config`, "off" stops the sshd named in `pid_file`; each notes itself
/// in the log.
fn write_power_switch(dir: &Path, config: &Path, pid_file: &Path) -> PowerSwitch {
    // The power switch: labgrid runs these (no shell: `sh FILE`).
    let power_log = dir.join("power.log");
    let on = dir.join("power-on.sh");
    let off = dir.join("power-off.sh");
    std::fs::write(
        &on,
        format!(
            "echo on >> '{log}'\nexec /usr/sbin/sshd -f '{config}' -E '{sshd_log}'\n",
            log = power_log.display(),
            config = config.display(),
            sshd_log = dir.join("sshd-on.log").display()
        ),
    )
    .unwrap();
    std::fs::write(
        &off,
        format!(
            "echo off >> '{log}'\npid=$(cat '{pid}' 2>/dev/null) || exit 0\n\
             [ \"$(cat /proc/$pid/comm 2>/dev/null)\" = sshd ] && kill \"$pid\"\nexit 0\n",
            log = power_log.display(),
            pid = pid_file.display()
        ),
    )
    .unwrap();
    PowerSwitch {
        log: power_log,
        on,
        off,
    }
}

/// Writes labgrid's environment file into `dir`: a target on `place` whose
/// `ExternalPowerDriver` runs the switch's scripts; its path.
fn write_env(dir: &Path, place: &str, switch: &PowerSwitch) -> PathBuf {
    let env = dir.join("env.yaml");
    std::fs::write(
        &env,
        format!(
            "targets:\n  board:\n    resources:\n      RemotePlace:\n        name: {place}\n    \
             drivers:\n      ExternalPowerDriver:\n        cmd_on: \"sh {on}\"\n        \
             cmd_off: \"sh {off}\"\n        delay: 1.0\n",
            on = switch.on.display(),
            off = switch.off.display()
        ),
    )
    .unwrap();
    env
}

/// Writes the scenario into `dir`: two trials on `board`, with one retry
/// and `power_cycle` as its hook; its path.
fn write_scenario(dir: &Path, board: &TestBoard, power_cycle: &str) -> PathBuf {
    support::ScenarioText::virtual_sink("cycle")
        .trials(2)
        .duration("4s")
        .warmup("200ms")
        .config("a")
        .tail(&board.keepalive_target(
            &dir.join("board-workdir"),
            &format!(
                "retries = 1\nreconnect_timeout = \"30s\"\npower_cycle = {}",
                toml_string(power_cycle)
            ),
        ))
        .write(dir)
}

/// Checks what the run left after the power went: the hook ran labgrid's
/// power cycle (off, then on), the lost trial ran again, the run completed,
/// and host keys were checked throughout.
fn assert_power_cycled_and_retried(err: &str, power_log: &Path, res: &Path) {
    assert!(err.contains("power_cycle hook: LG_COORDINATOR="), "{err}");
    assert!(err.contains("power-cycled ssh"), "{err}");
    assert!(err.contains("running it again (retry 1 of 1)"), "{err}");
    assert_eq!(
        std::fs::read_to_string(power_log).unwrap(),
        "off\non\n",
        "labgrid's ExternalPowerDriver ran off, then on"
    );
    let run = run_dir(res);
    assert_eq!(
        trial_files(&run),
        ["a-1.json", "a-1.lost.json", "a-2.json"],
        "{err}"
    );
    let hooks = std::fs::read_to_string(run.join("hooks.log")).unwrap();
    assert!(hooks.contains("== power_cycle hook succeeded"), "{hooks}");
    assert_eq!(
        json(&run.join("run.json"))["outcome"]["status"],
        "completed"
    );
    // Our ssh kept checking the board's key (labgrid's own would not).
    assert!(!err.contains("StrictHostKeyChecking=no"), "{err}");
}

#[test]
fn labgrid_power_cycles_a_lost_board_and_the_trial_runs_again() {
    xrunbench_test_support::skip_unless_root!();
    let bin = labgrid_bin();
    let dir = tempfile::tempdir().unwrap();
    let mut board = board("");
    let config = board.sshd_config();
    let pid_file = config.with_file_name("sshd.pid");
    // Declared after the board: on every way out it goes first, while the
    // board's directory (and the pid file in it) still exists.
    let switched_on = SwitchedOn(pid_file.clone());

    let switch = write_power_switch(dir.path(), &config, &pid_file);
    let coordinator = Coordinator::start(&bin, dir.path());
    let place = format!("xrunbench-{}", std::process::id());
    let client = |args: &[&str]| {
        checked(
            Command::new(bin.join("labgrid-client"))
                .args(["-x", &coordinator.address, "-p", &place])
                .args(args),
            &format!("labgrid-client {}", args.join(" ")),
        )
    };
    client(&["create"]);
    client(&["acquire"]);
    let env = write_env(dir.path(), &place, &switch);

    // The recipe: power_cycle = "labgrid-client -p PLACE power cycle".
    let power_cycle = format!(
        "LG_COORDINATOR={} {} -c {} -p {place} power cycle",
        coordinator.address,
        bin.join("labgrid-client").display(),
        env.display()
    );
    let scenario = write_scenario(dir.path(), &board, &power_cycle);
    let res = dir.path().join("results");
    let mut x = Xtask::spawn(
        &[
            "run",
            scenario.to_str().unwrap(),
            "--results-dir",
            res.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(
        support::wait_for(300, || trial_on_board(&board).is_some()),
        "no trial started on the board: {}",
        x.output()
    );
    // The power goes: every connection frozen, nothing listening. Without
    // the hook the board would never come back.
    board.power_off();
    let off_at = Instant::now();
    assert_eq!(x.wait(300), Some(0), "{}", x.output());
    eprintln!(
        "run completed {:.1} s after the power went off",
        off_at.elapsed().as_secs_f64()
    );
    // No bound on how long that took (a slow machine is slower): without
    // the hook the board never comes back, and the run fails after its
    // reconnect_timeout instead of exiting 0 as above.
    let err = x.stderr();
    assert_power_cycled_and_retried(&err, &switch.log, &res);
    drop(x);
    drop(switched_on);
    drop(board);
    drop(coordinator);
}
