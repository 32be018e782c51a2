//! `xrun-trial`: everything that must happen on the machine under test,
//! in one small board binary.
//!
//! - [`run`]: one whole trial from a [`TrialSpec`](xrunbench_schema::TrialSpec):
//!   knobs journaled, applied, **read back** and restored; the load and the
//!   player as separate processes; the record
//!   ([`TrialRecord`](xrunbench_schema::TrialRecord)).
//! - [`journal`]: the machine-wide lock and the knob journals, replayed
//!   after a SIGKILL (`xrun-trial restore`, and first thing in every run).
//! - [`probe`] and [`check`]: what the machine offers, and whether a set of
//!   specs can run on it — validation runs where the trials will.
//!
//! The runner (`cargo xtask run`, a future SSH target, a LAVA test
//! definition) only hands it a spec and reads the record back: the same
//! code runs a trial on a laptop, on a board over SSH, or in a farm with no
//! host at all.

pub mod check;
pub mod child;
pub mod fingerprint;
pub mod journal;
pub mod knobs;
pub mod machine;
pub mod monitor;
pub mod probe;
pub mod run;
pub mod say;
pub mod signals;
pub mod spec;
pub mod summarize;
pub mod trace;

/// Exit code: the trial ran (underruns are results, not failures).
pub const EXIT_RAN: u8 = 0;
/// Exit code: the trial could not run (the reason is in the record and on
/// stderr); every knob was restored.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: the spec (or the command line) is bad; nothing was touched.
pub const EXIT_BAD_SPEC: u8 = 2;
