//! The one error a scenario file gets.

/// A problem with the scenario file: one line, naming the file and where.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ScenarioError(pub String);
