//! `cargo xtask compare` on synthetic run directories: table layout goldens
//! for 2, 3 and 5 configurations, the other formats, the zero-baseline
//! goldens (0 -> x, x -> 0, 0 -> 0) in all four formats, and the awkward
//! data (all-zero underruns, ties, zero variance, n = 1) without NaN or
//! panic.
//!
//! Goldens live in tests/golden/; regenerate with `UPDATE_GOLDEN=1`.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

fn xtask(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("xtask runs")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// What one synthetic trial measured.
#[derive(Clone, Copy)]
struct T {
    underruns: u64,
    gap_ms: f64,
    min_fill_us: u64,
    p1_fill_us: u64,
    p99_late_us: u64,
    round_us: u64,
    cpu_ms: f64,
}

/// Deterministic trial `k` of a configuration whose "badness" is `b`.
fn trial(b: f64, k: u32) -> T {
    let wobble = [0.9, 1.1, 1.0, 0.95, 1.05, 1.2, 0.8][k as usize % 7];
    T {
        underruns: (b * 4.0 * wobble).round() as u64,
        gap_ms: 12.5 * b * wobble,
        min_fill_us: (9000.0 / (1.0 + b) * wobble) as u64,
        p1_fill_us: (14000.0 / (1.0 + b * 0.3) * wobble) as u64,
        p99_late_us: (200.0 + 3000.0 * b * wobble) as u64,
        round_us: (1_200_000.0 * (1.0 + 0.05 * b) * wobble) as u64,
        cpu_ms: 70.0 + 2.0 * k as f64,
    }
}

fn template() -> Value {
    let text = std::fs::read_to_string(golden_dir().join("trial-template.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Writes a run directory with `configs` (name, trials) in `root`.
fn run_dir(root: &Path, name: &str, label: Option<&str>, configs: &[(&str, Vec<T>)]) -> PathBuf {
    run_dir_with(root, name, label, configs, |_| {})
}

/// [`run_dir`], with `edit` applied to every trial record before it is
/// written.
fn run_dir_with(
    root: &Path,
    name: &str,
    label: Option<&str>,
    configs: &[(&str, Vec<T>)],
    edit: impl Fn(&mut Value),
) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("trials")).unwrap();
    std::fs::write(dir.join("run.json"), manifest(label, configs).to_string()).unwrap();
    for (config, trials) in configs {
        for (i, t) in trials.iter().enumerate() {
            let k = i as u32 + 1;
            let mut v = record(config, k, t);
            edit(&mut v);
            std::fs::write(
                dir.join("trials").join(format!("{config}-{k}.json")),
                serde_json::to_string_pretty(&v).unwrap(),
            )
            .unwrap();
        }
    }
    dir
}

/// `run.json` of a synthetic run: the template (a real run's manifest)
/// with this run's label, configurations and machine.
fn manifest(label: Option<&str>, configs: &[(&str, Vec<T>)]) -> Value {
    let text = std::fs::read_to_string(golden_dir().join("run-template.json")).unwrap();
    let mut m: Value = serde_json::from_str(&text).unwrap();
    m["label"] = json!(label);
    m["scenario"]["name"] = json!("synthetic");
    m["scenario"]["duration"] = json!("10s");
    let config = m["scenario"]["configs"][0].clone();
    m["scenario"]["configs"] = configs
        .iter()
        .map(|(n, _)| {
            let mut c = config.clone();
            c["name"] = json!(n);
            c
        })
        .collect();
    m["fingerprint"]["cpu_model"] = json!("Test CPU 3000");
    m["fingerprint"]["cpu_count"] = json!(4);
    m
}

fn record(config: &str, k: u32, t: &T) -> Value {
    let mut v = template();
    v["trial"]["scenario"] = json!("synthetic");
    v["trial"]["config"] = json!(config);
    v["trial"]["k"] = json!(k);
    v["machine"]["kernel_release"] = json!("6.6.0-test");
    let p = &mut v["player"];
    p["wall_seconds"] = json!(10.0);
    p["audio_seconds"] = json!(10.0);
    let event = p["events"][0].clone();
    p["events"] = json!((0..t.underruns)
        .map(|_| {
            let mut e = event.clone();
            e["gap_ms"] = json!(t.gap_ms);
            e
        })
        .collect::<Vec<_>>());
    p["totals"] = json!({
        "count": t.underruns,
        "gap_ms_sum": t.gap_ms * t.underruns as f64,
        "gap_ms_max": if t.underruns > 0 { t.gap_ms } else { 0.0 },
        "per_minute": t.underruns as f64 * 6.0,
    });
    p["fill"]["min"] = json!(t.min_fill_us);
    p["fill"]["p1"] = json!(t.p1_fill_us);
    p["fill"]["count"] = json!(2000);
    p["lateness"]["p99"] = json!(t.p99_late_us);
    p["lateness"]["count"] = json!(2000);
    p["process"]["cpu_user_ms"] = json!(t.cpu_ms);
    p["process"]["cpu_sys_ms"] = json!(0.0);
    v["load"]["rounds_us"] = json!([t.round_us, t.round_us + 1000]);
    v
}

fn trials(b: f64, n: u32) -> Vec<T> {
    (1..=n).map(|k| trial(b, k)).collect()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "xtask failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn check_golden(name: &str, text: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == text,
        "{name} differs from the golden (UPDATE_GOLDEN=1 regenerates):\n{text}"
    );
}

fn assert_mail_safe(text: &str, max: usize) {
    assert!(!text.contains('\t'), "tab in:\n{text}");
    assert!(text.is_ascii(), "non-ASCII in:\n{text}");
    for l in text.lines() {
        assert!(l.len() <= max, "line of {} > {max}: `{l}`", l.len());
    }
    assert_finite_except_percent(text, "-inf%", "+inf%");
}

/// No NaN anywhere, and an infinity only as a percent against a zero
/// baseline, spelled `minus` / `plus` (`-inf%` / `+inf%` in the table and
/// Markdown, `-inf` / `+inf` in CSV, nothing in JSON).
fn assert_finite_except_percent(text: &str, minus: &str, plus: &str) {
    let rest = if minus.is_empty() {
        text.to_string()
    } else {
        text.replace(minus, " ").replace(plus, " ")
    };
    assert!(!has_non_finite(&rest), "NaN or inf in:\n{text}");
}

/// Whether a word of the output is NaN or an infinity (`minfill` is fine).
fn has_non_finite(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| matches!(w.to_ascii_lowercase().as_str(), "nan" | "inf" | "infinity"))
}

