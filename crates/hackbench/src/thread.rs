//! Thread mode (`-T`): one thread per worker, all fds shared.
//!
//! rt-tests gives each thread a `PTHREAD_STACK_MIN` stack and puts the
//! `datasize` message buffer on it, which is why `-T -s 65536` segfaults.
//! Here each worker's buffer is a heap allocation made before the round
//! starts, so the stack only holds the loop and stays small.
//!
//! Worker threads never allocate or free (tests/thread_alloc.rs): a
//! thread's first malloc or free makes glibc create an arena for it (an
//! mmap of 128 MiB, two munmaps and an mprotect under the mmap lock). So
//! each group's senders share one fd list made by the main thread, as
//! rt-tests' senders share one context, and the main thread frees what
//! the threads ran after joining them.
//!
//! The main thread does not join in a blocking `pthread_join` (which no
//! signal interrupts): it blocks on a "done" pipe that the last worker to
//! finish, a failing worker, or [`stop::request_stop`] writes to. Then it
//! joins. To abandon a round, it sets the abort flag and interrupts every
//! blocked worker with [`stop::NUDGE`] until all have returned.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::fdpair::{fdpair, Pair};
use crate::process::{fifo, read_ready_byte, setup};
use crate::shared::{Slots, Stage};
use crate::stop;
use crate::sys;
use crate::worker::{work, Ctx, Job};
use crate::{collect, Error, Params, RoundResult, Stamp, WorkerCause, WorkerId};

/// Worker stack size: rt-tests' PTHREAD_STACK_MIN. Enough, because the
/// message buffers are on the heap (see the module comment); and no
/// bigger, because glibc madvise()s the unused part of a larger stack when
/// the thread exits, which is inside the timed window.
const STACK: usize = if libc::PTHREAD_STACK_MIN > 16384 {
    libc::PTHREAD_STACK_MIN
} else {
    16384
};

/// State shared by the main thread and the workers of one round.
struct Shared {
    /// Set to abandon the round.
    abort: AtomicBool,
    /// Set by a worker that failed.
    failed: AtomicBool,
    /// Workers that have not returned yet.
    remaining: AtomicUsize,
    /// Write end of the done pipe.
    done_w: RawFd,
}

impl Shared {
    fn poke(&self) {
        // Best effort: the main thread also rechecks the counters.
        let _ = sys::write_byte(self.done_w, b'.');
    }
}

/// Runs one thread-mode round.
pub(crate) fn round(p: &Params) -> Result<RoundResult, Error> {
    round_with(p, make_pairs(p)?)
}

/// A round over the given message pairs (`groups × fds` of them, group by
/// group); split out so that a test can hand in a broken one.
fn round_with(p: &Params, pairs: Vec<Pair>) -> Result<RoundResult, Error> {
    // Every round, not once: an abandoned round relies on it, and a
    // library caller may have changed SIGURG's disposition in between.
    stop::install_nudge_handler().map_err(|e| setup("sigaction", &e))?;
    let total = p.total_workers()?;
    let slots = Slots::new(total).map_err(|e| setup("mmap", &e))?;
    let ready = fdpair(p.transport)?;
    let wake = fdpair(p.transport)?;
    let done = fdpair(crate::Transport::Pipe)?;
    let bufs = make_buffers(p, total)?;
    let shared = Shared {
        abort: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        remaining: AtomicUsize::new(0),
        done_w: done.w.as_raw_fd(),
    };
    stop::set_wake_fd(shared.done_w);
    let fds = Fds {
        ready: &ready,
        wake: &wake,
        done_r: &done.r,
    };
    let result = timed_part(p, &shared, &pairs, bufs, &slots, fds);
    stop::set_wake_fd(-1);
    let (start, end) = result?;
    collect(p, &slots, start, end)
}

/// The round's own fds.
#[derive(Clone, Copy)]
struct Fds<'a> {
    ready: &'a Pair,
    wake: &'a Pair,
    done_r: &'a OwnedFd,
}

