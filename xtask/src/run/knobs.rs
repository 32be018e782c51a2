//! Kernel knobs: where each lives, how to read the value to restore, how to
//! check that it can be written (without writing), and how to write it.
//!
//! A knob the scenario names expands to one or more [`KnobWrite`]s (a
//! governor is one file per CPU). Restoring writes back what was read
//! before, so the journal only needs paths and strings.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::scenario::KnobSpec;

/// Roots of the files knobs live in (real ones in production; a temporary
/// tree in unit tests).
#[derive(Debug, Clone)]
pub struct SysPaths {
    /// `/proc/sys`.
    pub proc_sys: PathBuf,
    /// `/sys/kernel/debug/sched`.
    pub sched_debug: PathBuf,
    /// `/sys/devices/system/cpu`.
    pub cpu: PathBuf,
}

impl Default for SysPaths {
    fn default() -> Self {
        SysPaths {
            proc_sys: "/proc/sys".into(),
            sched_debug: "/sys/kernel/debug/sched".into(),
            cpu: "/sys/devices/system/cpu".into(),
        }
    }
}

/// One file write a knob needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobWrite {
    /// What it is, for people: `sysctl kernel.sched_autogroup_enabled`.
    pub what: String,
    /// The file.
    pub path: PathBuf,
    /// What to write.
    pub value: String,
    /// For sched features: the feature's bare name, whose state (`NAME` or
    /// `NO_NAME`) is what must be restored, not the file's whole content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
}

/// A knob write with the value read before it: what the journal stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    /// The write that will be (or was) made.
    pub write: KnobWrite,
    /// What writing back restores the state found.
    pub restore: String,
}

/// Why a knob cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    /// The file does not exist.
    #[error("{what}: not permitted on this machine: {path} does not exist{hint}")]
    Absent {
        /// The knob.
        what: String,
        /// The file.
        path: String,
        /// Why it might be absent.
        hint: String,
    },
    /// The file exists but cannot be opened for writing.
    #[error("{what}: not permitted: {path} cannot be opened for writing ({cause}){hint}")]
    NotWritable {
        /// The knob.
        what: String,
        /// The file.
        path: String,
        /// The OS error.
        cause: std::io::Error,
        /// What to do.
        hint: String,
    },
    /// The value is not one the file offers.
    #[error("{what}: `{value}` is not available here (available: {available})")]
    NotAvailable {
        /// The knob.
        what: String,
        /// The value asked for.
        value: String,
        /// What is.
        available: String,
    },
    /// Reading or writing failed.
    #[error("{what}: {op} {path}: {cause}")]
    Io {
        /// The knob.
        what: String,
        /// `reading` or `writing`.
        op: &'static str,
        /// The file.
        path: String,
        /// The OS error.
        cause: std::io::Error,
    },
}

/// Expands a scenario knob into the file writes it needs.
pub fn expand(spec: &KnobSpec, sys: &SysPaths) -> Result<Vec<KnobWrite>, KnobError> {
    Ok(match spec {
        KnobSpec::Sysctl { name, value } => vec![KnobWrite {
            what: format!("sysctl {name}"),
            path: sys.proc_sys.join(name.replace('.', "/")),
            value: value.clone(),
            feature: None,
        }],
        KnobSpec::SchedFeature { word } => vec![KnobWrite {
            what: format!("sched_features {word}"),
            path: sys.sched_debug.join("features"),
            value: word.clone(),
            feature: Some(word.strip_prefix("NO_").unwrap_or(word).to_string()),
        }],
        KnobSpec::SchedDebug { file, value } => vec![KnobWrite {
            what: format!("sched_debug {file}"),
            path: sys.sched_debug.join(file),
            value: value.clone(),
            feature: None,
        }],
        KnobSpec::Governor { value } => governor_files(sys)?
            .into_iter()
            .map(|(cpu, path)| KnobWrite {
                what: format!("governor cpu{cpu}"),
                path,
                value: value.clone(),
                feature: None,
            })
            .collect(),
    })
}

/// `(cpu number, scaling_governor path)` for every CPU with cpufreq.
fn governor_files(sys: &SysPaths) -> Result<Vec<(usize, PathBuf)>, KnobError> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(&sys.cpu) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(n) = name
                .strip_prefix("cpu")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let path = e.path().join("cpufreq/scaling_governor");
            if path.exists() {
                out.push((n, path));
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(KnobError::Absent {
            what: "governor".into(),
            path: sys
                .cpu
                .join("cpu*/cpufreq/scaling_governor")
                .display()
                .to_string(),
            hint: " (no cpufreq driver on this machine: remove `governor`)".into(),
        });
    }
    Ok(out)
}

