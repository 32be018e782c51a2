//! This machine: `xrun-trial` from the board binaries' directory, files
//! where they already are.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use xrunbench_schema::probe::Probe;

use super::Target;

/// The local machine, with the board binaries in `bin_dir`.
pub struct Local {
    bin_dir: PathBuf,
}

impl Local {
    /// Uses `xrun-trial`, `xrun-player` and `xrun-hackbench` from
    /// `bin_dir` (they must all be there: `xrun-trial` finds the other two
    /// beside itself).
    pub fn new(bin_dir: &Path) -> Result<Local> {
        for b in crate::board::build::BINARIES {
            let p = bin_dir.join(b.name);
            if !p.is_file() {
                bail!("{} not found", p.display());
            }
        }
        let bin_dir = std::fs::canonicalize(bin_dir)
            .with_context(|| format!("resolving {}", bin_dir.display()))?;
        Ok(Local { bin_dir })
    }
}

impl Target for Local {
    fn describe(&self) -> String {
        "local".into()
    }

    fn xrun_trial(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.bin_dir.join("xrun-trial"));
        // Named explicitly rather than found beside xrun-trial's own
        // executable: a wrapper script in bin_dir (tests, a user's own
        // build of one binary) must still bring its siblings along.
        cmd.args(args).arg("--bin-dir").arg(&self.bin_dir);
        cmd
    }

    fn stage_audio(&mut self, host_path: &Path, _probe: &Probe) -> Result<PathBuf> {
        std::fs::canonicalize(host_path).with_context(|| format!("{}", host_path.display()))
    }

    fn work_dir(&self, run_dir: &Path) -> Option<PathBuf> {
        Some(run_dir.join("trials"))
    }
}
