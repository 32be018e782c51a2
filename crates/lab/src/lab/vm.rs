//! `[target] vm`: a kernel booted under QEMU as the board. The lab boots
//! the guest (its initramfs built for this kernel: the sound driver's
//! modules, an sshd with the lab's host key) and hands the run an SSH
//! board on 127.0.0.1, whose host key is the lab's and is checked like
//! any other: from then on it is the SSH target, trial path and all.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::initramfs::{self, Channel, Image, Sound};
use super::kernel::cache_dir;
use super::qemu::{self, Accel, Boot, BootError, Guest};
use super::userland::Userland;
use crate::arch::Arch;
use crate::util::run_checked;

/// `[target] vm` as a scenario writes it: `kernel` or `debian`, every
/// other key optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    /// The kernel image (bzImage, Image), relative to the scenario file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<PathBuf>,
    /// Or Debian's kernel of this version (`"6.12"`), with its modules:
    /// the newest in the lab's cache, else the newest the archive serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debian: Option<String>,
    /// With `debian`: its PREEMPT_RT flavour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt: Option<bool>,
    /// Its modules (`lib/modules/RELEASE` of `make modules_install`);
    /// default: beside a Debian kernel from `lab kernel`, else none (the
    /// drivers built in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<PathBuf>,
    /// `x86_64` (default: this machine's), `aarch64`, `armv7`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Virtual CPUs (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Memory, MiB (default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u32>,
    /// `dummy` (default), `aloop` or `hda`: the card the scenario's `hw:0`
    /// then is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sound: Option<String>,
    /// `auto` (default: KVM when it opens and a guest reaches init with
    /// it, else TCG), `kvm` or `tcg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accel: Option<String>,
    /// More kernel command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<String>,
}

/// How to choose the accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccelChoice {
    /// KVM when it works here, else TCG.
    Auto,
    /// KVM, or fail.
    Kvm,
    /// TCG.
    Tcg,
}

/// `[target] vm` resolved: paths absolute, defaults filled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSettings {
    /// The kernel image.
    pub kernel: PathBuf,
    /// Its modules' tree, if any.
    pub modules: Option<PathBuf>,
    /// The guest's architecture.
    pub arch: String,
    /// Virtual CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mib: u32,
    /// The sound card.
    pub sound: Sound,
    /// The accelerator's choice.
    pub accel: AccelChoice,
    /// More kernel command line.
    pub append: String,
}

impl VmSettings {
    /// `spec` resolved against the scenario's directory; an error is
    /// (key, one line).
    pub fn resolve(spec: &VmSpec, base_dir: &Path) -> Result<VmSettings, (&'static str, String)> {
        let arch = match &spec.arch {
            Some(a) => {
                Arch::from_name(a).ok_or(("arch", format!("`{a}` is not {}", Arch::names())))?
            }
            // An image names its own architecture; Debian's by version is
            // this machine's unless `arch` says otherwise.
            None => spec
                .kernel
                .as_ref()
                .and_then(|k| image_arch(&absolute(k, base_dir)))
                .or_else(Arch::host)
                .ok_or(("arch", "this machine's is not a lab one".to_string()))?,
        };
        let (kernel, modules) = kernel_of(spec, arch, base_dir)?;
        if let Some(a) = image_arch(&kernel).filter(|a| *a != arch) {
            return Err((
                "arch",
                format!(
                    "{}, but {} is an {} kernel",
                    arch.name(),
                    kernel.display(),
                    a.name()
                ),
            ));
        }
        if let Some(m) = &modules {
            modules_match(m, arch)?;
        }
        let cpus = spec.cpus.unwrap_or(2);
        if !(1..=64).contains(&cpus) {
            return Err(("cpus", format!("{cpus}: expected 1 to 64")));
        }
        let memory_mib = spec.memory.unwrap_or(1024);
        if !(128..=65536).contains(&memory_mib) {
            return Err(("memory", format!("{memory_mib} MiB: expected 128 to 65536")));
        }
        let sound = sound_of(spec.sound.as_deref(), modules.as_deref(), &kernel)?;
        let accel = match spec.accel.as_deref() {
            None | Some("auto") => AccelChoice::Auto,
            Some("kvm") if arch.is_cross() => {
                return Err((
                    "accel",
                    format!(
                        "`kvm`: KVM runs guests of this machine's architecture ({}) only; an \
                         {} guest runs under TCG (accel = \"tcg\" or \"auto\")",
                        Arch::host().map_or("?", Arch::name),
                        arch.name()
                    ),
                ))
            }
            Some("kvm") => AccelChoice::Kvm,
            Some("tcg") => AccelChoice::Tcg,
            Some(a) => return Err(("accel", format!("`{a}`: expected auto, kvm or tcg"))),
        };
        let append = spec.append.clone().unwrap_or_default();
        if append.chars().any(char::is_control) {
            return Err(("append", "must be one line".into()));
        }
        Ok(VmSettings {
            kernel,
            modules,
            arch: arch.name().to_string(),
            cpus,
            memory_mib,
            sound,
            accel,
            append,
        })
    }

