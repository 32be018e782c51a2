//! The Debian packages each command needs, installed on demand: with
//! apt-get when we are root, else by printing the exact command for the
//! user to run (and exiting 2).
//!
//! The packages live in named [`Group`]s, each package once with its
//! reason; a command's [`Needs`] composes the groups it needs and names the
//! programs it starts (from `xrunbench-programs`' table, which also names
//! the packages that provide them). The automation's own lists and groups
//! (`cargo xtask lint`, `test`, `bench`) are in xtask, whose tests tie
//! every list to the programs each command starts and to the code that
//! starts them.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use xrunbench_programs::{packages, programs, Program};

use crate::arch::Arch;
use crate::util::{is_root, run_checked};

/// A Debian (12) package, and why we need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Package {
    /// Package name.
    pub name: &'static str,
    /// What needs it.
    pub why: &'static str,
}

/// Packages needed for one purpose.
#[derive(Debug)]
pub struct Group {
    /// What the group is for (printed when it is installed).
    pub name: &'static str,
    /// Its packages.
    pub packages: &'static [Package],
}

/// The package `name` (from [`packages`] when it provides a program
/// started by name), needed for `why`.
pub const fn pkg(name: &'static str, why: &'static str) -> Package {
    Package { name, why }
}

/// Building the board binaries: the player links libasound (alsa-sys finds
/// it with pkg-config); hackbench needs no system library.
pub const BUILD: Group = Group {
    name: "build",
    packages: &[
        pkg("pkg-config", "alsa-sys finds libasound with it"),
        pkg("libasound2-dev", "xrun-player links libasound (alsa crate)"),
    ],
};

/// Running a prebuilt xrun-player (`--bin-dir`): its one shared library.
pub const PLAYER_RUNTIME: Group = Group {
    name: "player runtime",
    packages: &[pkg("libasound2", "xrun-player links libasound.so.2")],
};

/// Essential packages (always installed on Debian), listed so that the
/// programs started from them are tied to an install list like any other.
pub const BASE: Group = Group {
    name: "base tools",
    packages: &[
        pkg(
            packages::UTIL_LINUX,
            "taskset and chrt (pinning, real-time priority)",
        ),
        pkg(packages::COREUTILS, "timeout and sleep"),
        pkg(packages::DASH, "sh"),
    ],
};

/// The OpenSSH client: a board's connection (the user's own client, config
/// and agent).
pub const SSH_CLIENT: Group = Group {
    name: "SSH client",
    packages: &[pkg(
        packages::OPENSSH_CLIENT,
        "ssh: the board's connection; ssh-keygen: the test board's keys",
    )],
};

/// Git, which the bisect test drives.
pub const GIT: Group = Group {
    name: "git",
    packages: &[pkg(packages::GIT, "the bisect test runs `git bisect run`")],
};

/// Cross-linking the board binaries for aarch64: rustc links with the C
/// cross compiler, against its C runtime.
pub const CROSS_AARCH64: Group = Group {
    name: "aarch64 cross toolchain",
    packages: &[
        pkg(
            packages::GCC_AARCH64,
            "aarch64-linux-gnu-gcc links aarch64-unknown-linux-gnu",
        ),
        pkg(
            "libc6-dev-arm64-cross",
            "the aarch64 C runtime and glibc it links against",
        ),
    ],
};

/// Cross-linking the board binaries for armv7 (32-bit, hard float).
pub const CROSS_ARMV7: Group = Group {
    name: "armv7 cross toolchain",
    packages: &[
        pkg(
            packages::GCC_ARMHF,
            "arm-linux-gnueabihf-gcc links armv7-unknown-linux-gnueabihf",
        ),
        pkg(
            "libc6-dev-armhf-cross",
            "the armv7 C runtime and glibc it links against",
        ),
    ],
};

/// The board's own libraries, fetched into a private sysroot through a
/// private apt state (the machine's apt configuration is not changed).
pub const BOARD_SYSROOT: Group = Group {
    name: "board sysroot",
    packages: &[
        pkg(
            packages::APT,
            "apt-get download, apt-cache (private state), apt-config (the machine's proxy)",
        ),
        pkg(
            packages::DPKG,
            "dpkg -x unpacks the board's packages into the sysroot",
        ),
    ],
};

