//! The programs xrunbench, its automation and its test fixtures start by
//! name, each with the Debian package that provides it; and those
//! packages' names.
//!
//! One table, two readers: the product's and `cargo xtask`'s install lists
//! (`xrunbench_host::deps`, xtask's `needs`) name their packages and the
//! programs each command starts from here, and the test fixtures
//! (`xrunbench-test-support`'s sound servers and SSH test board) check
//! that theirs are installed before they start anything, naming the
//! package when one is not. It is its own crate because the fixtures are a
//! dev-dependency and the install lists are the product's: neither may
//! depend on the other.

/// A program started by name, and the Debian package that provides it.
///
/// The test fixtures check their programs against `PATH` with it before
/// starting anything ([`first_missing`]), and the install lists of the
/// product and of `cargo xtask` name the programs they install for with
/// it; their unit tests tie the two, so the lists cannot drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    /// The name looked up in `PATH`.
    pub name: &'static str,
    /// The Debian 12 package that provides it.
    pub package: &'static str,
}

impl Program {
    /// `name`, from `package` (one of [`packages`]).
    pub const fn new(name: &'static str, package: &'static str) -> Program {
        Program { name, package }
    }
}

/// The Debian 12 packages that provide a program of [`programs`], each
/// name written once: the programs below and the install lists' groups
/// take it from here. (A package that provides no program started by
/// name is named once, in its install list's group.)
pub mod packages {
    #![allow(missing_docs, reason = "each is named for the package it names")]

    pub const ALSA_UTILS: &str = "alsa-utils";
    pub const APT: &str = "apt";
    pub const COREUTILS: &str = "coreutils";
    pub const CPIO: &str = "cpio";
    pub const DASH: &str = "dash";
    pub const DBUS_DAEMON: &str = "dbus-daemon";
    pub const DPKG: &str = "dpkg";
    pub const GCC_AARCH64: &str = "gcc-aarch64-linux-gnu";
    pub const GCC_ARMHF: &str = "gcc-arm-linux-gnueabihf";
    pub const GIT: &str = "git";
    pub const GZIP: &str = "gzip";
    pub const JACKD2: &str = "jackd2";
    pub const KMOD: &str = "kmod";
    pub const LIBC_BIN: &str = "libc-bin";
    pub const LIBXML2_UTILS: &str = "libxml2-utils";
    pub const MAKE: &str = "make";
    pub const OPENSSH_CLIENT: &str = "openssh-client";
    pub const OPENSSH_SERVER: &str = "openssh-server";
    pub const PIPEWIRE_BIN: &str = "pipewire-bin";
    pub const PULSEAUDIO: &str = "pulseaudio";
    pub const PULSEAUDIO_UTILS: &str = "pulseaudio-utils";
    pub const PYTHON3_MINIMAL: &str = "python3-minimal";
    pub const QEMU_SYSTEM_ARM: &str = "qemu-system-arm";
    pub const QEMU_SYSTEM_X86: &str = "qemu-system-x86";
    pub const QEMU_USER: &str = "qemu-user";
    pub const RT_TESTS: &str = "rt-tests";
    pub const TAR: &str = "tar";
    pub const UTIL_LINUX: &str = "util-linux";
    pub const WIREPLUMBER: &str = "wireplumber";
    pub const XZ_UTILS: &str = "xz-utils";
    pub const ZSTD: &str = "zstd";
}

/// The programs started by name: by the test fixtures (the sound servers,
/// the SSH test board), by the product (`run`, the VM lab, `board build`,
/// `lab source`) and by the automation (`cargo xtask test`, `bench`), one
/// entry each.
pub mod programs {
    use super::packages as p;
    use super::Program;

