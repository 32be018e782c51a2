//! The small vocabulary every tool shares: scheduling priority, CPU lists,
//! sample formats, the player's backends and cpal hosts. One definition
//! each, parsed and printed the same way everywhere (command lines,
//! scenario files, trial specs, reports).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A scheduling policy for the playback thread: `fifo:N`, `rr:N` (N in
/// 1..=99), `other` or `other:NICE` (NICE in -20..=19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Priority {
    /// SCHED_FIFO at this priority (1..=99).
    Fifo(u8),
    /// SCHED_RR at this priority (1..=99).
    Rr(u8),
    /// SCHED_OTHER, optionally with a nice value (-20..=19).
    Other(Option<i8>),
}

impl Priority {
    /// Whether this asks for a real-time policy (needs CAP_SYS_NICE or an
    /// RLIMIT_RTPRIO at least as high).
    pub fn is_realtime(self) -> bool {
        matches!(self, Priority::Fifo(_) | Priority::Rr(_))
    }

    /// The real-time priority asked for, if any.
    pub fn rt_priority(self) -> Option<u8> {
        match self {
            Priority::Fifo(n) | Priority::Rr(n) => Some(n),
            Priority::Other(_) => None,
        }
    }
}

/// Why a priority, CPU list or other vocabulary word did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VocabError(pub String);

impl fmt::Display for VocabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VocabError {}

impl FromStr for Priority {
    type Err = VocabError;

    fn from_str(s: &str) -> Result<Self, VocabError> {
        let bad = || {
            VocabError(format!(
                "priority `{s}` is not one of fifo:N, rr:N (N in 1..=99), other, other:NICE (NICE in -20..=19)"
            ))
        };
        match s.split_once(':') {
            None if s == "other" => Ok(Priority::Other(None)),
            Some(("fifo", n)) => match n.parse::<u8>() {
                Ok(n @ 1..=99) => Ok(Priority::Fifo(n)),
                _ => Err(bad()),
            },
            Some(("rr", n)) => match n.parse::<u8>() {
                Ok(n @ 1..=99) => Ok(Priority::Rr(n)),
                _ => Err(bad()),
            },
            Some(("other", nice)) => match nice.parse::<i8>() {
                Ok(n @ -20..=19) => Ok(Priority::Other(Some(n))),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Priority::Fifo(n) => write!(f, "fifo:{n}"),
            Priority::Rr(n) => write!(f, "rr:{n}"),
            Priority::Other(None) => f.write_str("other"),
            Priority::Other(Some(n)) => write!(f, "other:{n}"),
        }
    }
}

impl TryFrom<String> for Priority {
    type Error = VocabError;
    fn try_from(s: String) -> Result<Self, VocabError> {
        s.parse()
    }
}

impl From<Priority> for String {
    fn from(p: Priority) -> String {
        p.to_string()
    }
}

/// The highest CPU number a list may name (the kernel's NR_CPUS ceiling is
/// far lower on every board we run on; this only stops absurd input).
pub const MAX_CPU: usize = 4095;

/// A CPU list in taskset's syntax: `1`, `0,2`, `0-3,6`. Kept as written (so
/// a scenario prints back as its author wrote it) and as numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CpuList {
    text: String,
    cpus: Vec<usize>,
}

impl CpuList {
    /// The list as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The CPU numbers, ascending, without duplicates.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }
}

impl FromStr for CpuList {
    type Err = VocabError;

    fn from_str(text: &str) -> Result<Self, VocabError> {
        let bad = || {
            VocabError(format!(
                "CPU list `{text}` is not like \"1\", \"0,2\" or \"0-3\" (CPUs 0..={MAX_CPU})"
            ))
        };
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
            if lo > hi || hi > MAX_CPU {
                return Err(bad());
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList {
            text: text.to_string(),
            cpus,
        })
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl TryFrom<String> for CpuList {
    type Error = VocabError;
    fn try_from(s: String) -> Result<Self, VocabError> {
        s.parse()
    }
}

impl From<CpuList> for String {
    fn from(c: CpuList) -> String {
        c.text
    }
}

/// A PCM sample format, in ALSA's spelling (`S16_LE`, `FLOAT_LE`…): the
/// formats a WAV file may hold and the tone generator writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SampleFormat {
    /// Unsigned 8-bit (`U8`).
    U8,
    /// Signed 16-bit little endian (`S16_LE`).
    #[default]
    #[serde(rename = "S16_LE")]
    S16Le,
    /// Signed 24-bit packed in 3 bytes, little endian (`S24_3LE`).
    #[serde(rename = "S24_3LE")]
    S24_3Le,
    /// Signed 32-bit little endian (`S32_LE`); a 24-in-32 file plays as this.
    #[serde(rename = "S32_LE")]
    S32Le,
    /// 32-bit IEEE float little endian (`FLOAT_LE`).
    #[serde(rename = "FLOAT_LE")]
    FloatLe,
}

impl SampleFormat {
    /// Every format, in order of size.
    pub const ALL: [SampleFormat; 5] = [
        SampleFormat::U8,
        SampleFormat::S16Le,
        SampleFormat::S24_3Le,
        SampleFormat::S32Le,
        SampleFormat::FloatLe,
    ];

