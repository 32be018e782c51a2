//! `[gate]`: the pass/fail criteria a scenario declares for CI, as written
//! and resolved against the scenario's configurations. Judging them on a
//! run's trials is `xrunbench_analysis::gate`'s.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use xrunbench_schema::gate::{Bound, LimitGate, Statistic};
use xrunbench_schema::metrics::Metric;

use crate::error::ScenarioError;
use crate::file::ScenarioFile;
use crate::resolve::Scenario;

/// `[gate."CONFIG"] METRIC = { … }`: one metric's criteria as written.
/// Every key is optional; at least one criterion must be given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// The statistic may be at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// The statistic must be at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Which statistic `max`/`min` look at (default: the mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<Statistic>,
    /// `false`: the configuration may not be significantly worse than the
    /// baseline (the first configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worse_than_baseline: Option<bool>,
    /// The configuration may not be significantly worse than the baseline
    /// by more than this many percent (the table's percent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worse_by_percent: Option<f64>,
}

/// `[gate]` as written: configuration → metric key → criteria.
pub type GateTable = BTreeMap<String, BTreeMap<String, GateSpec>>;

/// One resolved gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// A fixed limit (judged on a board too).
    Limit(LimitGate),
    /// Not significantly worse than the baseline, by more than
    /// `by_percent` (`None`: by anything).
    NotWorse {
        /// The configuration.
        config: String,
        /// The metric.
        metric: Metric,
        /// How much worse is tolerated, percent.
        by_percent: Option<f64>,
    },
}

impl Gate {
    /// The configuration it judges.
    pub fn config(&self) -> &str {
        match self {
            Gate::Limit(g) => &g.config,
            Gate::NotWorse { config, .. } => config,
        }
    }

    /// The metric it judges.
    pub fn metric(&self) -> Metric {
        match self {
            Gate::Limit(g) => g.metric,
            Gate::NotWorse { metric, .. } => *metric,
        }
    }

    /// The rule in words: `mean max 0`, `not worse than <baseline>`.
    pub fn rule(&self, baseline: &str) -> String {
        match self {
            Gate::Limit(g) => g.rule(),
            Gate::NotWorse {
                by_percent: None, ..
            } => format!("not significantly worse than {baseline}"),
            Gate::NotWorse {
                by_percent: Some(p),
                ..
            } => format!("not significantly worse than {baseline} by more than {p}%"),
        }
    }
}

/// The gates of `file` (resolved as `scenario`), in configuration order
/// then metric order; an error names `gate."CONFIG".METRIC` and says what
/// was expected.
pub fn resolve(
    path: &Path,
    file: &ScenarioFile,
    scenario: &Scenario,
) -> Result<Vec<Gate>, ScenarioError> {
    let err = |at: String, msg: String| ScenarioError(format!("{}: {at}: {msg}", path.display()));
    let names: Vec<&str> = scenario.configs.iter().map(|c| c.name.as_str()).collect();
    for config in file.gate.keys() {
        if !names.contains(&config.as_str()) {
            return Err(err(
                format!("gate.\"{config}\""),
                format!(
                    "no configuration named `{config}` (the scenario has {})",
                    names.join(", ")
                ),
            ));
        }
    }
    let mut out = Vec::new();
    for (i, config) in names.iter().enumerate() {
        let Some(metrics) = file.gate.get(*config) else {
            continue;
        };
        for (key, spec) in metrics {
            let at = format!("gate.\"{config}\".{key}");
            let Some(metric) = Metric::from_key(key) else {
                let keys: Vec<&str> = Metric::ALL.iter().map(|m| m.key()).collect();
                return Err(err(
                    at,
                    format!("unknown metric, expected one of {}", keys.join(", ")),
                ));
            };
            out.extend(one(config, metric, spec, i == 0).map_err(|m| err(at, m))?);
        }
    }
    out.sort_by_key(|g| (names.iter().position(|n| *n == g.config()), g.metric()));
    Ok(out)
}

