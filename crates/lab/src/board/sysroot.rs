//! A private sysroot of the board's own libraries (libasound, glibc,
//! libgcc_s): what the linker needs to link xrun-player for another
//! architecture, and what qemu-user needs to run the result.
//!
//! The machine's apt configuration is never changed: no `dpkg
//! --add-architecture` (which makes every later `apt-get update` fetch that
//! architecture from every source, and broke it on our machines for
//! armhf). Instead a private apt state (its own lists, cache, status and
//! configuration, in the target directory) holds one source: the machine's
//! own Debian archive, copied from its sources, for the board's
//! architecture only. `apt-get download` fetches the packages and `dpkg -x`
//! unpacks them into the sysroot. No root is needed, and no mirror is named
//! in the project: it comes from the machine.
//!
//! One method for every architecture: the sysroot carries a complete glibc
//! (ld.so and libc.so from one package), so `qemu-<arch> -L SYSROOT` never
//! mixes two glibc builds — which is what made `-L /usr/aarch64-linux-gnu`
//! spin at the first `fork()` on a machine with arm64 multiarch libraries.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::arch::Arch;
use crate::util::{is_root, run_checked};

/// The board packages unpacked into the sysroot, each as the names it has
/// had (the first one the archive has is taken): libasound and its headers
/// (pkg-config finds `alsa.pc` there), and the runtime the binaries load
/// under qemu (glibc's loader and libraries, libgcc_s for unwinding).
/// Debian 13 renamed libasound2 to libasound2t64 (its 64-bit `time_t`
/// transition); `apt-get download` takes no virtual package.
pub const PACKAGES: [&[&str]; 4] = [
    &["libasound2t64", "libasound2"],
    &["libasound2-dev"],
    &["libc6"],
    &["libgcc-s1"],
];

/// The packages' names, for messages.
fn package_names() -> String {
    PACKAGES
        .iter()
        .map(|alts| alts.join("|"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The file in a finished sysroot that lists the packages in it.
const MANIFEST: &str = "xrunbench-sysroot.txt";

/// Where apt reads the machine's sources, in apt's own order.
const SOURCE_LIST: &str = "/etc/apt/sources.list";
const SOURCE_PARTS: &str = "/etc/apt/sources.list.d";

/// One apt source: a deb822 stanza, or a one-line `deb` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    /// Archive URIs.
    pub uris: Vec<String>,
    /// Suites (`bookworm`, `bookworm-updates`).
    pub suites: Vec<String>,
    /// Components (`main`).
    pub components: Vec<String>,
    /// The `Signed-By` value as written (a key file, or an embedded key on
    /// continuation lines), if any.
    pub signed_by: Option<String>,
    /// The file it came from.
    pub origin: PathBuf,
}

impl AptSource {
    /// The deb822 stanza of our private state: this source, binary
    /// packages of `main` for one architecture only.
    pub fn stanza_for(&self, arch: Arch) -> String {
        let mut s = format!(
            "Types: deb\nURIs: {}\nSuites: {}\nComponents: main\nArchitectures: {}\n",
            self.uris.join(" "),
            self.suites.join(" "),
            arch.debian()
        );
        if let Some(key) = &self.signed_by {
            s.push_str(&format!("Signed-By: {key}\n"));
        }
        s
    }
}

/// The sources of a deb822 `.sources` file, disabled stanzas and those
/// without `deb` left out.
pub fn parse_deb822(text: &str, origin: &Path) -> Vec<AptSource> {
    let mut out = Vec::new();
    for stanza in deb822_stanzas(text) {
        let field = |name: &str| {
            stanza
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let words = |name: &str| -> Vec<String> {
            field(name)
                .map(|v| v.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        };
        let enabled = !matches!(field("Enabled"), Some(v) if v.trim().eq_ignore_ascii_case("no"));
        if !enabled || !words("Types").iter().any(|t| t == "deb") {
            continue;
        }
        out.push(AptSource {
            uris: words("URIs"),
            suites: words("Suites"),
            components: words("Components"),
            signed_by: field("Signed-By"),
            origin: origin.to_path_buf(),
        });
    }
    out
}

/// A deb822 file's stanzas as (field, value) lists; a value keeps its
/// continuation lines (with their leading space), as an embedded key needs.
fn deb822_stanzas(text: &str) -> Vec<Vec<(String, String)>> {
    let mut stanzas = Vec::new();
    let mut current: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            if !current.is_empty() {
                stanzas.push(std::mem::take(&mut current));
            }
        } else if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = current.last_mut() {
                value.push('\n');
                value.push_str(line);
            }
        } else if let Some((k, v)) = line.split_once(':') {
            current.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    if !current.is_empty() {
        stanzas.push(current);
    }
    stanzas
}

/// The sources of a one-line-style `sources.list`: `deb [opts] URI SUITE
/// COMPONENT…` (`deb-src` and comments left out).
pub fn parse_one_line(text: &str, origin: &Path) -> Vec<AptSource> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let Some(rest) = line.strip_prefix("deb ").map(str::trim_start) else {
            continue;
        };
        let mut signed_by = None;
        let rest = match rest.strip_prefix('[') {
            Some(opts) => {
                let Some((opts, rest)) = opts.split_once(']') else {
                    continue;
                };
                for opt in opts.split_whitespace() {
                    if let Some(v) = opt.strip_prefix("signed-by=") {
                        signed_by = Some(v.to_string());
                    }
                }
                rest
            }
            None => rest,
        };
        let mut words = rest.split_whitespace().map(str::to_string);
        let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
            continue;
        };
        out.push(AptSource {
            uris: vec![uri],
            suites: vec![suite],
            components: words.collect(),
            signed_by,
            origin: origin.to_path_buf(),
        });
    }
    out
}

