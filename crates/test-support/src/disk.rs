//! A small disk that fills up: a tmpfs of a chosen size, for the tests of
//! what a full disk does to a write. Mounting needs root.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// A tmpfs of a chosen size mounted over a fresh directory; unmounted (and
/// the directory removed) when dropped.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

/// tmpfs accounts in pages: a file of one byte takes one.
pub const PAGE: u64 = 4096;

impl SmallDisk {
    /// Mounts a tmpfs of `size` bytes (rounded up to whole pages by the
    /// kernel). Panics when the mount fails (not root).
    pub fn mount(size: u64) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let target = CString::new(dir.path().to_str().unwrap()).unwrap();
        let opts = CString::new(format!("size={size},mode=0755")).unwrap();
        // SAFETY: valid NUL-terminated strings; a plain tmpfs mount.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(rc, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        SmallDisk { dir }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes still free on it.
    pub fn free(&self) -> u64 {
        let target = CString::new(self.path().to_str().unwrap()).unwrap();
        // SAFETY: statvfs writes only into the struct we pass.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid path and a valid out-pointer.
        let rc = unsafe { libc::statvfs(target.as_ptr(), &mut st) };
        assert_eq!(rc, 0, "statvfs: {}", std::io::Error::last_os_error());
        st.f_bavail as u64 * st.f_frsize as u64
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let target = CString::new(self.dir.path().to_str().unwrap()).unwrap();
        // SAFETY: unmounting what we mounted; lazily if a reader holds it.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}
