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

/// A percentage as mmtests prints it (`-9.12%`), fewer decimals when it
/// would not fit, `n/a` when undefined.
pub(crate) fn fmt_percent(p: Option<f64>) -> String {
    match p {
        Some(x) if x.abs() < 999.995 => {
            let s = format!("{:.2}%", x + 0.0);
            if s == "-0.00%" {
                "0.00%".into()
            } else {
                s
            }
        }
        Some(x) => format!("{:.0}%", x),
        None => "n/a".into(),
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
         is better; Stddev and CoeffVar: lower is better)."
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
