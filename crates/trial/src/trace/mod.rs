//! The scheduler's account of every gap, from tracefs.
//!
//! A trace instance of our own (`/sys/kernel/tracing/instances/xrunbench-<pid>`,
//! so a user's own tracing is left alone) records `sched_switch` and
//! `sched_wakeup` on CLOCK_MONOTONIC (`trace_clock mono`, the player's
//! clock). Creating the instance — and mounting tracefs first when it is
//! not mounted — goes through the knob journal like any knob: restoring
//! removes the instance (and with it every event, buffer size and clock set
//! inside it) and unmounts what we mounted, on every exit path and after a
//! SIGKILL by the next `xrun-trial restore`.
//!
//! A reader thread at SCHED_IDLE (it takes only time nobody else wants, so
//! it perturbs neither the audio nor the load; the kernel's ring buffer,
//! sized by the spec, holds events until it gets to them) follows
//! `trace_pipe` and keeps, for each watched thread (the playback thread,
//! the monitor's threads), every gap: when it was switched out, when it
//! became runnable, when it ran again, and who ran on its CPU meanwhile.
//! Memory grows with gaps, not with events.
//!
//! `parse` reads the pipe's lines, `gaps` keeps the gaps; this module sets
//! up the instance and runs the reader.

use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use xrunbench_schema::monitor::TraceStatus;

use crate::journal::{Knobs, MachineLock};
use crate::knobs::{self, KnobKind, KnobWrite, TRACE_INSTANCE_PREFIX};
use crate::machine::Machine;

mod gaps;
mod parse;

pub use gaps::{Gap, GapTracker, Held, Keep};
pub use parse::{parse_line, Event};

/// How the trace was set up and how to undo it.
pub struct Tracer {
    instance: PathBuf,
    knobs: Knobs,
    stop: Arc<AtomicBool>,
    tracker: Arc<Mutex<GapTracker>>,
    reader: Option<JoinHandle<()>>,
    reader_tid: Arc<Mutex<Option<u32>>>,
}

/// Why tracing is off for this trial (said once; the trial carries on).
#[derive(Debug, thiserror::Error)]
#[error("scheduler trace off: {0}")]
pub struct TraceOff(pub String);

impl Tracer {
    /// Mounts tracefs if need be, creates our instance (both journaled),
    /// sets it up (mono clock, `buffer_kb` per CPU, the two events) and
    /// starts the reader.
    pub fn start(
        machine: &Machine,
        lock: &MachineLock,
        stem: &str,
        buffer_kb: u32,
    ) -> Result<Tracer, TraceOff> {
        let root = &machine.roots.tracing;
        if !root.is_dir() {
            return Err(TraceOff(format!(
                "{} does not exist (kernel without tracefs)",
                root.display()
            )));
        }
        let mut writes = Vec::new();
        if !knobs::is_tracefs_mounted(root) {
            writes.push(KnobWrite {
                kind: KnobKind::TraceMount,
                what: "tracefs mount".into(),
                path: root.clone(),
                value: "mounted".into(),
                feature: None,
            });
        }
        let instance = root
            .join("instances")
            .join(format!("{TRACE_INSTANCE_PREFIX}{}", std::process::id()));
        writes.push(KnobWrite {
            kind: KnobKind::TraceInstance,
            what: "trace instance".into(),
            path: instance.clone(),
            value: "present".into(),
            feature: None,
        });
        let off = |e: &dyn std::fmt::Display| TraceOff(e.to_string());
        let mut knobs = Knobs::journal(machine, lock, stem, writes).map_err(|e| off(&e))?;
        if let Err(e) = knobs.apply() {
            let _ = knobs.restore();
            return Err(off(&e));
        }
        let set = |file: &str, value: &str| -> Result<(), TraceOff> {
            let p = instance.join(file);
            fs::write(&p, value).map_err(|e| TraceOff(format!("writing {}: {e}", p.display())))
        };
        let setup = set("tracing_on", "0")
            .and_then(|()| set("trace_clock", "mono"))
            .and_then(|()| set("buffer_size_kb", &buffer_kb.to_string()))
            .and_then(|()| set("events/sched/sched_switch/enable", "1"))
            .and_then(|()| set("events/sched/sched_wakeup/enable", "1"))
            .and_then(|()| set("tracing_on", "1"));
        if let Err(e) = setup {
            let _ = knobs.restore();
            return Err(e);
        }
        let pipe = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(instance.join("trace_pipe"))
            .map_err(|e| TraceOff(format!("opening trace_pipe: {e}")));
        let pipe = match pipe {
            Ok(p) => p,
            Err(e) => {
                let _ = knobs.restore();
                return Err(e);
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let tracker = Arc::new(Mutex::new(GapTracker::default()));
        let reader_tid = Arc::new(Mutex::new(None));
        let reader = {
            let (stop, tracker, reader_tid) = (stop.clone(), tracker.clone(), reader_tid.clone());
            std::thread::Builder::new()
                .name("xrb-trace".into())
                .spawn(move || read_pipe(pipe, &stop, &tracker, &reader_tid))
                .map_err(|e| TraceOff(format!("starting the reader: {e}")))
        };
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                let _ = knobs.restore();
                return Err(e);
            }
        };
        Ok(Tracer {
            instance,
            knobs,
            stop,
            tracker,
            reader: Some(reader),
            reader_tid,
        })
    }

