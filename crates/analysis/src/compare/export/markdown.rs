//! `--format markdown`: one GitHub-flavoured table with every column, the
//! footer as a list below it.

use std::fmt::Write as _;

use super::{fmt_percent, fmt_value, footer_lines, is_significant, Exporter};
use crate::compare::table::{Stat, Table};

/// Markdown exporter.
pub struct Markdown;

impl Exporter for Markdown {
    fn render(&self, t: &Table) -> String {
        let mut out = String::from("| statistic | metric |");
        for c in &t.columns {
            let _ = write!(out, " {} |", escape(&c.name));
        }
        out.push_str("\n| --- | --- |");
        out.push_str(&" ---: |".repeat(t.columns.len()));
        out.push('\n');
        for row in &t.rows {
            let _ = write!(
                out,
                "| {} | {} |",
                row.stat.label(),
                escape(row.metric.label())
            );
            for cell in &row.cells {
                let decimals = if row.stat == Stat::N {
                    0
                } else {
                    row.metric.decimals()
                };
                let v = fmt_value(cell.value, decimals);
                let text = match (row.stat, is_significant(cell)) {
                    (Stat::N, _) => v,
                    (_, true) => format!("{v} (**{}**)", fmt_percent(cell.percent)),
                    (_, false) => format!("{v} ({})", fmt_percent(cell.percent)),
                };
                let _ = write!(out, " {text} |");
            }
            out.push('\n');
        }
        out.push('\n');
        for l in footer_lines(t) {
            let _ = writeln!(out, "- {}", escape(&l.replace("*x%*", "bold %")));
        }
        if !t.sections.is_empty() {
            out.push_str("\n```\n");
            for l in t.sections.lines() {
                let _ = writeln!(out, "{l}");
            }
            out.push_str("```\n");
        }
        out
    }
}

/// Escapes what Markdown would read as table or emphasis syntax.
fn escape(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('*', "\\*")
        .replace('_', "\\_")
}
