//! A lock-free single-producer single-consumer byte ring.
//!
//! It sits between the player's reader (the producer: it reads the file,
//! converts, pushes) and a real-time audio callback (the consumer), which
//! must never lock or allocate: both ends only load and store two atomic
//! counters, and the storage is allocated once, at creation.
//!
//! The counters grow without bound (wrapping on overflow) and are reduced
//! modulo the capacity only to index, so "full" and "empty" never need a
//! spare slot to tell apart.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Shared {
    buf: Box<[UnsafeCell<u8>]>,
    /// Bytes ever written (only the producer stores it).
    head: AtomicUsize,
    /// Bytes ever read (only the consumer stores it).
    tail: AtomicUsize,
}

// SAFETY: the producer only writes bytes in [head, tail + cap) and the
// consumer only reads bytes in [tail, head); each publishes its counter with
// Release after touching the bytes and reads the other's with Acquire, so
// no byte is ever accessed from both ends at once.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    fn cap(&self) -> usize {
        self.buf.len()
    }

    fn ptr(&self) -> *mut u8 {
        // UnsafeCell<u8> has the layout of u8.
        self.buf.as_ptr() as *mut u8
    }
}

/// The writing end.
pub struct Producer {
    shared: Arc<Shared>,
}

/// The reading end.
pub struct Consumer {
    shared: Arc<Shared>,
}

/// A ring of `capacity` bytes, split into its two ends.
pub fn ring(capacity: usize) -> (Producer, Consumer) {
    let buf: Box<[UnsafeCell<u8>]> = (0..capacity.max(1)).map(|_| UnsafeCell::new(0)).collect();
    let shared = Arc::new(Shared {
        buf,
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
    });
    (
        Producer {
            shared: shared.clone(),
        },
        Consumer { shared },
    )
}

/// Copies `src` into the ring's storage at logical offset `at` (wrapping).
///
/// # Safety
/// The caller owns bytes [at, at + src.len()) of the ring.
unsafe fn copy_in(s: &Shared, at: usize, src: &[u8]) {
    let start = at % s.cap();
    let first = src.len().min(s.cap() - start);
    std::ptr::copy_nonoverlapping(src.as_ptr(), s.ptr().add(start), first);
    std::ptr::copy_nonoverlapping(src.as_ptr().add(first), s.ptr(), src.len() - first);
}

/// Copies ring bytes at logical offset `at` into `dst` (wrapping).
///
/// # Safety
/// The caller owns bytes [at, at + dst.len()) of the ring.
unsafe fn copy_out(s: &Shared, at: usize, dst: &mut [u8]) {
    let start = at % s.cap();
    let first = dst.len().min(s.cap() - start);
    std::ptr::copy_nonoverlapping(s.ptr().add(start), dst.as_mut_ptr(), first);
    std::ptr::copy_nonoverlapping(s.ptr(), dst.as_mut_ptr().add(first), dst.len() - first);
}

impl Producer {
    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.cap()
    }

    /// Bytes queued (a lower bound: the consumer may be reading).
    pub fn len(&self) -> usize {
        let head = self.shared.head.load(Ordering::Relaxed);
        head.wrapping_sub(self.shared.tail.load(Ordering::Acquire))
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes that can be pushed now.
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Pushes as much of `data` as fits; returns the bytes pushed.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.free());
        self.push_exact(&data[..n]);
        n
    }

    /// Pushes all of `data` if it fits, else nothing; returns whether it did
    /// (for fixed-size records that must not be split).
    pub fn push_all(&mut self, data: &[u8]) -> bool {
        if data.len() > self.free() {
            return false;
        }
        self.push_exact(data);
        true
    }

    fn push_exact(&mut self, data: &[u8]) {
        let head = self.shared.head.load(Ordering::Relaxed);
        // SAFETY: data.len() <= free(): these bytes are the producer's.
        unsafe { copy_in(&self.shared, head, data) };
        self.shared
            .head
            .store(head.wrapping_add(data.len()), Ordering::Release);
    }
}

impl Consumer {
    /// Bytes available to pop.
    pub fn len(&self) -> usize {
        let tail = self.shared.tail.load(Ordering::Relaxed);
        self.shared.head.load(Ordering::Acquire).wrapping_sub(tail)
    }

    /// Pops up to `out.len()` bytes into `out`; returns the bytes popped.
    pub fn pop(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.len());
        self.pop_exact(&mut out[..n]);
        n
    }

    /// Pops exactly `out.len()` bytes if that many are there, else nothing.
    pub fn pop_all(&mut self, out: &mut [u8]) -> bool {
        if out.len() > self.len() {
            return false;
        }
        self.pop_exact(out);
        true
    }

    fn pop_exact(&mut self, out: &mut [u8]) {
        let tail = self.shared.tail.load(Ordering::Relaxed);
        // SAFETY: out.len() <= len(): these bytes are the consumer's.
        unsafe { copy_out(&self.shared, tail, out) };
        self.shared
            .tail
            .store(tail.wrapping_add(out.len()), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_keeps_order() {
        let (mut p, mut c) = ring(7);
        let mut out = [0u8; 16];
        let mut next = 0u8;
        let mut expect = 0u8;
        for round in 0..100 {
            let chunk: Vec<u8> = (0..(round % 5 + 1))
                .map(|_| {
                    next = next.wrapping_add(1);
                    next
                })
                .collect();
            let pushed = p.push(&chunk);
            // What did not fit is offered again next round.
            next = next.wrapping_sub((chunk.len() - pushed) as u8);
            let n = c.pop(&mut out[..(round % 3 + 1)]);
            for &b in &out[..n] {
                expect = expect.wrapping_add(1);
                assert_eq!(b, expect);
            }
        }
    }

    #[test]
    fn full_and_empty_are_told_apart() {
        let (mut p, mut c) = ring(4);
        assert_eq!(c.len(), 0);
        assert_eq!(p.push(&[1, 2, 3, 4, 5]), 4);
        assert_eq!(p.free(), 0);
        assert!(!p.push_all(&[9]));
        let mut out = [0u8; 4];
        assert!(!c.pop_all(&mut [0u8; 5]));
        assert!(c.pop_all(&mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(c.len() == 0 && p.is_empty());
    }

    #[test]
    fn threads_see_every_byte_in_order() {
        let (mut p, mut c) = ring(64);
        let writer = std::thread::spawn(move || {
            let mut i = 0u32;
            while i < 100_000 {
                let b = (i % 251) as u8;
                if p.push(&[b]) == 1 {
                    i += 1;
                }
            }
        });
        let mut got = 0u32;
        let mut buf = [0u8; 32];
        while got < 100_000 {
            let n = c.pop(&mut buf);
            for &b in &buf[..n] {
                assert_eq!(b, (got % 251) as u8);
                got += 1;
            }
        }
        writer.join().unwrap();
    }
}
