//! LAVA's YAML, written by `serde_norway` from a `serde_json::Value`, with
//! one thing it cannot do by itself: LAVA reads with PyYAML, under YAML 1.1
//! rules, where a plain `yes`, `on`, `y`, `2024-01-01`, `1_000`, `1:20` or
//! `<<` is not a string; serde_norway quotes only what YAML 1.2 reads as
//! something else (`true`, `1.0`, `~`), has no way to ask for quotes, and
//! writes every tag as a local one (`!str`, which PyYAML refuses). Such a
//! string therefore goes through serde_norway as a plain stand-in, which is
//! then replaced by the string double-quoted as JSON writes it (a valid
//! YAML double-quoted scalar). Multi-line strings — shell steps — are
//! serde_norway's literal blocks, which keep every byte.

use serde_json::Value;

/// `v` as a YAML document (a mapping at the top).
pub fn to_yaml(v: &Value) -> String {
    let mut quoting = Quoting {
        marker: unused_marker(v),
        quoted: Vec::new(),
    };
    let stood_in = quoting.value(v);
    let mut text = serde_norway::to_string(&stood_in).expect("a JSON value serializes as YAML");
    for (i, quoted) in quoting.quoted.iter().enumerate() {
        text = text.replacen(&quoting.stand_in(i), quoted, 1);
    }
    text
}

/// Whether YAML 1.1 could read `s`, written plain, as other than a string:
/// a superset of PyYAML's implicit types (null, bool, int, float,
/// timestamp, merge, value), whose spellings are these words, in any case,
/// or start with a digit or a dot after an optional sign. A multi-line
/// string is never plain: serde_norway writes a literal block (or, where
/// one cannot hold it, a double-quoted scalar).
fn yaml11_reads_as_other(s: &str) -> bool {
    if s.contains('\n') {
        return false;
    }
    const WORDS: [&str; 12] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<", "=",
    ];
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    s.is_empty()
        || WORDS.iter().any(|w| s.eq_ignore_ascii_case(w))
        || unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
}

/// The strings [`yaml11_reads_as_other`] holds, as they go into the YAML,
/// and the prefix of the stand-ins they are written as meanwhile.
struct Quoting {
    /// In no string of the document, so a stand-in is found only where
    /// serde_norway wrote one (never inside another scalar).
    marker: String,
    /// JSON's spelling of each such string, by stand-in number.
    quoted: Vec<String>,
}

impl Quoting {
    /// Stand-in `i`, which serde_norway writes plain; the final dot keeps
    /// stand-in 1 from matching the start of stand-in 10.
    fn stand_in(&self, i: usize) -> String {
        format!("{}{i}.", self.marker)
    }

    fn string(&mut self, s: &str) -> String {
        if !yaml11_reads_as_other(s) {
            return s.to_string();
        }
        self.quoted.push(Value::String(s.into()).to_string());
        self.stand_in(self.quoted.len() - 1)
    }

    /// `v` with its stand-ins, as serde_norway's value: its mappings keep
    /// the keys in `v`'s order, whatever a stand-in's spelling.
    fn value(&mut self, v: &Value) -> serde_norway::Value {
        match v {
            Value::String(s) => self.string(s).into(),
            Value::Array(items) => {
                serde_norway::Value::Sequence(items.iter().map(|x| self.value(x)).collect())
            }
            Value::Object(map) => serde_norway::Value::Mapping(
                map.iter()
                    .map(|(k, x)| (self.string(k).into(), self.value(x)))
                    .collect(),
            ),
            other => serde_norway::to_value(other).expect("a JSON scalar is a YAML one"),
        }
    }
}

/// A stand-in prefix that no key or string of `v` contains.
fn unused_marker(v: &Value) -> String {
    let mut marker = String::from("xrunbench-quoted-");
    while contains(v, &marker) {
        marker.push('x');
    }
    marker
}

