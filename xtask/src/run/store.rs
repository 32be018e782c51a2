//! The results directory: `results/<scenario>/<UTC timestamp>[-<label>]/`,
//! and atomic writes (temp file + fsync + rename) so that an interrupted run
//! never leaves a half-written JSON behind.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(f);
    fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    // The rename is durable only once the directory is synced.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Serializes `value` as pretty JSON and writes it atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("serializing JSON")?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// The default results root: `<workspace>/results`.
pub fn default_results_root() -> PathBuf {
    crate::util::workspace_root().join("results")
}

/// Creates a fresh run directory (with `trials/`), never reusing one.
pub fn create_run_dir(root: &Path, scenario: &str, label: Option<&str>) -> Result<PathBuf> {
    let stamp = utc_stamp(SystemTime::now());
    let base = match label {
        Some(l) => format!("{stamp}-{l}"),
        None => stamp,
    };
    let parent = root.join(scenario);
    fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    // Two runs in the same second (tests do this) get a suffix.
    for n in 0..100 {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}.{n}")
        };
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => {
                fs::create_dir(dir.join("trials"))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    anyhow::bail!(
        "could not create a fresh run directory under {}",
        parent.display()
    )
}

/// `YYYYMMDDTHHMMSSZ` (UTC; sorts by time, safe in file names).
pub fn utc_stamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// RFC 3339 UTC, for JSON documents.
pub fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// UTC calendar fields (Howard Hinnant's days-to-civil algorithm; avoids a
/// date crate for one function).
fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stamps_are_utc_calendar_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(utc_stamp(t), "20231114T221320Z");
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
        assert_eq!(
            utc_stamp(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "20000229T000000Z"
        );
    }

    #[test]
    fn run_dirs_are_never_reused() {
        let root = tempfile::tempdir().unwrap();
        let a = create_run_dir(root.path(), "s", Some("x")).unwrap();
        let b = create_run_dir(root.path(), "s", Some("x")).unwrap();
        assert_ne!(a, b);
        assert!(a.join("trials").is_dir());
    }

    #[test]
    fn atomic_write_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.json");
        write_json(&p, &serde_json::json!({"k": 1})).unwrap();
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        assert!(fs::read_to_string(&p).unwrap().contains("\"k\": 1"));
    }
}
