//! Time spans with units, checked while the TOML is parsed so that a
//! mistake is reported with its line and column. (Priorities, CPU lists and
//! the other shared words are the schema's vocabulary.)

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A span of time written with its unit: `"20ms"`, `"10s"`, `"1.5s"`,
/// `"500us"`, `"2min"`. Bare numbers are refused: aplay counts µs, sysctls
/// count ms or ns, and a guessed unit is a silent factor-1000 error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Span {
    micros: u64,
}

impl Span {
    /// A span of `micros` microseconds.
    pub const fn from_micros(micros: u64) -> Self {
        Span { micros }
    }

    /// A span of whole seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Span {
            micros: secs * 1_000_000,
        }
    }

    /// Length in microseconds.
    pub fn as_micros(self) -> u64 {
        self.micros
    }

    /// Length in seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.micros as f64 / 1e6
    }

    /// As a std duration.
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_micros(self.micros)
    }

    /// Parses `"<number><unit>"`; the error says what was expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let factor: f64 = match unit.trim() {
            "us" | "µs" => 1.0,
            "ms" => 1e3,
            "s" => 1e6,
            "min" => 60e6,
            "" => {
                return Err(format!(
                    "`{text}` has no unit: write it as e.g. \"{text}ms\" or \"{text}s\" (units: us, ms, s, min)"
                ))
            }
            other => {
                return Err(format!(
                    "unknown time unit `{other}` in `{text}` (expected us, ms, s or min)"
                ))
            }
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a time span like \"20ms\" or \"10s\""))?;
        let micros = (value * factor).round();
        if !micros.is_finite() || !(0.0..=1e15).contains(&micros) {
            return Err(format!("`{text}` is out of range"));
        }
        Ok(Span::from_micros(micros as u64))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.micros;
        if us != 0 && us % 1_000_000 == 0 {
            write!(f, "{}s", us / 1_000_000)
        } else if us % 1000 == 0 {
            write!(f, "{}ms", us / 1000)
        } else {
            write!(f, "{us}us")
        }
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct SpanVisitor;

impl Visitor<'_> for SpanVisitor {
    type Value = Span;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a time span with a unit, like \"20ms\" or \"10s\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Span, E> {
        Span::parse(v).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Span, E> {
        Err(E::custom(format!(
            "the number {v} has no unit: write it as a string with one, e.g. \"{v}ms\" or \"{v}s\""
        )))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Span, E> {
        self.visit_i64(v as i64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Span, E> {
        Err(E::custom(format!(
            "the number {v} has no unit: write it as a string with one, e.g. \"{v}s\""
        )))
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SpanVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_parse_with_units() {
        assert_eq!(Span::parse("20ms").unwrap().as_micros(), 20_000);
        assert_eq!(Span::parse("1.5s").unwrap().as_micros(), 1_500_000);
        assert_eq!(Span::parse("500us").unwrap().as_micros(), 500);
        assert_eq!(Span::parse("2min").unwrap().as_micros(), 120_000_000);
        assert!(Span::parse("20").unwrap_err().contains("has no unit"));
        assert!(Span::parse("20 hz")
            .unwrap_err()
            .contains("unknown time unit"));
        assert!(Span::parse("fast").is_err());
    }

    #[test]
    fn spans_print_in_the_largest_exact_unit() {
        assert_eq!(Span::from_micros(20_000).to_string(), "20ms");
        assert_eq!(Span::from_secs(10).to_string(), "10s");
        assert_eq!(Span::from_micros(1_500).to_string(), "1500us");
        assert_eq!(Span::from_micros(0).to_string(), "0ms");
    }
}
