//! Records the commit this is built from for every run's manifest:
//! `git rev-parse HEAD`, `+dirty` when tracked files have changed. It is
//! read at build time because an installed binary's checkout may have
//! moved on, or be gone, by the time it runs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir).join("../..");
    // Built again when HEAD moves, when something is staged or committed,
    // and when any source changes (which may make the tree dirty).
    for what in ["HEAD", "index", "packed-refs"] {
        if let Some(p) = git_path(&root, what) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    if let Some(branch) = git(&root, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git_path(&root, &branch) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    for source in ["crates", "xtask", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(source).display());
    }
    println!(
        "cargo:rustc-env=XRUNBENCH_GIT_COMMIT={}",
        commit(&root).unwrap_or_default()
    );
}

/// HEAD's commit, `+dirty` when tracked files differ from it; `None`
/// outside a git checkout.
fn commit(root: &Path) -> Option<String> {
    let mut commit = git(root, &["rev-parse", "HEAD"])?;
    let dirty = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    if dirty {
        commit.push_str("+dirty");
    }
    Some(commit)
}

/// Where git keeps `what` (a worktree's own HEAD and index, the shared
/// refs).
fn git_path(root: &Path, what: &str) -> Option<PathBuf> {
    let p = PathBuf::from(git(root, &["rev-parse", "--git-path", what])?);
    Some(if p.is_absolute() { p } else { root.join(p) })
}

/// `git ARGS` in `root`: its trimmed stdout, if it succeeded.
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