/// The gates of one `METRIC = { … }`.
fn one(config: &str, metric: Metric, s: &GateSpec, is_baseline: bool) -> Result<Vec<Gate>, String> {
    let mut out = Vec::new();
    for (bound, limit) in [(Bound::Max, s.max), (Bound::Min, s.min)] {
        let Some(limit) = limit else { continue };
        if !limit.is_finite() {
            return Err(format!("{} = {limit} is not a finite number", bound.name()));
        }
        out.push(Gate::Limit(LimitGate {
            config: config.into(),
            metric,
            of: s.of.unwrap_or_default(),
            bound,
            limit,
        }));
    }
    if s.of.is_some() && out.is_empty() {
        return Err("`of` needs `max` or `min`".into());
    }
    if let (Some(lo), Some(hi)) = (s.min, s.max) {
        if lo > hi {
            return Err(format!("min = {lo} is above max = {hi}: no value passes"));
        }
    }
    let relative = match (s.worse_than_baseline, s.worse_by_percent) {
        (Some(true), _) => {
            return Err("worse_than_baseline = true allows anything: write `false` \
                 (not significantly worse than the first configuration) or leave it out"
                .into())
        }
        (_, Some(p)) if !(p.is_finite() && p >= 0.0) => {
            return Err(format!("worse_by_percent = {p}: expected a percent ≥ 0"))
        }
        (Some(false), None) => Some(None),
        (_, Some(p)) => Some(Some(p)),
        (None, None) => None,
    };
    if let Some(by_percent) = relative {
        if is_baseline {
            return Err(format!(
                "`{config}` is the baseline (the first configuration): it cannot be worse than itself"
            ));
        }
        out.push(Gate::NotWorse {
            config: config.into(),
            metric,
            by_percent,
        });
    }
    if out.is_empty() {
        return Err(
            "no criterion: expected max, min, worse_than_baseline = false or worse_by_percent"
                .into(),
        );
    }
    Ok(out)
}

/// The limit gates among `gates`: what a board judges.
pub fn limits(gates: &[Gate]) -> Vec<LimitGate> {
    gates
        .iter()
        .filter_map(|g| match g {
            Gate::Limit(l) => Some(l.clone()),
            Gate::NotWorse { .. } => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str =
        "name = \"g\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"base\"\n[[config]]\nname = \"fifo-80\"\n";

    fn gates_of(text: &str) -> Result<Vec<Gate>, String> {
        let p = Path::new("g.toml");
        let file = super::super::parse(p, text).map_err(|e| e.0)?;
        let s = super::super::resolve(p, &file).map_err(|e| e.0)?;
        resolve(p, &file, &s).map_err(|e| e.0)
    }

    #[test]
    fn keys_become_gates_in_scenario_order() {
        let g = gates_of(&format!(
            "{BASE}[gate.\"fifo-80\"]\nunderruns = {{ max = 0 }}\n\
             max-gap = {{ max = 5, min = 0, of = \"max\" }}\n\
             p99-late = {{ worse_than_baseline = false }}\n\
             [gate.base]\nmin-fill = {{ min = 2.5, of = \"median\" }}\n"
        ))
        .unwrap();
        let shown: Vec<String> = g
            .iter()
            .map(|g| format!("{} {} {}", g.config(), g.metric().key(), g.rule("base")))
            .collect();
        assert_eq!(
            shown,
            [
                "base min-fill median min 2.5",
                "fifo-80 underruns mean max 0",
                "fifo-80 max-gap max max 5",
                "fifo-80 max-gap max min 0",
                "fifo-80 p99-late not significantly worse than base",
            ]
        );
    }

    #[test]
    fn bad_gates_are_one_line_naming_the_key() {
        for (table, want) in [
            ("[gate.nope]\nunderruns = { max = 0 }", "g.toml: gate.\"nope\": no configuration named `nope` (the scenario has base, fifo-80)"),
            ("[gate.\"fifo-80\"]\nunderruns_per_min = { max = 0 }", "g.toml: gate.\"fifo-80\".underruns_per_min: unknown metric, expected one of underruns, gap-per-min"),
            ("[gate.\"fifo-80\"]\nunderruns = { maxi = 0 }", "unknown field `maxi`"),
            ("[gate.\"fifo-80\"]\nunderruns = {}", "gate.\"fifo-80\".underruns: no criterion"),
            ("[gate.\"fifo-80\"]\nunderruns = { worse_than_baseline = true }", "worse_than_baseline = true allows anything"),
            ("[gate.base]\nunderruns = { worse_by_percent = 5 }", "`base` is the baseline"),
            ("[gate.\"fifo-80\"]\nunderruns = { worse_by_percent = -1 }", "expected a percent ≥ 0"),
            ("[gate.\"fifo-80\"]\nunderruns = { of = \"max\" }", "`of` needs `max` or `min`"),
            ("[gate.\"fifo-80\"]\nunderruns = { max = 1, of = \"p95\" }", "unknown variant `p95`"),
        ] {
            let e = gates_of(&format!("{BASE}{table}\n")).unwrap_err();
            assert!(e.contains(want), "{e}\nwanted: {want}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
