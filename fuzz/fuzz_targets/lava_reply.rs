#![no_main]
//! Fuzz target `lava_reply`: see xtask/src/fuzz.rs.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    xrunbench_fuzz::fuzz::exercise(xrunbench_fuzz::fuzz::Target::LavaReply, data);
});
