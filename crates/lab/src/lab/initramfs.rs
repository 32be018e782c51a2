//! The guest's initramfs, built by the host for one kernel and one
//! architecture: busybox (static, of the guest's architecture), the sound
//! driver's modules in load order (from the kernel's `modules.dep`), the
//! libraries the board binaries load, ALSA's configuration, and the trial
//! channel — an sshd with a host key made for the lab, which the host
//! checks, or, for a board farm, a shell on the console with the board
//! binaries. `/init` mounts what a trial needs (proc, sys, devtmpfs,
//! tmpfs on /dev/shm, /run and /tmp, debugfs), loads the modules, waits
//! for the sound card (HDA probes its codec asynchronously) and says on
//! the console when it is ready — or why not.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::cpio::{self, Entry};
use crate::arch::Arch;
use crate::board::BINARIES;

/// The line the guest prints on its console once it is ready (its sshd
/// up).
pub const READY: &str = "xrunbench-lab: ready";
/// The line it prints when the sound card never came; the driver follows.
pub const NO_SOUND: &str = "xrunbench-lab: no sound card";
/// The line it prints when its sshd did not start; sshd's log follows.
pub const NO_SSHD: &str = "xrunbench-lab: sshd did not start";

/// The guest's sound driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sound {
    /// QEMU's emulated Intel HDA with an output codec (`snd-hda-intel`).
    Hda,
    /// `snd-dummy`: a card whose clock is the kernel's timers.
    Dummy,
    /// `snd-aloop`: the loopback card.
    Aloop,
}

impl Sound {
    /// Its name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            Sound::Hda => "hda",
            Sound::Dummy => "dummy",
            Sound::Aloop => "aloop",
        }
    }

    /// From a scenario's word.
    pub fn from_name(s: &str) -> Option<Sound> {
        [Sound::Hda, Sound::Dummy, Sound::Aloop]
            .into_iter()
            .find(|x| x.name() == s)
    }

    /// The modules to load, in order (codecs before the controller, so it
    /// finds them when it probes).
    pub fn modules(self) -> &'static [&'static str] {
        match self {
            Sound::Hda => &["snd-hda-codec-generic", "snd-hda-intel"],
            Sound::Dummy => &["snd-dummy"],
            Sound::Aloop => &["snd-aloop"],
        }
    }

    /// The driver, as people name it.
    pub fn driver(self) -> &'static str {
        match self {
            Sound::Hda => "snd-hda-intel",
            Sound::Dummy => "snd-dummy",
            Sound::Aloop => "snd-aloop",
        }
    }
}

/// The modules `wanted` and all they depend on, in load order, as paths
/// under `modules` (a `lib/modules/RELEASE` tree with `modules.dep`). A
/// module built into the kernel (`modules.builtin`) needs no file; one
/// that is neither is an error naming it.
pub fn load_order(modules: &Path, wanted: &[&str]) -> Result<Vec<PathBuf>> {
    let dep_text = fs::read_to_string(modules.join("modules.dep"))
        .with_context(|| format!("{}: no modules.dep", modules.display()))?;
    let builtin = fs::read_to_string(modules.join("modules.builtin")).unwrap_or_default();
    let key = |path: &str| module_name(Path::new(path)).unwrap_or_default();
    let mut deps: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for line in dep_text.lines() {
        let Some((m, ds)) = line.split_once(':') else {
            continue;
        };
        let ds = ds.split_whitespace().map(str::to_string).collect();
        deps.insert(key(m), (m.to_string(), ds));
    }
    let mut order: Vec<String> = Vec::new();
    for w in wanted {
        let name = w.replace('_', "-");
        let Some((path, ds)) = deps.get(&name) else {
            if builtin.lines().any(|l| key(l) == name) {
                continue;
            }
            bail!(
                "the kernel has no {w} (neither a module in {} nor built in)",
                modules.display()
            );
        };
        // modules.dep lists each module's dependencies, the closest first:
        // loaded in reverse, each finds what it needs.
        for d in ds.iter().rev().chain(std::iter::once(path)) {
            if !order.contains(d) {
                order.push(d.clone());
            }
        }
    }
    Ok(order.into_iter().map(|m| modules.join(m)).collect())
}

/// The first module of a modules tree (`modules.dep`'s first entry), as
/// a file.
pub fn first_module(modules: &Path) -> Option<PathBuf> {
    let dep = fs::read_to_string(modules.join("modules.dep")).ok()?;
    let first = dep.lines().find_map(|l| l.split_once(':'))?.0;
    Some(modules.join(first)).filter(|p| p.is_file())
}

