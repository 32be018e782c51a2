//! The board binaries (`xrun-trial`, `xrun-player`, `xrun-hackbench`) for
//! the architecture a target runs: built here when it is this machine's,
//! else the cross-built ones `cargo xtask board build` leaves in
//! `target/board/<arch>/`.

use std::path::PathBuf;

use anyhow::{bail, Result};

use super::local::BOARD_BINARIES;

/// The architectures board binaries exist for, by the names `[target]
/// arch` and `cargo xtask board build --arch` use.
pub const ARCHES: [&str; 3] = ["aarch64", "armv7", "x86_64"];

/// Our name for a `uname -m` (or Rust `target_arch`) value; `None` for an
/// architecture we do not build for. (`armv8l`: a 32-bit userland on a
/// 64-bit ARM core. A 64-bit kernel with a 32-bit userland says
/// `aarch64`: such a board needs `arch = "armv7"` in `[target]`.)
pub fn arch_of_uname(machine: &str) -> Option<&'static str> {
    match machine.trim() {
        "aarch64" | "arm64" => Some("aarch64"),
        "armv7l" | "armv7" | "armv8l" | "arm" => Some("armv7"),
        "x86_64" | "amd64" => Some("x86_64"),
        _ => None,
    }
}

/// This machine's architecture, by our names.
pub fn host_arch() -> Option<&'static str> {
    arch_of_uname(std::env::consts::ARCH)
}

/// The directory holding the board binaries for `arch`: `bin_dir` when
/// given (the user vouches for its architecture), a release build here
/// with the player's cargo `features` when `arch` is this machine's, else
/// `target/board/<arch>/` from `cargo xtask board build`.
pub fn for_arch(arch: &str, bin_dir: Option<PathBuf>, features: &[String]) -> Result<PathBuf> {
    if let Some(d) = bin_dir {
        return Ok(d);
    }
    if host_arch() == Some(arch) {
        return host_build(features);
    }
    let dir = crate::util::target_dir().join("board").join(arch);
    if BOARD_BINARIES.iter().all(|b| dir.join(b).is_file()) {
        eprintln!(
            "xtask: using the {arch} board binaries in {} (from `cargo xtask board build`)",
            dir.display()
        );
        return Ok(dir);
    }
    bail!(
        "the board runs {arch} and there are no {arch} board binaries in {}: build them with \
         `cargo xtask board build --arch {arch}`, or give --bin-dir DIR",
        dir.display()
    )
}

/// The board binaries built here (release) with the player's `features`.
pub fn host_build(features: &[String]) -> Result<PathBuf> {
    let with = if features.is_empty() {
        String::new()
    } else {
        format!(", {}", features.join(" "))
    };
    eprintln!("xtask: building xrun-trial, xrun-player and xrun-hackbench (release{with})");
    crate::util::build_release_binaries_with(
        &["xrunbench-trial", "xrunbench-player", "xrunbench-hackbench"],
        features,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uname_names_map_to_ours() {
        assert_eq!(arch_of_uname("armv7l\n"), Some("armv7"));
        assert_eq!(arch_of_uname("armv8l"), Some("armv7"));
        assert_eq!(arch_of_uname("aarch64"), Some("aarch64"));
        assert_eq!(arch_of_uname("riscv64"), None);
        for a in ARCHES {
            assert_eq!(arch_of_uname(a), Some(a));
        }
    }
}
