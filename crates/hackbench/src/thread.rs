//! Thread mode (`-T`): one thread per worker, all fds shared.
//!
//! rt-tests gives each thread a `PTHREAD_STACK_MIN` stack and puts the
//! `datasize` message buffer on it, which is why `-T -s 65536` segfaults.
//! Here each worker's buffer is a heap allocation made before the round
//! starts, so the stack only holds the loop and stays small.
//!
//! The main thread does not join in a blocking `pthread_join` (which no
//! signal interrupts): it blocks on a "done" pipe that the last worker to
//! finish, a failing worker, or [`stop::request_stop`] writes to. Then it
//! joins. To abandon a round, it sets the abort flag and interrupts every
//! blocked worker with [`stop::NUDGE`] until all have returned.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;
use std::thread::ScopedJoinHandle;
use std::time::Duration;

use crate::fdpair::{fdpair, Pair};
use crate::process::{fifo, setup};
use crate::shared::{Slots, Stage};
use crate::stop;
use crate::sys;
use crate::worker::{work, Ctx, Job};
use crate::{collect, Error, Params, RoundResult, Stamp, WorkerCause, WorkerId};

/// Worker stack size: ample for the loops (the buffers are on the heap)
/// while staying near rt-tests' tiny stacks.
const STACK: usize = 64 * 1024;

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
    /// Each worker's pthread_t, stored by the worker itself as its first
    /// act (0 until then), for [`stop::NUDGE`].
    tids: Vec<AtomicU64>,
}

impl Shared {
    fn poke(&self) {
        // Best effort: the main thread also rechecks the counters.
        let _ = sys::write_byte(self.done_w, b'.');
    }
}