/// The VM lab: QEMU boots a kernel with the lab's initramfs (the host's
/// sshd in it, the kernel's modules after depmod), and the host reaches it
/// over SSH.
pub const LAB: Group = Group {
    name: "VM lab",
    packages: &[
        pkg(
            packages::QEMU_SYSTEM_X86,
            "qemu-system-x86_64 boots x86_64 kernels",
        ),
        pkg(
            packages::QEMU_SYSTEM_ARM,
            "qemu-system-aarch64 and qemu-system-arm boot ARM kernels",
        ),
        pkg(packages::KMOD, "depmod: a Debian kernel's modules.dep"),
        pkg(packages::OPENSSH_SERVER, "sshd: the guest's trial channel"),
        pkg(
            packages::OPENSSH_CLIENT,
            "ssh into the guest; ssh-keygen: the lab's keys",
        ),
        pkg(
            packages::APT,
            "apt-get download of kernels and busybox (private state)",
        ),
        pkg(packages::DPKG, "dpkg-deb -x unpacks them"),
        pkg(packages::LIBC_BIN, "ldd: the libraries the guest needs"),
        pkg(
            packages::XZ_UTILS,
            "xz: a kernel's compressed modules (Debian's from 6.12)",
        ),
        pkg(packages::ZSTD, "zstd: modules compressed with zstd"),
        pkg(packages::GZIP, "gzip: modules compressed with gzip"),
    ],
};

/// Building a kernel of the lab (`lab source`, and `bisect-run` in its
/// tree): Debian's source is a .tar.xz, the build needs what the kernel's
/// own documentation lists for it (Documentation/process/changes.rst).
pub const KERNEL_BUILD: Group = Group {
    name: "kernel build",
    packages: &[
        pkg("gcc", "compiles the kernel"),
        pkg(packages::MAKE, "its build"),
        pkg("flex", "the kernel's Kconfig and dtc lexers"),
        pkg("bison", "the kernel's Kconfig parser"),
        pkg("bc", "the kernel's build computes timer constants with it"),
        pkg(
            "libelf-dev",
            "objtool (x86_64's ORC unwinder) reads ELF with it",
        ),
        pkg("libssl-dev", "the kernel's certificate tools build with it"),
        pkg(packages::XZ_UTILS, "the source tarball is .tar.xz"),
    ],
};

/// `board build --glibc`: cargo-zigbuild and zig, from pip, in a private
/// Python environment.
pub const ZIGBUILD: Group = Group {
    name: "older-glibc build",
    packages: &[pkg(
        "python3-venv",
        "python3 -m venv with pip, for pip's ziglang and cargo-zigbuild",
    )],
};

/// Debian's python3: zig's private environment is made with it, and the
/// LAVA lab's server, scheduler and worker run on it.
pub const PYTHON: Group = Group {
    name: "python3",
    packages: &[pkg(
        packages::PYTHON3_MINIMAL,
        "python3: zig's private environment; the LAVA lab's services",
    )],
};

/// What one command installs before it starts, and what it starts.
#[derive(Debug)]
pub struct Needs {
    /// The command, as the user types it after `cargo xtask` (for the
    /// tests' messages).
    pub command: &'static str,
    /// The groups it installs.
    pub groups: &'static [&'static Group],
    /// The programs it (or a test it runs) starts, by table; each one's
    /// package must be in `groups`. Read by xtask's tests only (`needs`):
    /// they are what keeps the lists from drifting.
    pub starts: &'static [&'static [Program]],
}

impl Needs {
    /// Its packages, each once, in group order.
    pub fn packages(&self) -> Vec<&'static Package> {
        packages_of(self.groups)
    }

    /// Its packages' names, each once, in group order.
    pub fn package_names(&self) -> Vec<&'static str> {
        self.packages().iter().map(|p| p.name).collect()
    }
}

