//! Reading a document of a run directory and checking it: JSON first,
//! then its `schema`, then its typed shape, then the numbers a table or a
//! verdict will compute with. Every problem is one line naming the file,
//! the field, the value and what was expected.

use std::path::Path;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use serde_json::Value;
use xrunbench_schema::bounded::{read_json, scan_json, Limits};
use xrunbench_schema::doc::one_line;
use xrunbench_schema::hackbench::{HackbenchReport, HACKBENCH_SCHEMA};
use xrunbench_schema::player::{PlayerReport, PLAYER_SCHEMA};
use xrunbench_schema::trial::TrialRecord;

/// A bad run directory or document in it: one line for the user (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// Reads the document at `path`, of schema `schema`, described to the
/// user as `what` ("trial record").
pub fn read_doc<T: DeserializeOwned>(
    path: &Path,
    schema: &str,
    what: &str,
) -> Result<T, LoadError> {
    parse_doc(path, &read_text(path)?, schema, what)
}

/// The text of the document at `path`, read bounded: a regular file
/// within [`Limits::DOCUMENT`] (a run directory is as hostile as the
/// boards that filled it).
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    let bytes = read_json(path, &Limits::DOCUMENT)
        .map_err(|e| LoadError(format!("{}: {e}", path.display())))?;
    String::from_utf8(bytes).map_err(|e| {
        LoadError(format!(
            "{}: not UTF-8 text (at byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Only the `schema` of a document: the rest is skipped unallocated.
#[derive(Deserialize)]
struct Head {
    schema: Option<Value>,
}

/// [`read_doc`] of text already read. The text is scanned against
/// [`Limits::DOCUMENT`] before any parser sees it, and parsed straight to
/// its type (never to a tree of values first, which costs several times
/// the typed document).
pub fn parse_doc<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    schema: &str,
    what: &str,
) -> Result<T, LoadError> {
    scan_json(text.as_bytes(), &Limits::DOCUMENT)
        .map_err(|e| LoadError(format!("{}: {e}", path.display())))?;
    serde_json::from_str::<IgnoredAny>(text).map_err(|e| {
        LoadError(format!(
            "{}: expected a JSON {what} ({schema}): {}",
            path.display(),
            one_line(&e.to_string())
        ))
    })?;
    // The schema first, so that an old or foreign file gets a clear
    // message rather than a serde field error.
    let head = serde_json::from_str::<Head>(text).ok();
    let found = head
        .as_ref()
        .and_then(|h| h.schema.as_ref())
        .and_then(Value::as_str)
        .unwrap_or("");
    if found != schema {
        return Err(LoadError(format!(
            "{}: expected schema `{schema}`, found `{}`",
            path.display(),
            one_line(found)
        )));
    }
    serde_json::from_str(text).map_err(|e| {
        LoadError(format!(
            "{}: not a valid {schema} {what}: {}",
            path.display(),
            one_line(&e.to_string())
        ))
    })
}

/// A trial file's text as the reader checks it: a `xrunbench.trial/1`
/// record (and, when it is a measurement, every number a table reads) at
/// `path` (a name of `trials/`). The fuzz targets and their regression
/// tests go through here.
pub fn check_record_text(path: &Path, text: &str) -> Result<TrialRecord, LoadError> {
    let r: TrialRecord = parse_doc(
        path,
        text,
        xrunbench_schema::trial::TRIAL_SCHEMA,
        "trial record",
    )?;
    if r.measured().is_some() {
        check_measured(path, &r)?;
    }
    Ok(r)
}

/// The longest a trial can last, s: its spec carries every duration as
/// whole µs in a u64, so no figure measured within one trial is longer.
/// Bounding by it also keeps every sum over trials finite.
const MAX_TRIAL_SECONDS: f64 = u64::MAX as f64 / 1e6;

/// The unit of a duration field.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Seconds,
    Millis,
    Micros,
}

impl Unit {
    fn per_second(self) -> f64 {
        match self {
            Unit::Seconds => 1.0,
            Unit::Millis => 1e3,
            Unit::Micros => 1e6,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Millis => "ms",
            Unit::Micros => "us",
        }
    }
}

/// A number as the user wrote it, readable also when huge or tiny.
fn show(v: f64) -> String {
    let a = v.abs();
    if v.is_finite() && a != 0.0 && !(1e-6..1e15).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `field` (in `unit`) must be a duration a trial can have.
fn duration(path: &Path, field: &str, v: f64, unit: Unit) -> Result<(), LoadError> {
    let max = MAX_TRIAL_SECONDS * unit.per_second();
    if v.is_finite() && v >= 0.0 && v <= max {
        return Ok(());
    }
    Err(LoadError(format!(
        "{}: {field} = {}: expected a duration in {} from 0 to {} (the longest trial a spec can \
         ask for)",
        path.display(),
        show(v),
        unit.name(),
        show(max)
    )))
}

/// Checks what the tables and verdicts read from a measured trial record:
/// the embedded reports' schemas, every duration, and the underrun rate
/// against the count and wall time it is defined by.
pub fn check_measured(path: &Path, record: &TrialRecord) -> Result<(), LoadError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let stem = record.trial.stem();
    if name.as_deref() != Some(&format!("{stem}.json")) {
        let shown = one_line(&stem);
        return Err(LoadError(format!(
            "{}: holds trial `{shown}` (trial.config `{}`, trial.k {}): expected it in {shown}.json",
            path.display(),
            one_line(&record.trial.config),
            record.trial.k
        )));
    }
    if let Some(p) = &record.player {
        check_player(path, p)?;
    }
    if let Some(l) = &record.load {
        if l.schema != HACKBENCH_SCHEMA {
            return Err(LoadError(format!(
                "{}: load.schema is `{}`: expected `{HACKBENCH_SCHEMA}`",
                path.display(),
                one_line(&l.schema)
            )));
        }
        if let Some(s) = l.params.duration_s {
            duration(path, "load.params.duration_s", s, Unit::Seconds)?;
        }
        check_kept_rounds(path, l)?;
        // The rounds ran one after another within one trial: their sum is
        // a duration too (and the tables add them up).
        let total = l
            .rounds_us
            .iter()
            .try_fold(0u64, |sum, &us| sum.checked_add(us));
        if total.is_none() {
            return Err(LoadError(format!(
                "{}: load.rounds_us sums to more than {} us: expected the round times of one \
                 trial in us (the longest trial a spec can ask for)",
                path.display(),
                u64::MAX
            )));
        }
    }
    Ok(())
}

/// A load report's kept rounds agree with its counts: rounds 1, 1+k, 1+2k,
/// … of `rounds_completed` (k a power of two), each in both lists, all of
/// them within the exact total.
fn check_kept_rounds(path: &Path, l: &HackbenchReport) -> Result<(), LoadError> {
    let fail = |what: String| Err(LoadError(format!("{}: load.{what}", path.display())));
    let k = l.rounds_kept_every;
    if !k.is_power_of_two() {
        return fail(format!(
            "rounds_kept_every is {k}: expected a power of two (1: every round kept)"
        ));
    }
    // Reports from before rounds were thinned carry neither rule.
    let Some(total) = l.rounds_us_total else {
        return Ok(());
    };
    if l.rounds.len() != l.rounds_us.len() {
        return fail(format!(
            "rounds holds {} rounds and rounds_us {}: expected the same kept rounds in both",
            l.rounds.len(),
            l.rounds_us.len()
        ));
    }
    let kept = l.rounds_completed.div_ceil(k);
    if l.rounds_us.len() as u64 != kept {
        return fail(format!(
            "rounds_us holds {} rounds: expected {kept}, every {k}th of {} completed",
            l.rounds_us.len(),
            l.rounds_completed
        ));
    }
    let kept_sum = l
        .rounds_us
        .iter()
        .try_fold(0u64, |sum, &us| sum.checked_add(us));
    if !kept_sum.is_some_and(|s| s <= total) {
        return fail(format!(
            "rounds_us_total is {total} us, less than the kept rounds alone: expected the \
             sum over every completed round"
        ));
    }
    Ok(())
}

fn check_player(path: &Path, p: &PlayerReport) -> Result<(), LoadError> {
    if p.schema != PLAYER_SCHEMA {
        return Err(LoadError(format!(
            "{}: player.schema is `{}`: expected `{PLAYER_SCHEMA}`",
            path.display(),
            one_line(&p.schema)
        )));
    }
    let d = |field: &str, v: f64, unit| duration(path, &format!("player.{field}"), v, unit);
    d("audio_seconds", p.audio_seconds, Unit::Seconds)?;
    d("wall_seconds", p.wall_seconds, Unit::Seconds)?;
    for (i, e) in p.events.iter().enumerate() {
        d(&format!("events[{i}].at_s"), e.at_s, Unit::Seconds)?;
        d(&format!("events[{i}].gap_ms"), e.gap_ms, Unit::Millis)?;
        if let Some(v) = e.at_least_ms {
            d(&format!("events[{i}].at_least_ms"), v, Unit::Millis)?;
        }
    }
    d("totals.gap_ms_sum", p.totals.gap_ms_sum, Unit::Millis)?;
    d("totals.gap_ms_max", p.totals.gap_ms_max, Unit::Millis)?;
    d("fill.mean", p.fill.mean, Unit::Micros)?;
    d("lateness.mean", p.lateness.mean, Unit::Micros)?;
    d("process.cpu_user_ms", p.process.cpu_user_ms, Unit::Millis)?;
    d("process.cpu_sys_ms", p.process.cpu_sys_ms, Unit::Millis)?;
    for (i, s) in p.selftest_stalls.iter().enumerate() {
        d(&format!("selftest_stalls[{i}].at_s"), s.at_s, Unit::Seconds)?;
        d(
            &format!("selftest_stalls[{i}].requested_ms"),
            s.requested_ms,
            Unit::Millis,
        )?;
        d(
            &format!("selftest_stalls[{i}].actual_ms"),
            s.actual_ms,
            Unit::Millis,
        )?;
    }
    check_rate(path, p)
}

/// `totals.per_minute` is defined as the player defines it: underruns per
/// minute of wall-clock playback (0 when nothing played).
fn check_rate(path: &Path, p: &PlayerReport) -> Result<(), LoadError> {
    let t = &p.totals;
    let expected = if p.wall_seconds > 0.0 {
        t.count as f64 * 60.0 / p.wall_seconds
    } else {
        0.0
    };
    // JSON round trips may cost an ulp or so; anything else is another
    // number.
    let close = (t.per_minute - expected).abs() <= 1e-9 * expected.abs().max(1.0);
    if t.per_minute.is_finite() && expected.is_finite() && close {
        return Ok(());
    }
    Err(LoadError(format!(
        "{}: player.totals.per_minute = {}: expected underruns per minute of playback, \
         totals.count {} x 60 / wall_seconds {} = {}",
        path.display(),
        show(t.per_minute),
        t.count,
        show(p.wall_seconds),
        show(expected)
    )))
}
