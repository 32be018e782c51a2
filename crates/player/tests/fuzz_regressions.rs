//! The inputs `cargo xtask fuzz` committed for the `player_cli` target (its
//! corpus, and every input that once crashed it), replayed on stable: the
//! command line parses or is refused, and the refusal renders, without a
//! panic. The other targets are replayed by xtask's own tests.

use std::path::{Path, PathBuf};

use clap::Parser;
use xrunbench_player::cli::Cli;

fn inputs() -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for sub in ["corpus/player_cli", "regressions/player_cli"] {
        for e in std::fs::read_dir(fuzz.join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn committed_player_cli_inputs_parse_or_are_refused() {
    let inputs = inputs();
    assert!(!inputs.is_empty(), "no committed player_cli inputs");
    for p in inputs {
        let data = std::fs::read(&p).unwrap();
        // As the fuzz target splits them: at NUL bytes.
        let argv = std::iter::once("xrun-player".to_string()).chain(
            data.split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned()),
        );
        if let Err(e) = Cli::try_parse_from(argv) {
            let _ = e.render().to_string();
        }
    }
}
