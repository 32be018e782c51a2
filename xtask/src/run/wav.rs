//! A small RIFF/WAVE writer for generated tones. A user's file is checked
//! before anything runs with the player's own reader
//! ([`xrunbench_wav::WavStream`]), so validation refuses exactly what the
//! player would.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::scenario::{SampleFormat, ToneSpec};

impl SampleFormat {
    fn bytes(self) -> u16 {
        match self {
            SampleFormat::U8 => 1,
            SampleFormat::S16Le => 2,
            SampleFormat::S24Le3 => 3,
            SampleFormat::S32Le | SampleFormat::FloatLe => 4,
        }
    }
}

/// Writes a sine tone at -6 dBFS (loud enough to hear, never clipping).
pub fn write_tone(path: &Path, tone: &ToneSpec) -> Result<()> {
    let seconds = tone.seconds.unwrap_or(10.0);
    let frames = (seconds * f64::from(tone.rate)).round() as u64;
    let bps = tone.format.bytes();
    let block = u32::from(bps) * u32::from(tone.channels);
    let data_len = frames * u64::from(block);
    if data_len > u64::from(u32::MAX - 64) {
        bail!("generated tone of {seconds} s is too large for a WAV file");
    }
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::new(f);
    let float = tone.format == SampleFormat::FloatLe;
    w.write_all(b"RIFF")?;
    w.write_all(&(36 + data_len as u32).to_le_bytes())?;
    w.write_all(b"WAVEfmt ")?;
    w.write_all(&16u32.to_le_bytes())?;
    w.write_all(&(if float { 3u16 } else { 1u16 }).to_le_bytes())?;
    w.write_all(&tone.channels.to_le_bytes())?;
    w.write_all(&tone.rate.to_le_bytes())?;
    w.write_all(&(tone.rate * block).to_le_bytes())?;
    w.write_all(&(block as u16).to_le_bytes())?;
    w.write_all(&(bps * 8).to_le_bytes())?;
    w.write_all(b"data")?;
    w.write_all(&(data_len as u32).to_le_bytes())?;
    let step = std::f64::consts::TAU * tone.tone_hz / f64::from(tone.rate);
    for i in 0..frames {
        let x = 0.5 * (step * i as f64).sin();
        let sample = encode(x, tone.format);
        for _ in 0..tone.channels {
            w.write_all(&sample[..usize::from(bps)])?;
        }
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn encode(x: f64, format: SampleFormat) -> [u8; 4] {
    match format {
        SampleFormat::U8 => [((x * 127.0) + 128.0) as u8, 0, 0, 0],
        SampleFormat::S16Le => {
            let [a, b] = ((x * 32767.0) as i16).to_le_bytes();
            [a, b, 0, 0]
        }
        SampleFormat::S24Le3 => {
            let [a, b, c, _] = ((x * 8_388_607.0) as i32).to_le_bytes();
            [a, b, c, 0]
        }
        SampleFormat::S32Le => ((x * 2_147_483_647.0) as i32).to_le_bytes(),
        SampleFormat::FloatLe => (x as f32).to_le_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tone_reads_back() {
        let d = tempfile::tempdir().unwrap();
        for format in [
            SampleFormat::U8,
            SampleFormat::S16Le,
            SampleFormat::S24Le3,
            SampleFormat::FloatLe,
        ] {
            let p = d.path().join("t.wav");
            let tone = ToneSpec {
                tone_hz: 440.0,
                seconds: Some(0.5),
                rate: 8000,
                channels: 2,
                format,
            };
            write_tone(&p, &tone).unwrap();
            let wav = xrunbench_wav::WavStream::open(&p).unwrap();
            let spec = wav.spec();
            assert_eq!((spec.rate, spec.channels), (8000, 2));
            assert!((spec.seconds() - 0.5).abs() < 1e-9);
            let len = std::fs::metadata(&p).unwrap().len();
            assert_eq!(len, 44 + 4000 * 2 * u64::from(format.bytes()));
        }
    }
}
