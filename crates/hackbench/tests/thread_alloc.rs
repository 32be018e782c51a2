//! Thread mode's worker threads never allocate or free.
//!
//! A thread's first malloc() or free() makes glibc give it a malloc arena
//! of its own (an mmap of 128 MiB, two munmaps and an mprotect, under the
//! process's mmap lock). rt-tests' senders share one context that main
//! allocated, and never touch the allocator; ours once built each sender's
//! fd list on its own thread (an arena per sender, before "ready") and
//! freed each worker's closure inside the timed window. This counts every
//! allocation and free made on any thread other than the test's own while
//! a thread-mode round runs. The file has its own `main` (`harness =
//! false`): with libtest's, its main thread waits on the test through a
//! channel and allocates when it first blocks — after the count started
//! if the machine is busy — so the only threads here are the test's and
//! the workers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use xrunbench_hackbench::{run_round, Mode, Params, Transport};

/// The system allocator, counting calls made on threads not marked as the
/// test's own while counting is on.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ELSEWHERE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor: reading it never
    // allocates (which would recurse into the allocator).
    static THE_TEST: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTING.load(Ordering::Relaxed) && !THE_TEST.with(Cell::get) {
        ELSEWHERE.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() {
    print!("test worker_threads_neither_allocate_nor_free ... ");
    worker_threads_neither_allocate_nor_free();
    println!("ok");
}

fn worker_threads_neither_allocate_nor_free() {
    THE_TEST.with(|t| t.set(true));
    for transport in [Transport::Pipe, Transport::Socket] {
        let p = Params {
            groups: 2,
            fds: 5,
            loops: 20,
            datasize: 100,
            mode: Mode::Thread,
            transport,
            fifo: false,
        };
        ELSEWHERE.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        let r = run_round(&p);
        COUNTING.store(false, Ordering::Relaxed);
        let r = r.unwrap_or_else(|e| panic!("{transport:?}: {e}"));
        assert_eq!(r.messages, 2 * 5 * 5 * 20, "{transport:?}");
        assert_eq!(
            ELSEWHERE.load(Ordering::Relaxed),
            0,
            "{transport:?}: allocator calls on the worker threads"
        );
    }
}
