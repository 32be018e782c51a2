//! Reading trial specs: from a file, or exactly one JSON value from stdin
//! (the runner keeps stdin open afterwards; its end means the link is
//! gone). Every problem is one line naming where it came from and the
//! field (`player.priority`, `knobs[1].name`), and exit 2: a bad spec
//! touches nothing.

use std::path::Path;

use serde::de::IgnoredAny;
use xrunbench_schema::doc::one_line;
use xrunbench_schema::monitor::MonitorSpec;
use xrunbench_schema::trial::{AudioInput, KnobSpec, TrialSpec, TRIAL_SPEC_SCHEMA};

use crate::knobs::{is_feature_word, is_one_line, is_plain_name, is_sysctl_name};

/// A bad spec: one line for the user.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// Reads exactly one JSON value from fd 0, unbuffered, so that nothing
/// after it is swallowed and its end of file is still there to be seen.
pub fn read_one_from_stdin() -> Result<String, SpecError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = complete_value_end(&buf)? {
            return String::from_utf8(buf[..end].to_vec())
                .map_err(|_| SpecError("stdin: the spec is not UTF-8".into()));
        }
        // SAFETY: reading into a buffer we own, at most its length.
        let n = unsafe { libc::read(0, chunk.as_mut_ptr().cast(), chunk.len()) };
        match n {
            0 => {
                return Err(SpecError(if buf.iter().all(u8::is_ascii_whitespace) {
                    "stdin: no spec (end of input before a JSON document)".into()
                } else {
                    "stdin: the spec ends before its JSON document does".into()
                }))
            }
            n if n < 0 => {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(SpecError(format!("stdin: {e}")));
                }
            }
            n => buf.extend_from_slice(&chunk[..n as usize]),
        }
    }
}

/// Where the first complete JSON value in `buf` ends; `None` while it is
/// incomplete; an error when it cannot become JSON.
fn complete_value_end(buf: &[u8]) -> Result<Option<usize>, SpecError> {
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut it = serde_json::Deserializer::from_slice(buf).into_iter::<IgnoredAny>();
    match it.next() {
        Some(Ok(_)) => Ok(Some(it.byte_offset())),
        Some(Err(e)) if e.is_eof() => Ok(None),
        Some(Err(e)) => Err(SpecError(format!(
            "stdin: not JSON: {}",
            without_position(&e)
        ))),
        None => Ok(None),
    }
}

/// Reads a spec file (or `-`: one value from stdin) and parses it.
pub fn load(source: &Path) -> Result<TrialSpec, SpecError> {
    let (origin, text) = read_source(source)?;
    parse(&text, &origin)
}

fn read_source(source: &Path) -> Result<(String, String), SpecError> {
    if source == Path::new("-") {
        return Ok(("stdin".into(), read_one_from_stdin()?));
    }
    let origin = source.display().to_string();
    let text = std::fs::read_to_string(source)
        .map_err(|e| SpecError(format!("{origin}: cannot read: {e}")))?;
    Ok((origin, text))
}

/// Parses and validates one spec; errors name `origin` and the field.
pub fn parse(text: &str, origin: &str) -> Result<TrialSpec, SpecError> {
    let spec: TrialSpec = serde_json::from_str(text).map_err(|e| located(text, origin, &e))?;
    validate(&spec).map_err(|m| SpecError(format!("{origin}: {m}")))?;
    Ok(spec)
}

/// Parses every spec in `text`: JSON documents one after another (or one
/// array of them).
pub fn parse_many(text: &str, origin: &str) -> Result<Vec<TrialSpec>, SpecError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let specs: Vec<TrialSpec> =
            serde_json::from_str(text).map_err(|e| located(text, origin, &e))?;
        for (i, s) in specs.iter().enumerate() {
            validate(s).map_err(|m| SpecError(format!("{origin}: [{i}].{m}")))?;
        }
        return Ok(specs);
    }
    let mut out = Vec::new();
    for next in serde_json::Deserializer::from_str(text).into_iter::<TrialSpec>() {
        let spec = next.map_err(|e| located(text, origin, &e))?;
        validate(&spec).map_err(|m| SpecError(format!("{origin}: spec {}: {m}", out.len() + 1)))?;
        out.push(spec);
    }
    if out.is_empty() {
        return Err(SpecError(format!("{origin}: no spec")));
    }
    Ok(out)
}

/// Reads every spec from files (`-`: all of stdin).
pub fn load_many(sources: &[std::path::PathBuf]) -> Result<Vec<TrialSpec>, SpecError> {
    let mut out = Vec::new();
    for s in sources {
        if s == Path::new("-") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| SpecError(format!("stdin: {e}")))?;
            out.extend(parse_many(&text, "stdin")?);
        } else {
            let (origin, text) = read_source(s)?;
            out.extend(parse_many(&text, &origin)?);
        }
    }
    Ok(out)
}

