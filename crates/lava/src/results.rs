//! `cargo xtask lava-results LOG|DIR`: a LAVA job's results back into a
//! run directory (through the results layer), so `compare`, `plot` and
//! `bisect` read it like any run.
//!
//! - **LOG**: the job log — `lava-run`'s stderr, or the server's log
//!   (`- {"dt": …, "lvl": …, "msg": …}` lines). Its `"lvl": "results"`
//!   lines are the test cases (YAML flow mappings whose numbers are
//!   `! "…"`-tagged strings); its `"lvl": "target"` lines carry the
//!   definition's documents (the scenario and every trial record, base64).
//! - **DIR**: trial records copied off the board (`XRUNBENCH_RECORDS_DIR`),
//!   with `--scenario FILE`.
//!
//! `--results FILE` (the server's results YAML export, a list of
//! `{suite, name, result, measurement, unit}`) adds test cases to check.
//! Every measurement case is checked against the records (the mean the
//! board reported must be the mean of the records brought back), and the
//! scenario's gates are judged here — all of them, those against the
//! baseline too, which the board cannot judge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use xrunbench_schema::bounded::{read_json, read_regular, Limits};
use xrunbench_schema::doc::one_line;

use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_norway::Value;
use xrunbench_schema::gate::parse_measurement_case;
use xrunbench_schema::trial::{TrialId, TrialRecord};

use super::definition::{DOC_END_LINE, DOC_LINE};
use xrunbench_analysis::results::{
    default_results_root, Outcome, RunDir, RunManifest, RunWriter, RUN_SCHEMA,
};
use xrunbench_scenario::plan::{make_plan, PlannedTrial};
use xrunbench_scenario::{self as scenario, Scenario, ScenarioFile};
use xrunbench_schema::bounded::REPORT_MAX;

/// Exit code for bad input.
const EXIT_BAD_INPUT: u8 = 2;
/// Exit code when `--gate` is given and a gate failed, or a measurement
/// does not match the records.
const EXIT_GATE_FAILED: u8 = 1;

/// Arguments of `cargo xtask lava-results`.
#[derive(clap::Args, Debug)]
pub struct LavaResultsArgs {
    /// The job log (lava-run's stderr, or the server's job log), or a
    /// directory of trial records (then --scenario is needed).
    #[arg(value_name = "LOG|DIR")]
    pub input: PathBuf,
    /// The scenario file (for a directory of records; a log carries it).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// The server's results YAML export, to check its measurements too.
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// Where run directories go (default: results/ in the current directory).
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// Appended to the run directory's name (default `lava`).
    #[arg(long, default_value = "lava")]
    pub label: String,
    /// Exit 1 when a gate of the scenario failed.
    #[arg(long)]
    pub gate: bool,
    /// Also write a JUnit XML file of the run and its gates.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// One LAVA test case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Its test definition as LAVA names it (`0_xrunbench-quick`); the
    /// server's results name it `suite`.
    pub definition: String,
    /// The case (`fifo-80_underruns`).
    pub name: String,
    /// `pass`, `fail`, `skip`, `unknown`.
    pub result: String,
    /// Its measurement, if any.
    pub measurement: Option<f64>,
    /// Its units.
    pub units: String,
}

/// What a job log holds for us.
#[derive(Debug, Default)]
pub struct JobLog {
    /// The test cases, in log order (LAVA's own, definition `lava`, left
    /// out).
    pub cases: Vec<Case>,
    /// Documents the definition printed: (kind, name) → bytes.
    pub docs: BTreeMap<(String, String), Vec<u8>>,
    /// Documents that were cut off or do not decode: one line each.
    pub broken: Vec<String>,
}

/// `cargo xtask lava-results`.
pub fn run(args: &LavaResultsArgs) -> Result<ExitCode> {
    match convert(args) {
        Ok(code) => Ok(code),
        Err(e) => {
            xrunbench_lab::say!(": {e:#}");
            Ok(ExitCode::from(EXIT_BAD_INPUT))
        }
    }
}

/// The records that are of a trial in `plan` of scenario `scenario`, each
/// with the plan's own name for it; any other (a trial not planned, or
/// one already given) is refused with a line on stderr: what a job log
/// holds is the board's word, and no file is named by it.
fn planned_records(
    records: Vec<TrialRecord>,
    plan: &[PlannedTrial],
    scenario: &str,
) -> Vec<(TrialId, TrialRecord)> {
    let mut taken = std::collections::BTreeSet::new();
    let mut kept = Vec::new();
    for r in records {
        let planned = plan.iter().find(|p| {
            r.trial.scenario == scenario && r.trial.config == p.config_name && r.trial.k == p.k
        });
        match planned {
            Some(p) if taken.insert(p.seq) => kept.push((r.trial.clone(), r)),
            Some(_) => xrunbench_lab::say!(
                ": a second record of trial {}: refused",
                r.trial.display_name()
            ),
            None => xrunbench_lab::say!(
                ": a record of trial {} is not in scenario {}'s plan: refused",
                r.trial.display_name(),
                one_line(scenario)
            ),
        }
    }
    kept
}

