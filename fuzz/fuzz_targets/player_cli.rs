#![no_main]
//! Fuzz target `player_cli`: xrun-player's command line (clap), arguments
//! split at NUL bytes. The player's tests replay the committed inputs on
//! stable (crates/player/tests/fuzz_regressions.rs).

use clap::Parser;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let args = xrunbench_fuzz::fuzz::args_of(data);
    let argv = std::iter::once("xrun-player".to_string()).chain(args);
    if let Err(e) = xrunbench_player::cli::Cli::try_parse_from(argv) {
        // What main prints must render without panicking.
        let _ = e.render().to_string();
    }
});
