//! The results layer: the one typed reader ([`RunDir`]) and writer
//! ([`RunWriter`]) of run directories. `run`, `bisect`, `compare`, `plot`
//! and the summary go through it; none of them reads or writes a file of a
//! run directory by itself.
//!
//! ```text
//! results/<scenario>/<UTC timestamp>[-<label>]/
//!   run.json                     RunManifest (xrunbench.run/1)
//!   trials/<stem>.json           a measurement: TrialRecord (xrunbench.trial/1)
//!   trials/<stem>.failed.json    the run's log: a TrialRecord that did not run
//!   trials/<stem>.interrupted.json                  …or was stopped,
//!   trials/<stem>.lost.json      LostTrial (xrunbench.lost-trial/1)
//!   summary.txt, summary.json    the summary
//!   comparison.{txt,md,csv,json} the comparison table
//!   plots/*.svg                  the plots
//! ```
//!
//! Writes are atomic (the schema's `write_atomic`). Reads check what they
//! read — schema, shape, and the numbers a table computes with — and name
//! the file in one line when it is wrong.

mod check;
mod layout;
mod log;
mod manifest;
mod read;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod write;

pub use self::check::LoadError;
pub use self::check::{check_measured, check_record_text};
pub use self::layout::default_results_root;
pub use self::log::LostTrial;
pub use self::manifest::{Outcome, RunManifest, RunnerInfo, RUN_SCHEMA};
pub use self::read::RunDir;
pub use self::write::RunWriter;
