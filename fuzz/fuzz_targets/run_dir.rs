#![no_main]
//! Fuzz target `run_dir`: see xtask/src/fuzz.rs.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    xrunbench_fuzz::fuzz::exercise(xrunbench_fuzz::fuzz::Target::RunDir, data);
});
