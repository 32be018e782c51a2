//! The board crates' sources that the `xrunbench` binary carries (its
//! `build.rs` packs them): what an installed binary builds xrun-trial,
//! xrun-player and xrun-hackbench for this machine from, once the checkout
//! it came from is gone or has moved on. They are unpacked once per
//! digest into the cache.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

mod files {
    include!(concat!(env!("OUT_DIR"), "/carried.rs"));
}

/// Written last into an unpacked copy.
const READY: &str = ".xrunbench-unpacked";

/// A cargo workspace to build the board binaries in.
pub struct Workspace {
    /// Its root, where cargo runs.
    pub root: PathBuf,
    /// Its target directory.
    pub target: PathBuf,
}

/// Where this program builds the board binaries for this machine: its
/// checkout when cargo built it there (`cargo xtask`, `cargo run`), else
/// the sources it carries, unpacked into the cache.
pub fn board_workspace() -> Result<Workspace> {
    if xrunbench_paths::built_in_place() {
        return Ok(Workspace {
            root: xrunbench_paths::workspace_root(),
            target: xrunbench_paths::target_dir(),
        });
    }
    let dir = xrunbench_paths::cache_dir()
        .join("sources")
        .join(files::DIGEST);
    let root = dir.join("workspace");
    xrunbench_lab::lab::make_once(&root, READY, unpack).with_context(|| {
        format!(
            "unpacking the board crates' sources into {}",
            root.display()
        )
    })?;
    // A user's CARGO_TARGET_DIR is where cargo's output goes (and what it
    // has built there already serves).
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("target"));
    Ok(Workspace { root, target })
}

/// Writes the carried workspace into `work`.
fn unpack(work: &Path) -> Result<()> {
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let path = work.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    for (name, bytes) in files::FILES {
        write(name, bytes)?;
    }
    write("Cargo.toml", files::MANIFEST.as_bytes())?;
    write("Cargo.lock", files::LOCK.as_bytes())?;
    write(READY, b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_carried_workspace_names_only_what_it_carries() {
        let manifest: toml::Table = files::MANIFEST.parse().unwrap();
        let members = manifest["workspace"]["members"].as_array().unwrap();
        for m in members {
            let m = m.as_str().unwrap();
            assert!(
                files::FILES
                    .iter()
                    .any(|(name, _)| *name == format!("{m}/Cargo.toml")),
                "{m} is a member but not carried"
            );
        }
        assert!(files::FILES
            .iter()
            .any(|(name, _)| *name == "crates/trial/src/main.rs"));
        assert!(!files::FILES
            .iter()
            .any(|(name, _)| name.contains("/target/")));
    }
}