    /// ALSA's name of the format (`snd_pcm_format_name`).
    pub fn alsa_name(self) -> &'static str {
        match self {
            SampleFormat::U8 => "U8",
            SampleFormat::S16Le => "S16_LE",
            SampleFormat::S24_3Le => "S24_3LE",
            SampleFormat::S32Le => "S32_LE",
            SampleFormat::FloatLe => "FLOAT_LE",
        }
    }

    /// Bytes per sample.
    pub fn bytes(self) -> usize {
        match self {
            SampleFormat::U8 => 1,
            SampleFormat::S16Le => 2,
            SampleFormat::S24_3Le => 3,
            SampleFormat::S32Le | SampleFormat::FloatLe => 4,
        }
    }

    /// The byte pattern of digital silence for one sample.
    pub fn silence_byte(self) -> u8 {
        match self {
            SampleFormat::U8 => 0x80,
            _ => 0,
        }
    }
}

impl fmt::Display for SampleFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.alsa_name())
    }
}

impl FromStr for SampleFormat {
    type Err = VocabError;
    fn from_str(s: &str) -> Result<Self, VocabError> {
        SampleFormat::ALL
            .into_iter()
            .find(|f| f.alsa_name() == s)
            .ok_or_else(|| {
                VocabError(format!(
                    "sample format `{s}` is not one of U8, S16_LE, S24_3LE, S32_LE, FLOAT_LE"
                ))
            })
    }
}

/// Where the player sends audio (`xrun-player --backend`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// ALSA when the machine has a sound card (or a device is named), else
    /// the virtual sink.
    #[default]
    Auto,
    /// An ALSA PCM by name.
    Alsa,
    /// The simulated PCM on CLOCK_MONOTONIC.
    Virtual,
    /// cpal, on one of its hosts ([`CpalHost`]).
    Cpal,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 4] = [
        Backend::Auto,
        Backend::Alsa,
        Backend::Virtual,
        Backend::Cpal,
    ];

    /// The spelling `xrun-player --backend` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Alsa => "alsa",
            Backend::Virtual => "virtual",
            Backend::Cpal => "cpal",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Backend {
    type Err = VocabError;
    fn from_str(s: &str) -> Result<Self, VocabError> {
        Backend::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| {
                VocabError(format!(
                    "backend `{s}` is not one of auto, alsa, virtual, cpal"
                ))
            })
    }
}

/// cpal's hosts on Linux (`xrun-player --host`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpalHost {
    /// cpal's ALSA host (always built).
    #[default]
    Alsa,
    /// cpal's JACK host (player feature `cpal-jack`).
    Jack,
    /// cpal's PulseAudio host (player feature `cpal-pulseaudio`).
    Pulseaudio,
    /// cpal's PipeWire host (player feature `cpal-pipewire`).
    Pipewire,
}

impl CpalHost {
    /// Every host.
    pub const ALL: [CpalHost; 4] = [
        CpalHost::Alsa,
        CpalHost::Jack,
        CpalHost::Pulseaudio,
        CpalHost::Pipewire,
    ];

    /// The `--host` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CpalHost::Alsa => "alsa",
            CpalHost::Jack => "jack",
            CpalHost::Pulseaudio => "pulseaudio",
            CpalHost::Pipewire => "pipewire",
        }
    }

    /// The player's cargo feature that builds this host (`None`: always built).
    pub fn player_feature(self) -> Option<&'static str> {
        match self {
            CpalHost::Alsa => None,
            CpalHost::Jack => Some("cpal-jack"),
            CpalHost::Pulseaudio => Some("cpal-pulseaudio"),
            CpalHost::Pipewire => Some("cpal-pipewire"),
        }
    }
}

impl fmt::Display for CpalHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CpalHost {
    type Err = VocabError;
    fn from_str(s: &str) -> Result<Self, VocabError> {
        CpalHost::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or_else(|| {
                VocabError(format!(
                    "cpal host `{s}` is not one of alsa, jack, pulseaudio, pipewire"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_round_trip_and_reject_out_of_range() {
        for s in ["fifo:80", "rr:1", "other", "other:-20", "other:19"] {
            assert_eq!(s.parse::<Priority>().unwrap().to_string(), s);
        }
        for s in [
            "fifo:0", "fifo:100", "rr", "other:20", "idle", "fifo:-1", "",
        ] {
            let e = s.parse::<Priority>().unwrap_err().to_string();
            assert!(e.contains(&format!("`{s}`")), "{e}");
        }
        assert!(Priority::Fifo(80).is_realtime());
        assert!(!Priority::Other(Some(5)).is_realtime());
    }

    #[test]
    fn cpu_lists_keep_their_text_and_expand() {
        let c: CpuList = "3,0-1,1".parse().unwrap();
        assert_eq!(c.cpus(), &[0, 1, 3]);
        assert_eq!(c.as_str(), "3,0-1,1");
        for s in ["", "a", "2-1", "4096", "1,", "-1"] {
            assert!(s.parse::<CpuList>().is_err(), "{s}");
        }
    }

    #[test]
    fn words_round_trip() {
        for f in SampleFormat::ALL {
            assert_eq!(f.alsa_name().parse::<SampleFormat>().unwrap(), f);
        }
        for b in Backend::ALL {
            assert_eq!(b.as_str().parse::<Backend>().unwrap(), b);
        }
        for h in CpalHost::ALL {
            assert_eq!(h.as_str().parse::<CpalHost>().unwrap(), h);
        }
        assert!("S16".parse::<SampleFormat>().is_err());
    }
}
