//! WAV files for xrunbench: generated test tones written with `hound` (the
//! crate our users named), and the one header and streaming reader that
//! the player plays from and the runner's validation checks with ([`read`]
//! says why hound does not read those headers).
//!
//! Board-safe: the player and `xrun-trial` link it on aarch64 and armv7,
//! so it depends on nothing but hound and the schema's vocabulary.

pub mod read;
pub mod tone;

pub use read::{canonical_wav, WavError, WavSpec, WavStream};
pub use tone::{write_tone, ToneError};
