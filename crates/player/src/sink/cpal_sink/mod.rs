//! The `cpal` sink: playback through one of cpal's hosts (ALSA always;
//! JACK, PulseAudio and PipeWire behind the `cpal-*` cargo features).
//!
//! cpal pulls audio from a real-time data callback; the player pushes. A
//! lock-free byte ring ([`crate::ring`]) sits between them: `write`
//! converts the file's samples to the device's format and pushes them
//! (blocking while the ring is full), the callback pops. The callback never
//! allocates, locks (but see `callback::Feeder::stats`) or touches a file.
//!
//! Underruns come from two sources, both reported, each event naming the
//! one that saw it:
//!
//! - **callback gap**, on every host: at each callback,
//!   `gap = callback instant − (previous playback instant + previous
//!   frames / rate)`, the time the device had already run dry when it asked
//!   for more. Above `callback::GAP_THRESHOLD_NS` (steady-state noise is < 1 ms on
//!   ALSA and JACK, about 7 ms on PulseAudio) it is an underrun, measured on
//!   cpal's stream clock (`ClockSource::Cpal`). Its start is put on
//!   CLOCK_MONOTONIC by the callback that saw it (`at_s` counts from the
//!   first callback there, the report's `started_mono_ns`), so a scheduler
//!   trace can account for it like any other underrun.
//! - **cpal's `ErrorKind::Xrun`** from the error callback (ALSA and JACK
//!   hosts). It carries no time; the next callback attaches it to the gap
//!   it measured (`also_seen_by`), or reports it alone with the gap it saw.
//!
//! When the ring runs empty while playing, the callback plays silence and
//! that is a third kind of event, `EventSource::ReaderBehind`: the
//! player's reader fell behind, not the device.
//!
//! Near misses are measured in the callback: the audio still queued in the
//! device (playback instant − callback instant) and the callback's
//! lateness against the instant it was due (previous callback instant +
//! previous frames / rate).
//!
//! One concern per file: [`host`] picks the host and the device (and lists
//! them), [`config`] negotiates the sample format and the callback size,
//! [`callback`] is the data callback with what it shares with the writer
//! and its thread's scheduling, [`events`] turns what the callbacks saw
//! into the report's events and host errors, [`threads`] gives the
//! host's own threads the callback waits for its scheduling, and
//! [`writer`] is the [`Sink`](super::Sink) the playback loop drives.

mod callback;
mod config;
mod events;
mod host;
mod threads;
mod writer;

use xrunbench_schema::{CpalHost, CpuList, Priority};

use crate::play::StallSpec;

pub use host::list_devices;
pub use writer::CpalSink;

/// Why the cpal sink could not start; each maps to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum CpalOpenError {
    /// Usage: a host this build does not have (exit 2).
    #[error("--host {host}: this xrun-player was built without cargo feature `{feature}`")]
    NotBuilt {
        /// The host asked for.
        host: &'static str,
        /// The missing feature.
        feature: &'static str,
    },
    /// The host, device or configuration failed (exit 3).
    #[error("cpal host {host}, device {device:?}: {what}")]
    Device {
        /// The host.
        host: &'static str,
        /// The device name.
        device: String,
        /// What failed.
        what: String,
    },
}

/// How to open the cpal sink.
#[derive(Debug, Clone)]
pub struct CpalOptions {
    /// Which host.
    pub host: CpalHost,
    /// Device name (`-D`): `default`, or a device's id or name as
    /// `--list-devices` shows them.
    pub device: String,
    /// Stalls to inject into the data callback (self-test).
    pub stalls: Vec<StallSpec>,
    /// Print nothing but errors.
    pub quiet: bool,
    /// `--priority` for the thread that runs the data callback.
    pub priority: Option<Priority>,
    /// `--cpu` for the thread that runs the data callback.
    pub cpus: Option<CpuList>,
}