    /// Keeps the gaps of thread `tid` (see [`GapTracker::watch`]).
    pub fn watch(&self, tid: u32, keep: Keep) {
        if let Ok(mut t) = self.tracker.lock() {
            t.watch(tid, keep);
        }
    }

    /// Stops recording, lets the reader drain what the kernel holds (at
    /// normal priority now), removes the instance (and unmounts what we
    /// mounted), and hands back what it kept.
    pub fn finish(mut self) -> (GapTracker, TraceStatus, Result<(), String>) {
        self.stop_reader();
        let restored = self.knobs.restore();
        let tracker = std::mem::take(&mut *self.tracker.lock().unwrap_or_else(|p| p.into_inner()));
        let status = TraceStatus {
            state: "on".into(),
            events: tracker.events,
            lost: tracker.lost,
        };
        (tracker, status, restored)
    }
}

impl Tracer {
    /// Stops recording, then lets the reader drain what the kernel holds
    /// at normal priority and joins it. Both matter on every way out (a
    /// panic's unwinding too): a reader left at SCHED_IDLE on a machine
    /// busy with other work gets no CPU at all, and a pipe still being
    /// written to is never empty — the join would never return.
    fn stop_reader(&mut self) {
        // Once only: `finish` stops it, then drop comes (the instance is
        // gone by then).
        let Some(reader) = self.reader.take() else {
            return;
        };
        let _ = fs::write(self.instance.join("tracing_on"), "0");
        self.stop.store(true, Ordering::SeqCst);
        // Under the lock the reader publishes its tid and, unless already
        // told to stop, goes SCHED_IDLE: either it saw the stop or its tid
        // is here to be raised.
        if let Some(tid) = self.reader_tid.lock().ok().and_then(|t| *t) {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: plain syscall on our own reader thread.
            unsafe { libc::sched_setscheduler(tid as libc::pid_t, libc::SCHED_OTHER, &param) };
        }
        let _ = reader.join();
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.stop_reader();
        // Knobs' own drop removes the instance and unmounts.
    }
}

/// The reader thread: SCHED_IDLE, follows the pipe until told to stop,
/// then drains it.
fn read_pipe(
    mut pipe: fs::File,
    stop: &AtomicBool,
    tracker: &Mutex<GapTracker>,
    my_tid: &Mutex<Option<u32>>,
) {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as u32;
        if let Ok(mut t) = my_tid.lock() {
            *t = Some(tid);
            // See `Tracer::stop_reader`: once stopped, never idle.
            if !stop.load(Ordering::SeqCst) {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
            }
        }
    }
    let mut buf = vec![0u8; 1 << 16];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                feed_lines(&mut pending, tracker);
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        // Empty: done once told to stop, else wait for more.
        if stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Feeds every complete line of `pending` and keeps the partial tail.
fn feed_lines(pending: &mut Vec<u8>, tracker: &Mutex<GapTracker>) {
    let Some(last_nl) = pending.iter().rposition(|&b| b == b'\n') else {
        return;
    };
    if let Ok(mut t) = tracker.lock() {
        for line in pending[..last_nl].split(|&b| b == b'\n') {
            if let Ok(s) = std::str::from_utf8(line) {
                if let Some(e) = parse_line(s) {
                    t.feed(&e);
                }
            }
        }
    }
    pending.drain(..=last_nl);
}

/// Whether a trace instance of ours is at `path` (for tests).
pub fn instance_exists(path: &Path) -> bool {
    path.is_dir()
}