    /// The guest's architecture.
    pub fn arch(&self) -> Arch {
        Arch::from_name(&self.arch).unwrap_or(Arch::X86_64)
    }
}

/// The architecture a kernel image is for, from its boot header: x86's
/// bzImage (`HdrS` at 0x202), arm64's Image (`ARM\x64` at 0x38), arm's
/// zImage (0x016f2818 at 0x24); `None` when it is none of them.
pub fn image_arch(kernel: &Path) -> Option<Arch> {
    use std::io::Read;
    let mut head = [0u8; 0x210];
    let mut f = std::fs::File::open(kernel).ok()?;
    f.read_exact(&mut head).ok()?;
    if &head[0x202..0x206] == b"HdrS" {
        Some(Arch::X86_64)
    } else if &head[0x38..0x3c] == b"ARM\x64" {
        Some(Arch::Aarch64)
    } else if head[0x24..0x28] == 0x016f_2818u32.to_le_bytes() {
        Some(Arch::Armv7)
    } else {
        None
    }
}

/// The sound card of `[target] vm`: `name` when given, else snd-dummy
/// where the kernel has it and snd-aloop where it has not (Debian's ARM
/// kernels have no snd-dummy; the lab's ARM trees build snd-aloop in) —
/// from its `modules` tree, or without one from the config beside the
/// `kernel`. With the modules tree at hand, a card whose driver the kernel
/// lacks is refused here, naming the sound drivers it has.
fn sound_of(
    name: Option<&str>,
    modules: Option<&Path>,
    kernel: &Path,
) -> Result<Sound, (&'static str, String)> {
    let has = |s: Sound| modules.map_or(true, |m| initramfs::load_order(m, s.modules()).is_ok());
    let chosen = match name {
        Some(n) => {
            Sound::from_name(n).ok_or(("sound", format!("`{n}`: expected hda, dummy or aloop")))?
        }
        None if modules.is_none() => builtin_sound(kernel).unwrap_or(Sound::Dummy),
        None => [Sound::Dummy, Sound::Aloop]
            .into_iter()
            .find(|s| has(*s))
            .unwrap_or(Sound::Dummy),
    };
    if let Some(m) = modules.filter(|_| !has(chosen)) {
        let drivers = initramfs::sound_drivers(m);
        let usable: Vec<&str> = [Sound::Dummy, Sound::Aloop, Sound::Hda]
            .into_iter()
            .filter(|s| has(*s))
            .map(Sound::name)
            .collect();
        let key = if name.is_some() { "sound" } else { "kernel" };
        return Err((
            key,
            format!(
                "the kernel ({}) has no {}, {}; its sound drivers: {}",
                m.display(),
                chosen.driver(),
                if usable.is_empty() {
                    "nor any other sound driver the lab uses (snd-dummy, snd-aloop, \
                     snd-hda-intel)"
                        .to_string()
                } else {
                    format!("use sound = \"{}\"", usable.join("\" or \""))
                },
                listed(&drivers, 12)
            ),
        ));
    }
    Ok(chosen)
}

/// The lab's card a kernel without modules has built in, from the config
/// kept beside it (`CONFIG_SND_DUMMY=y`, else `CONFIG_SND_ALOOP=y`).
fn builtin_sound(kernel: &Path) -> Option<Sound> {
    let config = std::fs::read_to_string(config_beside(kernel)?).ok()?;
    let built_in = |option: &str| config.lines().any(|l| l.trim() == format!("{option}=y"));
    [
        (Sound::Dummy, "CONFIG_SND_DUMMY"),
        (Sound::Aloop, "CONFIG_SND_ALOOP"),
    ]
    .into_iter()
    .find(|(_, option)| built_in(option))
    .map(|(s, _)| s)
}

