//! Where trials run. The runner never touches a knob or starts a player
//! itself: it talks to `xrun-trial` on the target through a spawned
//! command and its pipes — the spec on stdin (kept open: closing it stops
//! the trial, which then restores itself), progress lines on stderr, the
//! record on stdout. That process I/O is the seam: [`Local`] spawns
//! `xrun-trial` here; [`Ssh`] spawns it through `ssh` on a board (and
//! stages files with its own copy, and reconnects when the link drops),
//! and everything else is shared.

pub mod binaries;
pub mod bounded;
mod guests;
pub mod hooks;
mod local;
pub mod run;
pub mod ssh;

pub use guests::Guests;
pub use local::Local;
pub use run::{
    record_from, run_trial_on, RecordRefused, Target, TrialClock, TrialRun, Unreachable, PID_MARKER,
};
pub use ssh::Ssh;
