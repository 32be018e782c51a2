//! Process mode (`-P`, the default): one fork()ed child per worker.
//!
//! The fd choreography is rt-tests' `group()`: per receiver, make a pair,
//! fork the receiver (which closes its copy of the write end), keep the
//! write end, close the read end; then fork the senders, which inherit all
//! write ends; then close the write ends in the parent.
//!
//! Unlike rt-tests, the workers live in a process group of their own, so
//! the parent can wait for "any of *our* workers" (wait4 on `-pgid`: exact
//! for a library caller with other children), kill them all at once, and
//! take each one's rusage; and each child asks for SIGKILL when its parent
//! dies (PR_SET_PDEATHSIG), so even a SIGKILLed parent leaves no orphans.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::fdpair::{fdpair, Pair};
use crate::shared::Slots;
use crate::stop;
use crate::sys::{self, SchedGuard};
use crate::worker::{work, Ctx, Job};
use crate::{collect, Error, Params, RoundResult, Stamp, WorkerCause, WorkerId};

/// Runs one process-mode round.
pub(crate) fn round(p: &Params) -> Result<RoundResult, Error> {
    let total = p.total_workers()?;
    let slots = Slots::new(total).map_err(|e| setup("mmap", &e))?;
    let Pair {
        r: ready_r,
        w: ready_w,
    } = fdpair(p.transport)?;
    let wake = fdpair(p.transport)?;
    let mut bufs = Buffers {
        send: sys::try_buffer(p.datasize as usize)?,
        recv: sys::try_buffer(p.datasize as usize)?,
    };
    let mut kids = Children::new(p.fds);
    let fds = Fds {
        ready_out: ready_w.as_raw_fd(),
        wakefd: wake.r.as_raw_fd(),
    };
    for g in 0..p.groups {
        spawn_group(p, g, &mut kids, &slots, fds, &mut bufs)?;
        if stop::stop_requested() {
            return Err(Error::Interrupted);
        }
    }
    // Only the workers hold the ready write end from here on, so if they
    // all die the ready loop sees end of file instead of hanging.
    drop(ready_w);
    let _fifo = fifo(p)?;
    wait_ready(&ready_r, &mut kids, &slots, total)?;

    let start = Stamp::start();
    sys::write_byte(wake.w.as_raw_fd(), b'*').map_err(|e| setup("Writing to start senders", &e))?;
    kids.reap_all(&slots)?;
    let end = Stamp::end();
    collect(p, &slots, start, end)
}

/// `-F`: rt-tests switches main to SCHED_FIFO 1 after creating the workers
/// (so they stay SCHED_OTHER); the guard switches back after the round so
/// that the next round's workers do not inherit FIFO.
pub(crate) fn fifo(p: &Params) -> Result<Option<SchedGuard>, Error> {
    if !p.fifo {
        return Ok(None);
    }
    SchedGuard::fifo().map(Some).map_err(|e| Error::Fifo {
        errno: e.raw_os_error().unwrap_or(0),
    })
}

pub(crate) fn setup(what: &'static str, e: &std::io::Error) -> Error {
    Error::Setup {
        what,
        errno: e.raw_os_error().unwrap_or(0),
    }
}

