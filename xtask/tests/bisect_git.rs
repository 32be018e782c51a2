//! `git bisect run` drives `cargo xtask bisect` for real: a throwaway git
//! repository whose history changes the player build (the `--bin-dir` of
//! each commit): from one commit on, the player is stopped for 600 ms
//! after every 200 ms it runs — a task the kernel does not run for 600 ms,
//! as a scheduler regression would do — so its 300 ms buffer runs dry; harmless commits
//! surround it, and the scenario never changes. Bisect must name that
//! commit. Short trials keep it to about a minute. Beside it: a baseline of
//! another scenario aborts the bisection, usage errors abort, and commits
//! that cannot be tested are skipped.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{git, write_script};

/// The experiment, the same at every commit.
const SCENARIO: &str = r#"name = "bisect-test"
trials = 6
duration = "2s"
warmup = "500ms"

[audio]
generate = { tone_hz = 440, seconds = 2, rate = 48000, channels = 2, format = "S16_LE" }
backend = "virtual"
buffer_time = "300ms"
period_time = "50ms"
priority = "fifo:80"

[load]
hackbench = { groups = 2 }

[[config]]
name = "player"
"#;

/// The board binaries of a commit: the real ones, or (`stalls`) a player
/// that is stopped for 600 ms after every 200 ms it plays
/// ([`support::stopped_player_script`]).
fn builds(repo: &Path, real: &Path, stalls: bool) {
    let bin = repo.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let quoted = |name: &str| format!("'{}'", real.join(name).display());
    for unchanged in ["xrun-hackbench", "xrun-trial"] {
        write_script(
            &bin.join(unchanged),
            &format!("exec {} \"$@\"\n", quoted(unchanged)),
        );
    }
    let player = if stalls {
        support::stopped_player_script(&quoted("xrun-player"))
    } else {
        format!("exec {} \"$@\"\n", quoted("xrun-player"))
    };
    write_script(&bin.join("xrun-player"), &player);
}

fn commit(repo: &Path, note: &str) -> String {
    std::fs::write(repo.join("NOTES"), note).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", note]);
    git(repo, &["rev-parse", "HEAD"])
}

/// Release xrun-player, xrun-hackbench and xrun-trial. XRUNBENCH_BIN_DIR: prebuilt
/// ones (e.g. while the player crate is mid-change in a shared tree); else
/// built as the runner's tests do.
fn real_bins() -> PathBuf {
    std::env::var_os("XRUNBENCH_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(support::bin_dir)
}

/// `cargo xtask run` of `scenario`; the run directory it wrote.
fn record_baseline(scenario: &Path, results: &Path, bins: &Path) -> PathBuf {
    let run = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .current_dir(scenario.parent().unwrap())
        .arg("run")
        .arg(scenario.file_name().unwrap())
        .arg("--results-dir")
        .arg(results)
        .arg("--bin-dir")
        .arg(bins)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "baseline run: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let name_line = std::fs::read_to_string(scenario).unwrap();
    let name = name_line
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap()
        .to_string();
    std::fs::read_dir(results.join(name))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("trials").is_dir())
        .expect("baseline run directory")
}

#[test]
fn git_bisect_run_names_the_commit_that_stalls_the_player() {
    xrunbench_test_support::skip_unless!(
        Command::new("git").arg("--version").output().is_ok(),
        "git is not installed (cargo xtask test installs it)"
    );
    let real = real_bins();
    let xtask = env!("CARGO_BIN_EXE_xtask");
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let results = tmp.path().join("results");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("scenario.toml"), SCENARIO).unwrap();
    builds(&repo, &real, false);
    let good = commit(&repo, "start: the player as built");
    commit(&repo, "tweak a comment");
    builds(&repo, &real, true);
    let culprit = commit(&repo, "player: stopped for 300 ms every 600 ms");
    commit(&repo, "another comment");
    let bad = commit(&repo, "and another");

    // The baseline: trials at the good commit.
    git(&repo, &["checkout", "-q", &good]);
    let baseline = record_baseline(&repo.join("scenario.toml"), &results, &repo.join("bin"));
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
        .arg(repo.join("bin"))
        // Room for the sign test of a baseline without underruns (good
        // from 5 clean trials at α = 5 %) and for a noisy trial or two.
        .args(["--max-trials", "10"])
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
        stdout.contains("bisect: trial 1/10: underruns/min"),
        "{stdout}"
    );
}

/// A short experiment without load, for the baseline checks.
const QUICK: &str = r#"name = "quick"
trials = 2
duration = "300ms"
warmup = "0s"

[audio]
generate = { tone_hz = 440, seconds = 1 }
backend = "virtual"
buffer_time = "100ms"
period_time = "25ms"

[[config]]
name = "player"
"#;

