//! Reading WAV files: the header once, then the data chunk in caller-sized
//! chunks with `pread` from the data offset, straight into a caller-owned
//! buffer, so playback never holds the whole file in the heap and never
//! allocates in the steady state.
//!
//! Accepted: WAVE_FORMAT_PCM (8/16/24/32-bit integer), WAVE_FORMAT_IEEE_FLOAT
//! (32-bit) and WAVE_FORMAT_EXTENSIBLE with a PCM or float sub-format, any
//! rate and channel count: what `hound` reads. A data chunk whose size is
//! 0 or 0xFFFFFFFF (streaming writers leave those) plays to the end of the
//! file; trailing bytes that are not a whole frame are not played.
//!
//! # Why the header is not read by hound
//!
//! hound writes our tones and is the reference these tests compare against
//! (`agrees_with_hound_on_every_format`), but its public reading API
//! (`WavReader::new`, `spec`, `len`, `into_inner`; the chunk walker
//! `read_until_data` and `WavSpecEx` are private to it in 3.5) cannot give
//! the player what it needs, and each gap is pinned by
//! `the_reasons_hound_does_not_read_our_headers`:
//!
//! - **the container size**: `WavSpec::bits_per_sample` is the *valid* bits,
//!   and neither the block align nor bytes per sample is exposed, so a
//!   24-bit file packed in 3 bytes (S24_3LE) and one in 4-byte containers
//!   (played as S32_LE) look the same; the player must know which to stream
//!   the bytes untouched;
//! - **the block align**: hound derives bytes per sample as block align /
//!   channels, rounding down, so a block align that does not match the
//!   channels is accepted and the data misread; we refuse it;
//! - **lenient data sizes**: `WavReader::new` refuses a data chunk that is
//!   not a whole number of samples — the 0xFFFFFFFF "unknown size" that
//!   streaming writers leave, or a file cut mid-frame — which aplay and
//!   the player play;
//! - **what is wrong**: an unsupported format is `Error::Unsupported`
//!   without the format tag, and a file cut inside its header is an
//!   `io::ErrorKind::Other` "Failed to read enough bytes."; the player's
//!   one-line errors name the tag (`0x0011 (IMA ADPCM)`) and say the header
//!   is truncated.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use xrunbench_schema::SampleFormat;

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
    /// Not a regular file (a FIFO, a device, a directory): refused before
    /// anything is read from it.
    #[error("{path}: not a regular file ({what}): expected a WAV file")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead ("a FIFO").
        what: &'static str,
    },
    /// The file's structure is not what a playable WAV file has.
    #[error("{path}: not a playable WAV file: {what}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        what: String,
    },
}

/// What the header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavSpec {
    /// Sample encoding. A 24-in-32 EXTENSIBLE file is left-justified in its
    /// container, so it plays as S32_LE with `valid_bits` 24.
    pub format: SampleFormat,
    /// Significant bits per sample (≤ container bits).
    pub valid_bits: u16,
    /// Frames per second.
    pub rate: u32,
    /// Samples per frame.
    pub channels: u16,
    /// Byte offset of the first frame.
    pub data_offset: u64,
    /// Whole frames in the data chunk (at least one).
    pub frames: u64,
}

impl WavSpec {
    /// Parses a header from memory: `bytes` are the file's first bytes and
    /// `file_len` its whole length (what [`WavStream::open`] reads from the
    /// file; here for the fuzz targets and the regression tests of what
    /// they found). The error is the text [`WavError::Malformed`] carries.
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<WavSpec, String> {
        parse_header(bytes, file_len).map_err(|e| match e {
            HeaderError::Io(e) => e.to_string(),
            HeaderError::Malformed(what) => what,
        })
    }

    /// Bytes per frame.
    pub fn frame_bytes(&self) -> usize {
        self.format.bytes() * usize::from(self.channels)
    }

