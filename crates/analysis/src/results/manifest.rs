//! `run.json`: what a run asked for, planned, where it ran, and how it
//! ended. Written when the run starts (outcome absent) and again when it
//! ends; read back by `compare`, `plot`, `bisect` and the summary.

use serde::{Deserialize, Serialize};
use xrunbench_schema::trial::MachineFingerprint;

use xrunbench_scenario::plan::PlannedTrial;
use xrunbench_scenario::{Scenario, ScenarioFile};

/// Schema of [`RunManifest`].
pub const RUN_SCHEMA: &str = "xrunbench.run/1";

/// `run.json`: what was asked, planned, and where it ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunManifest {
    /// Always [`RUN_SCHEMA`].
    pub schema: String,
    /// Start time (RFC 3339 UTC).
    pub started_at: String,
    /// `--label`.
    pub label: Option<String>,
    /// Where the trials ran (`local`).
    pub target: String,
    /// The scenario file as parsed.
    pub scenario_file: ScenarioFile,
    /// The scenario resolved (defaults filled, overrides merged, options
    /// applied, narrowed to what runs).
    pub scenario: Scenario,
    /// Configurations skipped for their kernel.
    pub skipped: Vec<String>,
    /// The plan.
    pub plan: Vec<PlannedTrial>,
    /// The machine the trials ran on (from the target's probe).
    pub fingerprint: MachineFingerprint,
    /// The runner that drove them.
    pub runner: RunnerInfo,
    /// How the run ended (absent while it runs).
    pub outcome: Option<Outcome>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Every planned trial ran.
    Completed,
    /// SIGINT/SIGTERM.
    Interrupted {
        /// The signal.
        signal: i32,
    },
    /// A trial failed or was lost; the run stopped there.
    Failed {
        /// Why.
        error: String,
    },
}

/// The host side of a run: which xrunbench drove it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerInfo {
    /// xtask's version.
    pub xrunbench_version: String,
    /// `git rev-parse HEAD` of the checkout it was built from, `+dirty` if
    /// it had changes.
    pub git_commit: Option<String>,
}

impl RunnerInfo {
    /// This runner.
    pub fn here() -> Self {
        RunnerInfo {
            xrunbench_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: git_commit(),
        }
    }
}

/// The commit this was built from, as `build.rs` read it.
fn git_commit() -> Option<String> {
    Some(env!("XRUNBENCH_GIT_COMMIT"))
        .filter(|c| !c.is_empty())
        .map(String::from)
}
