//! What the automation installs (`cargo xtask lint`, `test`, `bench …`)
//! and what it starts, in the product's terms (`xrunbench_lab::deps`:
//! packages in groups, a command's [`Needs`]): the groups only the
//! automation installs, and the rustup components the lint runs; and the
//! tests that tie every command's list, the product's and the
//! automation's, to the programs each one starts and to the code that
//! starts them. They live here because only the workspace's automation
//! sees all three: the product's lists, the test fixtures' servers and
//! board, and every source file.

use std::process::Stdio;

use xrunbench_lab::deps::{
    pkg, rustup_add, DepsError, Group, Needs, BASE, BOARD_SYSROOT, BUILD, CROSS_AARCH64,
    CROSS_ARMV7, GIT, KERNEL_BUILD, LAB, LAB_GUEST_PROGRAMS, PYTHON, SSH_CLIENT, ZIGBUILD,
};
use xrunbench_programs::{packages, programs};
use xrunbench_test_support::lava_lab::LavaLab;
use xrunbench_test_support::servers::{JackServer, PipeWireServer, PulseServer};
use xrunbench_test_support::testboard::TestBoard;

/// Building the player's cpal hosts (all player features): what the
/// `jack-sys` and `pipewire-sys`/`libspa-sys` build scripts look for.
pub const CPAL_HOSTS: Group = Group {
    name: "cpal host headers",
    packages: &[
        pkg(
            "libjack-jackd2-dev",
            "jack-sys (player feature cpal-jack) finds jack.pc",
        ),
        pkg(
            "libpipewire-0.3-dev",
            "pipewire-sys (player feature cpal-pipewire) binds libpipewire",
        ),
        pkg(
            "libspa-0.2-dev",
            "headers the PipeWire bindings are generated from",
        ),
        pkg("clang", "bindgen finds the system headers with it"),
        pkg("libclang-dev", "bindgen parses the PipeWire headers"),
    ],
};

/// A real clocked ALSA PCM without a sound card: a JACK dummy server and
/// alsa-lib's `jack` plugin (`plug:jack`).
pub const JACK_PCM: Group = Group {
    name: "JACK test PCM",
    packages: &[
        pkg(packages::JACKD2, "jackd (dummy backend) and jack_lsp"),
        pkg("libasound2-plugins", "the ALSA `jack` PCM plugin"),
    ],
};

/// A null-sink PulseAudio server for cpal's PulseAudio host.
pub const PULSEAUDIO: Group = Group {
    name: "PulseAudio",
    packages: &[
        pkg(packages::PULSEAUDIO, "the null-sink server"),
        pkg(
            packages::PULSEAUDIO_UTILS,
            "pactl (readiness) and the keepalive pacat",
        ),
    ],
};

/// A PipeWire server with a null sink for cpal's PipeWire host. Not
/// `pipewire-alsa` nor `pipewire-pulse`: they conflict with `pulseaudio`
/// on Debian 12, and nothing routes ALSA or Pulse clients through
/// PipeWire here.
pub const PIPEWIRE: Group = Group {
    name: "PipeWire",
    packages: &[
        pkg(packages::PIPEWIRE_BIN, "the pipewire server and pw-cli"),
        pkg(packages::WIREPLUMBER, "links streams to the null sink"),
        pkg(
            packages::DBUS_DAEMON,
            "dbus-run-session: WirePlumber's private session bus",
        ),
    ],
};

/// The reference player the benchmarks and tests compare with.
pub const APLAY: Group = Group {
    name: "reference player",
    packages: &[pkg(packages::ALSA_UTILS, "aplay")],
};

/// The reference load generator.
pub const RT_TESTS: Group = Group {
    name: "reference load",
    packages: &[pkg(
        packages::RT_TESTS,
        "hackbench and cyclictest (/usr/bin/hackbench, /usr/bin/cyclictest)",
    )],
};

/// The test board: a private sshd on 127.0.0.1 (the system's is never
/// started).
pub const SSH_SERVER: Group = Group {
    name: "SSH test board",
    packages: &[pkg(packages::OPENSSH_SERVER, "sshd: the tests' SSH board")],
};

