//! What the callbacks saw, on its way to the report: the data callback's
//! underrun records (fixed-size, through a lock-free ring, so that it never
//! allocates) and the host's errors (counted by kind in atomics), turned
//! into the report's `Underrun` events and `host_errors` by the writer.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use xrunbench_schema::player::{ClockSource, EventSource, HostErrorCount, Underrun};

use super::callback::Shared;

/// Bytes of one event record in the callback → main thread ring.
pub const EVENT_BYTES: usize = 48;

/// Events the record ring holds before the callback must drop one (and
/// count it): far more than the main thread lets pile up between polls.
pub const EVENT_SLOTS: usize = 1024;

/// One event as the callback records it (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventRecord {
    /// Who saw it.
    pub source: EventSource,
    /// A cpal `Xrun` came with a callback gap.
    pub with_xrun: bool,
    /// When the device ran dry: since the first callback, on
    /// CLOCK_MONOTONIC (the stream clock's instant, moved by the offset
    /// between the two clocks at the callback that saw it).
    pub began_ns: i64,
    /// How long it stayed dry.
    pub gap_ns: i64,
    /// Frames played before it, over the whole stream.
    pub stream_frame: u64,
    /// Audio the device held at the callback before it.
    pub queued_ns: i64,
}

fn source_code(s: EventSource) -> u8 {
    match s {
        EventSource::DeviceEpipe => 0,
        EventSource::CpalXrun => 1,
        EventSource::CallbackGap => 2,
        EventSource::ReaderBehind => 3,
    }
}

fn source_from(code: u8) -> EventSource {
    match code {
        1 => EventSource::CpalXrun,
        2 => EventSource::CallbackGap,
        3 => EventSource::ReaderBehind,
        _ => EventSource::DeviceEpipe,
    }
}

impl EventRecord {
    /// The record's bytes in the event ring.
    pub fn encode(&self) -> [u8; EVENT_BYTES] {
        let mut b = [0u8; EVENT_BYTES];
        b[0] = source_code(self.source);
        b[1] = u8::from(self.with_xrun);
        b[8..16].copy_from_slice(&self.began_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.gap_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.stream_frame.to_le_bytes());
        b[32..40].copy_from_slice(&self.queued_ns.to_le_bytes());
        b
    }

    /// The record from its bytes in the event ring.
    pub fn decode(b: &[u8; EVENT_BYTES]) -> EventRecord {
        let word = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        EventRecord {
            source: source_from(b[0]),
            with_xrun: b[1] != 0,
            began_ns: word(8),
            gap_ns: word(16),
            stream_frame: word(24) as u64,
            queued_ns: word(32),
        }
    }
}

/// The report's event for a record: `at_s` since the first callback on
/// CLOCK_MONOTONIC (the report's `started_mono_ns`), the gap on cpal's
/// stream clock; the frame over the whole stream (the playback loop splits
/// it into loop and frame).
pub fn to_underrun(e: EventRecord) -> Underrun {
    let gap_ms = e.gap_ns as f64 / 1e6;
    Underrun {
        at_s: e.began_ns.max(0) as f64 / 1e9,
        file_frame: e.stream_frame,
        file_loop: 0,
        at_least_ms: Some(gap_ms),
        at_least_clock: ClockSource::Cpal,
        gap_ms,
        gap_clock: ClockSource::Cpal,
        queued_before_us: Some(e.queued_ns.max(0) as u64 / 1000),
        source: e.source,
        also_seen_by: if e.with_xrun {
            vec![EventSource::CpalXrun]
        } else {
            Vec::new()
        },
    }
}

/// Host error kinds counted (cpal's, with room to spare).
pub const ERROR_KINDS: usize = 16;

/// Where a kind is counted.
pub fn error_index(kind: cpal::ErrorKind) -> usize {
    use cpal::ErrorKind as K;
    match kind {
        K::DeviceBusy => 0,
        K::DeviceChanged => 1,
        K::DeviceNotAvailable => 2,
        K::HostUnavailable => 3,
        K::InvalidInput => 4,
        K::PermissionDenied => 5,
        K::RealtimeDenied => 6,
        K::ResourceExhausted => 7,
        K::StreamInvalidated => 8,
        K::UnsupportedConfig => 9,
        K::UnsupportedOperation => 10,
        K::Xrun => 11,
        K::BackendError => 12,
        _ => 13,
    }
}

/// The kinds' names, by [`error_index`].
pub const ERROR_NAMES: [&str; ERROR_KINDS] = [
    "DeviceBusy",
    "DeviceChanged",
    "DeviceNotAvailable",
    "HostUnavailable",
    "InvalidInput",
    "PermissionDenied",
    "RealtimeDenied",
    "ResourceExhausted",
    "StreamInvalidated",
    "UnsupportedConfig",
    "UnsupportedOperation",
    "Xrun",
    "BackendError",
    "Other",
    "",
    "",
];

/// Kinds after which the stream does not play on: the writer stops waiting.
pub fn is_fatal(kind: cpal::ErrorKind) -> bool {
    matches!(
        kind,
        cpal::ErrorKind::DeviceNotAvailable
            | cpal::ErrorKind::StreamInvalidated
            | cpal::ErrorKind::HostUnavailable
    )
}

/// Host errors as the error callback leaves them: counts in atomics, the
/// first message of each kind behind a lock the main thread takes rarely.
pub type FirstMessages = Arc<Mutex<[Option<String>; ERROR_KINDS]>>;

/// The error callback: counts each kind, keeps its first message, and
/// leaves cpal's xruns for the data callback to attach to a gap.
pub fn on_error(shared: &Shared, first: &FirstMessages, e: cpal::Error) {
    if e.kind() == cpal::ErrorKind::Xrun {
        shared.xruns_pending.fetch_add(1, Ordering::AcqRel);
    }
    let k = error_index(e.kind());
    if shared.error_counts[k].fetch_add(1, Ordering::AcqRel) == 0 {
        // Once per kind: floods (the pulse plugin's EIO through the ALSA
        // host) are counted, not stored. try_lock: never wait here.
        if let Ok(mut m) = first.try_lock() {
            m[k] = Some(e.to_string());
        }
    }
}

/// Every host error counted, with its first message, and the events the
/// callback had to drop: the report's `host_errors`.
pub fn host_errors(shared: &Shared, first: &FirstMessages) -> Vec<HostErrorCount> {
    let first = first.lock().ok();
    let mut out = Vec::new();
    for (k, name) in ERROR_NAMES.iter().enumerate() {
        let count = shared.error_counts[k].load(Ordering::Acquire);
        if count == 0 {
            continue;
        }
        out.push(HostErrorCount {
            kind: name.to_string(),
            count,
            first_message: first
                .as_ref()
                .and_then(|m| m[k].clone())
                .unwrap_or_default(),
        });
    }
    let lost = shared.events_lost.load(Ordering::Relaxed);
    if lost > 0 {
        out.push(HostErrorCount {
            kind: "EventsLost".into(),
            count: lost,
            first_message: "the callback's event ring was full; these events are missing".into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_records_round_trip() {
        let e = EventRecord {
            source: EventSource::CallbackGap,
            with_xrun: true,
            began_ns: 123_456_789_012,
            gap_ns: 278_000_000,
            stream_frame: 96_000,
            queued_ns: -1,
        };
        assert_eq!(EventRecord::decode(&e.encode()), e);
    }
}
