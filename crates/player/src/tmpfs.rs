//! Keeping disk I/O out of playback: the file is streamed from tmpfs.

use std::path::{Path, PathBuf};

/// `--tmpfs`: what to do when the file is not on tmpfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TmpfsPolicy {
    /// Copy it to /dev/shm first, and remove the copy at exit (default).
    Copy,
    /// Refuse to play it.
    Require,
    /// Play it where it is.
    Off,
}

/// Where the copies go.
pub const SHM_DIR: &str = "/dev/shm";

/// statfs(2)'s magic number for tmpfs.
const TMPFS_MAGIC: libc::c_long = 0x0102_1994;

/// Whether `path` lives on tmpfs.
pub fn is_on_tmpfs(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: statfs is plain data; c is a valid NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs per architecture
    Ok(st.f_type as libc::c_long == TMPFS_MAGIC)
}

/// A temporary copy on tmpfs, removed when dropped (every exit path of the
/// player returns through its owner, signals included: they only set a flag).
#[derive(Debug)]
pub struct TmpCopy {
    path: PathBuf,
}

/// The prefix of our copies' names: `xrun-player-<pid>-<file name>`.
const COPY_PREFIX: &str = "xrun-player-";

impl TmpCopy {
    /// Copies the first `bytes` of `src` (what will be played: a huge or
    /// sparse file is not copied whole) into `dir` under a name of our own.
    pub fn create(src: &Path, dir: &Path, bytes: u64) -> std::io::Result<TmpCopy> {
        use std::io::Read;
        let stem = src
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "audio.wav".into());
        let path = dir.join(format!("{COPY_PREFIX}{}-{stem}", std::process::id()));
        let copy = TmpCopy { path };
        // Own the path before the copy so a failed copy is removed too.
        let mut from = std::fs::File::open(src)?.take(bytes);
        let mut to = std::fs::File::create(&copy.path)?;
        std::io::copy(&mut from, &mut to)?;
        Ok(copy)
    }

    /// The copy's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TmpCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Free bytes on the file system of `dir`, if it can tell.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data; c is a valid NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // the fields' widths differ per architecture
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Removes the copies in `dir` of players that are gone (a SIGKILL skips
/// the removal at exit): `xrun-player-<pid>-…` whose pid no longer runs.
/// Returns what it removed.
pub fn sweep_dead_copies(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(COPY_PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        let gone = pid.is_some_and(xrunbench_schema::doc::process_gone);
        if gone && std::fs::remove_file(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_shm_is_tmpfs_and_the_copy_goes_away() {
        assert!(is_on_tmpfs(Path::new(SHM_DIR)).unwrap());
        let src = std::env::temp_dir().join(format!("xrun-tmpfs-test-{}", std::process::id()));
        std::fs::write(&src, b"abc").unwrap();
        let copy = TmpCopy::create(&src, Path::new(SHM_DIR), 2).unwrap();
        let p = copy.path().to_path_buf();
        assert_eq!(std::fs::read(&p).unwrap(), b"ab", "only what was asked for");
        drop(copy);
        assert!(!p.exists());
        std::fs::remove_file(src).unwrap();
    }
}
