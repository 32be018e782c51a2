//! Gates a board can judge alone: a statistic of one metric of one
//! configuration against a fixed limit (`[gate] "fifo-80".underruns =
//! { max = 0 }`). The host writes them as an `xrunbench.gates/1` document
//! into a LAVA test definition; `xrun-trial summarize` judges them there,
//! and the host judges the very same way (and the gates that need the
//! significance test, which only it runs).

use serde::{Deserialize, Serialize};

use crate::metrics::Metric;

/// Schema string of a [`GateSet`].
pub const GATES_SCHEMA: &str = "xrunbench.gates/1";

/// The gates a board judges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSet {
    /// Always [`GATES_SCHEMA`].
    pub schema: String,
    /// Each gate, in scenario order.
    pub gates: Vec<LimitGate>,
}

/// Which value of a configuration's trials a gate looks at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    /// Arithmetic mean (the table's Amean; LAVA's measurement).
    #[default]
    Mean,
    /// Median (mean of the middle two for an even count).
    Median,
    /// Smallest trial.
    Min,
    /// Largest trial (the worst one for a lower-is-better metric).
    Max,
}

impl Statistic {
    /// Its name in a gate (`mean`).
    pub fn name(self) -> &'static str {
        match self {
            Statistic::Mean => "mean",
            Statistic::Median => "median",
            Statistic::Min => "min",
            Statistic::Max => "max",
        }
    }

    /// This statistic of `values` (non-finite ones left out); `None` when
    /// none is left.
    pub fn of(self, values: &[f64]) -> Option<f64> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(match self {
            Statistic::Mean => v.iter().sum::<f64>() / n as f64,
            Statistic::Median if n % 2 == 1 => v[n / 2],
            Statistic::Median => (v[n / 2 - 1] + v[n / 2]) / 2.0,
            Statistic::Min => v[0],
            Statistic::Max => v[n - 1],
        })
    }
}

/// Which side of the limit passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// The value may be at most the limit.
    Max,
    /// The value must be at least the limit.
    Min,
}

impl Bound {
    /// Its key in a gate (`max`).
    pub fn name(self) -> &'static str {
        match self {
            Bound::Max => "max",
            Bound::Min => "min",
        }
    }
}

/// One gate with a fixed limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitGate {
    /// The configuration.
    pub config: String,
    /// The metric.
    pub metric: Metric,
    /// Which value of its trials.
    #[serde(default)]
    pub of: Statistic,
    /// Which side passes.
    pub bound: Bound,
    /// The limit, in the metric's unit.
    pub limit: f64,
}

impl LimitGate {
    /// Whether `value` passes.
    pub fn passes(&self, value: f64) -> bool {
        match self.bound {
            Bound::Max => value <= self.limit,
            Bound::Min => value >= self.limit,
        }
    }

    /// Judges the configuration's per-trial `values` of the metric: the
    /// statistic, and whether it passes (no value never passes: a gate
    /// that cannot be judged must not look green).
    pub fn judge(&self, values: &[f64]) -> (Option<f64>, bool) {
        let v = self.of.of(values);
        (v, v.is_some_and(|v| self.passes(v)))
    }

    /// `mean max 0` — the rule in words, for people.
    pub fn rule(&self) -> String {
        format!("{} {} {}", self.of.name(), self.bound.name(), self.limit)
    }

    /// Its LAVA test case ([`gate_case`]): `gate_fifo-80_underruns_mean-max`.
    pub fn case(&self) -> String {
        gate_case(
            &self.config,
            self.metric,
            &format!("{}-{}", self.of.name(), self.bound.name()),
        )
    }
}

/// The LAVA test case of a configuration's metric: `<config>_<metric>`
/// (`fifo-80_underruns`). Configuration names hold letters, digits, `.`,
/// `_` and `-`; metric keys no `_`, so the last `_` splits them.
pub fn measurement_case(config: &str, metric: Metric) -> String {
    format!("{config}_{}", metric.key())
}

/// The configuration and metric of a [`measurement_case`] name.
pub fn parse_measurement_case(name: &str) -> Option<(&str, Metric)> {
    let (config, key) = name.rsplit_once('_')?;
    Some((config, Metric::from_key(key)?)).filter(|(c, _)| !c.is_empty())
}

/// The LAVA test case of a gate: `gate_<config>_<metric>_<of>-<bound>`
/// (`gate_fifo-80_underruns_mean-max`).
pub fn gate_case(config: &str, metric: Metric, rule: &str) -> String {
    format!("gate_{config}_{}_{rule}", metric.key())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_and_bounds() {
        let v = [3.0, 1.0, f64::NAN, 2.0, 10.0];
        assert_eq!(Statistic::Mean.of(&v), Some(4.0));
        assert_eq!(Statistic::Median.of(&v), Some(2.5));
        assert_eq!(Statistic::Min.of(&v), Some(1.0));
        assert_eq!(Statistic::Max.of(&v), Some(10.0));
        assert_eq!(Statistic::Mean.of(&[]), None);
        let g = LimitGate {
            config: "a".into(),
            metric: Metric::Underruns,
            of: Statistic::Max,
            bound: Bound::Max,
            limit: 3.0,
        };
        assert_eq!(g.judge(&[1.0, 3.0]), (Some(3.0), true));
        assert_eq!(g.judge(&[1.0, 3.5]), (Some(3.5), false));
        assert_eq!(g.judge(&[]), (None, false));
        let json = r#"{"schema":"xrunbench.gates/1","gates":[{"config":"a","metric":"max-gap","bound":"min","limit":1.5}]}"#;
        let set: GateSet = serde_json::from_str(json).unwrap();
        assert_eq!(set.gates[0].of, Statistic::Mean);
        assert_eq!(set.gates[0].metric, Metric::MaxGap);
        assert!(serde_json::from_str::<GateSet>(&json.replace("limit", "limt")).is_err());
        assert_eq!(g.case(), "gate_a_underruns_max-max");
    }

    #[test]
    fn case_names_read_back() {
        for m in Metric::ALL {
            let name = measurement_case("fifo_80-x.y", m);
            assert_eq!(parse_measurement_case(&name), Some(("fifo_80-x.y", m)));
        }
        assert_eq!(parse_measurement_case("_underruns"), None);
        assert_eq!(parse_measurement_case("a_nope"), None);
        assert_eq!(parse_measurement_case("job"), None);
    }
}
