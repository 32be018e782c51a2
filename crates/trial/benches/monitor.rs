//! The latency monitor's own work per wake-up (after the sleep, before the
//! next): read the clock, record the latency, check the threshold. What it
//! adds to each measurement is what this costs.
//!
//! `cargo bench -p xrunbench-trial` (or `cargo xtask bench micro`).

use std::hint::black_box;

use criterion::{criterion_main, Criterion};
use hdrhistogram::Histogram;

fn per_wakeup(c: &mut Criterion) {
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut next = xrunbench_trial::monitor::mono_now_ns();
    c.bench_function("monitor wake-up: clock read + record + threshold", |b| {
        b.iter(|| {
            let now = xrunbench_trial::monitor::mono_now_ns();
            let late = now.saturating_sub(black_box(next)) / 1000;
            h.saturating_record(late);
            next = now;
            black_box(late > 1000)
        })
    });
}

// criterion's macros define undocumented functions.
#[allow(missing_docs)]
mod group {
    //! The benchmark group.
    criterion::criterion_group!(benches, super::per_wakeup);
}
criterion_main!(group::benches);