/// The packages of `groups`, each once, in group order.
fn packages_of(groups: &[&'static Group]) -> Vec<&'static Package> {
    let mut out: Vec<&'static Package> = Vec::new();
    for p in groups.iter().flat_map(|g| g.packages) {
        if !out.iter().any(|q| q.name == p.name) {
            out.push(p);
        }
    }
    out
}

/// `cargo xtask run` and `bisect`: build the player and hackbench, then run
/// them (the scenario's backends are built into the player).
pub const RUN: Needs = Needs {
    command: "run",
    groups: &[&BUILD, &BASE],
    // `sh`: bisect's deploy and expect-kernel commands.
    starts: &[&[programs::SH]],
};

/// `cargo xtask run` and `bisect` with `--bin-dir`: nothing is built.
pub const RUN_PREBUILT: Needs = Needs {
    command: "run --bin-dir",
    groups: &[&PLAYER_RUNTIME, &BASE],
    starts: &[&[programs::SH]],
};

/// `run`, `bisect`, `restore` and `board check` on a board over SSH: the
/// binaries are built here (for a board of this machine's architecture),
/// and ssh reaches the board.
pub const RUN_SSH: Needs = Needs {
    command: "run --target",
    groups: &[&BUILD, &SSH_CLIENT, &BASE],
    starts: &[&[programs::SSH, programs::SH]],
};

/// The same with `--bin-dir`: nothing is built, nothing runs here but ssh
/// (and `sh`, which the unit tests quote for).
pub const RUN_SSH_PREBUILT: Needs = Needs {
    command: "run --target --bin-dir",
    groups: &[&SSH_CLIENT, &BASE],
    starts: &[&[programs::SSH, programs::SH]],
};

/// What booting a guest starts: QEMU for each guest architecture, and
/// what the initramfs is made with (modules' order, the lab's keys, the
/// board binaries' libraries).
pub const LAB_GUEST_PROGRAMS: &[Program] = &[
    programs::QEMU_X86,
    programs::QEMU_AARCH64_SYSTEM,
    programs::QEMU_ARM_SYSTEM,
    programs::DEPMOD,
    programs::XZ,
    programs::ZSTD,
    programs::GZIP,
    programs::SSH_KEYGEN,
    programs::LDD,
];

/// `run`, `bisect` and `board check` on the VM lab (`[target] vm`): the
/// binaries built here, QEMU, and ssh into the guest.
pub const RUN_VM: Needs = Needs {
    command: "run on [target] vm",
    groups: &[&BUILD, &LAB, &BASE],
    starts: &[
        &[programs::SSH, programs::SH],
        LAB_GUEST_PROGRAMS,
        &[programs::DPKG_DEB, programs::APT_CACHE],
    ],
};

/// `cargo xtask lab kernel`: apt-get download and dpkg-deb into the cache.
pub const LAB_KERNEL: Needs = Needs {
    command: "lab kernel",
    groups: &[&LAB],
    starts: &[&[programs::DPKG_DEB, programs::APT_CACHE, programs::DEPMOD]],
};

/// `cargo xtask lab source`: the lab's apt state, and a kernel build.
pub const LAB_SOURCE: Needs = Needs {
    command: "lab source",
    groups: &[&LAB, &KERNEL_BUILD, &GIT, &BASE],
    starts: &[&[
        programs::DPKG_DEB,
        programs::APT_CACHE,
        programs::GIT,
        programs::TAR,
        programs::MAKE,
        programs::SH,
    ]],
};

/// Where a run's trials run, as far as what it installs goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunsOn {
    /// This machine.
    ThisMachine,
    /// A board over SSH.
    Board,
    /// A guest of the VM lab, over SSH.
    LabGuest,
}

/// What `run` and `bisect` need: with `--bin-dir` (`prebuilt`) nothing is
/// built; on a board, ssh and not the player's runtime; on the VM lab,
/// QEMU too.
pub fn for_run(prebuilt: bool, on: RunsOn) -> &'static Needs {
    match (prebuilt, on) {
        (_, RunsOn::LabGuest) => &RUN_VM,
        (false, RunsOn::ThisMachine) => &RUN,
        (true, RunsOn::ThisMachine) => &RUN_PREBUILT,
        (false, RunsOn::Board) => &RUN_SSH,
        (true, RunsOn::Board) => &RUN_SSH_PREBUILT,
    }
}

/// `cargo xtask board build` with every option, on an x86_64 machine (the
/// board architectures cross-built): the groups [`for_board_build`]
/// chooses from. Read by the tests, which tie it to what
/// [`for_board_build`] returns (here) and to the programs the board build
/// starts (xtask's `needs`).
pub const BOARD_BUILD: Needs = Needs {
    command: "board build",
    groups: &[
        &BUILD,
        &BOARD_SYSROOT,
        &CROSS_AARCH64,
        &CROSS_ARMV7,
        &ZIGBUILD,
        &PYTHON,
    ],
    starts: &[&[
        programs::DPKG,
        programs::APT_CONFIG,
        programs::APT_CACHE,
        programs::AARCH64_GCC,
        programs::ARMV7_GCC,
        programs::PYTHON3,
    ]],
};

/// The cross toolchain for `arch`; `None` for x86_64, which is built
/// natively only (Debian has no x86_64 cross compiler for amd64).
pub fn cross_toolchain(arch: Arch) -> Option<&'static Group> {
    match arch {
        Arch::Aarch64 => Some(&CROSS_AARCH64),
        Arch::Armv7 => Some(&CROSS_ARMV7),
        Arch::X86_64 => None,
    }
}

