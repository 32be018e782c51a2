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

    /// The kernel's name for it (`make ARCH=…`).
    pub fn linux(self) -> &'static str {
        match self {
            Arch::Aarch64 => "arm64",
            Arch::Armv7 => "arm",
            Arch::X86_64 => "x86_64",
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
    /// `None` for one we do not build for. (`armv8l`: a 32-bit userland on
    /// a 64-bit ARM core. A 64-bit kernel with a 32-bit userland says
    /// `aarch64`: such a board needs `arch = "armv7"` in `[target]`.)
    pub fn from_uname_machine(machine: &str) -> Option<Arch> {
        match machine.trim() {
            "aarch64" | "arm64" => Some(Arch::Aarch64),
            "armv7l" | "armv7" | "armv8l" | "arm" => Some(Arch::Armv7),
            "x86_64" | "amd64" => Some(Arch::X86_64),
            _ => None,
        }
    }

    /// The architecture our name (`[target] arch`, `--arch`) stands for.
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Our names of every architecture, for messages.
    pub fn names() -> String {
        Arch::ALL.map(Arch::name).join(", ")
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

    #[test]
    fn uname_names_map_to_our_arches() {
        assert_eq!(Arch::from_uname_machine("armv7l"), Some(Arch::Armv7));
        assert_eq!(Arch::from_uname_machine("aarch64"), Some(Arch::Aarch64));
        assert_eq!(Arch::from_uname_machine("armv8l\n"), Some(Arch::Armv7));
        assert_eq!(Arch::from_uname_machine("riscv64"), None);
        for a in Arch::ALL {
            assert_eq!(Arch::from_uname_machine(a.name()), Some(a));
            assert_eq!(Arch::from_name(a.name()), Some(a));
        }
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
