//! A LAVA job for real: `cargo xtask lava` writes the test definition and
//! the job for a short two-configuration scenario, Debian's `lava-run`
//! (lava-dispatcher 2023.01, offline) runs the job against the SSH test
//! board (a private sshd on 127.0.0.1), the board downloads its binaries
//! from a URL we serve on 127.0.0.1, runs every trial with `xrun-trial`,
//! and reports one `lava-test-case` per configuration × metric with its
//! measurement, and the gates. `cargo xtask lava-results` turns the job
//! log back into a run directory, which `compare` reads.
//!
//! Needs root (lava-run, the board's sshd); skipped otherwise.

mod lava_support;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lava_support::*;
use xrunbench_test_support::testboard::TestBoard;

/// Two configurations × two trials, short, on the virtual sink under a
/// small load, with one gate that passes and one that cannot (a hackbench
/// round never takes 0 ms), and one against the baseline.
fn scenario(dir: &Path) -> PathBuf {
    support::ScenarioText::plain_and_nice("lavarun", "other:5")
        .tail(GATES)
        .write(dir)
}

/// [`scenario`]'s gates.
const GATES: &str = "[gate.plain]\nunderruns = { max = 1000000 }\n\
     [gate.nice]\nhackbench-round = { max = 0 }\nmin-fill = { worse_by_percent = 100 }\n";

/// A test case as the job log has it.
#[derive(Debug)]
struct LoggedCase {
    result: String,
    measurement: Option<f64>,
    units: String,
}

/// The `"lvl": "results"` lines of our definition: case → what LAVA kept.
fn cases(log: &str, definition: &str) -> BTreeMap<String, LoggedCase> {
    let mut out = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains("\"lvl\": \"results\"")) {
        if !line.contains(&format!("\"definition\": \"{definition}\"")) {
            continue;
        }
        // `"key": value` and `"key": ! "value"` in one flow mapping.
        let field = |key: &str| -> Option<String> {
            let at = line.find(&format!("\"{key}\": "))? + key.len() + 4;
            let rest = line[at..].trim_start_matches("! ");
            let rest = rest.strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_string())
        };
        out.insert(
            field("case").unwrap(),
            LoggedCase {
                result: field("result").unwrap(),
                measurement: field("measurement").and_then(|m| m.parse().ok()),
                units: field("units").unwrap_or_default(),
            },
        );
    }
    out
}

/// Serves the board binaries as `cargo xtask board build --out` lays them
/// out: `<dir>/<arch>/xrun-*`.
fn serve_binaries(dir: &Path) -> HttpServer {
    let arch = match std::env::consts::ARCH {
        "aarch64" => "aarch64",
        "arm" => "armv7",
        other => other,
    };
    let to = dir.join(arch);
    std::fs::create_dir_all(&to).unwrap();
    for b in ["xrun-trial", "xrun-player", "xrun-hackbench"] {
        std::fs::copy(support::bin_dir().join(b), to.join(b)).unwrap();
    }
    HttpServer::start(dir)
}

/// `cargo xtask lava` of the test's scenario into `dir/gen`, its board
/// binaries served over HTTP (kept running while the server lives).
fn generate(dir: &Path) -> (PathBuf, HttpServer) {
    let scenario = scenario(dir);
    let http = serve_binaries(&dir.join("www"));
    let gen = dir.join("gen");
    let url = format!("http://127.0.0.1:{}", http.port);
    let out = support::run_xtask(&[
        "lava",
        scenario.to_str().unwrap(),
        "--out",
        gen.to_str().unwrap(),
        "--binaries-url",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (gen, http)
}

/// LAVA's own ssh and scp turn host-key checking off; the device
/// dictionary's options, first, turn it back on. Proof that they do: a
/// board whose key is not the one known is never reached — the job fails
/// at its deploy, with ssh's words in the log, and nothing of it runs.
#[test]
fn a_lava_job_never_reaches_a_board_whose_host_key_is_not_known() {
    xrunbench_test_support::skip_unless_root!();
    let dir = tempfile::tempdir().unwrap();
    let (gen, _http) = generate(dir.path());
    let board = TestBoard::start().expect("the test board (a private sshd) starts");
    let job_id = 800_000 + std::process::id() % 100_000;
    let _leftovers = LavaLeftovers::new(job_id);
    let wrong = board.wrong_known_hosts().unwrap();
    let (_, log) = lava_run(
        &board,
        &wrong,
        &gen.join("xrunbench-lavarun-job.yaml"),
        job_id,
        dir.path(),
    );
    assert!(
        log.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || log.contains("Host key verification failed"),
        "ssh did not refuse the key: {log}"
    );
    assert!(
        !log.contains("\"case\": \"job\", \"definition\": \"lava\", \"result\": \"pass\""),
        "the job passed against an unknown key: {log}"
    );
    for copied in [format!("/lava-{job_id}"), format!("/lava-{job_id}-overlay")] {
        let on_board = std::fs::read_dir("/")
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&copied));
        assert!(!on_board, "{copied}* reached the board");
    }
}

