//! Whether libasound and this build agree on the size of `struct timespec`.
//!
//! The `alsa` crate (0.11) reads PCM timestamps by passing a
//! `libc::timespec` on its own stack to alsa-lib's
//! `snd_pcm_status_get_trigger_htstamp` (and `get_htstamp`,
//! `get_audio_htstamp`), through alsa-sys 0.4's pre-generated bindings,
//! where `snd_htimestamp_t` is `libc::timespec`; nothing checks that alsa-lib
//! was built with the same `time_t`. alsa-lib copies its own `struct
//! timespec` there.
//!
//! - 64-bit targets (x86_64, aarch64): 16 bytes on both sides.
//! - armv7 with Debian 12's libasound2 (alsa-lib 1.2.8, 32-bit `time_t`):
//!   8 bytes on both sides, as Rust's libc has a 32-bit `time_t` on
//!   `armv7-unknown-linux-gnueabihf` by default. Safe.
//! - armv7 with a 64-bit-`time_t` alsa-lib (Debian 13's libasound2t64,
//!   musl ≥ 1.2) and the default Rust libc: alsa-lib writes 16 bytes into
//!   an 8-byte variable, past its end (and with `--cfg
//!   libc_unstable_gnu_time_bits="64"` against a 32-bit alsa-lib, half of
//!   a 16-byte one: wrong values).
//!
//! So the size alsa-lib uses is measured once, without handing it a Rust
//! `timespec`; where it differs, the player reads no kernel timestamps
//! (its own clock times the underruns) and refuses cpal's ALSA host, which
//! reads them inside cpal at every callback.

use std::sync::OnceLock;

/// Bytes of alsa-lib's `struct timespec` in the libasound this process
/// loaded (0 if it could not be measured).
pub fn libasound_timespec_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(measure)
}

/// Bytes of this build's `libc::timespec`.
pub fn our_timespec_bytes() -> usize {
    std::mem::size_of::<libc::timespec>()
}

/// Whether the `alsa` crate's timestamp getters are safe to call here.
pub fn timestamps_are_safe() -> bool {
    libasound_timespec_bytes() == our_timespec_bytes()
}

/// Why they are not, for a note or an error.
pub fn mismatch() -> String {
    format!(
        "libasound's struct timespec is {} bytes and this build's {} (a 32-bit time_t on one \
         side, 64-bit on the other): its timestamps would be written past their variables",
        libasound_timespec_bytes(),
        our_timespec_bytes()
    )
}

/// Copies the trigger stamp of a zeroed status into a buffer larger than
/// any timespec filled with a marker byte: the bytes alsa-lib overwrote
/// are the size of its own (rounded up to the 8-byte alignment a timespec
/// has, should it skip copying the padding).
fn measure() -> usize {
    const MARK: u8 = 0xA5;
    // 32 bytes, aligned for any timespec (every Linux ABI's is ≤ 16).
    let mut buf = [u64::from_ne_bytes([MARK; 8]); 4];
    let mut status: *mut alsa_sys::snd_pcm_status_t = std::ptr::null_mut();
    // SAFETY: the status is allocated (zeroed) by alsa-lib and freed by it;
    // the getter writes one C timespec into `buf`, which is larger.
    unsafe {
        if alsa_sys::snd_pcm_status_malloc(&mut status) < 0 || status.is_null() {
            return 0;
        }
        alsa_sys::snd_pcm_status_get_trigger_htstamp(status, buf.as_mut_ptr().cast());
        alsa_sys::snd_pcm_status_free(status);
    }
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let written = bytes.iter().rposition(|&b| b != MARK).map_or(0, |i| i + 1);
    written.div_ceil(8) * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libasound_timespec_is_measured() {
        let n = libasound_timespec_bytes();
        assert!(n == 8 || n == 16, "{n}");
        // Every 64-bit target has a 64-bit time_t on both sides.
        if cfg!(target_pointer_width = "64") {
            assert_eq!(n, 16);
            assert!(timestamps_are_safe());
        }
    }
}
