//! The playback loop's own work per period, which must stay negligible
//! against a period of 1 ms: the wake-up's fill computation and its
//! histogram recording, the ring between the file reader and cpal's
//! callback (a period pushed and popped), and sample conversion of a
//! period (cpal's reader side). One period here is 1 ms at 48 kHz stereo:
//! 48 frames, 96 samples.
//!
//! `cargo bench -p xrunbench-player` (or `cargo xtask bench micro`);
//! criterion is a dev-dependency only.

use std::hint::black_box;

use criterion::{criterion_main, Criterion, Throughput};
use xrunbench_schema::SampleFormat;

use xrunbench_player::{clock, convert, nearmiss, ring};

/// Frames in 1 ms at 48 kHz.
const PERIOD_FRAMES: usize = 48;
/// Stereo.
const CHANNELS: usize = 2;

fn period_bytes(format: SampleFormat) -> Vec<u8> {
    (0..PERIOD_FRAMES * CHANNELS * format.bytes())
        .map(|i| (i * 37 % 251) as u8)
        .collect()
}

fn fill_and_histogram(c: &mut Criterion) {
    let mut nm = nearmiss::NearMiss::new();
    let (buffer, period, rate) = (960i64, 240i64, 48_000u32);
    let mut queued = 0i64;
    // What `measure_wakeup` does once per period: clamp the device's
    // delay, derive the lateness, both to µs, two histogram records.
    c.bench_function("wake-up: fill computation + 2 histogram records", |b| {
        b.iter(|| {
            queued = (queued + 97) % buffer;
            let q = black_box(queued).clamp(0, buffer);
            let late = (buffer - period - q).max(0);
            nm.record(
                clock::frames_to_ns(q, rate) as u64 / 1000,
                clock::frames_to_ns(late, rate) as u64 / 1000,
            );
        })
    });
}

fn ring_push_pop(c: &mut Criterion) {
    let data = period_bytes(SampleFormat::FloatLe);
    let (mut tx, mut rx) = ring::ring(data.len() * 16);
    let mut out = vec![0u8; data.len()];
    let mut g = c.benchmark_group("ring");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("push + pop one period (48 frames f32 stereo)", |b| {
        b.iter(|| {
            assert!(tx.push_all(black_box(&data)));
            assert!(rx.pop_all(black_box(&mut out)));
        })
    });
    g.finish();
}

fn conversion(c: &mut Criterion) {
    let mut g = c.benchmark_group("convert one period");
    for (from, to) in [
        (SampleFormat::S16Le, SampleFormat::FloatLe),
        (SampleFormat::S24_3Le, SampleFormat::FloatLe),
        (SampleFormat::FloatLe, SampleFormat::S16Le),
        (SampleFormat::S16Le, SampleFormat::S16Le),
    ] {
        let src = period_bytes(from);
        let mut dst = vec![0u8; PERIOD_FRAMES * CHANNELS * to.bytes()];
        g.throughput(Throughput::Elements((PERIOD_FRAMES * CHANNELS) as u64));
        g.bench_function(format!("{} -> {}", from.alsa_name(), to.alsa_name()), |b| {
            b.iter(|| convert::convert(from, black_box(&src), to, black_box(&mut dst)))
        });
    }
    g.finish();
}

// criterion's macros define undocumented functions.
#[allow(missing_docs)]
mod group {
    //! The benchmark group.
    criterion::criterion_group!(
        benches,
        super::fill_and_histogram,
        super::ring_push_pop,
        super::conversion
    );
}
criterion_main!(group::benches);
