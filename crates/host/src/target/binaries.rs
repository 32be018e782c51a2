//! The board binaries (`xrun-trial`, `xrun-player`, `xrun-hackbench`) for
//! the architecture a target runs: built here when it is this machine's,
//! else the cross-built ones `cargo xtask board build` leaves in
//! `target/board/<arch>/`.

use std::path::PathBuf;

use anyhow::{bail, Result};

use xrunbench_lab::arch::Arch;
use xrunbench_lab::board::build::board_dir;
use xrunbench_lab::board::BINARIES;

/// `--bin-dir DIR`, declared once for every verb that runs the board
/// binaries.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BinDirArg {
    /// Use xrun-trial, xrun-player and xrun-hackbench from DIR instead of
    /// building them (for a board: binaries for its architecture).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
}

/// The directory holding the board binaries for `arch`: `bin_dir` when
/// given (the user vouches for its architecture), a release build here
/// with the player's cargo `features` when `arch` is this machine's, else
/// `target/board/<arch>/` from `cargo xtask board build`.
pub fn for_arch(arch: &str, bin_dir: Option<PathBuf>, features: &[String]) -> Result<PathBuf> {
    if let Some(d) = bin_dir {
        return Ok(d);
    }
    if Arch::host().map(Arch::name) == Some(arch) {
        return host_build(features);
    }
    let dir = board_dir().join(arch);
    if BINARIES.iter().all(|b| dir.join(b.name).is_file()) {
        xrunbench_lab::say!(
            ": using the {arch} board binaries in {} (from `{} board build`)",
            dir.display(),
            xrunbench_lab::util::invocation()
        );
        return Ok(dir);
    }
    bail!(
        "the board runs {arch} and there are no {arch} board binaries in {}: build them with \
         `{} board build --arch {arch}`, or give --bin-dir DIR",
        dir.display(),
        xrunbench_lab::util::invocation()
    )
}

/// The board binaries built here (release) with the player's `features`:
/// in the checkout this program was built in, or from the sources an
/// installed one carries.
pub fn host_build(features: &[String]) -> Result<PathBuf> {
    let with = if features.is_empty() {
        String::new()
    } else {
        format!(", {}", features.join(" "))
    };
    xrunbench_lab::say!(": building xrun-trial, xrun-player and xrun-hackbench (release{with})");
    let packages: Vec<&str> = BINARIES.iter().map(|b| b.package).collect();
    let ws = crate::carried::board_workspace()?;
    xrunbench_lab::util::build_release_binaries_in(&ws.root, &ws.target, &packages, features)
}
