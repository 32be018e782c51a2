//! `cargo xtask lab kernel --debian [--version X.Y] [--rt] [--arch A]`: a
//! real kernel to try without building one — Debian's, fetched into the
//! project's cache with a private apt state (the machine's apt
//! configuration untouched, any architecture), unpacked with its modules
//! (and their `modules.dep`, which the package does not ship) — and the
//! `[target] vm` lines that boot it. Without `--version`, the kernel of the
//! machine's release; with it, the newest X.Y of any suite that serves
//! newer kernels (the release's backports, the later stable releases and
//! their backports and security suites). `--list` shows what there is.
//!
//! Debian's packaging changed twice: trixie's packages put the modules
//! under `usr/lib/modules`, and from 6.19 `linux-image-X` only depends on
//! `linux-binary[-unsigned]-X` (the image, as `usr/lib/modules/X/vmlinuz`),
//! `linux-modules-X` and `linux-base-X` (the config). Every kernel lands in
//! the cache in one layout: `boot/vmlinuz-X`, `boot/config-X` and
//! `lib/modules/X` (links where the package put them elsewhere).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::arch::Arch;
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
    /// machine's; with `--list`, all of them).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// The newest kernel of this version (`6.12`, `7.3`) any suite serves
    /// (default: the kernel of this machine's release).
    #[arg(long, value_name = "X.Y")]
    pub version: Option<Version>,
    /// List the versions and flavours the archive serves, newest release
    /// of each, instead of fetching one.
    #[arg(long, conflicts_with_all = ["version", "rt"])]
    pub list: bool,
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

/// The flavours of `arch`'s kernels the lab boots.
fn flavours(arch: Arch) -> [&'static str; 2] {
    [flavour(arch, false), flavour(arch, true)]
}

/// The lab's part of the project's cache.
pub fn cache_dir() -> PathBuf {
    xrunbench_paths::cache_dir().join("lab")
}

/// A private apt state for `arch` in the lab's cache, updated.
pub fn apt(arch: Arch) -> Result<PathBuf> {
    sysroot::apt_state(arch, &cache_dir().join(format!("apt-{}", arch.debian())))
}

/// A private apt state for `arch` with every suite that serves newer
/// kernels than the machine's release (see [`sysroot::kernel_sources`]),
/// updated.
pub fn apt_newer(arch: Arch) -> Result<PathBuf> {
    sysroot::apt_state_of(
        arch,
        &cache_dir().join(format!("apt-kernels-{}", arch.debian())),
        &sysroot::kernel_sources()?,
    )
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

/// The release Debian's `linux-image-FLAVOUR` stands for in this
/// machine's release (`6.1.0-57-amd64`).
fn release_of_meta(config: &Path, flavour: &str) -> Result<String> {
    let meta = format!("linux-image-{flavour}");
    let Some(image) = dependency(config, &meta, "linux-image-")? else {
        bail!("the archive has no {meta} (no Debian kernel of that flavour for this release)");
    };
    Ok(image
        .strip_prefix("linux-image-")
        .unwrap_or(&image)
        .to_string())
}

/// Whether the archive of `config` has a package `name`.
pub fn exists(config: &Path, name: &str) -> Result<bool> {
    Ok(apt_cache(config, &["show", "--no-all-versions", name])?.is_some_and(|t| !t.is_empty()))
}

/// A kernel version as a user asks for it (`6.12`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// 6 of 6.12.
    pub major: u64,
    /// 12 of 6.12.
    pub minor: u64,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl std::str::FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parsed = s.split_once('.').and_then(|(a, b)| {
            Some(Version {
                major: a.parse().ok()?,
                minor: b.parse().ok()?,
            })
        });
        parsed.ok_or_else(|| "expected MAJOR.MINOR, such as 6.12".to_string())
    }
}