/// The machine's Debian archive among its sources: the first one with the
/// release's own suite (not `-security`, not a third-party repository's)
/// and `main`; without a known codename, the first with `main`.
pub fn choose<'a>(sources: &'a [AptSource], codename: Option<&str>) -> Option<&'a AptSource> {
    let has_main = |s: &&AptSource| s.components.iter().any(|c| c == "main");
    match codename {
        Some(code) => sources
            .iter()
            .filter(has_main)
            .find(|s| s.suites.iter().any(|x| x == code)),
        None => sources.iter().find(has_main),
    }
}

/// Every source the machine's apt reads, in apt's order: `sources.list`,
/// then `sources.list.d/` by name (`.list` and `.sources` files).
fn machine_sources() -> Vec<AptSource> {
    let mut out = Vec::new();
    let list = Path::new(SOURCE_LIST);
    if let Ok(text) = fs::read_to_string(list) {
        out.extend(parse_one_line(&text, list));
    }
    let mut parts: Vec<PathBuf> = fs::read_dir(SOURCE_PARTS)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    parts.sort();
    for path in parts {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        match path.extension().and_then(|e| e.to_str()) {
            Some("sources") => out.extend(parse_deb822(&text, &path)),
            Some("list") => out.extend(parse_one_line(&text, &path)),
            _ => {}
        }
    }
    out
}

