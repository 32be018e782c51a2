//! The harness behind the fuzz targets: one function per parser of
//! outside input, which may refuse its input but must not panic, and must
//! hold what its callers rely on (checked with `assert!`, which libFuzzer
//! reports as a crash).
//!
//! Two users: the targets in `fuzz/` (libFuzzer, nightly; not a workspace
//! member), and `cargo xtask fuzz --replay`, which the stable suite runs
//! over the committed corpus and every input that once crashed
//! (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`). The player's
//! command line is exercised in `fuzz/` and the player's own tests (this
//! crate, like xtask, never links the player: it needs ALSA).

use std::path::Path;

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
    /// A run directory as `compare` reads it: its `run.json` and a trial
    /// file, each any bytes, through the one bounded reader.
    RunDir,
    /// A LAVA server's REST reply, read as each endpoint's (a job, test
    /// cases and suites, devices, a page's `next`, a validation, a
    /// submission, a cancel): an optional `STATUS\n` line, then the body.
    LavaReply,
}

impl Target {
    /// Every target, in the order `cargo xtask fuzz` runs them.
    pub const ALL: [Target; 11] = [
        Target::WavHeader,
        Target::Scenario,
        Target::TrialSpec,
        Target::TrialRecord,
        Target::Journal,
        Target::HackbenchCli,
        Target::LavaResults,
        Target::PlayerCli,
        Target::TrialOutput,
        Target::RunDir,
        Target::LavaReply,
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
            Target::RunDir => "run_dir",
            Target::LavaReply => "lava_reply",
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
        Target::RunDir => run_dir(data),
        Target::LavaReply => text(data, lava_reply),
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
    use xrunbench_scenario as scenario;
    let path = Path::new("fuzz.toml");
    match scenario::parse(path, text).and_then(|f| scenario::resolve(path, &f)) {
        Ok(s) => {
            // What the runner derives from it must not panic either.
            let names: Vec<String> = s.configs.iter().map(|c| c.name.clone()).collect();
            let _ = xrunbench_scenario::plan::make_plan(&names, s.trials.min(50), s.order);
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
    match xrunbench_analysis::results::check_record_text(path, text) {
        Ok(r) => {
            // A table computes with every metric of it.
            for m in xrunbench_analysis::compare::metrics::Metric::ALL {
                if let Some(v) = m.of(&r) {
                    assert!(v.is_finite(), "{m:?} = {v}");
                }
            }
        }
        Err(e) => one_line(&e.0),
    }
}

fn trial_output(data: &[u8]) {
    use xrunbench_host::target::bounded::{lines_capped, Overflow};
    use xrunbench_host::target::{record_from, RecordRefused};
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

/// `data` as a run directory: before its first NUL byte `run.json` (none
/// when empty), after it `trials/a-1.json` (all of it without a NUL), read
/// as `compare` reads it; what reads must be something a table can be
/// computed from, and every refusal one line.
fn run_dir(data: &[u8]) {
    use xrunbench_analysis::compare;
    use xrunbench_analysis::results::RunDir;
    let (manifest, trial) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&data[..0], data),
    };
    let dir = scratch_run_dir();
    std::fs::create_dir_all(dir.join("trials")).expect("making the scratch run directory");
    if !manifest.is_empty() {
        std::fs::write(dir.join("run.json"), manifest).expect("writing the scratch run.json");
    }
    std::fs::write(dir.join("trials/a-1.json"), trial).expect("writing the scratch trial");
    let read = RunDir::load(&dir);
    // Removed before anything is checked: a replay leaves nothing behind.
    let _ = std::fs::remove_dir_all(&dir);
    match read {
        Ok(run) => {
            for why in &run.unreadable {
                one_line(why);
            }
            for r in &run.records {
                for m in compare::metrics::Metric::ALL {
                    if let Some(v) = m.of(r) {
                        assert!(v.is_finite(), "{m:?} = {v}");
                    }
                }
            }
            let _ = compare::build(&[run], compare::table::Significance::Mwu, 0.05);
        }
        Err(e) => one_line(&e.0),
    }
}

/// Where this process makes its scratch run directory, anew for each
/// input. Those of processes gone (a crash leaves one) are swept the
/// first time.
fn scratch_run_dir() -> std::path::PathBuf {
    use std::sync::OnceLock;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        const PREFIX: &str = "xrunbench-fuzz-run-dir.";
        let tmp = std::env::temp_dir();
        for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(PREFIX)
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(xrunbench_schema::doc::process_gone) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        tmp.join(format!("{PREFIX}{}", std::process::id()))
    })
    .clone()
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
    use xrunbench_lava::results::{log_record, parse_log, parse_results_yaml};
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

fn lava_reply(text: &str) {
    // `STATUS\n` first, if the input starts so; else a 200.
    let (status, body) = match text.split_once('\n') {
        Some((s, body)) if s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()) => {
            (s.parse().unwrap_or(200), body)
        }
        _ => (200, text),
    };
    for (what, read) in xrunbench_lava::server::readings(status, body) {
        let line = match read {
            Ok(line) => line,
            Err(e) => e.to_string(),
        };
        shown(&line);
        if what == "next" && !line.is_empty() {
            // The token is never sent to a host the user did not name.
            assert!(line.starts_with("https://lava.test/"), "{line:?}");
        }
    }
}

/// A line shown to a person: one line, nothing hidden in it.
fn shown(line: &str) {
    one_line(line);
    let hidden = line.chars().find(|&c| xrunbench_schema::doc::is_hidden(c));
    assert!(hidden.is_none(), "{hidden:?} shown raw in {line:?}");
}

fn hackbench_cli(args: &[String]) {
    // rt-tests prints its diagnostics on several lines; only no panic.
    let _ = xrunbench_hackbench::cli::parse("xrun-hackbench", args);
}
