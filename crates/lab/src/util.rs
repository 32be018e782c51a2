//! Small helpers shared by the verbs.

use std::path::{Path, PathBuf};

use std::process::Command;
use xrunbench_paths::{target_dir, workspace_root};

use anyhow::{bail, Context, Result};

/// The name this process goes by in what it prints: `xrunbench`, or
/// `xtask` under `cargo xtask` (set once by the binary's `main`).
static PROGRAM: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Sets the name [`program`] gives (the first call wins).
pub fn set_program(name: &'static str) {
    let _ = PROGRAM.set(name);
}

/// The name this process goes by in what it prints.
pub fn program() -> &'static str {
    PROGRAM.get().copied().unwrap_or("xrunbench")
}

/// How the user types this program's verbs: `cargo xtask` under xtask,
/// else the program's name — for messages that tell them what to run.
pub fn invocation() -> &'static str {
    match program() {
        "xtask" => "cargo xtask",
        name => name,
    }
}

/// Prints one line on stderr after the program's name: `say!(": {x}")`
/// prints `xrunbench: …` (or `xtask: …`), `say!(" bisect: …")` prints
/// `xrunbench bisect: …`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}{}", $crate::util::program(), format_args!($($arg)*))
    };
}

/// The `cargo` that runs us (so a rustup toolchain is honoured).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

/// Runs a command to completion, failing with its command line if it fails.
pub fn run_checked(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd.status().with_context(|| format!("running {shown}"))?;
    if !status.success() {
        bail!("{shown} failed: {status}");
    }
    Ok(())
}

/// Runs a command to completion with its output captured: nothing shown
/// when it succeeds; when it fails, the error carries its command line and
/// the last lines it printed (a tool's chatter is only news when it
/// failed).
pub fn run_quiet(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {shown}"))?;
    if out.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(20)..];
    bail!("{shown} failed: {}\n{}", out.status, tail.join("\n"))
}

/// `git ARGS` in `tree`: its trimmed stdout, if it succeeded.
pub fn git_out(tree: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new("git")
        .current_dir(tree)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Builds the release board binaries and returns the directory holding them.
pub fn build_release_binaries(packages: &[&str]) -> Result<PathBuf> {
    build_release_binaries_with(packages, &[])
}

/// Builds the release board binaries with cargo `features`
/// (`xrunbench-player/cpal-jack`…) and returns the directory holding them.
pub fn build_release_binaries_with(packages: &[&str], features: &[String]) -> Result<PathBuf> {
    build_release_binaries_in(&workspace_root(), &target_dir(), packages, features)
}

/// [`build_release_binaries_with`] in the cargo workspace at `root`, into
/// the target directory `target`.
pub fn build_release_binaries_in(
    root: &Path,
    target: &Path,
    packages: &[&str],
    features: &[String],
) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.current_dir(root).env("CARGO_TARGET_DIR", target);
    cmd.args(["build", "--release", "--quiet"]);
    for p in packages {
        cmd.args(["--package", p]);
    }
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    run_checked(&mut cmd)?;
    Ok(target.join("release"))
}

/// Whether we run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