/// `VERSION_CODENAME` of /etc/os-release (`bookworm`).
fn codename() -> Option<String> {
    let text = fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// The machine's Debian archive, or why there is none.
fn machine_archive() -> Result<AptSource> {
    let sources = machine_sources();
    let code = codename();
    match choose(&sources, code.as_deref()) {
        Some(s) => Ok(s.clone()),
        None => bail!(
            "no apt source of this machine ({SOURCE_LIST}, {SOURCE_PARTS}/) carries {} with \
             component main: the board's libraries are fetched from the machine's own Debian \
             archive",
            code.map_or("a Debian release".to_string(), |c| format!("suite {c}"))
        ),
    }
}

/// The sysroot for `arch` under `board_dir` (made if missing), with the
/// board's libasound, glibc and libgcc_s.
pub fn ensure(arch: Arch, board_dir: &Path) -> Result<PathBuf> {
    let dir = board_dir.join("sysroot").join(arch.debian());
    if dir.join(MANIFEST).is_file() {
        return Ok(dir);
    }
    let source = machine_archive()?;
    crate::say!(
        ": fetching the {} libraries ({}) from {} (the machine's source in {}) into {}",
        arch.debian(),
        package_names(),
        source.uris.join(" "),
        source.origin.display(),
        dir.display()
    );
    // Built beside its final place and renamed, so that an interrupted
    // fetch never leaves a half sysroot that looks finished.
    let work = board_dir.join(format!("sysroot-{}.{}", arch.debian(), std::process::id()));
    let made = make(arch, &source, &work);
    let result = made.and_then(|()| {
        fs::create_dir_all(board_dir.join("sysroot"))?;
        match fs::rename(work.join("root"), &dir) {
            Ok(()) => Ok(()),
            // Another xtask finished the same sysroot first: use theirs.
            Err(_) if dir.join(MANIFEST).is_file() => Ok(()),
            Err(e) => Err(e).with_context(|| format!("moving the sysroot to {}", dir.display())),
        }
    });
    let _ = fs::remove_dir_all(&work);
    result.map(|()| dir)
}

/// A private apt state for `arch` in `dir` — one source, the machine's own
/// Debian archive, for that architecture only — updated, and its
/// configuration file (for `APT_CONFIG`). The machine's apt state is never
/// touched; `apt-cache` and `apt-get download` with it need no root.
pub fn apt_state(arch: Arch, dir: &Path) -> Result<PathBuf> {
    apt_state_of(arch, dir, &[machine_archive()?])
}

/// A private apt state for `arch` in `dir` with `sources`, updated, and
/// its configuration file.
pub fn apt_state_of(arch: Arch, dir: &Path, sources: &[AptSource]) -> Result<PathBuf> {
    // Two commands at once (two tests of one suite, two users of one
    // cache) share this state, and apt's own lock refuses the second
    // `update` outright (exit 100): the second waits for the first instead.
    let _held = lock_dir(dir)?;
    let config = write_apt_state(dir, sources, arch)?;
    let mut update = Command::new("apt-get");
    update
        .env("APT_CONFIG", &config)
        .env("LC_ALL", "C")
        .args(["-qq", "update"]);
    run_checked(&mut update).with_context(|| {
        format!(
            "apt-get update of the {} index of {} from the machine's sources ({})",
            arch.debian(),
            suites_of(sources),
            origins_of(sources)
        )
    })?;
    Ok(config)
}

/// The suites of `sources`, for messages (`bookworm bookworm-backports`).
fn suites_of(sources: &[AptSource]) -> String {
    let all: Vec<&str> = sources
        .iter()
        .flat_map(|s| s.suites.iter().map(String::as_str))
        .collect();
    all.join(" ")
}

/// The files `sources` came from, for messages.
fn origins_of(sources: &[AptSource]) -> String {
    let mut all: Vec<String> = sources
        .iter()
        .map(|s| s.origin.display().to_string())
        .collect();
    all.dedup();
    all.join(", ")
}

/// Debian's stable releases, oldest first: a machine of one reaches the
/// kernels of the later ones through their suites.
const RELEASES: [&str; 3] = ["bullseye", "bookworm", "trixie"];

/// The machine's own archive and security sources, widened to every suite
/// that serves a newer kernel than its release's: its backports, and each
/// later stable release with that release's backports and security suite.
pub fn kernel_sources() -> Result<Vec<AptSource>> {
    let sources = machine_sources();
    let code = codename();
    let main = machine_archive()?;
    let security = code.as_deref().and_then(|c| {
        let suite = format!("{c}-security");
        sources
            .iter()
            .filter(|s| s.components.iter().any(|x| x == "main"))
            .find(|s| s.suites.contains(&suite))
            .cloned()
    });
    Ok(widened(&main, security.as_ref(), code.as_deref()))
}

/// `main` (the release `code`'s archive) and `security` widened to the
/// suites with newer kernels (see [`kernel_sources`]); a release we do not
/// know keeps its own suites only.
pub fn widened(
    main: &AptSource,
    security: Option<&AptSource>,
    code: Option<&str>,
) -> Vec<AptSource> {
    let later: Vec<&str> = code
        .and_then(|c| RELEASES.iter().position(|r| *r == c))
        .map(|i| RELEASES[i..].to_vec())
        .unwrap_or_default();
    let mut archive = main.clone();
    for (i, release) in later.iter().enumerate() {
        if i > 0 {
            archive.suites.push(release.to_string());
        }
        archive.suites.push(format!("{release}-backports"));
    }
    archive.suites.dedup();
    let mut out = vec![archive];
    if let Some(sec) = security {
        let mut sec = sec.clone();
        for release in later.iter().skip(1) {
            sec.suites.push(format!("{release}-security"));
        }
        out.push(sec);
    }
    out
}

/// An exclusive `flock` on `dir/xrunbench.lock` (the directory made if
/// need be), waited for, held until the file is dropped.
pub(crate) fn lock_dir(dir: &Path) -> Result<fs::File> {
    use std::os::fd::AsRawFd;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("xrunbench.lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns; no memory involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", path.display()));
    }
    Ok(file)
}

