//! A faithful reimplementation of rt-tests hackbench 2.x, the scheduler
//! load generator that kernel developers quote in scheduler threads.
//!
//! The load is rt-tests' exactly: `groups` groups of `fds` receivers and
//! `fds` senders; every sender writes `loops` messages of `datasize` bytes
//! to every receiver of its group over `socketpair(AF_UNIX, SOCK_STREAM)`,
//! `pipe()` or loopback TCP; workers are fork()ed processes or threads;
//! every worker writes a ready byte and polls a wake fd, and the clock runs
//! from just before the single wake byte until the last worker is reaped
//! (creating the workers is not timed).
//!
//! [`run_round`] runs one round; [`run_for`] runs rounds back to back.
//!
//! # Differences from rt-tests 2.4
//!
//! Only where rt-tests gets something wrong (command-line differences are
//! listed in [`cli`]):
//! * A worker that dies or fails makes the round fail, naming the worker
//!   and the likeliest root cause; rt-tests exits 0 (or spins forever on a
//!   receiver's end of file).
//! * Thread stacks do not hold the message buffer, so any `-s` works
//!   (rt-tests segfaults at `-T -s 65536`); stacks are still
//!   PTHREAD_STACK_MIN, as there.
//! * A stop request (SIGINT/SIGTERM through
//!   [`stop::install_signal_handlers`]) kills and reaps every worker, and
//!   process-mode workers also die with their parent (PR_SET_PDEATHSIG); an
//!   interrupted round prints no `Time:` (rt-tests prints the partial time)
//!   and counts for nothing.
//! * Workers that die before the start are noticed instead of waited for
//!   forever; resource errors (fds, fork, memory) reap what was created.
//! * A wall clock stepped backwards during a round reads as 0, not as a
//!   huge unsigned number.
//! * Between rounds of `--repeat`/`--duration`, `-F` is undone so that the
//!   next round's workers start SCHED_OTHER, as they do in a single run.
//!
//! The additional bookkeeping (each receiver's count, one per-thread
//! getrusage at a thread's end, one byte on a "done" pipe from the last
//! thread) costs a handful of syscalls per round against hundreds of
//! thousands of message transfers.

pub mod cli;
mod fdpair;
mod process;
pub mod rounds;
pub mod shared;
pub mod stop;
mod sys;
mod thread;
mod worker;

use std::time::{Duration, Instant};

pub use shared::Stage;
pub use sys::strerror;

/// Workers are processes or threads (`-P` / `-T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// fork()ed processes (the default).
    Process,
    /// POSIX threads.
    Thread,
}

/// What the messages travel over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `socketpair(AF_UNIX, SOCK_STREAM)` (the default).
    Socket,
    /// `pipe()` (`-p`).
    Pipe,
    /// A TCP connection on 127.0.0.1 (`-i`).
    Inet,
}

/// The load's parameters, named as rt-tests names them.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Groups (`-g`, default 10).
    pub groups: u32,
    /// Receivers per group, also senders per group (`-f`, default 20).
    pub fds: u32,
    /// Messages each sender sends to each receiver (`-l`, default 100).
    pub loops: u32,
    /// Bytes per message (`-s`, default 100).
    pub datasize: u32,
    /// Processes or threads.
    pub mode: Mode,
    /// Sockets, pipes or TCP.
    pub transport: Transport,
    /// Run the main thread SCHED_FIFO 1 once the workers exist (`-F`).
    pub fifo: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            groups: 10,
            fds: 20,
            loops: 100,
            datasize: 100,
            mode: Mode::Process,
            transport: Transport::Socket,
            fifo: false,
        }
    }
}

impl Params {
    /// Tasks (workers) per round: `groups × 2 × fds`.
    pub fn tasks(&self) -> u64 {
        u64::from(self.groups) * 2 * u64::from(self.fds)
    }

    /// Messages per round: `groups × fds² × loops`.
    pub fn messages(&self) -> u64 {
        u64::from(self.groups) * u64::from(self.fds) * u64::from(self.fds) * u64::from(self.loops)
    }

    /// Bytes per round: messages × datasize.
    pub fn bytes(&self) -> u64 {
        self.messages() * u64::from(self.datasize)
    }

    /// rt-tests' two banner lines, newline-terminated, computed as its
    /// `printf("%d", …)` of unsigned arithmetic does (wrapping to `int`).
    pub fn banner(&self) -> String {
        let fds2 = self.fds.wrapping_mul(2);
        format!(
            "Running in {} mode with {} groups using {} file descriptors each (== {} tasks)\n\
             Each sender will pass {} messages of {} bytes\n",
            match self.mode {
                Mode::Process => "process",
                Mode::Thread => "threaded",
            },
            self.groups as i32,
            fds2 as i32,
            self.groups.wrapping_mul(fds2) as i32,
            self.loops as i32,
            self.datasize as i32,
        )
    }