/// The sound card drivers of a modules tree, modules and built in (those
/// under `sound/drivers`, `sound/pci`, `sound/usb` and `sound/virtio`:
/// not the sound core, codecs or helper libraries), sorted.
pub fn sound_drivers(modules: &Path) -> Vec<String> {
    let dep = fs::read_to_string(modules.join("modules.dep")).unwrap_or_default();
    let builtin = fs::read_to_string(modules.join("modules.builtin")).unwrap_or_default();
    let paths = dep
        .lines()
        .filter_map(|l| l.split_once(':').map(|(m, _)| m))
        .chain(builtin.lines());
    let mut out: Vec<String> = paths
        .filter(|p| {
            [
                "sound/drivers/",
                "sound/pci/",
                "sound/usb/",
                "sound/virtio/",
            ]
            .iter()
            .any(|d| p.contains(d))
        })
        .filter_map(|p| module_name(Path::new(p)))
        .filter(|n| {
            !["codec", "core", "lib", "mpu401-uart"]
                .iter()
                .any(|x| n.contains(x))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The compressions a module file may have (Debian's from 6.12: xz), with
/// the program that undoes each (xz-utils, zstd and gzip are on every
/// Debian system).
const COMPRESSED: [(&str, &str); 3] = [(".xz", "xz"), (".zst", "zstd"), (".gz", "gzip")];

/// The module a file holds (`snd_dummy.ko.xz` → `snd-dummy`), or `None`
/// when it is not a module.
pub fn module_name(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let plain = COMPRESSED
        .iter()
        .find_map(|(ext, _)| name.strip_suffix(ext))
        .unwrap_or(name);
    Some(plain.strip_suffix(".ko")?.replace('_', "-"))
}

/// A module file's ELF object: decompressed when the file is compressed
/// (the guest's busybox `insmod` loads plain objects only); with the name
/// it has in the guest (`snd-dummy.ko`).
pub fn module_object(path: &Path) -> Result<(Vec<u8>, String)> {
    let name = file_name(path);
    let Some((ext, program)) = COMPRESSED.iter().find(|(ext, _)| name.ends_with(ext)) else {
        let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        return Ok((bytes, name));
    };
    let out = std::process::Command::new(program)
        .args(["-dc", "--"])
        .arg(path)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {program} to decompress {}", path.display()))?;
    if !out.status.success() || !out.stdout.starts_with(b"\x7fELF") {
        bail!(
            "{}: {program} -d gave no kernel object ({}): {}",
            path.display(),
            out.status,
            xrunbench_schema::doc::one_line(String::from_utf8_lossy(&out.stderr).trim())
        );
    }
    Ok((out.stdout, name[..name.len() - ext.len()].to_string()))
}

/// How the host talks to the guest.
pub enum Channel {
    /// An sshd on port 22 with `host_key` (private key file), letting in
    /// root with `authorized_key` (a public key line).
    Ssh {
        /// The sshd to run (a file here, of the guest's architecture).
        sshd: PathBuf,
        /// The lab's host key, private.
        host_key: PathBuf,
        /// The lab's client key, public (one line).
        authorized_key: String,
    },
    /// A shell on the console, the board binaries of `bins` in
    /// `/lab/bin`: for a board farm (LAVA) whose jobs type their commands at
    /// the prompt ([`CONSOLE_PROMPT`]), no network and no overlay needed.
    Console {
        /// The directory of xrun-trial, xrun-player, xrun-hackbench.
        bins: PathBuf,
    },
}

/// What goes into an initramfs.
pub struct Image<'a> {
    /// The guest's architecture.
    pub arch: Arch,
    /// busybox, static, of that architecture.
    pub busybox: &'a Path,
    /// Kernel modules in load order.
    pub modules: Vec<PathBuf>,
    /// The sound driver /init waits for.
    pub sound: Sound,
    /// Shared libraries to put at their own paths (the loader among them).
    pub libraries: Vec<(PathBuf, PathBuf)>,
    /// The trial channel.
    pub channel: Channel,
}

/// The archive's entries, parents first.
struct Tree {
    entries: Vec<(String, Entry)>,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            entries: Vec::new(),
        }
    }

    /// `path` (absolute) and every directory above it.
    fn dir(&mut self, path: &str) {
        let rel = path.trim_start_matches('/');
        let mut at = String::new();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            if !self.entries.iter().any(|(n, _)| n == &at) {
                self.entries.push((at.clone(), Entry::Dir));
            }
        }
    }

    fn file(&mut self, path: &str, bytes: Vec<u8>, perm: u32) {
        if let Some(parent) = Path::new(path).parent() {
            self.dir(&parent.to_string_lossy());
        }
        let rel = path.trim_start_matches('/').to_string();
        self.entries.retain(|(n, _)| n != &rel);
        self.entries.push((rel, Entry::File(bytes, perm)));
    }

    fn copy(&mut self, from: &Path, to: &str, perm: u32) -> Result<()> {
        let bytes = fs::read(from).with_context(|| format!("reading {}", from.display()))?;
        self.file(to, bytes, perm);
        Ok(())
    }

    fn symlink(&mut self, path: &str, target: &str) {
        if let Some(parent) = Path::new(path).parent() {
            self.dir(&parent.to_string_lossy());
        }
        self.entries.push((
            path.trim_start_matches('/').to_string(),
            Entry::Symlink(target.to_string()),
        ));
    }
}