/// serde_json's message without its ` at line L column C` tail.
fn without_position(e: &serde_json::Error) -> String {
    // The spec's own strings quoted in it (an unknown field's name) are
    // escaped, so that the error stays one line.
    let s = one_line(&e.to_string());
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// `ORIGIN: FIELD: message (line L, column C)`.
fn located(text: &str, origin: &str, e: &serde_json::Error) -> SpecError {
    let msg = without_position(e);
    if e.line() == 0 {
        return SpecError(format!("{origin}: {msg}"));
    }
    let mut offset = byte_offset(text, e.line(), e.column());
    // A value's conversion error is reported once the closing bracket that
    // follows it was read: the field is still the one inside.
    if offset > 0 && matches!(text.as_bytes().get(offset - 1), Some(b'}' | b']')) {
        offset -= 1;
    }
    let path = json_path_at(text, offset);
    let field = if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    };
    SpecError(format!(
        "{origin}: {field}{msg} (line {}, column {})",
        e.line(),
        e.column()
    ))
}

fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (start + column).min(text.len())
}

/// The field being read at byte `offset` of a JSON text, as
/// `player.priority` or `knobs[1].name`: a small scanner over the text
/// before it (it need only be valid JSON up to there).
pub fn json_path_at(text: &str, offset: usize) -> String {
    enum Frame {
        Object { key: String, expecting_key: bool },
        Array { index: usize },
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut current = String::new();
    // The offset comes from a parser's line and column, which may point
    // inside a multi-byte character: scan up to the character it is in.
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    for c in text[..end].chars() {
        if in_string {
            if escaped {
                escaped = false;
                current.push(c);
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                if let Some(Frame::Object {
                    key,
                    expecting_key: expecting @ true,
                }) = stack.last_mut()
                {
                    *key = std::mem::take(&mut current);
                    *expecting = false;
                }
            } else {
                current.push(c);
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                current.clear();
            }
            '{' => stack.push(Frame::Object {
                key: String::new(),
                expecting_key: true,
            }),
            '[' => stack.push(Frame::Array { index: 0 }),
            '}' | ']' => {
                stack.pop();
            }
            ',' => match stack.last_mut() {
                Some(Frame::Object { expecting_key, .. }) => *expecting_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            _ => {}
        }
    }
    let mut path = String::new();
    for f in &stack {
        match f {
            Frame::Object { key, .. } if !key.is_empty() => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Object { .. } => {}
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

/// What serde cannot check: names that become paths, ranges, and the
/// relations between fields. The error is `field: problem`, on one line:
/// the strings of the spec it quotes are escaped here, once for every
/// check.
pub fn validate(s: &TrialSpec) -> Result<(), String> {
    check(s).map_err(|m| one_line(&m))
}

/// [`validate`]'s checks, quoting the spec's strings as they are.
fn check(s: &TrialSpec) -> Result<(), String> {
    if s.schema != TRIAL_SPEC_SCHEMA {
        return Err(format!(
            "schema: `{}`, expected `{TRIAL_SPEC_SCHEMA}`",
            s.schema
        ));
    }
    for (field, name) in [
        ("trial.scenario", &s.trial.scenario),
        ("trial.config", &s.trial.config),
    ] {
        if !is_plain_name(name) {
            return Err(format!(
                "{field}: `{name}` must be letters, digits, `.`, `_` or `-` (it names files)"
            ));
        }
    }
    for (i, k) in s.knobs.iter().enumerate() {
        validate_knob(k).map_err(|m| format!("knobs[{i}].{m}"))?;
    }
    if s.pm_qos_us.is_some_and(|us| i32::try_from(us).is_err()) {
        return Err("pm_qos_us: above 2147483647".into());
    }
    if s.duration_us == 0 {
        return Err("duration_us: must be above 0".into());
    }
    if let Some(load) = &s.load {
        if load.start_delay_us >= s.duration_us {
            return Err(format!(
                "load.start_delay_us: {} must be shorter than duration_us {}",
                load.start_delay_us, s.duration_us
            ));
        }
        let h = &load.hackbench;
        if h.groups == 0 || h.fds == 0 || h.loops == 0 || h.datasize == 0 {
            return Err(
                "load.hackbench: groups, fds, loops and datasize must be at least 1".into(),
            );
        }
    }
    if let Some(m) = &s.monitor {
        validate_monitor(m)?;
    }
    let p = &s.player;
    if p.buffer_time_us == Some(0) || p.period_time_us == Some(0) {
        return Err("player: buffer_time_us and period_time_us must be above 0".into());
    }
    if let (Some(b), Some(per)) = (p.buffer_time_us, p.period_time_us) {
        if per >= b {
            return Err(format!(
                "player.period_time_us: {per} must be shorter than buffer_time_us {b}"
            ));
        }
    }
    if p.device
        .as_deref()
        .is_some_and(|d| d.is_empty() || !is_one_line(d))
    {
        return Err("player.device: must be a non-empty single line".into());
    }
    match &s.audio {
        AudioInput::File(f) if f.as_os_str().is_empty() => Err("audio.file: empty path".into()),
        AudioInput::File(_) => Ok(()),
        AudioInput::Tone(t) => {
            if t.rate == 0 || t.channels == 0 {
                return Err("audio.tone: rate and channels must be at least 1".into());
            }
            if !(t.tone_hz.is_finite() && t.tone_hz > 0.0 && t.tone_hz < f64::from(t.rate) / 2.0) {
                return Err(format!(
                    "audio.tone.tone_hz: {} Hz must be above 0 and below half the rate ({} Hz)",
                    t.tone_hz,
                    t.rate / 2
                ));
            }
            if t.seconds.is_some_and(|x| !(x.is_finite() && x > 0.0)) {
                return Err("audio.tone.seconds: must be above 0".into());
            }
            Ok(())
        }
    }
}

/// `xrun-trial run --monitor` / `--trace`: turn the monitor (its latency
/// threads) or the trace on over what the spec says. `--trace` alone on a
/// spec without a monitor traces without measuring latency.
pub fn monitor_from_flags(spec: &mut TrialSpec, monitor: bool, trace: bool) {
    if !monitor && !trace {
        return;
    }
    let had = spec.monitor.is_some();
    let m = spec.monitor.get_or_insert_with(MonitorSpec::default);
    if monitor {
        m.latency = true;
    } else if !had {
        m.latency = false;
    }
    if trace {
        m.trace = true;
    }
}

fn validate_monitor(m: &MonitorSpec) -> Result<(), String> {
    if !(1..=99).contains(&m.priority) {
        return Err(format!(
            "monitor.priority: {} is not a SCHED_FIFO priority (1-99)",
            m.priority
        ));
    }
    if !(100..=1_000_000).contains(&m.interval_us) {
        return Err(format!(
            "monitor.interval_us: {} must be between 100 and 1000000",
            m.interval_us
        ));
    }
    if m.threshold_us == 0 {
        return Err("monitor.threshold_us: must be above 0".into());
    }
    if !(64..=1_048_576).contains(&m.trace_buffer_kb) {
        return Err(format!(
            "monitor.trace_buffer_kb: {} must be between 64 and 1048576",
            m.trace_buffer_kb
        ));
    }
    if !m.latency && !m.trace {
        return Err("monitor: latency and trace are both off: nothing to do".into());
    }
    Ok(())
}

fn validate_knob(k: &KnobSpec) -> Result<(), String> {
    let value_ok = |v: &str| {
        if v.is_empty() || !is_one_line(v) {
            Err(format!("value: `{v}` must be a non-empty single line"))
        } else {
            Ok(())
        }
    };
    match k {
        KnobSpec::Sysctl { name, value } => {
            if !is_sysctl_name(name) {
                return Err(format!(
                    "name: `{name}` is not a dotted sysctl name like kernel.sched_autogroup_enabled"
                ));
            }
            value_ok(value)
        }
        KnobSpec::SchedFeature { word } if is_feature_word(word) => Ok(()),
        KnobSpec::SchedFeature { word } => Err(format!(
            "word: `{word}` is not a feature word like NEXT_BUDDY or NO_NEXT_BUDDY"
        )),
        KnobSpec::SchedDebug { file, value } => {
            if file == "features" || !is_plain_name(file) {
                return Err(format!(
                    "file: `{file}` is not a file name under /sys/kernel/debug/sched/ (features: use sched_feature)"
                ));
            }
            value_ok(value)
        }
        KnobSpec::Governor { value } if is_plain_name(value) => Ok(()),
        KnobSpec::Governor { value } => Err(format!(
            "value: `{value}` is not a governor name like performance"
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_next_to_a_multibyte_character_is_named_not_a_panic() {
        // Found by the trial_spec fuzz target: the error's column fell
        // inside a two-byte character, and slicing the text there panicked.
        let text = "{\u{70c}chema\":\"xrunbench.trial-spec/1\"}";
        let e = parse_many(text, "fuzz").unwrap_err();
        assert!(!e.0.contains('\n'), "{e:?}");
        for offset in 0..=text.len() + 1 {
            let _ = json_path_at(text, offset);
        }
    }

    use super::*;

    const MIN: &str = r#"{
  "schema": "xrunbench.trial-spec/1",
  "trial": { "scenario": "s", "config": "a", "k": 1, "seq": 1 },
  "audio": { "tone": {} },
  "player": { "backend": "virtual" },
  "warmup_us": 0,
  "duration_us": 1000000
}"#;

    #[test]
    fn minimal_spec_parses() {
        let s = parse(MIN, "t.json").unwrap();
        assert_eq!(s.trial.stem(), "a-1");
    }

    #[test]
    fn unknown_and_mistyped_fields_name_the_field() {
        let t = MIN.replace(
            "\"backend\": \"virtual\"",
            "\"backend\": \"virtual\", \"bufer\": 1",
        );
        let e = parse(&t, "t.json").unwrap_err().0;
        assert!(
            e.starts_with("t.json: player.bufer: unknown field `bufer`"),
            "{e}"
        );
        let t = MIN.replace("\"backend\": \"virtual\"", "\"priority\": \"fifo:0\"");
        let e = parse(&t, "t.json").unwrap_err().0;
        assert!(e.contains("player.priority: priority `fifo:0`"), "{e}");
        let t = MIN.replace("\"k\": 1", "\"k\": \"one\"");
        let e = parse(&t, "t.json").unwrap_err().0;
        assert!(e.contains("trial.k: invalid type"), "{e}");
        assert_eq!(e.lines().count(), 1);
    }

    #[test]
    fn semantic_errors_name_the_field() {
        let t = MIN.replace(
            "\"audio\"",
            "\"knobs\": [{ \"kind\": \"sysctl\", \"name\": \"../etc\", \"value\": \"1\" }], \"audio\"",
        );
        let e = parse(&t, "t.json").unwrap_err().0;
        assert!(e.starts_with("t.json: knobs[0].name: `../etc`"), "{e}");
        let t = MIN.replace("\"config\": \"a\"", "\"config\": \"../a\"");
        assert!(parse(&t, "x").unwrap_err().0.contains("trial.config"));
    }

    #[test]
    fn a_string_of_the_spec_is_quoted_on_one_line_in_every_error() {
        // Found by the trial_spec fuzz target: a schema holding a newline
        // broke the error over two lines; validate() escapes whatever
        // string of the spec any of its checks quotes.
        let knob =
            |k: &str| MIN.replace("\"audio\"", &format!("\"knobs\": [{{ {k} }}], \"audio\""));
        for (text, quoted) in [
            (
                MIN.replace("trial-spec/1", "trial-spec\\n/1"),
                "schema: `xrunbench.trial-spec\\n/1`",
            ),
            (
                MIN.replace("\"config\": \"a\"", "\"config\": \"a\\nb\""),
                "trial.config: `a\\nb`",
            ),
            (
                knob(r#""kind": "sysctl", "name": "kernel.x", "value": "1\n2""#),
                "knobs[0].value: `1\\n2`",
            ),
            (
                knob(r#""kind": "sysctl", "name": "kernel.\nx", "value": "1""#),
                "knobs[0].name: `kernel.\\nx`",
            ),
            (
                knob(r#""kind": "sched_feature", "word": "NEXT\nBUDDY""#),
                "knobs[0].word: `NEXT\\nBUDDY`",
            ),
            (
                knob(r#""kind": "sched_debug", "file": "a\nb", "value": "1""#),
                "knobs[0].file: `a\\nb`",
            ),
            (
                knob(r#""kind": "governor", "value": "a\nb""#),
                "knobs[0].value: `a\\nb`",
            ),
        ] {
            let e = parse(&text, "t.json").unwrap_err().0;
            assert!(!e.contains('\n'), "{e:?}");
            assert!(e.starts_with(&format!("t.json: {quoted}")), "{e}");
        }
    }

    #[test]
    fn a_stream_of_specs_parses_one_by_one() {
        let two = format!("{MIN}\n{MIN}");
        assert_eq!(parse_many(&two, "stdin").unwrap().len(), 2);
        let arr = format!("[{MIN},{MIN}]");
        assert_eq!(parse_many(&arr, "stdin").unwrap().len(), 2);
    }

    #[test]
    fn value_end_is_found_in_a_growing_buffer() {
        assert_eq!(complete_value_end(b"{\"a\": [1, 2").unwrap(), None);
        assert_eq!(
            complete_value_end(b"{\"a\": [1, 2]} trailing").unwrap(),
            Some(13)
        );
        assert!(complete_value_end(b"{\"a\" 1}").is_err());
    }
}