fn contains(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|x| contains(x, needle)),
        Value::Object(map) => map
            .iter()
            .any(|(k, x)| k.contains(needle) || contains(x, needle)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Strings YAML 1.1 reads as null, bool, int, float, timestamp, merge
    /// or value when plain.
    const YAML11_OTHER: &[&str] = &[
        "",
        "y",
        "n",
        "yes",
        "no",
        "on",
        "off",
        "true",
        "false",
        "null",
        "~",
        "<<",
        "=",
        "1.0",
        "0x10",
        "0o17",
        "0b101",
        "1e3",
        "1e+3",
        "012",
        "08",
        "7",
        "-1",
        "+12",
        ".5",
        "+.5",
        "1.",
        ".inf",
        "-.inf",
        ".nan",
        "1_000",
        "+1_0",
        "0x_1",
        "-0b1",
        "1:20",
        "190:20:30.15",
        "2024-01-01",
        "2001-12-14t21:59:43.10-05:00",
        "2001-12-14 21:59:43.10 -5",
    ];

    /// `s` in lower, upper, title and alternating case.
    fn cases(s: &str) -> Vec<String> {
        let mut title = s.to_string();
        if let Some(first) = title.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        let alternating = s
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 1 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect();
        vec![s.to_string(), s.to_ascii_uppercase(), title, alternating]
    }

    #[test]
    fn strings_yaml_1_1_would_misread_are_double_quoted_wherever_they_are() {
        for word in YAML11_OTHER.iter().flat_map(|w| cases(w)) {
            let v = json!({word.clone(): [word.clone(), {word.clone(): word.clone()}]});
            let text = to_yaml(&v);
            let q = Value::String(word.clone()).to_string();
            assert_eq!(text, format!("{q}:\n- {q}\n- {q}: {q}\n"), "{word:?}");
            let back: Value = serde_norway::from_str(&text).unwrap();
            assert_eq!(back, v, "{text}");
        }
    }

    #[test]
    fn other_strings_are_serde_norways() {
        for s in [
            "ssh",
            "root@",
            "Lava-Test Test Definition 1.0",
            "x:y",
            "# ",
            "yes!",
            "o",
        ] {
            let v = json!({"k": s});
            assert_eq!(to_yaml(&v), serde_norway::to_string(&v).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn shell_steps_keep_every_byte() {
        let steps = [
            "cat > x <<'EOF'\n  indented\n\n{\"a\": 1}\nEOF\n",
            "no newline\nat end",
            "two\n\n",
            "\n\nleading breaks\n",
            "  starts indented\nsecond\n",
            "\tstarts with a tab\n",
            "trailing space \nx\n",
            "crlf\r\nline\r\n",
            "line\u{2028}separator\n",
            "yes\n1.0\n",
            "10 trials\n",
        ];
        let v = json!({"run": {"steps": steps}});
        let text = to_yaml(&v);
        // Block and quoted scalars are read alike by YAML 1.1 and 1.2.
        let back: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        assert!(
            text.contains("  - |\n    cat > x <<'EOF'\n      indented\n\n"),
            "{text}"
        );
        assert!(text.contains("  - |\n    10 trials\n"), "{text}");
    }

    #[test]
    fn keys_keep_their_order_quoted_or_not() {
        let v = json!({"a": 1, "on": 2, "z": 3, "9": 4, "10": 5});
        let order: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        let text = to_yaml(&v);
        let keys: Vec<String> = text
            .lines()
            .map(|l| l.rsplit_once(": ").unwrap().0.trim_matches('"').to_string())
            .collect();
        assert_eq!(keys, order, "{text}");
    }

    #[test]
    fn a_document_holding_the_marker_still_reads_back() {
        let v = json!({
            "a": "xrunbench-quoted-0.",
            "b": "yes",
            "c": "xrunbench-quoted-x",
            "xrunbench-quoted-xx1.": ["on", "2024-01-01"],
        });
        let text = to_yaml(&v);
        let back: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        assert!(text.contains("b: \"yes\"\n"), "{text}");
    }

    #[test]
    fn reads_back_as_written() {
        let v = json!({
            "metadata": {"name": "yes", "format": "Lava-Test Test Definition 1.0"},
            "params": {"URL": "", "N": 3},
            "actions": [{"deploy": {"to": "ssh"}}, {"boot": {"method": "ssh", "prompts": ["# "]}}],
            "empty": [],
            "none": {},
            "x:y": true
        });
        let text = to_yaml(&v);
        let back: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        assert!(text.contains("name: \"yes\""), "{text}");
    }
}
