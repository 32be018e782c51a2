//! Exact timing on the virtual sink: known writer stalls give exactly one
//! underrun each, with the gap within 1 ms of (stall − queued audio).
//! Beside the trial's latency monitor, so that what the machine itself
//! takes (a VM's vCPUs, on a saturated host) is told apart from the
//! player's own losses ([`Watched`]).

mod common;

use common::*;
use xrunbench_schema::player::{ClockSource, EndReason};

/// Plays on the virtual sink with the timing tests' writer
/// ([`TIMED_WRITER`]) and `more`, watched.
fn play_virtual(more: &[&str]) -> Watched {
    let args: Vec<&str> = ["--backend", "virtual"]
        .into_iter()
        .chain(TIMED_WRITER)
        .chain(more.iter().copied())
        .collect();
    play_watched(&mut player(), &args).1
}

#[test]
fn stalls_of_100_250_500_ms_give_one_underrun_each_within_1ms() {
    let _serial = timing_lock();
    let wav = tone(1.0);
    let w = play_virtual(&[
        "--duration",
        "3.5",
        "--selftest-stall",
        "0.5:100,1.5:250,2.5:500",
        "-q",
        wav.0.to_str().unwrap(),
    ]);
    let report = &w.report;
    assert_eq!(report.params.backend, "virtual");
    assert_eq!(report.params.buffer_frames, 960);
    assert_eq!(report.params.underrun_clock, ClockSource::Virtual);
    assert_eq!(report.selftest_stalls.len(), 3);
    assert_one_underrun_per_stall(&w, "virtual", 1.0);
    for e in &report.events {
        assert_eq!(e.at_least_clock, ClockSource::Virtual);
    }
    assert_eq!(report.totals.count as usize, report.events.len());
    assert_eq!(report.ended, EndReason::Duration);
}

#[test]
fn ten_seconds_without_stalls_have_no_underrun() {
    let _serial = timing_lock();
    let wav = tone(2.0);
    let w = play_virtual(&["--duration", "10", "-q", wav.0.to_str().unwrap()]);
    let report = &w.report;
    assert_no_underrun_but_the_machines(&w, "virtual");
    assert!((report.audio_seconds - 10.0).abs() < 1e-9);
    // The file repeats until --duration: 5 loops of 2 s.
    assert_eq!(report.frames_written, 480_000);
    // Near misses were measured at every wake-up (one per 5 ms period).
    assert!(report.fill.count > 1500, "{:?}", report.fill.count);
    assert!(report.fill.max <= 20_000, "{:?}", report.fill);
    // Never empty at a wake-up, unless the machine emptied it.
    assert!(
        report.fill.min > 0 || !report.events.is_empty(),
        "{:?}",
        report.fill
    );
}
