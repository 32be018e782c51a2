//! A small RIFF/WAVE writer for generated tones, and a header reader that
//! checks a user's file before anything runs (the player does the real
//! decoding; we only need to know it is a PCM WAV and how long it plays).

use std::fs::File;
use std::io::{BufWriter, Read, Write};
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

/// What the header of a WAV file says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WavInfo {
    /// Sample rate, Hz.
    pub rate: u32,
    /// Channels.
    pub channels: u16,
    /// Playing time of one pass, seconds.
    pub seconds: f64,
}

/// Reads a WAV header: RIFF/WAVE, a `fmt ` chunk, and the `data` length.
pub fn read_info(path: &Path) -> Result<WavInfo> {
    let mut f = File::open(path)?;
    let mut head = [0u8; 12];
    f.read_exact(&mut head)
        .context("too short for a WAV file")?;
    if &head[0..4] != b"RIFF" || &head[8..12] != b"WAVE" {
        bail!("not a RIFF/WAVE file");
    }
    let mut fmt: Option<(u16, u32, u16)> = None;
    loop {
        let mut chunk = [0u8; 8];
        if f.read_exact(&mut chunk).is_err() {
            bail!("no `data` chunk");
        }
        let len = u32::from_le_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
        match &chunk[0..4] {
            b"fmt " => {
                let mut body = vec![0u8; len.min(64) as usize];
                f.read_exact(&mut body).context("truncated `fmt ` chunk")?;
                if body.len() < 16 {
                    bail!("`fmt ` chunk too short");
                }
                let channels = u16::from_le_bytes([body[2], body[3]]);
                let rate = u32::from_le_bytes([body[4], body[5], body[6], body[7]]);
                let block = u16::from_le_bytes([body[12], body[13]]);
                if channels == 0 || rate == 0 || block == 0 {
                    bail!("`fmt ` chunk has zero channels, rate or block size");
                }
                fmt = Some((channels, rate, block));
                skip(
                    &mut f,
                    u64::from(len) - body.len() as u64 + u64::from(len % 2),
                )?;
            }
            b"data" => {
                let Some((channels, rate, block)) = fmt else {
                    bail!("`data` before `fmt `")
                };
                let frames = u64::from(len) / u64::from(block);
                return Ok(WavInfo {
                    rate,
                    channels,
                    seconds: frames as f64 / f64::from(rate),
                });
            }
            _ => skip(&mut f, u64::from(len) + u64::from(len % 2))?,
        }
    }
}

fn skip(f: &mut File, n: u64) -> Result<()> {
    std::io::copy(&mut f.take(n), &mut std::io::sink())?;
    Ok(())
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
            let info = read_info(&p).unwrap();
            assert_eq!((info.rate, info.channels), (8000, 2));
            assert!((info.seconds - 0.5).abs() < 1e-9);
            let len = std::fs::metadata(&p).unwrap().len();
            assert_eq!(len, 44 + 4000 * 2 * u64::from(format.bytes()));
        }
    }

    #[test]
    fn non_wav_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.wav");
        std::fs::write(&p, "hello, not audio").unwrap();
        assert!(read_info(&p).unwrap_err().to_string().contains("RIFF"));
    }
}