/// Checks the job's cases: one per configuration × metric, passing, in its
/// units, with a plausible measurement; and the two limit gates, one
/// passing and one failing.
fn assert_cases(got: &BTreeMap<String, LoggedCase>) {
    // One case per configuration × metric, with a plausible measurement.
    let buffer_ms = 40.0;
    for config in ["plain", "nice"] {
        for (metric, units, plausible) in [
            (
                "underruns",
                "underruns/min",
                (0.0..=600.0) as std::ops::RangeInclusive<f64>,
            ),
            ("gap-per-min", "ms/min", 0.0..=60_000.0),
            ("max-gap", "ms", 0.0..=1_000.0),
            ("min-fill", "ms", 0.0..=buffer_ms),
            ("p1-fill", "ms", 0.0..=buffer_ms),
            ("p99-late", "ms", 0.0..=1_000.0),
            ("hackbench-round", "ms", 0.001..=10_000.0),
            ("hackbench-rate", "rounds/min", 1.0..=1e9),
            ("player-cpu", "ms/s", 0.001..=2_000.0),
        ] {
            let name = format!("{config}_{metric}");
            let c = got
                .get(&name)
                .unwrap_or_else(|| panic!("no case {name} in {got:?}"));
            assert_eq!(c.result, "pass", "{name}");
            assert_eq!(c.units, units, "{name}");
            let m = c
                .measurement
                .unwrap_or_else(|| panic!("{name}: no measurement"));
            assert!(plausible.contains(&m), "{name} = {m} {units}");
        }
    }
    // The limit gates, judged on the board; the one against the baseline is
    // the host's (below), not a case.
    assert_eq!(got["gate_plain_underruns_mean-max"].result, "pass");
    assert_eq!(got["gate_nice_hackbench-round_mean-max"].result, "fail");
    assert_eq!(
        got["gate_nice_hackbench-round_mean-max"].measurement,
        got["nice_hackbench-round"].measurement
    );
    assert_eq!(got.len(), 2 * 9 + 2, "{got:?}");
}

