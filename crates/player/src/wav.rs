//! A streaming reader of PCM WAV files.
//!
//! The header is parsed once; the data chunk is then read in caller-sized
//! chunks straight into a caller-owned buffer, so playback never holds the
//! whole file in the heap and never allocates in the steady state.
//!
//! Accepted: what `hound` reads — WAVE_FORMAT_PCM (8/16/24/32-bit integer),
//! WAVE_FORMAT_IEEE_FLOAT (32-bit) and WAVE_FORMAT_EXTENSIBLE with a PCM or
//! float sub-format, any rate and channel count.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// WAVE_FORMAT_PCM.
const TAG_PCM: u16 = 0x0001;
/// WAVE_FORMAT_IEEE_FLOAT.
const TAG_FLOAT: u16 = 0x0003;
/// WAVE_FORMAT_EXTENSIBLE: the real format is in the sub-format GUID.
const TAG_EXTENSIBLE: u16 = 0xFFFE;

/// Why a file is not a WAV we can play.
#[derive(Debug, thiserror::Error)]
pub enum WavError {
    /// The file could not be opened or read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file's structure is not what a WAV file has.
    #[error("{path}: not a playable WAV file: {what}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        what: String,
    },
}

/// Sample encoding of a WAV file, in ALSA's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleFormat {
    /// Unsigned 8-bit.
    U8,
    /// Signed 16-bit little-endian.
    S16Le,
    /// Signed 24-bit packed in 3 bytes, little-endian.
    S24_3Le,
    /// Signed 32-bit little-endian container; `valid_bits` may be fewer
    /// (a 24-in-32 EXTENSIBLE file is left-justified, so it plays as S32).
    S32Le,
    /// IEEE float 32-bit little-endian.
    FloatLe,
}

impl SampleFormat {
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

/// What the header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavSpec {
    /// Sample encoding.
    pub format: SampleFormat,
    /// Significant bits per sample (≤ container bits).
    pub valid_bits: u16,
    /// Frames per second.
    pub rate: u32,
    /// Samples per frame.
    pub channels: u16,
    /// Byte offset of the first frame.
    pub data_offset: u64,
    /// Frames in the data chunk (whole frames only).
    pub frames: u64,
}

impl WavSpec {
    /// Bytes per frame.
    pub fn frame_bytes(&self) -> usize {
        self.format.bytes() * self.channels as usize
    }
}

/// An open WAV file, positioned by frame, readable in chunks.
#[derive(Debug)]
pub struct WavStream {
    file: File,
    spec: WavSpec,
    /// Next frame to read, within the data chunk.
    pos: u64,
}

impl WavStream {
    /// Opens `path` and parses its header.
    pub fn open(path: &Path) -> Result<WavStream, WavError> {
        let io_err = |source| WavError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        let spec = parse_header(&file, len).map_err(|e| match e {
            HeaderError::Io(source) => io_err(source),
            HeaderError::Malformed(what) => WavError::Malformed {
                path: path.to_path_buf(),
                what,
            },
        })?;
        Ok(WavStream { file, spec, pos: 0 })
    }

    /// The header's facts.
    pub fn spec(&self) -> &WavSpec {
        &self.spec
    }

    /// Next frame to be read (within the data chunk).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Rewinds to the first frame (for `--loops`).
    pub fn rewind(&mut self) {
        self.pos = 0;
    }

    /// Reads up to `buf.len() / frame_bytes` frames into `buf`; returns the
    /// number of whole frames read (0 at the end of the data).
    pub fn read_frames(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fb = self.spec.frame_bytes();
        let want = (buf.len() / fb) as u64;
        let frames = want.min(self.spec.frames - self.pos) as usize;
        let bytes = frames * fb;
        let offset = self.spec.data_offset + self.pos * fb as u64;
        self.file.read_exact_at(&mut buf[..bytes], offset)?;
        self.pos += frames as u64;
        Ok(frames)
    }
}

enum HeaderError {
    Io(io::Error),
    Malformed(String),
}

impl From<io::Error> for HeaderError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            HeaderError::Malformed("header is truncated (file ends inside it)".into())
        } else {
            HeaderError::Io(e)
        }
    }
}