/// `names` joined, the first `max` of them and how many more.
fn listed(names: &[String], max: usize) -> String {
    match names.len() {
        0 => "none".to_string(),
        n if n <= max => names.join(", "),
        n => format!("{} and {} more", names[..max].join(", "), n - max),
    }
}

/// Refuses a modules tree built for another architecture than `arch`:
/// its first module's ELF machine says.
fn modules_match(modules: &Path, arch: Arch) -> Result<(), (&'static str, String)> {
    let Some(first) = initramfs::first_module(modules) else {
        return Ok(());
    };
    let of = initramfs::module_object(&first)
        .ok()
        .and_then(|(bytes, _)| crate::board::elf::arch(&bytes).ok().flatten());
    match of {
        Some(a) if a != arch => Err((
            "modules",
            format!(
                "{} holds {} modules ({}), but the kernel is {}",
                modules.display(),
                a.name(),
                first.display(),
                arch.name()
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether `kernel` can choose its preemption model at boot
/// (CONFIG_PREEMPT_DYNAMIC), from the config kept beside it; `None` when
/// no config is there to say.
pub fn preempt_dynamic(kernel: &Path) -> Option<bool> {
    let text = std::fs::read_to_string(config_beside(kernel)?).ok()?;
    Some(text.lines().any(|l| l.trim() == "CONFIG_PREEMPT_DYNAMIC=y"))
}

/// The kernel image and modules `spec` names: its `kernel` (relative to
/// `base_dir`) and `modules` (default: beside it), or Debian's `debian`
/// version from the lab's cache, fetched the first time.
pub fn kernel_of(
    spec: &VmSpec,
    arch: Arch,
    base_dir: &Path,
) -> Result<(PathBuf, Option<PathBuf>), (&'static str, String)> {
    let version = match (&spec.kernel, &spec.debian) {
        (Some(_), Some(_)) => {
            return Err((
                "debian",
                "give `kernel` (an image) or `debian` (a version), not both".into(),
            ))
        }
        (None, None) => {
            return Err((
                "kernel",
                "missing: name an image, kernel = \"bzImage\", or Debian's kernel by version, \
                 debian = \"6.12\""
                    .into(),
            ))
        }
        (Some(k), None) => {
            if spec.rt.is_some() {
                return Err(("rt", "goes with `debian` (a version), not `kernel`".into()));
            }
            let kernel = absolute(k, base_dir);
            if !kernel.is_file() {
                return Err(("kernel", format!("{}: no such file", kernel.display())));
            }
            let modules = match &spec.modules {
                Some(m) => Some(checked_modules(&absolute(m, base_dir))?),
                None => modules_beside(&kernel),
            };
            return Ok((kernel, modules));
        }
        (None, Some(v)) => v,
    };
    if spec.modules.is_some() {
        return Err((
            "modules",
            "Debian's kernel (`debian`) comes with its own modules".into(),
        ));
    }
    let version: super::kernel::Version = version
        .parse()
        .map_err(|e| ("debian", format!("`{version}`: {e}")))?;
    let rt = spec.rt.unwrap_or(false);
    match super::kernel::for_scenario(arch, rt, version) {
        Ok(Ok(k)) => Ok((k.image, Some(k.modules))),
        Ok(Err(why)) => Err(("debian", format!("`{version}`: {why}"))),
        Err(e) => Err(("debian", format!("`{version}`: fetching it: {e:#}"))),
    }
}

/// `m`, if it is a modules tree the lab can use.
fn checked_modules(m: &Path) -> Result<PathBuf, (&'static str, String)> {
    if !m.join("modules.dep").is_file() {
        return Err((
            "modules",
            format!(
                "{}: no modules.dep (a lib/modules/RELEASE tree of `make modules_install`, after \
                 depmod)",
                m.display()
            ),
        ));
    }
    Ok(m.to_path_buf())
}

/// `path`, relative to `base` unless absolute.
fn absolute(path: &Path, base: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// `…/lib/modules/RELEASE` beside `…/boot/vmlinuz-RELEASE` (a Debian
/// kernel as `lab kernel` unpacks it), when it is there.
fn modules_beside(kernel: &Path) -> Option<PathBuf> {
    let name = kernel.file_name()?.to_str()?;
    let release = name.strip_prefix("vmlinuz-")?;
    let root = kernel.parent()?.parent()?;
    let m = root.join("lib/modules").join(release);
    m.join("modules.dep").is_file().then_some(m)
}

/// The config `kernel` was built with, when it is where it is kept:
/// `boot/config-RELEASE` beside `boot/vmlinuz-RELEASE` (Debian's, as `lab
/// kernel` unpacks it), or `.config` at the top of the tree an image was
/// built in (`arch/x86/boot/bzImage`).
pub fn config_beside(kernel: &Path) -> Option<PathBuf> {
    if let Some(release) = kernel
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
    {
        let c = kernel.parent()?.join(format!("config-{release}"));
        return c.is_file().then_some(c);
    }
    // The top of the tree, not `arch/<arch>/`, which has a Makefile and a
    // Kconfig of its own.
    kernel
        .ancestors()
        .skip(1)
        .take(4)
        .find(|d| {
            d.join("Makefile").is_file()
                && d.join("Kconfig").is_file()
                && d.join(".config").is_file()
        })
        .map(|d| d.join(".config"))
}

/// The lab's key pair for the SSH channel (made once, in the cache): the
/// guest's host key and the host's client key.
struct Keys {
    host_key: PathBuf,
    client_key: PathBuf,
}

fn keys() -> Result<Keys> {
    let dir = cache_dir().join("keys");
    std::fs::create_dir_all(&dir)?;
    let make = |name: &str| -> Result<PathBuf> {
        let key = dir.join(name);
        if !key.is_file() || !key.with_extension("pub").is_file() {
            let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(tmp.with_extension("tmp.pub"));
            run_checked(
                std::process::Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-C", "xrunbench-lab", "-f"])
                    .arg(&tmp),
            )?;
            std::fs::rename(format!("{}.pub", tmp.display()), key.with_extension("pub"))?;
            std::fs::rename(&tmp, &key)?;
        }
        Ok(key)
    };
    Ok(Keys {
        host_key: make("host_key")?,
        client_key: make("client_key")?,
    })
}

/// busybox, static, for `arch` (fetched into the cache the first time).
pub fn busybox(arch: Arch) -> Result<PathBuf> {
    let dir = cache_dir().join(format!("busybox-{}", arch.debian()));
    let bin = dir.join("bin/busybox");
    if bin.is_file() {
        return Ok(bin);
    }
    let config = super::kernel::apt(arch)?;
    super::make_once(&dir, "bin/busybox", |work| {
        super::kernel::download(&config, &["busybox-static"], &work.join("debs"))?;
        for e in std::fs::read_dir(work.join("debs"))? {
            run_checked(
                std::process::Command::new("dpkg-deb")
                    .arg("-x")
                    .arg(e?.path())
                    .arg(work),
            )?;
        }
        std::fs::remove_dir_all(work.join("debs"))?;
        Ok(())
    })?;
    if !bin.is_file() {
        bail!("busybox-static for {} has no bin/busybox", arch.debian());
    }
    Ok(bin)
}

/// How ssh reaches a booted guest: its forwarded port on 127.0.0.1, as
/// root, with the lab's own key, the guest's host key its only known one.
#[derive(Debug, Clone)]
pub struct GuestSsh {
    /// The forwarded port on 127.0.0.1.
    pub port: u16,
    /// The lab's client key.
    pub identity: PathBuf,
    /// The file holding the guest's host key, and nothing else.
    pub known_hosts: PathBuf,
}

/// Writes to `out` the console initramfs of the VM lab for `arch`: the
/// `sound` driver's modules from `modules` (a kernel's module tree), the
/// board binaries of `bins` and `extra` files (host path, guest path),
/// with the shared libraries of every ELF among them (for a guest of
/// another architecture, its userland's libraries), and a shell on the
/// console at [`initramfs::CONSOLE_PROMPT`]: what a board farm's QEMU device boots
/// (LAVA types the trials at that prompt).
pub fn console_image(
    arch: Arch,
    modules: &Path,
    sound: Sound,
    bins: &Path,
    extra: Vec<(PathBuf, PathBuf)>,
    out: &Path,
) -> Result<()> {
    let mut libraries = Vec::new();
    if arch.is_cross() {
        // The board binaries' libraries, of the guest's architecture.
        libraries.extend(Userland::ensure(arch)?.libraries()?);
    } else {
        for p in initramfs::board_binaries(bins).chain(extra.iter().map(|(from, _)| from.clone())) {
            let head = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
            // A script (a wrapper) has no libraries of its own.
            if head.starts_with(b"\x7fELF") {
                libraries.extend(initramfs::host_libraries(&p)?);
            }
        }
    }
    libraries.extend(extra);
    libraries.sort();
    libraries.dedup();
    Image {
        arch,
        busybox: &busybox(arch)?,
        modules: initramfs::load_order(modules, sound.modules())?,
        sound,
        libraries,
        channel: Channel::Console {
            bins: bins.to_path_buf(),
        },
    }
    .write(out)
}

/// A booted lab guest and how ssh reaches it; QEMU ends when it is
/// dropped.
pub struct Lab {
    /// The guest: QEMU runs as long as this is held.
    guest: Guest,
    /// How ssh reaches it.
    pub reach: GuestSsh,
    /// Where its initramfs, console and known_hosts are.
    _dir: tempfile::TempDir,
    /// For people and `run.json`.
    pub describe: String,
    /// Its emulated CPUs.
    cpus: u32,
}

impl Lab {
    /// QEMU's pid when the guest is emulated (TCG): see
    /// [`Guest::emulated_pid`].
    pub fn emulated_pid(&self) -> Option<u32> {
        self.guest.emulated_pid()
    }

    /// The guest's emulated CPUs.
    pub fn cpus(&self) -> u32 {
        self.cpus
    }

    /// QEMU's pid.
    pub fn pid(&self) -> u32 {
        self.guest.pid()
    }

    /// The last `n` lines of the guest's console, on one line.
    pub fn console_tail(&self, n: usize) -> String {
        self.guest.console_tail(n)
    }

    /// The guest's CPUs stopped: see [`Guest::freeze`].
    pub fn freeze(&mut self) -> Result<()> {
        self.guest.freeze()
    }

    /// The guest's CPUs running again: see [`Guest::thaw`].
    pub fn thaw(&mut self) -> Result<()> {
        self.guest.thaw()
    }
}

/// How long a boot may take: under TCG, of QEMU's CPU time (an emulated
/// CPU follows the host's load: 232 s to ready beside 60 busy loops where
/// a quiet host takes 7), with ten times as much wall-clock time as a
/// backstop ([`qemu::start`]); under KVM, of wall-clock time.
fn boot_limit(accel: Accel) -> Duration {
    match accel {
        Accel::Kvm => Duration::from_secs(30),
        Accel::Tcg => Duration::from_secs(300),
    }
}

/// Boots `vm`, the board binaries of `bins` able to run there.
pub fn boot(vm: &VmSettings, bins: &Path) -> Result<Lab> {
    let arch = vm.arch();
    let dir = tempfile::Builder::new()
        .prefix("xrunbench-lab.")
        .tempdir()
        .context("creating the lab's directory")?;
    let keys = keys()?;
    let mut wanted: Vec<&str> = vm.sound.modules().to_vec();
    wanted.extend(qemu::nic_modules(arch));
    let modules = match &vm.modules {
        Some(m) => initramfs::load_order(m, &wanted)?,
        None => Vec::new(),
    };
    let (sshd, mut libraries) = userland(arch, bins)?;
    if let Some(config) = config_beside(&vm.kernel) {
        libraries.push((config, PathBuf::from(initramfs::CONFIG)));
    }
    libraries.sort();
    libraries.dedup();
    let initrd = dir.path().join("initramfs.cpio");
    let authorized_key = std::fs::read_to_string(keys.client_key.with_extension("pub"))?;
    Image {
        arch,
        busybox: &busybox(arch)?,
        modules,
        sound: vm.sound,
        libraries,
        channel: Channel::Ssh {
            sshd,
            host_key: keys.host_key.clone(),
            authorized_key,
        },
    }
    .write(&initrd)?;
    let mut boot = Boot {
        arch,
        kernel: vm.kernel.clone(),
        initrd,
        append: vm.append.clone(),
        cpus: vm.cpus,
        memory_mib: vm.memory_mib,
        sound: vm.sound,
        accel: Accel::Tcg,
        ssh: true,
        console: dir.path().join("console.log"),
    };
    let (guest, note) = start_with_accel(&mut boot, vm.accel)?;
    let port = guest
        .ssh_port()
        .context("the guest was booted without its ssh forward")?;
    let host_pub = std::fs::read_to_string(keys.host_key.with_extension("pub"))?;
    let known_hosts = dir.path().join("known_hosts");
    let key_fields: Vec<&str> = host_pub.split_whitespace().take(2).collect();
    std::fs::write(
        &known_hosts,
        format!("[127.0.0.1]:{port} {}\n", key_fields.join(" ")),
    )?;
    let reach = GuestSsh {
        port,
        identity: keys.client_key.clone(),
        known_hosts,
    };
    let describe = format!(
        "vm {} ({}, {} {} CPUs, {} MiB, sound {}, QEMU at {}) over ssh root@127.0.0.1 port {port}",
        vm.kernel.display(),
        note,
        arch.name(),
        vm.cpus,
        vm.memory_mib,
        vm.sound.name(),
        guest.priority()
    );
    crate::say!(
        ": the guest is up after {:.1} s ({note})",
        guest.ready_after
    );
    Ok(Lab {
        guest,
        reach,
        _dir: dir,
        describe,
        cpus: vm.cpus,
    })
}

/// The guest's sshd and the files it and the board binaries of `bins`
/// load, as (file here, path in the guest): this machine's own for a
/// guest of its architecture, else Debian's for the guest's (see
/// [`super::userland`]).
fn userland(arch: Arch, bins: &Path) -> Result<(PathBuf, Vec<(PathBuf, PathBuf)>)> {
    if arch.is_cross() {
        let u = Userland::ensure(arch)?;
        return Ok((u.sshd(), u.files()?));
    }
    let sshd = PathBuf::from(initramfs::SSHD);
    let mut files = initramfs::host_libraries(&sshd)?;
    let libexec = Path::new("/").join(super::userland::OPENSSH_LIBEXEC);
    for helper in ["sshd-session", "sshd-auth"] {
        let p = libexec.join(helper);
        if p.is_file() {
            files.extend(initramfs::host_libraries(&p)?);
            files.push((p.clone(), p));
        }
    }
    for b in initramfs::board_binaries(bins) {
        files.extend(initramfs::host_libraries(&b)?);
    }
    Ok((sshd, files))
}

/// Starts the guest with the accelerator `choice` asks for; returns it and
/// what the run header says of the accelerator.
fn start_with_accel(boot: &mut Boot, choice: AccelChoice) -> Result<(Guest, String)> {
    let start = |boot: &Boot| qemu::start(boot, initramfs::READY, boot_limit(boot.accel));
    crate::say!(
        ": booting {} under QEMU ({}, {} CPUs, {} MiB, sound {})",
        boot.kernel.display(),
        boot.arch.name(),
        boot.cpus,
        boot.memory_mib,
        boot.sound.name()
    );
    match choice {
        AccelChoice::Tcg => {
            boot.accel = Accel::Tcg;
            Ok((start(boot).map_err(boot_error)?, "TCG".into()))
        }
        AccelChoice::Kvm => {
            if !qemu::kvm_opens() {
                bail!("target.vm.accel = \"kvm\": /dev/kvm cannot be opened here");
            }
            boot.accel = Accel::Kvm;
            match start(boot) {
                Ok(g) => Ok((g, "KVM".into())),
                Err(BootError::Interrupted(s)) => bail!("stopped by signal {s} while booting"),
                Err(e) => bail!(
                    "target.vm.accel = \"kvm\": KVM does not work here ({e}); use accel = \
                     \"tcg\" or \"auto\""
                ),
            }
        }
        AccelChoice::Auto if boot.arch.is_cross() => {
            boot.accel = Accel::Tcg;
            let why = "TCG: KVM runs guests of this machine's architecture only";
            Ok((start(boot).map_err(boot_error)?, why.into()))
        }
        AccelChoice::Auto => {
            let verdict = kvm_verdict();
            if qemu::kvm_opens() && verdict.as_deref() != Some(KVM_NO) {
                boot.accel = Accel::Kvm;
                match qemu::start(boot, initramfs::READY, Duration::from_secs(30)) {
                    Ok(g) => {
                        remember_kvm(KVM_YES);
                        return Ok((g, "KVM".into()));
                    }
                    Err(BootError::Interrupted(s)) => {
                        bail!("stopped by signal {s} while booting")
                    }
                    Err(e) => {
                        crate::say!(": KVM opens but a guest does not run with it ({e}): TCG");
                        remember_kvm(KVM_NO);
                    }
                }
            }
            boot.accel = Accel::Tcg;
            let why = if qemu::kvm_opens() {
                "TCG: KVM does not run a guest here"
            } else {
                "TCG: no usable /dev/kvm"
            };
            Ok((start(boot).map_err(boot_error)?, why.into()))
        }
    }
}

fn boot_error(e: BootError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

const KVM_YES: &str = "kvm works";
const KVM_NO: &str = "kvm does not work";

/// What an earlier boot since the host's last boot found of KVM here.
fn kvm_verdict() -> Option<String> {
    std::fs::read_to_string(kvm_file()?)
        .ok()
        .map(|s| s.trim().to_string())
}

fn remember_kvm(verdict: &str) {
    if let Some(f) = kvm_file() {
        let _ = std::fs::create_dir_all(cache_dir());
        let _ = xrunbench_schema::doc::write_atomic(&f, verdict.as_bytes());
    }
}

/// The verdict's file: one per boot of the host (a reboot may change it).
fn kvm_file() -> Option<PathBuf> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(cache_dir().join(format!("kvm-{}", id.trim())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file whose boot header says `arch` (what [`image_arch`] reads).
    fn image(dir: &Path, arch: Arch) -> PathBuf {
        let mut head = vec![0u8; 0x400];
        match arch {
            Arch::X86_64 => head[0x202..0x206].copy_from_slice(b"HdrS"),
            Arch::Aarch64 => head[0x38..0x3c].copy_from_slice(b"ARM\x64"),
            Arch::Armv7 => head[0x24..0x28].copy_from_slice(&0x016f_2818u32.to_le_bytes()),
        }
        let p = dir.join(format!("Image-{}", arch.name()));
        std::fs::write(&p, head).unwrap();
        p
    }

    /// An ELF header of `arch` (class, little-endian, e_machine), enough
    /// for [`crate::board::elf::arch`].
    fn elf_of(arch: Arch) -> Vec<u8> {
        let (class, machine): (u8, u16) = match arch {
            Arch::X86_64 => (2, 62),
            Arch::Aarch64 => (2, 183),
            Arch::Armv7 => (1, 40),
        };
        let mut e = vec![0u8; 64];
        e[..4].copy_from_slice(b"\x7fELF");
        e[4] = class;
        e[5] = 1;
        e[6] = 1;
        e[16] = 1; // ET_REL
        e[18..20].copy_from_slice(&machine.to_le_bytes());
        e
    }

    /// A modules tree of `arch` holding the sound modules `names` (in
    /// `sound/drivers/`, `sound/virtio/` by their names) and nothing else.
    fn modules(dir: &Path, arch: Arch, names: &[&str]) -> PathBuf {
        let m = dir.join(format!("modules-{}", arch.name()));
        let mut dep = String::new();
        for n in names {
            let sub = if n.starts_with("virtio") {
                "sound/virtio"
            } else {
                "sound/drivers"
            };
            let rel = format!("kernel/{sub}/{n}.ko");
            std::fs::create_dir_all(m.join(&rel).parent().unwrap()).unwrap();
            std::fs::write(m.join(&rel), elf_of(arch)).unwrap();
            dep.push_str(&format!("{rel}:\n"));
        }
        std::fs::write(m.join("modules.dep"), dep).unwrap();
        m
    }

    fn spec(kernel: &Path, modules: Option<&Path>) -> VmSpec {
        VmSpec {
            kernel: Some(kernel.to_path_buf()),
            modules: modules.map(Path::to_path_buf),
            ..Default::default()
        }
    }

    #[test]
    fn an_image_names_its_architecture_and_an_arm_kernel_defaults_to_its_aloop() {
        let dir = tempfile::tempdir().unwrap();
        let k = image(dir.path(), Arch::Aarch64);
        let m = modules(dir.path(), Arch::Aarch64, &["snd-aloop", "virtio_snd"]);
        let vm = VmSettings::resolve(&spec(&k, Some(&m)), dir.path()).unwrap();
        assert_eq!((vm.arch(), vm.sound), (Arch::Aarch64, Sound::Aloop));
        let k7 = image(dir.path(), Arch::Armv7);
        let vm = VmSettings::resolve(&spec(&k7, None), dir.path()).unwrap();
        assert_eq!(vm.arch(), Arch::Armv7);
    }

    #[test]
    fn a_kernel_without_a_sound_driver_of_the_lab_names_the_drivers_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let k = image(dir.path(), Arch::Aarch64);
        let m = modules(dir.path(), Arch::Aarch64, &["virtio_snd"]);
        let (key, e) = VmSettings::resolve(&spec(&k, Some(&m)), dir.path()).unwrap_err();
        assert_eq!(key, "kernel");
        assert!(
            e.contains("has no snd-dummy, nor any other sound driver the lab uses")
                && e.ends_with("its sound drivers: virtio-snd"),
            "{e}"
        );
        let m = modules(dir.path(), Arch::Aarch64, &["snd-aloop"]);
        let mut s = spec(&k, Some(&m));
        s.sound = Some("dummy".into());
        let (key, e) = VmSettings::resolve(&s, dir.path()).unwrap_err();
        assert_eq!(key, "sound");
        assert!(e.contains("has no snd-dummy, use sound = \"aloop\""), "{e}");
    }

    #[test]
    fn a_built_tree_s_card_comes_from_its_config() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path();
        std::fs::write(tree.join("Makefile"), "").unwrap();
        std::fs::write(tree.join("Kconfig"), "").unwrap();
        std::fs::write(tree.join(".config"), "CONFIG_SND=y\nCONFIG_SND_ALOOP=y\n").unwrap();
        std::fs::create_dir_all(tree.join("arch/arm64/boot")).unwrap();
        // As in a kernel tree: arch/arm64 has a Makefile and Kconfig too.
        std::fs::write(tree.join("arch/arm64/Makefile"), "").unwrap();
        std::fs::write(tree.join("arch/arm64/Kconfig"), "").unwrap();
        let k = image(&tree.join("arch/arm64/boot"), Arch::Aarch64);
        let vm = VmSettings::resolve(&spec(&k, None), dir.path()).unwrap();
        assert_eq!(vm.sound, Sound::Aloop);
    }

    #[test]
    fn modules_of_another_architecture_than_the_kernel_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let k = image(dir.path(), Arch::X86_64);
        let m = modules(dir.path(), Arch::Aarch64, &["snd-dummy"]);
        let (key, e) = VmSettings::resolve(&spec(&k, Some(&m)), dir.path()).unwrap_err();
        assert_eq!(key, "modules");
        assert!(
            e.contains("holds aarch64 modules") && e.ends_with("but the kernel is x86_64"),
            "{e}"
        );
    }

    #[test]
    fn an_arch_that_contradicts_the_image_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let k = image(dir.path(), Arch::Armv7);
        let mut s = spec(&k, None);
        s.arch = Some("aarch64".into());
        let (key, e) = VmSettings::resolve(&s, dir.path()).unwrap_err();
        assert_eq!(key, "arch");
        assert!(
            e.starts_with("aarch64, but ") && e.ends_with("is an armv7 kernel"),
            "{e}"
        );
    }

    #[test]
    fn kvm_for_a_guest_of_another_architecture_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = if Arch::host() == Some(Arch::Aarch64) {
            Arch::X86_64
        } else {
            Arch::Aarch64
        };
        let mut s = spec(&image(dir.path(), foreign), None);
        s.accel = Some("kvm".into());
        let (key, e) = VmSettings::resolve(&s, dir.path()).unwrap_err();
        assert_eq!(key, "accel");
        assert!(e.contains("runs under TCG"), "{e}");
    }
}