    /// Checks what the command line checks, for library callers.
    fn validate(&self) -> Result<(), Error> {
        let zero = [
            ("groups", self.groups),
            ("fds", self.fds),
            ("loops", self.loops),
            ("datasize", self.datasize),
        ]
        .into_iter()
        .find(|(_, v)| *v == 0 || *v > i32::MAX as u32);
        match zero {
            Some((name, _)) => Err(Error::InvalidParam { name }),
            None => Ok(()),
        }
    }

    /// Worker count as a usize, or an error if it cannot even be counted.
    fn total_workers(&self) -> Result<usize, Error> {
        usize::try_from(self.tasks()).map_err(|_| Error::Setup {
            what: "main:malloc()",
            errno: libc::ENOMEM,
        })
    }
}

/// Which half of a group a worker belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reads from one fd.
    Receiver,
    /// Writes to every receiver of its group.
    Sender,
}

/// Names a worker in error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerId {
    /// Position in creation order (receivers of a group, then its senders).
    pub index: usize,
    /// Its group.
    pub group: u32,
    /// Receiver or sender.
    pub role: Role,
    /// Its number among the receivers (or senders) of the group.
    pub nth: u32,
    /// Its pid, in process mode.
    pub pid: Option<i32>,
}

impl WorkerId {
    /// The worker at creation index `index` of a round with `fds` per group.
    fn at(index: usize, fds: u32, pid: Option<i32>) -> WorkerId {
        let per_group = 2 * fds as usize;
        let within = (index % per_group) as u32;
        let (role, nth) = if within < fds {
            (Role::Receiver, within)
        } else {
            (Role::Sender, within - fds)
        };
        WorkerId {
            index,
            group: (index / per_group) as u32,
            role,
            nth,
            pid,
        }
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = match self.role {
            Role::Receiver => "receiver",
            Role::Sender => "sender",
        };
        write!(
            f,
            "worker {} (group {} {role} {}",
            self.index, self.group, self.nth
        )?;
        if let Some(pid) = self.pid {
            write!(f, ", pid {pid}")?;
        }
        f.write_str(")")
    }
}

/// How a worker failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerCause {
    /// A call failed (rt-tests would `barf()`): where, and errno.
    Failed {
        /// The call.
        stage: Stage,
        /// Its errno (0 when none applies, e.g. end of stream).
        errno: i32,
    },
    /// The process was killed by this signal.
    Signaled(i32),
    /// The process exited with this unexpected status.
    Exited(i32),
}

impl std::fmt::Display for WorkerCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerCause::Failed { stage, errno: 0 } => write!(f, "failed: {}", stage.describe()),
            WorkerCause::Failed { stage, errno } => {
                write!(
                    f,
                    "failed: {} (error: {})",
                    stage.describe(),
                    strerror(*errno)
                )
            }
            WorkerCause::Signaled(sig) => {
                write!(f, "was killed by signal {sig} ({})", signame(*sig))
            }
            WorkerCause::Exited(code) => write!(f, "exited with status {code}"),
        }
    }
}