/// One kernel the archive serves: `linux-image-RELEASE[-unsigned]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// `6.12.95+bpo-amd64`.
    pub release: String,
    /// `amd64`, `rt-arm64`.
    pub flavour: &'static str,
    /// The release's numbers, for ordering (`6.1.0-57` → 6, 1, 0, 57).
    pub numbers: Vec<u64>,
}

impl Offer {
    /// Its version (`6.12`).
    pub fn version(&self) -> Version {
        Version {
            major: self.numbers[0],
            minor: self.numbers[1],
        }
    }
}

/// The kernels among package `names` of the `flavours` given: names
/// `linux-image-ABI-FLAVOUR` (or `…-unsigned`), ABI being Debian's
/// (`6.1.0-57`, `6.12.95+bpo`, `7.3.4+bpo`): a version, then words of
/// digits only (a longer flavour, such as `rt-amd64` for `amd64`, is not
/// an ABI word).
pub fn offers(names: &str, flavours: &[&'static str]) -> Vec<Offer> {
    let mut out: Vec<Offer> = Vec::new();
    for name in names.lines().map(str::trim) {
        let Some(release) = name.strip_prefix("linux-image-") else {
            continue;
        };
        let release = release.strip_suffix("-unsigned").unwrap_or(release);
        for &f in flavours {
            let Some(abi) = release.strip_suffix(f).and_then(|r| r.strip_suffix('-')) else {
                continue;
            };
            let Some(numbers) = abi_numbers(abi) else {
                continue;
            };
            out.push(Offer {
                release: release.to_string(),
                flavour: f,
                numbers,
            });
        }
    }
    // An unsigned image and its signed one are one kernel.
    out.sort_by(|a, b| a.numbers.cmp(&b.numbers).then(a.release.cmp(&b.release)));
    out.dedup_by(|a, b| a.release == b.release);
    out
}

/// The numbers of a Debian kernel ABI (`6.1.0-57` → 6, 1, 0, 57;
/// `6.12.95+bpo` → 6, 12, 95), or `None` when it is not one.
fn abi_numbers(abi: &str) -> Option<Vec<u64>> {
    let mut words = abi.split('-');
    let version = words.next()?;
    let version = version.split('+').next()?;
    let mut numbers: Vec<u64> = version
        .split('.')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    if numbers.len() < 2 {
        return None;
    }
    for w in words {
        numbers.push(w.parse().ok()?);
    }
    Some(numbers)
}

/// The newest offer of `version` and `flavour`, or why there is none,
/// naming the nearest versions there are.
pub fn newest(offers: &[Offer], version: Version, flavour: &str) -> Result<Offer, String> {
    let of_flavour: Vec<&Offer> = offers.iter().filter(|o| o.flavour == flavour).collect();
    if let Some(o) = of_flavour.iter().rev().find(|o| o.version() == version) {
        return Ok((*o).clone());
    }
    let mut versions: Vec<Version> = of_flavour.iter().map(|o| o.version()).collect();
    versions.dedup();
    if versions.is_empty() {
        return Err(format!(
            "the archive serves no {flavour} kernel at all (try `lab kernel --debian --list`)"
        ));
    }
    let below = versions.iter().rev().find(|v| **v < version);
    let above = versions.iter().find(|v| **v > version);
    let nearest: Vec<String> = below
        .into_iter()
        .chain(above)
        .map(Version::to_string)
        .collect();
    Err(format!(
        "the archive serves no {flavour} kernel {version}; nearest: {} (all: {})",
        nearest.join(" and "),
        versions
            .iter()
            .map(Version::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    ))
}

/// The packages that hold `release`'s image, modules and config: the
/// unsigned image where there is one, else the image; from 6.19, whose
/// image package holds neither, its binary (unsigned where there is one),
/// modules and base packages.
fn packages_of(config: &Path, release: &str) -> Result<Vec<String>> {
    let modules = format!("linux-modules-{release}");
    if exists(config, &modules)? {
        let unsigned = format!("linux-binary-unsigned-{release}");
        let binary = if exists(config, &unsigned)? {
            unsigned
        } else {
            format!("linux-binary-{release}")
        };
        let mut out = vec![binary, modules];
        let base = format!("linux-base-{release}");
        if exists(config, &base)? {
            out.push(base);
        }
        return Ok(out);
    }
    let unsigned = format!("linux-image-{release}-unsigned");
    Ok(vec![if exists(config, &unsigned)? {
        unsigned
    } else {
        format!("linux-image-{release}")
    }])
}

/// What the archive of `config` serves for `arch`.
fn archive_offers(config: &Path, arch: Arch) -> Result<Vec<Offer>> {
    let names = apt_cache(config, &["pkgnames", "linux-image-"])?.unwrap_or_default();
    Ok(offers(&names, &flavours(arch)))
}

/// The newest `version` kernel of `arch` (its PREEMPT_RT flavour with
/// `rt`) in the cache, fetched and unpacked the first time; `Err(Left)`
/// names why the archive has none.
pub fn debian_version(arch: Arch, rt: bool, version: Version) -> Result<Result<Kernel, String>> {
    let config = apt_newer(arch)?;
    let offer = match newest(&archive_offers(&config, arch)?, version, flavour(arch, rt)) {
        Ok(o) => o,
        Err(why) => return Ok(Err(why)),
    };
    let packages = packages_of(&config, &offer.release)?;
    fetched(&config, &packages, &offer.release).map(Ok)
}

/// The newest `version` kernel of `arch` (`rt`: its PREEMPT_RT flavour)
/// already in the cache, if any.
fn cached(arch: Arch, rt: bool, version: Version) -> Option<Kernel> {
    let dir = cache_dir().join("kernels");
    let names: String = fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter(|e| e.path().join(READY).is_file())
        .map(|e| format!("linux-image-{}\n", e.file_name().to_string_lossy()))
        .collect();
    let f = flavour(arch, rt);
    let offer = newest(&offers(&names, &[f]), version, f).ok()?;
    kernel_in(&dir.join(&offer.release), &offer.release).ok()
}

/// The kernel a scenario's `debian = "X.Y"` boots: the newest of that
/// version in the cache, else the newest the archive serves, fetched. A
/// scenario keeps the kernel it ran on until `lab kernel --debian
/// --version X.Y` fetches a newer one, so that its runs stay comparable.
pub fn for_scenario(arch: Arch, rt: bool, version: Version) -> Result<Result<Kernel, String>> {
    match cached(arch, rt, version) {
        Some(k) => Ok(Ok(k)),
        None => debian_version(arch, rt, version),
    }
}

/// Debian's kernel for `arch` in the cache, fetched and unpacked the first
/// time (into a temporary directory renamed when whole, so that an
/// interrupted fetch never leaves one that looks finished).
pub fn debian(arch: Arch, rt: bool) -> Result<Kernel> {
    let config = apt(arch)?;
    let release = release_of_meta(&config, flavour(arch, rt))?;
    let packages = packages_of(&config, &release)?;
    fetched(&config, &packages, &release)
}

/// `release`'s kernel from `packages`, in the cache, fetched and unpacked
/// the first time.
fn fetched(config: &Path, packages: &[String], release: &str) -> Result<Kernel> {
    let dir = cache_dir().join("kernels").join(release);
    if !dir.join(READY).is_file() {
        crate::say!(": fetching {} into {}", packages.join(" "), dir.display());
        super::make_once(&dir, READY, |work| unpack(config, packages, release, work))?;
    }
    kernel_in(&dir, release)
}

/// The file in a finished kernel directory.
const READY: &str = "xrunbench-kernel.txt";

fn unpack(config: &Path, packages: &[String], release: &str, work: &Path) -> Result<()> {
    let debs = work.join("debs");
    let names: Vec<&str> = packages.iter().map(String::as_str).collect();
    download(config, &names, &debs)?;
    for e in fs::read_dir(&debs)? {
        let deb = e?.path();
        run_checked(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(work))?;
    }
    fs::remove_dir_all(&debs)?;
    one_layout(work, release).with_context(|| packages.join(" "))?;
    // The package ships no modules.dep: depmod makes it for the tree.
    run_checked(Command::new("depmod").arg("-b").arg(work).arg(release))
        .context("depmod (package kmod)")?;
    fs::write(work.join(READY), format!("{}\n", packages.join("\n")))?;
    Ok(())
}

/// Gives the kernel unpacked in `root` the cache's one layout —
/// `boot/vmlinuz-R`, `boot/config-R`, `lib/modules/R` — with relative
/// links to where its packages put them (`usr/lib/modules/R`, and from
/// 6.19 the image and config inside it); a package set without an image
/// or without modules is refused, naming what is missing.
pub fn one_layout(root: &Path, release: &str) -> Result<()> {
    let usr_modules = Path::new("usr/lib/modules").join(release);
    if !root.join("lib").exists() && root.join("usr/lib").is_dir() {
        std::os::unix::fs::symlink("usr/lib", root.join("lib"))?;
    }
    let modules = root.join("lib/modules").join(release);
    if !has_modules(&modules) {
        bail!(
            "no modules under lib/modules/{release} or {}: the package set is missing its \
             modules (Debian's linux-modules-{release} from 6.19)",
            usr_modules.display()
        );
    }
    fs::create_dir_all(root.join("boot"))?;
    // From 6.19: linux-binary-unsigned-R holds `vmlinuz.unsigned`,
    // linux-binary-R `vmlinuz`, linux-base-R `config`.
    let inside: [(&str, &[&str]); 2] = [
        ("vmlinuz", &["vmlinuz.unsigned", "vmlinuz"]),
        ("config", &["config"]),
    ];
    for (kind, names) in inside {
        let wanted = root.join("boot").join(format!("{kind}-{release}"));
        if wanted.exists() {
            continue;
        }
        let found = names
            .iter()
            .map(|n| Path::new("lib/modules").join(release).join(n))
            .find(|p| root.join(p).is_file());
        match found {
            Some(p) => std::os::unix::fs::symlink(Path::new("..").join(p), &wanted)?,
            None if kind == "vmlinuz" => bail!(
                "no kernel image (boot/vmlinuz-{release} or {}/vmlinuz): the package set is \
                 missing its image (Debian's linux-binary-{release} from 6.19)",
                usr_modules.display()
            ),
            None => {}
        }
    }
    Ok(())
}

/// Whether `dir` holds any kernel module (`.ko`, or compressed).
fn has_modules(dir: &Path) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if super::initramfs::module_name(&p).is_some() {
                return true;
            }
        }
    }
    false
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
    let bad = |what: String| {
        crate::say!(": {what}");
        Ok(std::process::ExitCode::from(2))
    };
    let arch = match &args.arch {
        None => None,
        Some(a) => match Arch::from_name(a) {
            Some(a) => Some(a),
            None => return bad(format!("--arch {a}: expected {}", Arch::names())),
        },
    };
    if let Err(e) = crate::deps::ensure(&crate::deps::LAB_KERNEL) {
        return Ok(e.report());
    }
    if args.list {
        return list(arch.map_or_else(|| Arch::ALL.to_vec(), |a| vec![a]));
    }
    let arch = match arch {
        Some(a) => a,
        None => Arch::host().context("this machine's architecture is not a lab one")?,
    };
    let k = match args.version {
        None => debian(arch, args.rt)?,
        Some(v) => match debian_version(arch, args.rt, v)? {
            Ok(k) => k,
            Err(why) => return bad(format!("--version {v} --arch {}: {why}", arch.name())),
        },
    };
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

