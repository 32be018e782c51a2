//! One trial on a real kernel of another architecture, for the board
//! stage: the kernel (Debian's for that architecture) boots under QEMU with
//! the cross-built board binaries, their libraries from the board's
//! sysroot, and the trial's spec in its initramfs; `/init` runs the trial,
//! prints its record on the console (base64) and powers off. No network
//! and no host in the loop: what a board farm's QEMU device does.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use xrunbench_schema::trial::TrialRecord;

use super::initramfs::{self, Channel, Image, Sound, RECORD_BEGIN, RECORD_END};
use super::kernel::Kernel;
use super::qemu::{self, Accel, Boot};
use crate::board::arch::Arch;

/// How long the guest may take for the boot, the trial and the power-off
/// under an emulated CPU on a loaded host.
const LIMIT: Duration = Duration::from_secs(900);

/// Runs the trial `spec` (JSON) on `kernel` (of `arch`) with the board
/// binaries in `bins` and the libraries of `sysroot`, on `sound`; its
/// record.
pub fn trial(
    arch: Arch,
    kernel: &Kernel,
    bins: &Path,
    sysroot: &Path,
    sound: Sound,
    spec: &str,
) -> Result<TrialRecord> {
    let dir = tempfile::Builder::new()
        .prefix("xrunbench-oneshot.")
        .tempdir()?;
    let initrd = dir.path().join("initramfs.cpio");
    Image {
        arch,
        busybox: &super::vm::busybox(arch)?,
        modules: initramfs::load_order(&kernel.modules, sound.modules())?,
        sound,
        libraries: initramfs::sysroot_libraries(sysroot, arch)?,
        channel: Channel::Oneshot {
            spec: spec.to_string(),
            bins: bins.to_path_buf(),
        },
    }
    .write(&initrd)?;
    let boot = Boot {
        arch,
        kernel: kernel.image.clone(),
        initrd,
        append: String::new(),
        cpus: 2,
        memory_mib: 1024,
        sound,
        accel: Accel::Tcg,
        ssh: false,
        console: dir.path().join("console.log"),
    };
    let mut guest =
        qemu::start(&boot, initramfs::TRIAL_STARTS, LIMIT).map_err(|e| anyhow::anyhow!("{e}"))?;
    let ended = guest.wait(LIMIT);
    let console = guest.console();
    drop(guest);
    if !ended {
        bail!(
            "the guest did not power off within {} s after it was ready; console: {}",
            LIMIT.as_secs(),
            tail(&console)
        );
    }
    record_in(&console).with_context(|| format!("console: {}", tail(&console)))
}

/// The record between the console's markers.
fn record_in(console: &str) -> Result<TrialRecord> {
    let mut lines = console.lines().skip_while(|l| !l.contains(RECORD_BEGIN));
    if lines.next().is_none() {
        bail!("the guest printed no record");
    }
    let b64: String = lines
        .take_while(|l| !l.contains(RECORD_END))
        .map(str::trim)
        .collect();
    let bytes = crate::lava::results::decode_base64(&b64)
        .context("the record on the console is not base64")?;
    serde_json::from_slice(&bytes).context("the record on the console is not a trial record")
}

/// The last lines of the console, on one line.
fn tail(console: &str) -> String {
    let lines: Vec<&str> = console.lines().rev().take(8).collect();
    xrunbench_schema::doc::one_line(&lines.into_iter().rev().collect::<Vec<_>>().join(" / "))
}
