//! Thin wrappers over the few libc calls the load needs, each returning
//! `io::Result` so that callers can name what failed.

use std::io;
use std::os::fd::RawFd;

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// glibc's `strerror` text for `errno`, without Rust's " (os error N)"
/// suffix, so messages read as rt-tests' `"%s (error: %s)"` ones do.
pub fn strerror(errno: i32) -> String {
    let s = io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Turns a libc `-1` return into the current errno.
pub(crate) fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Wall-clock time as `gettimeofday` gives it: (seconds, microseconds).
pub(crate) fn gettimeofday() -> (i64, i64) {
    // SAFETY: timeval is plain data; a null timezone is allowed.
    let mut tv: libc::timeval = unsafe { std::mem::zeroed() };
    // SAFETY: tv is a valid out-pointer.
    unsafe { libc::gettimeofday(&mut tv, std::ptr::null_mut()) };
    // time_t and suseconds_t are 32 bits on armv7 (glibc): widen.
    (tv.tv_sec as i64, tv.tv_usec as i64)
}

/// How many threads this process has (`Threads:` of /proc/self/status);
/// `None` when that cannot be read.
pub(crate) fn thread_count() -> Option<u32> {
    threads_in_status(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// The `Threads:` field of a /proc/PID/status text.
fn threads_in_status(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// CLOCK_MONOTONIC in nanoseconds.
pub(crate) fn monotonic_ns() -> u128 {
    // SAFETY: timespec is plain data.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// Reads exactly one byte, retrying on EINTR unless `interrupted` says to
/// give up. `Ok(false)` is end of file.
pub(crate) fn read_byte(fd: RawFd, mut interrupted: impl FnMut() -> bool) -> io::Result<bool> {
    let mut b = 0u8;
    loop {
        // SAFETY: one byte into a valid local.
        let r = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
        match r {
            1 => return Ok(true),
            0 => return Ok(false),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted || interrupted() {
                    return Err(e);
                }
            }
        }
    }
}

/// Writes one byte (the ready or wake byte); a short write is an error.
pub(crate) fn write_byte(fd: RawFd, byte: u8) -> io::Result<()> {
    // SAFETY: one byte from a valid local.
    let r = unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    if r == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A message buffer that shares no cache line with any other allocation.
///
/// rt-tests keeps each thread's buffer on that thread's own stack; packing
/// 100-byte heap buffers next to each other instead would make receivers
/// on different CPUs false-share cache lines and slow thread mode down.
pub(crate) struct MsgBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

/// Cache line size assumed for padding (128 covers adjacent-line prefetch).
const LINE: usize = 128;

impl MsgBuf {
    /// The usable `len` bytes.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// Allocates a zeroed, line-padded buffer, returning an error instead of
/// aborting when the size asked for (`-s`) cannot be had.
pub(crate) fn try_buffer(len: usize) -> Result<MsgBuf, crate::Error> {
    let alloc_err = || crate::Error::Alloc { bytes: len as u64 };
    let total = len.checked_add(2 * LINE).ok_or_else(alloc_err)?;
    let mut raw = Vec::new();
    raw.try_reserve_exact(total).map_err(|_| alloc_err())?;
    raw.resize(total, 0);
    let addr = raw.as_ptr() as usize;
    let start = LINE - addr % LINE;
    Ok(MsgBuf { raw, start, len })
}

/// The scheduling policy and priority of the calling thread, to restore
/// after `-F` (which must not leak into the next round's workers: they
/// would inherit SCHED_FIFO from their creator).
pub(crate) struct SchedGuard {
    policy: libc::c_int,
    param: libc::sched_param,
}

impl SchedGuard {
    /// Switches the calling thread to SCHED_FIFO 1, as rt-tests' `-F` does
    /// to its main thread once the workers exist.
    pub(crate) fn fifo() -> io::Result<SchedGuard> {
        // SAFETY: querying our own thread (pid 0).
        let policy = check(unsafe { libc::sched_getscheduler(0) })?;
        // SAFETY: sched_param is plain data.
        let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        check(unsafe { libc::sched_getparam(0, &mut param) })?;
        let fifo = libc::sched_param { sched_priority: 1 };
        // SAFETY: valid param pointer; pid 0 is the calling thread.
        check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) })?;
        Ok(SchedGuard { policy, param })
    }
}

impl Drop for SchedGuard {
    fn drop(&mut self) {
        // SAFETY: restoring values read from this very thread.
        unsafe { libc::sched_setscheduler(0, self.policy, &self.param) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_count_comes_from_proc_status() {
        assert_eq!(
            threads_in_status("Name:\tx\nThreads:\t3\nSigQ:\t0/1\n"),
            Some(3)
        );
        assert_eq!(threads_in_status("Name:\tx\n"), None);
        assert!(thread_count().is_some_and(|n| n >= 1));
    }
}
