//! Kernel knobs: where each kind lives, how to read the value that restores
//! it, how to check it can be written, how to write it and read it back.
//!
//! A knob a spec names expands to one or more [`KnobWrite`]s (a governor is
//! one file per CPU). Every path is checked against its kind's own root
//! ([`check_path`]) before anything reads or writes it — the journal replay
//! relies on that to refuse a crafted journal.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use xrunbench_schema::trial::KnobSpec;

use crate::machine::{is_root, KnobRoots};

/// The kinds of knob files, each with its own root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KnobKind {
    /// A file under /proc/sys.
    Sysctl,
    /// /sys/kernel/debug/sched/features (one feature's state).
    SchedFeature,
    /// Another file directly under /sys/kernel/debug/sched.
    SchedDebug,
    /// /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor.
    Governor,
}

/// One file write a knob needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobWrite {
    /// Which kind (decides the root its path must lie under).
    pub kind: KnobKind,
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
    /// The kernel accepted the write but kept another value.
    #[error(
        "{what}: wrote `{written}` to {path} but it reads back `{read}`: the kernel did not keep the value"
    )]
    NotKept {
        /// The knob.
        what: String,
        /// The file.
        path: String,
        /// What was written.
        written: String,
        /// What was read after writing.
        read: String,
    },
    /// The path is not where this kind of knob lives.
    #[error("{what}: {path} is not a {kind:?} knob file under {root}: refused")]
    Outside {
        /// The knob.
        what: String,
        /// The kind it claims to be.
        kind: KnobKind,
        /// The file.
        path: String,
        /// The kind's root.
        root: String,
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

/// Whether `name` is a dotted sysctl name like `kernel.sched_autogroup_enabled`.
pub fn is_sysctl_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        })
}

/// Whether `word` is a sched feature word like `NEXT_BUDDY` or `NO_NEXT_BUDDY`.
pub fn is_feature_word(word: &str) -> bool {
    let bare = word.strip_prefix("NO_").unwrap_or(word);
    !bare.is_empty()
        && bare
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `name` is a plain file name (sched debug file, governor):
/// letters, digits, `.`, `_`, `-`, not starting with a dot.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Whether a value can be written as one line (no newline, no NUL).
pub fn is_one_line(value: &str) -> bool {
    !value.contains(['\n', '\0'])
}

/// Expands a spec's knob into the file writes it needs.
pub fn expand(spec: &KnobSpec, roots: &KnobRoots) -> Result<Vec<KnobWrite>, KnobError> {
    Ok(match spec {
        KnobSpec::Sysctl { name, value } => vec![KnobWrite {
            kind: KnobKind::Sysctl,
            what: format!("sysctl {name}"),
            path: roots.proc_sys.join(name.replace('.', "/")),
            value: value.clone(),
            feature: None,
        }],
        KnobSpec::SchedFeature { word } => vec![KnobWrite {
            kind: KnobKind::SchedFeature,
            what: format!("sched_features {word}"),
            path: roots.sched_debug.join("features"),
            value: word.clone(),
            feature: Some(word.strip_prefix("NO_").unwrap_or(word).to_string()),
        }],
        KnobSpec::SchedDebug { file, value } => vec![KnobWrite {
            kind: KnobKind::SchedDebug,
            what: format!("sched_debug {file}"),
            path: roots.sched_debug.join(file),
            value: value.clone(),
            feature: None,
        }],
        KnobSpec::Governor { value } => governor_files(roots)?
            .into_iter()
            .map(|(cpu, path)| KnobWrite {
                kind: KnobKind::Governor,
                what: format!("governor cpu{cpu}"),
                path,
                value: value.clone(),
                feature: None,
            })
            .collect(),
    })
}

/// `(cpu number, scaling_governor path)` for every CPU with cpufreq.
fn governor_files(roots: &KnobRoots) -> Result<Vec<(usize, PathBuf)>, KnobError> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(&roots.cpu) {
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
            path: roots
                .cpu
                .join("cpu*/cpufreq/scaling_governor")
                .display()
                .to_string(),
            hint: " (no cpufreq driver on this machine: remove `governor`)".into(),
        });
    }
    Ok(out)
}

