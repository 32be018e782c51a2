//! A header reader that checks a user's WAV on the host before anything
//! runs (the player does the real decoding; we only need to know it is a
//! PCM WAV and how long it plays). Generated tones are written by
//! `xrun-trial` on the machine under test, with crates/wav.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

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
    use xrunbench_schema::trial::ToneSpec;
    use xrunbench_schema::SampleFormat;

    #[test]
    fn generated_tone_reads_back() {
        let d = tempfile::tempdir().unwrap();
        for format in [
            SampleFormat::U8,
            SampleFormat::S16Le,
            SampleFormat::S24_3Le,
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
            xrunbench_wav::write_tone(&p, &tone, 1.0).unwrap();
            let info = read_info(&p).unwrap();
            assert_eq!((info.rate, info.channels), (8000, 2));
            assert!((info.seconds - 0.5).abs() < 1e-9);
            let len = std::fs::metadata(&p).unwrap().len();
            assert!(len >= 44 + 4000 * 2 * format.bytes() as u64);
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
