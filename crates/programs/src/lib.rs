//! The programs xrunbench and its test fixtures start by name, each with
//! the Debian package that provides it.
//!
//! One table, two readers: the product's and `cargo xtask`'s install lists
//! (`xrunbench_host::deps`) say which programs each command starts, and the
//! test fixtures (`xrunbench-test-support`'s sound servers and SSH test
//! board) check that theirs are installed before they start anything, naming
//! the package when one is not. It is its own crate because the fixtures
//! are a dev-dependency and the install lists are the product's: neither
//! may depend on the other.

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

/// The programs the test fixtures start (the sound servers, the SSH test
/// board) and those the product starts too (`sh`, `ssh`, `taskset`,
/// `chrt`), one entry each.
pub mod programs {
    use super::Program;

    /// The JACK server.
    pub const JACKD: Program = Program {
        name: "jackd",
        package: "jackd2",
    };
    /// Asks the JACK server whether it is up.
    pub const JACK_LSP: Program = Program {
        name: "jack_lsp",
        package: "jackd2",
    };
    /// The PulseAudio server.
    pub const PULSEAUDIO: Program = Program {
        name: "pulseaudio",
        package: "pulseaudio",
    };
    /// Asks the PulseAudio server whether it is up.
    pub const PACTL: Program = Program {
        name: "pactl",
        package: "pulseaudio-utils",
    };
    /// The PulseAudio keepalive stream.
    pub const PACAT: Program = Program {
        name: "pacat",
        package: "pulseaudio-utils",
    };
    /// The PipeWire server.
    pub const PIPEWIRE: Program = Program {
        name: "pipewire",
        package: "pipewire-bin",
    };
    /// Asks the PipeWire server whether it is up; creates the null sink.
    pub const PW_CLI: Program = Program {
        name: "pw-cli",
        package: "pipewire-bin",
    };
    /// PipeWire's session manager (links streams to sinks).
    pub const WIREPLUMBER: Program = Program {
        name: "wireplumber",
        package: "wireplumber",
    };
    /// A private D-Bus session bus for WirePlumber (Debian 12 ships it in
    /// `dbus-daemon`, not `dbus-bin`).
    pub const DBUS_RUN_SESSION: Program = Program {
        name: "dbus-run-session",
        package: "dbus-daemon",
    };
    /// The bus `dbus-run-session` starts.
    pub const DBUS_DAEMON: Program = Program {
        name: "dbus-daemon",
        package: "dbus-daemon",
    };
    /// Runs PipeWire and WirePlumber in one session (Essential package).
    pub const SH: Program = Program {
        name: "sh",
        package: "dash",
    };
    /// Lets PipeWire come up before WirePlumber (Essential package).
    pub const SLEEP: Program = Program {
        name: "sleep",
        package: "coreutils",
    };
    /// Pins a server to CPUs (Essential package).
    pub const TASKSET: Program = Program {
        name: "taskset",
        package: "util-linux",
    };
    /// Runs a server at SCHED_FIFO priority (Essential package).
    pub const CHRT: Program = Program {
        name: "chrt",
        package: "util-linux",
    };
    /// Tells a real package from a virtual one (the lab's and the board
    /// sysroot's private apt states; the LAVA lab's dependency closure).
    pub const APT_CACHE: Program = Program {
        name: "apt-cache",
        package: "apt",
    };
    /// Unpacks Debian packages into a private prefix (kernels, sysroots,
    /// LAVA and what it imports).
    pub const DPKG_DEB: Program = Program {
        name: "dpkg-deb",
        package: "dpkg",
    };
    /// The libraries a binary loads.
    pub const LDD: Program = Program {
        name: "ldd",
        package: "libc-bin",
    };
    /// Debian's python3 (zig's environment for `board build --glibc`; the
    /// LAVA lab's services).
    pub const PYTHON3: Program = Program {
        name: "python3",
        package: "python3-minimal",
    };
    /// The VM lab's x86_64 machine (and the LAVA lab's QEMU devices).
    pub const QEMU_X86: Program = Program {
        name: "qemu-system-x86_64",
        package: "qemu-system-x86",
    };
    /// Gives the LAVA lab's PostgreSQL directory to `postgres`.
    pub const CHOWN: Program = Program {
        name: "chown",
        package: "coreutils",
    };
    /// Runs the LAVA lab's PostgreSQL as `postgres` (initdb refuses root).
    pub const RUNUSER: Program = Program {
        name: "runuser",
        package: "util-linux",
    };
    /// The test board's SSH server (started as /usr/sbin/sshd).
    pub const SSHD: Program = Program {
        name: "sshd",
        package: "openssh-server",
    };
    /// Makes the test board's host and client keys.
    pub const SSH_KEYGEN: Program = Program {
        name: "ssh-keygen",
        package: "openssh-client",
    };
    /// The SSH client that reaches the test board.
    pub const SSH: Program = Program {
        name: "ssh",
        package: "openssh-client",
    };
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
