//! `--format json`: the table model itself.

use super::Exporter;
use crate::compare::table::Table;

/// JSON exporter.
pub struct Json;

impl Exporter for Json {
    fn render(&self, table: &Table) -> String {
        // The model holds no maps with non-string keys and no NaN
        // (undefined figures are null), so serialization cannot fail.
        let mut s = serde_json::to_string_pretty(table)
            .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string());
        s.push('\n');
        s
    }
}