fn convert(args: &LavaResultsArgs) -> Result<ExitCode> {
    let (log, records_dir) = read_input(args)?;
    let file = scenario_file(args, &log)?;
    let path = match &args.scenario {
        Some(p) => p.clone(),
        None => PathBuf::from(format!("{}.toml", file.name)),
    };
    let s = scenario::resolve(&path, &file).map_err(|e| anyhow::anyhow!(e.0))?;
    let gates =
        xrunbench_analysis::gate::resolve(&path, &file, &s).map_err(|e| anyhow::anyhow!(e.0))?;
    let records = match &records_dir {
        Some(d) => read_records_dir(d)?,
        None => records_of(&log)?,
    };
    if records.is_empty() {
        bail!(
            "{}: no trial records (the log has no `{DOC_LINE} record` lines, or the directory no *.json)",
            args.input.display()
        );
    }
    let root = args
        .results_dir
        .clone()
        .unwrap_or_else(default_results_root);
    let written = write_run(&Brought {
        file: &file,
        scenario: &s,
        records,
        label: &args.label,
        target: format!("lava ({})", args.input.display()),
        results_root: &root,
    })
    .with_context(|| args.input.display().to_string())?;
    let (out, dir, manifest, records) = (
        written.writer,
        written.dir,
        written.manifest,
        written.records,
    );
    let mismatches = check_measurements(&log.cases, &dir);
    for m in &mismatches {
        xrunbench_lab::say!(": {m}");
    }
    let baseline = s
        .configs
        .first()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let verdicts = xrunbench_analysis::gate::judge(&gates, &dir, &baseline);
    for v in &verdicts {
        println!("gate {}: {}", if v.pass { "pass" } else { "FAIL" }, v.line);
    }
    if let Some(j) = &args.junit {
        xrunbench_analysis::junit::write(j, &dir, &verdicts, &manifest.target)?;
    }
    println!(
        "{} LAVA case(s), {} record(s); run directory: {}",
        log.cases.len(),
        records.len(),
        out.dir().display()
    );
    let failed =
        !mismatches.is_empty() || (args.gate && !xrunbench_analysis::gate::all_pass(&verdicts));
    Ok(if failed {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The job log (empty for a directory of records, whose path comes back
/// too) with `--results`' cases added; its broken documents are said on
/// stderr, one line each.
fn read_input(args: &LavaResultsArgs) -> Result<(JobLog, Option<PathBuf>)> {
    let (mut log, records_dir) = if args.input.is_dir() {
        (JobLog::default(), Some(args.input.clone()))
    } else {
        (parse_log(&read_outside(&args.input, JOB_LOG_MAX)?), None)
    };
    if let Some(r) = &args.results {
        let text = read_outside(r, REPORT_MAX)?;
        log.cases
            .extend(parse_results_yaml(&text).with_context(|| r.display().to_string())?);
    }
    for b in &log.broken {
        xrunbench_lab::say!(": {}: {b}", args.input.display());
    }
    Ok((log, records_dir))
}

/// The largest job log read, bytes. Its documents are base64 in entries
/// of 76 characters, some 2.3 bytes of log a byte of record: 1 GiB holds
/// three records of the largest size ([`Limits::DOCUMENT`]), or hundreds
/// of a typical trial's (a few hundred KB each).
const JOB_LOG_MAX: usize = 1 << 30;

/// The text of `path`, a document from outside (a job log, the server's
/// results): a regular file of at most `max` bytes.
fn read_outside(path: &Path, max: usize) -> Result<String> {
    let bytes = read_regular(path, max).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", path.display()))
}

/// Trial records brought back from LAVA, to become a run directory.
pub struct Brought<'a> {
    /// The scenario file as written.
    pub file: &'a ScenarioFile,
    /// The scenario resolved.
    pub scenario: &'a Scenario,
    /// The records (the board's word: checked against the plan here).
    pub records: Vec<TrialRecord>,
    /// Appended to the run directory's name.
    pub label: &'a str,
    /// Where they ran, for the manifest.
    pub target: String,
    /// Where run directories go.
    pub results_root: &'a Path,
}

/// What [`write_run`] wrote.
pub struct Written {
    /// The run directory's writer (for the table and plots).
    pub writer: RunWriter,
    /// The run directory as the results layer reads it.
    pub dir: RunDir,
    /// Its manifest.
    pub manifest: RunManifest,
    /// The records kept (those of the plan, once each).
    pub records: Vec<(TrialId, TrialRecord)>,
}

/// The records of the scenario's plan (once each, in plan order) and the
/// manifest of their run directory (outcome and all: completed when
/// every planned trial has a measured record). Records of no planned
/// trial are refused, each with a line on stderr; none kept is an error.
pub fn checked(b: &Brought<'_>) -> Result<(RunManifest, Vec<(TrialId, TrialRecord)>)> {
    let s = b.scenario;
    if b.records.is_empty() {
        bail!("no trial records (no `{DOC_LINE} record` lines, or no *.json)");
    }
    let names: Vec<String> = s.configs.iter().map(|c| c.name.clone()).collect();
    let plan = make_plan(&names, s.trials, s.order);
    let records = planned_records(b.records.clone(), &plan, &s.name);
    if records.is_empty() {
        bail!("no trial record of scenario {}'s plan", one_line(&s.name));
    }
    let outcome = outcome_of(&records, plan.len());
    let first = records
        .iter()
        .map(|(_, r)| r)
        .min_by(|a, b| a.started_at.cmp(&b.started_at))
        .expect("records is not empty");
    let manifest = RunManifest {
        schema: RUN_SCHEMA.into(),
        started_at: first.started_at.clone(),
        label: Some(b.label.to_owned()),
        target: b.target.clone(),
        scenario_file: b.file.clone(),
        scenario: s.clone(),
        skipped: Vec::new(),
        plan,
        fingerprint: first.machine.clone(),
        runner: xrunbench_analysis::results::RunnerInfo::here(),
        outcome: Some(outcome),
    };
    Ok((manifest, records))
}

/// Writes the records of the scenario's plan as a run directory (see
/// [`checked`]).
pub fn write_run(b: &Brought<'_>) -> Result<Written> {
    let s = b.scenario;
    let (manifest, records) = checked(b)?;
    let out = RunWriter::create(b.results_root, &s.name, Some(b.label))?;
    // Written once, outcome and all: no room to set aside for later.
    out.final_manifest(&manifest)?;
    for (id, r) in &records {
        out.trial_record(id, r)?;
    }
    let dir = RunDir::load(out.dir()).map_err(|e| anyhow::anyhow!(e.0))?;
    Ok(Written {
        writer: out,
        dir,
        manifest,
        records,
    })
}

/// How the run ended, as far as the records tell: completed when every
/// one of the `planned` trials has a measured record.
fn outcome_of(records: &[(TrialId, TrialRecord)], planned: usize) -> Outcome {
    let measured = records
        .iter()
        .filter(|(_, r)| r.measured().is_some())
        .count();
    if measured == planned {
        Outcome::Completed
    } else {
        Outcome::Failed {
            error: format!("{measured} of {planned} planned trials have a measured record"),
        }
    }
}

/// The scenario: `--scenario`, else the one the definition printed.
fn scenario_file(args: &LavaResultsArgs, log: &JobLog) -> Result<ScenarioFile> {
    if let Some(p) = &args.scenario {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))?;
        return scenario::parse(p, &text).map_err(|e| anyhow::anyhow!(e.0));
    }
    let Some(((_, name), bytes)) = log.docs.iter().find(|((k, _), _)| k == "scenario") else {
        bail!(
            "{}: no scenario in it (no `{DOC_LINE} scenario` lines): give --scenario FILE",
            args.input.display()
        );
    };
    serde_json::from_slice(bytes).with_context(|| {
        format!(
            "{} in the log is not a scenario",
            doc_named("scenario", name)
        )
    })
}

/// The trial records the log carries, in plan order; each refused one
/// said on stderr.
fn records_of(log: &JobLog) -> Result<Vec<TrialRecord>> {
    let (records, refused) = records_in(log);
    for e in refused {
        xrunbench_lab::say!(": {e}: refused");
    }
    Ok(records)
}

/// The trial records the log carries, in plan order, and why each one
/// that does not read as a record does not (one line each): one bad
/// record (the board's word) does not cost the others.
pub fn records_in(log: &JobLog) -> (Vec<TrialRecord>, Vec<String>) {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for ((kind, name), bytes) in &log.docs {
        if kind != "record" {
            continue;
        }
        match log_record(name, bytes) {
            Ok(r) => out.push(r),
            Err(e) => refused.push(one_line(&format!("{e:#}"))),
        }
    }
    out.sort_by_key(|r| r.trial.seq);
    (out, refused)
}

/// The trial record the log carries as `name`: checked as the file
/// `trials/<name>.json` would be, since that is where `lava-results`
/// writes it.
pub fn log_record(name: &str, bytes: &[u8]) -> Result<TrialRecord> {
    record(bytes, Path::new(&format!("{name}.json")))
        .with_context(|| format!("the record `{}` in the log", one_line(name)))
}

/// A trial record brought back from the board, checked as the results
/// reader checks the trial file `path` (schema, its name against the
/// trial it holds, and every number a table reads).
pub fn record(bytes: &[u8], path: &Path) -> Result<TrialRecord> {
    let text = std::str::from_utf8(bytes)
        .with_context(|| format!("{}: not UTF-8 text", path.display()))?;
    xrunbench_analysis::results::check_record_text(path, text).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Every `*.json` of `dir` as a trial record, each read bounded (a
/// regular file within [`Limits::DOCUMENT`]); each that does not read is
/// refused with a line on stderr, and the rest still come back.
fn read_records_dir(dir: &Path) -> Result<Vec<TrialRecord>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let read = read_json(&p, &Limits::DOCUMENT)
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
            .and_then(|bytes| record(&bytes, &p));
        match read {
            Ok(r) => out.push(r),
            Err(e) => xrunbench_lab::say!(": {e:#}: refused"),
        }
    }
    out.sort_by_key(|r| r.trial.seq);
    Ok(out)
}

/// Each measurement case whose value is not the mean of the records':
/// one line each (LAVA keeps 10 significant digits).
fn check_measurements(cases: &[Case], dir: &RunDir) -> Vec<String> {
    let mut out = Vec::new();
    for c in cases {
        let Some((config, metric)) = parse_measurement_case(&c.name) else {
            continue;
        };
        let Some(reported) = c.measurement else {
            continue;
        };
        let values: Vec<f64> = dir
            .trials_of(config)
            .iter()
            .filter_map(|t| metric.of(t))
            .collect();
        let Some(mean) = xrunbench_schema::gate::Statistic::Mean.of(&values) else {
            out.push(format!(
                "case {}: LAVA has {reported}, the records have no value",
                one_line(&c.name)
            ));
            continue;
        };
        if (mean - reported).abs() > 1e-6 * mean.abs().max(1.0) {
            out.push(format!(
                "case {}: LAVA has {reported}, the records' mean is {mean}",
                one_line(&c.name)
            ));
        }
    }
    out
}

/// Reads a job log: lava-run's stderr (`{"dt": …}` lines) or the server's
/// (`- {"dt": …}` lines). Lines that are not log entries are skipped.
pub fn parse_log(text: &str) -> JobLog {
    let mut log = JobLog::default();
    let mut open = OpenDocs::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let line = line.strip_prefix("- ").unwrap_or(line);
        if !line.starts_with('{') || !plausible_entry(line) {
            continue;
        }
        let Ok(v) = serde_norway::from_str::<Value>(line) else {
            continue;
        };
        let v = untag(v);
        match (v.get("lvl").and_then(Value::as_str), v.get("msg")) {
            (Some("results"), Some(msg)) => {
                if let Some(c) = case_of(msg, "definition", "units") {
                    if c.definition != "lava" {
                        log.cases.push(c);
                    }
                }
            }
            (Some("target"), Some(Value::String(msg))) => doc_line(msg, n + 1, &mut open, &mut log),
            _ => {}
        }
    }
    for ((kind, name), _) in open.chunks {
        log.broken.push(format!(
            "{} was cut off (no `{DOC_END_LINE}` line)",
            doc_named(&kind, &name)
        ));
    }
    log
}

