//! `--format csv`: one line per statistic, metric and column, with the
//! unrounded numbers.

use std::fmt::Write as _;

use super::Exporter;
use crate::compare::table::Table;

/// CSV exporter.
pub struct Csv;

impl Exporter for Csv {
    fn render(&self, t: &Table) -> String {
        let mut out =
            String::from("statistic,metric,column,value,percent,significant,test_score\n");
        for row in &t.rows {
            for (col, cell) in t.columns.iter().zip(&row.cells) {
                let num = |v: Option<f64>| v.map(|x| format!("{}", x + 0.0)).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    row.stat.label(),
                    row.metric.label(),
                    field(&col.name),
                    num(cell.value),
                    num(cell.percent),
                    cell.test
                        .map(|x| x.significant.to_string())
                        .unwrap_or_default(),
                    num(cell.test.and_then(|x| x.score)),
                );
            }
        }
        out
    }
}

/// Quotes a field when it holds a comma, quote or newline (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