/// What the LAVA test needs from apt: lava-dispatcher's Python modules
/// (lava-dispatcher itself is not installed — it conflicts with a
/// backported qemu — but downloaded and unpacked into the test's cache,
/// with `apt-get download` and `dpkg-deb -x`).
pub const LAVA_DISPATCHER: Group = Group {
    name: "LAVA dispatcher (its Python modules)",
    packages: &[
        pkg("python3-jinja2", "lava-run; renders the device dictionary"),
        pkg("python3-pexpect", "lava-run"),
        pkg("python3-requests", "lava-run"),
        pkg("python3-configobj", "lava-run"),
        pkg("python3-setproctitle", "lava-run"),
        pkg("python3-tz", "lava-run"),
        pkg("python3-magic", "lava-run"),
        pkg("python3-netifaces", "lava-run"),
        pkg("python3-pyudev", "lava-run"),
        pkg("python3-voluptuous", "lava-run"),
        pkg("python3-yaml", "lava-run"),
        pkg(
            "curl",
            "the LAVA test definition downloads the board binaries",
        ),
    ],
};

/// The suite's private LAVA lab (test-support's `lava_lab`): its
/// database server. LAVA itself and the Python modules it imports are
/// unpacked into the suite's cache, never installed.
pub const LAVA_LAB: Group = Group {
    name: "LAVA lab",
    packages: &[pkg(
        "postgresql-15",
        "initdb, pg_ctl, createdb: the lab's private database",
    )],
};

/// Checking JUnit files against the JUnit XSD (the one Jenkins' xUnit
/// plugin ships; the test takes pytest's copy from its PyPI source).
pub const JUNIT_VALIDATOR: Group = Group {
    name: "JUnit validator",
    packages: &[
        pkg(
            packages::LIBXML2_UTILS,
            "xmllint --schema validates the JUnit file",
        ),
        pkg(
            "python3-pip",
            "pip download: the JUnit XSD in pytest's sources",
        ),
        pkg(
            packages::TAR,
            "takes the XSD out of pytest's source archive",
        ),
    ],
};

/// Reading the lab's initramfs back in its writer's test.
pub const CPIO: Group = Group {
    name: "cpio",
    packages: &[pkg(
        packages::CPIO,
        "the initramfs writer's test lists its archive",
    )],
};

/// Running board binaries on this machine, for function (never timing).
pub const QEMU_USER: Group = Group {
    name: "qemu-user",
    packages: &[pkg(
        packages::QEMU_USER,
        "qemu-aarch64 and qemu-arm run the board binaries and their unit tests",
    )],
};

/// The rustup components `cargo xtask lint` runs: (cargo subcommand,
/// component).
const RUST_COMPONENTS: [(&str, &str); 2] = [("clippy", "clippy"), ("fmt", "rustfmt")];

