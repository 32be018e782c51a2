//! The binaries that run on a board: their architectures, cross-built
//! for aarch64 and armv7 or native (`board build`), and the glibc they
//! need.

pub mod build;
pub mod elf;
pub mod sysroot;
mod zig;

/// A binary that runs on the board, and its size budget.
#[derive(Debug)]
pub struct BoardBinary {
    /// Its cargo package.
    pub package: &'static str,
    /// The binary's name.
    pub name: &'static str,
    /// The most it may weigh, stripped (bytes).
    pub budget: u64,
}

/// The board binaries. Budgets: a board's storage and RAM are small, and
/// a binary copied over a slow link on every change should be too.
pub const BINARIES: &[BoardBinary] = &[
    BoardBinary {
        package: "xrunbench-player",
        name: "xrun-player",
        budget: 2_000_000,
    },
    BoardBinary {
        package: "xrunbench-hackbench",
        name: "xrun-hackbench",
        budget: 1_000_000,
    },
    BoardBinary {
        package: "xrunbench-trial",
        name: "xrun-trial",
        budget: 1_000_000,
    },
];

/// The crates that run on the board (their unit tests run under qemu).
pub const BOARD_CRATES: &[&str] = &[
    "xrunbench-schema",
    "xrunbench-wav",
    "xrunbench-player",
    "xrunbench-hackbench",
    "xrunbench-trial",
];
