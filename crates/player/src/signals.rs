//! SIGINT, SIGTERM and SIGHUP end playback cleanly: the handler only sets
//! a flag, so the report is still written and every temporary file is
//! removed on the normal return path.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
/// Which signal set [`STOP`], for the exit code (128 + it, as a shell
/// reports a process a signal ended).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers, without SA_RESTART so that a blocking wait or
/// sleep returns EINTR and the loop looks at the flag at once.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only touches atomics (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The flag the handlers set.
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// The signal that stopped playback, if one did.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