/// Fetches and unpacks the packages into `work/root`.
fn make(arch: Arch, source: &AptSource, work: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(work);
    let apt_dir = work.join("apt");
    let debs = work.join("debs");
    let root = work.join("root");
    for d in [&debs, &root] {
        fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let config = write_apt_state(&apt_dir, std::slice::from_ref(source), arch)?;
    let apt = |args: &[&str]| {
        let mut cmd = Command::new("apt-get");
        cmd.env("APT_CONFIG", &config).args(args);
        cmd
    };
    run_checked(apt(&["-qq", "update"]).env("LC_ALL", "C")).with_context(|| {
        format!(
            "apt-get update of the {} index from the machine's source in {}",
            arch.debian(),
            source.origin.display()
        )
    })?;
    let chosen: Vec<&str> = PACKAGES
        .iter()
        .map(|alts| first_real_package(&config, alts))
        .collect();
    run_checked(apt(&["-qq", "download"]).args(&chosen).current_dir(&debs))
        .with_context(|| format!("downloading {} for {}", chosen.join(" "), arch.debian()))?;
    let mut names: Vec<String> = fs::read_dir(&debs)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".deb"))
        .collect();
    names.sort();
    for name in &names {
        run_checked(
            Command::new("dpkg")
                .arg("-x")
                .arg(debs.join(name))
                .arg(&root),
        )?;
    }
    fs::write(root.join(MANIFEST), names.join("\n") + "\n")?;
    Ok(())
}

