//! Validation of a scenario against the machine that will run it. The
//! host checks what only the host can (the scenario itself, `--only`, the
//! WAV's header before it is copied anywhere); the rest comes from the
//! target (`xrun-trial probe` for the kernel, `xrun-trial check` for
//! knobs, CPUs, priorities, devices). All problems are reported at once,
//! one line each, before anything runs.

use std::path::Path;
use xrunbench_schema::doc::one_line;

use xrunbench_schema::probe::CheckReport;

use super::scenario::{AudioSource, Scenario};

/// Applies `--only` and skips configurations meant for another kernel
/// than `kernel` (the target's `uname -r`). Returns the narrowed scenario
/// and one line per configuration skipped.
pub fn narrow(
    mut s: Scenario,
    only: &[String],
    kernel: &str,
) -> Result<(Scenario, Vec<String>), Vec<String>> {
    let file = s.path.display().to_string();
    check_only(&s, only)?;
    if !only.is_empty() {
        s.configs.retain(|c| only.contains(&c.name));
    }
    let mut skipped = Vec::new();
    s.configs.retain(|c| match &c.kernel {
        Some(k) if k != kernel => {
            skipped.push(format!(
                "{file}: skipping config `{}`: it expects kernel `{k}`, this machine runs `{kernel}`",
                c.name
            ));
            false
        }
        _ => true,
    });
    if s.configs.is_empty() {
        let mut errors = vec![format!(
            "{file}: nothing to run: every configuration was skipped"
        )];
        errors.extend(skipped);
        return Err(errors);
    }
    Ok((s, skipped))
}

/// `--only` names configurations the scenario has.
pub fn check_only(s: &Scenario, only: &[String]) -> Result<(), Vec<String>> {
    let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
    let errors: Vec<String> = only
        .iter()
        .filter(|n| !names.contains(&n.as_str()))
        .map(|n| {
            format!(
                "{}: --only {n}: no such configuration (have: {})",
                s.path.display(),
                names.join(", ")
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// What only the host can check: each WAV file is there and is a PCM WAV
/// (read on the host, before it is copied to a target). Returns
/// `(configuration, line)` for each problem.
pub fn host_checks(s: &Scenario) -> Vec<(String, String)> {
    let file = s.path.display();
    let mut out = Vec::new();
    for c in &s.configs {
        if let AudioSource::File(p) = &c.audio.source {
            if let Err(e) = check_regular_file(p).and_then(|()| check_wav(p)) {
                out.push((
                    c.name.clone(),
                    format!("{file}: config `{}`: audio.file: {e}", c.name),
                ));
            }
        }
    }
    out
}

/// The player and the trial read only regular files, and so do we: opening
/// a FIFO for reading waits for a writer (no signal ends that wait), and a
/// device or directory is not a recording. `stat` does not open it.
fn check_regular_file(path: &Path) -> Result<(), String> {
    let Ok(meta) = std::fs::metadata(path) else {
        // Missing or unreadable: check_wav says which.
        return Ok(());
    };
    if meta.is_file() {
        return Ok(());
    }
    let what = xrunbench_wav::read::kind_of(meta.file_type());
    Err(format!(
        "{}: not a regular file ({what}): expected a WAV file",
        path.display()
    ))
}

fn check_wav(path: &Path) -> Result<(), String> {
    if !path.exists() {
        return Err(format!("{}: no such file", path.display()));
    }
    // The player's own reader: its errors name the file and what was expected.
    xrunbench_wav::WavStream::open(path)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The target's problems as lines in the scenario's terms: the spec's
/// field becomes the scenario key a user wrote. A configuration whose WAV
/// the host already refused is not reported twice.
pub fn target_lines(s: &Scenario, report: &CheckReport, host: &[(String, String)]) -> Vec<String> {
    let file = s.path.display();
    report
        .problems
        .iter()
        .filter(|p| {
            !(p.field.as_deref() == Some("audio.file") && host.iter().any(|(c, _)| *c == p.config))
        })
        .map(|p| {
            let field = p
                .field
                .as_deref()
                .map(|f| format!("{}: ", one_line(&scenario_key(f))))
                .unwrap_or_default();
            // The target's words, escaped: a board may print anything.
            format!(
                "{file}: config `{}`: {field}{}",
                one_line(&p.config),
                one_line(&p.message)
            )
        })
        .collect()
}

/// The scenario key behind a trial spec's field.
fn scenario_key(spec_field: &str) -> String {
    match spec_field {
        "pm_qos_us" => "pm_qos_cpu_dma_latency_us".into(),
        "audio.tone" => "audio.generate".into(),
        f => match f.strip_prefix("player.") {
            Some(rest) => format!("audio.{}", rest.trim_end_matches("_us")),
            None => f.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn spec_fields_map_to_scenario_keys() {
        assert_eq!(super::scenario_key("player.cpu"), "audio.cpu");
        assert_eq!(
            super::scenario_key("player.buffer_time_us"),
            "audio.buffer_time"
        );
        assert_eq!(super::scenario_key("audio.file"), "audio.file");
        assert_eq!(
            super::scenario_key("pm_qos_us"),
            "pm_qos_cpu_dma_latency_us"
        );
    }
}
