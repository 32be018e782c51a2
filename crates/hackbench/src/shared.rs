//! Per-worker result slots in memory shared with forked children.
//!
//! A forked worker cannot hand anything back through the address space it
//! copied, so each worker owns one slot in a `MAP_SHARED` anonymous mapping
//! and stores there, once, at its end: what it moved and, if it failed,
//! where and with which errno. The parent formats the messages; the child
//! only does atomic stores (nothing that allocates or locks after fork).

use std::io;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

/// Where a worker stopped, when it did not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    /// Finished normally.
    Done = 0,
    /// Writing its ready byte (rt-tests: "CLIENT: ready write").
    ReadyWrite = 1,
    /// Waiting for the wake byte (rt-tests: "poll").
    Poll = 2,
    /// A sender's write (rt-tests: "SENDER: write").
    SenderWrite = 3,
    /// A receiver's read (rt-tests: "SERVER: read").
    ReceiverRead = 4,
    /// A receiver's read hit end of file before all messages arrived
    /// (rt-tests spins forever there).
    ReceiverEof = 5,
    /// The round was abandoned while this worker was blocked.
    Aborted = 6,
}

impl Stage {
    fn from_u32(v: u32) -> Stage {
        match v {
            1 => Stage::ReadyWrite,
            2 => Stage::Poll,
            3 => Stage::SenderWrite,
            4 => Stage::ReceiverRead,
            5 => Stage::ReceiverEof,
            6 => Stage::Aborted,
            _ => Stage::Done,
        }
    }

    /// rt-tests' wording for the failing call.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::Done => "finished",
            Stage::ReadyWrite => "CLIENT: ready write",
            Stage::Poll => "poll",
            Stage::SenderWrite => "SENDER: write",
            Stage::ReceiverRead => "SERVER: read",
            Stage::ReceiverEof => "SERVER: read: unexpected end of stream",
            Stage::Aborted => "aborted",
        }
    }
}

/// One worker's results. All-zero is the valid initial state.
///
/// One cache line each (64 bytes, 64 to a page): a slot never straddles a
/// page, so [`Slot::map_in`] maps all of it with one store, and workers on
/// different CPUs never write to the same line.
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// Messages completely received (receivers) or sent (senders).
    pub messages: AtomicU64,
    /// Bytes received or sent.
    pub bytes: AtomicU64,
    /// A [`Stage`].
    stage: AtomicU32,
    /// errno of the failing call (0 for end of file or a signal).
    errno: AtomicI32,
    /// Voluntary context switches of this worker.
    pub nvcsw: AtomicU64,
    /// Involuntary context switches of this worker.
    pub nivcsw: AtomicU64,
}

impl Slot {
    /// Stores the slot's initial zero again, so that its page is mapped
    /// writable in this process now. A forked worker calls it before it
    /// says ready: its first write to the shared page otherwise faults at
    /// its end, inside the timed window, where rt-tests' workers have no
    /// such fault (a C copy of rt-tests with our result slots: 1.037
    /// [1.016, 1.050] at `-p -g 30 -l 1`; touched before ready, 1.008).
    pub(crate) fn map_in(&self) {
        self.messages.store(0, Ordering::Relaxed);
    }

    /// Records how the worker ended.
    pub(crate) fn set_outcome(&self, stage: Stage, errno: i32) {
        self.errno.store(errno, Ordering::Relaxed);
        self.stage.store(stage as u32, Ordering::Release);
    }

    /// How the worker ended: stage and errno.
    pub(crate) fn outcome(&self) -> (Stage, i32) {
        let stage = Stage::from_u32(self.stage.load(Ordering::Acquire));
        (stage, self.errno.load(Ordering::Relaxed))
    }

    /// Stores what a worker moved: whole messages, and bytes.
    pub(crate) fn set_moved(&self, messages: u64, bytes: u64) {
        self.messages.store(messages, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }

    /// Stores the context switches of a finished worker, as rusage gives
    /// them (`long`: 32 bits on armv7).
    pub(crate) fn set_ctxsw(&self, nvcsw: libc::c_long, nivcsw: libc::c_long) {
        self.nvcsw.store(nvcsw.max(0) as u64, Ordering::Relaxed);
        self.nivcsw.store(nivcsw.max(0) as u64, Ordering::Relaxed);
    }
}

/// `len` slots in a shared anonymous mapping.
pub(crate) struct Slots {
    ptr: *mut Slot,
    len: usize,
}

// SAFETY: the slots are atomics; the mapping lives as long as `Slots`.
unsafe impl Send for Slots {}
// SAFETY: as above; every access goes through atomics.
unsafe impl Sync for Slots {}

impl Slots {
    /// Maps `len` zeroed slots.
    pub(crate) fn new(len: usize) -> io::Result<Slots> {
        let bytes = len
            .max(1)
            .checked_mul(std::mem::size_of::<Slot>())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Slots {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Slot `i` (`i < len`, which every caller guarantees by construction;
    /// out of range clamps to the last slot rather than reading wild memory).
    pub(crate) fn get(&self, i: usize) -> &Slot {
        let i = i.min(self.len.saturating_sub(1));
        // SAFETY: i < len (or the single slot of an empty set); zeroed
        // memory is a valid Slot of atomics.
        unsafe { &*self.ptr.add(i) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        let bytes = self.len.max(1) * std::mem::size_of::<Slot>();
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), bytes) };
    }
}
