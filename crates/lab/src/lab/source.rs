//! `cargo xtask lab source --debian`: a kernel tree to build, boot in the
//! lab and bisect — Debian's `linux-source-X.Y` (the kernel of this
//! machine's release), fetched with the lab's private apt state, unpacked
//! into the project's cache, made a git repository with one base commit
//! (fixed author and date: the same commit id on every machine), and
//! configured for the lab (`make tinyconfig` and the lab's fragment for
//! the architecture, [`fragment`]: everything a trial needs built in, the
//! scheduler's debugfs knobs, the commit in the kernel's release string).
//! An aarch64 or armv7 tree is a tree of its own (the same base commit),
//! configured and cross-built with Debian's cross toolchain for QEMU's
//! `-M virt` board.
//!
//! The tree is made once, in a temporary directory renamed when whole; a
//! later call finds it and only prints it. What is done in it afterwards
//! (branches, builds, a bisection) is the user's.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};

use super::kernel::{apt, apt_cache, apt_newer, cache_dir, dependency, download, Version};
use crate::arch::Arch;
use crate::util::run_quiet;

/// The lab's kernel configuration fragment for `arch`, merged over
/// `make tinyconfig`.
pub fn fragment(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => include_str!("lab-x86_64.config"),
        Arch::Aarch64 => include_str!("lab-aarch64.config"),
        Arch::Armv7 => include_str!("lab-armv7.config"),
    }
}

/// What `make` builds for `arch`'s lab kernel, and where it lands.
fn image_target(arch: Arch) -> (&'static str, &'static str) {
    match arch {
        Arch::X86_64 => ("bzImage", "arch/x86/boot/bzImage"),
        Arch::Aarch64 => ("Image", "arch/arm64/boot/Image"),
        Arch::Armv7 => ("zImage", "arch/arm/boot/zImage"),
    }
}

/// The variables of every `make` in `arch`'s tree: the kernel's name for
/// the architecture and Debian's cross compiler, for a tree of another
/// architecture than this machine's.
fn make_vars(arch: Arch) -> Vec<String> {
    if !arch.is_cross() {
        return Vec::new();
    }
    vec![
        format!("ARCH={}", arch.linux()),
        format!("CROSS_COMPILE={}-", arch.gnu_triple()),
    ]
}

/// The base commit's author, committer and date: fixed, so that the
/// tree's base has the same id wherever it is made.
const BASE_IDENTITY: [(&str, &str); 6] = [
    ("GIT_AUTHOR_NAME", "xrunbench lab"),
    ("GIT_AUTHOR_EMAIL", "lab@xrunbench.invalid"),
    ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"),
    ("GIT_COMMITTER_NAME", "xrunbench lab"),
    ("GIT_COMMITTER_EMAIL", "lab@xrunbench.invalid"),
    ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"),
];

/// The file in a finished tree's parent directory.
const READY: &str = "xrunbench-source.txt";

/// Arguments of `cargo xtask lab source`.
#[derive(clap::Args, Debug)]
pub struct SourceArgs {
    /// Debian's kernel source of this machine's release (the only source
    /// so far).
    #[arg(long, required = true)]
    pub debian: bool,
    /// Also build its kernel image as checked out (`make -jN bzImage`), so
    /// that it is ready to boot. Another `lab source` meanwhile waits until
    /// the build is done: it never hands out a tree a build still writes
    /// into (`cargo xtask test` builds it this way in the background).
    #[arg(long)]
    pub build: bool,
    /// Debian's `linux-source-X.Y` of any suite that serves newer kernels
    /// (the release's backports, the later stable releases and theirs)
    /// instead of the release's own.
    #[arg(long, value_name = "X.Y")]
    pub version: Option<Version>,
    /// The tree's architecture: x86_64, aarch64 or armv7 (default: this
    /// machine's); another than this machine's is cross-built with
    /// Debian's cross toolchain (installed if missing).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
}

/// A kernel tree of the lab, configured.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Its top directory (a git repository).
    pub path: PathBuf,
    /// The source package and version it was made from.
    pub package: String,
    /// The base commit.
    pub base: String,
}

