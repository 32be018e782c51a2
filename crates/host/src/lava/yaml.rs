//! Writing LAVA's YAML by hand, from a `serde_json::Value`: every string
//! double-quoted as JSON writes it (a valid YAML double-quoted scalar, so
//! `yes`, `on` or `1.0` stay strings under PyYAML's YAML 1.1 rules, which
//! LAVA reads with), and multi-line strings — shell steps — as literal
//! blocks, which keep every byte and read best.

use serde_json::Value;

/// `v` as a YAML document (a mapping at the top).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    node(&mut out, v, 0);
    out
}

fn node(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                pad(out, indent);
                out.push_str(&scalar_key(k));
                out.push(':');
                value_after_key(out, val, indent);
            }
        }
        Value::Array(items) => {
            for val in items {
                pad(out, indent);
                out.push('-');
                match val {
                    // `- key: value` with the rest of the mapping aligned
                    // under the first key.
                    Value::Object(map) if !map.is_empty() => {
                        out.push(' ');
                        let mut first = true;
                        for (k, inner) in map {
                            if !first {
                                pad(out, indent + 2);
                            }
                            first = false;
                            out.push_str(&scalar_key(k));
                            out.push(':');
                            value_after_key(out, inner, indent + 2);
                        }
                    }
                    _ => value_after_key(out, val, indent),
                }
            }
        }
        _ => {
            pad(out, indent);
            out.push_str(&inline(v));
            out.push('\n');
        }
    }
}

/// What follows `key:` or `-`: an inline scalar, a literal block, or a
/// nested collection on the next lines.
fn value_after_key(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            node(out, v, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            node(out, v, indent + 2);
        }
        // A block whose first line is indented would need an indentation
        // indicator: such a string (never a script of ours) stays quoted.
        Value::String(s)
            if s.contains('\n') && !s.starts_with([' ', '\t', '\n']) && !s.contains('\r') =>
        {
            literal(out, s, indent + 2)
        }
        _ => {
            out.push(' ');
            out.push_str(&inline(v));
            out.push('\n');
        }
    }
}

/// A literal block: `|` keeps one final newline, `|-` none, `|+` all.
fn literal(out: &mut String, s: &str, indent: usize) {
    let body = s.trim_end_matches('\n');
    let trailing = s.len() - body.len();
    out.push_str(match trailing {
        0 => " |-\n",
        1 => " |\n",
        _ => " |+\n",
    });
    for line in s.strip_suffix('\n').unwrap_or(s).split('\n') {
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
        out.push('\n');
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        // JSON's own spelling: null, true, 12, 0.5, "text".
        other => other.to_string(),
    }
}

fn scalar_key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !k.starts_with('-');
    if plain {
        k.to_string()
    } else {
        Value::String(k.into()).to_string()
    }
}

fn pad(out: &mut String, n: usize) {
    out.push_str(&" ".repeat(n));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_back_as_written() {
        let v = json!({
            "metadata": {"name": "yes", "format": "Lava-Test Test Definition 1.0"},
            "params": {"URL": "", "N": 3},
            "run": {"steps": [
                "cat > x <<'EOF'\n  indented\n\n{\"a\": 1}\nEOF\n",
                "sh ./x.sh",
                "no newline\nat end",
                "two\n\n",
                "  starts indented\n"
            ]},
            "actions": [{"deploy": {"to": "ssh"}}, {"boot": {"method": "ssh", "prompts": ["# "]}}],
            "empty": [],
            "x:y": true
        });
        let text = to_yaml(&v);
        let back: serde_json::Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        assert!(text.contains("name: \"yes\""), "{text}");
        assert!(
            text.contains("    - |\n      cat > x <<'EOF'\n        indented\n\n"),
            "{text}"
        );
    }
}
