//! The userland of a guest of another architecture than this machine's (an
//! arm64 or armhf board under `qemu-system-aarch64`/`-arm`): Debian's
//! `openssh-server` for that architecture with every library it loads, and
//! the libraries the board binaries load (libasound, glibc, libgcc_s) —
//! fetched with the lab's private apt state from the machine's own archive,
//! unpacked once into the lab's cache. An x86_64 guest takes the host's own
//! sshd and libraries instead.
//!
//! Only library packages are followed from `openssh-server`'s dependencies
//! (`lib*`, `zlib1g`): a guest runs sshd, not the package's maintainer
//! scripts, so adduser, debconf, perl and systemd stay out. Whether that
//! closure is whole is checked against the programs' own `DT_NEEDED`
//! entries, so that a library the closure missed is named here rather
//! than a guest whose sshd never starts.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::kernel::{apt, apt_cache, cache_dir, download, exists};
use crate::arch::Arch;
use crate::board::elf;
use crate::util::run_checked;

/// The file a finished userland holds: the packages in it.
const READY: &str = "xrunbench-userland.txt";

/// The sshd in a userland (Debian's path).
const SSHD: &str = "usr/sbin/sshd";

/// Where OpenSSH keeps the programs sshd runs (from 9.8, `sshd-session`
/// and `sshd-auth`: sshd without them accepts no connection).
pub const OPENSSH_LIBEXEC: &str = "usr/lib/openssh";

/// The packages the closure starts from, each as the names it has had
/// (the first one the archive has is taken; Debian 13 renamed libasound2
/// to libasound2t64).
const ROOTS: [&[&str]; 4] = [
    &["openssh-server"],
    &["libasound2t64", "libasound2"],
    &["libc6"],
    &["libgcc-s1"],
];

/// A foreign guest's userland, unpacked.
#[derive(Debug, Clone)]
pub struct Userland {
    arch: Arch,
    root: PathBuf,
}

impl Userland {
    /// `arch`'s userland in the lab's cache, fetched and unpacked the first
    /// time.
    pub fn ensure(arch: Arch) -> Result<Userland> {
        let root = cache_dir().join(format!("userland-{}", arch.debian()));
        if !root.join(READY).is_file() {
            crate::say!(
                ": fetching the {} guest's sshd and libraries (openssh-server and the \
                 libraries it loads) into {}",
                arch.debian(),
                root.display()
            );
            super::make_once(&root, READY, |work| make(arch, work))
                .with_context(|| format!("the {} guest's userland", arch.debian()))?;
        }
        Ok(Userland { arch, root })
    }

    /// The sshd, as a file on this machine.
    pub fn sshd(&self) -> PathBuf {
        self.root.join(SSHD)
    }

    /// Its shared libraries with the loader, as (file here, path in the
    /// guest).
    pub fn libraries(&self) -> Result<Vec<(PathBuf, PathBuf)>> {
        super::initramfs::sysroot_libraries(&self.root, self.arch)
    }

    /// Every file an SSH guest needs from it, as (file here, path in the
    /// guest): the shared libraries with the loader, and OpenSSH's helper
    /// programs.
    pub fn files(&self) -> Result<Vec<(PathBuf, PathBuf)>> {
        let mut out = self.libraries()?;
        let libexec = self.root.join(OPENSSH_LIBEXEC);
        for e in fs::read_dir(&libexec).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_file() {
                let name = p.file_name().unwrap_or_default();
                out.push((p.clone(), Path::new("/").join(OPENSSH_LIBEXEC).join(name)));
            }
        }
        Ok(out)
    }
}

/// Fetches the closure into `work` and checks it.
fn make(arch: Arch, work: &Path) -> Result<()> {
    let config = apt(arch)?;
    let mut roots = Vec::new();
    for names in ROOTS {
        roots.push(first_available(&config, names)?);
    }
    let packages = closure(&config, &roots)?;
    let debs = work.join("debs");
    let names: Vec<&str> = packages.iter().map(String::as_str).collect();
    download(&config, &names, &debs)?;
    for e in fs::read_dir(&debs)? {
        run_checked(Command::new("dpkg-deb").arg("-x").arg(e?.path()).arg(work))?;
    }
    fs::remove_dir_all(&debs)?;
    if !work.join(SSHD).is_file() {
        bail!("openssh-server for {} has no {SSHD}", arch.debian());
    }
    missing_libraries(work, arch)?;
    fs::write(work.join(READY), format!("{}\n", packages.join("\n")))?;
    Ok(())
}

