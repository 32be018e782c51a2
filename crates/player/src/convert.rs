//! Sample conversion from the file's format to one a device accepts.
//!
//! Used on the reader side of the cpal sink (never in the real-time
//! callback): a device that does not take the file's own format gets
//! 32-bit float, or failing that signed 16/32-bit integers.

use xrunbench_schema::SampleFormat;

/// Decodes one sample as a left-justified signed 32-bit value.
fn decode_i32(from: SampleFormat, b: &[u8]) -> i32 {
    match from {
        SampleFormat::U8 => ((b[0] as i32) - 128) << 24,
        SampleFormat::S16Le => (i16::from_le_bytes([b[0], b[1]]) as i32) << 16,
        SampleFormat::S24_3Le => i32::from_le_bytes([0, b[0], b[1], b[2]]),
        SampleFormat::S32Le => i32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        SampleFormat::FloatLe => {
            let x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64;
            (x.clamp(-1.0, 1.0) * 2_147_483_647.0).round() as i32
        }
    }
}

/// Decodes one sample as float in [-1, 1].
fn decode_f32(from: SampleFormat, b: &[u8]) -> f32 {
    match from {
        SampleFormat::FloatLe => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        _ => (decode_i32(from, b) as f64 / 2_147_483_648.0) as f32,
    }
}

/// Converts whole samples of `src` (format `from`) into `dst` (format
/// `to`); returns the bytes written to `dst`. Converts as many samples as
/// both slices hold.
pub fn convert(from: SampleFormat, src: &[u8], to: SampleFormat, dst: &mut [u8]) -> usize {
    if from == to {
        let n = src.len().min(dst.len());
        dst[..n].copy_from_slice(&src[..n]);
        return n;
    }
    let (fb, tb) = (from.bytes(), to.bytes());
    let samples = (src.len() / fb).min(dst.len() / tb);
    for (s, d) in src
        .chunks_exact(fb)
        .zip(dst.chunks_exact_mut(tb))
        .take(samples)
    {
        match to {
            SampleFormat::FloatLe => d.copy_from_slice(&decode_f32(from, s).to_le_bytes()),
            SampleFormat::S32Le => d.copy_from_slice(&decode_i32(from, s).to_le_bytes()),
            SampleFormat::S16Le => {
                d.copy_from_slice(&((decode_i32(from, s) >> 16) as i16).to_le_bytes())
            }
            SampleFormat::S24_3Le => d.copy_from_slice(&decode_i32(from, s).to_le_bytes()[1..]),
            SampleFormat::U8 => d[0] = ((decode_i32(from, s) >> 24) + 128) as u8,
        }
    }
    samples * tb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_scale_and_silence_survive() {
        let mut out = [0u8; 8];
        // S16 max and min to float.
        let src = [0xff, 0x7f, 0x00, 0x80];
        assert_eq!(
            convert(SampleFormat::S16Le, &src, SampleFormat::FloatLe, &mut out),
            8
        );
        let a = f32::from_le_bytes(out[..4].try_into().unwrap());
        let b = f32::from_le_bytes(out[4..].try_into().unwrap());
        assert!((a - 32767.0 / 32768.0).abs() < 1e-6 && b == -1.0, "{a} {b}");
        // U8 silence is 0x80; S24 packed to S16 keeps the top bytes.
        assert_eq!(
            convert(SampleFormat::U8, &[0x80], SampleFormat::S16Le, &mut out),
            2
        );
        assert_eq!(&out[..2], &[0, 0]);
        assert_eq!(
            convert(
                SampleFormat::S24_3Le,
                &[0x11, 0x22, 0x33],
                SampleFormat::S16Le,
                &mut out
            ),
            2
        );
        assert_eq!(&out[..2], &[0x22, 0x33]);
    }

    #[test]
    fn converts_only_what_fits() {
        let mut out = [0u8; 6];
        let src = [0u8; 8]; // four S16 samples
        assert_eq!(
            convert(SampleFormat::S16Le, &src, SampleFormat::FloatLe, &mut out),
            4
        );
    }
}