/// The longest log line read as an entry, bytes: an entry is a time, a
/// level and one line the board printed (ours are base64 lines of 76
/// characters); a longer line is not ours to read.
const MAX_ENTRY_LINE: usize = 64 * 1024;
/// The deepest nesting of an entry read: a LAVA entry is a mapping
/// holding strings or, for a result, one more mapping.
const MAX_ENTRY_DEPTH: usize = 8;

/// Whether a log line has the shape of an entry, checked in one pass
/// before any parser sees it: a YAML parser takes time quadratic in the
/// nesting of one line (200,000 `[` took 76 s).
fn plausible_entry(line: &str) -> bool {
    line.len() <= MAX_ENTRY_LINE && nesting(line) <= MAX_ENTRY_DEPTH
}

/// How deep `[` and `{` nest in `text`, outside quoted strings.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' => quote = Some(c),
                '[' | '{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    deepest
}

/// `the KIND `NAME``: a document of the log named as the board wrote it,
/// escaped (the board chose both words).
fn doc_named(kind: &str, name: &str) -> String {
    format!("the {} `{}`", one_line(kind), one_line(name))
}

/// The documents being read back from a log: each one's base64 so far,
/// and the log line each one already read ended at.
#[derive(Default)]
struct OpenDocs {
    chunks: BTreeMap<(String, String), String>,
    ended: BTreeMap<(String, String), usize>,
}

