//! `--format text`: the table for a mail, in mmtests' shape. Plain ASCII,
//! no tabs; a row label of 24 characters and cells of 27, so baseline plus
//! one configuration is 78 columns. With more configurations the table is
//! split into blocks of baseline + one configuration: each block is then a
//! self-contained two-column table that still fits a mail.

use std::fmt::Write as _;

use super::{fmt_percent, fmt_value, footer_lines, is_significant, Exporter, PERCENT_W};
use crate::compare::table::{Cell, Row, Stat, Table};

/// Text exporter.
pub struct Text;

/// Width of the row label: statistic (9) + metric (15).
const LABEL_W: usize = 24;
/// Width of one column.
const CELL_W: usize = 27;
/// Line width the footer wraps at.
const LINE_W: usize = 80;

impl Exporter for Text {
    fn render(&self, t: &Table) -> String {
        let mut out = String::new();
        for (i, block) in blocks(t.columns.len()).iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            render_block(&mut out, t, block);
        }
        out.push('\n');
        for l in footer_lines(t) {
            for w in wrap(&ascii(&l), LINE_W) {
                let _ = writeln!(out, "{w}");
            }
        }
        if !t.sections.is_empty() {
            out.push('\n');
            for l in t.sections.lines() {
                let _ = writeln!(out, "{}", ascii(&l));
            }
        }
        out
    }
}

/// Column indices of each block.
fn blocks(n: usize) -> Vec<Vec<usize>> {
    if n <= 2 {
        return vec![(0..n).collect()];
    }
    (1..n).map(|c| vec![0, c]).collect()
}

fn render_block(out: &mut String, t: &Table, cols: &[usize]) {
    let merged = t.columns.iter().any(|c| c.group.is_some());
    if merged {
        let _ = write!(out, "{:LABEL_W$}", "");
        for &c in cols {
            let g = t.columns[c].group.as_deref().unwrap_or("");
            let _ = write!(out, "{:>CELL_W$}", fit(g));
        }
        trim_push(out);
    }
    let _ = write!(out, "{:LABEL_W$}", "");
    for &c in cols {
        let _ = write!(out, "{:>CELL_W$}", fit(&t.columns[c].config));
    }
    trim_push(out);
    let one_n = same_n_everywhere(t);
    let mut n_printed = false;
    for row in &t.rows {
        if row.stat == Stat::N && one_n {
            // Every metric has the same n per column: one row says it.
            if n_printed {
                continue;
            }
            n_printed = true;
        }
        let metric = if row.stat == Stat::N && one_n {
            "trials"
        } else {
            row.metric.label()
        };
        let label = format!("{:<9}{}", row.stat.label(), metric);
        let _ = write!(out, "{:<LABEL_W$}", fit_to(&label, LABEL_W));
        for &c in cols {
            let _ = write!(out, "{:>CELL_W$}", cell(row, &row.cells[c]));
        }
        trim_push(out);
    }
}

/// Whether the n rows of all metrics agree (no metric missing in a trial).
fn same_n_everywhere(t: &Table) -> bool {
    let mut n_rows = t.rows.iter().filter(|r| r.stat == Stat::N);
    let Some(first) = n_rows.next() else {
        return true;
    };
    n_rows.all(|r| r.cells == first.cells)
}

/// `%12.Nf (%7.2f%%)`, with the parentheses turned into asterisks when the
/// difference is significant, as mmtests prints it; `-inf%` / `+inf%` take
/// the same width and keep the mark.
fn cell(row: &Row, c: &Cell) -> String {
    if row.stat == Stat::N {
        return format!("{:>12}{:11}", fmt_value(c.value, 0), "");
    }
    let v = fmt_value(c.value, row.metric.decimals());
    let (open, close) = if is_significant(c) {
        ('*', '*')
    } else {
        ('(', ')')
    };
    format!(
        "{v:>12} {open}{:>PERCENT_W$}{close}",
        fmt_percent(c.percent)
    )
}

fn trim_push(out: &mut String) {
    while out.ends_with(' ') {
        out.pop();
    }
    out.push('\n');
}

/// A name cut to fit a column (a space on its left keeps columns apart).
fn fit(s: &str) -> String {
    fit_to(&ascii(s), CELL_W - 1)
}

fn fit_to(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(w - 1).collect();
        t.push('~');
        t
    }
}

/// Mail-safe text: anything outside printable ASCII becomes `?`, tabs
/// become spaces.
fn ascii(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' => ' ',
            ' '..='~' => c,
            _ => '?',
        })
        .collect()
}

/// Greedy word wrap; continuation lines are indented by two spaces.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let indent = if lines.is_empty() { 0 } else { 2 };
        if !cur.is_empty() && indent + cur.len() + 1 + word.len() > width {
            lines.push(cur);
            cur = String::new();
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| if i == 0 { l } else { format!("  {l}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_lines_short() {
        let s = "word ".repeat(60);
        assert!(wrap(&s, 80).iter().all(|l| l.len() <= 80));
    }

    #[test]
    fn blocks_repeat_the_baseline() {
        assert_eq!(blocks(2), vec![vec![0, 1]]);
        assert_eq!(blocks(1), vec![vec![0]]);
        assert_eq!(blocks(3), vec![vec![0, 1], vec![0, 2]]);
    }
}