/// How each format spells the infinities it may show.
fn infinities(format: &str) -> (&'static str, &'static str) {
    match format {
        "text" | "markdown" => ("-inf%", "+inf%"),
        "csv" => (",-inf,", ",+inf,"),
        _ => ("", ""),
    }
}

const NAMES: [&str; 5] = ["baseline", "patched", "nobuddy", "fifo-80", "pinned-cpu0"];

fn golden_run(n_configs: usize) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let badness = [1.0, 2.0, 0.5, 0.0, 1.0];
    let configs: Vec<(&str, Vec<T>)> = (0..n_configs)
        .map(|i| (NAMES[i], trials(badness[i], 5)))
        .collect();
    let dir = run_dir(tmp.path(), "20250101T000000Z", None, &configs);
    (tmp, dir)
}

#[test]
fn two_configurations_fit_80_columns() {
    let (_tmp, dir) = golden_run(2);
    let text = stdout(&xtask(&["compare", dir.to_str().unwrap()]));
    assert_mail_safe(&text, 80);
    check_golden("compare-2.txt", &text);
    let amean = text
        .lines()
        .find(|l| l.starts_with("Amean    underruns/min"))
        .unwrap();
    assert!(
        amean.contains('*'),
        "5 vs 5 trials, 2x: significant: {amean}"
    );
}