    /// The JACK server.
    pub const JACKD: Program = Program::new("jackd", p::JACKD2);
    /// Asks the JACK server whether it is up.
    pub const JACK_LSP: Program = Program::new("jack_lsp", p::JACKD2);
    /// The PulseAudio server.
    pub const PULSEAUDIO: Program = Program::new("pulseaudio", p::PULSEAUDIO);
    /// Asks the PulseAudio server whether it is up.
    pub const PACTL: Program = Program::new("pactl", p::PULSEAUDIO_UTILS);
    /// The PulseAudio keepalive stream.
    pub const PACAT: Program = Program::new("pacat", p::PULSEAUDIO_UTILS);
    /// The PipeWire server.
    pub const PIPEWIRE: Program = Program::new("pipewire", p::PIPEWIRE_BIN);
    /// Asks the PipeWire server whether it is up; creates the null sink.
    pub const PW_CLI: Program = Program::new("pw-cli", p::PIPEWIRE_BIN);
    /// PipeWire's session manager (links streams to sinks).
    pub const WIREPLUMBER: Program = Program::new("wireplumber", p::WIREPLUMBER);
    /// A private D-Bus session bus for WirePlumber (Debian 12 ships it in
    /// `dbus-daemon`, not `dbus-bin`).
    pub const DBUS_RUN_SESSION: Program = Program::new("dbus-run-session", p::DBUS_DAEMON);
    /// The bus `dbus-run-session` starts.
    pub const DBUS_DAEMON: Program = Program::new("dbus-daemon", p::DBUS_DAEMON);
    /// Runs PipeWire and WirePlumber in one session (Essential package).
    pub const SH: Program = Program::new("sh", p::DASH);
    /// Lets PipeWire come up before WirePlumber (Essential package).
    pub const SLEEP: Program = Program::new("sleep", p::COREUTILS);
    /// Pins a server to CPUs (Essential package).
    pub const TASKSET: Program = Program::new("taskset", p::UTIL_LINUX);
    /// Runs a server at SCHED_FIFO priority (Essential package).
    pub const CHRT: Program = Program::new("chrt", p::UTIL_LINUX);
    /// Tells a real package from a virtual one (the lab's and the board
    /// sysroot's private apt states; the LAVA lab's dependency closure).
    pub const APT_CACHE: Program = Program::new("apt-cache", p::APT);
    /// Unpacks Debian packages into a private prefix (kernels, sysroots,
    /// LAVA and what it imports).
    pub const DPKG_DEB: Program = Program::new("dpkg-deb", p::DPKG);
    /// The libraries a binary loads.
    pub const LDD: Program = Program::new("ldd", p::LIBC_BIN);
    /// Debian's python3 (zig's environment for `board build --glibc`; the
    /// LAVA lab's services).
    pub const PYTHON3: Program = Program::new("python3", p::PYTHON3_MINIMAL);
    /// The VM lab's x86_64 machine (and the LAVA lab's QEMU devices).
    pub const QEMU_X86: Program = Program::new("qemu-system-x86_64", p::QEMU_SYSTEM_X86);
    /// Gives the LAVA lab's PostgreSQL directory to `postgres`.
    pub const CHOWN: Program = Program::new("chown", p::COREUTILS);
    /// Runs the LAVA lab's PostgreSQL as `postgres` (initdb refuses root).
    pub const RUNUSER: Program = Program::new("runuser", p::UTIL_LINUX);
    /// The test board's SSH server (started as /usr/sbin/sshd).
    pub const SSHD: Program = Program::new("sshd", p::OPENSSH_SERVER);
    /// Makes the test board's host and client keys.
    pub const SSH_KEYGEN: Program = Program::new("ssh-keygen", p::OPENSSH_CLIENT);
    /// The SSH client that reaches the test board.
    pub const SSH: Program = Program::new("ssh", p::OPENSSH_CLIENT);

    // Those no fixture starts: the product's and the automation's.

    /// The VM lab's aarch64 machine.
    pub const QEMU_AARCH64_SYSTEM: Program =
        Program::new("qemu-system-aarch64", p::QEMU_SYSTEM_ARM);
    /// The VM lab's armv7 machine.
    pub const QEMU_ARM_SYSTEM: Program = Program::new("qemu-system-arm", p::QEMU_SYSTEM_ARM);
    /// Decompresses a kernel's modules for the guest (`.ko.xz`).
    pub const XZ: Program = Program::new("xz", p::XZ_UTILS);
    /// The same for `.ko.zst`.
    pub const ZSTD: Program = Program::new("zstd", p::ZSTD);
    /// The same for `.ko.gz`.
    pub const GZIP: Program = Program::new("gzip", p::GZIP);
    /// A kernel's modules.dep.
    pub const DEPMOD: Program = Program::new("depmod", p::KMOD);
    /// Reads the lab's initramfs back (its writer's test).
    pub const CPIO: Program = Program::new("cpio", p::CPIO);
    /// The reference player.
    pub const APLAY: Program = Program::new("aplay", p::ALSA_UTILS);
    /// The reference load generator.
    pub const HACKBENCH: Program = Program::new("hackbench", p::RT_TESTS);
    /// The reference latency measurement.
    pub const CYCLICTEST: Program = Program::new("cyclictest", p::RT_TESTS);
    /// Ends the test's CPU hog on time.
    pub const TIMEOUT: Program = Program::new("timeout", p::COREUTILS);
    /// The bisect test's `git bisect run`.
    pub const GIT: Program = Program::new("git", p::GIT);
    /// Unpacks the board's packages into the sysroot.
    pub const DPKG: Program = Program::new("dpkg", p::DPKG);
    /// Reads the machine's apt proxy settings.
    pub const APT_CONFIG: Program = Program::new("apt-config", p::APT);
    /// The linker rustc runs for aarch64.
    pub const AARCH64_GCC: Program = Program::new("aarch64-linux-gnu-gcc", p::GCC_AARCH64);
    /// The linker rustc runs for armv7.
    pub const ARMV7_GCC: Program = Program::new("arm-linux-gnueabihf-gcc", p::GCC_ARMHF);
    /// Runs aarch64 board binaries.
    pub const QEMU_AARCH64: Program = Program::new("qemu-aarch64", p::QEMU_USER);
    /// Runs armv7 board binaries.
    pub const QEMU_ARM: Program = Program::new("qemu-arm", p::QEMU_USER);
    /// Takes the JUnit XSD out of pytest's source archive.
    pub const TAR: Program = Program::new("tar", p::TAR);
    /// Builds the lab's kernels (`lab source`).
    pub const MAKE: Program = Program::new("make", p::MAKE);
    /// Validates the JUnit files against the XSD.
    pub const XMLLINT: Program = Program::new("xmllint", p::LIBXML2_UTILS);
}

/// Whether `program` is a file in a directory of `PATH`.
pub fn exists(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// The first of `programs` that is not in `PATH`, if any.
pub fn first_missing(programs: &[Program]) -> Option<&Program> {
    programs.iter().find(|p| !exists(p.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_path_has_and_names_what_it_lacks() {
        // `sh` is Essential: every Debian has it in PATH.
        assert!(exists("sh"));
        let absent = Program {
            name: "xrunbench-no-such-program",
            package: "none",
        };
        assert_eq!(first_missing(&[programs::SH, absent]), Some(&absent));
        assert_eq!(first_missing(&[programs::SH]), None);
    }
}
