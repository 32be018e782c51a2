//! The comparison table as data: columns (configurations, the first is the
//! baseline), rows (statistic × metric, mmtests' order), cells (value,
//! percent against the baseline, significance) and the footer facts. Every
//! output format renders this one model.

use serde::Serialize;

use super::metrics::{Direction, Metric};
use crate::stats::{self, Describe};

/// Which test decides the `*` on the Amean row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Significance {
    /// Two-sided Mann–Whitney U (exact for small n without ties).
    #[default]
    Mwu,
    /// Welch's unequal-variance t-test, two-sided.
    Welch,
    /// mmtests' rule: 95 % intervals (mean ± 1.96·stddev) do not overlap;
    /// with both stddevs 0, the means differ by more than 1; no interval
    /// (no mark) for a column of one trial.
    MmtestsCi,
}

impl Significance {
    /// How the footer names the test.
    pub fn describe(self, alpha: f64) -> String {
        match self {
            Significance::Mwu => format!(
                "two-sided Mann-Whitney U, alpha {alpha}; p exact for n <= 50 per column \
                 (with ties: exact permutation distribution given the ties), normal \
                 approximation with tie correction beyond"
            ),
            Significance::Welch => format!("two-sided Welch's t-test, alpha {alpha}"),
            Significance::MmtestsCi => "mmtests CI rule: intervals mean +- 1.96*stddev \
                 of the two columns do not overlap; when both stddevs are 0, the means \
                 differ by more than 1 (in the metric's units); no mark when a column \
                 has a single trial (no interval)"
                .into(),
        }
    }
}

/// Outcome of the significance test for one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Test {
    /// Significant at the chosen level.
    pub significant: bool,
    /// p-value (Mann–Whitney, Welch) or |cidiff| (mmtests: the difference
    /// of means over the summed half-widths, or the raw difference when
    /// both half-widths are 0).
    pub score: Option<f64>,
}

/// Runs the chosen test of `new` against `base`. `None` when it cannot be
/// run (empty sample; Welch with n < 2 or no variance at all; mmtests with
/// n < 2).
pub fn test(kind: Significance, alpha: f64, base: &[f64], new: &[f64]) -> Option<Test> {
    match kind {
        Significance::Mwu => stats::mann_whitney(new, base).map(|m| Test {
            significant: m.p_two_sided < alpha,
            score: Some(m.p_two_sided),
        }),
        Significance::Welch => stats::welch(new, base).map(|w| Test {
            significant: w.p_two_sided < alpha,
            score: Some(w.p_two_sided),
        }),
        Significance::MmtestsCi => stats::mmtests_ci_ratio(base, new).map(|r| Test {
            significant: r.abs() > 1.0,
            score: Some(r.abs()),
        }),
    }
}

/// A statistic row of the table, in mmtests' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Stat {
    /// Smallest value.
    Min,
    /// Arithmetic mean; the comparison row that carries `*`.
    Amean,
    /// Median.
    Median,
    /// Sample standard deviation.
    Stddev,
    /// stddev · 100 / mean.
    CoeffVar,
    /// Largest value.
    Max,
    /// Number of trials with this metric.
    N,
}

impl Stat {
    /// Every statistic, in row order.
    pub const ALL: [Stat; 7] = [
        Stat::Min,
        Stat::Amean,
        Stat::Median,
        Stat::Stddev,
        Stat::CoeffVar,
        Stat::Max,
        Stat::N,
    ];

    /// Row label as mmtests spells it.
    pub fn label(self) -> &'static str {
        match self {
            Stat::Min => "Min",
            Stat::Amean => "Amean",
            Stat::Median => "Median",
            Stat::Stddev => "Stddev",
            Stat::CoeffVar => "CoeffVar",
            Stat::Max => "Max",
            Stat::N => "n",
        }
    }

    fn pick(self, d: &Describe) -> Option<f64> {
        match self {
            Stat::Min => Some(d.min),
            Stat::Amean => Some(d.mean),
            Stat::Median => Some(d.median),
            Stat::Stddev => Some(d.stddev),
            Stat::CoeffVar => d.coeffvar,
            Stat::Max => Some(d.max),
            Stat::N => Some(d.n as f64),
        }
    }

    /// Percent against the baseline, mmtests' way: positive is better;
    /// spread is better when smaller whatever the metric; n has none.
    pub fn percent(self, dir: Direction, base: f64, new: f64) -> Option<f64> {
        match (self, dir) {
            (Stat::N, _) => None,
            (Stat::Stddev | Stat::CoeffVar, _) => stats::pndiff(base, new),
            (_, Direction::LowerIsBetter) => stats::pndiff(base, new),
            (_, Direction::HigherIsBetter) => stats::pdiff(base, new),
        }
    }
}