/// One target line (line `at` of the log): a document's base64 line or
/// its closing line. A document that ends twice is refused both times:
/// the definition prints each once, so one of them is forged, and which
/// one cannot be told.
fn doc_line(msg: &str, at: usize, open: &mut OpenDocs, log: &mut JobLog) {
    let end_marker = format!("{DOC_END_LINE} ");
    let marker = format!("{DOC_LINE} ");
    if let Some(i) = msg.find(&end_marker) {
        let mut w = msg[i + end_marker.len()..].split_whitespace();
        let (Some(kind), Some(name), Some(bytes)) = (w.next(), w.next(), w.next()) else {
            return;
        };
        let key = (kind.to_string(), name.to_string());
        let b64 = open.chunks.remove(&key).unwrap_or_default();
        if let Some(first) = open.ended.get(&key) {
            log.docs.remove(&key);
            log.broken.push(format!(
                "{} is in the log twice (ending at lines {first} and {at}): both refused",
                doc_named(kind, name)
            ));
            return;
        }
        open.ended.insert(key.clone(), at);
        // The board's `base64` lines, joined: one padded stream.
        match (BASE64.decode(&b64), bytes.parse::<usize>()) {
            (Ok(data), Ok(n)) if data.len() == n => {
                log.docs.insert(key, data);
            }
            (Ok(data), Ok(n)) => log.broken.push(format!(
                "{} has {} bytes, expected {n}",
                doc_named(kind, name),
                data.len()
            )),
            _ => log
                .broken
                .push(format!("{} is not base64", doc_named(kind, name))),
        }
    } else if let Some(i) = msg.find(&marker) {
        let mut w = msg[i + marker.len()..].split_whitespace();
        if let (Some(kind), Some(name), Some(chunk), None) =
            (w.next(), w.next(), w.next(), w.next())
        {
            open.chunks
                .entry((kind.into(), name.into()))
                .or_default()
                .push_str(chunk);
        }
    }
}