/// Runs one thread-mode round.
pub(crate) fn round(p: &Params) -> Result<RoundResult, Error> {
    static NUDGE: Once = Once::new();
    let mut nudge_result = Ok(());
    NUDGE.call_once(|| nudge_result = stop::install_nudge_handler());
    nudge_result.map_err(|e| setup("sigaction", &e))?;

    let total = p.total_workers()?;
    let slots = Slots::new(total).map_err(|e| setup("mmap", &e))?;
    let ready = fdpair(p.transport)?;
    let wake = fdpair(p.transport)?;
    let done = fdpair(crate::Transport::Pipe)?;
    let pairs = make_pairs(p)?;
    let bufs = make_buffers(p, total)?;
    let shared = Shared {
        abort: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        remaining: AtomicUsize::new(0),
        done_w: done.w.as_raw_fd(),
        tids: (0..total).map(|_| AtomicU64::new(0)).collect(),
    };
    stop::set_wake_fd(shared.done_w);
    let result = std::thread::scope(|s| {
        let mut team = Team {
            shared: &shared,
            handles: Vec::new(),
        };
        let ids = Ids {
            ready_out: ready.w.as_raw_fd(),
            wakefd: wake.r.as_raw_fd(),
        };
        team.spawn_all(s, p, &pairs, bufs, &slots, ids)?;
        let _fifo = fifo(p)?;
        wait_ready(&ready.r, &done.r, total, &shared, &slots, p)?;
        let start = Stamp::start();
        sys::write_byte(wake.w.as_raw_fd(), b'*')
            .map_err(|e| setup("Writing to start senders", &e))?;
        wait_done(&done.r, &shared, &slots, p)?;
        team.join_all();
        Ok((start, Stamp::end()))
    });
    stop::set_wake_fd(-1);
    let (start, end) = result?;
    collect(p, &slots, start, end)
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

/// The running workers. Dropping it with workers still running abandons
/// the round: no error path leaves a thread blocked (the scope would then
/// wait for it forever).
struct Team<'scope, 'env> {
    shared: &'env Shared,
    handles: Vec<ScopedJoinHandle<'scope, ()>>,
}

impl<'scope, 'env> Team<'scope, 'env> {
    /// Spawns every worker with SIGINT/SIGTERM/SIGHUP blocked (they
    /// inherit the mask), so those signals reach the main thread.
    fn spawn_all(
        &mut self,
        s: &'scope std::thread::Scope<'scope, 'env>,
        p: &'env Params,
        pairs: &'env [Pair],
        bufs: Vec<sys::MsgBuf>,
        slots: &'env Slots,
        ids: Ids,
    ) -> Result<(), Error> {
        let _mask = BlockStopSignals::new();
        let fds = p.fds as usize;
        let mut bufs = bufs.into_iter();
        for (g, group) in pairs.chunks(fds.max(1)).enumerate() {
            let base = g * 2 * fds;
            let out_fds: &'env [Pair] = group;
            for (i, pair) in group.iter().enumerate() {
                let job =
                    WorkerJob::Receiver(pair.r.as_raw_fd(), u64::from(p.fds) * u64::from(p.loops));
                self.spawn(
                    s,
                    base + i,
                    job,
                    bufs.next().ok_or(Error::Alloc {
                        bytes: u64::from(p.datasize),
                    })?,
                    slots,
                    ids,
                    p.loops,
                )?;
            }
            for i in 0..fds {
                let job = WorkerJob::Sender(out_fds);
                self.spawn(
                    s,
                    base + fds + i,
                    job,
                    bufs.next().ok_or(Error::Alloc {
                        bytes: u64::from(p.datasize),
                    })?,
                    slots,
                    ids,
                    p.loops,
                )?;
            }
            if stop::stop_requested() {
                return Err(Error::Interrupted);
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &mut self,
        s: &'scope std::thread::Scope<'scope, 'env>,
        index: usize,
        job: WorkerJob<'env>,
        mut buf: sys::MsgBuf,
        slots: &'env Slots,
        ids: Ids,
        loops: u32,
    ) -> Result<(), Error> {
        self.handles.reserve(1);
        let shared = self.shared;
        shared.remaining.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn_scoped(s, move || {
                // SAFETY: pthread_self cannot fail.
                let me = unsafe { libc::pthread_self() };
                shared.tids[index].store(me as u64, Ordering::SeqCst);
                let slot = slots.get(index);
                let ctx = Ctx {
                    ready_out: ids.ready_out,
                    wakefd: ids.wakefd,
                    loops,
                    buf: buf.as_mut_slice(),
                    slot,
                    abort: Some(&shared.abort),
                };
                let out_fds: Vec<RawFd>;
                let job = match job {
                    WorkerJob::Receiver(in_fd, packets) => Job::Receiver { in_fd, packets },
                    WorkerJob::Sender(pairs) => {
                        out_fds = pairs.iter().map(|p| p.w.as_raw_fd()).collect();
                        Job::Sender { out_fds: &out_fds }
                    }
                };
                let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(job, ctx)))
                    .unwrap_or(false);
                finish(shared, slot, ok);
            });
        match spawned {
            Ok(h) => {
                self.handles.push(h);
                Ok(())
            }
            Err(e) => {
                shared.remaining.fetch_sub(1, Ordering::SeqCst);
                Err(setup("pthread_create failed()", &e))
            }
        }
    }

    /// Joins every worker; called once all have returned.
    fn join_all(&mut self) {
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Team<'_, '_> {
    fn drop(&mut self) {
        if self.shared.remaining.load(Ordering::SeqCst) == 0 {
            return;
        }
        self.shared.abort.store(true, Ordering::SeqCst);
        // Repeat: a worker may check the flag just before it blocks.
        while self.shared.remaining.load(Ordering::SeqCst) > 0 {
            for tid in &self.shared.tids {
                let t = tid.load(Ordering::SeqCst);
                if t != 0 {
                    // SAFETY: a thread of this scope, not joined yet (the
                    // scope joins after this drop).
                    unsafe { libc::pthread_kill(t as libc::pthread_t, stop::NUDGE) };
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A worker's job before it runs (the sender's fd list is built on its
/// own thread, as rt-tests' senders share one context).
enum WorkerJob<'a> {
    Receiver(RawFd, u64),
    Sender(&'a [Pair]),
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
        match sys::read_byte(ready_r.as_raw_fd(), stop::stop_requested) {
            Ok(true) => got += 1,
            Ok(false) => {
                return Err(setup(
                    "Reading for readyfds",
                    &std::io::Error::from_raw_os_error(libc::EPIPE),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                return Err(Error::Interrupted)
            }
            Err(e) => return Err(setup("Reading for readyfds", &e)),
        }
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
    let culprit = (0..total).find_map(|i| match slots.get(i).outcome() {
        (Stage::Done | Stage::Aborted, _) => None,
        (stage, errno) => Some((i, stage, errno)),
    });
    let (index, stage, errno) = culprit.unwrap_or((0, Stage::Aborted, 0));
    Err(Error::Worker {
        worker: WorkerId::at(index, p.fds, None),
        cause: WorkerCause::Failed { stage, errno },
    })
}
