//! The binaries that run on a board: their architectures, cross-built
//! for aarch64 and armv7 or native (`board build`), and the glibc they
//! need.

pub mod build;
pub mod elf;
pub mod sysroot;
mod zig;
