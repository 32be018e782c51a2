//! The suite's own desktop-session directories. Sound stacks write where
//! a user's session keeps its state unless told otherwise: ALSA's pulse
//! plugin (loaded by any `aplay -L` or open of `default` once
//! libasound2-plugins is installed) makes `~/.config/pulse` and a
//! `/tmp/pulse-*` runtime directory, PulseAudio its cookie, WirePlumber
//! `~/.local/state/wireplumber`. The suite's tests get private
//! `XDG_*` directories instead, removed afterwards, and the suite fails if
//! any of those places appeared anyway: the machine is left as found.

use std::collections::BTreeSet;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

/// The `XDG_*` variables given to the tests, each with its subdirectory.
const VARIABLES: [(&str, &str); 4] = [
    ("XDG_RUNTIME_DIR", "runtime"),
    ("XDG_CONFIG_HOME", "config"),
    ("XDG_STATE_HOME", "state"),
    ("XDG_DATA_HOME", "data"),
];

/// Private session directories for one suite run, and what was in the
/// user's places before it.
pub struct SessionDirs {
    dir: tempfile::TempDir,
    before: BTreeSet<PathBuf>,
}

impl SessionDirs {
    /// Fresh, empty directories (mode 0700, as a runtime directory must
    /// be), and a note of the user's places as they are now.
    pub fn start() -> Result<SessionDirs> {
        let dir = tempfile::Builder::new()
            .prefix("xrunbench-session-")
            .tempdir()
            .context("creating the suite's session directories")?;
        for (_, sub) in VARIABLES {
            let path = dir.path().join(sub);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .with_context(|| format!("creating {}", path.display()))?;
        }
        Ok(SessionDirs {
            dir,
            before: user_places(),
        })
    }

    /// Points a test command at the private directories.
    pub fn configure(&self, cmd: &mut Command) {
        for (var, sub) in VARIABLES {
            cmd.env(var, self.dir.path().join(sub));
        }
    }

    /// Removes the directories; returns the failure to report when a
    /// user's place appeared during the run.
    pub fn finish(self) -> Option<String> {
        let appeared: Vec<_> = user_places().difference(&self.before).cloned().collect();
        if appeared.is_empty() {
            return None;
        }
        Some(format!(
            "the tests wrote into the user's session: {}",
            appeared
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// Those of the places sound stacks write by default that exist now.
fn user_places() -> BTreeSet<PathBuf> {
    let mut places = BTreeSet::new();
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        for rel in [".config/pulse", ".local/state/wireplumber"] {
            let path = home.join(rel);
            if path.exists() {
                places.insert(path);
            }
        }
    }
    places.extend(pulse_runtime_dirs(Path::new("/tmp")));
    places
}

/// PulseAudio's fallback runtime directories (`pulse-*`) in `tmp`.
fn pulse_runtime_dirs(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("pulse-"))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alsas_pulse_plugin_writes_only_into_the_private_directories() {
        xrunbench_test_support::skip_unless!(
            Path::new("/usr/share/alsa/alsa.conf.d/pulse.conf").exists(),
            "ALSA's pulse plugin (libasound2-plugins) is not installed"
        );
        let dirs = SessionDirs::start().unwrap();
        let mut aplay = Command::new("aplay");
        aplay.arg("-L").stdout(std::process::Stdio::null());
        dirs.configure(&mut aplay);
        aplay.status().unwrap();
        assert!(
            dirs.dir.path().join("runtime/pulse").is_dir(),
            "the plugin did not use XDG_RUNTIME_DIR: the test shows nothing"
        );
        let root = dirs.dir.path().to_path_buf();
        assert_eq!(dirs.finish(), None);
        assert!(!root.exists());
    }
}