/// `cargo xtask lab source`.
pub fn run(args: &SourceArgs) -> Result<ExitCode> {
    let arch = match args.arch.as_deref().map(|a| (a, Arch::from_name(a))) {
        None => Arch::host().unwrap_or(Arch::X86_64),
        Some((_, Some(a))) => a,
        Some((a, None)) => {
            crate::say!(": --arch {a}: expected one of {}", Arch::names());
            return Ok(ExitCode::from(2));
        }
    };
    if let Err(e) = crate::deps::ensure(&crate::deps::LAB_SOURCE) {
        return Ok(e.report());
    }
    if let Some(cross) = crate::deps::cross_toolchain(arch).filter(|_| arch.is_cross()) {
        if let Err(e) = crate::deps::ensure_groups(&[cross]) {
            return Ok(e.report());
        }
    }
    // One `lab source` at a time: a second one waits here until the first
    // has made (and, with --build, built) the tree.
    let _held = crate::board::sysroot::lock_dir(&cache_dir().join("source"))?;
    let t = match args.version {
        None => debian(arch)?,
        Some(v) => match debian_version(v, arch)? {
            Ok(t) => t,
            Err(why) => {
                crate::say!(": --version {v}: {why}");
                return Ok(ExitCode::from(2));
            }
        },
    };
    if args.build {
        build_image(&t.path, arch)?;
    }
    let (target, image) = image_target(arch);
    let vars: String = make_vars(arch).iter().map(|v| format!(" {v}")).collect();
    println!(
        "# {}: a git repository, base commit {} (tag lab-base), configured for the lab\n\
         # ({} tinyconfig + the lab's fragment). Build, then boot it:\n\
         cd {} && make -j{}{vars} {target}\n\
         [target]\n\
         vm = {{ kernel = \"{}\", arch = \"{}\" }}",
        t.package,
        &t.base[..12],
        arch.name(),
        t.path.display(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        t.path.join(image).display(),
        arch.name()
    );
    Ok(ExitCode::SUCCESS)
}

/// Debian's kernel source in the cache, made into the lab's tree the
/// first time.
pub fn debian(arch: Arch) -> Result<Tree> {
    let config = apt(Arch::X86_64)?;
    let package = source_package(&config)?;
    tree_of(&config, &package, arch)
}

/// Debian's `linux-source-X.Y` from the suites with newer kernels, made
/// into the lab's tree the first time; `Err(why)` when no suite has it,
/// naming the versions there are.
pub fn debian_version(version: Version, arch: Arch) -> Result<Result<Tree, String>> {
    let config = apt_newer(Arch::X86_64)?;
    let names = apt_cache(&config, &["pkgnames", "linux-source-"])?.unwrap_or_default();
    let mut there: Vec<Version> = names
        .lines()
        .filter_map(|n| n.trim().strip_prefix("linux-source-")?.parse().ok())
        .collect();
    there.sort();
    there.dedup();
    if !there.contains(&version) {
        let all: Vec<String> = there.iter().map(Version::to_string).collect();
        return Ok(Err(format!(
            "no suite serves linux-source-{version}; there are: {}",
            if all.is_empty() {
                "none".to_string()
            } else {
                all.join(" ")
            }
        )));
    }
    tree_of(&config, &format!("linux-source-{version}"), arch).map(Ok)
}

/// The source `package` of the archive `config`, made into the lab's tree
/// for `arch` the first time (this machine's in `PACKAGE_VERSION`, another
/// architecture's in `PACKAGE_VERSION_DEBARCH`).
fn tree_of(config: &Path, package: &str, arch: Arch) -> Result<Tree> {
    let version = package_version(config, package)?;
    let name = if arch.is_cross() {
        format!("{package}_{version}_{}", arch.debian())
    } else {
        format!("{package}_{version}")
    };
    let root = cache_dir().join("source").join(name);
    let path = root.join(package);
    if !root.join(READY).is_file() {
        crate::say!(
            ": making the lab's kernel tree from {package} {version} in {}",
            root.display()
        );
        super::make_once(&root, READY, |work| {
            make_tree(config, package, &version, arch, work)
        })?;
    }
    let base = crate::util::git_out(&path, &["rev-parse", "lab-base"])
        .with_context(|| format!("{}: no tag lab-base", path.display()))?;
    Ok(Tree {
        path,
        package: format!("{package} {version}"),
        base,
    })
}

/// `make -s -jN IMAGE` in `tree` for `arch` (N: this machine's CPUs).
fn build_image(tree: &Path, arch: Arch) -> Result<()> {
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (target, _) = image_target(arch);
    crate::say!(
        ": building the {} kernel image in {}",
        arch.name(),
        tree.display()
    );
    run_quiet(
        Command::new("make")
            .current_dir(tree)
            .args(make_vars(arch))
            .args(["-s", &format!("-j{jobs}"), target]),
    )
    .with_context(|| format!("make {target} in {}", tree.display()))
}

/// The source package `linux-source` stands for (`linux-source-6.1`).
fn source_package(config: &Path) -> Result<String> {
    dependency(config, "linux-source", "linux-source-")?
        .context("the archive has no linux-source (no kernel source for this release)")
}

/// The version apt would fetch of `package`.
fn package_version(config: &Path, package: &str) -> Result<String> {
    apt_cache(config, &["show", "--no-all-versions", package])?
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("Version: "))
                .map(|v| v.trim().to_string())
        })
        .with_context(|| format!("apt-cache show {package}: no Version"))
}

