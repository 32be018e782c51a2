//! `cargo xtask run --gate --junit FILE` for real: a short scenario on
//! this machine, its gates judged (one cannot pass: a hackbench round never
//! takes 0 ms), the exit code saying so, and the JUnit file valid against
//! the JUnit XSD Jenkins' xUnit plugin ships (checked with xmllint).

mod lava_support;
mod support;

/// Two configurations on the virtual sink under a small load.
fn scenario(gates: &str) -> String {
    support::ScenarioText::plain_and_nice("junitrun", "other:5")
        .tail(gates)
        .text()
}

#[test]
fn gates_set_the_exit_code_and_the_junit_file_validates() {
    let dir = tempfile::tempdir().unwrap();
    let failing = support::scenario(
        dir.path(),
        "junitrun",
        &scenario(
            "[gate.plain]\nunderruns = { max = 1000000 }\n\
             [gate.nice]\nhackbench-round = { max = 0 }\nmax-gap = { worse_than_baseline = false }\n",
        ),
    );
    let junit = dir.path().join("junit.xml");
    let results = dir.path().join("results");
    let out = support::run_xtask_with_bins(&[
        "run",
        failing.to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
        "--gate",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("gate FAIL: nice hackbench-round: mean max 0: mean is"),
        "{stdout}"
    );
    assert!(
        stdout.contains("gate pass: plain underruns: mean max 1000000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("nice max-gap: not significantly worse than plain"),
        "{stdout}"
    );

    lava_support::validate_junit(&junit).unwrap();
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testsuite ").count(), 2, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    // The failure sits in nice's hackbench-round testcase, and its output
    // holds the value.
    let nice = &xml[xml.find("name=\"junitrun.nice\"").unwrap()..];
    let case = &nice[nice.find("<testcase name=\"hackbench-round\"").unwrap()..];
    let case = &case[..case.find("</testcase>").unwrap()];
    assert!(case.contains("<failure type=\"gate\""), "{case}");
    assert!(case.contains("hb-round-ms (ms): mean "), "{case}");
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        xml.contains(&format!(
            "<property name=\"kernel\" value=\"{}\"/>",
            kernel.trim()
        )),
        "{xml}"
    );
    assert!(
        xml.contains("<property name=\"target\" value=\"local\"/>"),
        "{xml}"
    );

    // The same run with gates that pass: exit 0.
    let passing = support::scenario(
        dir.path(),
        "junitpass",
        &scenario("[gate.nice]\nunderruns = { max = 1000000 }\n"),
    );
    let out = support::run_xtask_with_bins(&[
        "run",
        passing.to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
        "--trials",
        "1",
        "--gate",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
