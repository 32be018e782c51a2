//! A scenario that chooses `backend = "cpal"` with `host = "jack"` runs
//! through the runner and `xrun-trial` on a real JACK server (dummy
//! backend, started here with crates/test-support): the player plays
//! through cpal's JACK host and the record says so.

mod support;

use std::process::Command;

use support::*;
use xrunbench_test_support::servers::{JackConfig, JackServer};

#[test]
fn a_cpal_jack_scenario_runs_through_xrun_trial() {
    // A real trial replays the machine's journals first: not while another
    // test holds one on purpose.
    let _g = knob_lock();
    let server = JackServer::start(&JackConfig::default())
        .expect("start a JACK dummy server (cargo xtask test installs jackd2)");
    let dir = tempfile::tempdir().unwrap();
    let s = ScenarioText::virtual_sink("cpal-jack")
        .generate("{ seconds = 1 }")
        .audio("backend", "cpal")
        .audio("host", "jack")
        .audio("buffer_time", "20ms")
        .config("jack")
        .write(dir.path());
    let res = dir.path().join("results");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.current_dir(workspace())
        .args(["run", s.to_str().unwrap(), "--results-dir"])
        .arg(&res)
        .arg("--bin-dir")
        .arg(bin_dir());
    server.configure(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("Amean    underruns/min"), "{stdout}");
    let t = find_named(&res, "jack-1.json");
    assert_eq!(t.len(), 1);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&t[0]).unwrap()).unwrap();
    assert_eq!(r["outcome"]["status"], "ran");
    let args: Vec<&str> = r["player_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.windows(2).any(|w| w == ["--host", "jack"]), "{args:?}");
    let params = &r["player"]["params"];
    assert_eq!(params["backend"], "cpal", "{params}");
    // JACK's host takes floats in the server's own period.
    assert_eq!(params["format"], "FLOAT_LE", "{params}");
    assert_eq!(params["period_frames"], 256, "{params}");
    assert_eq!(r["player"]["frames_written"], 48_000);
}
