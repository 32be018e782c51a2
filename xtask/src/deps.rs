//! The Debian packages the suite and the benchmarks need, installed on
//! demand: with apt-get when we are root, else by printing the exact
//! command for the user to run.

use std::process::{Command, Stdio};

use anyhow::{bail, Result};

use crate::util::{is_root, run_checked};

/// What the test suite needs, and why.
pub const TEST_PACKAGES: &[(&str, &str)] = &[
    ("pkg-config", "finds libasound for the alsa crate"),
    ("libasound2-dev", "the alsa crate links libasound"),
    ("alsa-utils", "aplay, the reference player"),
    (
        "jackd2",
        "a real clocked PCM without a sound card (JACK dummy backend)",
    ),
    ("libasound2-plugins", "the ALSA `jack` PCM plugin"),
    (
        "libjack-jackd2-dev",
        "cpal's JACK host links libjack (player feature cpal-jack)",
    ),
    (
        "pulseaudio",
        "a null-sink PulseAudio server for cpal's PulseAudio host",
    ),
    (
        "pulseaudio-utils",
        "pactl and the keepalive pacat for that server",
    ),
    (
        "libpipewire-0.3-dev",
        "cpal's PipeWire host links libpipewire (player feature cpal-pipewire)",
    ),
    (
        "libspa-0.2-dev",
        "headers the PipeWire bindings are generated from",
    ),
    ("clang", "bindgen for the PipeWire bindings"),
    ("libclang-dev", "bindgen for the PipeWire bindings"),
    ("rt-tests", "hackbench, the reference load generator"),
    ("util-linux", "taskset and chrt for scheduling stalls"),
];

fn is_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// Installs whatever of `packages` is missing (apt-get as root), or fails
/// with the exact command a non-root user must run.
pub fn ensure(packages: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|(name, _)| !is_installed(name))
        .map(|(name, _)| *name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root() {
        bail!(
            "missing Debian packages: {list}; run:\n  sudo apt-get update && sudo apt-get install -y {list}"
        );
    }
    eprintln!("xtask: installing {list}");
    run_checked(Command::new("apt-get").args(["update", "-qq"]))?;
    run_checked(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}