fn malformed<T>(what: impl Into<String>) -> Result<T, HeaderError> {
    Err(HeaderError::Malformed(what.into()))
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The fmt chunk's fields that matter.
struct Fmt {
    tag: u16,
    channels: u16,
    rate: u32,
    block_align: u16,
    bits: u16,
    valid_bits: u16,
}

fn parse_header(file: &File, file_len: u64) -> Result<WavSpec, HeaderError> {
    let mut reader = io::BufReader::with_capacity(512, file);
    let mut riff = [0u8; 12];
    reader.read_exact(&mut riff)?;
    if &riff[0..4] != b"RIFF" {
        return malformed(format!(
            "expected \"RIFF\" at byte 0, found {:?}",
            String::from_utf8_lossy(&riff[0..4])
        ));
    }
    if &riff[8..12] != b"WAVE" {
        return malformed(format!(
            "expected \"WAVE\" at byte 8, found {:?}",
            String::from_utf8_lossy(&riff[8..12])
        ));
    }
    let mut offset = 12u64;
    let mut fmt: Option<Fmt> = None;
    loop {
        let mut head = [0u8; 8];
        if let Err(e) = reader.read_exact(&mut head) {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                return malformed(if fmt.is_none() {
                    "no \"fmt \" chunk before the end of the file"
                } else {
                    "no \"data\" chunk before the end of the file"
                });
            }
            return Err(e.into());
        }
        let id = [head[0], head[1], head[2], head[3]];
        let size = u32_at(&head, 4) as u64;
        offset += 8;
        match &id {
            b"fmt " => {
                if size < 16 {
                    return malformed(format!(
                        "\"fmt \" chunk of {size} bytes, expected at least 16"
                    ));
                }
                let mut body = vec![0u8; size as usize];
                reader.read_exact(&mut body)?;
                fmt = Some(parse_fmt(&body)?);
                if size % 2 == 1 {
                    reader.read_exact(&mut [0u8; 1])?;
                }
            }
            b"data" => {
                let Some(fmt) = fmt else {
                    return malformed("\"data\" chunk before the \"fmt \" chunk");
                };
                return spec_from(fmt, offset, size, file_len);
            }
            _ => {
                // Skip LIST, fact, cue … (chunks are padded to even sizes).
                let skip = size + (size & 1);
                io::copy(&mut (&mut reader).take(skip), &mut io::sink())?;
            }
        }
        offset += size + (size & 1);
    }
}

fn parse_fmt(b: &[u8]) -> Result<Fmt, HeaderError> {
    let mut f = Fmt {
        tag: u16_at(b, 0),
        channels: u16_at(b, 2),
        rate: u32_at(b, 4),
        block_align: u16_at(b, 12),
        bits: u16_at(b, 14),
        valid_bits: u16_at(b, 14),
    };
    if f.tag == TAG_EXTENSIBLE {
        if b.len() < 40 {
            return malformed(format!(
                "WAVE_FORMAT_EXTENSIBLE \"fmt \" chunk of {} bytes, expected 40",
                b.len()
            ));
        }
        f.valid_bits = u16_at(b, 18);
        // The sub-format GUID's first two bytes are the real format tag;
        // the rest is the fixed KSDATAFORMAT suffix.
        f.tag = u16_at(b, 24);
        const GUID_SUFFIX: [u8; 14] = [
            0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
        ];
        if b[26..40] != GUID_SUFFIX {
            return malformed("WAVE_FORMAT_EXTENSIBLE with an unknown sub-format GUID");
        }
    }
    Ok(f)
}

fn spec_from(
    f: Fmt,
    data_offset: u64,
    data_len: u64,
    file_len: u64,
) -> Result<WavSpec, HeaderError> {
    let format = match (f.tag, f.bits) {
        (TAG_PCM, 8) => SampleFormat::U8,
        (TAG_PCM, 16) => SampleFormat::S16Le,
        (TAG_PCM, 24) => SampleFormat::S24_3Le,
        (TAG_PCM, 32) => SampleFormat::S32Le,
        (TAG_FLOAT, 32) => SampleFormat::FloatLe,
        (TAG_PCM, b) => {
            return malformed(format!("{b}-bit integer samples, expected 8, 16, 24 or 32"))
        }
        (TAG_FLOAT, b) => return malformed(format!("{b}-bit float samples, expected 32")),
        (tag, _) => {
            return malformed(format!(
            "compressed or unknown format tag 0x{tag:04X} ({}), expected PCM (1) or IEEE float (3)",
            tag_name(tag)
        ))
        }
    };
    if f.channels == 0 {
        return malformed("0 channels, expected at least 1");
    }
    if f.rate == 0 {
        return malformed("sample rate 0 Hz, expected a positive rate");
    }
    if f.valid_bits == 0 || f.valid_bits > f.bits {
        return malformed(format!(
            "{} valid bits in a {}-bit container, expected 1..={}",
            f.valid_bits, f.bits, f.bits
        ));
    }
    let frame_bytes = format.bytes() as u64 * f.channels as u64;
    if f.block_align as u64 != frame_bytes {
        return malformed(format!(
            "block align {} bytes, expected {frame_bytes} ({} channels × {} bytes)",
            f.block_align,
            f.channels,
            format.bytes()
        ));
    }
    // Streaming writers leave 0 or 0xFFFFFFFF in the size: play what is there.
    let available = file_len.saturating_sub(data_offset);
    let data_len = if data_len == 0 || data_len == u32::MAX as u64 {
        available
    } else {
        data_len.min(available)
    };
    Ok(WavSpec {
        format,
        valid_bits: f.valid_bits,
        rate: f.rate,
        channels: f.channels,
        data_offset,
        frames: data_len / frame_bytes,
    })
}