impl Image<'_> {
    /// Writes the archive to `out` (atomically).
    pub fn write(&self, out: &Path) -> Result<()> {
        let mut t = Tree::new();
        for d in [
            "/proc",
            "/sys",
            "/dev",
            "/run",
            "/tmp",
            "/root",
            "/var/empty",
            "/etc",
            "/mnt",
        ] {
            t.dir(d);
        }
        // The guest's programs (paths in the guest, run by it, not here).
        t.copy(self.busybox, concat!("/", "bin/busybox"), 0o755)?;
        t.symlink(concat!("/", "bin/sh"), "busybox");
        let mut order = String::new();
        for (i, m) in self.modules.iter().enumerate() {
            let (object, plain) = module_object(m)?;
            let name = format!("/lab/modules/{i:02}-{plain}");
            t.file(&name, object, 0o644);
            order.push_str(&name);
            order.push('\n');
        }
        t.file("/lab/order", order.into_bytes(), 0o644);
        for (from, to) in &self.libraries {
            t.copy(from, &to.to_string_lossy(), 0o755)?;
        }
        if Path::new(ALSA_SHARE).is_dir() {
            copy_tree(&mut t, Path::new(ALSA_SHARE))?;
        }
        t.file(
            "/etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/bin/false\n".to_vec(),
            0o644,
        );
        // audio: ALSA's `default` device on a card without a
        // configuration of its own is dmix, which refuses to open without
        // that group (its ipc_gid), as on a Debian board.
        t.file(
            "/etc/group",
            b"root:x:0:\naudio:x:29:\nnogroup:x:65534:\n".to_vec(),
            0o644,
        );
        let tail = match &self.channel {
            Channel::Ssh {
                sshd,
                host_key,
                authorized_key,
            } => {
                t.copy(host_key, "/etc/ssh/lab_host_key", 0o600)?;
                t.file(
                    "/root/.ssh/authorized_keys",
                    format!("{}\n", authorized_key.trim()).into_bytes(),
                    0o600,
                );
                t.file(
                    "/etc/ssh/sshd_config",
                    SSHD_CONFIG.as_bytes().to_vec(),
                    0o644,
                );
                t.copy(sshd, SSHD, 0o755)?;
                ssh_tail()
            }
            Channel::Console { bins } => {
                copy_board_binaries(&mut t, bins)?;
                console_tail()
            }
        };
        t.file("/init", init_script(self.sound, &tail).into_bytes(), 0o755);
        let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
        let mut bytes = Vec::new();
        cpio::write(&mut bytes, &t.entries)?;
        fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, out).with_context(|| format!("writing {}", out.display()))?;
        Ok(())
    }
}

/// ALSA's configuration (alsa.conf and the cards' files).
const ALSA_SHARE: &str = "/usr/share/alsa";
/// Where the guest's sshd is (the host's, for a guest of its
/// architecture), here and in the guest.
pub const SSHD: &str = "/usr/sbin/sshd";

const SSHD_CONFIG: &str = "\
Port 22
HostKey /etc/ssh/lab_host_key
PermitRootLogin prohibit-password
AuthorizedKeysFile /root/.ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile /run/sshd.pid
";

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn copy_tree(t: &mut Tree, dir: &Path) -> Result<()> {
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            copy_tree(t, &p)?;
        } else if p.is_file() {
            t.copy(&p, &p.to_string_lossy(), 0o644)?;
        }
    }
    Ok(())
}

/// Where the guest finds its kernel's config, when the host had it: `/init`
/// links it as `/boot/config-RELEASE`, where a trial reads HZ and the
/// preemption model as on any Debian machine.
pub const CONFIG: &str = "/lab/kernel.config";

