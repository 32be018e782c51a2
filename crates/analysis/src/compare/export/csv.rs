//! `--format csv`: one line per statistic, metric and column, with the
//! unrounded numbers. A percent against a zero baseline is `-inf` / `+inf`
//! (the table's `-inf%` without the `%` no CSV number carries, spelled so
//! that spreadsheets, Python and R read it as a number).

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

/// A number with every digit it needs to round-trip, and no more: plain
/// decimals in the usual range, an exponent for the very large or small
/// (`{}` would spell 1e300 with 301 digits); signed `inf`; empty when
/// undefined.
fn num(v: Option<f64>) -> String {
    match v {
        None => String::new(),
        Some(x) if x.is_nan() => String::new(),
        Some(x) if x.is_infinite() => if x > 0.0 { "+inf" } else { "-inf" }.into(),
        Some(x) if x != 0.0 && !(1e-6..1e15).contains(&x.abs()) => format!("{x:e}"),
        Some(x) => format!("{}", x + 0.0),
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

#[cfg(test)]
mod tests {
    use super::num;

    #[test]
    fn numbers_round_trip_without_runaway_digits() {
        assert_eq!(num(Some(2.505)), "2.505");
        assert_eq!(num(Some(-0.0)), "0");
        assert_eq!(num(Some(1e300)), "1e300");
        assert_eq!(num(Some(3.2e-40)), "3.2e-40");
        assert_eq!(num(Some(f64::NEG_INFINITY)), "-inf");
        assert_eq!(num(Some(f64::INFINITY)), "+inf");
        assert_eq!(num(None), "");
        for x in [1e300, 3.2e-40, 0.1 + 0.2, 123456.789] {
            assert_eq!(num(Some(x)).parse::<f64>().unwrap(), x);
        }
    }
}
