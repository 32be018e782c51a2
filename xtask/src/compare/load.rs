//! Reading run directories back: `run.json` for the configuration order,
//! label, scenario and machine, `trials/*.json` for the measurements. Every
//! problem is one line naming the file and what was expected.

use std::path::{Path, PathBuf};

use serde_json::Value;

use xrunbench_schema::trial::{TrialRecord, TRIAL_SCHEMA};

/// A bad run directory or trial file: one line for the user (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// One run directory as read from disk.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// Where it is.
    pub path: PathBuf,
    /// `--label` of the run, else the directory's name.
    pub label: String,
    /// Scenario name.
    pub scenario: String,
    /// Trial length, s (from the scenario; else from the reports).
    pub trial_seconds: f64,
    /// CPU model × count, if `run.json` says.
    pub machine: Option<String>,
    /// Configuration names in scenario order.
    pub configs: Vec<String>,
    /// Every measured trial record (outcome `ran`).
    pub records: Vec<TrialRecord>,
}

impl RunDir {
    /// Reads `dir`. A directory without trials is an error (there is
    /// nothing to compare), as is any trial file that does not parse.
    pub fn load(dir: &Path) -> Result<RunDir, LoadError> {
        let trials_dir = dir.join("trials");
        if !trials_dir.is_dir() {
            return Err(LoadError(format!(
                "{}: not a run directory: expected a trials/ directory \
                 (results/<scenario>/<timestamp>/trials/*.json)",
                dir.display()
            )));
        }
        let records = load_trials(&trials_dir)?;
        if records.is_empty() {
            return Err(LoadError(format!(
                "{}: no trial records (expected trials/<config>-<k>.json): did the run finish a trial?",
                trials_dir.display()
            )));
        }
        let manifest = read_manifest(dir)?;
        let label = manifest
            .as_ref()
            .and_then(|m| m.get("label"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| dir_name(dir));
        let mut configs: Vec<String> = manifest
            .as_ref()
            .and_then(|m| m.pointer("/scenario/configs"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        // Configurations with trials but not in run.json (or no run.json):
        // append in name order so the table is still complete.
        let mut extra: Vec<String> = records
            .iter()
            .map(|r| r.trial.config.clone())
            .filter(|c| !configs.contains(c))
            .collect();
        extra.sort();
        extra.dedup();
        configs.extend(extra);
        configs.retain(|c| records.iter().any(|r| &r.trial.config == c));
        let scenario = records[0].trial.scenario.clone();
        let trial_seconds = manifest
            .as_ref()
            .and_then(|m| m.pointer("/scenario/duration"))
            .and_then(duration_seconds)
            .unwrap_or_else(|| super::metrics::playback_seconds(&records[0]));
        let machine = manifest.as_ref().and_then(|m| {
            let model = m.pointer("/fingerprint/cpu_model")?.as_str()?;
            let count = m.pointer("/fingerprint/cpu_count")?.as_u64()?;
            Some(format!("{model} x {count} CPUs"))
        });
        Ok(RunDir {
            path: dir.to_path_buf(),
            label,
            scenario,
            trial_seconds,
            machine,
            configs,
            records,
        })
    }

    /// This configuration's records, in trial order.
    pub fn trials_of(&self, config: &str) -> Vec<&TrialRecord> {
        let mut v: Vec<&TrialRecord> = self
            .records
            .iter()
            .filter(|r| r.trial.config == config)
            .collect();
        v.sort_by_key(|r| r.trial.k);
        v
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// The scenario's duration as `run.json` stores it (a span with a unit,
/// `"10s"`).
fn duration_seconds(v: &Value) -> Option<f64> {
    serde_json::from_value::<crate::run::units::Span>(v.clone())
        .ok()
        .map(|s| s.as_secs_f64())
}

fn read_manifest(dir: &Path) -> Result<Option<Value>, LoadError> {
    let p = dir.join("run.json");
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LoadError(format!("{}: cannot read: {e}", p.display()))),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        LoadError(format!(
            "{}: expected a JSON run manifest (xrunbench.run/1): {e}",
            p.display()
        ))
    })
}

fn load_trials(dir: &Path) -> Result<Vec<TrialRecord>, LoadError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| LoadError(format!("{}: cannot list: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| crate::run::store::is_measured_record_name(&n))
        })
        .collect();
    paths.sort();
    let records: Vec<TrialRecord> = paths
        .iter()
        .map(|p| load_trial(p))
        .collect::<Result<_, _>>()?;
    // Only measurements count; failed or interrupted trials are log entries.
    Ok(records
        .into_iter()
        .filter(|r| r.measured().is_some())
        .collect())
}

/// Reads one trial record, checking its schema first so that an old or
/// foreign file gets a clear message rather than a serde field error.
pub fn load_trial(p: &Path) -> Result<TrialRecord, LoadError> {
    let text = std::fs::read_to_string(p)
        .map_err(|e| LoadError(format!("{}: cannot read: {e}", p.display())))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        LoadError(format!(
            "{}: expected a JSON trial record ({TRIAL_SCHEMA}): {e}",
            p.display()
        ))
    })?;
    let schema = value.get("schema").and_then(Value::as_str).unwrap_or("");
    if schema != TRIAL_SCHEMA {
        return Err(LoadError(format!(
            "{}: expected schema `{TRIAL_SCHEMA}`, found `{schema}`",
            p.display()
        )));
    }
    serde_json::from_value(value).map_err(|e| {
        LoadError(format!(
            "{}: not a valid {TRIAL_SCHEMA} record: {e}",
            p.display()
        ))
    })
}