/// The root a kind's files live under.
pub fn root_of(kind: KnobKind, roots: &KnobRoots) -> &Path {
    match kind {
        KnobKind::Sysctl => &roots.proc_sys,
        KnobKind::SchedFeature | KnobKind::SchedDebug => &roots.sched_debug,
        KnobKind::Governor => &roots.cpu,
    }
}

/// Checks that `w.path` is a file of its kind under its kind's root, by
/// name (no `..`, no `.`, the shape each kind has) and, when the file
/// exists, once symlinks are resolved. Reads nothing else, writes nothing.
pub fn check_path(w: &KnobWrite, roots: &KnobRoots) -> Result<(), KnobError> {
    let root = root_of(w.kind, roots);
    let outside = || KnobError::Outside {
        what: w.what.clone(),
        kind: w.kind,
        path: w.path.display().to_string(),
        root: root.display().to_string(),
    };
    let rel = w.path.strip_prefix(root).map_err(|_| outside())?;
    let parts: Vec<&str> = rel
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(outside)?;
    let shape_ok = match (w.kind, parts.as_slice()) {
        (KnobKind::Sysctl, p) => !p.is_empty(),
        (KnobKind::SchedFeature, ["features"]) => w
            .feature
            .as_deref()
            .is_some_and(|f| is_feature_word(f) && (w.value == f || w.value == format!("NO_{f}"))),
        (KnobKind::SchedDebug, [file]) => *file != "features" && is_plain_name(file),
        (KnobKind::Governor, [cpu, "cpufreq", "scaling_governor"]) => cpu
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        _ => false,
    };
    if !shape_ok
        || !w.path.is_absolute()
        || (w.kind != KnobKind::SchedFeature && w.feature.is_some())
    {
        return Err(outside());
    }
    // cpuN/cpufreq is a symlink into cpufreq/policyN: resolved, a real
    // knob stays under its root; a planted symlink does not.
    if let Ok(real) = fs::canonicalize(&w.path) {
        let real_root = fs::canonicalize(root).map_err(|_| outside())?;
        if !real.starts_with(&real_root) {
            return Err(outside());
        }
    }
    Ok(())
}

fn hint_for(kind: KnobKind) -> String {
    match kind {
        KnobKind::SchedFeature | KnobKind::SchedDebug => {
            " (debugfs not mounted at /sys/kernel/debug, or a kernel without CONFIG_SCHED_DEBUG; \
             try `mount -t debugfs none /sys/kernel/debug` as root)"
                .into()
        }
        KnobKind::Sysctl => " (this kernel has no such sysctl)".into(),
        KnobKind::Governor => String::new(),
    }
}