/// Creates the workers (untimed), waits for them to be ready, then times
/// from the wake byte until the last one is joined.
fn timed_part(
    p: &Params,
    shared: &Shared,
    pairs: &[Pair],
    bufs: Vec<sys::MsgBuf>,
    slots: &Slots,
    fds: Fds<'_>,
) -> Result<(Stamp, Stamp), Error> {
    let ids = Ids {
        ready_out: fds.ready.w.as_raw_fd(),
        wakefd: fds.wake.r.as_raw_fd(),
    };
    // Each group's write ends, one list its senders share (rt-tests'
    // senders share one context). Declared before `team`: it outlives the
    // threads that read it.
    let out_fds: Vec<Vec<RawFd>> = pairs
        .chunks((p.fds as usize).max(1))
        .map(|g| g.iter().map(|pair| pair.w.as_raw_fd()).collect())
        .collect();
    let mut team = Team {
        shared,
        threads: Vec::new(),
        bodies: Vec::new(),
    };
    team.spawn_all(p, pairs, &out_fds, bufs, slots, ids)?;
    let _fifo = fifo(p)?;
    let total = p.total_workers()?;
    wait_ready(&fds.ready.r, fds.done_r, total, shared, slots, p)?;
    let start = Stamp::start();
    sys::write_byte(fds.wake.w.as_raw_fd(), b'*')
        .map_err(|e| setup("Writing to start senders", &e))?;
    wait_done(fds.done_r, shared, slots, p)?;
    team.join_all();
    Ok((start, Stamp::end()))
}

/// The barrier fds every worker gets.
#[derive(Clone, Copy)]
struct Ids {
    ready_out: RawFd,
    wakefd: RawFd,
}

/// All groups' pairs up front (rt-tests never closes them in thread mode;
/// we close them when the round ends).
fn make_pairs(p: &Params) -> Result<Vec<Pair>, Error> {
    let n = p.groups as usize * p.fds as usize;
    let mut pairs = Vec::new();
    pairs.try_reserve_exact(n).map_err(|_| Error::Setup {
        what: "main:malloc()",
        errno: libc::ENOMEM,
    })?;
    for _ in 0..n {
        pairs.push(fdpair(p.transport)?);
    }
    Ok(pairs)
}

/// One `datasize` buffer per worker (each rt-tests thread has its own).
fn make_buffers(p: &Params, total: usize) -> Result<Vec<sys::MsgBuf>, Error> {
    let mut bufs = Vec::new();
    bufs.try_reserve_exact(total).map_err(|_| Error::Alloc {
        bytes: u64::from(p.datasize),
    })?;
    for _ in 0..total {
        bufs.push(sys::try_buffer(p.datasize as usize)?);
    }
    Ok(bufs)
}

/// The running workers. Dropping it abandons the round if workers are
/// still running, then joins them all: no error path leaves a thread
/// behind, and no thread outlives the data it borrows (`'a`).
struct Team<'a> {
    shared: &'a Shared,
    threads: Vec<libc::pthread_t>,
    /// What each thread runs, owned here and freed by the main thread
    /// after the join: a worker thread neither allocates nor frees, so
    /// it never makes glibc create a malloc arena for it (an mmap of
    /// 128 MiB, two munmaps and an mprotect under the process's mmap
    /// lock, which would also delay that thread's "ready").
    /// (Boxed twice: a thread gets a thin pointer to the inner box, which
    /// stays put when this Vec grows; a `dyn` body's own pointer is fat.)
    #[allow(clippy::vec_box)]
    bodies: Vec<Box<Box<Body<'a>>>>,
}

/// What a worker thread runs (once).
type Body<'a> = dyn FnMut() + Send + 'a;

impl<'a> Team<'a> {
    /// Spawns every worker with SIGINT/SIGTERM/SIGHUP blocked (they
    /// inherit the mask), so those signals reach the main thread.
    fn spawn_all(
        &mut self,
        p: &'a Params,
        pairs: &'a [Pair],
        out_fds: &'a [Vec<RawFd>],
        bufs: Vec<sys::MsgBuf>,
        slots: &'a Slots,
        ids: Ids,
    ) -> Result<(), Error> {
        let _mask = BlockStopSignals::new();
        let fds = p.fds as usize;
        let packets = u64::from(p.fds) * u64::from(p.loops);
        let mut bufs = bufs.into_iter();
        let mut next_buf = || {
            bufs.next().ok_or(Error::Alloc {
                bytes: u64::from(p.datasize),
            })
        };
        for (g, (group, group_out)) in pairs.chunks(fds.max(1)).zip(out_fds).enumerate() {
            let base = g * 2 * fds;
            for (i, pair) in group.iter().enumerate() {
                let job = Job::Receiver {
                    in_fd: pair.r.as_raw_fd(),
                    packets,
                };
                self.spawn_worker(base + i, job, next_buf()?, slots, ids, p.loops)?;
            }
            for i in 0..fds {
                let job = Job::Sender { out_fds: group_out };
                self.spawn_worker(base + fds + i, job, next_buf()?, slots, ids, p.loops)?;
            }
            if stop::stop_requested() {
                return Err(Error::Interrupted);
            }
        }
        Ok(())
    }