    /// Playing time of one pass through the file, seconds.
    pub fn seconds(&self) -> f64 {
        self.frames as f64 / f64::from(self.rate)
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
    /// Opens `path` and parses its header; a file without a single whole
    /// frame of audio is refused like a malformed one.
    pub fn open(path: &Path) -> Result<WavStream, WavError> {
        let io_err = |source| WavError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = open_regular(path).map_err(|e| match e {
            OpenError::Io(source) => io_err(source),
            OpenError::NotRegular(what) => WavError::NotRegular {
                path: path.to_path_buf(),
                what,
            },
        })?;
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

    /// Rewinds to the first frame (to play the file again).
    pub fn rewind(&mut self) {
        self.pos = 0;
    }

    /// Reads up to `buf.len() / frame_bytes` frames into `buf`; returns the
    /// number of whole frames read (0 at the end of the data).
    pub fn read_frames(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fb = self.spec.frame_bytes();
        let want = (buf.len() / fb) as u64;
        // At most `want`, which came from a usize: the cast cannot truncate.
        let frames = want.min(self.spec.frames - self.pos) as usize;
        let bytes = frames * fb;
        let offset = self.spec.data_offset + self.pos * fb as u64;
        self.file.read_exact_at(&mut buf[..bytes], offset)?;
        self.pos += frames as u64;
        Ok(frames)
    }
}

enum OpenError {
    Io(io::Error),
    /// What it is instead ("a FIFO").
    NotRegular(&'static str),
}

/// Opens `path` for reading if it is a regular file. Non-blocking, so that
/// a FIFO is refused at once instead of waiting (no signal ends the wait of
/// a blocking open) for a writer; the flag changes nothing for a regular
/// file, and the type is checked on the open file, not on a name that may
/// change in between.
fn open_regular(path: &Path) -> Result<File, OpenError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(OpenError::Io)?;
    let t = file.metadata().map_err(OpenError::Io)?.file_type();
    if t.is_file() {
        return Ok(file);
    }
    Err(OpenError::NotRegular(kind_of(t)))
}

/// What a file that is not a regular file is, for a message: `a FIFO`,
pub use xrunbench_schema::bounded::kind_of;

/// The highest sample rate ALSA names (`SNDRV_PCM_RATE_768000`): no PCM
/// plays faster, and a rate beyond it is a corrupt or hostile header.
pub const MAX_RATE: u32 = 768_000;

/// The most channels a frame may have here: more than any ALSA device
/// offers (MADI cards: 64), and it keeps a frame within 1 KiB.
pub const MAX_CHANNELS: u16 = 256;

/// A whole WAV file in the canonical layout: "RIFF", a 16-byte "fmt "
/// chunk with these fields (its byte rate and block align derived from
/// them, as a writer derives them) and a "data" chunk holding `data`. Each
/// field is written as given, playable or not: the header tests make the
/// files they feed the reader with it.
pub fn canonical_wav(tag: u16, channels: u16, rate: u32, bits: u16, data: &[u8]) -> Vec<u8> {
    let block = channels.wrapping_mul(bits.div_ceil(8));
    let data_len = data.len() as u32;
    let mut v = Vec::with_capacity(44 + data.len());
    v.extend_from_slice(b"RIFF");
    v.extend_from_slice(&data_len.wrapping_add(36).to_le_bytes());
    v.extend_from_slice(b"WAVEfmt ");
    v.extend_from_slice(&16u32.to_le_bytes());
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(&channels.to_le_bytes());
    v.extend_from_slice(&rate.to_le_bytes());
    v.extend_from_slice(&rate.wrapping_mul(u32::from(block)).to_le_bytes());
    v.extend_from_slice(&block.to_le_bytes());
    v.extend_from_slice(&bits.to_le_bytes());
    v.extend_from_slice(b"data");
    v.extend_from_slice(&data_len.to_le_bytes());
    v.extend_from_slice(data);
    v
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

/// The longest "fmt " chunk we read (WAVE_FORMAT_EXTENSIBLE is 40 bytes;
/// anything beyond a few hundred is not a format description).
const MAX_FMT_BYTES: u64 = 1024;

fn parse_header(file: impl Read, file_len: u64) -> Result<WavSpec, HeaderError> {
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
        let size = u64::from(u32_at(&head, 4));
        offset += 8;
        match &id {
            b"fmt " => {
                if !(16..=MAX_FMT_BYTES).contains(&size) {
                    return malformed(format!(
                        "\"fmt \" chunk of {size} bytes, expected 16..={MAX_FMT_BYTES}"
                    ));
                }
                // Bounded above: the cast cannot truncate.
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

fn sample_format(f: &Fmt) -> Result<SampleFormat, HeaderError> {
    match (f.tag, f.bits) {
        (TAG_PCM, 8) => Ok(SampleFormat::U8),
        (TAG_PCM, 16) => Ok(SampleFormat::S16Le),
        (TAG_PCM, 24) => Ok(SampleFormat::S24_3Le),
        (TAG_PCM, 32) => Ok(SampleFormat::S32Le),
        (TAG_FLOAT, 32) => Ok(SampleFormat::FloatLe),
        (TAG_PCM, b) => malformed(format!("{b}-bit integer samples, expected 8, 16, 24 or 32")),
        (TAG_FLOAT, b) => malformed(format!("{b}-bit float samples, expected 32")),
        (tag, _) => malformed(format!(
            "compressed or unknown format tag 0x{tag:04X} ({}), expected PCM (1) or IEEE float (3)",
            tag_name(tag)
        )),
    }
}

fn spec_from(
    f: Fmt,
    data_offset: u64,
    data_len: u64,
    file_len: u64,
) -> Result<WavSpec, HeaderError> {
    let format = sample_format(&f)?;
    if f.channels == 0 {
        return malformed("0 channels, expected at least 1");
    }
    if f.channels > MAX_CHANNELS {
        return malformed(format!(
            "{} channels, expected 1..={MAX_CHANNELS}",
            f.channels
        ));
    }
    if f.rate == 0 {
        return malformed("sample rate 0 Hz, expected a positive rate");
    }
    if f.rate > MAX_RATE {
        return malformed(format!(
            "sample rate {} Hz, expected 1..={MAX_RATE} (the highest rate ALSA names)",
            f.rate
        ));
    }
    if f.valid_bits == 0 || f.valid_bits > f.bits {
        return malformed(format!(
            "{} valid bits in a {}-bit container, expected 1..={}",
            f.valid_bits, f.bits, f.bits
        ));
    }
    let frame_bytes = format.bytes() as u64 * u64::from(f.channels);
    if u64::from(f.block_align) != frame_bytes {
        return malformed(format!(
            "block align {} bytes, expected {frame_bytes} ({} channels × {} bytes)",
            f.block_align,
            f.channels,
            format.bytes()
        ));
    }
    // Streaming writers leave 0 or 0xFFFFFFFF in the size: play what is there.
    let available = file_len.saturating_sub(data_offset);
    let data_len = if data_len == 0 || data_len == u64::from(u32::MAX) {
        available
    } else {
        data_len.min(available)
    };
    let frames = data_len / frame_bytes;
    if frames == 0 {
        return malformed("the data chunk holds no audio frames");
    }
    Ok(WavSpec {
        format,
        valid_bits: f.valid_bits,
        rate: f.rate,
        channels: f.channels,
        data_offset,
        frames,
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

    #[test]
    fn a_canonical_wav_is_a_44_byte_header_the_reader_reads_back() {
        let bytes = canonical_wav(TAG_PCM, 2, 8000, 16, &[0; 8]);
        assert_eq!(bytes.len(), 44 + 8);
        assert_eq!(u32_at(&bytes, 4), 44, "RIFF size");
        assert_eq!(u32_at(&bytes, 28), 8000 * 4, "byte rate");
        assert_eq!(u16_at(&bytes, 32), 4, "block align");
        assert_eq!(u32_at(&bytes, 40), 8, "data size");
        let spec = WavSpec::parse(&bytes, bytes.len() as u64).unwrap();
        assert_eq!(
            spec,
            WavSpec {
                format: SampleFormat::S16Le,
                valid_bits: 16,
                rate: 8000,
                channels: 2,
                data_offset: 44,
                frames: 2,
            }
        );
    }

    /// An EXTENSIBLE header: `valid` bits in `bits`-bit containers.
    fn extensible(sub_tag: u16, channels: u16, bits: u16, valid: u16, data: &[u8]) -> Vec<u8> {
        let block = channels * bits / 8;
        let rate = 48_000u32;
        let mut v = Vec::new();
        v.extend_from_slice(b"RIFF");
        v.extend_from_slice(&(60 + data.len() as u32).to_le_bytes());
        v.extend_from_slice(b"WAVEfmt ");
        v.extend_from_slice(&40u32.to_le_bytes());
        v.extend_from_slice(&TAG_EXTENSIBLE.to_le_bytes());
        v.extend_from_slice(&channels.to_le_bytes());
        v.extend_from_slice(&rate.to_le_bytes());
        v.extend_from_slice(&(rate * u32::from(block)).to_le_bytes());
        v.extend_from_slice(&block.to_le_bytes());
        v.extend_from_slice(&bits.to_le_bytes());
        v.extend_from_slice(&22u16.to_le_bytes());
        v.extend_from_slice(&valid.to_le_bytes());
        v.extend_from_slice(&3u32.to_le_bytes()); // channel mask
        v.extend_from_slice(&sub_tag.to_le_bytes());
        v.extend_from_slice(&[
            0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
        ]);
        v.extend_from_slice(b"data");
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(data);
        v
    }

    /// A file with these bytes, removed when dropped.
    struct Temp(PathBuf);

    impl Temp {
        fn new(bytes: &[u8]) -> Temp {
            use std::sync::atomic::{AtomicU32, Ordering};
            static SEQ: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "xrunbench-wav-read-{}-{}.wav",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            File::create(&path).unwrap().write_all(bytes).unwrap();
            Temp(path)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn open_bytes(bytes: &[u8]) -> Result<WavStream, WavError> {
        WavStream::open(&Temp::new(bytes).0)
    }

    #[test]
    fn reads_pcm16_stereo_in_chunks() {
        let data: Vec<u8> = (0u8..40).collect();
        let mut s = open_bytes(&canonical_wav(1, 2, 8000, 16, &data)).unwrap();
        assert_eq!(s.spec().format, SampleFormat::S16Le);
        assert_eq!(s.spec().frames, 10);
        assert_eq!(s.spec().data_offset, 44);
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
        let e = open_bytes(&canonical_wav(0x55, 2, 8000, 16, &[0; 8])).unwrap_err();
        assert!(
            e.to_string().contains("format tag 0x0055 (MPEG layer 3)"),
            "{e}"
        );
        let e = open_bytes(&canonical_wav(1, 0, 8000, 16, &[0; 8])).unwrap_err();
        assert!(e.to_string().contains("0 channels"), "{e}");
    }

    #[test]
    fn rejects_truncated_header_and_non_wav() {
        let full = canonical_wav(1, 2, 8000, 16, &[0; 8]);
        let e = open_bytes(&full[..30]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let e = open_bytes(b"ID3\x04 not a wav file at all").unwrap_err();
        assert!(e.to_string().contains("expected \"RIFF\""), "{e}");
    }

    #[test]
    fn header_fields_beyond_what_a_pcm_plays_are_refused_naming_the_limit() {
        // `header` computes the byte rate as rate × block, which overflows
        // for these rates: the reader never looks at it.
        let mut bytes = canonical_wav(1, 1, 8000, 16, &[0; 8]);
        for (rate, shown) in [(u32::MAX, "4294967295"), (1_000_000_000, "1000000000")] {
            bytes[24..28].copy_from_slice(&rate.to_le_bytes());
            let e = open_bytes(&bytes).unwrap_err().to_string();
            assert!(
                e.contains(&format!("sample rate {shown} Hz, expected 1..={MAX_RATE}")),
                "{e}"
            );
        }
        bytes[24..28].copy_from_slice(&MAX_RATE.to_le_bytes());
        assert_eq!(open_bytes(&bytes).unwrap().spec().rate, MAX_RATE);
        let wide = canonical_wav(1, MAX_CHANNELS + 1, 8000, 8, &[0; 600]);
        let e = open_bytes(&wide).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "{} channels, expected 1..={MAX_CHANNELS}",
                MAX_CHANNELS + 1
            )),
            "{e}"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = std::env::temp_dir().join(format!("xrunbench-wav-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("f.wav");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = WavStream::open(&fifo).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("f.wav: not a regular file (a FIFO)"), "{e}");
        let e = WavStream::open(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file (a character device)"), "{e}");
    }

    #[test]
    fn odd_trailing_bytes_are_not_a_frame() {
        let mut s = open_bytes(&canonical_wav(1, 2, 8000, 16, &[0; 9])).unwrap();
        assert_eq!(s.spec().frames, 2);
        let mut buf = [0u8; 64];
        assert_eq!(s.read_frames(&mut buf).unwrap(), 2);
    }

    #[test]
    fn an_empty_data_chunk_is_refused_naming_the_file() {
        let f = Temp::new(&canonical_wav(1, 2, 8000, 16, &[]));
        let e = WavStream::open(&f.0).unwrap_err().to_string();
        assert!(e.contains("no audio frames"), "{e}");
        assert!(e.contains(&f.0.display().to_string()), "{e}");
    }

    #[test]
    fn streaming_sizes_play_to_the_end_of_the_file() {
        let mut bytes = canonical_wav(1, 1, 8000, 16, &[0; 20]);
        let size_at = bytes.len() - 24;
        bytes[size_at..size_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(open_bytes(&bytes).unwrap().spec().frames, 10);
        bytes[size_at..size_at + 4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(open_bytes(&bytes).unwrap().spec().frames, 10);
    }

    #[test]
    fn extensible_24_in_32_plays_as_s32_and_a_bad_block_align_is_refused() {
        let s = open_bytes(&extensible(TAG_PCM, 2, 32, 24, &[0; 16])).unwrap();
        assert_eq!(
            (s.spec().format, s.spec().valid_bits, s.spec().frames),
            (SampleFormat::S32Le, 24, 2)
        );
        let e = open_bytes(&extensible(0x0011, 2, 16, 16, &[0; 16])).unwrap_err();
        assert!(e.to_string().contains("0x0011 (IMA ADPCM)"), "{e}");
        // 24-bit PCM in 4-byte blocks without EXTENSIBLE: ambiguous, refused.
        let mut bytes = canonical_wav(1, 2, 8000, 24, &[0; 16]);
        bytes[32..34].copy_from_slice(&8u16.to_le_bytes());
        let e = open_bytes(&bytes).unwrap_err();
        assert!(
            e.to_string().contains("block align 8 bytes, expected 6"),
            "{e}"
        );
    }

    /// hound writes every format the player plays; our reader must read the
    /// same layout, length and samples from each.
    #[test]
    fn agrees_with_hound_on_every_format() {
        for format in SampleFormat::ALL {
            let f = Temp::new(&[]);
            let tone = xrunbench_schema::trial::ToneSpec {
                format,
                channels: 3,
                rate: 8_000,
                seconds: Some(0.25),
                ..Default::default()
            };
            crate::write_tone(&f.0, &tone, 1.0).unwrap();
            let mut ours = WavStream::open(&f.0).unwrap();
            let theirs = hound::WavReader::open(&f.0).unwrap();
            let hs = theirs.spec();
            let spec = ours.spec().clone();
            assert_eq!(spec.format, format);
            assert_eq!(
                (spec.rate, spec.channels, spec.valid_bits, spec.frames),
                (
                    hs.sample_rate,
                    hs.channels,
                    hs.bits_per_sample,
                    u64::from(theirs.duration())
                ),
                "{format}"
            );
            let mut bytes = vec![0u8; spec.frames as usize * spec.frame_bytes()];
            assert_eq!(ours.read_frames(&mut bytes).unwrap() as u64, spec.frames);
            let decoded: Vec<f64> = bytes
                .chunks(format.bytes())
                .map(|b| decode(format, b))
                .collect();
            let reference: Vec<f64> = match hs.sample_format {
                hound::SampleFormat::Float => theirs
                    .into_samples::<f32>()
                    .map(|s| f64::from(s.unwrap()))
                    .collect(),
                hound::SampleFormat::Int => theirs
                    .into_samples::<i32>()
                    .map(|s| f64::from(s.unwrap()))
                    .collect(),
            };
            assert_eq!(decoded, reference, "{format}");
        }
    }

    /// A sample as hound decodes it (integers unscaled, U8 as signed).
    fn decode(format: SampleFormat, b: &[u8]) -> f64 {
        match format {
            SampleFormat::U8 => f64::from(i16::from(b[0]) - 128),
            SampleFormat::S16Le => f64::from(i16::from_le_bytes([b[0], b[1]])),
            SampleFormat::S24_3Le => f64::from(i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8),
            SampleFormat::S32Le => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            SampleFormat::FloatLe => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        }
    }

    /// The module documentation says why hound does not read our headers;
    /// if a hound release closes these gaps, this fails and says to switch.
    #[test]
    fn the_reasons_hound_does_not_read_our_headers() {
        let why = "hound's reader changed: see whether it can read our headers now";
        // Trailing bytes that are not a whole sample: refused.
        let f = Temp::new(&canonical_wav(1, 2, 8000, 16, &[0; 9]));
        assert!(hound::WavReader::open(&f.0).is_err(), "{why}");
        // The unknown-size marker streaming writers leave: refused.
        let mut bytes = canonical_wav(1, 2, 8000, 16, &[0; 20]);
        let size_at = bytes.len() - 24;
        bytes[size_at..size_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let f = Temp::new(&bytes);
        assert!(hound::WavReader::open(&f.0).is_err(), "{why}");
        // An unsupported format does not say which.
        let f = Temp::new(&canonical_wav(0x0011, 2, 8000, 16, &[0; 8]));
        assert!(
            matches!(hound::WavReader::open(&f.0), Err(hound::Error::Unsupported)),
            "{why}"
        );
        // 24 valid bits: the spec does not say whether in 3 or 4 bytes.
        let packed = Temp::new(&canonical_wav(1, 2, 8000, 24, &[0; 12]));
        let wide = Temp::new(&extensible(TAG_PCM, 2, 32, 24, &[0; 16]));
        let bits = |p: &Path| {
            let s = hound::WavReader::open(p).unwrap().spec();
            (s.bits_per_sample, s.sample_format, s.channels)
        };
        assert_eq!(bits(&packed.0), bits(&wide.0), "{why}");
        // A block align that does not match the channels is accepted.
        let mut bytes = canonical_wav(1, 2, 8000, 16, &[0; 12]);
        bytes[32..34].copy_from_slice(&5u16.to_le_bytes());
        bytes[28..32].copy_from_slice(&(5u32 * 8000).to_le_bytes());
        let f = Temp::new(&bytes);
        assert!(hound::WavReader::open(&f.0).is_ok(), "{why}");
        assert!(WavStream::open(&f.0).is_err());
    }
}
