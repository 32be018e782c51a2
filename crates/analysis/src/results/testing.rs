//! Run directories for unit tests, built from the golden templates (a real
//! trial record and a real `run.json`) and written through [`RunWriter`].

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use xrunbench_schema::trial::TrialRecord;

use super::{RunManifest, RunWriter};

const TRIAL_TEMPLATE: &str = include_str!("../../../../xtask/tests/golden/trial-template.json");
const RUN_TEMPLATE: &str = include_str!("../../../../xtask/tests/golden/run-template.json");

/// The template trial as `config`-`k` of scenario `synthetic`, with `edit`
/// applied to its JSON first.
pub fn trial(config: &str, k: u32, edit: impl FnOnce(&mut Value)) -> TrialRecord {
    let mut v: Value = serde_json::from_str(TRIAL_TEMPLATE).unwrap();
    v["trial"] = json!({ "scenario": "synthetic", "config": config, "k": k, "seq": k });
    edit(&mut v);
    serde_json::from_value(v).unwrap()
}

/// The template manifest for scenario `synthetic` with `configs`.
pub fn manifest(configs: &[&str]) -> RunManifest {
    let mut v: Value = serde_json::from_str(RUN_TEMPLATE).unwrap();
    let config = v["scenario"]["configs"][0].clone();
    v["scenario"]["name"] = json!("synthetic");
    v["scenario"]["configs"] = configs
        .iter()
        .map(|c| {
            let mut one = config.clone();
            one["name"] = json!(c);
            one
        })
        .collect();
    serde_json::from_value(v).unwrap()
}

/// A run directory in `root` with `manifest` and `records`.
pub fn write_run(root: &Path, manifest: &RunManifest, records: &[TrialRecord]) -> PathBuf {
    let out = RunWriter::create(root, "synthetic", None).unwrap();
    out.manifest(manifest).unwrap();
    for r in records {
        out.trial_record(&r.trial, r).unwrap();
    }
    out.dir().to_path_buf()
}