#[test]
fn three_configurations_split_into_blocks() {
    let (_tmp, dir) = golden_run(3);
    let text = stdout(&xtask(&["compare", dir.to_str().unwrap()]));
    assert_mail_safe(&text, 80);
    check_golden("compare-3.txt", &text);
    assert_eq!(text.matches("Amean    underruns/min").count(), 2);
}

#[test]
fn five_configurations_split_into_blocks() {
    let (_tmp, dir) = golden_run(5);
    let text = stdout(&xtask(&["compare", dir.to_str().unwrap()]));
    assert_mail_safe(&text, 80);
    check_golden("compare-5.txt", &text);
    assert_eq!(text.matches("Amean    underruns/min").count(), 4);
}

#[test]
fn other_formats_carry_the_same_numbers() {
    let (_tmp, dir) = golden_run(3);
    let d = dir.to_str().unwrap();
    let md = stdout(&xtask(&["compare", d, "--format", "markdown"]));
    assert!(md.starts_with("| statistic | metric | baseline | patched | nobuddy |"));
    check_golden("compare-3.md", &md);
    let csv = stdout(&xtask(&["compare", d, "--format", "csv"]));
    assert!(csv.starts_with("statistic,metric,column,value,percent,significant,test_score\n"));
    let rows = csv.lines().count() - 1;
    assert_eq!(rows % 3, 0, "one line per column");
    let js: Value =
        serde_json::from_str(&stdout(&xtask(&["compare", d, "--format", "json"]))).unwrap();
    assert_eq!(js["columns"].as_array().unwrap().len(), 3);
    assert_eq!(js["footer"]["significance"], "mwu");
    for sig in ["welch", "mmtests-ci", "mwu"] {
        let text = stdout(&xtask(&["compare", d, "--significance", sig]));
        assert_mail_safe(&text, 80);
    }
}

#[test]
fn all_zero_ties_zero_variance_and_single_trials() {
    let tmp = tempfile::tempdir().unwrap();
    let zero = T {
        underruns: 0,
        gap_ms: 0.0,
        min_fill_us: 10_000,
        p1_fill_us: 14_000,
        p99_late_us: 150,
        round_us: 1_000_000,
        cpu_ms: 80.0,
    };
    let dir = run_dir(
        tmp.path(),
        "zeros",
        Some("zeros"),
        &[
            ("a", vec![zero; 4]),
            ("b", vec![zero; 4]),
            ("single", vec![trial(1.0, 1)]),
        ],
    );
    for sig in ["mwu", "welch", "mmtests-ci"] {
        for fmt in ["text", "markdown", "csv", "json"] {
            let out = stdout(&xtask(&[
                "compare",
                dir.to_str().unwrap(),
                "--format",
                fmt,
                "--significance",
                sig,
            ]));
            let (minus, plus) = infinities(fmt);
            assert_finite_except_percent(&out, minus, plus);
        }
    }
    let text = stdout(&xtask(&["compare", dir.to_str().unwrap()]));
    assert_mail_safe(&text, 80);
    // 0 vs 0 is 0.00 %, and nothing is marked significant.
    let row = text
        .lines()
        .find(|l| l.starts_with("Amean    underruns/min"))
        .unwrap();
    assert_eq!(row.matches("0.00%").count(), 2, "{row}");
    // 0 vs something is the formula's -inf %, never `n/a`.
    let block = text.split("\n\n").nth(1).unwrap();
    let row = block
        .lines()
        .find(|l| l.starts_with("Amean    underruns/min"))
        .unwrap();
    assert!(row.ends_with("(   -inf%)"), "{row}");
    assert!(!text.contains('*') || text.contains("*x%*"), "{text}");
}