/// The server's results YAML: a list of `{suite, name, result,
/// measurement, unit}`.
pub fn parse_results_yaml(text: &str) -> Result<Vec<Case>> {
    // A list of flat mappings: refuse a deeper document before the YAML
    // parser sees it (see [`plausible_entry`]).
    if nesting(text) > MAX_ENTRY_DEPTH {
        bail!("nested more than {MAX_ENTRY_DEPTH} deep: expected a list of results");
    }
    let v: Value = serde_norway::from_str(text).context("not YAML")?;
    let Value::Sequence(items) = untag(v) else {
        bail!("expected a list of test results");
    };
    Ok(items
        .iter()
        .filter_map(|i| case_of(i, "suite", "unit"))
        .filter(|c| c.definition != "lava")
        .collect())
}

/// A test case from a results mapping; `definition_key`/`units_key`: the
/// log's and the export's spellings differ.
fn case_of(v: &Value, definition_key: &str, units_key: &str) -> Option<Case> {
    let text = |k: &str| -> Option<String> {
        match v.get(k)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    Some(Case {
        definition: text(definition_key)?,
        name: text("case").or_else(|| text("name"))?,
        result: text("result")?,
        measurement: text("measurement").and_then(|m| m.trim().parse().ok()),
        units: text(units_key).unwrap_or_default(),
    })
}

/// `value` without YAML tags (`! "175"` is the string `175`).
fn untag(v: Value) -> Value {
    match v {
        Value::Tagged(t) => untag(t.value),
        Value::Sequence(s) => Value::Sequence(s.into_iter().map(untag).collect()),
        Value::Mapping(m) => Value::Mapping(m.into_iter().map(|(k, v)| (k, untag(v))).collect()),
        other => other,
    }
}

/// Job logs for tests.
#[cfg(test)]
pub mod testing {
    use super::*;

    /// The target lines a definition prints for document `kind` `name`
    /// holding `bytes`, as lava-run logs them.
    pub fn doc_entries(kind: &str, name: &str, bytes: &[u8]) -> String {
        let entry =
            |msg: String| format!("{{\"dt\": \"t\", \"lvl\": \"target\", \"msg\": \"{msg}\"}}\n");
        entry(format!("{DOC_LINE} {kind} {name} {}", BASE64.encode(bytes)))
            + &entry(format!("{DOC_END_LINE} {kind} {name} {}", bytes.len()))
    }

    /// The log lines of trial `config`-`k`'s record (of scenario `s`),
    /// its gap `gap` ms.
    pub fn record_entries(config: &str, k: u32, gap: f64) -> String {
        let mut r = xrunbench_analysis::results::testing::trial(config, k, |j| {
            j["player"]["totals"]["gap_ms_max"] = serde_json::json!(gap);
        });
        r.trial.scenario = "s".into();
        let text = serde_json::to_string(&r).unwrap();
        doc_entries("record", &format!("{config}-{k}"), text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_twice_in_one_log_is_refused_naming_both() {
        // The second copy is a forgery of the first (or the first of the
        // second): neither replaces the other silently.
        let log = testing::record_entries("a", 1, 1.0)
            + &testing::record_entries("b", 1, 1.0)
            + &testing::record_entries("a", 1, 99.0);
        let l = parse_log(&log);
        assert_eq!(
            l.broken,
            ["the record `a-1` is in the log twice (ending at lines 2 and 6): both refused"]
        );
        let (records, refused) = records_in(&l);
        assert!(refused.is_empty(), "{refused:?}");
        let kept: Vec<String> = records.iter().map(|r| r.trial.stem()).collect();
        assert_eq!(kept, ["b-1"]);
    }

    #[test]
    fn a_document_reads_back_as_coreutils_base64_prints_it() {
        // `printf 'xrunbench record\n%.0s' 1 2 3 4 | base64`: lines of 76
        // characters, the last one padded.
        let lines = [
            "eHJ1bmJlbmNoIHJlY29yZAp4cnVuYmVuY2ggcmVjb3JkCnhydW5iZW5jaCByZWNvcmQKeHJ1bmJl",
            "bmNoIHJlY29yZAo=",
        ];
        let entry =
            |msg: String| format!("{{\"dt\": \"t\", \"lvl\": \"target\", \"msg\": \"{msg}\"}}\n");
        let mut log: String = lines
            .iter()
            .map(|l| entry(format!("{DOC_LINE} record a-1 {l}")))
            .collect();
        log += &entry(format!("{DOC_END_LINE} record a-1 68"));
        // Unpadded, or not base64 at all: refused.
        for (name, b64) in [("b-1", "aGk"), ("c-1", "a*k=")] {
            log += &entry(format!("{DOC_LINE} record {name} {b64}"));
            log += &entry(format!("{DOC_END_LINE} record {name} 2"));
        }
        let l = parse_log(&log);
        assert_eq!(
            l.docs.get(&("record".into(), "a-1".into())).unwrap(),
            "xrunbench record\n".repeat(4).as_bytes()
        );
        assert_eq!(
            l.broken,
            [
                "the record `b-1` is not base64",
                "the record `c-1` is not base64"
            ]
        );
        assert_eq!(
            BASE64.encode("xrunbench record\n".repeat(4)),
            lines.concat()
        );
    }

    #[test]
    fn log_lines_give_cases_and_documents() {
        // As lava-run writes them (2023.01): YAML-tagged numbers, control
        // sequences before the output, LAVA's own cases.
        let log = concat!(
            r#"{"dt": "2026-12-01T01:20:14.26", "lvl": "results", "msg": {"case": "validate", "definition": "lava", "result": "pass"}}"#,
            "\n",
            r#"{"dt": "2026-12-01T01:20:16.11", "lvl": "target", "msg": "[?2004lxrunbench-doc record a-1 aGVs"}"#,
            "\n",
            r#"{"dt": "2026-12-01T01:20:16.11", "lvl": "target", "msg": "xrunbench-doc record a-1 bG8K"}"#,
            "\n",
            r#"{"dt": "2026-12-01T01:20:16.11", "lvl": "target", "msg": "xrunbench-doc-end record a-1 6"}"#,
            "\n",
            r#"{"dt": "2026-12-01T01:20:16.11", "lvl": "target", "msg": "xrunbench-doc record b-1 aGVs"}"#,
            "\n",
            r#"- {"dt": "2026-12-01T01:20:16.11", "lvl": "results", "msg": {"case": "a_underruns", "definition": "0_xrunbench-q", "endtc": ! "175", "measurement": ! "0.5", "result": "pass", "starttc": ! "175", "units": "underruns/min"}}"#,
            "\n",
            "not a log line\n",
        );
        let l = parse_log(log);
        assert_eq!(
            l.cases,
            [Case {
                definition: "0_xrunbench-q".into(),
                name: "a_underruns".into(),
                result: "pass".into(),
                measurement: Some(0.5),
                units: "underruns/min".into(),
            }]
        );
        assert_eq!(
            l.docs.get(&("record".into(), "a-1".into())).unwrap(),
            b"hello\n"
        );
        assert_eq!(
            l.broken,
            ["the record `b-1` was cut off (no `xrunbench-doc-end` line)"]
        );
    }

    #[test]
    fn a_documents_kind_and_name_are_shown_escaped() {
        let hostile = "r\u{1b}]0;x\u{7}\u{202e}\u{2066}";
        let line = |msg: String| {
            format!(
                "{}\n",
                serde_json::json!({"dt": "2026-12-01T01:20:16.11", "lvl": "target", "msg": msg})
            )
        };
        let log = [
            line(format!("xrunbench-doc {hostile} {hostile} aGVs")),
            line(format!("xrunbench-doc-end {hostile} {hostile} 9")),
            line(format!("xrunbench-doc {hostile} n{hostile} aGVs")),
        ]
        .concat();
        let l = parse_log(&log);
        let shown = "r\\u{1b}]0;x\\u{7}\\u{202e}\\u{2066}";
        assert_eq!(
            l.broken,
            [
                format!("the {shown} `{shown}` has 3 bytes, expected 9"),
                format!("the {shown} `n{shown}` was cut off (no `xrunbench-doc-end` line)"),
            ]
        );
        let mut records = JobLog::default();
        records
            .docs
            .insert(("record".into(), hostile.into()), b"{}".to_vec());
        let (_, refused) = records_in(&records);
        assert!(refused[0].contains(shown), "{}", refused[0]);
        assert!(!refused[0].chars().any(xrunbench_schema::doc::is_hidden));
    }

    #[test]
    fn a_log_record_is_checked_as_the_trial_file_it_becomes() {
        use xrunbench_analysis::results::testing;
        let text = serde_json::to_string(&testing::trial("nice", 1, |_| {})).unwrap();
        let r = log_record("nice-1", text.as_bytes()).unwrap();
        assert_eq!((r.trial.config.as_str(), r.trial.k), ("nice", 1));
        // A record under another trial's name is refused, naming both.
        let e = format!("{:#}", log_record("nice-2", text.as_bytes()).unwrap_err());
        assert!(
            e.starts_with("the record `nice-2` in the log: nice-2.json: holds trial `nice-1`"),
            "{e}"
        );
    }

    /// `lava-results INPUT --scenario SCENARIO --results-dir RESULTS_DIR`.
    fn args_into(input: PathBuf, scenario: PathBuf, results_dir: &Path) -> LavaResultsArgs {
        LavaResultsArgs {
            input,
            scenario: Some(scenario),
            results: None,
            results_dir: Some(results_dir.to_path_buf()),
            label: "lava".into(),
            gate: false,
            junit: None,
        }
    }

    /// The run directory of scenario `synthetic` under `results_dir`.
    fn synthetic_run(results_dir: &Path) -> PathBuf {
        std::fs::read_dir(results_dir.join("synthetic"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    }

    #[test]
    fn a_directory_of_records_becomes_a_run_with_its_gates_judged() {
        use xrunbench_analysis::results::testing;
        let tmp = tempfile::tempdir().unwrap();
        let records = tmp.path().join("records");
        std::fs::create_dir(&records).unwrap();
        for (config, seq, k) in [("base", 1, 1), ("new", 2, 1), ("base", 3, 2), ("new", 4, 2)] {
            let mut r = testing::trial(config, k, |_| {});
            r.trial.seq = seq;
            let text = serde_json::to_string(&r).unwrap();
            std::fs::write(records.join(format!("{config}-{k}.json")), text).unwrap();
        }
        let scenario = tmp.path().join("synthetic.toml");
        std::fs::write(
            &scenario,
            "name = \"synthetic\"\ntrials = 2\n[audio]\ngenerate = {}\n\
             [[config]]\nname = \"base\"\n[[config]]\nname = \"new\"\n\
             [gate.new]\nhackbench-round = { max = 0 }\n",
        )
        .unwrap();
        let results_dir = tmp.path().join("results");
        let mut args = args_into(records.clone(), scenario, &results_dir);
        assert_eq!(
            format!("{:?}", convert(&args).unwrap()),
            format!("{:?}", ExitCode::SUCCESS)
        );
        // With --gate the failing gate (a round never takes 0 ms) fails.
        args.gate = true;
        assert_eq!(
            format!("{:?}", convert(&args).unwrap()),
            format!("{:?}", ExitCode::from(EXIT_GATE_FAILED))
        );
        let run = synthetic_run(&results_dir);
        let dir = RunDir::load(&run).unwrap();
        assert_eq!(dir.configs, ["base", "new"]);
        assert_eq!(dir.records.len(), 4);
        // Nothing hidden left behind: no room set aside, no temporary.
        let hidden: Vec<_> = std::fs::read_dir(&run)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "{hidden:?}");
        let m = dir.manifest.unwrap();
        assert_eq!(m.plan.len(), 4);
        assert_eq!(m.outcome, Some(Outcome::Completed));
        // Without a scenario, a directory says what is missing.
        args.scenario = None;
        let e = convert(&args).unwrap_err().to_string();
        assert!(e.contains("give --scenario FILE"), "{e}");
    }

    #[test]
    fn records_of_trials_not_in_the_plan_are_refused_and_name_no_file() {
        use xrunbench_analysis::results::testing;
        let tmp = tempfile::tempdir().unwrap();
        // A job log whose board sent records under names of its choosing,
        // each consistent with the trial it claims.
        let mut log = String::new();
        for (config, k) in [
            ("base", 1),
            ("../../../outside/escape", 1),
            ("zzz", 99),
            ("base", 7),
        ] {
            let mut r = testing::trial("base", 1, |_| {});
            (r.trial.config, r.trial.k) = (config.to_string(), k);
            let text = serde_json::to_string(&r).unwrap();
            let b64 = BASE64.encode(text.as_bytes());
            let name = format!("{config}-{k}");
            let entry = |msg: String| {
                format!("{{\"dt\": \"t\", \"lvl\": \"target\", \"msg\": \"{msg}\"}}\n")
            };
            log.push_str(&entry(format!("{DOC_LINE} record {name} {b64}")));
            log.push_str(&entry(format!(
                "{DOC_END_LINE} record {name} {}",
                text.len()
            )));
        }
        let input = tmp.path().join("job.log");
        std::fs::write(&input, log).unwrap();
        let scenario = tmp.path().join("synthetic.toml");
        std::fs::write(
            &scenario,
            "name = \"synthetic\"\ntrials = 2\n[audio]\ngenerate = {}\n[[config]]\nname = \"base\"\n",
        )
        .unwrap();
        let results_dir = tmp.path().join("a/b/results");
        let args = args_into(input, scenario, &results_dir);
        convert(&args).unwrap();
        assert!(!tmp.path().join("outside").exists());
        let run = synthetic_run(&results_dir);
        let names: Vec<String> = std::fs::read_dir(run.join("trials"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        // The one planned trial given; the rest refused.
        assert_eq!(names, ["base-1.json"]);
    }

    #[test]
    fn a_deeply_nested_log_line_is_passed_over_in_one_pass() {
        assert_eq!(nesting(r#"{"a": [1, {"b": "[[[[{{"}]}"#), 3);
        assert_eq!(nesting(r#"{"a": "\"[[[["}"#), 1);
        // 200,000 `[` in one line: not an entry, and not parsed (a YAML
        // parser takes minutes over it).
        let line = format!(
            r#"{{"dt": "x", "lvl": "target", "msg": {}}}"#,
            "[".repeat(200_000)
        );
        assert!(!plausible_entry(&line));
        let l = parse_log(&line);
        assert!(l.cases.is_empty() && l.docs.is_empty());
        assert!(parse_results_yaml(&format!("- {}", "[".repeat(100))).is_err());
    }

    #[test]
    fn the_servers_results_export_reads() {
        let text = "- {id: 1, job: 7, level: '', logged: '2026-12-01', measurement: '0.5000000000', name: a_underruns, result: pass, suite: 0_xrunbench-q, unit: underruns/min}\n\
                    - {measurement: null, name: job, result: pass, suite: lava, unit: ''}\n";
        let cases = parse_results_yaml(text).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].measurement, Some(0.5));
        assert_eq!(cases[0].definition, "0_xrunbench-q");
    }

    /// A directory of records holding `a-1.json`, a good one, and `bad`
    /// made by `make`: what comes back of it.
    fn records_beside(bad: &str, make: impl FnOnce(&Path)) -> Vec<TrialRecord> {
        use xrunbench_analysis::results::testing;
        let tmp = tempfile::tempdir().unwrap();
        let good = serde_json::to_string(&testing::trial("a", 1, |_| {})).unwrap();
        std::fs::write(tmp.path().join("a-1.json"), good).unwrap();
        make(&tmp.path().join(bad));
        read_records_dir(tmp.path()).unwrap()
    }

    #[test]
    fn a_record_linked_to_a_device_is_refused_unread() {
        let back = records_beside("b-1.json", |p| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap();
            let e = read_json(p, &Limits::DOCUMENT).unwrap_err().0;
            assert_eq!(e, "is a character device: expected a regular file");
        });
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].trial.config, "a");
    }

    #[test]
    fn a_record_past_the_byte_bound_is_refused_unread() {
        let back = records_beside("b-1.json", |p| {
            // Sparse: past the bound, at no cost to the disk.
            let len = Limits::DOCUMENT.bytes as u64 + 1;
            xrunbench_test_support::hostile::sparse_file(p, len);
            let e = read_json(p, &Limits::DOCUMENT).unwrap_err().0;
            assert!(
                e.starts_with(&format!("more than {} bytes", len - 1)),
                "{e}"
            );
        });
        assert_eq!(back.len(), 1);
    }

    #[test]
    fn a_fifo_named_as_a_record_is_refused_without_blocking() {
        let back = records_beside("b-1.json", |p| {
            xrunbench_test_support::hostile::fifo(p);
            let e = read_json(p, &Limits::DOCUMENT).unwrap_err().0;
            assert_eq!(e, "is a FIFO: expected a regular file");
        });
        assert_eq!(back.len(), 1);
    }
}