/// Reads one worker's ready byte from `ready_r` (found readable), in
/// either mode. At end of file `why_ended` first names a worker that died
/// when it can (process mode); otherwise the pipe's end is reported as
/// rt-tests reports a failed read, "Reading for readyfds".
pub(crate) fn read_ready_byte(
    ready_r: RawFd,
    why_ended: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    match sys::read_byte(ready_r, stop::stop_requested) {
        Ok(true) => Ok(()),
        Ok(false) => {
            why_ended()?;
            Err(setup(
                "Reading for readyfds",
                &std::io::Error::from_raw_os_error(libc::EPIPE),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(Error::Interrupted),
        Err(e) => Err(setup("Reading for readyfds", &e)),
    }
}

/// The message buffers, allocated before any fork; each child writes to
/// its own copy-on-write copy, as rt-tests' children use their own stacks
/// (copied before the child says ready: `worker::map_in`).
struct Buffers {
    send: sys::MsgBuf,
    recv: sys::MsgBuf,
}

/// The barrier fds every worker gets.
#[derive(Clone, Copy)]
struct Fds {
    ready_out: RawFd,
    wakefd: RawFd,
}

/// Forks one group: its receivers, then its senders.
fn spawn_group(
    p: &Params,
    g: u32,
    kids: &mut Children,
    slots: &Slots,
    fds: Fds,
    bufs: &mut Buffers,
) -> Result<(), Error> {
    let base = g as usize * 2 * p.fds as usize;
    let packets = u64::from(p.fds) * u64::from(p.loops);
    let mut out: Vec<OwnedFd> = Vec::new();
    for i in 0..p.fds as usize {
        let pair = fdpair(p.transport)?;
        let (in_fd, own_w) = (pair.r.as_raw_fd(), pair.w.as_raw_fd());
        let slot = slots.get(base + i);
        let buf = bufs.recv.as_mut_slice();
        kids.fork(base + i, || {
            // SAFETY: the child's copy of its own write end, unused by it.
            unsafe { libc::close(own_w) };
            let ctx = ctx(fds, p.loops, buf, slot);
            work(Job::Receiver { in_fd, packets }, ctx)
        })?;
        out.push(pair.w);
        drop(pair.r);
    }
    let out_fds: Vec<RawFd> = out.iter().map(|fd| fd.as_raw_fd()).collect();
    for i in 0..p.fds as usize {
        let idx = base + p.fds as usize + i;
        let slot = slots.get(idx);
        let buf = bufs.send.as_mut_slice();
        let out_fds = &out_fds;
        kids.fork(idx, || {
            work(Job::Sender { out_fds }, ctx(fds, p.loops, buf, slot))
        })?;
    }
    Ok(())
}

fn ctx<'a>(fds: Fds, loops: u32, buf: &'a mut [u8], slot: &'a crate::shared::Slot) -> Ctx<'a> {
    Ctx {
        ready_out: fds.ready_out,
        wakefd: fds.wakefd,
        loops,
        buf,
        slot,
        abort: None,
    }
}

/// Reads one ready byte per worker. Polls with a timeout so that a worker
/// that died before saying "ready" is noticed (rt-tests waits forever).
fn wait_ready(
    ready_r: &OwnedFd,
    kids: &mut Children,
    slots: &Slots,
    total: usize,
) -> Result<(), Error> {
    let fd = ready_r.as_raw_fd();
    let mut got = 0;
    while got < total {
        if stop::stop_requested() {
            return Err(Error::Interrupted);
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 100) };
        if n == 0 {
            kids.check_early_exit(slots)?;
            continue;
        }
        if n < 0 {
            continue; // EINTR: the stop check above decides.
        }
        read_ready_byte(fd, || kids.check_early_exit(slots))?;
        got += 1;
    }
    Ok(())
}

/// The forked workers of one round. Dropping it kills and reaps whatever
/// is still running, so no error path can leave an orphan.
struct Children {
    fds: u32,
    parent: libc::pid_t,
    pgid: libc::pid_t,
    /// pid → creation index.
    index_of: HashMap<libc::pid_t, usize>,
    /// Unreaped pids.
    live: Vec<libc::pid_t>,
    /// How the workers end.
    exit: WorkerExit,
}

/// How a worker process ends.
///
/// rt-tests' workers return into `exit(0)` (`exit(1)` from `barf()`): the C
/// library's exit handlers, its stdio cleanup and every loaded object's
/// destructors run, and their first writes to pages still shared
/// copy-on-write with the parent fault — about ten page faults per worker,
/// all before the worker can be reaped, so inside the timed window. Ending
/// with `_exit` instead made a default `-p` round about 5 % shorter than
/// rt-tests' (docs/hackbench.md, "Differences from rt-tests").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorkerExit {
    /// exit(3), as rt-tests' workers end.
    Libc,
    /// _exit(2): nothing but the kernel's teardown.
    Immediate,
}

impl WorkerExit {
    /// exit(3) when the process has no other thread (xrun-hackbench
    /// always); otherwise `_exit`, because in the child of a multi-threaded
    /// process POSIX allows only async-signal-safe calls, and exit(3) is
    /// not one (a library caller or a test harness gets shorter rounds, by
    /// the C runtime's exit cost).
    fn for_this_process() -> WorkerExit {
        WorkerExit::for_threads(sys::thread_count())
    }

    fn for_threads(threads: Option<u32>) -> WorkerExit {
        if threads == Some(1) {
            WorkerExit::Libc
        } else {
            WorkerExit::Immediate
        }
    }

    /// Ends the calling worker process.
    fn exit(self, code: libc::c_int) -> ! {
        match self {
            // SAFETY: the process forked from a single thread, so no lock
            // of the C library can be held by a thread that does not exist
            // here; the exit handlers that run are the ones rt-tests'
            // workers run too, plus those of our own binary (none write
            // to shared state).
            WorkerExit::Libc => unsafe { libc::exit(code) },
            // SAFETY: _exit is async-signal-safe.
            WorkerExit::Immediate => unsafe { libc::_exit(code) },
        }
    }
}

impl Children {
    fn new(fds: u32) -> Children {
        Children {
            fds,
            // SAFETY: getpid cannot fail.
            parent: unsafe { libc::getpid() },
            pgid: 0,
            index_of: HashMap::new(),
            live: Vec::new(),
            exit: WorkerExit::for_this_process(),
        }
    }

    /// Forks worker `index`, which runs `body` and exits 0 if it returned
    /// true, 1 otherwise (the details are in its slot), as [`WorkerExit`]
    /// says.
    fn fork(&mut self, index: usize, body: impl FnOnce() -> bool) -> Result<(), Error> {
        self.index_of.reserve(1);
        self.live.reserve(1);
        // SAFETY: the child only makes async-signal-safe calls and atomic
        // stores before it exits (see worker.rs and WorkerExit); it never
        // returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(setup("fork()", &std::io::Error::last_os_error()));
        }
        if pid == 0 {
            child_init(self.pgid, self.parent);
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(false);
            self.exit.exit(if ok { 0 } else { 1 });
        }
        let pgid = if self.pgid == 0 { pid } else { self.pgid };
        // SAFETY: our own child; both sides call it to avoid the race.
        unsafe { libc::setpgid(pid, pgid) };
        if self.pgid == 0 {
            self.pgid = pid;
            stop::set_worker_pgid(pid);
        }
        self.index_of.insert(pid, index);
        self.live.push(pid);
        Ok(())
    }

    /// Reaps every worker (wait4 on our group, in exit order as rt-tests'
    /// wait() does), storing each one's context switches in its slot. The
    /// first failure SIGTERMs the rest (which would otherwise block
    /// forever); once all are reaped, the likeliest root cause is returned.
    fn reap_all(&mut self, slots: &Slots) -> Result<(), Error> {
        self.reap_all_from(slots, None)
    }

    fn reap_all_from(&mut self, slots: &Slots, mut culprit: Option<Error>) -> Result<(), Error> {
        let mut culled = culprit.is_some();
        while !self.live.is_empty() {
            if self.live.len() == 1 {
                // The group id may be reused once its last member is
                // reaped: stop the signal handler from killing it.
                stop::set_worker_pgid(0);
            }
            match self.wait_one(slots, 0) {
                Ok(Some(Some(e))) => {
                    if !culled {
                        culled = true;
                        self.kill_all(libc::SIGTERM);
                    }
                    culprit = likelier(culprit, e);
                }
                Ok(_) => {}
                Err(()) => {
                    // EINTR: a stop request; the handler already killed
                    // the group, but the group may not be complete.
                    if stop::stop_requested() {
                        self.kill_all(libc::SIGKILL);
                    }
                }
            }
        }
        if stop::stop_requested() {
            return Err(Error::Interrupted);
        }
        culprit.map_or(Ok(()), Err)
    }

    /// Before the start: has any worker already exited? If so, that is a
    /// failure: kill and reap the rest and report it.
    fn check_early_exit(&mut self, slots: &Slots) -> Result<(), Error> {
        if let Ok(Some(found)) = self.wait_one(slots, libc::WNOHANG) {
            self.kill_all(libc::SIGTERM);
            let found = found.unwrap_or(Error::Setup {
                what: "Reading for readyfds",
                errno: libc::ECHILD,
            });
            self.reap_all_from(slots, Some(found))?;
        }
        Ok(())
    }

    /// One wait4 on our group: `Ok(None)` nothing reaped (WNOHANG),
    /// `Ok(Some(err))` reaped one (with its failure, if any), `Err(())` EINTR.
    fn wait_one(&mut self, slots: &Slots, flags: libc::c_int) -> Result<Option<Option<Error>>, ()> {
        let mut status = 0;
        // SAFETY: rusage is plain data.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers; -pgid is our workers' group.
        let pid = unsafe { libc::wait4(-self.pgid, &mut status, flags, &mut ru) };
        if pid == 0 {
            return Ok(None);
        }
        if pid < 0 {
            if sys::errno() == libc::EINTR {
                return Err(());
            }
            // ECHILD: nothing left to reap (cannot happen while `live` is
            // accurate); forget them rather than loop.
            self.live.clear();
            return Ok(None);
        }
        self.live.retain(|&p| p != pid);
        let Some(&index) = self.index_of.get(&pid) else {
            return Ok(Some(None));
        };
        let slot = slots.get(index);
        slot.set_ctxsw(ru.ru_nvcsw, ru.ru_nivcsw);
        Ok(Some(self.failure(index, pid, status, slot)))
    }

    /// The error for a worker that did not exit 0, if it did not.
    fn failure(
        &self,
        index: usize,
        pid: i32,
        status: i32,
        slot: &crate::shared::Slot,
    ) -> Option<Error> {
        let cause = if libc::WIFSIGNALED(status) {
            WorkerCause::Signaled(libc::WTERMSIG(status))
        } else if libc::WEXITSTATUS(status) == 0 {
            return None;
        } else {
            match slot.outcome() {
                (crate::Stage::Done, _) => WorkerCause::Exited(libc::WEXITSTATUS(status)),
                (stage, errno) => WorkerCause::Failed { stage, errno },
            }
        };
        Some(Error::Worker {
            worker: WorkerId::at(index, self.fds, Some(pid)),
            cause,
        })
    }

    /// Sends `sig` to every unreaped worker (by pid: always ours).
    fn kill_all(&self, sig: libc::c_int) {
        for &pid in &self.live {
            // SAFETY: an unreaped child of ours.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        stop::set_worker_pgid(0);
        self.kill_all(libc::SIGKILL);
        for pid in std::mem::take(&mut self.live) {
            let mut status = 0;
            // SAFETY: reaping our own child; retried on EINTR.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && sys::errno() == libc::EINTR {
            }
        }
    }
}