/// strsignal(3)'s description of `sig`.
fn signame(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local
    // string, copied at once.
    unsafe {
        let p = libc::strsignal(sig);
        if p.is_null() {
            return format!("signal {sig}");
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Why a round did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is 0 (or beyond `int`, which rt-tests cannot take).
    #[error("parameter {name} must be an integer in 1..=2147483647")]
    InvalidParam {
        /// The parameter.
        name: &'static str,
    },
    /// Setting up the round failed; `what` is rt-tests' wording.
    #[error("{what} (error: {})", strerror(*errno))]
    Setup {
        /// The call that failed, in rt-tests' words.
        what: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// A message buffer of `-s` bytes could not be allocated.
    #[error("cannot allocate a {bytes}-byte message buffer")]
    Alloc {
        /// The size asked for.
        bytes: u64,
    },
    /// `-F`: sched_setscheduler(SCHED_FIFO, 1) failed.
    #[error("can't change to fifo in main (error: {})", strerror(*errno))]
    Fifo {
        /// Its errno.
        errno: i32,
    },
    /// A worker failed or died; the round was abandoned.
    #[error("{worker} {cause}")]
    Worker {
        /// Which worker.
        worker: WorkerId,
        /// What happened to it.
        cause: WorkerCause,
    },
    /// Every worker finished, yet the counts are not what the load moves.
    #[error("moved {messages} messages ({bytes} bytes), expected {expected_messages} ({expected_bytes} bytes)")]
    Lost {
        /// Messages received.
        messages: u64,
        /// Bytes received.
        bytes: u64,
        /// Messages the load sends.
        expected_messages: u64,
        /// Bytes the load sends.
        expected_bytes: u64,
    },
    /// A stop was requested ([`stop::request_stop`]); every worker was
    /// killed and reaped.
    #[error("interrupted")]
    Interrupted,
}

/// One round's measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundResult {
    /// Wall-clock time as rt-tests measures it (`gettimeofday` difference),
    /// whole seconds.
    pub wall_sec: u64,
    /// Microseconds part of the wall-clock time.
    pub wall_usec: u64,
    /// The same window on CLOCK_MONOTONIC.
    pub elapsed: Duration,
    /// Messages the receivers read completely.
    pub messages: u64,
    /// Bytes the receivers read.
    pub bytes: u64,
    /// Voluntary context switches, summed over the workers (process mode:
    /// each worker's wait4() rusage; thread mode: each worker's
    /// RUSAGE_THREAD taken just before it returns). The main thread is not
    /// counted in either mode.
    pub voluntary_ctxsw: u64,
    /// Involuntary context switches, summed likewise.
    pub involuntary_ctxsw: u64,
}

impl RoundResult {
    /// rt-tests' result line, `Time: %lu.%03lu` with the milliseconds
    /// truncated (no newline).
    pub fn time_line(&self) -> String {
        format!("Time: {}.{:03}", self.wall_sec, self.wall_usec / 1000)
    }
}

/// A point in time on both clocks.
#[derive(Clone, Copy)]
struct Stamp {
    wall: (i64, i64),
    mono_ns: u128,
}

impl Stamp {
    /// Reads the wall clock first at the start and last at the end (see
    /// [`Stamp::end`]), so the monotonic window sits inside the wall one.
    fn start() -> Stamp {
        let wall = sys::gettimeofday();
        Stamp {
            wall,
            mono_ns: sys::monotonic_ns(),
        }
    }

    fn end() -> Stamp {
        let mono_ns = sys::monotonic_ns();
        Stamp {
            wall: sys::gettimeofday(),
            mono_ns,
        }
    }
}

/// Sums the slots into a result and checks the counts against the load.
fn collect(
    p: &Params,
    slots: &shared::Slots,
    start: Stamp,
    end: Stamp,
) -> Result<RoundResult, Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut r = RoundResult {
        wall_sec: 0,
        wall_usec: 0,
        elapsed: Duration::from_nanos(end.mono_ns.saturating_sub(start.mono_ns) as u64),
        messages: 0,
        bytes: 0,
        voluntary_ctxsw: 0,
        involuntary_ctxsw: 0,
    };
    // timersub(); a wall clock stepped backwards reads as 0, not as the
    // huge `%lu` of a negative number that rt-tests would print.
    let usec = (end.wall.0 - start.wall.0) * 1_000_000 + (end.wall.1 - start.wall.1);
    let usec = usec.max(0) as u64;
    (r.wall_sec, r.wall_usec) = (usec / 1_000_000, usec % 1_000_000);
    for i in 0..p.total_workers()? {
        let s = slots.get(i);
        r.voluntary_ctxsw += s.nvcsw.load(Relaxed);
        r.involuntary_ctxsw += s.nivcsw.load(Relaxed);
        if WorkerId::at(i, p.fds, None).role == Role::Receiver {
            r.messages += s.messages.load(Relaxed);
            r.bytes += s.bytes.load(Relaxed);
        }
    }
    if r.messages != p.messages() || r.bytes != p.bytes() {
        return Err(Error::Lost {
            messages: r.messages,
            bytes: r.bytes,
            expected_messages: p.messages(),
            expected_bytes: p.bytes(),
        });
    }
    Ok(r)
}

/// Runs one round: creates the workers (untimed), waits until all are
/// ready, wakes them, and times until the last one is reaped.
///
/// Call it from a thread that outlives the round (in process mode the
/// workers get SIGKILL when the thread that forked them exits).
pub fn run_round(params: &Params) -> Result<RoundResult, Error> {
    params.validate()?;
    if stop::stop_requested() {
        return Err(Error::Interrupted);
    }
    match params.mode {
        Mode::Process => process::round(params),
        Mode::Thread => thread::round(params),
    }
}

/// When [`run_for`] stops starting new rounds. With neither limit, one
/// round (plain hackbench). A round in progress when the duration runs out
/// is finished, not cut.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limit {
    /// At most this many rounds.
    pub rounds: Option<u64>,
    /// Start no round after this much time.
    pub duration: Option<Duration>,
}

