//! `cargo xtask board build`: the board binaries for each architecture,
//! with their stripped sizes and the oldest glibc they run on.
//!
//! Everything a cross build needs (linker, pkg-config's view of the
//! board's libasound) is passed as environment to this one cargo
//! invocation, per target, so a plain `cargo build` for the host stays
//! untouched and no cargo configuration is written.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::elf::{self, GlibcVersion};
use super::sysroot::{self, cross_env};
use super::{zig, BoardBinary, BINARIES};
use crate::arch::Arch;
use crate::deps::{self, DepsError};
use crate::util::{cargo, run_checked};
use xrunbench_paths::target_dir;

/// Arguments of `cargo xtask board build`.
#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// Architectures to build for (repeatable or comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub arch: Vec<crate::arch::ArchChoice>,
    /// Where to put the binaries: DIR/<arch>/ (default
    /// target/board/<arch>, or target/board/<arch>-glibc<VERSION>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Link against this older glibc instead of the machine's (e.g. 2.28,
    /// for a board image older than the machine's Debian): built with
    /// cargo-zigbuild, installed from pip into target/board/zigbuild.
    #[arg(long, value_name = "VERSION")]
    pub glibc: Option<GlibcVersion>,
}

/// One binary as built.
#[derive(Debug)]
pub struct BuiltBinary {
    /// Which one.
    pub spec: &'static BoardBinary,
    /// Where it was put.
    pub path: PathBuf,
    /// Its size, stripped (bytes).
    pub size: u64,
    /// The oldest glibc that has every symbol version it needs.
    pub glibc: Option<GlibcVersion>,
    /// The shared libraries it needs versioned symbols from.
    pub libraries: Vec<String>,
}

impl BuiltBinary {
    /// Whether it is within its size budget.
    pub fn within_budget(&self) -> bool {
        self.size <= self.spec.budget
    }
}

/// The binaries of one architecture.
#[derive(Debug)]
pub struct Built {
    /// For which architecture.
    pub arch: Arch,
    /// The directory holding them.
    pub dir: PathBuf,
    /// The sysroot with the board's libraries (cross builds): qemu's `-L`.
    pub sysroot: Option<PathBuf>,
    /// The binaries.
    pub binaries: Vec<BuiltBinary>,
}

impl Built {
    /// The binary called `name`.
    pub fn binary(&self, name: &str) -> Option<&BuiltBinary> {
        self.binaries.iter().find(|b| b.spec.name == name)
    }
}

/// What to build.
#[derive(Debug, Clone)]
pub struct Request {
    /// For these architectures.
    pub arches: Vec<Arch>,
    /// Put them in DIR/<arch>/ (else under target/board/).
    pub out: Option<PathBuf>,
    /// Link against this older glibc (cargo-zigbuild).
    pub glibc: Option<GlibcVersion>,
}

/// `cargo xtask board build`.
pub fn run(args: &BuildArgs) -> Result<std::process::ExitCode> {
    let request = Request {
        arches: crate::arch::resolve(&args.arch),
        out: args.out.clone(),
        glibc: args.glibc,
    };
    if let Err(e) = install(&request) {
        return Ok(e.report());
    }
    let built = build(&request)?;
    print!("{}", report(&built));
    Ok(std::process::ExitCode::SUCCESS)
}

/// Installs what building `request` needs: Debian packages (as root, else
/// the exact command and exit 2) and the Rust targets.
pub fn install(request: &Request) -> Result<(), DepsError> {
    deps::ensure_groups(&deps::for_board_build(
        &request.arches,
        request.glibc.is_some(),
    ))?;
    let targets: Vec<&str> = request.arches.iter().map(|a| a.rust_target()).collect();
    deps::ensure_rust_targets(&targets)
}

/// Where board things live: target/board.
pub fn board_dir() -> PathBuf {
    target_dir().join("board")
}

/// Builds the board binaries (what [`install`] installs must be there),
/// copies them to their output directories and reads their sizes and
/// glibc needs.
pub fn build(request: &Request) -> Result<Vec<Built>> {
    let board = board_dir();
    for arch in &request.arches {
        if arch.is_cross() && deps::cross_toolchain(*arch).is_none() {
            bail!(
                "--arch {arch}: {arch} binaries are built on an {arch} machine only \
                 (Debian has no cross compiler for it here)"
            );
        }
    }
    let mut sysroots = Vec::new();
    for &arch in &request.arches {
        let sysroot = if arch.is_cross() {
            Some(sysroot::ensure(arch, &xrunbench_paths::cache_dir())?)
        } else {
            None
        };
        sysroots.push((arch, sysroot));
    }
    let target_dir = match request.glibc {
        None => cargo_build(&sysroots)?,
        Some(glibc) => zig::build(&sysroots, glibc, &board)?,
    };
    sysroots
        .into_iter()
        .map(|(arch, sysroot)| {
            let from = target_dir.join(arch.rust_target()).join("release");
            let dir = out_dir(request, arch);
            collect(arch, &from, &dir, sysroot)
        })
        .collect()
}

/// The output directory for `arch`.
fn out_dir(request: &Request, arch: Arch) -> PathBuf {
    let name = match request.glibc {
        None => arch.name().to_string(),
        Some(g) => format!("{}-glibc{g}", arch.name()),
    };
    match &request.out {
        Some(out) => out.join(arch.name()),
        None => board_dir().join(name),
    }
}

/// `cargo build --release` for every target at once (their host build
/// scripts are shared); returns cargo's target directory.
fn cargo_build(targets: &[(Arch, Option<PathBuf>)]) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.args(["build", "--release"]);
    for (arch, sysroot) in targets {
        cmd.args(["--target", arch.rust_target()]);
        if let Some(s) = sysroot {
            cmd.envs(cross_env(*arch, s, true));
        }
    }
    for b in BINARIES {
        cmd.args(["--package", b.package]);
    }
    run_checked(&mut cmd)?;
    Ok(target_dir())
}