/// Fetches, unpacks, commits and configures the tree under `work`.
fn make_tree(config: &Path, package: &str, version: &str, arch: Arch, work: &Path) -> Result<()> {
    let debs = work.join("debs");
    download(config, &[package], &debs)?;
    let unpacked = work.join("deb");
    for e in fs::read_dir(&debs)? {
        run_quiet(
            Command::new("dpkg-deb")
                .arg("-x")
                .arg(e?.path())
                .arg(&unpacked),
        )?;
    }
    let tarball = unpacked.join("usr/src").join(format!("{package}.tar.xz"));
    if !tarball.is_file() {
        bail!("{package} {version} has no usr/src/{package}.tar.xz");
    }
    run_quiet(
        Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(work),
    )
    .with_context(|| format!("unpacking {}", tarball.display()))?;
    fs::remove_dir_all(&debs)?;
    fs::remove_dir_all(&unpacked)?;
    let tree = work.join(package);
    if !(tree.join("Makefile").is_file() && tree.join("kernel/sched").is_dir()) {
        bail!(
            "{package} {version}: {} is not a kernel tree",
            tree.display()
        );
    }
    drop_debian_ignore(&tree)?;
    commit_base(&tree, &format!("{package} {version} (Debian)"))?;
    configure(&tree, arch)?;
    fs::write(work.join(READY), format!("{package} {version}\n"))?;
    Ok(())
}

