//! Stopping a run early: SIGINT/SIGTERM (or a Rust caller) ask for a stop,
//! and the round in progress kills and reaps every worker before returning.
//!
//! Signals are process-wide, so this state is too: one flag, plus the
//! handles of the round in progress that [`request_stop`] pokes so that
//! the main thread wakes even if the signal arrived just before it blocked:
//! the workers' process group (killed with SIGKILL) in process mode, and a
//! pipe the main thread waits on in thread mode. Run one round at a time per
//! process (hackbench semantics anyway).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static PGID: AtomicI32 = AtomicI32::new(0);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

/// Asks the run to stop: the round in progress is abandoned (its workers
/// killed and reaped) and no new round starts. Async-signal-safe: it only
/// stores atomics and calls kill(2) and write(2).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
    let pgid = PGID.load(Ordering::SeqCst);
    if pgid > 0 {
        // SAFETY: kill is async-signal-safe; the group is our live workers'.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write is async-signal-safe; the pipe belongs to the round.
        unsafe { libc::write(fd, b"!".as_ptr().cast(), 1) };
    }
}

/// Whether a stop was requested.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Forgets an earlier stop request, so a long-lived caller can run again.
pub fn clear_stop() {
    STOP.store(false, Ordering::SeqCst);
}

/// Registers (or with 0, unregisters) the process group of the live workers.
pub(crate) fn set_worker_pgid(pgid: i32) {
    PGID.store(pgid, Ordering::SeqCst);
}

/// Registers (or with -1, unregisters) the write end the main thread waits on.
pub(crate) fn set_wake_fd(fd: i32) {
    WAKE_FD.store(fd, Ordering::SeqCst);
}

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    request_stop();
}

extern "C" fn on_nudge(_sig: libc::c_int) {}

/// Installs SIGINT and SIGTERM handlers that call [`request_stop`], and
/// ignores SIGHUP as rt-tests does. Without SA_RESTART, so that a blocking
/// wait returns EINTR and the round notices at once.
pub fn install_signal_handlers() -> io::Result<()> {
    set_handler(libc::SIGINT, on_stop_signal as *const () as usize)?;
    set_handler(libc::SIGTERM, on_stop_signal as *const () as usize)?;
    set_handler(libc::SIGHUP, libc::SIG_IGN)
}

/// The signal that interrupts a blocked worker thread when its round is
/// abandoned. SIGURG: ignored by default, so a stray one harms nothing, and
/// nothing in this program uses out-of-band socket data.
pub(crate) const NUDGE: libc::c_int = libc::SIGURG;

/// Installs the no-op [`NUDGE`] handler (no SA_RESTART: the point is the
/// EINTR it causes).
pub(crate) fn install_nudge_handler() -> io::Result<()> {
    set_handler(NUDGE, on_nudge as *const () as usize)
}

fn set_handler(sig: libc::c_int, handler: libc::sighandler_t) -> io::Result<()> {
    // SAFETY: sigaction is plain data; the handlers are async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        crate::sys::check(libc::sigaction(sig, &sa, std::ptr::null_mut()))?;
    }
    Ok(())
}