/// mmtests' rule where it has no interval or a zero one: one trial gives no
/// mark; with both spreads 0 the raw difference decides (> 1 in the
/// metric's units), and the CSV score is that difference, not 1e300.
#[test]
fn mmtests_ci_without_an_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let flat = |underruns| T {
        underruns,
        gap_ms: 10.0,
        min_fill_us: 10_000,
        p1_fill_us: 14_000,
        p99_late_us: 150,
        round_us: 1_000_000,
        cpu_ms: 80.0,
    };
    let dir = run_dir(
        tmp.path(),
        "ci",
        None,
        &[
            ("zero", vec![flat(0); 4]),
            ("one-each", vec![flat(1); 4]),
            ("single", vec![flat(3)]),
        ],
    );
    let d = dir.to_str().unwrap();
    let text = stdout(&xtask(&["compare", d, "--significance", "mmtests-ci"]));
    assert_mail_safe(&text, 80);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Amean    underruns/min"))
        .collect();
    // 0 -> 6 per minute with both stddevs 0: |6| > 1, marked.
    assert!(rows[0].ends_with("*   -inf%*"), "{text}");
    // One trial: no interval, no mark, although 0 -> 18 per minute.
    assert!(rows[1].ends_with("(   -inf%)"), "{text}");
    // cpu: 8.00 against 8.00, both constant: no mark.
    let cpu = text
        .lines()
        .find(|l| l.starts_with("Amean    cpu-ms/audio-s"))
        .unwrap();
    assert!(!cpu.contains('*'), "{cpu}");
    let csv = stdout(&xtask(&[
        "compare",
        d,
        "--significance",
        "mmtests-ci",
        "--format",
        "csv",
    ]));
    let line = |column: &str| {
        csv.lines()
            .find(|l| l.starts_with(&format!("Amean,underruns/min,{column},")))
            .unwrap()
            .to_string()
    };
    assert_eq!(
        line("one-each"),
        "Amean,underruns/min,one-each,6,-inf,true,6"
    );
    assert_eq!(line("single"), "Amean,underruns/min,single,18,-inf,,");
    assert!(
        csv.lines().all(|l| l.len() < 120),
        "no runaway number:\n{csv}"
    );
}

/// The bisect result an LKML mail is about: the good kernel had no
/// underruns, the bad one has some (and its buffer ran dry: minimum fill
/// 0). `regression` puts the good one first, `fix` the bad one: between
/// them every case of a zero on either side, in both metric directions.
fn zero_baseline_run(root: &Path, name: &str, order: [&str; 2]) -> PathBuf {
    let good = |k: u64| T {
        underruns: 0,
        gap_ms: 0.0,
        min_fill_us: 9000 + 150 * k,
        p1_fill_us: 14_000 - 40 * k,
        p99_late_us: 0,
        round_us: 0,
        cpu_ms: 70.0 + k as f64,
    };
    let bad = |k: u64| {
        let underruns = [0, 4, 5, 6, 7, 8][k as usize];
        T {
            underruns,
            gap_ms: 9.0 + k as f64,
            min_fill_us: if underruns > 0 { 0 } else { 7000 },
            p1_fill_us: 6000 + 300 * k,
            p99_late_us: 0,
            round_us: 0,
            cpu_ms: 72.0 + k as f64,
        }
    };
    let trials = |f: &dyn Fn(u64) -> T| (0..6).map(f).collect::<Vec<T>>();
    let configs: Vec<(&str, Vec<T>)> = order
        .iter()
        .map(|&c| {
            (
                c,
                if c == "good" {
                    trials(&good)
                } else {
                    trials(&bad)
                },
            )
        })
        .collect();
    // No load and no lateness histogram: a table of the six metrics the
    // cases need keeps the goldens readable.
    run_dir_with(root, name, None, &configs, |v| {
        v["load"] = Value::Null;
        v["player"]["lateness"]["count"] = json!(0);
    })
}

