//! rt-tests' `fdpair()`: the connected pair every message (and the
//! ready/wake barrier) goes through.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};

use crate::{Error, Transport};

/// A connected pair: the receiver reads `r`, senders write `w`.
pub(crate) struct Pair {
    /// Read end (rt-tests' `fds[0]`).
    pub r: OwnedFd,
    /// Write end (rt-tests' `fds[1]`).
    pub w: OwnedFd,
}

/// Makes one pair of the transport's kind. No CLOEXEC flags: nothing is
/// exec'd, and rt-tests sets none.
pub(crate) fn fdpair(t: Transport) -> Result<Pair, Error> {
    let made = match t {
        Transport::Socket => raw_pair(|fds| {
            // SAFETY: fds points at two ints.
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds) }
        }),
        // SAFETY: fds points at two ints.
        Transport::Pipe => raw_pair(|fds| unsafe { libc::pipe(fds) }),
        Transport::Inet => inet_pair(),
    };
    made.map_err(|e| Error::Setup {
        what: "Creating fdpair",
        errno: e.raw_os_error().unwrap_or(0),
    })
}

fn raw_pair(make: impl FnOnce(*mut libc::c_int) -> libc::c_int) -> std::io::Result<Pair> {
    let mut fds = [-1; 2];
    crate::sys::check(make(fds.as_mut_ptr()))?;
    // SAFETY: both fds were just created and are owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok(Pair { r, w })
}

/// rt-tests' `inet_socketpair()`: a TCP connection over 127.0.0.1 on an
/// ephemeral port; the accepted socket is the read end, the connecting one
/// the write end. The listener is closed at once, as there.
fn inet_pair() -> std::io::Result<Pair> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let w = TcpStream::connect(listener.local_addr()?)?;
    let (r, _) = listener.accept()?;
    Ok(Pair {
        r: r.into(),
        w: w.into(),
    })
}
