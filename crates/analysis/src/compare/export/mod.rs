//! Output formats of the comparison table, one small file each behind one
//! trait (as hyperfine's `src/export/`): they all render the same
//! [`Table`], so the numbers agree across formats.

mod csv;
mod json;
mod markdown;
mod text;

use super::table::{Cell, Table};

/// Renders a comparison table.
pub trait Exporter {
    /// The whole document, ending with a newline.
    fn render(&self, table: &Table) -> String;
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Plain ASCII for mails: ≤ 80 columns for two configurations, blocks
    /// of baseline + one configuration beyond that.
    Text,
    /// A GitHub-flavoured Markdown table.
    Markdown,
    /// One line per statistic, metric and column.
    Csv,
    /// The table model as JSON.
    Json,
}

impl Format {
    /// Every format, in the order a run writes them.
    pub const ALL: [Format; 4] = [Format::Text, Format::Markdown, Format::Csv, Format::Json];

    /// The file extension a run directory keeps this format under
    /// (`comparison.txt`, …).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Markdown => "md",
            Format::Csv => "csv",
            Format::Json => "json",
        }
    }
}

/// The exporter for `format`.
pub fn exporter(format: Format) -> Box<dyn Exporter> {
    match format {
        Format::Text => Box::new(text::Text),
        Format::Markdown => Box::new(markdown::Markdown),
        Format::Csv => Box::new(csv::Csv),
        Format::Json => Box::new(json::Json),
    }
}

/// A value with `decimals` places, `n/a` when undefined; never `-0.00`.
pub(crate) fn fmt_value(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) => format!("{:.decimals$}", x + 0.0).replace("-0.00", "0.00"),
        None => "n/a".into(),
    }
}

/// Width of a percentage with its `%` sign: mmtests' `%7.2f%%`.
pub(crate) const PERCENT_W: usize = 8;

/// A percentage as mmtests prints it (`-9.12%`): two decimals wherever they
/// fit [`PERCENT_W`] (`5964.63%`), fewer only when they do not
/// (`-1302.5%`, `-12345%`), an exponent beyond that; `-inf%` / `+inf%`
/// against a zero baseline (the sign says worse / better); `n/a` when
/// undefined.
pub(crate) fn fmt_percent(p: Option<f64>) -> String {
    let x = match p {
        Some(x) if x.is_nan() => return "n/a".into(),
        Some(x) if x.is_infinite() => {
            return if x > 0.0 { "+inf%" } else { "-inf%" }.into();
        }
        Some(x) => x + 0.0,
        None => return "n/a".into(),
    };
    for decimals in [2, 1, 0] {
        let s = format!("{x:.decimals$}%");
        // A tiny negative rounds to `-0.00`: print it as the 0 it shows.
        let s = if s.trim_start_matches(['-', '0', '.']) == "%" {
            s.trim_start_matches('-').to_string()
        } else {
            s
        };
        if s.len() <= PERCENT_W {
            return s;
        }
    }
    let short = format!("{x:.1e}%");
    if short.len() <= PERCENT_W {
        short
    } else {
        format!("{x:.0e}%")
    }
}

/// Whether a cell carries the significance mark.
pub(crate) fn is_significant(c: &Cell) -> bool {
    c.test.is_some_and(|t| t.significant)
}