/// Every format of one zero-baseline table, checked against its goldens.
fn zero_goldens(name: &str, dir: &Path) -> [String; 4] {
    let d = dir.to_str().unwrap();
    ["text", "markdown", "csv", "json"].map(|fmt| {
        let out = stdout(&xtask(&["compare", d, "--format", fmt]));
        let ext = match fmt {
            "text" => "txt",
            "markdown" => "md",
            other => other,
        };
        check_golden(&format!("{name}.{ext}"), &out);
        let (minus, plus) = infinities(fmt);
        assert_finite_except_percent(&out, minus, plus);
        out
    })
}

fn json_cell<'a>(js: &'a Value, stat: &str, metric: &str, col: usize) -> &'a Value {
    let row = js["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["stat"] == stat && r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {stat} {metric}"));
    &row["cells"][col]
}

fn text_row<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row `{label}` in:\n{text}"))
}

#[test]
fn zero_baseline_regression_is_minus_infinity_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = zero_baseline_run(tmp.path(), "regression", ["good", "bad"]);
    let [text, md, csv, json] = zero_goldens("compare-zero-regression", &dir);
    assert_mail_safe(&text, 80);
    // 0 -> x, lower is better: -inf %, significant, in the usual width.
    let amean = text_row(&text, "Amean    underruns/min");
    assert!(
        amean.ends_with(" 0.00 (   0.00%)           30.00 *   -inf%*"),
        "{amean}"
    );
    assert_eq!(
        amean.len(),
        text_row(&text, "Amean    cpu-ms/audio-s").len()
    );
    // 0 -> 0 (one bad trial had none): 0.00 %.
    let min = text_row(&text, "Min      underruns/min");
    assert_eq!(min.matches("0.00 (   0.00%)").count(), 2, "{min}");
    // x -> 0, higher is better: the buffer ran dry, -100 %.
    assert!(text_row(&text, "Min      minfill-ms").ends_with("(-100.00%)"));
    assert!(text.contains("the formula gives -inf%"), "{text}");

    assert!(
        md.contains("| Amean | underruns/min | 0.00 (0.00%) | 30.00 (**-inf%**) |"),
        "{md}"
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("Amean,underruns/min,bad,30,-inf,true,")),
        "{csv}"
    );
    let js: Value = serde_json::from_str(&json).unwrap();
    let cell = json_cell(&js, "Amean", "underruns", 1);
    assert_eq!(cell["percent"], Value::Null, "{cell}");
    assert_eq!(cell["direction"], "worse");
    assert_eq!(cell["test"]["significant"], true);
    let cell = json_cell(&js, "Min", "underruns", 1);
    assert_eq!(
        (cell["percent"].as_f64(), &cell["direction"]),
        (Some(0.0), &json!("same"))
    );
    let cell = json_cell(&js, "Min", "min-fill", 1);
    assert_eq!(
        (cell["percent"].as_f64(), &cell["direction"]),
        (Some(-100.0), &json!("worse"))
    );
}

#[test]
fn zero_baseline_fix_is_plus_infinity_or_100_percent_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = zero_baseline_run(tmp.path(), "fix", ["bad", "good"]);
    let [text, md, csv, json] = zero_goldens("compare-zero-fix", &dir);
    assert_mail_safe(&text, 80);
    // x -> 0, lower is better: 100 %, significant.
    assert!(text_row(&text, "Amean    underruns/min").ends_with("0.00 * 100.00%*"));
    // 0 -> x, higher is better: the worst fill of the bad kernel was 0.
    assert!(text_row(&text, "Min      minfill-ms").ends_with("(   +inf%)"));
    assert!(md.contains("(+inf%)"), "{md}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("Min,minfill-ms,good,9,+inf,,")),
        "{csv}"
    );
    let js: Value = serde_json::from_str(&json).unwrap();
    let cell = json_cell(&js, "Min", "min-fill", 1);
    assert_eq!(
        (&cell["percent"], &cell["direction"]),
        (&Value::Null, &json!("better"))
    );
    let cell = json_cell(&js, "Amean", "underruns", 1);
    assert_eq!(
        (cell["percent"].as_f64(), &cell["direction"]),
        (Some(100.0), &json!("better"))
    );
}