/// One column: a configuration of one run directory.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    /// `<label>/<config>` when several run directories are merged, else
    /// the configuration's name.
    pub name: String,
    /// The run directory's label (or directory name) when merged.
    pub group: Option<String>,
    /// The configuration.
    pub config: String,
    /// Trials in this column.
    pub n: usize,
    /// Kernels its trials ran on.
    pub kernels: Vec<String>,
    /// The preemption modes its trials ran with, where their records say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preempt: Vec<String>,
}

/// Which way a column moved against the baseline, whatever the metric's
/// direction: the sign of the percent (positive = better).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Worse than the baseline (percent below 0, `-inf%` included).
    Worse,
    /// Better than the baseline (percent above 0, `+inf%` included).
    Better,
    /// As the baseline (0.00 %).
    Same,
}

impl Change {
    /// The change a percent says; `None` for an undefined percent.
    pub fn of(percent: Option<f64>) -> Option<Change> {
        let p = percent.filter(|p| !p.is_nan())?;
        Some(if p > 0.0 {
            Change::Better
        } else if p < 0.0 {
            Change::Worse
        } else {
            Change::Same
        })
    }
}

/// One table cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cell {
    /// The statistic; `None` when undefined (e.g. CoeffVar of a zero mean)
    /// or the column has no value for this metric.
    pub value: Option<f64>,
    /// Percent against the baseline (positive = better); ±∞ against a
    /// baseline of 0 (JSON has no infinity: it writes `null`, and
    /// `direction` says which way); `None` for n or a missing value.
    #[serde(serialize_with = "finite_or_null")]
    pub percent: Option<f64>,
    /// Which way the percent points; `None` exactly when it is undefined.
    pub direction: Option<Change>,
    /// The significance test (Amean rows of non-baseline columns only).
    pub test: Option<Test>,
}

/// A number as JSON can hold it: infinities (and NaN, never produced)
/// become `null`.
fn finite_or_null<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.is_finite() => s.serialize_some(x),
        _ => s.serialize_none(),
    }
}

/// One row: a statistic of a metric across the columns.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The metric.
    pub metric: Metric,
    /// The statistic.
    pub stat: Stat,
    /// One cell per column.
    pub cells: Vec<Cell>,
}

/// Facts the footer states.
#[derive(Debug, Clone, Serialize)]
pub struct Footer {
    /// Scenario name(s).
    pub scenarios: Vec<String>,
    /// Trial length(s), s.
    pub trial_seconds: Vec<f64>,
    /// Sinks the player used.
    pub sinks: Vec<String>,
    /// Machine(s): CPU model and count.
    pub machines: Vec<String>,
    /// The test and level.
    pub significance: Significance,
    /// α.
    pub alpha: f64,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// Columns; the first is the baseline.
    pub columns: Vec<Column>,
    /// Rows, statistic-major then metric (as mmtests prints them).
    pub rows: Vec<Row>,
    /// Footer facts.
    pub footer: Footer,
    /// What goes under the table when the trials ran the monitor.
    #[serde(skip_serializing_if = "super::sections::Sections::is_empty")]
    pub sections: super::sections::Sections,
}

/// Per column, per metric, the trial values (possibly empty).
pub type Samples = Vec<Vec<(Metric, Vec<f64>)>>;

/// Builds the rows from each column's samples; metrics no column has are
/// left out.
pub fn build_rows(samples: &Samples, kind: Significance, alpha: f64) -> Vec<Row> {
    let values = |col: usize, m: Metric| -> &[f64] {
        samples[col]
            .iter()
            .find(|(mm, _)| *mm == m)
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[])
    };
    let present: Vec<Metric> = Metric::ALL
        .into_iter()
        .filter(|&m| (0..samples.len()).any(|c| !values(c, m).is_empty()))
        .collect();
    let mut rows = Vec::new();
    for stat in Stat::ALL {
        for &m in &present {
            let described: Vec<Option<Describe>> = (0..samples.len())
                .map(|c| Describe::of(values(c, m)))
                .collect();
            let base = described[0].as_ref().and_then(|d| stat.pick(d));
            let cells = described
                .iter()
                .enumerate()
                .map(|(c, d)| {
                    let value = d.as_ref().and_then(|d| stat.pick(d));
                    let percent = match (base, value) {
                        (Some(b), Some(v)) => stat.percent(m.direction(), b, v),
                        _ => None,
                    };
                    let test = (stat == Stat::Amean && c > 0)
                        .then(|| test(kind, alpha, values(0, m), values(c, m)))
                        .flatten();
                    Cell {
                        value,
                        percent,
                        direction: Change::of(percent),
                        test,
                    }
                })
                .collect();
            rows.push(Row {
                metric: m,
                stat,
                cells,
            });
        }
    }
    rows
}
