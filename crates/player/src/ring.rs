//! A lock-free single-producer single-consumer byte ring.
//!
//! It sits between the player's reader (the producer: it reads the file,
//! converts, pushes) and a real-time audio callback (the consumer), which
//! must never lock or allocate: both ends only load and store two atomic
//! counters, and the storage is allocated once, at creation.
//!
//! Each end keeps a position in `[0, 2·capacity)`: a byte's slot is its
//! position modulo the capacity, and the two positions differ by the bytes
//! queued (modulo 2·capacity), so "full" (differ by the capacity) and
//! "empty" (equal) never need a spare slot to tell apart. The positions
//! never overflow, whatever the width of `usize`: counters that only grow
//! would wrap on a 32-bit board after 4 GiB (3.1 h of f32 stereo at
//! 48 kHz), and from then on, with a capacity that is not a power of two,
//! the two ends would address different bytes.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Shared {
    buf: Box<[UnsafeCell<u8>]>,
    /// The producer's position in `[0, 2·cap)` (only the producer stores it).
    head: AtomicUsize,
    /// The consumer's position in `[0, 2·cap)` (only the consumer stores it).
    tail: AtomicUsize,
}

// SAFETY: the producer only writes the slots of positions [head, tail + cap)
// and the consumer only reads those of [tail, head) (positions taken modulo
// 2·cap, slots modulo cap: the cap positions of each range map to distinct
// slots); each publishes its position with Release after touching the
// bytes and reads the other's with Acquire, so no byte is ever accessed
// from both ends at once.
// (`Send` needs no promise: the boxed cells and the atomics are `Send`.)
unsafe impl Sync for Shared {}

impl Shared {
    fn cap(&self) -> usize {
        self.buf.len()
    }

    /// Bytes from position `from` to position `to` (both in `[0, 2·cap)`).
    fn distance(&self, from: usize, to: usize) -> usize {
        if to >= from {
            to - from
        } else {
            to + 2 * self.cap() - from
        }
    }

    /// Position `at` moved on by `n ≤ cap` bytes.
    fn advance(&self, at: usize, n: usize) -> usize {
        let next = at + n;
        if next >= 2 * self.cap() {
            next - 2 * self.cap()
        } else {
            next
        }
    }

    /// The storage slot of position `at`.
    fn slot(&self, at: usize) -> usize {
        if at >= self.cap() {
            at - self.cap()
        } else {
            at
        }
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

/// A ring of `capacity` bytes (at least 1, at most `usize::MAX / 4`: the
/// positions must fit 2·capacity and a step beyond), split into its two
/// ends.
pub fn ring(capacity: usize) -> (Producer, Consumer) {
    ring_at(capacity, 0)
}

/// A ring whose two ends start at position `start` (reduced into
/// `[0, 2·capacity)`): the same ring as [`ring`], seen later in its life.
fn ring_at(capacity: usize, start: usize) -> (Producer, Consumer) {
    let capacity = capacity.clamp(1, usize::MAX / 4);
    let buf: Box<[UnsafeCell<u8>]> = (0..capacity).map(|_| UnsafeCell::new(0)).collect();
    let start = start % (2 * capacity);
    let shared = Arc::new(Shared {
        buf,
        head: AtomicUsize::new(start),
        tail: AtomicUsize::new(start),
    });
    (
        Producer {
            shared: shared.clone(),
        },
        Consumer { shared },
    )
}

/// Copies `src` into the ring's storage from position `at` (wrapping).
///
/// # Safety
/// The caller owns the `src.len()` bytes from position `at` of the ring.
unsafe fn copy_in(s: &Shared, at: usize, src: &[u8]) {
    let start = s.slot(at);
    let first = src.len().min(s.cap() - start);
    std::ptr::copy_nonoverlapping(src.as_ptr(), s.ptr().add(start), first);
    std::ptr::copy_nonoverlapping(src.as_ptr().add(first), s.ptr(), src.len() - first);
}

/// Copies the ring's bytes from position `at` into `dst` (wrapping).
///
/// # Safety
/// The caller owns the `dst.len()` bytes from position `at` of the ring.
unsafe fn copy_out(s: &Shared, at: usize, dst: &mut [u8]) {
    let start = s.slot(at);
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
        let tail = self.shared.tail.load(Ordering::Acquire);
        self.shared.distance(tail, head)
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
            .store(self.shared.advance(head, data.len()), Ordering::Release);
    }
}

impl Consumer {
    /// Bytes available to pop.
    pub fn len(&self) -> usize {
        let tail = self.shared.tail.load(Ordering::Relaxed);
        let head = self.shared.head.load(Ordering::Acquire);
        self.shared.distance(tail, head)
    }

    /// Whether nothing is there to pop.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
            .store(self.shared.advance(tail, out.len()), Ordering::Release);
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

    /// Pushes and pops `total` bytes of a known sequence through `p`/`c`
    /// in chunks of 1 to `cap + 2` bytes, filling the ring to the brim
    /// every third step (a full ring is where two positions a capacity
    /// apart must never share a slot), checking every byte and the queued
    /// count at each step.
    fn stream_through(mut p: Producer, mut c: Consumer, total: usize) {
        let cap = p.capacity();
        let (mut sent, mut got) = (0usize, 0usize);
        let mut out = vec![0u8; cap + 2];
        let mut step = 0usize;
        while got < total {
            let want = if step % 3 == 0 {
                cap + 1
            } else {
                step % (cap + 2) + 1
            };
            let chunk: Vec<u8> = (sent..(sent + want).min(total))
                .map(|i| (i % 251) as u8)
                .collect();
            sent += p.push(&chunk);
            assert_eq!(c.len(), sent - got, "queued after a push");
            assert!(c.len() <= cap);
            let n = c.pop(&mut out[..(step * 7) % (cap + 2) + 1]);
            for &b in &out[..n] {
                assert_eq!(b, (got % 251) as u8, "byte {got}");
                got += 1;
            }
            assert_eq!(p.len(), sent - got, "queued after a pop");
            step += 1;
        }
    }

    #[test]
    fn positions_wrap_and_every_byte_stays_in_order() {
        // Capacities that do not divide 2^32 or 2^64 (7, 48000·8·… like a
        // real buffer) and powers of two, both ends started just below the
        // wrap of their positions, streamed through it many times over.
        for cap in [1usize, 2, 7, 64, 1000, 4800] {
            for start in [0, 2 * cap - 1, (2 * cap).saturating_sub(3), cap - 1, cap] {
                let (p, c) = ring_at(cap, start);
                stream_through(p, c, 20 * cap + 5);
            }
        }
    }

    #[test]
    fn a_stream_far_longer_than_a_32_bit_counter_would_hold_keeps_its_order() {
        // What a usize counter would reach only after 4 GiB on armv7:
        // started at the last positions before any wrap a counter could
        // have, with a capacity that is not a power of two. The positions
        // are bounded by 2·cap, so there is no other wrap to reach.
        let cap = 48_000 * 8 / 10; // 100 ms of f32 stereo at 48 kHz
        let (p, c) = ring_at(cap, u32::MAX as usize);
        stream_through(p, c, 3 * cap);
        let (p, c) = ring_at(cap, usize::MAX);
        stream_through(p, c, 3 * cap);
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
        assert!(c.is_empty() && p.is_empty());
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