/// Checks that `w` can be applied: its path is where its kind lives, the
/// file exists and opens for writing (opening writes nothing), and for
/// sched features and governors the word is one the kernel offers.
/// Changes nothing.
pub fn check(w: &KnobWrite, roots: &KnobRoots) -> Result<(), KnobError> {
    check_path(w, roots)?;
    if !w.path.exists() {
        return Err(KnobError::Absent {
            what: w.what.clone(),
            path: w.path.display().to_string(),
            hint: hint_for(w.kind),
        });
    }
    if let Err(cause) = open_for_writing(&w.path) {
        let hint = if cause.kind() == ErrorKind::PermissionDenied && !is_root() {
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
    if w.kind == KnobKind::Governor {
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

/// Opens a knob file for writing without changing it: never creates it (a
/// knob that vanished must not become a regular file) and never follows a
/// symlink in its last component.
fn open_for_writing(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
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

/// The knob's state now, in the terms it is written in: the whole value,
/// or for a sched feature `NAME` / `NO_NAME`. Written back, it restores
/// what was found.
pub fn state(w: &KnobWrite) -> Result<String, KnobError> {
    let now = read(w)?;
    Ok(match &w.feature {
        // The features file lists every feature; only this one's state matters.
        Some(feature) if now.split_whitespace().any(|word| word == feature) => feature.clone(),
        Some(feature) => format!("NO_{feature}"),
        None => now,
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
    // Truncating, as `echo VALUE > FILE` does (procfs and sysfs ignore it;
    // a shorter value must not leave the tail of a longer one elsewhere).
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&w.path)
        .map_err(io)?;
    f.write_all(format!("{value}\n").as_bytes()).map_err(io)
}

/// Whether the state read after writing is what was written: the same
/// words (a multi-value sysctl reads back with tabs), numbers compared as
/// numbers (`007` is kept as `7`).
pub fn reads_back_as(written: &str, read: &str) -> bool {
    let a: Vec<&str> = written.split_whitespace().collect();
    let b: Vec<&str> = read.split_whitespace().collect();
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x == y || matches!((x.parse::<i64>(), y.parse::<i64>()), (Ok(p), Ok(q)) if p == q)
        })
}

/// Writes `w.value` and reads the state back; a value the kernel did not
/// keep is [`KnobError::NotKept`]. Returns what was read.
pub fn write_and_read_back(w: &KnobWrite) -> Result<String, KnobError> {
    write_value(w, &w.value)?;
    let read = state(w)?;
    if reads_back_as(&w.value, &read) {
        Ok(read)
    } else {
        Err(KnobError::NotKept {
            what: w.what.clone(),
            path: w.path.display().to_string(),
            written: w.value.clone(),
            read,
        })
    }
}

/// What the PM-QoS request is called in messages.
const PM_QOS_WHAT: &str = "pm_qos_cpu_dma_latency_us";

/// Holds a PM-QoS CPU DMA latency request while alive: the kernel honours
/// the value written to /dev/cpu_dma_latency only while the file stays open,
/// and drops it when the fd closes — also when we are killed, so it needs
/// no journal.
pub struct PmQosHold {
    _file: File,
}

impl PmQosHold {
    /// Checks the device can be opened for writing (writes nothing).
    pub fn check(device: &Path) -> Result<(), KnobError> {
        if !device.exists() {
            return Err(KnobError::Absent {
                what: PM_QOS_WHAT.into(),
                path: device.display().to_string(),
                hint: " (kernel without PM QoS)".into(),
            });
        }
        open_for_writing(device)
            .map(drop)
            .map_err(|cause| KnobError::NotWritable {
                what: PM_QOS_WHAT.into(),
                path: device.display().to_string(),
                cause,
                hint: String::new(),
            })
    }

    /// Opens the device and writes the request (a binary s32, as the ABI wants).
    pub fn hold(device: &Path, us: u32) -> Result<Self, KnobError> {
        let io = |cause| KnobError::Io {
            what: PM_QOS_WHAT.into(),
            op: "writing",
            path: device.display().to_string(),
            cause,
        };
        let mut file = open_for_writing(device).map_err(io)?;
        let value = i32::try_from(us).unwrap_or(i32::MAX);
        file.write_all(&value.to_ne_bytes()).map_err(io)?;
        Ok(PmQosHold { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tree() -> (tempfile::TempDir, KnobRoots) {
        let dir = tempfile::tempdir().unwrap();
        let roots = KnobRoots::under(dir.path());
        fs::create_dir_all(roots.proc_sys.join("kernel")).unwrap();
        fs::write(roots.proc_sys.join("kernel/x"), "1\n").unwrap();
        fs::create_dir_all(&roots.sched_debug).unwrap();
        fs::write(
            roots.sched_debug.join("features"),
            "GENTLE NEXT_BUDDY NO_LAST_BUDDY\n",
        )
        .unwrap();
        for cpu in 0..2 {
            let d = roots.cpu.join(format!("cpu{cpu}/cpufreq"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("scaling_governor"), "schedutil\n").unwrap();
            fs::write(
                d.join("scaling_available_governors"),
                "performance schedutil\n",
            )
            .unwrap();
        }
        (dir, roots)
    }

    fn one(spec: KnobSpec, roots: &KnobRoots) -> KnobWrite {
        let mut v = expand(&spec, roots).unwrap();
        assert_eq!(v.len(), 1);
        v.remove(0)
    }

    #[test]
    fn sysctl_saves_writes_reads_back_and_restores() {
        let (_d, roots) = fake_tree();
        let w = one(
            KnobSpec::Sysctl {
                name: "kernel.x".into(),
                value: "0".into(),
            },
            &roots,
        );
        check(&w, &roots).unwrap();
        let found = state(&w).unwrap();
        assert_eq!(found, "1");
        assert_eq!(write_and_read_back(&w).unwrap(), "0");
        write_value(&w, &found).unwrap();
        assert_eq!(read(&w).unwrap(), "1");
    }

    #[test]
    fn sched_feature_state_is_its_own_word() {
        let (_d, roots) = fake_tree();
        let w = one(
            KnobSpec::SchedFeature {
                word: "NO_NEXT_BUDDY".into(),
            },
            &roots,
        );
        check(&w, &roots).unwrap();
        assert_eq!(state(&w).unwrap(), "NEXT_BUDDY");
        let w = one(
            KnobSpec::SchedFeature {
                word: "LAST_BUDDY".into(),
            },
            &roots,
        );
        assert_eq!(state(&w).unwrap(), "NO_LAST_BUDDY");
        let w = one(
            KnobSpec::SchedFeature {
                word: "NO_SUCH".into(),
            },
            &roots,
        );
        assert!(matches!(
            check(&w, &roots),
            Err(KnobError::NotAvailable { .. })
        ));
    }

    #[test]
    fn governor_expands_per_cpu_and_checks_availability() {
        let (_d, roots) = fake_tree();
        let spec = |v: &str| KnobSpec::Governor { value: v.into() };
        let ws = expand(&spec("performance"), &roots).unwrap();
        assert_eq!(ws.len(), 2);
        ws.iter().for_each(|w| check(w, &roots).unwrap());
        let ws = expand(&spec("turbo"), &roots).unwrap();
        assert!(matches!(
            check(&ws[0], &roots),
            Err(KnobError::NotAvailable { .. })
        ));
    }

    #[test]
    fn absent_file_is_not_permitted_and_not_created() {
        let (d, roots) = fake_tree();
        let w = one(
            KnobSpec::SchedDebug {
                file: "base_slice_ns".into(),
                value: "3".into(),
            },
            &roots,
        );
        let e = check(&w, &roots).unwrap_err().to_string();
        assert!(e.contains("not permitted"), "{e}");
        assert!(write_value(&w, "3").is_err());
        assert!(!d
            .path()
            .join("sys/kernel/debug/sched/base_slice_ns")
            .exists());
    }

    #[test]
    fn paths_outside_their_kinds_root_are_refused() {
        let (d, roots) = fake_tree();
        let w = |kind, path: PathBuf, feature: Option<&str>| KnobWrite {
            kind,
            what: "k".into(),
            path,
            value: feature.unwrap_or("1").into(),
            feature: feature.map(str::to_string),
        };
        let bad = [
            w(KnobKind::Sysctl, d.path().join("etc/passwd"), None),
            w(KnobKind::Sysctl, roots.proc_sys.join("../../etc/x"), None),
            w(KnobKind::Sysctl, roots.proc_sys.clone(), None),
            w(KnobKind::SchedDebug, roots.proc_sys.join("kernel/x"), None),
            w(KnobKind::SchedDebug, roots.sched_debug.join("a/b"), None),
            w(KnobKind::Governor, roots.cpu.join("cpu0/online"), None),
            w(
                KnobKind::SchedFeature,
                roots.sched_debug.join("features"),
                None,
            ),
            w(KnobKind::Sysctl, PathBuf::from("/etc/shadow"), None),
        ];
        for b in &bad {
            assert!(
                matches!(check_path(b, &roots), Err(KnobError::Outside { .. })),
                "{b:?}"
            );
        }
        // A symlink planted under the root that leads out of it.
        std::os::unix::fs::symlink(d.path().join("elsewhere"), roots.proc_sys.join("kernel/y"))
            .unwrap();
        fs::write(d.path().join("elsewhere"), "0\n").unwrap();
        let planted = w(KnobKind::Sysctl, roots.proc_sys.join("kernel/y"), None);
        assert!(check_path(&planted, &roots).is_err());
        let good = w(KnobKind::Sysctl, roots.proc_sys.join("kernel/x"), None);
        check_path(&good, &roots).unwrap();
    }

    #[test]
    fn read_back_compares_words_and_numbers() {
        assert!(reads_back_as("4 4 1 7", "4\t4\t1\t7"));
        assert!(reads_back_as("007", "7"));
        assert!(!reads_back_as("-5", "100"));
        assert!(!reads_back_as("performance", "schedutil"));
    }
}
