//! Values with units or a small syntax, checked while the TOML is parsed so
//! that a mistake is reported with its line and column.

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

/// The player's `--priority`: `fifo:N`, `rr:N` (N in 1..=99), `other` or
/// `other:NICE` (NICE in -20..=19); checked here so a typo fails at parse
/// time rather than inside a trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Priority(String);

impl Priority {
    /// The text passed to `xrun-player --priority`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this asks for a real-time policy (needs privileges).
    pub fn is_realtime(&self) -> bool {
        self.0.starts_with("fifo:") || self.0.starts_with("rr:")
    }
}

impl TryFrom<String> for Priority {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let bad = || {
            format!("priority `{text}` is not one of fifo:N, rr:N (N = 1..99), other, other:NICE (NICE = -20..19)")
        };
        match text.split_once(':') {
            None if text == "other" => Ok(Priority(text)),
            Some(("fifo" | "rr", n)) => match n.parse::<u8>() {
                Ok(1..=99) => Ok(Priority(text)),
                _ => Err(bad()),
            },
            Some(("other", nice)) => match nice.parse::<i8>() {
                Ok(-20..=19) => Ok(Priority(text)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

impl From<Priority> for String {
    fn from(p: Priority) -> String {
        p.0
    }
}

/// A CPU list as taskset writes it: `"1"`, `"0,2"`, `"0-3,6"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CpuList {
    text: String,
    cpus: Vec<usize>,
}

impl CpuList {
    /// The text passed to `xrun-player --cpu`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The CPU numbers, ascending, without duplicates.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }
}

impl TryFrom<String> for CpuList {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let bad = || format!("CPU list `{text}` is not like \"1\", \"0,2\" or \"0-3\"");
        let mut cpus = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<usize>(), b.parse::<usize>()),
                None => (part.parse::<usize>(), part.parse::<usize>()),
            };
            let (Ok(lo), Ok(hi)) = (lo, hi) else {
                return Err(bad());
            };
            if lo > hi || hi >= 4096 {
                return Err(bad());
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList { text, cpus })
    }
}

impl From<CpuList> for String {
    fn from(c: CpuList) -> String {
        c.text
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

    #[test]
    fn priorities_follow_the_players_syntax() {
        for ok in ["fifo:80", "rr:1", "other", "other:-5", "other:19"] {
            Priority::try_from(ok.to_string()).unwrap();
        }
        for bad in ["fifo", "fifo:0", "fifo:100", "idle", "other:30", "rr:x"] {
            assert!(Priority::try_from(bad.to_string()).is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_lists_expand_ranges() {
        let c = CpuList::try_from("0-2,5,1".to_string()).unwrap();
        assert_eq!(c.cpus(), &[0, 1, 2, 5]);
        assert!(CpuList::try_from("3-1".to_string()).is_err());
        assert!(CpuList::try_from("a".to_string()).is_err());
    }
}
