//! `cargo xtask fuzz [TARGET] [--time S] [--runs N]`: the fuzz targets of
//! every parser of outside input, run with `cargo fuzz` on the nightly
//! toolchain, one at a time (libFuzzer on one CPU each; the machines are
//! shared), each reporting its executions and coverage.
//!
//! The targets live in `fuzz/` (not a workspace member: stable `cargo
//! test` never builds it). Each calls the harness crate's `exercise`
//! (`crates/fuzz-harness`; the player's command line, which xtask cannot
//! link, is exercised in `fuzz/` and replayed by the player's own tests),
//! so that `--replay`, run by the stable suite, feeds the same harness the
//! committed corpus and every input that once crashed
//! (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`).

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use xrunbench_fuzz_harness::{exercise, Target};

/// Arguments of `cargo xtask fuzz`.
#[derive(clap::Args, Debug)]
pub struct FuzzArgs {
    /// One target (default: all of them, one after another).
    #[arg(value_enum)]
    pub target: Option<Target>,
    /// Seconds per target.
    #[arg(long, default_value_t = 60)]
    pub time: u64,
    /// Stop a target after this many executions (0: only --time).
    #[arg(long, default_value_t = 0)]
    pub runs: u64,
    /// Only replay the committed inputs (corpus and regressions) through
    /// the harness, on this toolchain: what the suite does on stable.
    #[arg(long)]
    pub replay: bool,
}

/// `fuzz/` of this workspace.
pub fn fuzz_dir() -> PathBuf {
    xrunbench_paths::workspace_root().join("fuzz")
}