/// Of two worker failures, the likelier root cause. One dying worker makes
/// its peers fail in turn (EPIPE, ECONNRESET, end of stream), sometimes
/// before the dead one is reaped; our own SIGTERM to the rest (sent once
/// the first failure is seen) is never the cause. Ties go to the earlier.
fn likelier(a: Option<Error>, b: Error) -> Option<Error> {
    match a {
        Some(a) if rank(&a) <= rank(&b) => Some(a),
        _ => Some(b),
    }
}

/// Lower is likelier to be the root cause.
fn rank(e: &Error) -> u8 {
    let peer = |errno: i32| matches!(errno, libc::EPIPE | libc::ECONNRESET);
    match e {
        Error::Worker { cause, .. } => match cause {
            WorkerCause::Signaled(libc::SIGTERM) => 4,
            WorkerCause::Signaled(libc::SIGPIPE) => 2,
            WorkerCause::Signaled(_) => 0,
            WorkerCause::Failed {
                stage: crate::Stage::ReceiverEof,
                ..
            } => 2,
            WorkerCause::Failed { errno, .. } if peer(*errno) => 2,
            _ => 1,
        },
        _ => 1,
    }
}

/// First thing in a child: join the workers' group, die with the parent,
/// and take default SIGINT/SIGTERM (rt-tests' `reset_worker_signals`).
fn child_init(pgid: libc::pid_t, parent: libc::pid_t) {
    // SAFETY: async-signal-safe calls on the calling process only.
    unsafe {
        libc::setpgid(0, pgid);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1); // the parent died before prctl took effect
        }
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stage;

    fn worker(cause: WorkerCause) -> Error {
        Error::Worker {
            worker: WorkerId::at(0, 1, Some(1)),
            cause,
        }
    }

    #[test]
    fn workers_end_with_exit_only_in_a_single_threaded_process() {
        assert_eq!(WorkerExit::for_threads(Some(1)), WorkerExit::Libc);
        assert_eq!(WorkerExit::for_threads(Some(2)), WorkerExit::Immediate);
        assert_eq!(WorkerExit::for_threads(None), WorkerExit::Immediate);
        // Whatever the harness does, this process has two threads here.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        assert_eq!(WorkerExit::for_this_process(), WorkerExit::Immediate);
        drop(tx);
        let _ = other.join();
    }

    #[test]
    fn a_killed_worker_outranks_the_peers_it_broke() {
        let peer = worker(WorkerCause::Failed {
            stage: Stage::SenderWrite,
            errno: libc::ECONNRESET,
        });
        let killed = worker(WorkerCause::Signaled(libc::SIGKILL));
        let culled = worker(WorkerCause::Signaled(libc::SIGTERM));
        let got = likelier(likelier(Some(peer), killed), culled);
        assert!(matches!(
            got,
            Some(Error::Worker {
                cause: WorkerCause::Signaled(libc::SIGKILL),
                ..
            })
        ));
        let eof = worker(WorkerCause::Failed {
            stage: Stage::ReceiverEof,
            errno: 0,
        });
        let own = worker(WorkerCause::Failed {
            stage: Stage::SenderWrite,
            errno: libc::EBADF,
        });
        assert_eq!(rank(&own), 1);
        assert!(matches!(
            likelier(Some(eof), own),
            Some(Error::Worker {
                cause: WorkerCause::Failed {
                    errno: libc::EBADF,
                    ..
                },
                ..
            })
        ));
    }
}