/// The first of `names` the archive has.
fn first_available(config: &Path, names: &[&str]) -> Result<String> {
    for n in names {
        if exists(config, n)? {
            return Ok(n.to_string());
        }
    }
    bail!("the archive has none of {} for the guest", names.join(", "))
}

/// Whether a package is followed: one that holds libraries a program
/// loads.
fn is_library(package: &str) -> bool {
    (package.starts_with("lib") && !package.ends_with("-perl") && !package.ends_with("-dev"))
        || package == "zlib1g"
}

/// `roots` and every library package they depend on, directly or through
/// other library packages (`apt-cache depends`, one call per level).
fn closure(config: &Path, roots: &[String]) -> Result<Vec<String>> {
    let mut seen: BTreeSet<String> = roots.iter().cloned().collect();
    let mut level: Vec<String> = roots.to_vec();
    while !level.is_empty() {
        let mut args = vec!["depends", "--no-recommends", "--no-suggests"];
        args.extend(level.iter().map(String::as_str));
        let text = apt_cache(config, &args)?
            .with_context(|| format!("apt-cache depends {}", level.join(" ")))?;
        level = depends_of(&text)
            .into_iter()
            .filter(|p| is_library(p) && seen.insert(p.clone()))
            .collect();
    }
    Ok(seen.into_iter().collect())
}

/// The packages `apt-cache depends` names as Depends or PreDepends
/// (virtual ones, `<name>`, left out: a real package that provides one is
/// named on its own when it is a dependency).
pub fn depends_of(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches('|');
            l.strip_prefix("Depends: ")
                .or_else(|| l.strip_prefix("PreDepends: "))
        })
        .map(str::trim)
        .filter(|p| !p.starts_with('<'))
        .map(|p| p.split(':').next().unwrap_or(p).to_string())
        .collect()
}

/// Fails naming each library that sshd or a helper loads and the userland
/// lacks.
fn missing_libraries(root: &Path, arch: Arch) -> Result<()> {
    // Each library by the name programs ask for, with its file here.
    let have: BTreeMap<String, PathBuf> = super::initramfs::sysroot_libraries(root, arch)?
        .into_iter()
        .filter_map(|(here, guest)| Some((guest.file_name()?.to_string_lossy().into_owned(), here)))
        .collect();
    let mut queue = vec![root.join(SSHD)];
    if let Ok(rd) = fs::read_dir(root.join(OPENSSH_LIBEXEC)) {
        queue.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_file()));
    }
    let mut missing = BTreeSet::new();
    let mut done = BTreeSet::new();
    while let Some(p) = queue.pop() {
        if !done.insert(p.clone()) {
            continue;
        }
        let Ok(bytes) = fs::read(&p) else { continue };
        let Ok(needed) = elf::needed(&bytes) else {
            continue;
        };
        for n in needed {
            match have.get(&n) {
                Some(lib) => queue.push(lib.clone()),
                None => {
                    missing.insert(n);
                }
            }
        }
    }
    if !missing.is_empty() {
        bail!(
            "the {} guest's sshd loads {} and no package fetched holds it",
            arch.debian(),
            missing.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_are_read_with_alternatives_and_without_virtual_packages() {
        let text = "openssh-server\n  PreDepends: init-system-helpers\n  Depends: libc6\n \
                    |Depends: libssl3t64\n  Depends: libssl3\n  Depends: <debconf-2.0>\n    \
                    cdebconf\n    debconf\n  Recommends: xauth\nlibc6\n  Depends: libgcc-s1\n";
        assert_eq!(
            depends_of(text),
            [
                "init-system-helpers",
                "libc6",
                "libssl3t64",
                "libssl3",
                "libgcc-s1"
            ]
        );
    }

    #[test]
    fn only_library_packages_are_followed() {
        for p in ["libc6", "libssl3t64", "zlib1g", "libpam0g"] {
            assert!(is_library(p), "{p}");
        }
        for p in [
            "adduser",
            "debconf",
            "libtext-charwidth-perl",
            "libasound2-dev",
            "systemd",
        ] {
            assert!(!is_library(p), "{p}");
        }
    }
}
