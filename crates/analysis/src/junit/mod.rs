//! JUnit XML of a run, for CI (`run --junit FILE`, `lava-results --junit
//! FILE`): a testsuite per configuration, a testcase per metric with its
//! value in `system-out`, each failed gate a `failure`; properties name
//! the scenario, kernel, board and target. The shape Jenkins' and
//! GitLab's JUnit readers take (the suite validates it against the JUnit
//! XSD Jenkins' xUnit plugin ships).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use xrunbench_schema::gate::Statistic;
use xrunbench_schema::metrics::{playback_seconds, Metric};
use xrunbench_schema::trial::TrialRecord;

use crate::gate::Verdict;
use crate::results::RunDir;

/// Writes the JUnit file of `dir` with the gates' `verdicts`; `target`
/// says where it ran (`local`, `ssh root@rpi4`, `lava (…)`).
pub fn write(path: &Path, dir: &RunDir, verdicts: &[Verdict], target: &str) -> Result<()> {
    let xml = render(dir, verdicts, target);
    xrunbench_schema::doc::write_atomic(path, xml.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The JUnit XML text.
pub fn render(dir: &RunDir, verdicts: &[Verdict], target: &str) -> String {
    let mut suites = String::new();
    let (mut tests, mut failures, mut seconds) = (0usize, 0usize, 0.0f64);
    let mut configs: Vec<String> = dir.configs.clone();
    for v in verdicts {
        if !configs.iter().any(|c| c == v.gate.config()) {
            configs.push(v.gate.config().to_string());
        }
    }
    for config in &configs {
        let trials = dir.trials_of(config);
        let s = suite(dir, config, &trials, verdicts, target);
        tests += s.tests;
        failures += s.failures;
        seconds += s.seconds;
        suites.push_str(&s.xml);
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{seconds:.3}\">",
        esc(&format!("xrunbench {}", dir.scenario))
    );
    out.push_str(&suites);
    out.push_str("</testsuites>\n");
    out
}

struct Suite {
    xml: String,
    tests: usize,
    failures: usize,
    seconds: f64,
}

fn suite(
    dir: &RunDir,
    config: &str,
    trials: &[&TrialRecord],
    verdicts: &[Verdict],
    target: &str,
) -> Suite {
    let mine: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| v.gate.config() == config)
        .collect();
    let metrics: Vec<Metric> = Metric::ALL
        .into_iter()
        .filter(|&m| {
            trials.iter().any(|t| m.of(t).is_some()) || mine.iter().any(|v| v.gate.metric() == m)
        })
        .collect();
    let seconds: f64 = trials.iter().map(|t| playback_seconds(t)).sum();
    let mut cases = String::new();
    let mut failures = 0;
    for &m in &metrics {
        let values: Vec<f64> = trials.iter().filter_map(|t| m.of(t)).collect();
        let _ = writeln!(
            cases,
            "    <testcase name=\"{}\" classname=\"{}\">",
            esc(m.key()),
            esc(&format!("xrunbench.{}.{config}", dir.scenario))
        );
        for v in mine.iter().filter(|v| v.gate.metric() == m && !v.pass) {
            failures += 1;
            let _ = writeln!(
                cases,
                "      <failure type=\"gate\" message=\"{}\">{}</failure>",
                esc(&v.line),
                esc(&v.line)
            );
        }
        let _ = writeln!(
            cases,
            "      <system-out>{}</system-out>",
            esc(&value_text(m, &values, &mine))
        );
        cases.push_str("    </testcase>\n");
    }
    let first = trials.first();
    let mut kernels: Vec<&str> = trials
        .iter()
        .map(|t| t.machine.kernel_release.as_str())
        .collect();
    kernels.sort();
    kernels.dedup();
    let board = first.map(|t| {
        let m = &t.machine;
        m.board_model
            .clone()
            .unwrap_or_else(|| format!("{} x {} CPUs", m.cpu_model, m.cpu_count))
    });
    let props = [
        ("scenario", Some(dir.scenario.clone())),
        ("config", Some(config.to_string())),
        ("kernel", Some(kernels.join(", "))),
        ("board", board),
        ("target", Some(target.to_string())),
        ("trials", Some(trials.len().to_string())),
    ];
    let mut xml = String::new();
    let _ = writeln!(
        xml,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{seconds:.3}\"{}{}>",
        esc(&format!("{}.{config}", dir.scenario)),
        metrics.len(),
        first
            .map(|t| format!(" timestamp=\"{}\"", esc(&t.started_at)))
            .unwrap_or_default(),
        first
            .map(|t| format!(" hostname=\"{}\"", esc(&t.machine.hostname)))
            .unwrap_or_default(),
    );
    xml.push_str("    <properties>\n");
    for (name, value) in props {
        if let Some(v) = value {
            let _ = writeln!(
                xml,
                "      <property name=\"{name}\" value=\"{}\"/>",
                esc(&v)
            );
        }
    }
    xml.push_str("    </properties>\n");
    xml.push_str(&cases);
    xml.push_str("  </testsuite>\n");
    Suite {
        xml,
        tests: metrics.len(),
        failures,
        seconds,
    }
}

/// `underruns/min: mean 0.5 (n 3: 0, 1, 0.5)` and each gate's line.
fn value_text(m: Metric, values: &[f64], verdicts: &[&Verdict]) -> String {
    let mut s = match Statistic::Mean.of(values) {
        Some(mean) => {
            let list: Vec<String> = values.iter().map(|v| format!("{v}")).collect();
            format!(
                "{} ({}): mean {mean} (n {}: {})",
                m.label(),
                m.unit(),
                values.len(),
                list.join(", ")
            )
        }
        None => format!("{} ({}): no trial has this metric", m.label(), m.unit()),
    };
    for v in verdicts.iter().filter(|v| v.gate.metric() == m) {
        let _ = write!(
            s,
            "\ngate {}: {}",
            if v.pass { "pass" } else { "fail" },
            v.line
        );
    }
    s
}

/// A JUnit document of one suite of pass/fail stages (`bisect-run`: the
/// endpoints, the bisection, the confirmation): each case a name and, when
/// it failed, why.
pub fn stages(
    suite: &str,
    classname: &str,
    cases: &[(String, Option<String>)],
    took: std::time::Duration,
) -> String {
    let failures = cases.iter().filter(|c| c.1.is_some()).count();
    let mut x = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"{}\" tests=\"{}\" \
         failures=\"{failures}\" errors=\"0\" time=\"{:.1}\">\n",
        esc(suite),
        cases.len(),
        took.as_secs_f64()
    );
    for (name, failure) in cases {
        let head = format!(
            "  <testcase classname=\"{}\" name=\"{}\"",
            esc(classname),
            esc(name)
        );
        match failure {
            None => {
                let _ = writeln!(x, "{head}/>");
            }
            Some(f) => {
                let _ = writeln!(
                    x,
                    "{head}>\n    <failure message=\"{}\"/>\n  </testcase>",
                    esc(f)
                );
            }
        }
    }
    x.push_str("</testsuite>\n");
    x
}

/// Text for an XML attribute or element: the five entities escaped, and
/// characters XML 1.0 cannot hold dropped.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            c if (c as u32) < 0x20 && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_name_each_case_and_escape() {
        let x = stages(
            "xrunbench bisect-run",
            "bisect-run",
            &[
                ("endpoint good".into(), None),
                ("endpoint bad".into(), Some("not <worse> & so".into())),
            ],
            std::time::Duration::from_secs(3),
        );
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("not &lt;worse&gt; &amp; so"), "{x}");
    }

    #[test]
    fn escaping_keeps_xml_well_formed() {
        assert_eq!(esc("a<b & \"c\"\u{1}\n"), "a&lt;b &amp; &quot;c&quot;&#10;");
    }
}