/// Debian's source ends its top `.gitignore` with "ignore everything at
/// the top level" (its packaging repository's rule): in a tree of its own,
/// nothing would be tracked and a new file never shown. The block goes,
/// as upstream's tree has it.
fn drop_debian_ignore(tree: &Path) -> Result<()> {
    let path = tree.join(".gitignore");
    let Ok(text) = fs::read_to_string(&path) else {
        return Ok(());
    };
    let kept = without_debian_block(&text);
    if kept != text {
        fs::write(&path, kept).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `text` without the block from the comment naming Debian's packaging to
/// its `!/debian/` line (and the `#` line opening it).
fn without_debian_block(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| l.starts_with("# Debian packaging"))
    else {
        return text.to_string();
    };
    let Some(end) = lines[start..].iter().position(|l| *l == "!/debian/") else {
        return text.to_string();
    };
    let last = start + end;
    let first = if start > 0 && lines[start - 1] == "#" {
        start - 1
    } else {
        start
    };
    let mut out: Vec<&str> = lines[..first].to_vec();
    out.extend_from_slice(&lines[last + 1..]);
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// `git init` and one commit of everything, tagged `lab-base`.
fn commit_base(tree: &Path, subject: &str) -> Result<()> {
    let git = |args: &[&str]| -> Result<()> {
        let mut c = Command::new("git");
        c.current_dir(tree)
            .args(["-c", "gc.auto=0", "-c", "core.autocrlf=false"])
            .args(args)
            .envs(BASE_IDENTITY);
        run_quiet(&mut c).with_context(|| format!("git {} in {}", args.join(" "), tree.display()))
    };
    git(&["init", "-q", "-b", "lab"])?;
    // Everything the source package holds, whatever its ignore rules say.
    git(&["add", "-A", "-f"])?;
    git(&["commit", "-q", "--no-verify", "-m", subject])?;
    git(&["tag", "lab-base"])?;
    Ok(())
}

/// `make tinyconfig`, `arch`'s fragment merged, `make olddefconfig`;
/// every line of the fragment must hold in the result.
fn configure(tree: &Path, arch: Arch) -> Result<()> {
    let make = |args: &[&str]| -> Result<()> {
        run_quiet(
            Command::new("make")
                .current_dir(tree)
                .args(make_vars(arch))
                .arg("-s")
                .args(args),
        )
        .with_context(|| format!("make {} in {}", args.join(" "), tree.display()))
    };
    make(&["tinyconfig"])?;
    let wanted = fragment(arch);
    let fragment = tree.join(".xrunbench-lab.config");
    fs::write(&fragment, wanted)?;
    run_quiet(
        Command::new("sh")
            .current_dir(tree)
            .args([
                "scripts/kconfig/merge_config.sh",
                "-m",
                "-O",
                ".",
                ".config",
            ])
            .arg(&fragment),
    )
    .context("merging the lab's fragment")?;
    fs::remove_file(&fragment)?;
    make(&["olddefconfig"])?;
    let got = fs::read_to_string(tree.join(".config"))?;
    let missing = unmet(wanted, &got);
    if !missing.is_empty() {
        bail!(
            "the lab's kernel configuration did not take: {} (a dependency Kconfig refused)",
            missing.join(", ")
        );
    }
    Ok(())
}

/// The fragment's `CONFIG_…=…` lines that `config` does not have.
fn unmet(fragment: &str, config: &str) -> Vec<String> {
    let have: std::collections::HashSet<&str> = config.lines().map(str::trim).collect();
    fragment
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("CONFIG_"))
        .filter(|l| !have.contains(l))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_s_ignore_everything_block_goes_and_nothing_else() {
        let debian = "*.o\n/vmlinux\n\n#\n# Debian packaging: ignore everything at the top level, since it isn't\n# included in our repository\n#\n/*\n!/debian/\n";
        assert_eq!(without_debian_block(debian), "*.o\n/vmlinux\n\n");
        let upstream = "*.o\n/vmlinux\n";
        assert_eq!(without_debian_block(upstream), upstream);
    }

    #[test]
    fn a_fragment_line_that_did_not_hold_is_named() {
        let frag = "# c\nCONFIG_A=y\nCONFIG_B=y\n\nCONFIG_C=8\n";
        let cfg = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=8\n";
        assert_eq!(unmet(frag, cfg), vec!["CONFIG_B=y".to_string()]);
        // The lab's own: what a trial needs is in each architecture's.
        for (arch, needed) in [
            (Arch::X86_64, "CONFIG_SND_DUMMY=y"),
            (Arch::X86_64, "CONFIG_E1000=y"),
            (Arch::Aarch64, "CONFIG_SND_ALOOP=y"),
            (Arch::Aarch64, "CONFIG_VIRTIO_NET=y"),
            (Arch::Aarch64, "CONFIG_SERIAL_AMBA_PL011_CONSOLE=y"),
            (Arch::Armv7, "CONFIG_SND_ALOOP=y"),
            (Arch::Armv7, "CONFIG_ARCH_VIRT=y"),
            (Arch::Armv7, "CONFIG_VFP=y"),
        ] {
            assert!(unmet(fragment(arch), fragment(arch)).is_empty());
            assert!(
                fragment(arch).lines().any(|l| l == needed),
                "{arch}: {needed}"
            );
        }
        for arch in Arch::ALL {
            for needed in ["CONFIG_SCHED_DEBUG=y", "CONFIG_LOCALVERSION_AUTO=y"] {
                assert!(
                    fragment(arch).lines().any(|l| l == needed),
                    "{arch}: {needed}"
                );
            }
        }
    }
}