    fn spawn_worker(
        &mut self,
        index: usize,
        job: Job<'a>,
        mut buf: sys::MsgBuf,
        slots: &'a Slots,
        ids: Ids,
        loops: u32,
    ) -> Result<(), Error> {
        let shared = self.shared;
        let mut job = Some(job);
        self.spawn(Box::new(move || {
            let Some(job) = job.take() else { return };
            let slot = slots.get(index);
            let ctx = Ctx {
                ready_out: ids.ready_out,
                wakefd: ids.wakefd,
                loops,
                buf: buf.as_mut_slice(),
                slot,
                abort: Some(&shared.abort),
            };
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(job, ctx)))
                .unwrap_or(false);
            finish(shared, slot, ok);
        }))
    }

    /// pthread_create with a PTHREAD_STACK_MIN stack, as rt-tests does.
    /// Raw pthreads rather than std::thread: std gives every thread a
    /// signal stack that is mmap'ed at start and munmap'ed at exit, and
    /// thread exit is inside the timed window.
    fn spawn(&mut self, body: Box<Body<'a>>) -> Result<(), Error> {
        self.threads.reserve(1);
        self.bodies.reserve(1);
        self.bodies.push(Box::new(body));
        let arg: *mut Box<Body<'a>> = &mut **self.bodies.last_mut().expect("just pushed");
        self.shared.remaining.fetch_add(1, Ordering::SeqCst);
        // SAFETY: attr is initialised before use and destroyed after;
        // `arg` is handed to the new thread, or reclaimed if none starts.
        let err = unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            libc::pthread_attr_init(&mut attr);
            libc::pthread_attr_setstacksize(&mut attr, STACK);
            let mut t: libc::pthread_t = 0;
            let err = libc::pthread_create(&mut t, &attr, trampoline, arg.cast());
            libc::pthread_attr_destroy(&mut attr);
            if err == 0 {
                self.threads.push(t);
            } else {
                self.bodies.pop();
            }
            err
        };
        if err != 0 {
            self.shared.remaining.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::Setup {
                what: "pthread_create failed()",
                errno: err,
            });
        }
        Ok(())
    }

    /// Joins every worker (all have returned, or are about to).
    fn join_all(&mut self) {
        for t in self.threads.drain(..) {
            // SAFETY: a thread we created and have not joined.
            unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
        }
    }
}

/// Thread entry: runs the body; a panic must not unwind into C.
extern "C" fn trampoline(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `arg` is the body `Team::spawn` made for this thread alone
    // (no other thread touches it); `Team` frees it only after joining
    // this thread, so it outlives every borrow it holds.
    let body: &mut Box<Body<'static>> = unsafe { &mut *arg.cast::<Box<Body<'static>>>() };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    std::ptr::null_mut()
}

