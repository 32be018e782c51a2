//! `git bisect run` drives `cargo xtask bisect` for real: a throwaway git
//! repository whose history turns the player's priority from SCHED_FIFO 80
//! to SCHED_OTHER under hackbench load (which makes the virtual sink
//! underrun), with harmless commits around it; bisect must name the commit
//! that changed the priority. Short trials keep it to about a minute.

mod support;

use std::path::Path;
use std::process::Command;

fn scenario(priority: &str, note: &str) -> String {
    // The bad commits also shrink the buffer: on a quiet machine a
    // SCHED_OTHER player with 20 ms of headroom often gets through a short
    // trial under this load unharmed, and the test needs a commit that is
    // bad in every trial; with 2 ms only real-time priority keeps up.
    let (buffer, period) = if priority.starts_with("fifo") {
        ("20ms", "5ms")
    } else {
        ("2ms", "500us")
    };
    format!(
        r#"# {note}
name = "bisect-test"
trials = 6
duration = "2s"
warmup = "500ms"

[audio]
generate = {{ tone_hz = 440, seconds = 2, rate = 48000, channels = 2, format = "S16_LE" }}
backend = "virtual"
buffer_time = "{buffer}"
period_time = "{period}"
priority = "{priority}"

[load]
hackbench = {{ groups = 10 }}

[[config]]
name = "player"
"#
    )
}

fn git(repo: &Path, args: &[&str]) -> String {
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

fn commit(repo: &Path, priority: &str, note: &str) -> String {
    std::fs::write(repo.join("scenario.toml"), scenario(priority, note)).unwrap();
    git(repo, &["add", "scenario.toml"]);
    git(repo, &["commit", "-q", "-m", note]);
    git(repo, &["rev-parse", "HEAD"])
}

#[test]
fn git_bisect_run_names_the_commit_that_dropped_the_rt_priority() {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("skipped: git is not installed");
        return;
    }
    // XRUNBENCH_BIN_DIR: prebuilt board binaries (e.g. while the player
    // crate is mid-change in a shared tree); else build them as the runner's
    // tests do.
    let bins = std::env::var_os("XRUNBENCH_BIN_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(support::bin_dir);
    let xtask = env!("CARGO_BIN_EXE_xtask");
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let results = tmp.path().join("results");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let good = commit(&repo, "fifo:80", "start: real-time player");
    commit(&repo, "fifo:80", "tweak a comment");
    let culprit = commit(
        &repo,
        "other",
        "drop the player's real-time priority, shrink its buffer",
    );
    commit(&repo, "other", "another comment");
    let bad = commit(&repo, "other", "and another");

    // The baseline: trials at the good commit.
    git(&repo, &["checkout", "-q", &good]);
    let run = Command::new(xtask)
        .current_dir(&repo)
        .args(["run", "scenario.toml", "--results-dir"])
        .arg(&results)
        .arg("--bin-dir")
        .arg(&bins)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "baseline run: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let baseline = std::fs::read_dir(results.join("bisect-test"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("trials").is_dir())
        .expect("baseline run directory");
    git(&repo, &["checkout", "-q", &bad]);
    git(&repo, &["bisect", "start", &bad, &good]);
    let out = Command::new("git")
        .current_dir(&repo)
        .args([
            "bisect",
            "run",
            xtask,
            "bisect",
            "scenario.toml",
            "--baseline",
        ])
        .arg(&baseline)
        .arg("--results-dir")
        .arg(&results)
        .arg("--bin-dir")
        .arg(&bins)
        .args(["--max-trials", "6"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Shown with --nocapture: what a user sees from `git bisect run`.
    eprintln!("{stdout}");
    let _ = Command::new("git")
        .current_dir(&repo)
        .args(["bisect", "reset"])
        .output();
    assert!(
        stdout.contains(&format!("{culprit} is the first bad commit")),
        "bisect did not name {culprit}:\n{stdout}\n{stderr}"
    );
    // Every step explained itself, one line per trial.
    assert!(
        stdout.contains("bisect: trial 1/6: underruns/min"),
        "{stdout}"
    );
}

#[test]
fn usage_errors_abort_the_bisection_and_bad_scenarios_skip() {
    let tmp = tempfile::tempdir().unwrap();
    let xtask = env!("CARGO_BIN_EXE_xtask");
    // A mistyped option: 128 (git bisect run aborts), not 2 (= "bad").
    let o = Command::new(xtask)
        .args(["bisect", "x.toml", "--baseline", "/nonexistent", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(128));
    // An unusable baseline: abort.
    let o = Command::new(xtask)
        .args(["bisect", "x.toml", "--baseline"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(128),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A kernel this machine does not run: skip (125), no trial run.
    let base = tmp.path().join("base");
    std::fs::create_dir_all(base.join("trials")).unwrap();
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/trial-template.json"),
    )
    .unwrap();
    for k in 1..=2 {
        let mut v: serde_json::Value = serde_json::from_str(&template).unwrap();
        v["trial"]["config"] = "player".into();
        v["trial"]["k"] = k.into();
        std::fs::write(
            base.join("trials").join(format!("player-{k}.json")),
            v.to_string(),
        )
        .unwrap();
    }
    let text = scenario("fifo:80", "other kernel").replace(
        "name = \"player\"",
        "name = \"player\"\nkernel = \"0.0.0-not-this-one\"",
    );
    std::fs::write(tmp.path().join("k.toml"), text).unwrap();
    let o = Command::new(xtask)
        .arg("bisect")
        .arg(tmp.path().join("k.toml"))
        .arg("--baseline")
        .arg(&base)
        .arg("--bin-dir")
        .arg(support::bin_dir())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("0.0.0-not-this-one"), "{err}");
    // A scenario that does not parse at this commit: skip too.
    std::fs::write(tmp.path().join("bad.toml"), "name = ").unwrap();
    let o = Command::new(xtask)
        .arg("bisect")
        .arg(tmp.path().join("bad.toml"))
        .arg("--baseline")
        .arg(&base)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(125),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
