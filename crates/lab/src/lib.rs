//! The lab below every host verb: the binaries a board runs, built for its
//! architecture ([`board`]); real kernels booted under QEMU as boards, the
//! kernels and kernel trees they boot ([`lab`]); the packages the host side
//! installs ([`deps`]); and what every verb shares: how it speaks
//! ([`say!`], [`util`]) and how it stops ([`signals`]).
//!
//! It knows nothing of scenarios, runs or results: those build on it.

pub mod board;
pub mod deps;
pub mod lab;
pub mod signals;
pub mod util;
