//! The latency monitor: cyclictest's measurement beside playback, on the
//! trial's clock.
//!
//! One thread per CPU, pinned there, SCHED_FIFO at the spec's priority,
//! sleeping with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` to the
//! next multiple of the interval and recording how late it woke (µs,
//! truncated, as cyclictest's `calcdiff`) into an HDR histogram. Missed
//! wake-ups are skipped as cyclictest skips them. The loop allocates
//! nothing: the histogram and the spike list are allocated before the
//! first sleep (and memory is locked, as `cyclictest -m`).
//!
//! Threads inside `xrun-trial` rather than a process of their own: to the
//! player it is the same (real-time threads on its CPUs, as cyclictest
//! beside it would be), and their thread ids are at hand for the trace.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use hdrhistogram::Histogram;
use xrunbench_schema::monitor::{CpuLatency, LatencySpike, MonitorReport, MonitorSpec};
use xrunbench_schema::HistogramSummary;

/// Spikes kept per CPU: preallocated, so the loop never allocates.
const SPIKES_PER_CPU: usize = 4096;
/// The largest latency the histogram resolves, µs (larger ones saturate).
const MAX_LATENCY_US: u64 = 60_000_000;

/// Why the monitor could not start.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// A measuring thread could not get its CPU or its priority.
    #[error("latency monitor on CPU {cpu}: {what}: {source}")]
    Setup {
        /// The CPU.
        cpu: usize,
        /// What failed.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The thread could not be started.
    #[error("latency monitor on CPU {cpu}: cannot start a thread: {source}")]
    Spawn {
        /// The CPU.
        cpu: usize,
        /// Why.
        source: std::io::Error,
    },
}

/// Now on CLOCK_MONOTONIC, ns.
pub fn mono_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ns_of(&ts)
}

// tv_sec and tv_nsec are 32-bit on armv7: the conversion is not useless there.
#[allow(clippy::useless_conversion)]
fn ns_of(ts: &libc::timespec) -> u64 {
    let (sec, nsec) = (i64::from(ts.tv_sec), i64::from(ts.tv_nsec));
    (sec as u64) * 1_000_000_000 + nsec as u64
}

fn timespec_of(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// What one measuring thread gives back.
struct CpuResult {
    cpu: usize,
    tid: u32,
    hist: Histogram<u64>,
    spikes: Vec<(u64, u64)>,
    dropped: u64,
}

/// The running monitor; [`Monitor::stop`] ends it and gathers the report
/// (dropping it stops the threads too).
pub struct Monitor {
    spec: MonitorSpec,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<CpuResult>>,
    tids: Vec<MeasuringThread>,
    mlock: String,
}

/// One measuring thread, as the trace needs to know it.
#[derive(Debug, Clone, Copy)]
pub struct MeasuringThread {
    /// Its CPU.
    pub cpu: usize,
    /// Its thread id.
    pub tid: u32,
    /// Its first planned wake-up, CLOCK_MONOTONIC ns: every later one is
    /// on the grid `first + k × interval`.
    pub first_ns: u64,
}

impl Monitor {
    /// Locks memory, then starts one measuring thread per CPU of `cpus`
    /// and returns once each is pinned, at its priority and measuring.
    pub fn start(spec: &MonitorSpec, cpus: &[usize]) -> Result<Monitor, MonitorError> {
        let mlock = lock_memory();
        let stop = Arc::new(AtomicBool::new(false));
        let mut me = Monitor {
            spec: spec.clone(),
            stop: stop.clone(),
            threads: Vec::new(),
            tids: Vec::new(),
            mlock,
        };
        for &cpu in cpus {
            let (ready_tx, ready_rx) = mpsc::channel();
            let stop = stop.clone();
            let (prio, interval, threshold) = (spec.priority, spec.interval_us, spec.threshold_us);
            let handle = std::thread::Builder::new()
                .name(format!("xrb-lat/{cpu}"))
                .spawn(move || measure(cpu, prio, interval, threshold, &stop, ready_tx))
                .map_err(|source| MonitorError::Spawn { cpu, source })?;
            me.threads.push(handle);
            match ready_rx.recv() {
                Ok(Ok((tid, first_ns))) => me.tids.push(MeasuringThread { cpu, tid, first_ns }),
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(MonitorError::Setup {
                        cpu,
                        what: "the thread ended before measuring",
                        source: std::io::Error::other("no report"),
                    })
                }
            }
        }
        Ok(me)
    }

    /// The measuring threads.
    pub fn threads(&self) -> &[MeasuringThread] {
        &self.tids
    }

    /// Stops the threads and gathers what they measured.
    pub fn stop(mut self) -> MonitorReport {
        self.stop.store(true, Ordering::Relaxed);
        let mut results: Vec<CpuResult> = std::mem::take(&mut self.threads)
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect();
        results.sort_by_key(|r| r.cpu);
        report(&self.spec, &self.mlock, &results)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        unlock_memory();
    }
}

/// mlockall(MCL_CURRENT | MCL_FUTURE), as `cyclictest -m`: `locked` or why not.
fn lock_memory() -> String {
    // SAFETY: plain syscall.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } == 0 {
        "locked".into()
    } else {
        format!("failed: {}", std::io::Error::last_os_error())
    }
}