/// Why [`run_for`] ended.
#[derive(Debug)]
pub enum Ended {
    /// The round limit was reached.
    Rounds,
    /// The duration ran out.
    Duration,
    /// A stop was requested (SIGINT/SIGTERM).
    Signal,
    /// A round failed.
    Failed(Error),
}

impl Ended {
    /// The report's word for it: `rounds`, `duration`, `signal` or `error`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Ended::Rounds => "rounds",
            Ended::Duration => "duration",
            Ended::Signal => "signal",
            Ended::Failed(_) => "error",
        }
    }
}

/// What [`run_for`] did: every completed round counted (a bounded,
/// evenly spread sample of them kept), and why it ended.
#[derive(Debug)]
pub struct RunSummary {
    /// The completed rounds.
    pub rounds: rounds::RoundLog,
    /// Why it ended.
    pub ended: Ended,
}

/// Runs rounds back to back until `limit` or a stop request, calling
/// `on_round` after each completed round (e.g. to print its `Time:` line
/// at once).
pub fn run_for(
    params: &Params,
    limit: &Limit,
    mut on_round: impl FnMut(&RoundResult),
) -> RunSummary {
    let begin = Instant::now();
    let max_rounds = match (limit.rounds, limit.duration) {
        (None, None) => Some(1),
        (r, _) => r,
    };
    let mut rounds = rounds::RoundLog::default();
    let ended = loop {
        if stop::stop_requested() {
            break Ended::Signal;
        }
        if max_rounds.is_some_and(|n| rounds.completed() >= n) {
            break Ended::Rounds;
        }
        if limit.duration.is_some_and(|d| begin.elapsed() >= d) {
            break Ended::Duration;
        }
        match run_round(params) {
            Ok(r) => {
                on_round(&r);
                rounds.push(r);
            }
            Err(Error::Interrupted) => break Ended::Signal,
            Err(e) => break Ended::Failed(e),
        }
    };
    RunSummary { rounds, ended }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner_matches_rt_tests_format() {
        assert_eq!(
            Params::default().banner(),
            "Running in process mode with 10 groups using 40 file descriptors each (== 400 tasks)\n\
             Each sender will pass 100 messages of 100 bytes\n"
        );
        let p = Params {
            mode: Mode::Thread,
            groups: 2,
            fds: 3,
            ..Params::default()
        };
        assert!(p
            .banner()
            .starts_with("Running in threaded mode with 2 groups using 6 "));
    }

    #[test]
    fn totals_follow_the_topology() {
        let p = Params::default();
        assert_eq!(
            (p.tasks(), p.messages(), p.bytes()),
            (400, 400_000, 40_000_000)
        );
    }

    #[test]
    fn time_line_truncates_milliseconds() {
        let r = RoundResult {
            wall_sec: 3,
            wall_usec: 728_999,
            elapsed: Duration::ZERO,
            messages: 0,
            bytes: 0,
            voluntary_ctxsw: 0,
            involuntary_ctxsw: 0,
        };
        assert_eq!(r.time_line(), "Time: 3.728");
    }

    #[test]
    fn worker_ids_follow_creation_order() {
        let id = WorkerId::at(7, 3, Some(42));
        assert_eq!((id.group, id.role, id.nth), (1, Role::Receiver, 1));
        assert_eq!(id.to_string(), "worker 7 (group 1 receiver 1, pid 42)");
        assert_eq!(WorkerId::at(5, 3, None).role, Role::Sender);
    }

    #[test]
    fn zero_parameters_are_rejected() {
        let p = Params {
            loops: 0,
            ..Params::default()
        };
        assert!(matches!(
            run_round(&p),
            Err(Error::InvalidParam { name: "loops" })
        ));
    }

    #[test]
    fn error_messages_use_rt_tests_wording() {
        let e = Error::Setup {
            what: "Creating fdpair",
            errno: libc::EMFILE,
        };
        assert_eq!(
            e.to_string(),
            "Creating fdpair (error: Too many open files)"
        );
        let w = Error::Worker {
            worker: WorkerId::at(0, 1, Some(9)),
            cause: WorkerCause::Failed {
                stage: Stage::SenderWrite,
                errno: libc::EPIPE,
            },
        };
        assert_eq!(
            w.to_string(),
            "worker 0 (group 0 receiver 0, pid 9) failed: SENDER: write (error: Broken pipe)"
        );
    }
}
