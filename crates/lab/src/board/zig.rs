//! `board build --glibc X.Y`: binaries for a board whose glibc is older
//! than this machine's. cargo-zigbuild links with zig, which carries
//! stubs of every glibc release, so the binaries need no symbol version
//! newer than X.Y. zig and cargo-zigbuild come from pip, pinned, in a
//! private Python environment under target/board (nothing is installed
//! for the machine's Python). pip's, zig's and cargo-zigbuild's caches
//! are there too: by default all three write under ~/.cache, which would
//! outlive the target directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use super::elf::GlibcVersion;
use super::sysroot::cross_env;
use super::BINARIES;
use crate::arch::Arch;
use crate::util::{cargo, run_checked};

/// The pip packages, at the versions this was checked with.
const PIP_PACKAGES: [&str; 2] = ["ziglang==0.17.1", "cargo-zigbuild==0.24.1"];

/// Debian's python3, whose venv module deps.rs installs (python3-venv).
const PYTHON3: &str = "/usr/bin/python3";

/// The file in the environment that says what was installed into it.
const STAMP: &str = "xrunbench-zigbuild.txt";

/// The private Python environment with zig and cargo-zigbuild, made or
/// updated when its packages are not the pinned ones.
fn environment(board: &Path) -> Result<PathBuf> {
    let env = board.join("zigbuild");
    let wanted = PIP_PACKAGES.join("\n") + "\n";
    if fs::read_to_string(env.join(STAMP)).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(env);
    }
    crate::say!(
        ": installing {} from pip into {}",
        PIP_PACKAGES.join(" "),
        env.display()
    );
    run_checked(Command::new(PYTHON3).args(["-m", "venv"]).arg(&env))?;
    run_checked(
        Command::new(env.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            // Not --no-cache-dir: it does not reach the pip that builds an
            // sdist's build requirements.
            .env("PIP_CACHE_DIR", board.join("pip-cache"))
            .args(PIP_PACKAGES),
    )?;
    fs::write(env.join(STAMP), wanted)?;
    Ok(env)
}

/// `cargo zigbuild --release --target T.X.Y …` for every target at once,
/// into its own target directory (its linker differs, so sharing cargo's
/// would rebuild everything on each switch); returns that directory.
pub fn build(
    targets: &[(Arch, Option<PathBuf>)],
    glibc: GlibcVersion,
    board: &Path,
) -> Result<PathBuf> {
    let env = environment(board)?;
    let target_dir = board.join("zigbuild-target");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(env.join("bin")).chain(std::env::split_paths(&path)))
            .context("PATH")?;
    let mut cmd = cargo();
    cmd.args(["zigbuild", "--release"])
        .env("CARGO_TARGET_DIR", &target_dir)
        // cargo-zigbuild runs `python3 -m ziglang` from the environment.
        .env("PATH", path)
        .env("ZIG_GLOBAL_CACHE_DIR", board.join("zig-cache"))
        .env("CARGO_ZIGBUILD_CACHE_DIR", board.join("zigbuild-cache"));
    for (arch, sysroot) in targets {
        cmd.arg("--target")
            .arg(format!("{}.{glibc}", arch.rust_target()));
        if let Some(s) = sysroot {
            cmd.envs(cross_env(*arch, s, false));
        }
        // The board's libasound is linked against the machine's newer
        // glibc; on the board, its own libasound matches its own glibc.
        // zig's linker refuses such undefined versions unless told.
        let upper = arch.rust_target().to_uppercase().replace('-', "_");
        cmd.env(
            format!("CARGO_TARGET_{upper}_RUSTFLAGS"),
            "-C link-arg=-Wl,--allow-shlib-undefined",
        );
    }
    for b in BINARIES {
        cmd.args(["--package", b.package]);
    }
    run_checked(&mut cmd)?;
    Ok(target_dir)
}
