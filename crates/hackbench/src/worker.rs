//! What a sender and a receiver do, in either mode.
//!
//! These run in forked children too, so they must not allocate, lock or
//! format: only read/write/poll and atomic stores into the worker's
//! [`Slot`]. The I/O pattern is rt-tests' exactly: one ready byte, a poll
//! on the wake fd, then `loops × fds` writes of `datasize` bytes per sender
//! (partial writes retried) and `fds × loops` reads of exactly `datasize`
//! bytes per receiver.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::shared::{Slot, Stage};

/// A worker's role and the fds it owns.
pub(crate) enum Job<'a> {
    /// Writes `loops` messages to each of `out_fds` in turn.
    Sender { out_fds: &'a [RawFd] },
    /// Reads `packets` messages from `in_fd`.
    Receiver { in_fd: RawFd, packets: u64 },
}

/// Everything a worker needs besides its job.
pub(crate) struct Ctx<'a> {
    /// Write end of the ready pair.
    pub ready_out: RawFd,
    /// Read end of the wake pair.
    pub wakefd: RawFd,
    /// Messages per sender per receiver.
    pub loops: u32,
    /// The message buffer, `datasize` bytes, owned by this worker.
    pub buf: &'a mut [u8],
    /// Where the results go.
    pub slot: &'a Slot,
    /// Thread mode: set when the round is abandoned (an EINTR then means
    /// "give up"). Process mode: None (an abandoned worker is killed).
    pub abort: Option<&'a AtomicBool>,
}

/// Why a worker stopped early: where, and errno (0 if none applies).
type Fail = (Stage, i32);

/// Runs one worker to its end and records the outcome in its slot;
/// returns whether it finished normally.
pub(crate) fn work(job: Job<'_>, ctx: Ctx<'_>) -> bool {
    let slot = ctx.slot;
    let result = ready(&ctx).and_then(|()| match job {
        Job::Sender { out_fds } => send(out_fds, ctx),
        Job::Receiver { in_fd, packets } => receive(in_fd, packets, ctx),
    });
    let (stage, errno) = match result {
        Ok(()) => (Stage::Done, 0),
        Err(f) => f,
    };
    slot.set_outcome(stage, errno);
    stage == Stage::Done
}

/// Decides what an EINTR means: retry, or (round abandoned) give up.
fn interrupted(abort: Option<&AtomicBool>) -> bool {
    abort.is_some_and(|a| a.load(Ordering::SeqCst))
}

/// The last errno, and whether it is an EINTR to retry.
fn failure(ctx: &Ctx<'_>, stage: Stage) -> Result<(), Fail> {
    let e = crate::sys::errno();
    if e != libc::EINTR {
        Err((stage, e))
    } else if interrupted(ctx.abort) {
        Err((Stage::Aborted, 0))
    } else {
        Ok(())
    }
}

/// rt-tests' `ready()`: say "ready" with one byte, then block until the
/// wake fd becomes readable (nobody consumes the wake byte, so it wakes
/// every worker).
fn ready(ctx: &Ctx<'_>) -> Result<(), Fail> {
    let dummy = b'*';
    // SAFETY: one byte from a valid local.
    while unsafe { libc::write(ctx.ready_out, (&dummy as *const u8).cast(), 1) } != 1 {
        failure(ctx, Stage::ReadyWrite)?;
    }
    let mut pfd = libc::pollfd {
        fd: ctx.wakefd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    while unsafe { libc::poll(&mut pfd, 1, -1) } != 1 {
        failure(ctx, Stage::Poll)?;
    }
    Ok(())
}

/// rt-tests' `sender()`: fill the buffer with '-' after the wake-up (as it
/// does), then spray `loops` rounds over every receiver of the group.
fn send(out_fds: &[RawFd], ctx: Ctx<'_>) -> Result<(), Fail> {
    ctx.buf.fill(b'-');
    let (mut messages, mut bytes) = (0u64, 0u64);
    let mut result = Ok(());
    'all: for _ in 0..ctx.loops {
        for &fd in out_fds {
            let mut done = 0;
            while done < ctx.buf.len() {
                let rest = &ctx.buf[done..];
                // SAFETY: writing from a valid slice.
                let r = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
                if r < 0 {
                    if let Err(f) = failure(&ctx, Stage::SenderWrite) {
                        result = Err(f);
                        break 'all;
                    }
                    continue;
                }
                done += r as usize;
                bytes += r as u64;
            }
            messages += 1;
        }
    }
    ctx.slot.messages.store(messages, Ordering::Relaxed);
    ctx.slot.bytes.store(bytes, Ordering::Relaxed);
    result
}

/// rt-tests' `receiver()`: read `packets` messages of exactly `datasize`
/// bytes (never looking at the contents), counting what arrives.
fn receive(in_fd: RawFd, packets: u64, ctx: Ctx<'_>) -> Result<(), Fail> {
    let (mut messages, mut bytes) = (0u64, 0u64);
    let mut result = Ok(());
    'all: for _ in 0..packets {
        let mut done = 0;
        while done < ctx.buf.len() {
            let rest = &mut ctx.buf[done..];
            // SAFETY: reading into a valid slice.
            let r = unsafe { libc::read(in_fd, rest.as_mut_ptr().cast(), rest.len()) };
            if r == 0 {
                result = Err((Stage::ReceiverEof, 0));
                break 'all;
            }
            if r < 0 {
                if let Err(f) = failure(&ctx, Stage::ReceiverRead) {
                    result = Err(f);
                    break 'all;
                }
                continue;
            }
            done += r as usize;
            bytes += r as u64;
        }
        messages += 1;
    }
    ctx.slot.messages.store(messages, Ordering::Relaxed);
    ctx.slot.bytes.store(bytes, Ordering::Relaxed);
    result
}
