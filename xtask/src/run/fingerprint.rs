//! What machine and kernel a run was made on, so results from different
//! boots can be told apart (and compared) later.

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The system fingerprint stored in `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// `uname -a`.
    pub uname: String,
    /// `uname -r`.
    pub kernel: String,
    /// /proc/cmdline.
    pub cmdline: String,
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpu_count: usize,
    /// cpufreq governor per CPU (empty without cpufreq).
    pub governors: BTreeMap<String, String>,
    /// Every /proc/sys/kernel/sched_* value.
    pub sched_sysctls: BTreeMap<String, String>,
    /// SHA-256 of /proc/config.gz, if the kernel exposes it.
    pub config_gz_sha256: Option<String>,
    /// xrunbench (xtask) version.
    pub xrunbench_version: String,
    /// `git rev-parse HEAD` of the workspace, `+dirty` if modified.
    pub git_commit: Option<String>,
}

/// Collects the fingerprint of this machine.
pub fn collect() -> Fingerprint {
    Fingerprint {
        uname: command_output("uname", &["-a"]).unwrap_or_default(),
        kernel: super::validate::kernel_release(),
        cmdline: read_trimmed("/proc/cmdline"),
        cpu_model: cpu_model(),
        cpu_count: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        governors: governors(),
        sched_sysctls: sched_sysctls(),
        config_gz_sha256: fs::read("/proc/config.gz")
            .ok()
            .map(|b| hex(&Sha256::digest(&b))),
        xrunbench_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: git_commit(),
    }
}

fn read_trimmed(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn command_output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn cpu_model() -> String {
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            // x86 says "model name", arm64 often only "Hardware" or "CPU part".
            matches!(k.trim(), "model name" | "Hardware" | "Processor")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn governors() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = fs::read_dir("/sys/devices/system/cpu") {
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

fn git_commit() -> Option<String> {
    let root = crate::util::workspace_root();
    let out = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dirty = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    if dirty {
        commit.push_str("+dirty");
    }
    Some(commit)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Facts sampled around each trial (what may differ from trial to trial).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialFacts {
    /// /proc/loadavg before the trial.
    pub loadavg_before: String,
    /// /proc/loadavg after the trial.
    pub loadavg_after: String,
    /// Governors during the trial (after knobs were applied).
    pub governors: BTreeMap<String, String>,
}

/// /proc/loadavg now.
pub fn loadavg() -> String {
    read_trimmed("/proc/loadavg")
}

/// Governors now.
pub fn governors_now() -> BTreeMap<String, String> {
    governors()
}

#[cfg(test)]
mod tests {
    #[test]
    fn fingerprint_has_this_kernel() {
        let f = super::collect();
        assert!(!f.kernel.is_empty());
        assert!(f.uname.contains(&f.kernel));
        assert!(f
            .sched_sysctls
            .keys()
            .all(|k| k.starts_with("kernel.sched_")));
    }
}