/// `lab kernel --debian --list`: per architecture, version and flavour,
/// the newest release the archive serves.
fn list(arches: Vec<Arch>) -> Result<std::process::ExitCode> {
    println!("# arch   version  flavour    newest release");
    for arch in arches {
        let config = apt_newer(arch)?;
        let offers = archive_offers(&config, arch)?;
        for line in newest_lines(arch, &offers) {
            println!("{line}");
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// One line per version and flavour of `offers` (sorted as [`offers`]
/// sorts): the newest release, versions in order.
fn newest_lines(arch: Arch, offers: &[Offer]) -> Vec<String> {
    // `offers` is sorted oldest first: the last of each key stays.
    let newest: std::collections::BTreeMap<(Version, &str), &Offer> = offers
        .iter()
        .map(|o| ((o.version(), o.flavour), o))
        .collect();
    newest
        .into_iter()
        .map(|((version, flavour), o)| {
            format!(
                "{:<8} {:<8} {:<10} {}",
                arch.name(),
                version.to_string(),
                flavour,
                o.release
            )
        })
        .collect()
}

/// `s` as a TOML string.
fn toml_quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Package names as `apt-cache pkgnames linux-image-` gives them, in
    /// the shapes Debian's archive has used (made up where noted).
    const NAMES: &str = "\
linux-image-amd64
linux-image-rt-amd64
linux-image-6.1.0-50-amd64
linux-image-6.1.0-57-amd64-unsigned
linux-image-6.1.0-57-rt-amd64
linux-image-6.1.0-57-amd64-dbg
linux-image-6.1.0-57-cloud-amd64
linux-image-6.12.95+bpo-amd64-unsigned
linux-image-6.12.118+deb12-amd64
linux-image-6.12.118+deb12-rt-amd64
linux-image-6.16.12+bpo-amd64
linux-image-7.3.4+bpo-amd64
linux-image-7.3.4+bpo-rt-amd64
";

    #[test]
    fn offers_are_the_kernels_of_each_flavour_newest_last() {
        let o = offers(NAMES, &flavours(Arch::X86_64));
        let releases: Vec<(&str, &str)> =
            o.iter().map(|o| (o.release.as_str(), o.flavour)).collect();
        assert_eq!(
            releases,
            [
                ("6.1.0-50-amd64", "amd64"),
                ("6.1.0-57-amd64", "amd64"),
                ("6.1.0-57-rt-amd64", "rt-amd64"),
                ("6.12.95+bpo-amd64", "amd64"),
                ("6.12.118+deb12-amd64", "amd64"),
                ("6.12.118+deb12-rt-amd64", "rt-amd64"),
                ("6.16.12+bpo-amd64", "amd64"),
                ("7.3.4+bpo-amd64", "amd64"),
                ("7.3.4+bpo-rt-amd64", "rt-amd64"),
            ]
        );
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert_eq!(
            newest(&o, v("6.12"), "amd64").unwrap().release,
            "6.12.118+deb12-amd64"
        );
        assert_eq!(
            newest(&o, v("6.1"), "rt-amd64").unwrap().release,
            "6.1.0-57-rt-amd64"
        );
        assert_eq!(
            newest(&o, v("7.3"), "amd64").unwrap().release,
            "7.3.4+bpo-amd64"
        );
        assert_eq!(
            newest(&o, v("6.13"), "amd64").unwrap_err(),
            "the archive serves no amd64 kernel 6.13; nearest: 6.12 and 6.16 (all: 6.1 6.12 6.16 7.3)"
        );
        assert_eq!(
            newest(&o, v("6.16"), "rt-amd64").unwrap_err(),
            "the archive serves no rt-amd64 kernel 6.16; nearest: 6.12 and 7.3 (all: 6.1 6.12 7.3)"
        );
        assert!(newest(&o, v("6.1"), "rt-armmp")
            .unwrap_err()
            .contains("no rt-armmp kernel at all"));
        assert_eq!(
            newest_lines(Arch::X86_64, &o)[..2],
            [
                "x86_64   6.1      amd64      6.1.0-57-amd64",
                "x86_64   6.1      rt-amd64   6.1.0-57-rt-amd64"
            ]
        );
        for bad in ["6", "6.x", "", "six.twelve"] {
            assert!(bad
                .parse::<Version>()
                .unwrap_err()
                .contains("expected MAJOR.MINOR"));
        }
    }

    #[test]
    fn every_packaging_lands_in_one_layout_and_a_set_without_modules_is_named() {
        let module = |root: &Path, rel: &str| {
            let m = root.join(rel).join("kernel/sound/drivers");
            fs::create_dir_all(&m).unwrap();
            fs::write(m.join("snd-dummy.ko.xz"), "x").unwrap();
        };
        // bookworm: boot/vmlinuz-R, lib/modules/R: left as it is.
        let t = tempfile::tempdir().unwrap();
        let r = "6.1.0-57-amd64";
        module(t.path(), &format!("lib/modules/{r}"));
        fs::create_dir_all(t.path().join("boot")).unwrap();
        fs::write(t.path().join(format!("boot/vmlinuz-{r}")), "k").unwrap();
        one_layout(t.path(), r).unwrap();
        assert!(!t.path().join(format!("boot/vmlinuz-{r}")).is_symlink());

        // trixie to 6.18: boot/vmlinuz-R, usr/lib/modules/R.
        let t = tempfile::tempdir().unwrap();
        let r = "6.12.118+deb13-amd64";
        module(t.path(), &format!("usr/lib/modules/{r}"));
        fs::create_dir_all(t.path().join("boot")).unwrap();
        fs::write(t.path().join(format!("boot/vmlinuz-{r}")), "k").unwrap();
        fs::write(t.path().join(format!("boot/config-{r}")), "CONFIG_HZ=250").unwrap();
        one_layout(t.path(), r).unwrap();
        assert!(t
            .path()
            .join(format!("lib/modules/{r}/kernel/sound/drivers"))
            .is_dir());

        // 6.19 on: the image and config inside the modules' directory.
        let t = tempfile::tempdir().unwrap();
        let r = "7.3.4+bpo-amd64";
        let inside = t.path().join(format!("usr/lib/modules/{r}"));
        module(t.path(), &format!("usr/lib/modules/{r}"));
        // As Debian's linux-binary-unsigned-R and linux-base-R hold them.
        fs::write(inside.join("vmlinuz.unsigned"), "k").unwrap();
        fs::write(inside.join("config"), "CONFIG_HZ=250").unwrap();
        one_layout(t.path(), r).unwrap();
        assert_eq!(
            fs::read_to_string(t.path().join(format!("boot/vmlinuz-{r}"))).unwrap(),
            "k"
        );
        assert_eq!(
            fs::read_to_string(t.path().join(format!("boot/config-{r}"))).unwrap(),
            "CONFIG_HZ=250"
        );
        // The cache renames the directory when it is whole: links hold.
        let moved = t.path().parent().unwrap().join(format!(
            "{}-moved",
            t.path().file_name().unwrap().to_string_lossy()
        ));
        fs::rename(t.path(), &moved).unwrap();
        let image = fs::read_to_string(moved.join(format!("boot/vmlinuz-{r}")));
        fs::rename(&moved, t.path()).unwrap();
        assert_eq!(image.unwrap(), "k");

        // The image package alone (linux-modules-R not fetched).
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join(format!("usr/lib/modules/{r}"))).unwrap();
        fs::write(
            t.path()
                .join(format!("usr/lib/modules/{r}/vmlinuz.unsigned")),
            "k",
        )
        .unwrap();
        let e = format!("{:#}", one_layout(t.path(), r).unwrap_err());
        assert!(e.contains("missing its modules") && e.contains(r), "{e}");
        // The modules alone.
        let t = tempfile::tempdir().unwrap();
        module(t.path(), &format!("usr/lib/modules/{r}"));
        let e = format!("{:#}", one_layout(t.path(), r).unwrap_err());
        assert!(e.contains("missing its image"), "{e}");
    }
}
