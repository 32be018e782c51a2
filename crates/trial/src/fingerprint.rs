//! What machine and kernel a trial ran on, so results from different boots
//! and boards can be told apart (and compared) later; and the facts sampled
//! around each trial.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use xrunbench_schema::trial::MachineFingerprint;

/// Collects this machine's fingerprint.
pub fn collect() -> MachineFingerprint {
    MachineFingerprint {
        kernel_release: kernel_release(),
        kernel_version: read_trimmed("/proc/sys/kernel/version"),
        arch: arch(),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        cmdline: read_trimmed("/proc/cmdline"),
        cpu_model: cpu_model(&fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
        cpu_count: online_cpus(),
        governors: governors(Path::new("/sys/devices/system/cpu")),
        board_model: fs::read("/proc/device-tree/model").ok().map(|b| {
            // A device-tree string: NUL-terminated.
            String::from_utf8_lossy(&b)
                .trim_end_matches('\0')
                .trim()
                .to_string()
        }),
        boot_id: boot_id(),
        sched_sysctls: sched_sysctls(),
        ..scheduling(Path::new("/"))
    }
}

/// What decides scheduling beyond the sysctls, read under `root` (`/`, or
/// a test's tree): the preemption mode, the features line and HZ (see
/// [`MachineFingerprint`]); the rest of the fingerprint left empty.
pub fn scheduling(root: &Path) -> MachineFingerprint {
    let read = |p: &str| Some(read_trimmed(root.join(p))).filter(|s| !s.is_empty());
    let release = read("proc/sys/kernel/osrelease").unwrap_or_default();
    let version = read("proc/sys/kernel/version").unwrap_or_default();
    let cmdline = read("proc/cmdline").unwrap_or_default();
    let config = kernel_config(root, &release);
    let realtime = read("sys/kernel/realtime").as_deref() == Some("1")
        || version.split_whitespace().any(|w| w == "PREEMPT_RT")
        || config_says(&config, "CONFIG_PREEMPT_RT") == Some("y");
    let mode = read("sys/kernel/debug/sched/preempt")
        .and_then(|line| marked_mode(&line))
        .or_else(|| built_mode(&config, &cmdline, &version));
    let preempt = match (mode, realtime) {
        (Some(m), true) => Some(format!("{m}, PREEMPT_RT")),
        (None, true) => Some("PREEMPT_RT".into()),
        (m, false) => m,
    };
    MachineFingerprint {
        preempt,
        sched_features: read("sys/kernel/debug/sched/features")
            .or_else(|| read("sys/kernel/debug/sched_features")),
        hz: config_says(&config, "CONFIG_HZ").and_then(|v| v.parse().ok()),
        ..MachineFingerprint::default()
    }
}

/// The mode debugfs marks: `none voluntary (full) lazy` → `full`.
fn marked_mode(line: &str) -> Option<String> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
        .map(str::to_string)
}

/// The preemption model the kernel was built with, or `preempt=` of the
/// command line where it may switch at boot (PREEMPT_DYNAMIC); from the
/// config, else from `uname -v`'s words (which name only some models).
fn built_mode(config: &str, cmdline: &str, version: &str) -> Option<String> {
    let dynamic = config_says(config, "CONFIG_PREEMPT_DYNAMIC") == Some("y")
        || version.split_whitespace().any(|w| w == "PREEMPT_DYNAMIC");
    if dynamic {
        if let Some(m) = cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix("preempt="))
        {
            return Some(m.to_string());
        }
    }
    let models = [
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_NONE", "none"),
    ];
    if let Some((_, m)) = models
        .iter()
        .find(|(k, _)| config_says(config, k) == Some("y"))
    {
        return Some(m.to_string());
    }
    if dynamic {
        return None;
    }
    let words: Vec<&str> = version.split_whitespace().collect();
    [("PREEMPT_LAZY", "lazy"), ("PREEMPT", "full")]
        .iter()
        .find(|(w, _)| words.contains(w))
        .map(|(_, m)| m.to_string())
}

/// The running kernel's config where it is kept as text:
/// `/boot/config-RELEASE`, or the modules' directory's `config` (Debian
/// from 6.19); empty when none reads. (`/proc/config.gz` is not read: a
/// board binary carries no decompressor.)
fn kernel_config(root: &Path, release: &str) -> String {
    if release.is_empty() {
        return String::new();
    }
    [
        format!("boot/config-{release}"),
        format!("lib/modules/{release}/config"),
        format!("usr/lib/modules/{release}/config"),
    ]
    .iter()
    .find_map(|p| fs::read_to_string(root.join(p)).ok())
    .unwrap_or_default()
}

/// The value `KEY=value` of a kernel config gives `key` (`None` where it
/// is unset).
fn config_says<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim().trim_matches('"'))
}

/// `uname -r`.
pub fn kernel_release() -> String {
    read_trimmed("/proc/sys/kernel/osrelease")
}

/// /proc/sys/kernel/random/boot_id: changes with every boot.
pub fn boot_id() -> String {
    read_trimmed("/proc/sys/kernel/random/boot_id")
}

/// /proc/loadavg now.
pub fn loadavg() -> String {
    read_trimmed("/proc/loadavg")
}