/// `/init`: mounts, modules, the sound card, then `tail` (the channel).
fn init_script(sound: Sound, tail: &str) -> String {
    format!(
        "#!/bin/busybox sh\n\
         /bin/busybox --install -s /bin\n\
         export PATH=/bin:/sbin:/usr/bin:/usr/sbin\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sys /sys\n\
         mount -t devtmpfs dev /dev\n\
         mkdir -p /dev/pts /dev/shm\n\
         mount -t devpts devpts /dev/pts\n\
         mount -t tmpfs tmpfs /dev/shm\n\
         mount -t tmpfs tmpfs /run\n\
         mount -t tmpfs tmpfs /tmp\n\
         mount -t debugfs debugfs /sys/kernel/debug\n\
         mkdir -p /boot\n\
         [ -f {CONFIG} ] && ln -s {CONFIG} /boot/config-$(uname -r)\n\
         echo 0 > /proc/sys/kernel/printk\n\
         for m in $(cat /lab/order); do insmod $m || echo \"xrunbench-lab: insmod $m failed\"; done\n\
         i=0\n\
         while [ $i -lt 300 ] && ! ls /dev/snd/pcmC*D0p >/dev/null 2>&1; do sleep 0.1; i=$((i+1)); done\n\
         if ! ls /dev/snd/pcmC*D0p >/dev/null 2>&1; then echo \"{NO_SOUND} ({driver})\"; fi\n\
         {tail}",
        driver = sound.driver()
    )
}

/// The SSH channel's end of `/init`: the network (QEMU's user network
/// gives 10.0.2.15), sshd, and the ready line — or, when sshd did not
/// start (it forks only once its configuration, keys and libraries are
/// in order), [`NO_SSHD`] and its log; then it idles.
fn ssh_tail() -> String {
    format!(
        "ip link set lo up\n\
         for n in /sys/class/net/*; do n=${{n##*/}}; [ \"$n\" = lo ] || {{ ip addr add 10.0.2.15/24 dev $n; ip link set $n up; }}; done\n\
         ip route add default via 10.0.2.2\n\
         mkdir -p /run/sshd\n\
         if {SSHD} -f /etc/ssh/sshd_config -E /tmp/sshd.log; then\n\
         echo \"{READY} $(cut -d' ' -f1 /proc/uptime)\"\n\
         else\n\
         echo \"{NO_SSHD} (exit $?): $(tail -n 3 /tmp/sshd.log | tr '\\n' ' ')\"\n\
         fi\n\
         while :; do sleep 3600; done\n"
    )
}

/// The board binaries of `bins`, into `/lab/bin`.
fn copy_board_binaries(t: &mut Tree, bins: &Path) -> Result<()> {
    for b in BINARIES.iter().map(|b| b.name) {
        t.copy(&bins.join(b), &format!("/lab/bin/{b}"), 0o755)?;
    }
    Ok(())
}

/// The board binaries' files in `bins`.
pub fn board_binaries(bins: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    BINARIES.iter().map(|b| bins.join(b.name))
}

/// The console channel's prompt: a word of our own, so that a board
/// farm's pattern cannot match the kernel's or busybox's output by chance.
pub const CONSOLE_PROMPT: &str = "xrunbench-lab# ";

/// The console end of `/init`: a shell with job control on the console
/// (cttyhack finds it), the board binaries in its PATH.
fn console_tail() -> String {
    format!(
        "export PATH=/lab/bin:$PATH HOME=/root\n\
         export PS1='{CONSOLE_PROMPT}'\n\
         cd /\n\
         echo \"xrunbench-lab: console $(cut -d' ' -f1 /proc/uptime)\"\n\
         exec setsid cttyhack sh\n"
    )
}

/// The libraries `binary` loads on this machine (`ldd`), with the
/// loader: (host path, path in the guest), the same.
pub fn host_libraries(binary: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .with_context(|| format!("ldd {}", binary.display()))?;
    if !out.status.success() {
        bail!(
            "ldd {}: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut libs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)`, or the
        // loader alone: `/lib64/ld-linux-x86-64.so.2 (0x…)`.
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            let p = PathBuf::from(p);
            let real = fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
            libs.push((real, p));
        }
    }
    Ok(libs)
}