/// Makes sure `cargo clippy` and `cargo fmt` exist: a minimal rustup
/// profile (e.g. the official Rust images) has neither. Adding them with
/// rustup needs no root; without rustup, the user is told what to do.
pub fn ensure_rust_components() -> Result<(), DepsError> {
    let missing: Vec<&str> = RUST_COMPONENTS
        .iter()
        .filter(|(sub, _)| {
            !xrunbench_lab::util::cargo()
                .args([sub, "--version"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|(_, component)| *component)
        .collect();
    rustup_add("component", &missing, None)
}

/// `cargo xtask bench player`: xrun-player (default features) and aplay on
/// a hinted `plug` over a JACK dummy server.
pub const BENCH_PLAYER: Needs = Needs {
    command: "bench player",
    groups: &[&BUILD, &JACK_PCM, &APLAY, &BASE],
    starts: &[JackServer::PROGRAMS, &[programs::APLAY]],
};

/// `cargo xtask bench hackbench`: ours (no system library) against
/// rt-tests'.
pub const BENCH_HACKBENCH: Needs = Needs {
    command: "bench hackbench",
    groups: &[&RT_TESTS],
    starts: &[&[programs::HACKBENCH]],
};

/// `cargo xtask bench monitor`: our monitor (no system library) against
/// rt-tests' cyclictest, idle and under its hackbench.
pub const BENCH_MONITOR: Needs = Needs {
    command: "bench monitor",
    groups: &[&RT_TESTS],
    starts: &[&[programs::CYCLICTEST, programs::HACKBENCH]],
};

/// `cargo xtask bench micro`: criterion benchmarks of the player (built
/// with its default features, so against ALSA) and of the trial and xtask.
pub const BENCH_MICRO: Needs = Needs {
    command: "bench micro",
    groups: &[&BUILD],
    starts: &[],
};

/// `cargo xtask bench lava`: the board binaries (default features) in the
/// VM lab's console ramdisk, a private LAVA lab booting it on QEMU (its
/// `run` on the VM lab over SSH installs what that needs itself).
pub const BENCH_LAVA: Needs = Needs {
    command: "bench lava",
    groups: &[&BUILD, &LAB, &LAVA_LAB, &PYTHON, &BASE],
    starts: &[LavaLab::PROGRAMS, LAB_GUEST_PROGRAMS],
};

/// `cargo xtask lint`: clippy builds the build scripts of every feature
/// set, the cpal hosts' included.
pub const LINT: Needs = Needs {
    command: "lint",
    groups: &[&BUILD, &CPAL_HOSTS],
    starts: &[],
};

/// `cargo xtask test`: the lint, then the suite with all player features,
/// which starts every sound server and the reference tools.
pub const TEST: Needs = Needs {
    command: "test",
    groups: &[
        &BUILD,
        &CPAL_HOSTS,
        &JACK_PCM,
        &PULSEAUDIO,
        &PIPEWIRE,
        &APLAY,
        &RT_TESTS,
        &BASE,
        &GIT,
        &SSH_CLIENT,
        &SSH_SERVER,
        &BOARD_SYSROOT,
        &CROSS_AARCH64,
        &CROSS_ARMV7,
        &QEMU_USER,
        &ZIGBUILD,
        &PYTHON,
        &LAVA_DISPATCHER,
        &LAVA_LAB,
        &JUNIT_VALIDATOR,
        &LAB,
        &CPIO,
        // A real kernel bisected: `lab source` and each step's build.
        &KERNEL_BUILD,
    ],
    starts: &[
        JackServer::PROGRAMS,
        PulseServer::PROGRAMS,
        PipeWireServer::PROGRAMS,
        TestBoard::PROGRAMS,
        LavaLab::PROGRAMS,
        LAB_GUEST_PROGRAMS,
        &[programs::CPIO],
        &[
            programs::APLAY,
            programs::HACKBENCH,
            programs::TIMEOUT,
            programs::GIT,
            programs::TASKSET,
            programs::CHRT,
            programs::SH,
        ],
        // The board stage: both board architectures built, the older-glibc
        // build for aarch64, all run under qemu.
        &[
            programs::DPKG,
            programs::APT_CONFIG,
            programs::APT_CACHE,
            programs::AARCH64_GCC,
            programs::ARMV7_GCC,
            programs::PYTHON3,
            programs::QEMU_AARCH64,
            programs::QEMU_ARM,
        ],
        // The board-farm tests: LAVA's lava-run, the JUnit validator.
        &[programs::DPKG_DEB, programs::TAR, programs::XMLLINT],
        // The kernel bisected: its tree (`lab source`) and builds.
        &[programs::MAKE],
    ],
};

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use xrunbench_lab::arch::Arch;
    use xrunbench_lab::deps::{
        for_board_build, BOARD_BUILD, LAB_SOURCE, PLAYER_RUNTIME, RUN, RUN_PREBUILT, RUN_SSH,
        RUN_SSH_PREBUILT, RUN_VM,
    };
    use xrunbench_programs::Program;

    use super::*;

    /// The lists these tests hold to every rule: the product's and the
    /// automation's (the VM lab's `RUN_VM`, `LAB_KERNEL` and `LAB_SOURCE`,
    /// and `BENCH_LAVA`, only to the code scan below: the VM lab's group
    /// installs the guest's sshd, which the servers rule forbids).
    const ALL_NEEDS: &[&Needs] = &[
        &RUN,
        &RUN_PREBUILT,
        &RUN_SSH,
        &RUN_SSH_PREBUILT,
        &BOARD_BUILD,
        &BENCH_PLAYER,
        &BENCH_HACKBENCH,
        &BENCH_MONITOR,
        &BENCH_MICRO,
        &LINT,
        &TEST,
    ];

    /// Each package is in one group, with its reason: the groups `test`
    /// installs (every list's but the prebuilt player's runtime) and that
    /// runtime. Only the VM lab's and the kernel build's groups may repeat
    /// another's package: each is the whole toolset of its own commands.
    #[test]
    fn each_package_has_one_home_and_a_reason() {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for g in TEST.groups.iter().copied().chain([&PLAYER_RUNTIME]) {
            assert!(!g.packages.is_empty(), "group {} is empty", g.name);
            for p in g.packages {
                assert!(!p.why.is_empty(), "{} has no reason", p.name);
                if g.name == LAB.name || g.name == KERNEL_BUILD.name {
                    continue;
                }
                if let Some((_, other)) = seen.iter().find(|(n, _)| *n == p.name) {
                    panic!("{} is in both `{other}` and `{}`", p.name, g.name);
                }
                seen.push((p.name, g.name));
            }
        }
    }

    #[test]
    fn only_test_installs_sound_servers() {
        let servers: Vec<&str> = [&PULSEAUDIO, &PIPEWIRE, &SSH_SERVER]
            .iter()
            .flat_map(|g| g.packages.iter().map(|p| p.name))
            .collect();
        for needs in ALL_NEEDS.iter().filter(|n| n.command != "test") {
            for p in needs.package_names() {
                assert!(
                    !servers.contains(&p),
                    "`{}` installs {p}, which it never starts",
                    needs.command
                );
            }
        }
        assert!(!BENCH_PLAYER.package_names().contains(&"libjack-jackd2-dev"));
        assert!(!BENCH_HACKBENCH.package_names().contains(&"libasound2-dev"));
    }

    /// The suite's board stage (both board architectures, and the
    /// older-glibc build) has all that `board build` installs for it.
    #[test]
    fn test_installs_what_its_board_stage_builds_with() {
        let test = TEST.package_names();
        for g in for_board_build(&[Arch::Aarch64, Arch::Armv7], true) {
            for p in g.packages {
                assert!(test.contains(&p.name), "the board stage lacks {}", p.name);
            }
        }
        assert!(test.contains(&packages::QEMU_USER));
    }

    #[test]
    fn test_installs_what_its_lint_needs() {
        let test = TEST.package_names();
        for p in LINT.package_names() {
            assert!(test.contains(&p), "`test` runs the lint but lacks {p}");
        }
    }

    #[test]
    fn nothing_conflicts_with_pulseaudio() {
        // Debian 12: both declare `Conflicts: pulseaudio`.
        for needs in ALL_NEEDS {
            for p in ["pipewire-alsa", "pipewire-pulse"] {
                assert!(
                    !needs.package_names().contains(&p),
                    "`{}`: {p}",
                    needs.command
                );
            }
        }
    }

    /// Each program a command starts (the sound servers' and the test
    /// board's own tables included) is installed by that command.
    #[test]
    fn every_started_program_is_installed_by_its_command() {
        for needs in ALL_NEEDS {
            let installed = needs.package_names();
            for prog in needs.starts.iter().copied().flatten() {
                assert!(
                    installed.contains(&prog.package),
                    "`cargo xtask {}` starts {} but does not install {}",
                    needs.command,
                    prog.name,
                    prog.package
                );
            }
        }
    }

    #[test]
    fn commands_that_start_a_server_list_all_its_programs() {
        let starts = |needs: &Needs, table: &[Program]| {
            table
                .iter()
                .all(|p| needs.starts.iter().any(|t| t.contains(p)))
        };
        assert!(starts(&BENCH_PLAYER, JackServer::PROGRAMS));
        for table in [
            JackServer::PROGRAMS,
            PulseServer::PROGRAMS,
            PipeWireServer::PROGRAMS,
            TestBoard::PROGRAMS,
        ] {
            assert!(starts(&TEST, table));
        }
    }

    #[test]
    fn one_package_per_program() {
        let all: Vec<Program> = ALL_NEEDS
            .iter()
            .flat_map(|n| n.starts.iter().copied().flatten().copied())
            .collect();
        for a in &all {
            for b in &all {
                assert!(
                    a.name != b.name || a.package == b.package,
                    "{} is from {} and from {}",
                    a.name,
                    a.package,
                    b.package
                );
            }
        }
    }

    /// (program, package) for every file of `programs` dpkg knows in the
    /// usual directories, in one dpkg call (each call reads its database).
    fn dpkg_owners(programs: &[&str]) -> Vec<(String, String)> {
        let paths: Vec<String> = programs
            .iter()
            .flat_map(|p| ["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map(|d| format!("{d}/{p}")))
            .collect();
        // Exits 1 when some path is unknown; the known ones still print.
        let out = Command::new("dpkg")
            .arg("-S")
            .args(&paths)
            .output()
            .expect("dpkg runs");
        let mut owners = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // "pkg[:arch]: /path"; skip "diversion by …" lines.
            let Some((pkg, path)) = line.split_once(": ") else {
                continue;
            };
            if pkg.starts_with("diversion by") {
                continue;
            }
            let program = path.rsplit('/').next().unwrap_or_default();
            let pkg = pkg.split(':').next().unwrap_or_default();
            owners.push((program.to_string(), pkg.to_string()));
        }
        owners
    }

    /// The tables are true on this Debian: each program comes from the
    /// package they name (the PipeWire table once said `dbus-bin` for
    /// dbus-run-session, which Debian 12 ships in `dbus-daemon`).
    /// `cargo xtask test` installs all of them before the suite runs.
    #[test]
    fn every_program_comes_from_the_package_the_table_names() {
        let all: Vec<(&str, Program)> = ALL_NEEDS
            .iter()
            .flat_map(|n| n.starts.iter().copied().flatten().map(|p| (n.command, *p)))
            .collect();
        let names: Vec<&str> = all.iter().map(|(_, p)| p.name).collect();
        let owners = dpkg_owners(&names);
        for (command, prog) in all {
            let found: Vec<&str> = owners
                .iter()
                .filter(|(p, _)| p == prog.name)
                .map(|(_, pkg)| pkg.as_str())
                .collect();
            assert!(
                found.contains(&prog.package),
                "{} (`cargo xtask {command}`): the table says {}, dpkg says {found:?} \
                 (none: not installed; `cargo xtask test` installs it)",
                prog.name,
                prog.package
            );
        }
    }

    // --- The tables against the code: programs spawned by a literal name.

    /// Programs the harness itself uses, needed before any install list can
    /// be: cargo (it runs us), Debian's package tools, git (the repository
    /// came with it; the fingerprint records the commit when it is there).
    const HARNESS: &[&str] = &["cargo", "rustc", "apt-get", "dpkg-query", "rustup", "git"];

    /// Program names spawned by a literal in `source`: `Command::new("x")`,
    /// the servers' `pinned("x", …)`, and absolute `"/usr/bin/x"`.
    fn spawned_literals(source: &str) -> Vec<String> {
        let mut out = Vec::new();
        for pat in ["Command::new(\"", "pinned(\"", "\"/usr/bin/", "\"/bin/"] {
            for (at, _) in source.match_indices(pat) {
                let rest = &source[at + pat.len()..];
                if let Some(end) = rest.find('"') {
                    out.push(rest[..end].to_string());
                }
            }
        }
        out
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The commands that run a source file's spawns: each must list the
    /// program. `None`: the file is not scanned (this file: the tables
    /// themselves and the samples below).
    fn owners(rel: &str) -> Option<Vec<&'static Needs>> {
        let owners = if rel == "crates/host/src/deps.rs" || rel == "xtask/src/needs.rs" {
            return None;
        } else if rel.starts_with("xtask/src/bench/player") {
            vec![&BENCH_PLAYER]
        } else if rel.starts_with("xtask/src/bench/hackbench") {
            vec![&BENCH_HACKBENCH]
        } else if rel.starts_with("xtask/src/bench/monitor") {
            vec![&BENCH_MONITOR]
        } else if rel.starts_with("xtask/src/bench/micro") {
            vec![&BENCH_MICRO]
        } else if rel.starts_with("xtask/src/bench/lava") {
            vec![&BENCH_LAVA]
        } else if rel == "xtask/src/qemu_user.rs" {
            // The emulator runs only in the suite's board stage.
            vec![&TEST]
        } else if rel.starts_with("crates/lab/src/board/") {
            // `board build`, which the suite's board stage runs too.
            vec![&BOARD_BUILD, &TEST]
        } else if rel == "crates/lab/src/lab/cpio.rs" {
            // cpio reads the archive back in the writer's test only.
            vec![&TEST]
        } else if rel == "xtask/src/test.rs" {
            // The suite itself: its kernel trees ahead, one shell for both.
            vec![&TEST]
        } else if rel == "xtask/src/session_dirs.rs" {
            // aplay shows, in its test, where ALSA's pulse plugin writes.
            vec![&TEST]
        } else if rel == "crates/lab/src/lab/source.rs" {
            // The lab's kernel tree: `lab source`, which the suite's
            // kernel bisection runs too.
            vec![&LAB_SOURCE, &TEST]
        } else if rel.starts_with("crates/lab/src/lab/") {
            // The lab boots guests for runs on it and for the suite.
            vec![&RUN_VM, &TEST]
        } else if rel.starts_with("crates/host/src/target/ssh")
            || rel == "crates/host/src/target/hooks.rs"
        {
            // Hooks (power_cycle, deploy) belong to a board's target.
            vec![&RUN_SSH, &RUN_SSH_PREBUILT]
        } else if rel.starts_with("crates/host/src/run/")
            || rel.starts_with("crates/host/src/bisect/")
            || rel.starts_with("crates/host/src/target/")
        {
            vec![&RUN, &RUN_PREBUILT]
        } else if rel.contains("/tests/") || rel.starts_with("crates/test-support/") {
            // The tests' fixtures. The servers' and the test board's own
            // tables are checked separately.
            vec![&TEST]
        } else if rel.starts_with("crates/programs/") {
            // The table itself: it starts nothing.
            vec![]
        } else if rel.starts_with("crates/host/")
            || rel.starts_with("crates/scenario/")
            || rel.starts_with("crates/analysis/")
            || rel.starts_with("crates/lava/")
            || rel.starts_with("crates/paths/")
        {
            // Tables, plots, results, LAVA files: they spawn nothing.
            vec![]
        } else if rel.starts_with("crates/") {
            // The board binaries: the runner, the tests and benches run them.
            vec![&RUN, &RUN_PREBUILT, &TEST]
        } else {
            vec![]
        };
        Some(owners)
    }

    /// The fixtures' files whose spawns must each be in a server's or the
    /// test board's `PROGRAMS` (which they check before starting anything).
    const FIXTURE_FILES: &[&str] = &[
        "crates/test-support/src/servers.rs",
        "crates/test-support/src/testboard.rs",
    ];

    #[test]
    fn every_program_spawned_by_name_is_in_its_commands_table() {
        let root = xrunbench_paths::workspace_root();
        let mut files = Vec::new();
        rust_files(&root.join("crates"), &mut files);
        rust_files(&root.join("xtask"), &mut files);
        let fixtures: Vec<&str> = [
            JackServer::PROGRAMS,
            PulseServer::PROGRAMS,
            PipeWireServer::PROGRAMS,
            TestBoard::PROGRAMS,
        ]
        .iter()
        .copied()
        .flatten()
        .map(|p| p.name)
        .collect();
        let mut checked = 0;
        for file in &files {
            let rel = file.strip_prefix(&root).unwrap().display().to_string();
            let Some(owners) = owners(&rel) else { continue };
            let source = std::fs::read_to_string(file).unwrap();
            for prog in spawned_literals(&source) {
                checked += 1;
                if HARNESS.contains(&prog.as_str()) {
                    continue;
                }
                if FIXTURE_FILES.contains(&rel.as_str()) {
                    assert!(
                        fixtures.contains(&prog.as_str()),
                        "{rel} starts {prog}, which is in no server's PROGRAMS"
                    );
                }
                assert!(!owners.is_empty(), "{rel} starts {prog} for no command");
                for needs in &owners {
                    let listed = needs
                        .starts
                        .iter()
                        .copied()
                        .flatten()
                        .any(|p| p.name == prog);
                    assert!(
                        listed,
                        "{rel} starts {prog}: add it to the `starts` of `cargo xtask {}`",
                        needs.command
                    );
                }
            }
        }
        // The scan must see the spawns we know of, or it checks nothing.
        assert!(checked >= 10, "only {checked} spawns found");
    }

    #[test]
    fn spawned_literals_finds_the_three_spellings() {
        let src = r#"Command::new("aplay"); pinned("pacat", &c, f); let r = "/usr/bin/hackbench";"#;
        assert_eq!(spawned_literals(src), ["aplay", "pacat", "hackbench"]);
    }
}