fn unlock_memory() {
    // SAFETY: plain syscall.
    unsafe { libc::munlockall() };
}

/// Pins the calling thread to `cpu` and makes it SCHED_FIFO `prio`.
fn pin_and_prioritize(cpu: usize, prio: u8) -> Result<(), MonitorError> {
    let err = |what| MonitorError::Setup {
        cpu,
        what,
        source: std::io::Error::last_os_error(),
    };
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays in bounds
    // for cpu < CPU_SETSIZE (checked).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(MonitorError::Setup {
                cpu,
                what: "pinning",
                source: std::io::Error::other("CPU number out of range"),
            });
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(err("pinning"));
        }
        let param = libc::sched_param {
            sched_priority: i32::from(prio),
        };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
            return Err(err("SCHED_FIFO (run as root, or grant CAP_SYS_NICE)"));
        }
    }
    Ok(())
}

fn gettid() -> u32 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// One measuring thread: cyclictest's loop.
fn measure(
    cpu: usize,
    prio: u8,
    interval_us: u32,
    threshold_us: u32,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(u32, u64), MonitorError>>,
) -> CpuResult {
    let mut out = CpuResult {
        cpu,
        tid: gettid(),
        hist: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds"),
        spikes: Vec::with_capacity(SPIKES_PER_CPU),
        dropped: 0,
    };
    if let Err(e) = pin_and_prioritize(cpu, prio) {
        let _ = ready.send(Err(e));
        return out;
    }
    let interval_ns = u64::from(interval_us) * 1000;
    let mut next = mono_now_ns() + interval_ns;
    let _ = ready.send(Ok((out.tid, next)));
    drop(ready);
    while !stop.load(Ordering::Relaxed) {
        let ts = timespec_of(next);
        // SAFETY: valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc == libc::EINTR {
            continue;
        }
        let now = mono_now_ns();
        let late_us = now.saturating_sub(next) / 1000;
        out.hist.saturating_record(late_us);
        if late_us > u64::from(threshold_us) {
            if out.spikes.len() < out.spikes.capacity() {
                out.spikes.push((next, late_us));
            } else {
                out.dropped += 1;
            }
        }
        next += interval_ns;
        // cyclictest skips the wake-ups it missed rather than catching up.
        while next <= now {
            next += interval_ns;
        }
    }
    out
}

fn report(spec: &MonitorSpec, mlock: &str, results: &[CpuResult]) -> MonitorReport {
    let mut overall =
        Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds");
    let mut spikes = Vec::new();
    let mut dropped = 0;
    let mut cpus = Vec::new();
    for r in results {
        let _ = overall.add(&r.hist);
        dropped += r.dropped;
        spikes.extend(r.spikes.iter().map(|&(planned, late)| LatencySpike {
            cpu: r.cpu,
            planned_mono_ns: planned,
            latency_us: late,
            at_s: None,
            account: None,
        }));
        cpus.push(CpuLatency {
            cpu: r.cpu,
            tid: r.tid,
            latency: HistogramSummary::of_hdr(&r.hist),
        });
    }
    spikes.sort_by_key(|s| s.planned_mono_ns);
    MonitorReport {
        priority: spec.priority,
        interval_us: spec.interval_us,
        threshold_us: spec.threshold_us,
        mlock: mlock.to_string(),
        cpus,
        overall: HistogramSummary::of_hdr(&overall),
        spikes,
        spikes_dropped: dropped,
        trace: None,
        underruns: Vec::new(),
    }
}

/// The CPUs the monitor measures: the spec's, else those the playback
/// thread may run on (its `--cpu`, else every CPU this process may use).
pub fn cpus_to_measure(spec: &MonitorSpec, player_cpus: Option<&[usize]>) -> Vec<usize> {
    if let Some(c) = &spec.cpus {
        return c.cpus().to_vec();
    }
    if let Some(c) = player_cpus {
        return c.to_vec();
    }
    crate::fingerprint::allowed_cpus()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespec_round_trips() {
        let ns = 12_345_678_901_234;
        assert_eq!(ns_of(&timespec_of(ns)), ns);
    }

    #[test]
    fn default_cpus_follow_the_player() {
        let spec = MonitorSpec::default();
        assert_eq!(cpus_to_measure(&spec, Some(&[1])), vec![1]);
        let spec = MonitorSpec {
            cpus: Some("0,1".parse().unwrap()),
            ..MonitorSpec::default()
        };
        assert_eq!(cpus_to_measure(&spec, Some(&[1])), vec![0, 1]);
        assert!(!cpus_to_measure(&MonitorSpec::default(), None).is_empty());
    }

    #[test]
    fn summary_of_recorded_latencies() {
        let mut h = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_US, 3).unwrap();
        for v in [5, 7, 9, 1000] {
            h.record(v).unwrap();
        }
        let s = HistogramSummary::of_hdr(&h);
        assert_eq!((s.count, s.min, s.max), (4, 5, 1000));
    }
}