/// The committed inputs of `target`: its corpus and its regressions.
pub fn committed_inputs(target: Target) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in ["corpus", "regressions"] {
        let dir = fuzz_dir().join(sub).join(target.name());
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.path().is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// What one target's run did.
#[derive(Debug, Default)]
struct Ran {
    executions: Option<u64>,
    coverage: Option<u64>,
    features: Option<u64>,
    corpus: Option<u64>,
}

/// Reads libFuzzer's closing lines: `stat::number_of_executed_units: N`
/// and the last `#N ... cov: C ft: F corp: K/…` status line.
fn parse_stats(stderr: &str) -> Ran {
    let mut ran = Ran::default();
    for line in stderr.lines() {
        if let Some(v) = line.strip_prefix("stat::number_of_executed_units:") {
            ran.executions = v.trim().parse().ok();
        }
        if line.starts_with('#') && line.contains("cov:") {
            let field = |name: &str| {
                line.split_whitespace()
                    .skip_while(|w| *w != name)
                    .nth(1)
                    .and_then(|v| v.split('/').next())
                    .and_then(|v| v.parse().ok())
            };
            ran.coverage = field("cov:").or(ran.coverage);
            ran.features = field("ft:").or(ran.features);
            ran.corpus = field("corp:").or(ran.corpus);
        }
    }
    ran
}

/// `cargo xtask fuzz`.
pub fn run(args: &FuzzArgs) -> Result<ExitCode> {
    if args.replay {
        return Ok(replay(args.target));
    }
    let have = |cmd: &mut Command| {
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !have(Command::new("cargo").args(["+nightly", "--version"])) {
        eprintln!("xtask: fuzzing needs the nightly toolchain: rustup toolchain install nightly");
        return Ok(ExitCode::from(2));
    }
    if !have(Command::new("cargo").args(["fuzz", "--version"])) {
        eprintln!("xtask: fuzzing needs cargo-fuzz: cargo install cargo-fuzz --locked");
        return Ok(ExitCode::from(2));
    }
    let targets: Vec<Target> = match args.target {
        Some(t) => vec![t],
        None => Target::ALL.to_vec(),
    };
    let mut failed = Vec::new();
    println!("target          seconds   executions     cov      ft  corpus  result");
    for t in targets {
        let (ran, ok, secs) = run_one(t, args)?;
        let show = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        println!(
            "{:<14} {:>8.0} {:>12} {:>7} {:>7} {:>7}  {}",
            t.name(),
            secs,
            show(ran.executions),
            show(ran.coverage),
            show(ran.features),
            show(ran.corpus),
            if ok {
                "ok"
            } else {
                "CRASH (see fuzz/artifacts)"
            }
        );
        if !ok {
            failed.push(t.name());
        }
    }
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "xtask: {} crashed; minimize with `cargo +nightly fuzz tmin --fuzz-dir fuzz TARGET ARTIFACT` \
             and add the input to fuzz/regressions/TARGET/",
            failed.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}

/// `--replay`: every committed input through the harness (a panic is the
/// failure, as under libFuzzer).
fn replay(target: Option<Target>) -> ExitCode {
    let targets = target.map_or(Target::ALL.to_vec(), |t| vec![t]);
    for t in targets {
        let inputs = committed_inputs(t);
        for p in &inputs {
            match std::fs::read(p) {
                Ok(data) => exercise(t, &data),
                Err(e) => {
                    eprintln!("xtask: {}: {e}", p.display());
                    return ExitCode::FAILURE;
                }
            }
        }
        println!("{}: {} committed input(s) replayed", t.name(), inputs.len());
    }
    ExitCode::SUCCESS
}

/// Runs one target for `args.time` seconds (or `args.runs` executions).
fn run_one(t: Target, args: &FuzzArgs) -> Result<(Ran, bool, f64)> {
    let dir = fuzz_dir();
    let corpus = dir.join("corpus").join(t.name());
    std::fs::create_dir_all(&corpus).with_context(|| format!("creating {}", corpus.display()))?;
    let mut cmd = Command::new("cargo");
    cmd.current_dir(xrunbench_paths::workspace_root())
        // No sanitizer: the parsers are safe Rust, and ASan would halve
        // the executions a shared machine allows.
        .args([
            "+nightly",
            "fuzz",
            "run",
            "--sanitizer",
            "none",
            "--fuzz-dir",
        ])
        .arg(&dir)
        .arg(t.name())
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={}", args.time))
        .arg("-print_final_stats=1");
    if args.runs > 0 {
        cmd.arg(format!("-runs={}", args.runs));
    }
    let began = std::time::Instant::now();
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running cargo fuzz run {}", t.name()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ran = parse_stats(&stderr);
    if ran.executions.is_none() && !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        bail!(
            "cargo fuzz run {} failed before fuzzing:\n{}",
            t.name(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok((ran, out.status.success(), began.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every committed input (the corpus the fuzzers built, and each input
    /// that once crashed a target) goes through the same harness on stable.
    #[test]
    fn committed_fuzz_inputs_do_not_crash() {
        let mut n = 0;
        for t in Target::ALL {
            for p in committed_inputs(t) {
                exercise(t, &std::fs::read(&p).unwrap());
                n += 1;
            }
        }
        assert!(
            n > 0,
            "no committed fuzz inputs under {}",
            fuzz_dir().display()
        );
    }

    /// Every target has its binary in fuzz/Cargo.toml and its file, and
    /// fuzz/ takes the harness from the harness crate (no copy of it).
    #[test]
    fn every_fuzz_target_has_its_binary_and_file() {
        let root = xrunbench_paths::workspace_root();
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        let fuzz_toml = read("fuzz/Cargo.toml");
        let deps: toml::Table = fuzz_toml.parse().unwrap();
        assert!(
            deps["dependencies"]
                .as_table()
                .unwrap()
                .contains_key("xrunbench-fuzz-harness"),
            "fuzz/Cargo.toml does not depend on the harness crate"
        );
        for t in Target::ALL {
            assert!(
                fuzz_toml.contains(&format!("name = \"{}\"", t.name())),
                "no [[bin]] for the fuzz target {}",
                t.name()
            );
            assert!(
                root.join(format!("fuzz/fuzz_targets/{}.rs", t.name()))
                    .is_file(),
                "no fuzz/fuzz_targets/{}.rs",
                t.name()
            );
        }
    }

    #[test]
    fn libfuzzer_stats_are_read() {
        let s = "#1024\tpulse  cov: 10 ft: 12 corp: 3/40b exec/s: 0\n\
                 #2000000\tDONE   cov: 812 ft: 2903 corp: 410/30Kb lim: 4096 exec/s: 66666 rss: 60Mb\n\
                 stat::number_of_executed_units: 2000000\n";
        let r = parse_stats(s);
        assert_eq!(
            (r.executions, r.coverage, r.features, r.corpus),
            (Some(2_000_000), Some(812), Some(2903), Some(410))
        );
    }
}