fn bisect(scenario: &Path, baseline: &Path, results: &Path, bins: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("bisect")
        .arg(scenario)
        .arg("--baseline")
        .arg(baseline)
        .arg("--results-dir")
        .arg(results)
        .arg("--bin-dir")
        .arg(bins)
        .args(["--max-trials", "1"])
        .output()
        .unwrap()
}

#[test]
fn a_baseline_of_another_scenario_aborts_the_bisection() {
    let bins = real_bins();
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    std::fs::create_dir(tmp.path().join("good")).unwrap();
    let recorded = tmp.path().join("good/quick.toml");
    std::fs::write(&recorded, QUICK).unwrap();
    let baseline = record_baseline(&recorded, &results, &bins);

    // Another experiment: refused before any trial, in one line naming
    // what differs, with an exit status that aborts `git bisect run`.
    for (from, to, differs) in [
        ("duration = \"300ms\"", "duration = \"400ms\"", "duration"),
        ("warmup = \"0s\"", "warmup = \"100ms\"", "warmup"),
        (
            "buffer_time = \"100ms\"",
            "buffer_time = \"200ms\"",
            "audio.buffer_time",
        ),
        ("tone_hz = 440", "tone_hz = 880", "audio.source"),
        (
            "[[config]]",
            "[load]\nhackbench = { groups = 1 }\n\n[[config]]",
            "load",
        ),
        (
            "name = \"player\"",
            "name = \"player\"\nsysctl = { \"kernel.sched_autogroup_enabled\" = 0 }",
            "knobs",
        ),
    ] {
        let other = tmp.path().join("other.toml");
        std::fs::write(&other, QUICK.replace(from, to)).unwrap();
        let o = bisect(&other, &baseline, &results, &bins);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(128), "{to}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("the baseline ran a different scenario")
                && err.ends_with(&format!(
                    "it differs in {differs}; record a baseline with this scenario\n"
                )),
            "{err}"
        );
        assert!(
            String::from_utf8_lossy(&o.stdout).is_empty(),
            "no trial ran"
        );
    }

    // The same experiment under other names, from another file in another
    // directory, with another trial count: measured (0, 1, or 125 when one
    // trial cannot decide), not refused (128).
    std::fs::create_dir(tmp.path().join("elsewhere")).unwrap();
    let same = tmp.path().join("elsewhere/renamed.toml");
    let renamed = QUICK
        .replace(
            "name = \"quick\"",
            "name = \"quick-renamed\"\ndescription = \"same thing\"",
        )
        .replace("trials = 2", "trials = 9")
        .replace("name = \"player\"", "name = \"aplay-like\"");
    std::fs::write(&same, renamed).unwrap();
    let o = bisect(&same, &baseline, &results, &bins);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(matches!(o.status.code(), Some(0 | 1 | 125)), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("bisect: trial 1/1"),
        "{err}"
    );

    // A baseline that does not say what it ran cannot be checked: refused.
    let bare = tmp.path().join("bare");
    std::fs::create_dir_all(bare.join("trials")).unwrap();
    for entry in std::fs::read_dir(baseline.join("trials"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(entry.path(), bare.join("trials").join(entry.file_name())).unwrap();
    }
    let o = bisect(&recorded, &bare, &results, &bins);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(128), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("run.json") && err.contains("records its scenario"),
        "{err}"
    );
}

#[test]
fn usage_errors_abort_the_bisection_and_bad_scenarios_skip() {
    let tmp = tempfile::tempdir().unwrap();
    let xtask = env!("CARGO_BIN_EXE_xtask");
    // A mistyped option: 128 (git bisect run aborts), not 2 (= "bad").
    let o = Command::new(xtask)
        // Whatever a step writes goes under the temporary directory.
        .current_dir(tmp.path())
        .args(["bisect", "x.toml", "--baseline", "/nonexistent", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(128));
    // An unusable baseline: abort.
    let o = Command::new(xtask)
        // Whatever a step writes goes under the temporary directory.
        .current_dir(tmp.path())
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

    // A kernel this machine does not run: skip (125), no trial run. The
    // kernel a configuration expects is not part of the experiment, so the
    // baseline is accepted first.
    let bins = real_bins();
    std::fs::create_dir(tmp.path().join("good")).unwrap();
    let recorded = tmp.path().join("good/quick.toml");
    std::fs::write(&recorded, QUICK).unwrap();
    let base = record_baseline(&recorded, &tmp.path().join("results"), &bins);
    let text = QUICK.replace(
        "name = \"player\"",
        "name = \"player\"\nkernel = \"0.0.0-not-this-one\"",
    );
    std::fs::write(tmp.path().join("k.toml"), text).unwrap();
    let o = Command::new(xtask)
        // Whatever a step writes goes under the temporary directory.
        .current_dir(tmp.path())
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
        // Whatever a step writes goes under the temporary directory.
        .current_dir(tmp.path())
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