/// A baseline whose eight trials measured the same values to the last bit
/// (a p1 fill of 14.983 ms each, as a real bisect-run parent did) against
/// a configuration that varies.
fn identical_baseline_run(root: &Path) -> PathBuf {
    let same = T {
        underruns: 0,
        gap_ms: 0.0,
        min_fill_us: 14_983,
        p1_fill_us: 14_983,
        p99_late_us: 0,
        round_us: 0,
        cpu_ms: 70.0,
    };
    let varies = |k: u64| T {
        p1_fill_us: 14_983 - 10 * k,
        min_fill_us: 14_000 - 100 * k,
        cpu_ms: 70.0 + k as f64,
        ..same
    };
    let configs = [
        ("parent", (0..8).map(|_| same).collect::<Vec<T>>()),
        ("culprit", (0..8).map(varies).collect()),
    ];
    run_dir_with(root, "identical", None, &configs, |v| {
        v["load"] = Value::Null;
        v["player"]["lateness"]["count"] = json!(0);
    })
}

#[test]
fn identical_values_have_a_spread_of_exactly_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = identical_baseline_run(tmp.path());
    let [text, _md, _csv, json] = zero_goldens("compare-identical-baseline", &dir);
    assert_mail_safe(&text, 80);
    // The parent's spread is 0, not floating-point residue: against it, a
    // spread that grew is the zero-baseline rule's -inf%, never -6.5e14%.
    let row = text_row(&text, "Stddev   p1fill-ms");
    assert!(row.contains("0.000 (   0.00%)"), "{row}");
    assert!(row.ends_with("   -inf%)"), "{row}");
    let scientific = text
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b'e' && (w[2] == b'-' || w[2].is_ascii_digit()));
    assert!(!scientific, "a figure in scientific notation:\n{text}");
    let js: Value = serde_json::from_str(&json).unwrap();
    let parent = json_cell(&js, "Stddev", "p1-fill", 0);
    assert_eq!(parent["value"].as_f64(), Some(0.0), "{parent}");
    let mean = json_cell(&js, "Amean", "p1-fill", 0);
    assert_eq!(mean["value"].as_f64(), Some(14.983), "{mean}");
}