/// The first of `names` that the private state's archive has as a real
/// package (not only one another package provides); the last one when
/// none is, so that `apt-get download` names it in its error.
fn first_real_package(apt_config: &Path, names: &[&'static str]) -> &'static str {
    let real = |name: &str| {
        Command::new("apt-cache")
            .env("APT_CONFIG", apt_config)
            .args(["show", "--no-all-versions", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    names
        .iter()
        .copied()
        .find(|n| real(n))
        .unwrap_or(names[names.len() - 1])
}

/// Writes a private apt state in `dir` with one source, `source` for
/// `arch`, and returns its configuration file (for `APT_CONFIG`).
///
/// Nothing of the machine's apt configuration is read but its proxy
/// settings: its `apt.conf.d` also holds hooks (PackageKit, AppStream)
/// that must not run on our private lists.
fn write_apt_state(dir: &Path, sources: &[AptSource], arch: Arch) -> Result<PathBuf> {
    for sub in [
        "lists/partial",
        "cache/archives/partial",
        "sources.list.d",
        "apt.conf.d",
        "preferences.d",
    ] {
        fs::create_dir_all(dir.join(sub))?;
    }
    fs::write(dir.join("status"), "")?;
    let stanzas: Vec<String> = sources.iter().map(|s| s.stanza_for(arch)).collect();
    fs::write(
        dir.join("sources.list.d/machine.sources"),
        stanzas.join("\n"),
    )?;
    let d = dir.display();
    let mut conf = format!(
        "Dir::State \"{d}\";\n\
         Dir::State::lists \"{d}/lists\";\n\
         Dir::State::status \"{d}/status\";\n\
         Dir::Cache \"{d}/cache\";\n\
         Dir::Etc::main \"/dev/null\";\n\
         Dir::Etc::sourcelist \"/dev/null\";\n\
         Dir::Etc::sourceparts \"{d}/sources.list.d\";\n\
         Dir::Etc::parts \"{d}/apt.conf.d\";\n\
         Dir::Etc::preferences \"/dev/null\";\n\
         Dir::Etc::preferencesparts \"{d}/preferences.d\";\n\
         APT::Architecture \"{a}\";\n\
         APT::Architectures {{ \"{a}\"; }};\n\
         Acquire::Languages \"none\";\n",
        a = arch.debian()
    );
    if is_root() {
        // apt would drop to `_apt` to download, which may not write into
        // our directories; it then downloads as root anyway, with a
        // warning. Signatures are checked either way.
        conf.push_str("APT::Sandbox::User \"root\";\n");
    }
    conf.push_str(&machine_proxies());
    let path = dir.join("apt.conf");
    fs::write(&path, conf)?;
    Ok(path)
}

/// The machine's apt proxy settings (`Acquire::http::Proxy …`), as
/// `apt-config dump` prints them: a lab machine may reach its mirror only
/// through one.
fn machine_proxies() -> String {
    let Ok(out) = Command::new("apt-config").arg("dump").output() else {
        return String::new();
    };
    proxy_lines(&String::from_utf8_lossy(&out.stdout))
}

/// The proxy lines of an `apt-config dump`.
fn proxy_lines(dump: &str) -> String {
    dump.lines()
        .filter(|l| {
            let key = l.split_whitespace().next().unwrap_or_default();
            key.starts_with("Acquire::") && key.to_ascii_lowercase().contains("::proxy")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The environment that cross-builds for `arch` against `sysroot`, for
/// this target only: the linker (with the C cross compiler when `linker`),
/// and pkg-config reading only the board's `.pc` files, with their paths
/// inside the sysroot. Host build scripts see none of it.
pub fn cross_env(arch: Arch, sysroot: &Path, linker: bool) -> Vec<(String, OsString)> {
    let upper = arch.rust_target().to_uppercase().replace('-', "_");
    let lower = arch.rust_target().replace('-', "_");
    let pc = |dir: &str| sysroot.join(dir).join("pkgconfig");
    let libdir = std::env::join_paths([
        pc(&format!("usr/lib/{}", arch.gnu_triple())),
        pc("usr/share"),
    ])
    .expect("sysroot paths hold no ':'");
    let mut env = vec![
        (format!("PKG_CONFIG_ALLOW_CROSS_{lower}"), "1".into()),
        (format!("PKG_CONFIG_LIBDIR_{lower}"), libdir),
        // Not the user's PKG_CONFIG_PATH: it names the host's .pc files.
        (format!("PKG_CONFIG_PATH_{lower}"), OsString::new()),
        (
            format!("PKG_CONFIG_SYSROOT_DIR_{lower}"),
            sysroot.as_os_str().to_owned(),
        ),
    ];
    if linker {
        env.push((
            format!("CARGO_TARGET_{upper}_LINKER"),
            format!("{}-gcc", arch.gnu_triple()).into(),
        ));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_user_of_an_apt_state_waits_for_the_first() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let first = lock_dir(dir.path()).unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let second = {
            let (d, released) = (dir.path().to_path_buf(), Arc::clone(&released));
            std::thread::spawn(move || {
                let _held = lock_dir(&d).unwrap();
                released.load(Ordering::SeqCst)
            })
        };
        // Give the second taker time to reach the lock (if it came later,
        // the test proves less, never fails wrongly).
        std::thread::sleep(std::time::Duration::from_millis(200));
        released.store(true, Ordering::SeqCst);
        drop(first);
        assert!(
            second.join().unwrap(),
            "the second took the lock while the first held it"
        );
    }

    // Made-up archives: the project never names a real mirror.
    const DEB822: &str = "\
# a comment
Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://archive.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://archive.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
";

    #[test]
    fn kernel_suites_reach_the_later_releases_and_their_backports_from_the_machines_mirrors() {
        let sources = parse_deb822(DEB822, Path::new("debian.sources"));
        let w = widened(&sources[0], Some(&sources[1]), Some("bookworm"));
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].uris, ["http://archive.example/debian"]);
        assert_eq!(
            w[0].suites,
            [
                "bookworm",
                "bookworm-updates",
                "bookworm-backports",
                "trixie",
                "trixie-backports"
            ]
        );
        assert_eq!(w[1].uris, ["http://archive.example/debian-security"]);
        assert_eq!(w[1].suites, ["bookworm-security", "trixie-security"]);
        assert_eq!(w[1].signed_by, sources[1].signed_by);
        // The newest stable release: its backports only.
        let t = widened(&sources[0], None, Some("trixie"));
        assert_eq!(t.len(), 1);
        assert!(t[0].suites.ends_with(&["trixie-backports".to_string()]));
        // A release we do not know: its own suites, nothing guessed.
        let u = widened(&sources[0], None, Some("sid"));
        assert_eq!(u[0].suites, sources[0].suites);
    }

    #[test]
    fn the_release_suite_is_chosen_not_security() {
        let sources = parse_deb822(DEB822, Path::new("debian.sources"));
        assert_eq!(sources.len(), 2);
        let chosen = choose(&sources, Some("bookworm")).unwrap();
        assert_eq!(chosen.uris, ["http://archive.example/debian"]);
        assert_eq!(
            chosen.stanza_for(Arch::Armv7),
            "Types: deb\nURIs: http://archive.example/debian\n\
             Suites: bookworm bookworm-updates\nComponents: main\nArchitectures: armhf\n\
             Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        );
        assert_eq!(choose(&sources, Some("trixie")), None);
        assert_eq!(choose(&sources, None), Some(&sources[0]));
    }

    #[test]
    fn a_third_party_source_first_is_passed_over() {
        let list = "deb [arch=amd64 signed-by=/k.gpg] https://vendor.example/apt stable main\n\
                    deb http://archive.example/debian bookworm main contrib # trailing\n\
                    deb-src http://archive.example/debian bookworm main\n";
        let sources = parse_one_line(list, Path::new("sources.list"));
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[0].signed_by.as_deref(), Some("/k.gpg"));
        let chosen = choose(&sources, Some("bookworm")).unwrap();
        assert_eq!(chosen.uris, ["http://archive.example/debian"]);
        assert_eq!(chosen.components, ["main", "contrib"]);
    }

    #[test]
    fn disabled_stanzas_and_deb_src_are_skipped_embedded_keys_kept() {
        let text = "Enabled: no\nTypes: deb\nURIs: http://a.example/debian\nSuites: bookworm\nComponents: main\n\n\
                    Types: deb-src deb\nURIs: http://b.example/debian\nSuites: bookworm\nComponents: main\n\
                    Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n xsFNBF\n -----END PGP PUBLIC KEY BLOCK-----\n";
        let sources = parse_deb822(text, Path::new("x.sources"));
        assert_eq!(sources.len(), 1);
        let key = sources[0].signed_by.as_deref().unwrap();
        assert!(key.starts_with("\n -----BEGIN"), "{key:?}");
        assert!(sources[0]
            .stanza_for(Arch::Aarch64)
            .contains("Signed-By: \n -----BEGIN"));
    }

    #[test]
    fn only_proxy_settings_are_taken_from_the_machine() {
        let dump = "APT::Sandbox::User \"_apt\";\n\
                    Acquire::http::Proxy \"http://proxy.example:3128\";\n\
                    Acquire::Languages \"none\";\n\
                    APT::Update::Post-Invoke-Success:: \"appstreamcli refresh\";\n";
        assert_eq!(
            proxy_lines(dump),
            "Acquire::http::Proxy \"http://proxy.example:3128\";\n"
        );
    }
}
