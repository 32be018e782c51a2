//! xtask's modules as a library for the fuzz targets. xtask is a binary
//! crate; its modules are compiled here again, at this crate's root (so
//! their `crate::` paths resolve as they do in xtask), from the same files.
//! The list is xtask/src/main.rs's (a unit test of xtask's fuzz module
//! checks it, and its dependencies against xtask's).
#![allow(dead_code, unused_imports, missing_docs, private_interfaces)]
#![allow(clippy::all)]

#[path = "../../xtask/src/bench/mod.rs"]
pub mod bench;
#[path = "../../xtask/src/bisect/mod.rs"]
pub mod bisect;
#[path = "../../xtask/src/board/mod.rs"]
pub mod board;
#[path = "../../xtask/src/compare/mod.rs"]
pub mod compare;
#[path = "../../xtask/src/deps.rs"]
pub mod deps;
#[path = "../../xtask/src/fuzz.rs"]
pub mod fuzz;
#[path = "../../xtask/src/gate/mod.rs"]
pub mod gate;
#[path = "../../xtask/src/junit/mod.rs"]
pub mod junit;
#[path = "../../xtask/src/lab/mod.rs"]
pub mod lab;
#[path = "../../xtask/src/lava/mod.rs"]
pub mod lava;
#[path = "../../xtask/src/plot/mod.rs"]
pub mod plot;
#[path = "../../xtask/src/results/mod.rs"]
pub mod results;
#[path = "../../xtask/src/run/mod.rs"]
pub mod run;
#[path = "../../xtask/src/soak.rs"]
pub mod soak;
#[path = "../../xtask/src/stats.rs"]
pub mod stats;
#[path = "../../xtask/src/target/mod.rs"]
pub mod target;
#[path = "../../xtask/src/test.rs"]
pub mod test;
#[path = "../../xtask/src/util.rs"]
pub mod util;
