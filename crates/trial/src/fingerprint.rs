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
    }
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

fn read_trimmed(path: &str) -> String {
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

    #[test]
    fn cpu_model_on_arm64_without_a_model_name() {
        let info =
            "processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n";
        assert_eq!(cpu_model(info), "ARM implementer 0x41 part 0xd08");
        assert_eq!(cpu_model("model name\t: AMD EPYC\n"), "AMD EPYC");
    }
}
