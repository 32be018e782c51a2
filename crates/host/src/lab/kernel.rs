//! `cargo xtask lab kernel --debian [--rt] [--arch A]`: a real kernel to
//! try without building one — Debian's, fetched into the project's cache
//! with a private apt state (the machine's apt configuration untouched,
//! any architecture), unpacked with its modules (and their `modules.dep`,
//! which the package does not ship) — and the `[target] vm` lines that
//! boot it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::board::arch::Arch;
use crate::board::sysroot;
use crate::util::run_checked;

/// Arguments of `cargo xtask lab kernel`.
#[derive(clap::Args, Debug)]
pub struct KernelArgs {
    /// Debian's kernel of this machine's release (the only source so far).
    #[arg(long, required = true)]
    pub debian: bool,
    /// The PREEMPT_RT flavour.
    #[arg(long)]
    pub rt: bool,
    /// The guest's architecture: x86_64, aarch64 or armv7 (default: this
    /// machine's).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
}

/// A kernel unpacked in the cache: its image and its modules.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Its release (`6.1.0-57-amd64`).
    pub release: String,
    /// The image QEMU boots (`boot/vmlinuz-RELEASE`).
    pub image: PathBuf,
    /// `lib/modules/RELEASE`, with `modules.dep`.
    pub modules: PathBuf,
}

/// Debian's flavour of `arch`'s kernel.
fn flavour(arch: Arch, rt: bool) -> &'static str {
    match (arch, rt) {
        (Arch::X86_64, false) => "amd64",
        (Arch::X86_64, true) => "rt-amd64",
        (Arch::Aarch64, false) => "arm64",
        (Arch::Aarch64, true) => "rt-arm64",
        (Arch::Armv7, false) => "armmp",
        (Arch::Armv7, true) => "rt-armmp",
    }
}

/// The lab's part of the project's cache.
pub fn cache_dir() -> PathBuf {
    crate::util::target_dir()
        .join("xrunbench-cache")
        .join("lab")
}

/// A private apt state for `arch` in the lab's cache, updated.
pub fn apt(arch: Arch) -> Result<PathBuf> {
    sysroot::apt_state(arch, &cache_dir().join(format!("apt-{}", arch.debian())))
}

/// `apt-get download NAMES` into `dir` with the apt state `config`.
pub fn download(config: &Path, names: &[&str], dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)?;
    let mut cmd = Command::new("apt-get");
    cmd.env("APT_CONFIG", config)
        .args(["-qq", "download"])
        .args(names)
        .current_dir(dir);
    run_checked(&mut cmd).with_context(|| format!("downloading {}", names.join(" ")))
}

/// `apt-cache ARGS` with the apt state `config`: its stdout, when it
/// succeeded.
pub fn apt_cache(config: &Path, args: &[&str]) -> Result<Option<String>> {
    let out = Command::new("apt-cache")
        .env("APT_CONFIG", config)
        .args(args)
        .output()
        .context("running apt-cache")?;
    Ok(out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// The package metapackage `meta` depends on whose name starts with
/// `prefix` (`linux-image-amd64` → `linux-image-6.1.0-57-amd64`).
pub fn dependency(config: &Path, meta: &str, prefix: &str) -> Result<Option<String>> {
    Ok(apt_cache(config, &["depends", meta])?.and_then(|text| {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("Depends: "))
            .find(|d| d.starts_with(prefix))
            .map(str::to_string)
    }))
}

/// The image package Debian's `linux-image-FLAVOUR` stands for, as its
/// unsigned build (`linux-image-6.1.0-57-amd64-unsigned`).
fn image_package(config: &Path, flavour: &str) -> Result<String> {
    let meta = format!("linux-image-{flavour}");
    let Some(image) = dependency(config, &meta, "linux-image-")? else {
        bail!("the archive has no {meta} (no Debian kernel of that flavour for this release)");
    };
    let unsigned = format!("{image}-unsigned");
    let has = apt_cache(config, &["show", "--no-all-versions", &unsigned])?
        .is_some_and(|text| !text.is_empty());
    Ok(if has { unsigned } else { image })
}

/// Debian's kernel for `arch` in the cache, fetched and unpacked the first
/// time (into a temporary directory renamed when whole, so that an
/// interrupted fetch never leaves one that looks finished).
pub fn debian(arch: Arch, rt: bool) -> Result<Kernel> {
    let config = apt(arch)?;
    let package = image_package(&config, flavour(arch, rt))?;
    let release = package
        .strip_prefix("linux-image-")
        .and_then(|r| r.strip_suffix("-unsigned").or(Some(r)))
        .unwrap_or(&package)
        .to_string();
    let dir = cache_dir().join("kernels").join(&release);
    if !dir.join(READY).is_file() {
        crate::say!(": fetching {package} into {}", dir.display());
        super::make_once(&dir, READY, |work| {
            unpack(&config, &package, &release, work)
        })?;
    }
    kernel_in(&dir, &release)
}

/// The file in a finished kernel directory.
const READY: &str = "xrunbench-kernel.txt";

fn unpack(config: &Path, package: &str, release: &str, work: &Path) -> Result<()> {
    let debs = work.join("debs");
    download(config, &[package], &debs)?;
    for e in fs::read_dir(&debs)? {
        let deb = e?.path();
        run_checked(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(work))?;
    }
    fs::remove_dir_all(&debs)?;
    // The package ships no modules.dep: depmod makes it for the tree.
    run_checked(Command::new("depmod").arg("-b").arg(work).arg(release))
        .context("depmod (package kmod)")?;
    fs::write(work.join(READY), format!("{package}\n"))?;
    Ok(())
}

/// The kernel of release `release` unpacked under `root`.
fn kernel_in(root: &Path, release: &str) -> Result<Kernel> {
    let image = root.join("boot").join(format!("vmlinuz-{release}"));
    let modules = root.join("lib/modules").join(release);
    if !image.is_file() || !modules.join("modules.dep").is_file() {
        bail!(
            "{}: no boot/vmlinuz-{release} with lib/modules/{release}/modules.dep",
            root.display()
        );
    }
    Ok(Kernel {
        release: release.to_string(),
        image,
        modules,
    })
}

/// `cargo xtask lab kernel`.
pub fn run(args: &KernelArgs) -> Result<std::process::ExitCode> {
    let arch = match &args.arch {
        None => Arch::host().context("this machine's architecture is not a lab one")?,
        Some(a) => match Arch::from_name(a) {
            Some(a) => a,
            None => {
                crate::say!(": --arch {a}: expected {}", Arch::names());
                return Ok(std::process::ExitCode::from(2));
            }
        },
    };
    if let Err(e) = crate::deps::ensure(&crate::deps::LAB_KERNEL) {
        return Ok(e.report());
    }
    let k = debian(arch, args.rt)?;
    println!(
        "# Debian's {} kernel {}; in a scenario:\n[target]\nvm = {{ kernel = {}, modules = {}, arch = \"{}\" }}",
        arch.name(),
        k.release,
        toml_quote(&k.image.display().to_string()),
        toml_quote(&k.modules.display().to_string()),
        arch.name()
    );
    println!(
        "# or on the command line: --target vm:{}",
        k.image.display()
    );
    Ok(std::process::ExitCode::SUCCESS)
}

/// `s` as a TOML string.
fn toml_quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
