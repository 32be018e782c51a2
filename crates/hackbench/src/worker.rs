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
pub(crate) fn work(job: Job<'_>, mut ctx: Ctx<'_>) -> bool {
    let slot = ctx.slot;
    map_in(&mut ctx);
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

/// Writes to every page the worker will write to in the timed window (its
/// message buffer and its result slot) before it says ready, so that their
/// page faults (copy-on-write in a forked worker) fall before the start,
/// as they do in rt-tests, whose message buffer is on a stack the worker
/// has already written to. Stores the values already there: a receiver's
/// buffer contents are never looked at, a sender fills its own after the
/// wake-up, as rt-tests does.
fn map_in(ctx: &mut Ctx<'_>) {
    // Every 4 KiB (the smallest page on any Linux target) and the last byte.
    let len = ctx.buf.len();
    for at in (0..len).step_by(4096).chain(len.checked_sub(1)) {
        // Volatile: a store of the value already there must not be elided.
        // SAFETY: `at < len`, inside the worker's own buffer.
        unsafe {
            let p = ctx.buf.as_mut_ptr().add(at);
            p.write_volatile(p.read_volatile());
        }
    }
    ctx.slot.map_in();
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
fn send(out_fds: &[RawFd], mut ctx: Ctx<'_>) -> Result<(), Fail> {
    ctx.buf.fill(b'-');
    let (mut messages, mut bytes) = (0u64, 0u64);
    let mut result = Ok(());
    'all: for _ in 0..ctx.loops {
        for &fd in out_fds {
            // SAFETY: writing from a valid slice.
            let write =
                |rest: &mut [u8]| unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
            if let Err(f) = whole_message(&mut ctx, Stage::SenderWrite, &mut bytes, write) {
                result = Err(f);
                break 'all;
            }
            messages += 1;
        }
    }
    ctx.slot.set_moved(messages, bytes);
    result
}

/// rt-tests' `receiver()`: read `packets` messages of exactly `datasize`
/// bytes (never looking at the contents), counting what arrives.
fn receive(in_fd: RawFd, packets: u64, mut ctx: Ctx<'_>) -> Result<(), Fail> {
    let (mut messages, mut bytes) = (0u64, 0u64);
    let mut result = Ok(());
    for _ in 0..packets {
        // SAFETY: reading into a valid slice.
        let read =
            |rest: &mut [u8]| unsafe { libc::read(in_fd, rest.as_mut_ptr().cast(), rest.len()) };
        if let Err(f) = whole_message(&mut ctx, Stage::ReceiverRead, &mut bytes, read) {
            result = Err(f);
            break;
        }
        messages += 1;
    }
    ctx.slot.set_moved(messages, bytes);
    result
}

/// rt-tests' `again:` loop, the sender's and the receiver's: moves one
/// whole message, `io` (one write from or read into the rest of the
/// buffer) at a time, retrying partial transfers and EINTRs, and adds the
/// bytes moved to `bytes`. A read of 0 is the stream's end (rt-tests spins
/// there); a write of 0 moved nothing and is retried, as in rt-tests.
/// Always inlined: each loop stays rt-tests' own, with no call per message.
#[inline(always)]
fn whole_message(
    ctx: &mut Ctx<'_>,
    stage: Stage,
    bytes: &mut u64,
    mut io: impl FnMut(&mut [u8]) -> isize,
) -> Result<(), Fail> {
    let mut done = 0;
    while done < ctx.buf.len() {
        let r = io(&mut ctx.buf[done..]);
        if r == 0 && stage == Stage::ReceiverRead {
            return Err((Stage::ReceiverEof, 0));
        }
        if r < 0 {
            failure(ctx, stage)?;
            continue;
        }
        done += r as usize;
        *bytes += r as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::Slots;

    /// This machine's page size.
    fn page() -> usize {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(p).expect("page size")
    }

    /// Which pages of `len` bytes at `addr` are resident (mincore).
    fn resident_pages(addr: *mut u8, len: usize) -> Vec<bool> {
        let mut vec = vec![0u8; len.div_ceil(page())];
        // SAFETY: `addr` is page-aligned and `len` bytes are mapped; `vec`
        // has one byte per page.
        let r = unsafe { libc::mincore(addr.cast(), len, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().map(|v| v & 1 == 1).collect()
    }

    #[test]
    fn map_in_writes_every_page_of_the_buffer_and_the_slot_before_the_start() {
        // A fresh private mapping of 5 pages, none resident yet: the buffer
        // covers 4 of them, starting 100 bytes into the first page.
        let page = page();
        let map_len = 5 * page;
        // SAFETY: a fresh anonymous mapping, unmapped below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base.cast::<u8>();
        assert_eq!(resident_pages(base, map_len), vec![false; 5]);
        let len = 3 * page;
        // SAFETY: 100 + 3 pages lie inside the 5-page mapping.
        let buf = unsafe { std::slice::from_raw_parts_mut(base.add(100), len) };
        let slots = Slots::new(128).expect("mmap");
        let slot = slots.get(100);
        let slot_page = (slot as *const crate::shared::Slot as usize) & !(page - 1);
        assert_eq!(resident_pages(slot_page as *mut u8, page), vec![false]);
        let mut ctx = Ctx {
            ready_out: -1,
            wakefd: -1,
            loops: 1,
            buf,
            slot,
            abort: None,
        };
        map_in(&mut ctx);
        // Pages 0..=3 hold the buffer (100 .. 100 + 3 pages); page 4 does not.
        assert_eq!(
            resident_pages(base, map_len),
            vec![true, true, true, true, false]
        );
        assert_eq!(resident_pages(slot_page as *mut u8, page), vec![true]);
        // Nothing changed: all zero, as mapped.
        assert!(ctx.buf.iter().all(|&b| b == 0));
        assert_eq!(ctx.slot.outcome(), (Stage::Done, 0));
        // SAFETY: unmapping the mapping made above; `ctx`, the only view of
        // it, is not used after this.
        unsafe { libc::munmap(base.cast(), map_len) };
    }

    #[test]
    fn a_slot_is_one_cache_line_and_never_straddles_a_page() {
        assert_eq!(std::mem::size_of::<crate::shared::Slot>(), 64);
        assert_eq!(std::mem::align_of::<crate::shared::Slot>(), 64);
    }
}
