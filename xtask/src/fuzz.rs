//! `cargo xtask fuzz [TARGET] [--time S] [--runs N]`: the fuzz targets of
//! every parser of outside input, run with `cargo fuzz` on the nightly
//! toolchain, one at a time (libFuzzer on one CPU each; the machines are
//! shared), each reporting its executions and coverage.
//!
//! The targets live in `fuzz/` (not a workspace member: stable `cargo
//! test` never builds it). Each calls [`exercise`] here (the player's
//! command line, which xtask cannot link, is exercised in `fuzz/` and
//! replayed by the player's own tests), so that the stable suite replays
//! the same harness over the committed corpus and every input that once
//! crashed (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};

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

/// A fuzz target: one parser of outside input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// The WAV header reader (player and runner).
    WavHeader,
    /// The scenario TOML, parsed and resolved.
    Scenario,
    /// Trial specs (`xrun-trial run`, `check`), parsed and validated.
    TrialSpec,
    /// Trial records as the results reader checks them.
    TrialRecord,
    /// Journals as the replay vets them before writing anything.
    Journal,
    /// xrun-hackbench's command line (glibc getopt rules).
    HackbenchCli,
    /// `lava-results`' readers: a LAVA job log (its test cases and the
    /// documents printed into it) and the server's results YAML.
    LavaResults,
    /// xrun-player's command line (clap).
    PlayerCli,
    /// What the host reads back from a trial on a board it does not
    /// trust: its stdout as a record of the trial that was sent, its
    /// stderr as the lines shown to people.
    TrialOutput,
}

impl Target {
    /// Every target, in the order `cargo xtask fuzz` runs them.
    pub const ALL: [Target; 9] = [
        Target::WavHeader,
        Target::Scenario,
        Target::TrialSpec,
        Target::TrialRecord,
        Target::Journal,
        Target::HackbenchCli,
        Target::LavaResults,
        Target::PlayerCli,
        Target::TrialOutput,
    ];

    /// The target's name in `fuzz/fuzz_targets/`.
    pub fn name(self) -> &'static str {
        match self {
            Target::WavHeader => "wav_header",
            Target::Scenario => "scenario",
            Target::TrialSpec => "trial_spec",
            Target::TrialRecord => "trial_record",
            Target::Journal => "journal",
            Target::HackbenchCli => "hackbench_cli",
            Target::LavaResults => "lava_results",
            Target::PlayerCli => "player_cli",
            Target::TrialOutput => "trial_output",
        }
    }
}

/// Feeds `data` to `target`'s parser. It may refuse the input; it must not
/// panic, and what it accepts must hold what its callers rely on (checked
/// here with `assert!`, which libFuzzer reports as a crash).
pub fn exercise(target: Target, data: &[u8]) {
    match target {
        Target::WavHeader => wav_header(data),
        Target::Scenario => text(data, scenario),
        Target::TrialSpec => text(data, trial_spec),
        Target::TrialRecord => text(data, trial_record),
        Target::Journal => text(data, journal),
        Target::HackbenchCli => hackbench_cli(&args_of(data)),
        Target::LavaResults => text(data, lava_results),
        // Exercised in fuzz/ and the player's tests (xtask never links it).
        Target::PlayerCli => {}
        Target::TrialOutput => trial_output(data),
    }
}