impl Drop for Team<'_> {
    fn drop(&mut self) {
        if self.shared.remaining.load(Ordering::SeqCst) > 0 {
            self.shared.abort.store(true, Ordering::SeqCst);
        }
        // Repeat: a worker may check the flag just before it blocks.
        while self.shared.remaining.load(Ordering::SeqCst) > 0 {
            for &t in &self.threads {
                // SAFETY: none of these threads has been joined yet.
                unsafe { libc::pthread_kill(t, stop::NUDGE) };
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.join_all();
    }
}

/// A worker's epilogue: its own context switches, then the count-down.
fn finish(shared: &Shared, slot: &crate::shared::Slot, ok: bool) {
    // SAFETY: rusage is plain data; RUSAGE_THREAD is this thread's own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    slot.set_ctxsw(ru.ru_nvcsw, ru.ru_nivcsw);
    if !ok {
        shared.failed.store(true, Ordering::SeqCst);
        shared.poke();
    }
    if shared.remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
        shared.poke();
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread until dropped.
struct BlockStopSignals {
    old: libc::sigset_t,
}

impl BlockStopSignals {
    fn new() -> BlockStopSignals {
        // SAFETY: sigset manipulation on locals; pthread_sigmask on self.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, sig);
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            BlockStopSignals { old }
        }
    }
}

impl Drop for BlockStopSignals {
    fn drop(&mut self) {
        // SAFETY: restoring the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Reads one ready byte per worker, watching the done pipe for a failure
/// or a stop request meanwhile.
fn wait_ready(
    ready_r: &OwnedFd,
    done_r: &OwnedFd,
    total: usize,
    shared: &Shared,
    slots: &Slots,
    p: &Params,
) -> Result<(), Error> {
    let mut got = 0;
    while got < total {
        let mut pfds = [
            libc::pollfd {
                fd: ready_r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: done_r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), 2, -1) };
        check_abandon(shared, slots, p)?;
        if n <= 0 || pfds[0].revents == 0 {
            if pfds[1].revents != 0 {
                let _ = sys::read_byte(done_r.as_raw_fd(), || true);
            }
            continue;
        }
        read_ready_byte(ready_r.as_raw_fd(), || Ok(()))?;
        got += 1;
    }
    Ok(())
}

/// Waits on the done pipe until every worker has returned.
fn wait_done(done_r: &OwnedFd, shared: &Shared, slots: &Slots, p: &Params) -> Result<(), Error> {
    while shared.remaining.load(Ordering::SeqCst) > 0 {
        check_abandon(shared, slots, p)?;
        match sys::read_byte(done_r.as_raw_fd(), || true) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(setup("read", &e)),
        }
    }
    check_abandon(shared, slots, p)
}

/// Whether the round must be abandoned: a stop request, or a failure (the
/// first failing worker in creation order is named).
fn check_abandon(shared: &Shared, slots: &Slots, p: &Params) -> Result<(), Error> {
    if stop::stop_requested() {
        return Err(Error::Interrupted);
    }
    if !shared.failed.load(Ordering::SeqCst) {
        return Ok(());
    }
    let total = p.total_workers()?;
    // Name the root cause, not a victim. A worker still blocked in its
    // write or read shows its current stage with errno 0; a sender whose
    // receiver died gets EPIPE/ECONNRESET and a receiver whose senders died
    // gets end of file, possibly before the failing worker records its own
    // error. So: a genuine error first, then a consequence, then whoever is
    // not done.
    let outcome = |i| slots.get(i).outcome();
    let is_consequence = |stage, errno| {
        stage == Stage::ReceiverEof || errno == libc::EPIPE || errno == libc::ECONNRESET
    };
    let pick = |accept: &dyn Fn(Stage, i32) -> bool| {
        (0..total).find_map(|i| match outcome(i) {
            (stage, errno) if accept(stage, errno) => Some((i, stage, errno)),
            _ => None,
        })
    };
    let genuine = |stage, errno| errno != 0 && !is_consequence(stage, errno);
    // The victim may have noticed first: give the cause a moment to record
    // its own error (it is running or about to), unless all are done.
    let deadline = std::time::Instant::now() + Duration::from_millis(200);
    while pick(&genuine).is_none()
        && shared.remaining.load(Ordering::SeqCst) > 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let culprit = pick(&genuine)
        .or_else(|| pick(&|stage, errno| errno != 0 || stage == Stage::ReceiverEof))
        .or_else(|| pick(&|stage, _| !matches!(stage, Stage::Done | Stage::Aborted)));
    let (index, stage, errno) = culprit.unwrap_or((0, Stage::Aborted, 0));
    Err(Error::Worker {
        worker: WorkerId::at(index, p.fds, None),
        cause: WorkerCause::Failed { stage, errno },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Mode, Role, Transport};

    /// A receiver whose read end is really a write-only fd fails with
    /// EBADF; its senders then block on a full socket until the round is
    /// abandoned (the nudge path), and the error names the receiver.
    #[test]
    fn a_failing_thread_is_named_and_the_rest_are_stopped() {
        let p = Params {
            groups: 1,
            fds: 2,
            loops: 100_000,
            datasize: 1000,
            mode: Mode::Thread,
            transport: Transport::Socket,
            fifo: false,
        };
        let pairs = make_pairs(&p).expect("pairs");
        let (_keep, write_only) = pipe_ends();
        // SAFETY: replacing receiver 1's read end with a write-only fd.
        unsafe { libc::dup2(write_only, pairs[1].r.as_raw_fd()) };
        match round_with(&p, pairs) {
            Err(Error::Worker { worker, cause }) => {
                assert_eq!(
                    (worker.group, worker.role, worker.nth),
                    (0, Role::Receiver, 1),
                    "{cause:?}"
                );
                assert_eq!(
                    cause,
                    WorkerCause::Failed {
                        stage: Stage::ReceiverRead,
                        errno: libc::EBADF
                    }
                );
            }
            other => panic!("expected a worker failure, got {other:?}"),
        }
    }

    fn pipe_ends() -> (OwnedFd, RawFd) {
        let pair = fdpair(Transport::Pipe).expect("pipe");
        let w = pair.w.as_raw_fd();
        std::mem::forget(pair.w); // closed with the process; the test is short
        (pair.r, w)
    }
}