/// Lines of the footer, shared by the text and Markdown formats.
pub(crate) fn footer_lines(t: &Table) -> Vec<String> {
    let f = &t.footer;
    let mut lines = vec![
        "Percent: against the first column; positive = better (mmtests: \
         100-new*100/base when lower is better, new*100/base-100 when higher \
         is better; Stddev and CoeffVar: lower is better). Against a baseline \
         of 0 the formula gives -inf% (worse) or +inf% (better), significance \
         mark kept; 0 against 0 is 0.00%."
            .to_string(),
        format!(
            "Higher is better: {}; lower is better: the rest.",
            super::metrics::Metric::ALL
                .iter()
                .filter(|m| m.direction() == super::metrics::Direction::HigherIsBetter)
                .map(|m| m.label())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "Significance (*x%* on Amean): {}.",
            f.significance.describe(f.alpha)
        ),
        format!(
            "n (trials): {}.",
            t.columns
                .iter()
                .map(|c| format!("{} {}", c.name, c.n))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!("Kernel: {}.", kernels(t)),
        preemption(t).map_or_else(String::new, |p| format!("Preemption: {p}.")),
        format!(
            "Machine: {}.",
            if f.machines.is_empty() {
                "unknown".into()
            } else {
                f.machines.join("; ")
            }
        ),
        format!(
            "Scenario: {}; {} s trials; sink {}.",
            f.scenarios.join(", "),
            f.trial_seconds
                .iter()
                .map(|s| format!("{s}"))
                .collect::<Vec<_>>()
                .join("/"),
            if f.sinks.is_empty() {
                "unknown".into()
            } else {
                f.sinks.join(", ")
            }
        ),
    ];
    lines.retain(|l| !l.is_empty());
    lines
}

/// One kernel for all columns, or each column's.
fn kernels(t: &Table) -> String {
    let mut all: Vec<&String> = t.columns.iter().flat_map(|c| &c.kernels).collect();
    all.sort();
    all.dedup();
    match all.len() {
        0 => "unknown".into(),
        1 => format!("{} (all columns)", all[0]),
        _ => t
            .columns
            .iter()
            .map(|c| format!("{} {}", c.name, c.kernels.join("+")))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The preemption mode of all columns, or each column's where they
/// differ; `None` where no record says.
fn preemption(t: &Table) -> Option<String> {
    let mut all: Vec<&String> = t.columns.iter().flat_map(|c| &c.preempt).collect();
    all.sort();
    all.dedup();
    match all.len() {
        0 => None,
        1 if t.columns.iter().all(|c| !c.preempt.is_empty()) => {
            Some(format!("{} (all columns)", all[0]))
        }
        _ => Some(
            t.columns
                .iter()
                .map(|c| {
                    let p = if c.preempt.is_empty() {
                        "unknown".to_string()
                    } else {
                        c.preempt.join("+")
                    };
                    format!("{} {p}", c.name)
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preemption_mode_is_said_once_or_per_column() {
        use crate::compare::table::{Column, Footer, Significance};
        let column = |name: &str, preempt: &[&str]| Column {
            name: name.into(),
            group: None,
            config: name.into(),
            n: 1,
            kernels: vec![],
            preempt: preempt.iter().map(|p| p.to_string()).collect(),
        };
        let table = |columns| Table {
            columns,
            rows: vec![],
            footer: Footer {
                scenarios: vec![],
                trial_seconds: vec![],
                sinks: vec![],
                machines: vec![],
                significance: Significance::default(),
                alpha: 0.05,
            },
            sections: Default::default(),
        };
        let same = table(vec![column("a", &["full"]), column("b", &["full"])]);
        assert_eq!(preemption(&same).as_deref(), Some("full (all columns)"));
        let differ = table(vec![
            column("6.12", &["voluntary"]),
            column("7.3", &["lazy"]),
        ]);
        assert_eq!(
            preemption(&differ).as_deref(),
            Some("6.12 voluntary, 7.3 lazy")
        );
        let partly = table(vec![column("old", &[]), column("new", &["lazy"])]);
        assert_eq!(
            preemption(&partly).as_deref(),
            Some("old unknown, new lazy")
        );
        assert_eq!(preemption(&table(vec![column("x", &[])])), None);
        assert!(footer_lines(&differ)
            .iter()
            .any(|l| l == "Preemption: 6.12 voluntary, 7.3 lazy."));
    }

    #[test]
    fn percent_keeps_two_decimals_where_they_fit() {
        assert_eq!(fmt_percent(Some(-9.1234)), "-9.12%");
        assert_eq!(fmt_percent(Some(5964.6291)), "5964.63%");
        assert_eq!(fmt_percent(Some(-999.994)), "-999.99%");
        // Only when two decimals would not fit in 8 characters.
        assert_eq!(fmt_percent(Some(-1302.46)), "-1302.5%");
        assert_eq!(fmt_percent(Some(9999.996)), "10000.0%");
        assert_eq!(fmt_percent(Some(-123456.4)), "-123456%");
        assert_eq!(fmt_percent(Some(-12345678.0)), "-1.2e7%");
        assert_eq!(fmt_percent(Some(-1e300)), "-1e300%");
        assert_eq!(fmt_percent(Some(-0.001)), "0.00%");
        assert_eq!(fmt_percent(Some(0.0)), "0.00%");
    }

    #[test]
    fn percent_against_a_zero_baseline_is_signed_infinity() {
        assert_eq!(fmt_percent(Some(f64::NEG_INFINITY)), "-inf%");
        assert_eq!(fmt_percent(Some(f64::INFINITY)), "+inf%");
        assert_eq!(fmt_percent(None), "n/a");
        assert_eq!(fmt_percent(Some(f64::NAN)), "n/a");
    }
}