/// Every shared library of a board sysroot (`lib/<triple>`, `usr/lib/
/// <triple>` and the loader), at its path in the guest.
pub fn sysroot_libraries(sysroot: &Path, arch: Arch) -> Result<Vec<(PathBuf, PathBuf)>> {
    let mut out = Vec::new();
    for sub in [
        format!("lib/{}", arch.gnu_triple()),
        format!("usr/lib/{}", arch.gnu_triple()),
        "lib".to_string(),
    ] {
        let dir = sysroot.join(&sub);
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let name = file_name(&p);
            if name.contains(".so") && (p.is_file()) {
                let real = fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
                out.push((real, PathBuf::from("/").join(&sub).join(&name)));
            }
        }
    }
    if out.is_empty() {
        bail!("{}: no libraries for {}", sysroot.display(), arch.name());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_load_after_what_they_need() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("modules.dep"),
            "kernel/sound/soundcore.ko:\n\
             kernel/sound/core/snd.ko: kernel/sound/soundcore.ko\n\
             kernel/sound/core/snd-pcm.ko: kernel/sound/core/snd-timer.ko kernel/sound/core/snd.ko kernel/sound/soundcore.ko\n\
             kernel/sound/core/snd-timer.ko: kernel/sound/core/snd.ko kernel/sound/soundcore.ko\n\
             kernel/sound/drivers/snd-dummy.ko: kernel/sound/core/snd-pcm.ko kernel/sound/core/snd-timer.ko kernel/sound/core/snd.ko kernel/sound/soundcore.ko\n\
             kernel/sound/drivers/snd-aloop.ko: kernel/sound/core/snd-pcm.ko kernel/sound/core/snd-timer.ko kernel/sound/core/snd.ko kernel/sound/soundcore.ko\n",
        )
        .unwrap();
        fs::write(dir.path().join("modules.builtin"), "kernel/net/e1000.ko\n").unwrap();
        let order = load_order(dir.path(), &["snd-dummy", "snd_aloop", "e1000"]).unwrap();
        let names: Vec<String> = order.iter().map(|p| file_name(p)).collect();
        assert_eq!(
            names,
            [
                "soundcore.ko",
                "snd.ko",
                "snd-timer.ko",
                "snd-pcm.ko",
                "snd-dummy.ko",
                "snd-aloop.ko"
            ]
        );
        let e = load_order(dir.path(), &["snd-hda-intel"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("the kernel has no snd-hda-intel"), "{e}");
    }

    #[test]
    fn compressed_modules_are_found_and_go_to_the_guest_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        // Debian's kernels from 6.12 compress their modules with xz.
        fs::write(
            dir.path().join("modules.dep"),
            "kernel/sound/soundcore.ko.xz:\n\
             kernel/sound/core/snd.ko.xz: kernel/sound/soundcore.ko.xz\n\
             kernel/sound/drivers/snd-dummy.ko.xz: kernel/sound/core/snd.ko.xz kernel/sound/soundcore.ko.xz\n",
        )
        .unwrap();
        fs::write(dir.path().join("modules.builtin"), "kernel/net/e1000.ko\n").unwrap();
        let order = load_order(dir.path(), &["snd-dummy", "e1000"]).unwrap();
        let names: Vec<String> = order.iter().map(|p| file_name(p)).collect();
        assert_eq!(names, ["soundcore.ko.xz", "snd.ko.xz", "snd-dummy.ko.xz"]);
        assert_eq!(
            module_name(Path::new("a/snd_hda_intel.ko.zst")).as_deref(),
            Some("snd-hda-intel")
        );
        assert_eq!(module_name(Path::new("a/modules.dep")), None);

        let object = b"\x7fELF a module".to_vec();
        let plain = dir.path().join("snd-dummy.ko");
        fs::write(&plain, &object).unwrap();
        let st = std::process::Command::new("xz")
            .args(["-k", "--"])
            .arg(&plain)
            .status()
            .expect("xz (package xz-utils, on every Debian system)");
        assert!(st.success());
        let (bytes, name) = module_object(&dir.path().join("snd-dummy.ko.xz")).unwrap();
        assert_eq!((bytes, name.as_str()), (object.clone(), "snd-dummy.ko"));
        let (bytes, name) = module_object(&plain).unwrap();
        assert_eq!((bytes, name.as_str()), (object, "snd-dummy.ko"));
        // A file that says xz and is not: one line naming it.
        let fake = dir.path().join("snd-aloop.ko.xz");
        fs::write(&fake, "not xz").unwrap();
        let e = module_object(&fake).unwrap_err().to_string();
        assert!(e.contains("snd-aloop.ko.xz") && !e.contains('\n'), "{e}");
    }
}