/// What `board build` installs for these architectures: pkg-config (and
/// the host's libasound for a native build), and for each cross-built
/// one its toolchain and the sysroot tools; zig's environment with
/// `--glibc`.
pub fn for_board_build(arches: &[Arch], older_glibc: bool) -> Vec<&'static Group> {
    let mut groups: Vec<&'static Group> = vec![&BUILD];
    let cross: Vec<Arch> = arches.iter().copied().filter(|a| a.is_cross()).collect();
    if !cross.is_empty() {
        groups.push(&BOARD_SYSROOT);
    }
    groups.extend(cross.into_iter().filter_map(cross_toolchain));
    if older_glibc {
        groups.push(&ZIGBUILD);
        groups.push(&PYTHON);
    }
    groups
}

/// Exit code when packages are missing and we may not install them (as
/// for any other unusable input).
pub const EXIT_MISSING: u8 = 2;

/// What to do about the packages that are missing.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// All are there.
    Nothing,
    /// Install them (we are root).
    Install(Vec<&'static str>),
    /// Tell the user to run this command line, then stop.
    Advise(String),
}

/// The exact command line that installs `packages` as we would.
pub fn install_command(packages: &[&str]) -> String {
    format!(
        "sudo apt-get update && sudo apt-get install -y --no-install-recommends {}",
        packages.join(" ")
    )
}

/// The decision, from what is missing and whether we are root.
pub fn decide(missing: Vec<&'static str>, root: bool) -> Action {
    if missing.is_empty() {
        Action::Nothing
    } else if root {
        Action::Install(missing)
    } else {
        Action::Advise(install_command(&missing))
    }
}

/// Why a command cannot start.
#[derive(Debug, thiserror::Error)]
pub enum DepsError {
    /// Packages are missing and we may not install them.
    #[error("missing {what}; run:\n  {advice}")]
    Missing {
        /// What is missing (which packages, for what).
        what: String,
        /// The command line that installs them.
        advice: String,
    },
    /// Installing failed.
    #[error("installing {what}: {source:#}")]
    Install {
        /// What we were installing.
        what: String,
        /// What failed.
        source: anyhow::Error,
    },
}

impl DepsError {
    /// Prints the error and returns the exit code for it: 2 when the user
    /// must install packages, 1 when installing failed.
    pub fn report(&self) -> ExitCode {
        crate::say!(": {self}");
        match self {
            DepsError::Missing { .. } => ExitCode::from(EXIT_MISSING),
            DepsError::Install { .. } => ExitCode::FAILURE,
        }
    }
}

fn is_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// Installs what `needs` lacks (apt-get, as root), or fails with the exact
/// command a non-root user must run.
pub fn ensure(needs: &Needs) -> Result<(), DepsError> {
    ensure_groups(needs.groups)
}

