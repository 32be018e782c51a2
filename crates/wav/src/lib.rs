//! WAV files for xrunbench, through `hound` (the crate our users named):
//! generated test tones ([`tone`]), and the header reader and streaming
//! reader the player and the runner's validation share.
//!
//! Board-safe: the player and `xrun-trial` link it on aarch64 and armv7,
//! so it depends on nothing but hound and the schema's vocabulary.

pub mod tone;

pub use tone::{write_tone, ToneError};
