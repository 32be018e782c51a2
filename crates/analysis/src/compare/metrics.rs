//! The metrics a comparison table shows. They live in the schema crate
//! (`xrunbench_schema::metrics`), where a board with no host — a LAVA test
//! definition's `xrun-trial summarize` — computes the very same numbers;
//! the host uses them through this module.

pub use xrunbench_schema::metrics::{playback_seconds, Direction, Metric};
