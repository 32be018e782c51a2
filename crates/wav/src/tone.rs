//! Sine tones written as WAV files: what a scenario plays when it names no
//! file (`generate = { … }`), in any sample format the player accepts.

use std::path::{Path, PathBuf};

use xrunbench_schema::trial::ToneSpec;
use xrunbench_schema::SampleFormat;

/// Why a tone could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ToneError {
    /// The tone's parameters cannot make a WAV file.
    #[error("tone: {0}")]
    Invalid(String),
    /// Writing failed (disk full, no such directory…).
    #[error("{path}: cannot write the tone: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: hound::Error,
    },
}

/// The longest tone we write: a WAV's data chunk size is a u32.
const MAX_DATA_BYTES: u64 = u32::MAX as u64 - 64;

/// Writes `seconds` (default `default_seconds`) of a sine tone at -6 dBFS
/// (loud enough to hear, never clipping) to `path`.
pub fn write_tone(path: &Path, tone: &ToneSpec, default_seconds: f64) -> Result<(), ToneError> {
    let seconds = tone.seconds.unwrap_or(default_seconds);
    check(tone, seconds)?;
    let frames = (seconds * f64::from(tone.rate)).round() as u64;
    let write_err = |source| ToneError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut w = hound::WavWriter::create(path, hound_spec(tone)).map_err(write_err)?;
    let step = std::f64::consts::TAU * tone.tone_hz / f64::from(tone.rate);
    for i in 0..frames {
        let x = 0.5 * (step * i as f64).sin();
        for _ in 0..tone.channels {
            write_sample(&mut w, x, tone.format).map_err(write_err)?;
        }
    }
    w.finalize().map_err(write_err)
}

/// Checks what hound would otherwise panic or overflow on.
fn check(tone: &ToneSpec, seconds: f64) -> Result<(), ToneError> {
    let bad = |m: String| Err(ToneError::Invalid(m));
    if tone.channels == 0 {
        return bad("channels must be at least 1".into());
    }
    if tone.rate == 0 {
        return bad("rate must be at least 1 Hz".into());
    }
    if !(seconds.is_finite() && seconds > 0.0) {
        return bad(format!("seconds must be a positive number, not {seconds}"));
    }
    if !(tone.tone_hz.is_finite() && tone.tone_hz >= 0.0) {
        return bad(format!(
            "tone_hz must be a number ≥ 0, not {}",
            tone.tone_hz
        ));
    }
    let bytes =
        seconds * f64::from(tone.rate) * f64::from(tone.channels) * tone.format.bytes() as f64;
    if bytes > MAX_DATA_BYTES as f64 {
        return bad(format!(
            "{seconds} s at {} Hz × {} ch {} is too large for a WAV file (4 GiB)",
            tone.rate, tone.channels, tone.format
        ));
    }
    Ok(())
}

fn hound_spec(tone: &ToneSpec) -> hound::WavSpec {
    let (bits, sample_format) = match tone.format {
        SampleFormat::U8 => (8, hound::SampleFormat::Int),
        SampleFormat::S16Le => (16, hound::SampleFormat::Int),
        SampleFormat::S24_3Le => (24, hound::SampleFormat::Int),
        SampleFormat::S32Le => (32, hound::SampleFormat::Int),
        SampleFormat::FloatLe => (32, hound::SampleFormat::Float),
    };
    hound::WavSpec {
        channels: tone.channels,
        sample_rate: tone.rate,
        bits_per_sample: bits,
        sample_format,
    }
}

fn write_sample<W: std::io::Write + std::io::Seek>(
    w: &mut hound::WavWriter<W>,
    x: f64,
    format: SampleFormat,
) -> Result<(), hound::Error> {
    match format {
        // hound takes 8-bit samples signed and stores them offset by 128.
        SampleFormat::U8 => w.write_sample((x * 127.0) as i8),
        SampleFormat::S16Le => w.write_sample((x * 32_767.0) as i16),
        SampleFormat::S24_3Le => w.write_sample((x * 8_388_607.0) as i32),
        SampleFormat::S32Le => w.write_sample((x * 2_147_483_647.0) as i32),
        SampleFormat::FloatLe => w.write_sample(x as f32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("xrunbench-wav-{}-{name}", std::process::id()))
    }

    #[test]
    fn every_format_reads_back_with_its_layout_and_length() {
        for format in SampleFormat::ALL {
            let p = temp(&format!("{format}.wav"));
            let tone = ToneSpec {
                format,
                channels: 3,
                rate: 8_000,
                seconds: Some(0.5),
                ..ToneSpec::default()
            };
            write_tone(&p, &tone, 10.0).unwrap();
            let r = hound::WavReader::open(&p).unwrap();
            let s = r.spec();
            assert_eq!((s.channels, s.sample_rate), (3, 8_000), "{format}");
            assert_eq!(r.duration(), 4_000, "{format}");
            let bytes = std::fs::metadata(&p).unwrap().len();
            // The data chunk holds the samples in the format's own size
            // (S24_3LE is 3 bytes, not a 4-byte container).
            assert!(
                bytes >= 4_000 * 3 * format.bytes() as u64,
                "{format}: {bytes}"
            );
            assert!(
                bytes < 4_000 * 3 * format.bytes() as u64 + 100,
                "{format}: {bytes}"
            );
            std::fs::remove_file(&p).unwrap();
        }
    }

    #[test]
    fn the_tone_is_a_sine_at_minus_six_dbfs() {
        let p = temp("sine.wav");
        let tone = ToneSpec {
            tone_hz: 1_000.0,
            channels: 1,
            rate: 48_000,
            ..ToneSpec::default()
        };
        write_tone(&p, &tone, 0.1).unwrap();
        let samples: Vec<i16> = hound::WavReader::open(&p)
            .unwrap()
            .into_samples::<i16>()
            .map(Result::unwrap)
            .collect();
        assert_eq!(samples.len(), 4_800);
        let peak = samples.iter().map(|s| s.unsigned_abs()).max().unwrap();
        assert!((16_000..=16_384).contains(&peak), "{peak}");
        // 1 kHz at 48 kHz: 48 samples per cycle, 2 zero crossings each.
        let crossings = samples
            .windows(2)
            .filter(|w| (w[0] < 0) != (w[1] < 0))
            .count();
        assert!((199..=201).contains(&crossings), "{crossings}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn impossible_tones_are_refused_with_the_field() {
        let p = temp("bad.wav");
        let cases = [
            (
                ToneSpec {
                    channels: 0,
                    ..ToneSpec::default()
                },
                "channels",
            ),
            (
                ToneSpec {
                    rate: 0,
                    ..ToneSpec::default()
                },
                "rate",
            ),
            (
                ToneSpec {
                    seconds: Some(-1.0),
                    ..ToneSpec::default()
                },
                "seconds",
            ),
            (
                ToneSpec {
                    seconds: Some(1e9),
                    ..ToneSpec::default()
                },
                "too large",
            ),
            (
                ToneSpec {
                    tone_hz: f64::NAN,
                    ..ToneSpec::default()
                },
                "tone_hz",
            ),
        ];
        for (tone, word) in cases {
            let e = write_tone(&p, &tone, 1.0).unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
            assert!(!p.exists());
        }
        let e = write_tone(
            Path::new("/nonexistent-dir/x.wav"),
            &ToneSpec::default(),
            0.1,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/nonexistent-dir/x.wav"), "{e}");
    }
}