#[test]
fn merged_run_directories_label_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let a = run_dir(tmp.path(), "r1", Some("v6.6"), &[("fifo", trials(1.0, 4))]);
    let b = run_dir(tmp.path(), "r2", None, &[("fifo", trials(2.0, 4))]);
    let text = stdout(&xtask(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]));
    assert_mail_safe(&text, 80);
    let header: Vec<&str> = text.lines().take(2).collect();
    assert!(
        header[0].contains("v6.6") && header[0].contains("r2"),
        "{text}"
    );
    assert!(text.contains("v6.6/fifo 4, r2/fifo 4"), "{text}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let o = xtask(&["compare", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a run directory"), "{err}");

    std::fs::create_dir(tmp.path().join("trials")).unwrap();
    let o = xtask(&["compare", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no trial records"));

    let bad = tmp.path().join("trials/a-1.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let o = xtask(&["compare", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("a-1.json") && err.contains("expected a JSON trial record"),
        "{err}"
    );

    std::fs::write(&bad, r#"{"schema": "something/9"}"#).unwrap();
    let o = xtask(&["compare", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected schema `xrunbench.trial/1`"));

    let o = xtask(&["plot", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
}

/// Numbers a table cannot compute with, and documents of another version:
/// refused in one line naming the file, the field and what was expected,
/// by `compare` and `plot` alike — a run.json is bad input (exit 2), a
/// trial is left out and the rest of the run still read.
#[test]
fn hostile_numbers_and_unknown_schemas_are_refused_naming_the_file() {
    for (pointer, value, want) in [
        (
            "/player/totals/gap_ms_max",
            json!(-12.5),
            "player.totals.gap_ms_max = -12.5: expected a duration in ms",
        ),
        (
            "/player/wall_seconds",
            json!(1e308),
            "player.wall_seconds = 1e308: expected a duration in s",
        ),
        (
            "/player/totals/per_minute",
            json!(1e308),
            "player.totals.per_minute = 1e308: expected underruns per minute of playback",
        ),
        (
            "/player/schema",
            json!("xrunbench.player/2"),
            "player.schema is `xrunbench.player/2`: expected `xrunbench.player/1`",
        ),
        (
            "/schema",
            json!("xrunbench.run/9"),
            "run.json: expected schema `xrunbench.run/1`, found `xrunbench.run/9`",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (file, pointer) = match pointer.strip_prefix("/player") {
            Some(_) => ("trials/patched-2.json", pointer),
            None => ("run.json", pointer),
        };
        let dir = run_dir_with(
            tmp.path(),
            "hostile",
            None,
            &[("baseline", trials(1.0, 3)), ("patched", trials(2.0, 3))],
            |_| {},
        );
        let path = dir.join(file);
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        *v.pointer_mut(pointer).unwrap() = value;
        std::fs::write(&path, v.to_string()).unwrap();
        // A bad run.json is bad input; a bad trial is left out and named,
        // and the rest of the run still reads.
        let whole_run = file == "run.json";
        for verb in ["compare", "plot"] {
            let o = xtask(&[verb, dir.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&o.stderr);
            let code = if whole_run { 2 } else { 0 };
            assert_eq!(o.status.code(), Some(code), "{verb} {pointer}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.contains(&format!("{}: ", path.display())) && err.contains(want),
                "{verb} {pointer}: {err}"
            );
            assert_eq!(o.stdout.is_empty(), whole_run, "{verb} {pointer}: {err}");
            assert_eq!(err.contains("left out"), !whole_run, "{err}");
        }
    }
}

#[test]
fn plot_writes_svgs() {
    let (_tmp, dir) = golden_run(2);
    let o = xtask(&["plot", dir.to_str().unwrap()]);
    stdout(&o);
    for f in ["fill-cdf.svg", "underrun-gaps.svg", "hackbench-rounds.svg"] {
        let svg = std::fs::read_to_string(dir.join("plots").join(f)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("baseline"), "{f}");
    }
}

#[test]
fn failed_interrupted_and_lost_trials_stay_out_of_the_table() {
    let (_tmp, dir) = golden_run(2);
    let before = stdout(&xtask(&["compare", dir.to_str().unwrap()]));
    let trials = dir.join("trials");
    // A record whose trial could not run: in the run's log, not measured.
    let mut failed = record("baseline", 6, &trial(9.0, 6));
    failed["outcome"] = json!({ "status": "failed", "reason": "xrun-player could not open hw:9" });
    failed["player"] = Value::Null;
    std::fs::write(trials.join("baseline-6.failed.json"), failed.to_string()).unwrap();
    // The same outcome under a measurement's name still does not count.
    std::fs::write(trials.join("baseline-7.json"), failed.to_string()).unwrap();
    let mut interrupted = record("patched", 6, &trial(9.0, 6));
    interrupted["outcome"] = json!({ "status": "interrupted", "by": "SIGINT" });
    std::fs::write(trials.join("patched-6.json"), interrupted.to_string()).unwrap();
    std::fs::write(
        trials.join("patched-7.lost.json"),
        r#"{"schema": "xrunbench.lost-trial/1"}"#,
    )
    .unwrap();
    let after = stdout(&xtask(&["compare", dir.to_str().unwrap()]));
    assert_eq!(before, after);
}
