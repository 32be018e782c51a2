//! What stops a trial early: SIGINT, SIGTERM, SIGHUP, and the link to
//! whoever started us going away — stdin reaching end of file after the
//! spec (when the spec came on stdin) or stdout being closed (POLLERR /
//! POLLHUP on fd 1). The last two are what a dropped SSH session looks like
//! to the remote process, often without any signal.
//!
//! The handlers and the watcher only record the first reason; the trial's
//! loop sees it, stops the children in order, restores the knobs, writes
//! the record if it still can, and exits 128 + the signal.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Why a trial was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A signal (SIGINT, SIGTERM, SIGHUP).
    Signal(i32),
    /// Standard input reached end of file: the runner (or the link) is gone.
    StdinClosed,
    /// Standard output was closed: nobody will read the record.
    StdoutClosed,
}

impl StopReason {
    /// The exit code: 128 + the signal; a closed link counts as a hang-up.
    pub fn exit_code(self) -> u8 {
        let sig = match self {
            StopReason::Signal(s) => s,
            StopReason::StdinClosed | StopReason::StdoutClosed => libc::SIGHUP,
        };
        128u8.saturating_add(u8::try_from(sig).unwrap_or(0))
    }

    /// For the record and for people: `SIGTERM`, `stdin closed`.
    pub fn describe(self) -> String {
        match self {
            StopReason::Signal(libc::SIGINT) => "SIGINT".into(),
            StopReason::Signal(libc::SIGTERM) => "SIGTERM".into(),
            StopReason::Signal(libc::SIGHUP) => "SIGHUP".into(),
            StopReason::Signal(n) => format!("signal {n}"),
            StopReason::StdinClosed => "stdin closed".into(),
            StopReason::StdoutClosed => "stdout closed".into(),
        }
    }
}

/// 0: running; > 0: that signal; the negative codes below: the link.
static STOP: AtomicI32 = AtomicI32::new(0);
const STDIN_CLOSED: i32 = -1;
const STDOUT_CLOSED: i32 = -2;

fn record(code: i32) {
    // The first reason wins: a SIGTERM after the link closed changes nothing.
    let _ = STOP.compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe: one lock-free atomic operation.
    record(sig);
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP, and ignores
/// SIGPIPE (a write to a closed stdout or stderr then fails with EPIPE,
/// which we ignore, instead of killing us before the knobs are restored).
pub fn install() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        set_handler(
            sig,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )?;
    }
    set_handler(libc::SIGPIPE, libc::SIG_IGN)
}

fn set_handler(sig: libc::c_int, handler: libc::sighandler_t) -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; we fill the handler and an empty
    // mask, and the handler only touches an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigemptyset(&mut sa.sa_mask);
        // SA_RESTART: our loops poll the flag; blocking calls need not fail.
        sa.sa_flags = libc::SA_RESTART;
        if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Why we were asked to stop, if we were.
pub fn stop_reason() -> Option<StopReason> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        STDIN_CLOSED => Some(StopReason::StdinClosed),
        STDOUT_CLOSED => Some(StopReason::StdoutClosed),
        s => Some(StopReason::Signal(s)),
    }
}

/// Sleeps up to `d`, waking early when a stop is requested. Returns whether
/// the whole time passed.
pub fn sleep_unless_stopped(d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if stop_reason().is_some() {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(20)));
    }
}

/// Watches the link in a background thread: stdin reaching end of file
/// (only when `watch_stdin`: the spec came on stdin, so the runner keeps it
/// open for as long as it wants the trial) and stdout being closed.
pub fn watch_link(watch_stdin: bool) {
    std::thread::spawn(move || watch_loop(watch_stdin));
}

fn watch_loop(mut watch_stdin: bool) {
    let mut buf = [0u8; 512];
    loop {
        if stop_reason().is_some() {
            return;
        }
        let mut fds = [
            libc::pollfd {
                fd: 1,
                // Only the conditions poll always reports: POLLERR when the
                // reading end of a pipe went away, POLLHUP for a socket.
                events: 0,
                revents: 0,
            },
            libc::pollfd {
                fd: if watch_stdin { 0 } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of 2 pollfd for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 200) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            record(STDOUT_CLOSED);
            return;
        }
        if watch_stdin && fds[1].revents & libc::POLLNVAL != 0 {
            watch_stdin = false;
        } else if watch_stdin && fds[1].revents != 0 {
            // SAFETY: reading into a buffer we own, at most its length.
            let got = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            match got {
                0 => {
                    record(STDIN_CLOSED);
                    return;
                }
                n if n < 0 => {
                    let e = std::io::Error::last_os_error();
                    if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) {
                        record(STDIN_CLOSED);
                        return;
                    }
                }
                // Anything after the spec is ignored: only its end matters.
                _ => {}
            }
        }
    }
}
