//! The architectures a board binary is built for, and what each one is
//! called by Rust, Debian, GCC and qemu.

use std::fmt;

/// A board's architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Arch {
    /// 64-bit ARM (Raspberry Pi 3/4/5 with a 64-bit OS, most SoC boards).
    Aarch64,
    /// 32-bit ARM, hard float (older boards, 32-bit Raspberry Pi OS).
    Armv7,
    /// A PC, or a board farm's x86 worker.
    #[value(name = "x86_64")]
    X86_64,
}

impl Arch {
    /// Every architecture we build for.
    pub const ALL: [Arch; 3] = [Arch::Aarch64, Arch::Armv7, Arch::X86_64];

    /// The name used on the command line and for output directories.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64",
            Arch::Armv7 => "armv7",
            Arch::X86_64 => "x86_64",
        }
    }

    /// Rust's target triple (glibc).
    pub fn rust_target(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64-unknown-linux-gnu",
            Arch::Armv7 => "armv7-unknown-linux-gnueabihf",
            Arch::X86_64 => "x86_64-unknown-linux-gnu",
        }
    }

    /// Debian's architecture name (`dpkg --print-architecture`).
    pub fn debian(self) -> &'static str {
        match self {
            Arch::Aarch64 => "arm64",
            Arch::Armv7 => "armhf",
            Arch::X86_64 => "amd64",
        }
    }

    /// The GNU triple: Debian's multiarch directory and the prefix of the
    /// cross compiler's programs.
    pub fn gnu_triple(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64-linux-gnu",
            Arch::Armv7 => "arm-linux-gnueabihf",
            Arch::X86_64 => "x86_64-linux-gnu",
        }
    }

    /// The qemu-user emulator for it (Debian package `qemu-user`).
    pub fn qemu(self) -> &'static str {
        match self {
            Arch::Aarch64 => "qemu-aarch64",
            Arch::Armv7 => "qemu-arm",
            Arch::X86_64 => "qemu-x86_64",
        }
    }

    /// The architecture xtask itself was built for, when it is one of
    /// ours: binaries for it are built natively and run without qemu.
    pub fn host() -> Option<Arch> {
        Arch::from_uname_machine(std::env::consts::ARCH)
    }

    /// Whether binaries for it are cross-built on this machine.
    pub fn is_cross(self) -> bool {
        Arch::host() != Some(self)
    }

    /// The architecture of a `uname -m` (or Rust `target_arch`) name;
    /// `None` for one we do not build for. The names are the SSH target's
    /// table (one home): [`crate::target::binaries::arch_of_uname`].
    pub fn from_uname_machine(machine: &str) -> Option<Arch> {
        let name = crate::target::binaries::arch_of_uname(machine)?;
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--arch`: one architecture, or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ArchChoice {
    /// aarch64.
    Aarch64,
    /// armv7 (32-bit, hard float).
    Armv7,
    /// x86_64.
    #[value(name = "x86_64")]
    X86_64,
    /// Every architecture above.
    All,
}

/// The architectures a list of `--arch` choices names, each once, in the
/// order of [`Arch::ALL`].
pub fn resolve(choices: &[ArchChoice]) -> Vec<Arch> {
    Arch::ALL
        .into_iter()
        .filter(|a| {
            choices.iter().any(|c| match c {
                ArchChoice::All => true,
                ArchChoice::Aarch64 => *a == Arch::Aarch64,
                ArchChoice::Armv7 => *a == Arch::Armv7,
                ArchChoice::X86_64 => *a == Arch::X86_64,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_means_every_arch_once_in_table_order() {
        assert_eq!(resolve(&[ArchChoice::All]), Arch::ALL);
        assert_eq!(
            resolve(&[ArchChoice::Armv7, ArchChoice::Aarch64, ArchChoice::Armv7]),
            [Arch::Aarch64, Arch::Armv7]
        );
    }

    /// `board build --arch` and a scenario's `[target] arch` name the same
    /// architectures, and where `board build` puts them is where the SSH
    /// target looks.
    #[test]
    fn the_ssh_target_and_board_build_agree_on_arches() {
        let ours: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(ours, crate::target::binaries::ARCHES);
    }

    #[test]
    fn uname_names_map_to_our_arches() {
        assert_eq!(Arch::from_uname_machine("armv7l"), Some(Arch::Armv7));
        assert_eq!(Arch::from_uname_machine("aarch64"), Some(Arch::Aarch64));
        assert_eq!(Arch::from_uname_machine("riscv64"), None);
    }

    /// Rust's target names and Debian's must agree on what they describe:
    /// the target triple starts with the arch's name, and the GNU triple
    /// names the same ABI (hard float for armv7).
    #[test]
    fn names_agree_with_each_other() {
        for a in Arch::ALL {
            assert!(a.rust_target().starts_with(a.name()), "{a}");
            assert_eq!(
                a.rust_target().ends_with("gnueabihf"),
                a.gnu_triple().ends_with("gnueabihf"),
                "{a}"
            );
        }
    }
}
