//! The fuzz targets' harness, under the name the targets use
//! (`xrunbench_fuzz::fuzz::exercise`): it lives in `crates/fuzz-harness`,
//! where the stable suite replays the committed inputs through it.

pub use xrunbench_fuzz_harness as fuzz;