/// Copies the binaries of `arch` from `from` to `dir` and reads them.
fn collect(arch: Arch, from: &Path, dir: &Path, sysroot: Option<PathBuf>) -> Result<Built> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let binaries = BINARIES
        .iter()
        .map(|spec| {
            let built = from.join(spec.name);
            let path = dir.join(spec.name);
            if built != path {
                copy_atomically(&built, &path)?;
            }
            read_binary(spec, path)
        })
        .collect::<Result<_>>()?;
    Ok(Built {
        arch,
        dir: dir.to_path_buf(),
        sysroot,
        binaries,
    })
}

/// Copies through a temporary file and a rename: a board copy running
/// from `to` (or another xtask reading it) never sees half a binary.
fn copy_atomically(from: &Path, to: &Path) -> Result<()> {
    let tmp = to.with_extension(format!("tmp.{}", std::process::id()));
    fs::copy(from, &tmp).with_context(|| format!("copying {}", from.display()))?;
    fs::rename(&tmp, to).with_context(|| format!("renaming to {}", to.display()))
}

/// Size and glibc needs of a built binary.
fn read_binary(spec: &'static BoardBinary, path: PathBuf) -> Result<BuiltBinary> {
    let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let needs = elf::version_needs(&bytes).with_context(|| format!("{}", path.display()))?;
    Ok(BuiltBinary {
        spec,
        size: bytes.len() as u64,
        glibc: elf::min_glibc(&needs),
        libraries: needs.into_iter().map(|n| n.file).collect(),
        path,
    })
}

/// Sizes in the units of the budgets: MB = 10^6 bytes.
fn megabytes(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

/// The table `board build` prints: per binary its stripped size against
/// its budget, the oldest glibc it runs on, and the libraries it needs.
pub fn report(built: &[Built]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} {:<15} {:>8} {:>7}  {:<9} needs (versioned symbols)",
        "arch", "binary", "stripped", "budget", "min glibc"
    );
    for b in built {
        for bin in &b.binaries {
            let line = format!(
                "{:<8} {:<15} {:>8} {:>7}{} {:<9} {}",
                b.arch.name(),
                bin.spec.name,
                megabytes(bin.size),
                format!("{:.0} MB", bin.spec.budget as f64 / 1e6),
                if bin.within_budget() { " " } else { "!" },
                bin.glibc.map_or("-".to_string(), |g| g.to_string()),
                bin.libraries.join(" ")
            );
            let _ = writeln!(s, "{}", line.trim_end());
        }
    }
    for b in built {
        let _ = writeln!(s, "{}: {}", b.arch.name(), b.dir.display());
    }
    let over: Vec<String> = built
        .iter()
        .flat_map(|b| {
            b.binaries
                .iter()
                .filter(|x| !x.within_budget())
                .map(move |x| format!("{} ({})", x.spec.name, b.arch))
        })
        .collect();
    if !over.is_empty() {
        let _ = writeln!(s, "over budget (!): {}", over.join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `board build` puts in target/board/<arch>/ is where the SSH
    /// target looks for it.
    #[test]
    fn builds_where_the_targets_look() {
        assert_eq!(
            out_dir(
                &Request {
                    arches: vec![Arch::Armv7],
                    out: None,
                    glibc: None
                },
                Arch::Armv7
            ),
            target_dir().join("board").join("armv7")
        );
    }

    #[test]
    fn cross_env_names_only_the_target() {
        let env = cross_env(Arch::Armv7, Path::new("/s"), true);
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(
            get("CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER").as_deref(),
            Some("arm-linux-gnueabihf-gcc")
        );
        assert_eq!(
            get("PKG_CONFIG_LIBDIR_armv7_unknown_linux_gnueabihf").as_deref(),
            Some("/s/usr/lib/arm-linux-gnueabihf/pkgconfig:/s/usr/share/pkgconfig")
        );
        // Nothing that would reach the host's build scripts or other
        // targets: every name carries the target.
        for (name, _) in &env {
            assert!(
                name.contains("armv7_unknown_linux_gnueabihf")
                    || name.contains("ARMV7_UNKNOWN_LINUX_GNUEABIHF"),
                "{name}"
            );
        }
        assert!(cross_env(Arch::Aarch64, Path::new("/s"), false)
            .iter()
            .all(|(n, _)| !n.ends_with("_LINKER")));
    }

    #[test]
    fn the_report_marks_a_binary_over_budget() {
        let built = Built {
            arch: Arch::Armv7,
            dir: PathBuf::from("/out/armv7"),
            sysroot: None,
            binaries: vec![
                BuiltBinary {
                    spec: &BINARIES[0],
                    path: PathBuf::from("/out/armv7/xrun-player"),
                    size: 1_140_000,
                    glibc: Some("2.34".parse().unwrap()),
                    libraries: vec!["libasound.so.2".into(), "libc.so.6".into()],
                },
                BuiltBinary {
                    spec: &BINARIES[1],
                    path: PathBuf::from("/out/armv7/xrun-hackbench"),
                    size: 1_000_001,
                    glibc: None,
                    libraries: vec![],
                },
            ],
        };
        let text = report(&[built]);
        assert!(
            text.contains(
                "armv7    xrun-player      1.14 MB    2 MB  2.34      libasound.so.2 libc.so.6"
            ),
            "{text}"
        );
        assert!(text.contains("1.00 MB    1 MB! -\n"), "{text}");
        assert!(
            text.ends_with("over budget (!): xrun-hackbench (armv7)\n"),
            "{text}"
        );
    }
}