fn hint_for(path: &Path) -> String {
    let p = path.to_string_lossy();
    if p.contains("/sys/kernel/debug") {
        " (debugfs not mounted at /sys/kernel/debug, or a kernel without CONFIG_SCHED_DEBUG; \
         try `mount -t debugfs none /sys/kernel/debug` as root)"
            .into()
    } else if p.contains("/proc/sys") {
        " (this kernel has no such sysctl)".into()
    } else {
        String::new()
    }
}

/// Checks that `w` can be applied: the file exists, opens for writing
/// (opening writes nothing), and for sched features and governors that the
/// word is one the kernel offers. Changes nothing.
pub fn check(w: &KnobWrite) -> Result<(), KnobError> {
    if !w.path.exists() {
        return Err(KnobError::Absent {
            what: w.what.clone(),
            path: w.path.display().to_string(),
            hint: hint_for(&w.path),
        });
    }
    if let Err(cause) = OpenOptions::new().write(true).open(&w.path) {
        let hint = if cause.kind() == ErrorKind::PermissionDenied && !crate::util::is_root() {
            " — run as root".into()
        } else {
            String::new()
        };
        return Err(KnobError::NotWritable {
            what: w.what.clone(),
            path: w.path.display().to_string(),
            cause,
            hint,
        });
    }
    if let Some(feature) = &w.feature {
        let current = read(w)?;
        let known = current
            .split_whitespace()
            .any(|word| word.strip_prefix("NO_").unwrap_or(word) == feature);
        if !known {
            return Err(KnobError::NotAvailable {
                what: w.what.clone(),
                value: w.value.clone(),
                available: current.trim().to_string(),
            });
        }
    }
    if w.what.starts_with("governor") {
        let avail = w.path.with_file_name("scaling_available_governors");
        if let Ok(list) = fs::read_to_string(&avail) {
            if !list.split_whitespace().any(|g| g == w.value) {
                return Err(KnobError::NotAvailable {
                    what: w.what.clone(),
                    value: w.value.clone(),
                    available: list.trim().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Reads the file as it is now (trailing newline removed).
pub fn read(w: &KnobWrite) -> Result<String, KnobError> {
    fs::read_to_string(&w.path)
        .map(|s| s.trim_end_matches('\n').to_string())
        .map_err(|cause| KnobError::Io {
            what: w.what.clone(),
            op: "reading",
            path: w.path.display().to_string(),
            cause,
        })
}

/// Reads the value that, written back, restores the current state.
pub fn save(w: &KnobWrite) -> Result<Saved, KnobError> {
    let now = read(w)?;
    let restore = match &w.feature {
        // The features file lists every feature; only this one's state matters.
        Some(feature) => {
            let enabled = now.split_whitespace().any(|word| word == feature);
            if enabled {
                feature.clone()
            } else {
                format!("NO_{feature}")
            }
        }
        None => now,
    };
    Ok(Saved {
        write: w.clone(),
        restore,
    })
}

/// Writes `value` to the knob's file in one write(2), as `echo` would.
pub fn write_value(w: &KnobWrite, value: &str) -> Result<(), KnobError> {
    let io = |cause| KnobError::Io {
        what: w.what.clone(),
        op: "writing",
        path: w.path.display().to_string(),
        cause,
    };
    // Never create: a knob file that vanished must not become a regular file.
    let mut f = OpenOptions::new().write(true).open(&w.path).map_err(io)?;
    f.write_all(format!("{value}\n").as_bytes()).map_err(io)
}

/// Holds a PM-QoS CPU DMA latency request while alive: the kernel honours
/// the value written to /dev/cpu_dma_latency only while the file stays open,
/// and drops it when the fd closes — also when we are killed.
pub struct PmQosHold {
    _file: File,
}

/// Where the PM-QoS request is made.
pub const PM_QOS_DEVICE: &str = "/dev/cpu_dma_latency";

impl PmQosHold {
    /// Checks the device can be opened for writing (writes nothing).
    pub fn check() -> Result<(), KnobError> {
        let w = pm_qos_write(0);
        if !w.path.exists() {
            return Err(KnobError::Absent {
                what: w.what,
                path: PM_QOS_DEVICE.into(),
                hint: " (kernel without PM QoS)".into(),
            });
        }
        OpenOptions::new()
            .write(true)
            .open(PM_QOS_DEVICE)
            .map(drop)
            .map_err(|cause| KnobError::NotWritable {
                what: w.what,
                path: PM_QOS_DEVICE.into(),
                cause,
                hint: String::new(),
            })
    }

    /// Opens the device and writes the request (a binary s32, as the ABI wants).
    pub fn hold(us: u32) -> Result<Self, KnobError> {
        let w = pm_qos_write(us);
        let io = |cause| KnobError::Io {
            what: w.what.clone(),
            op: "writing",
            path: PM_QOS_DEVICE.into(),
            cause,
        };
        let mut file = OpenOptions::new()
            .write(true)
            .open(PM_QOS_DEVICE)
            .map_err(io)?;
        let value = i32::try_from(us).unwrap_or(i32::MAX);
        file.write_all(&value.to_ne_bytes()).map_err(io)?;
        Ok(PmQosHold { _file: file })
    }
}

fn pm_qos_write(us: u32) -> KnobWrite {
    KnobWrite {
        what: "pm_qos_cpu_dma_latency_us".into(),
        path: PM_QOS_DEVICE.into(),
        value: us.to_string(),
        feature: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tree() -> (tempfile::TempDir, SysPaths) {
        let dir = tempfile::tempdir().unwrap();
        let sys = SysPaths {
            proc_sys: dir.path().join("proc_sys"),
            sched_debug: dir.path().join("sched"),
            cpu: dir.path().join("cpu"),
        };
        fs::create_dir_all(sys.proc_sys.join("kernel")).unwrap();
        fs::write(sys.proc_sys.join("kernel/x"), "1\n").unwrap();
        fs::create_dir_all(&sys.sched_debug).unwrap();
        fs::write(
            sys.sched_debug.join("features"),
            "GENTLE NEXT_BUDDY NO_LAST_BUDDY\n",
        )
        .unwrap();
        for cpu in 0..2 {
            let d = sys.cpu.join(format!("cpu{cpu}/cpufreq"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("scaling_governor"), "schedutil\n").unwrap();
            fs::write(
                d.join("scaling_available_governors"),
                "performance schedutil\n",
            )
            .unwrap();
        }
        (dir, sys)
    }

    #[test]
    fn sysctl_saves_and_restores_the_value_found() {
        let (_d, sys) = fake_tree();
        let spec = KnobSpec::Sysctl {
            name: "kernel.x".into(),
            value: "0".into(),
        };
        let [w] = &expand(&spec, &sys).unwrap()[..] else {
            panic!()
        };
        check(w).unwrap();
        let saved = save(w).unwrap();
        assert_eq!(saved.restore, "1");
        write_value(w, &w.value).unwrap();
        assert_eq!(read(w).unwrap(), "0");
        write_value(w, &saved.restore).unwrap();
        assert_eq!(read(w).unwrap(), "1");
    }

    #[test]
    fn sched_feature_restores_only_its_own_state() {
        let (_d, sys) = fake_tree();
        let spec = KnobSpec::SchedFeature {
            word: "NO_NEXT_BUDDY".into(),
        };
        let [w] = &expand(&spec, &sys).unwrap()[..] else {
            panic!()
        };
        check(w).unwrap();
        assert_eq!(save(w).unwrap().restore, "NEXT_BUDDY");
        let spec = KnobSpec::SchedFeature {
            word: "LAST_BUDDY".into(),
        };
        let [w] = &expand(&spec, &sys).unwrap()[..] else {
            panic!()
        };
        assert_eq!(save(w).unwrap().restore, "NO_LAST_BUDDY");
        let spec = KnobSpec::SchedFeature {
            word: "NO_SUCH".into(),
        };
        let [w] = &expand(&spec, &sys).unwrap()[..] else {
            panic!()
        };
        assert!(matches!(check(w), Err(KnobError::NotAvailable { .. })));
    }

    #[test]
    fn governor_expands_per_cpu_and_checks_availability() {
        let (_d, sys) = fake_tree();
        let ws = expand(
            &KnobSpec::Governor {
                value: "performance".into(),
            },
            &sys,
        )
        .unwrap();
        assert_eq!(ws.len(), 2);
        ws.iter().for_each(|w| check(w).unwrap());
        let ws = expand(
            &KnobSpec::Governor {
                value: "turbo".into(),
            },
            &sys,
        )
        .unwrap();
        assert!(matches!(check(&ws[0]), Err(KnobError::NotAvailable { .. })));
    }

    #[test]
    fn absent_file_is_not_permitted_and_not_created() {
        let (d, sys) = fake_tree();
        let spec = KnobSpec::SchedDebug {
            file: "base_slice_ns".into(),
            value: "3".into(),
        };
        let [w] = &expand(&spec, &sys).unwrap()[..] else {
            panic!()
        };
        let e = check(w).unwrap_err().to_string();
        assert!(e.contains("not permitted"), "{e}");
        assert!(write_value(w, "3").is_err());
        assert!(!d.path().join("sched/base_slice_ns").exists());
    }

    #[test]
    fn real_debugfs_sched_features_fail_cleanly_when_absent() {
        // On machines where debugfs sched files are writable this is not the
        // path under test; skip there.
        let sys = SysPaths::default();
        let [w] = &expand(
            &KnobSpec::SchedFeature {
                word: "NO_NEXT_BUDDY".into(),
            },
            &sys,
        )
        .unwrap()[..] else {
            panic!()
        };
        if check(w).is_ok() {
            return;
        }
        let e = check(w).unwrap_err().to_string();
        assert!(e.contains("not permitted"), "{e}");
    }
}