/// The arguments a command-line target sees: `data` split at NUL bytes.
pub fn args_of(data: &[u8]) -> Vec<String> {
    data.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn text(data: &[u8], f: fn(&str)) {
    if let Ok(t) = std::str::from_utf8(data) {
        f(t);
    }
}

/// Errors are one line for the user.
fn one_line(e: &str) {
    assert!(!e.contains('\n'), "an error of more than one line: {e:?}");
}

fn wav_header(data: &[u8]) {
    use xrunbench_wav::read::{MAX_CHANNELS, MAX_RATE};
    // The file may be longer than what was read of it: the first 8 bytes
    // claim a length, as a sparse or streaming file would.
    let (claim, header) = data.split_at(data.len().min(8));
    let mut len = [0u8; 8];
    len[..claim.len()].copy_from_slice(claim);
    let file_len = (header.len() as u64).max(u64::from_le_bytes(len) >> 16);
    match xrunbench_wav::WavSpec::parse(header, file_len) {
        Ok(s) => {
            assert!(s.frames >= 1 && s.rate >= 1 && s.rate <= MAX_RATE);
            assert!(s.channels >= 1 && s.channels <= MAX_CHANNELS);
            let end = s.frames as u128 * s.frame_bytes() as u128 + u128::from(s.data_offset);
            assert!(end <= u128::from(file_len), "{s:?} beyond {file_len}");
        }
        Err(e) => one_line(&e),
    }
}

fn scenario(text: &str) {
    use crate::run::scenario;
    let path = Path::new("fuzz.toml");
    match scenario::parse(path, text).and_then(|f| scenario::resolve(path, &f)) {
        Ok(s) => {
            // What the runner derives from it must not panic either.
            let names: Vec<String> = s.configs.iter().map(|c| c.name.clone()).collect();
            let _ = crate::run::plan::make_plan(&names, s.trials.min(50), s.order);
        }
        Err(e) => one_line(&e.0),
    }
}

fn trial_spec(text: &str) {
    match xrunbench_trial::spec::parse_many(text, "fuzz") {
        Ok(specs) => {
            for s in &specs {
                if let Err(e) = xrunbench_trial::spec::validate(s) {
                    one_line(&e);
                }
            }
        }
        Err(e) => one_line(&e.0),
    }
}

fn trial_record(text: &str) {
    let path = Path::new("trials/a-1.json");
    match crate::results::check_record_text(path, text) {
        Ok(r) => {
            // A table computes with every metric of it.
            for m in crate::compare::metrics::Metric::ALL {
                if let Some(v) = m.of(&r) {
                    assert!(v.is_finite(), "{m:?} = {v}");
                }
            }
        }
        Err(e) => one_line(&e.0),
    }
}

fn trial_output(data: &[u8]) {
    use crate::target::bounded::{lines_capped, Overflow};
    use crate::target::{record_from, RecordRefused};
    let sent = xrunbench_schema::trial::TrialId {
        scenario: "fuzz".into(),
        config: "a".into(),
        k: 1,
        seq: 1,
    };
    match record_from(data, &sent) {
        // Only a record of the trial sent, checked as the file it becomes.
        Ok(r) => {
            assert_eq!(r.trial, sent);
            let text = serde_json::to_string(&r).expect("a record serializes");
            trial_record(&text);
        }
        Err(RecordRefused::Refused(why)) => one_line(&why),
        Err(RecordRefused::Unread) => {}
    }
    // As stderr: every line shown is one printable line.
    let overflow = Overflow::default();
    let lines = lines_capped(Some(std::io::Cursor::new(data.to_vec())), &overflow);
    for line in lines.iter() {
        assert!(
            !line.chars().any(char::is_control),
            "a control character shown: {line:?}"
        );
    }
}

fn journal(text: &str) {
    use xrunbench_trial::journal::{parse_journal, vetted_writes};
    use xrunbench_trial::machine::KnobRoots;
    match parse_journal(text) {
        // Vetting reads (paths, symlinks) and never writes.
        Ok(doc) => match vetted_writes(&doc, &KnobRoots::real()) {
            Ok(writes) => {
                for w in writes {
                    assert!(xrunbench_trial::knobs::is_one_line(&w.value));
                }
            }
            Err(e) => one_line(&e),
        },
        Err(e) => one_line(&e),
    }
}

fn lava_results(text: &str) {
    use crate::lava::results::{log_record, parse_log, parse_results_yaml};
    let log = parse_log(text);
    for b in &log.broken {
        one_line(b);
    }
    for ((kind, name), bytes) in &log.docs {
        if kind == "record" {
            if let Err(e) = log_record(name, bytes) {
                one_line(&format!("{e:#}"));
            }
        }
    }
    // The same text as the server's results export.
    match parse_results_yaml(text) {
        Ok(cases) => {
            for c in cases {
                assert!(!c.definition.is_empty() || !c.name.is_empty() || !c.result.is_empty());
            }
        }
        Err(e) => one_line(&format!("{e:#}")),
    }
}

fn hackbench_cli(args: &[String]) {
    // rt-tests prints its diagnostics on several lines; only no panic.
    let _ = xrunbench_hackbench::cli::parse("xrun-hackbench", args);
}

/// `fuzz/` of this workspace.
pub fn fuzz_dir() -> PathBuf {
    crate::util::workspace_root().join("fuzz")
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
    cmd.current_dir(crate::util::workspace_root())
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

    /// `fuzz/` compiles xtask's modules again from the same files (xtask is
    /// a binary): every module of xtask/src/main.rs must be listed in
    /// fuzz/src/lib.rs, and every dependency of xtask must be one of
    /// fuzz/'s, or the fuzz targets stop building unnoticed (the stable
    /// suite never builds them). Every target has its binary and file.
    #[test]
    fn the_fuzz_crate_keeps_up_with_xtask() {
        let root = crate::util::workspace_root();
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        let main = read("xtask/src/main.rs");
        let lib = read("fuzz/src/lib.rs");
        for m in main
            .lines()
            .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        {
            assert!(
                lib.contains(&format!("pub mod {m};")),
                "fuzz/src/lib.rs does not compile xtask's module `{m}`"
            );
        }
        let deps = |toml_text: &str| -> Vec<String> {
            let v: toml::Table = toml_text.parse().unwrap();
            v["dependencies"]
                .as_table()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        let fuzz_toml = read("fuzz/Cargo.toml");
        let fuzz_deps = deps(&fuzz_toml);
        for d in deps(&read("xtask/Cargo.toml")) {
            assert!(
                fuzz_deps.contains(&d),
                "fuzz/Cargo.toml lacks xtask's dependency `{d}`"
            );
        }
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
