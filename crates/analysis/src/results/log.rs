//! The run's log: trials that are not measurements. A trial that could
//! not run or was interrupted keeps its record (`trials/<stem>.failed.json`,
//! `.interrupted.json`); one that left no record at all (its `xrun-trial`
//! died, or the link to it did) gets a [`LostTrial`]. People read them; no
//! table or verdict does.

use std::time::SystemTime;
use xrunbench_schema::doc::one_line;

use serde::{Deserialize, Serialize};
use xrunbench_schema::trial::{TrialId, TrialOutcome, TrialRecord};

/// Schema of [`LostTrial`].
pub const LOST_SCHEMA: &str = "xrunbench.lost-trial/1";

/// `trials/<stem>.lost.json` (`<stem>.attempt<N>.lost.json` for a retry):
/// a trial that left no record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LostTrial {
    /// Always [`LOST_SCHEMA`].
    pub schema: String,
    /// Which trial.
    pub trial: TrialId,
    /// Which attempt at it (1: the first run).
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// When it was given up (RFC 3339 UTC).
    pub at: String,
    /// Why: one line.
    pub reason: String,
}

fn first_attempt() -> u32 {
    1
}

impl LostTrial {
    /// Attempt `attempt` at a trial, lost now.
    pub fn new(trial: TrialId, attempt: u32, reason: String) -> Self {
        LostTrial {
            schema: LOST_SCHEMA.into(),
            trial,
            attempt,
            at: xrunbench_schema::doc::rfc3339(SystemTime::now()),
            reason,
        }
    }
}

/// One entry of the run's log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LogEntry {
    /// It could not run, or was stopped: its record (outcome not `ran`).
    Record(Box<TrialRecord>),
    /// It left no record.
    Lost(LostTrial),
}

impl LogEntry {
    /// Which trial.
    pub fn trial(&self) -> &TrialId {
        match self {
            LogEntry::Record(r) => &r.trial,
            LogEntry::Lost(l) => &l.trial,
        }
    }

    /// How it ended, in one line: `failed: …`, `interrupted by SIGINT`,
    /// `lost: …`.
    pub fn describe(&self) -> String {
        match self {
            LogEntry::Record(r) => match &r.outcome {
                // A board's words: escaped onto one line.
                TrialOutcome::Failed { reason } => format!("failed: {}", one_line(reason)),
                TrialOutcome::Interrupted { by } => format!("interrupted by {}", one_line(by)),
                // The reader never files a measurement in the log.
                TrialOutcome::Ran => "ran".into(),
            },
            LogEntry::Lost(l) => format!("lost: {}", one_line(&l.reason)),
        }
    }
}
