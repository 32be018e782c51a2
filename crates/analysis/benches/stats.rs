//! What bisect computes at every look: the exact two-sided Mann–Whitney
//! test at n = 50 per side with ties (underrun counts are small integers,
//! so ties are the rule), and the calibrated per-look levels.
//!
//! `cargo bench -p xrunbench-host` (or `cargo xtask bench micro`);
//! criterion is a dev-dependency only.

use criterion::{criterion_main, Criterion};
use std::hint::black_box;

use xrunbench_analysis::stats;

/// Underrun counts with many ties: 50 values from a small range, from a
/// fixed linear congruential sequence (no random crate for a benchmark).
fn counts(seed: u64, spread: u64) -> Vec<f64> {
    let mut x = seed;
    (0..50)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % spread) as f64
        })
        .collect()
}

fn mann_whitney(c: &mut Criterion) {
    let base = counts(1, 8);
    let new = counts(2, 10);
    c.bench_function("mann_whitney exact, n=50+50, ties", |b| {
        b.iter(|| stats::mann_whitney(black_box(&new), black_box(&base)))
    });
    let distinct_base: Vec<f64> = (0..50).map(|i| i as f64 * 1.5).collect();
    let distinct_new: Vec<f64> = (0..50).map(|i| i as f64 * 1.5 + 0.7).collect();
    c.bench_function("mann_whitney exact, n=50+50, no ties", |b| {
        b.iter(|| stats::mann_whitney(black_box(&distinct_new), black_box(&distinct_base)))
    });
    c.bench_function("sign_test_p k=10", |b| {
        b.iter(|| stats::sign_test_p(black_box(10), black_box(3)))
    });
}

// criterion's macros define undocumented functions.
#[allow(missing_docs)]
mod group {
    //! The benchmark group.
    criterion::criterion_group!(benches, super::mann_whitney);
}
criterion_main!(group::benches);