fn tag_name(tag: u16) -> &'static str {
    match tag {
        0x0002 => "MS ADPCM",
        0x0006 => "A-law",
        0x0007 => "µ-law",
        0x0011 => "IMA ADPCM",
        0x0055 => "MPEG layer 3",
        _ => "not supported",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn header(tag: u16, channels: u16, rate: u32, bits: u16, data: &[u8]) -> Vec<u8> {
        let block = channels * bits.div_ceil(8);
        let mut v = Vec::new();
        v.extend_from_slice(b"RIFF");
        v.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
        v.extend_from_slice(b"WAVEfmt ");
        v.extend_from_slice(&16u32.to_le_bytes());
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&channels.to_le_bytes());
        v.extend_from_slice(&rate.to_le_bytes());
        v.extend_from_slice(&(rate * block as u32).to_le_bytes());
        v.extend_from_slice(&block.to_le_bytes());
        v.extend_from_slice(&bits.to_le_bytes());
        v.extend_from_slice(b"data");
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(data);
        v
    }

    fn open_bytes(bytes: &[u8]) -> Result<WavStream, WavError> {
        let path = std::env::temp_dir().join(format!(
            "xrun-wav-test-{}-{:p}.wav",
            std::process::id(),
            bytes
        ));
        File::create(&path).unwrap().write_all(bytes).unwrap();
        let r = WavStream::open(&path);
        std::fs::remove_file(&path).unwrap();
        r
    }

    #[test]
    fn reads_pcm16_stereo_in_chunks() {
        let data: Vec<u8> = (0u8..40).collect();
        let mut s = open_bytes(&header(1, 2, 8000, 16, &data)).unwrap();
        assert_eq!(s.spec().format, SampleFormat::S16Le);
        assert_eq!(s.spec().frames, 10);
        let mut buf = [0u8; 16];
        assert_eq!(s.read_frames(&mut buf).unwrap(), 4);
        assert_eq!(&buf, &data[..16]);
        assert_eq!(s.read_frames(&mut buf).unwrap(), 4);
        assert_eq!(s.read_frames(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..8], &data[32..40]);
        assert_eq!(s.read_frames(&mut buf).unwrap(), 0);
        s.rewind();
        assert_eq!(s.read_frames(&mut buf).unwrap(), 4);
    }

    #[test]
    fn rejects_compressed_and_zero_channels() {
        let e = open_bytes(&header(0x55, 2, 8000, 16, &[0; 8])).unwrap_err();
        assert!(
            e.to_string().contains("format tag 0x0055 (MPEG layer 3)"),
            "{e}"
        );
        let e = open_bytes(&header(1, 0, 8000, 16, &[0; 8])).unwrap_err();
        assert!(e.to_string().contains("0 channels"), "{e}");
    }

    #[test]
    fn rejects_truncated_header_and_non_wav() {
        let full = header(1, 2, 8000, 16, &[0; 8]);
        let e = open_bytes(&full[..30]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let e = open_bytes(b"ID3\x04 not a wav file at all").unwrap_err();
        assert!(e.to_string().contains("expected \"RIFF\""), "{e}");
    }

    #[test]
    fn odd_trailing_bytes_are_not_a_frame() {
        let mut s = open_bytes(&header(1, 2, 8000, 16, &[0; 9])).unwrap();
        assert_eq!(s.spec().frames, 2);
        let mut buf = [0u8; 64];
        assert_eq!(s.read_frames(&mut buf).unwrap(), 2);
    }
}
