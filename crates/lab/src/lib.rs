//! The lab below every host verb: the architectures of boards and guests
//! ([`arch`]); the binaries a board runs, built for each ([`board`]); real kernels booted under QEMU as boards, the
//! kernels and kernel trees they boot ([`lab`]); the packages the host side
//! installs ([`deps`]); and what every verb shares: how it speaks
//! ([`say!`], [`util`]) and how it stops ([`signals`]).
//!
//! It knows nothing of scenarios, runs or results: those build on it.

pub mod arch;
pub mod board;
pub mod deps;
pub mod lab;
pub mod signals;
pub mod util;