/// Installs what `groups` lack (apt-get, as root), or fails with the exact
/// command a non-root user must run.
pub fn ensure_groups(groups: &[&'static Group]) -> Result<(), DepsError> {
    let missing: Vec<&'static str> = packages_of(groups)
        .into_iter()
        .filter(|p| !is_installed(p.name))
        .map(|p| p.name)
        .collect();
    let what = format!("Debian packages ({})", groups_of(groups, &missing));
    match decide(missing, is_root()) {
        Action::Nothing => Ok(()),
        Action::Advise(advice) => Err(DepsError::Missing { what, advice }),
        Action::Install(packages) => {
            crate::say!(": installing {what}: {}", packages.join(" "));
            apt_install(&packages).map_err(|source| DepsError::Install { what, source })
        }
    }
}

/// The names of the groups that hold any of `packages`.
fn groups_of(groups: &[&Group], packages: &[&str]) -> String {
    let names: Vec<&str> = groups
        .iter()
        .filter(|g| g.packages.iter().any(|p| packages.contains(&p.name)))
        .map(|g| g.name)
        .collect();
    names.join(", ")
}

fn apt_install(packages: &[&str]) -> anyhow::Result<()> {
    run_checked(Command::new("apt-get").args(["update", "-qq"]))?;
    run_checked(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

/// Makes sure the standard library of each Rust target is installed
/// (`rustup target add`, no root needed); without rustup, the user is told
/// what to do.
pub fn ensure_rust_targets(targets: &[&str]) -> Result<(), DepsError> {
    // The rustc cargo uses, run in the workspace so that a rustup
    // toolchain file applies.
    let sysroot = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .args(["--print", "sysroot"])
        .current_dir(xrunbench_paths::workspace_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let missing: Vec<&str> = targets
        .iter()
        .copied()
        .filter(
            |t| !matches!(&sysroot, Some(s) if s.join("lib/rustlib").join(t).join("lib").is_dir()),
        )
        .collect();
    rustup_add("target", &missing, Some(&xrunbench_paths::workspace_root()))
}

/// Adds the Rust `kind`s (`component`, `target`) in `missing` with
/// `rustup <kind> add` (no root needed), run in `dir` when given; without
/// rustup, fails with that command for the user to run.
pub fn rustup_add(kind: &str, missing: &[&str], dir: Option<&Path>) -> Result<(), DepsError> {
    if missing.is_empty() {
        return Ok(());
    }
    let what = format!("Rust {kind}s ({})", missing.join(" "));
    let advice = format!("rustup {kind} add {}", missing.join(" "));
    let has_rustup = Command::new("rustup")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_rustup {
        return Err(DepsError::Missing { what, advice });
    }
    crate::say!(": {advice}");
    let mut rustup = Command::new("rustup");
    rustup.args([kind, "add"]).args(missing);
    if let Some(dir) = dir {
        rustup.current_dir(dir);
    }
    run_checked(&mut rustup).map_err(|source| DepsError::Install { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_installs_only_the_build_prerequisites() {
        // The essential base tools: bisect's deploy commands run by `sh`.
        assert_eq!(
            RUN.package_names(),
            [
                "pkg-config",
                "libasound2-dev",
                "util-linux",
                "coreutils",
                "dash"
            ]
        );
        assert_eq!(
            RUN_PREBUILT.package_names(),
            ["libasound2", "util-linux", "coreutils", "dash"]
        );
        assert_eq!(
            RUN_SSH.package_names(),
            [
                "pkg-config",
                "libasound2-dev",
                "openssh-client",
                "util-linux",
                "coreutils",
                "dash"
            ]
        );
        assert_eq!(
            RUN_SSH_PREBUILT.package_names(),
            ["openssh-client", "util-linux", "coreutils", "dash"]
        );
        assert_eq!(
            for_run(true, RunsOn::Board).command,
            RUN_SSH_PREBUILT.command
        );
        assert_eq!(for_run(false, RunsOn::Board).command, RUN_SSH.command);
        assert_eq!(for_run(false, RunsOn::ThisMachine).command, RUN.command);
    }

    /// Whatever architectures and options `board build` is given, it
    /// installs only from its own list.
    #[test]
    fn board_build_lists_cover_every_choice() {
        let choices: [&[Arch]; 4] = [
            &[Arch::Aarch64],
            &[Arch::Armv7],
            &[Arch::X86_64],
            &Arch::ALL,
        ];
        for arches in choices {
            for zig in [false, true] {
                for g in for_board_build(arches, zig) {
                    assert!(
                        BOARD_BUILD.groups.iter().any(|b| b.name == g.name),
                        "{arches:?} (glibc: {zig}): {} is not in board build's list",
                        g.name
                    );
                }
            }
        }
    }

    #[test]
    fn packages_come_once_in_group_order() {
        let needs = Needs {
            command: "x",
            groups: &[&BUILD, &PLAYER_RUNTIME, &BUILD],
            starts: &[],
        };
        assert_eq!(
            needs.package_names(),
            ["pkg-config", "libasound2-dev", "libasound2"]
        );
    }

    // --- The decision, separated from dpkg and the uid.

    #[test]
    fn nothing_missing_means_nothing_to_do() {
        assert_eq!(decide(vec![], false), Action::Nothing);
        assert_eq!(decide(vec![], true), Action::Nothing);
    }

    #[test]
    fn root_installs_what_is_missing() {
        assert_eq!(
            decide(vec!["pkg-config", "libasound2-dev"], true),
            Action::Install(vec!["pkg-config", "libasound2-dev"])
        );
    }

    #[test]
    fn a_user_is_told_the_exact_command() {
        assert_eq!(
            decide(vec!["pkg-config", "libasound2-dev"], false),
            Action::Advise(
                "sudo apt-get update && sudo apt-get install -y --no-install-recommends \
                 pkg-config libasound2-dev"
                    .into()
            )
        );
    }

    #[test]
    fn missing_packages_exit_2_with_the_command_in_the_message() {
        let missing = vec!["pkg-config", "dash"];
        let needs = Needs {
            command: "x",
            groups: &[&BUILD, &SSH_CLIENT, &BASE],
            starts: &[],
        };
        let Action::Advise(advice) = decide(missing.clone(), false) else {
            panic!("a user is advised")
        };
        let e = DepsError::Missing {
            what: format!("Debian packages ({})", groups_of(needs.groups, &missing)),
            advice,
        };
        assert_eq!(
            e.to_string(),
            "missing Debian packages (build, base tools); run:\n  \
             sudo apt-get update && sudo apt-get install -y --no-install-recommends pkg-config dash"
        );
        assert_eq!(e.report(), ExitCode::from(EXIT_MISSING));
    }
}