/// Runs `lava-results --gate` on `dir/job.log` into `results`, with a JUnit
/// file at `junit`, and checks its exit and what it said of the
/// measurements and the gates.
fn assert_lava_results_gates(dir: &Path, results: &Path, junit: &Path) {
    let back = support::run_xtask(&[
        "lava-results",
        dir.join("job.log").to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
        "--gate",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&back.stdout),
        String::from_utf8_lossy(&back.stderr),
    );
    assert_eq!(back.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        !stderr.contains("LAVA has"),
        "measurements differ: {stderr}"
    );
    assert!(
        stdout.contains("gate FAIL: nice hackbench-round: mean max 0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("gate pass: plain underruns: mean max 1000000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("nice min-fill: not significantly worse than plain by more than 100%"),
        "{stdout}"
    );
}

/// The run directory `lava-results` made under `results`, checked to hold
/// every trial's record.
fn run_dir_with_every_trial(results: &Path) -> PathBuf {
    let run_dir = std::fs::read_dir(results.join("lavarun"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut trials: Vec<String> = std::fs::read_dir(run_dir.join("trials"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    trials.sort();
    assert_eq!(
        trials,
        ["nice-1.json", "nice-2.json", "plain-1.json", "plain-2.json"]
    );
    run_dir
}

/// Checks that `compare` reads the run directory: a table of both
/// configurations.
fn assert_compare_reads(run_dir: &Path) {
    let table = support::run_xtask(&["compare", run_dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success(), "{text}");
    let header = text.lines().next().unwrap();
    assert!(
        header.split_whitespace().collect::<Vec<_>>() == ["plain", "nice"],
        "{text}"
    );
    assert!(text.contains("Amean    underruns/min"), "{text}");
}

/// Checks the JUnit file: valid, with the failed gate and the scenario's
/// name.
fn assert_junit(junit: &Path) {
    validate_junit(junit).unwrap();
    let xml = std::fs::read_to_string(junit).unwrap();
    assert!(xml.contains("<failure type=\"gate\""), "{xml}");
    assert!(
        xml.contains("<property name=\"scenario\" value=\"lavarun\"/>"),
        "{xml}"
    );
}

#[test]
fn a_lava_job_reports_every_metric_and_comes_back_as_a_run() {
    xrunbench_test_support::skip_unless_root!();
    let dir = tempfile::tempdir().unwrap();
    let (gen, http) = generate(dir.path());
    let definition = std::fs::read_to_string(gen.join("xrunbench-lavarun.yaml")).unwrap();
    assert!(definition.contains("format: Lava-Test Test Definition 1.0\n"));

    let board = TestBoard::start().expect("the test board (a private sshd) starts");
    let job_id = 700_000 + std::process::id() % 100_000;
    let _leftovers = LavaLeftovers::new(job_id);
    let (run, log) = lava_run(
        &board,
        &board.known_hosts(),
        &gen.join("xrunbench-lavarun-job.yaml"),
        job_id,
        dir.path(),
    );
    std::fs::write(dir.path().join("job.log"), &log).unwrap();
    // A failed case does not fail the job: lava-run exits 0 even though a
    // gate fails; every case is checked below.
    assert!(run.status.success(), "lava-run failed: {log}");
    assert!(
        log.contains("\"case\": \"job\", \"definition\": \"lava\", \"result\": \"pass\""),
        "the job did not pass: {log}"
    );
    let got = cases(&log, "0_xrunbench-lavarun");
    assert_cases(&got);

    // Back into a run directory: every record, the measurements agreeing,
    // the gates judged (one fails: exit 1 with --gate), a JUnit file CI
    // reads.
    let results = dir.path().join("results");
    let junit = dir.path().join("junit.xml");
    assert_lava_results_gates(dir.path(), &results, &junit);
    let run_dir = run_dir_with_every_trial(&results);
    assert_compare_reads(&run_dir);
    assert_junit(&junit);
    drop(http);
}

/// The definition's steps as its `run: steps:` list holds them (read with
/// PyYAML, as LAVA reads them).
fn steps(definition: &Path) -> Vec<String> {
    let out = checked(
        std::process::Command::new(PYTHON).arg("-c").arg(format!(
            "import json, yaml\nd = yaml.safe_load(open({:?}))\nprint(json.dumps(d['run']['steps']))",
            definition.display().to_string()
        )),
        "reading the definition with PyYAML",
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The same definition without LAVA, as Linaro's test-runner or a person
/// runs it: the steps in a shell, the binaries from XRUNBENCH_BIN_DIR; the
/// cases are printed. A board without the binaries ends it with one line.
#[test]
fn the_definition_runs_by_hand_and_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario(dir.path());
    let gen = dir.path().join("gen");
    let out = support::run_xtask(&[
        "lava",
        scenario.to_str().unwrap(),
        "--out",
        gen.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = steps(&gen.join("xrunbench-lavarun.yaml")).join("\n");
    let run = |bin_dir: &Path, work: &Path| {
        std::fs::create_dir_all(work).unwrap();
        std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(work)
            .env("XRUNBENCH_BIN_DIR", bin_dir)
            .env_remove("XRUNBENCH_BINARIES_URL")
            .output()
            .unwrap()
    };
    let ok = run(&support::bin_dir(), &dir.path().join("ok"));
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let cases: Vec<&str> = text
        .lines()
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() == 4 && (w[1] == "pass" || w[1] == "fail")
        })
        .collect();
    assert_eq!(cases.len(), 2 * 9 + 2, "{text}");
    assert!(
        cases.iter().any(|l| l.starts_with("plain_underruns pass ")),
        "{text}"
    );
    assert!(
        cases
            .iter()
            .any(|l| l.starts_with("gate_nice_hackbench-round_mean-max fail ")),
        "{text}"
    );
    for stem in ["plain-1", "nice-1", "plain-2", "nice-2"] {
        let record = dir.path().join(format!("ok/xrunbench/records/{stem}.json"));
        assert!(record.is_file(), "{stem}: {text}");
        assert!(
            text.contains(&format!("xrunbench-doc-end record {stem} ")),
            "{stem}"
        );
    }
    let missing = run(Path::new("/nonexistent"), &dir.path().join("missing"));
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        "xrunbench: /nonexistent/xrun-trial is not an executable"
    );
}