fn read_trimmed(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `uname -m`.
pub fn arch() -> String {
    // SAFETY: utsname is plain data that uname fills.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return std::env::consts::ARCH.to_string();
        }
        std::ffi::CStr::from_ptr(u.machine.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(0)
}

/// The CPU model from /proc/cpuinfo: x86's `model name`, 32-bit ARM's
/// `Hardware`/`Processor`, else arm64's implementer and part numbers.
fn cpu_model(info: &str) -> String {
    let field = |keys: &[&str]| {
        info.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            keys.contains(&k.trim())
                .then(|| v.trim().to_string())
                .filter(|v| !v.is_empty())
        })
    };
    if let Some(m) = field(&["model name", "Hardware", "Processor", "cpu model"]) {
        return m;
    }
    match (field(&["CPU implementer"]), field(&["CPU part"])) {
        (Some(i), Some(p)) => format!("ARM implementer {i} part {p}"),
        _ => "unknown".into(),
    }
}

/// cpufreq governor per CPU under `cpu_root` (`cpu0` → `schedutil`).
pub fn governors(cpu_root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = fs::read_dir(cpu_root) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name
                .strip_prefix("cpu")
                .is_some_and(|n| n.parse::<u32>().is_ok())
            {
                if let Ok(g) = fs::read_to_string(e.path().join("cpufreq/scaling_governor")) {
                    out.insert(name, g.trim().to_string());
                }
            }
        }
    }
    out
}

fn sched_sysctls() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = fs::read_dir("/proc/sys/kernel") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("sched_") {
                if let Ok(v) = fs::read_to_string(e.path()) {
                    out.insert(format!("kernel.{name}"), v.trim().to_string());
                }
            }
        }
    }
    out
}

/// CPUs this process may run on (the player inherits the same mask).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..online_cpus().max(1)).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&i| libc::CPU_ISSET(i, &set))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_names_this_kernel_and_boot() {
        let f = collect();
        assert!(!f.kernel_release.is_empty());
        assert!(!f.boot_id.is_empty());
        assert!(f.cpu_count >= 1);
        assert!(f
            .sched_sysctls
            .keys()
            .all(|k| k.starts_with("kernel.sched_")));
    }

    /// A fake root with `files` (path, text).
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for (p, text) in files {
            let path = t.path().join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        t
    }

    #[test]
    fn the_preemption_mode_features_and_hz_are_read_where_the_kernel_says_them() {
        // 7.3 with PREEMPT_DYNAMIC: debugfs marks the mode.
        let t = tree(&[
            ("proc/sys/kernel/osrelease", "7.3.4+bpo-amd64\n"),
            (
                "proc/sys/kernel/version",
                "#1 SMP PREEMPT_DYNAMIC Debian 7.3.4-1~bpo13+1\n",
            ),
            ("proc/cmdline", "console=ttyS0 preempt=full\n"),
            (
                "sys/kernel/debug/sched/preempt",
                "none voluntary full (lazy) \n",
            ),
            (
                "sys/kernel/debug/sched/features",
                "PLACE_LAG RUN_TO_PARITY NO_NEXT_BUDDY\n",
            ),
            (
                "usr/lib/modules/7.3.4+bpo-amd64/config",
                "CONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_PREEMPT_LAZY=y\n",
            ),
        ]);
        let f = scheduling(t.path());
        assert_eq!(f.preempt.as_deref(), Some("lazy"));
        assert_eq!(
            f.sched_features.as_deref(),
            Some("PLACE_LAG RUN_TO_PARITY NO_NEXT_BUDDY")
        );
        assert_eq!(f.hz, Some(250));

        // No debugfs: the config's model, or preempt= where it may switch.
        let t = tree(&[
            ("proc/sys/kernel/osrelease", "6.1.0-57-amd64\n"),
            ("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1\n"),
            ("proc/cmdline", "quiet\n"),
            ("boot/config-6.1.0-57-amd64", "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_HZ=250\n"),
        ]);
        let f = scheduling(t.path());
        assert_eq!(
            (f.preempt.as_deref(), f.sched_features, f.hz),
            (Some("voluntary"), None, Some(250))
        );
        fs::write(t.path().join("proc/cmdline"), "quiet preempt=full\n").unwrap();
        assert_eq!(scheduling(t.path()).preempt.as_deref(), Some("full"));

        // A real-time kernel says so beside its mode.
        let t = tree(&[
            ("proc/sys/kernel/osrelease", "6.12.118+deb12-rt-amd64\n"),
            ("proc/sys/kernel/version", "#1 SMP PREEMPT_RT Debian\n"),
            ("sys/kernel/realtime", "1\n"),
            ("sys/kernel/debug/sched/preempt", "(full) lazy\n"),
        ]);
        assert_eq!(
            scheduling(t.path()).preempt.as_deref(),
            Some("full, PREEMPT_RT")
        );

        // Nothing readable: nothing claimed.
        let t = tree(&[("proc/sys/kernel/version", "#1 SMP Debian\n")]);
        assert_eq!(scheduling(t.path()), MachineFingerprint::default());
    }

    #[test]
    fn cpu_model_on_arm64_without_a_model_name() {
        let info =
            "processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n";
        assert_eq!(cpu_model(info), "ARM implementer 0x41 part 0xd08");
        assert_eq!(cpu_model("model name\t: AMD EPYC\n"), "AMD EPYC");
    }
}
