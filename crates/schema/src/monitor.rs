//! The latency monitor and the scheduler's account of a gap: what a trial
//! spec asks for ([`MonitorSpec`]) and what the trial record gets back
//! ([`MonitorReport`], [`GapAccount`]).
//!
//! Every instant here is CLOCK_MONOTONIC in nanoseconds, the clock the
//! player measures its underruns on (its report's `started_mono_ns` turns
//! an underrun's `at_s` into the same timeline).

use serde::{Deserialize, Serialize};

use crate::vocab::CpuList;
use crate::HistogramSummary;

/// The monitor a trial runs beside playback: cyclictest's measurement
/// (one SCHED_FIFO thread per CPU, absolute sleeps at a fixed interval)
/// and, when asked, the scheduler trace that accounts for every gap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorSpec {
    /// Measure wake-up latency (default true; false: only trace).
    #[serde(default = "default_true")]
    pub latency: bool,
    /// CPUs to measure (default: the CPUs the playback thread may run on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    /// SCHED_FIFO priority of the measuring threads (default 99, as
    /// `cyclictest -p 99`).
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Interval between wake-ups, µs (default 1000, as `cyclictest -i 1000`).
    #[serde(default = "default_interval_us")]
    pub interval_us: u32,
    /// A wake-up later than this, µs, is a spike: its time is kept (default
    /// 1000, one default interval).
    #[serde(default = "default_threshold_us")]
    pub threshold_us: u32,
    /// Trace the scheduler (tracefs `sched_switch` and `sched_wakeup`) and
    /// account for every underrun and spike (default false).
    #[serde(default)]
    pub trace: bool,
    /// The kernel's trace buffer per CPU, KiB (default 16384: under
    /// hackbench on two CPUs about 3 s of events, so the reader may fall
    /// that far behind without losing any).
    #[serde(default = "default_trace_buffer_kb")]
    pub trace_buffer_kb: u32,
}

fn default_trace_buffer_kb() -> u32 {
    16_384
}

fn default_true() -> bool {
    true
}
fn default_priority() -> u8 {
    99
}
fn default_interval_us() -> u32 {
    1000
}
fn default_threshold_us() -> u32 {
    1000
}

impl Default for MonitorSpec {
    fn default() -> Self {
        MonitorSpec {
            latency: true,
            cpus: None,
            priority: default_priority(),
            interval_us: default_interval_us(),
            threshold_us: default_threshold_us(),
            trace: false,
            trace_buffer_kb: default_trace_buffer_kb(),
        }
    }
}

/// `xrun-trial monitor`: the latency monitor alone, as cyclictest, for
/// `duration_s` seconds. Its command line has this one home: the host
/// builds it with [`MonitorAlone::to_args`] and `xrun-trial` parses it back
/// into this type (its parser's round-trip test holds the two together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorAlone {
    /// `--duration`: seconds to measure (default 30).
    pub duration_s: u64,
    /// `--cpus`: CPUs to measure (default: every CPU it may use).
    pub cpus: Option<CpuList>,
    /// `--priority`: SCHED_FIFO priority, 1–99 (default 99).
    pub priority: u8,
    /// `--interval-us`: interval, 100–1 000 000 µs (default 1000).
    pub interval_us: u32,
    /// `--threshold-us`: spike threshold, µs (default 1000).
    pub threshold_us: u32,
    /// `--pm-qos-us`: hold /dev/cpu_dma_latency at this many µs meanwhile.
    pub pm_qos_us: Option<u32>,
}

impl Default for MonitorAlone {
    /// cyclictest's defaults, as a trial's monitor has them.
    fn default() -> Self {
        MonitorAlone {
            duration_s: 30,
            cpus: None,
            priority: default_priority(),
            interval_us: default_interval_us(),
            threshold_us: default_threshold_us(),
            pm_qos_us: None,
        }
    }
}

impl MonitorAlone {
    /// The command line after the program: `monitor --duration 30 …`,
    /// every option spelled out.
    pub fn to_args(&self) -> Vec<String> {
        let mut args: Vec<String> = vec!["monitor".into()];
        let mut opt = |name: &str, value: String| args.extend([format!("--{name}"), value]);
        opt("duration", self.duration_s.to_string());
        if let Some(cpus) = &self.cpus {
            opt("cpus", cpus.to_string());
        }
        opt("priority", self.priority.to_string());
        opt("interval-us", self.interval_us.to_string());
        opt("threshold-us", self.threshold_us.to_string());
        if let Some(us) = self.pm_qos_us {
            opt("pm-qos-us", us.to_string());
        }
        args
    }

    /// The monitor it runs: a trial's monitor without the trace.
    pub fn spec(&self) -> MonitorSpec {
        MonitorSpec {
            cpus: self.cpus.clone(),
            priority: self.priority,
            interval_us: self.interval_us,
            threshold_us: self.threshold_us,
            ..MonitorSpec::default()
        }
    }
}

/// What the monitor measured during one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorReport {
    /// SCHED_FIFO priority of the measuring threads.
    pub priority: u8,
    /// Interval, µs.
    pub interval_us: u32,
    /// Spike threshold, µs.
    pub threshold_us: u32,
    /// mlockall outcome: `locked` or the error.
    pub mlock: String,
    /// Per measured CPU (empty when only tracing).
    pub cpus: Vec<CpuLatency>,
    /// Every CPU's wake-ups in one histogram, µs.
    pub overall: HistogramSummary,
    /// Wake-ups later than the threshold, in time order (all CPUs).
    pub spikes: Vec<LatencySpike>,
    /// Spikes not kept (the preallocated list was full).
    #[serde(default)]
    pub spikes_dropped: u64,
    /// The scheduler trace, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceStatus>,
    /// The scheduler's account of each underrun (with the trace), in the
    /// order of the player's `events`. Computed by `xrun-trial` from the
    /// trace after playback, so it lives here rather than in the player's
    /// report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub underruns: Vec<UnderrunAccount>,
}

/// The account of one of the player's underruns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnderrunAccount {
    /// Its index in the player report's `events`.
    pub event: usize,
    /// Its `at_s` (seconds since the player started).
    pub at_s: f64,
    /// The clause the trial printed after it:
    /// `runnable 26.9 ms behind hackbench:4121 (SCHED_OTHER) 24.0 ms, …`.
    pub clause: String,
    /// The playback thread's gap that ended when it noticed the underrun
    /// (`None`: the trace holds no such gap, e.g. events were lost).
    pub account: Option<GapAccount>,
}

/// One CPU's measuring thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuLatency {
    /// The CPU it was pinned to.
    pub cpu: usize,
    /// Its thread id (what the trace calls it).
    pub tid: u32,
    /// Wake-up latency, µs (cyclictest's figure: now − planned wake-up).
    pub latency: HistogramSummary,
}

/// One wake-up later than the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencySpike {
    /// The CPU.
    pub cpu: usize,
    /// When the thread should have woken, CLOCK_MONOTONIC ns.
    pub planned_mono_ns: u64,
    /// How late it ran, µs.
    pub latency_us: u64,
    /// `planned` as seconds since the player started (the underruns'
    /// `at_s` timeline), when the player said when that was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    /// What the scheduler did meanwhile (with tracing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<GapAccount>,
}

impl LatencySpike {
    /// `planned` as seconds since `start_mono_ns` (the player's
    /// `started_mono_ns`: the underruns' `at_s` timeline).
    pub fn at_s_since(&self, start_mono_ns: u64) -> f64 {
        (self.planned_mono_ns as f64 - start_mono_ns as f64) / 1e9
    }

    /// When it ran: `at_s_since(start) + latency`.
    pub fn ran_s_since(&self, start_mono_ns: u64) -> f64 {
        self.at_s_since(start_mono_ns) + self.latency_us as f64 / 1e6
    }
}

impl MonitorReport {
    /// The spikes as [`MachinePause`]s on the timeline that began at
    /// `start_mono_ns` (the player's `started_mono_ns`).
    pub fn pauses(&self, start_mono_ns: u64) -> Vec<MachinePause> {
        self.spikes
            .iter()
            .map(|s| {
                let due_s = s.at_s_since(start_mono_ns);
                MachinePause {
                    cpu: s.cpu,
                    since_s: due_s - f64::from(self.interval_us) / 1e6,
                    due_s,
                    ran_s: s.ran_s_since(start_mono_ns),
                }
            })
            .collect()
    }
}

/// A moment the machine itself was not ours: a FIFO-99 measuring thread
/// due at `due_s` ran only at `ran_s` (seconds on the player's timeline).
/// Nothing of ours at a lower priority — the player's threads are FIFO 80
/// — could run meanwhile on that CPU: the hypervisor had it, or the kernel
/// with preemption off. Used to tell an underrun the machine caused from
/// one the player did (the soak, the timing tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MachinePause {
    /// The CPU.
    pub cpu: usize,
    /// The earliest the pause can have begun: the thread's wake-up before,
    /// one interval before `due_s` (it ran then, or that one was late).
    pub since_s: f64,
    /// When the measuring thread was due.
    pub due_s: f64,
    /// When it ran.
    pub ran_s: f64,
}

impl MachinePause {
    /// Its length, ms.
    pub fn ms(&self) -> f64 {
        (self.ran_s - self.due_s) * 1e3
    }

    /// The pause that may have begun before a sink ran dry (at `dry_s`) and ended
    /// when our thread ran again (`back_s`, within `end_tolerance_ms`): our
    /// thread could not run for as long as the machine was away. Only one
    /// pause spanning the whole gap counts: in a storm of short pauses our
    /// thread could have run between them, so they prove nothing.
    pub fn spanning(
        pauses: &[MachinePause],
        dry_s: f64,
        back_s: f64,
        end_tolerance_ms: f64,
    ) -> Option<MachinePause> {
        pauses
            .iter()
            .find(|p| p.since_s <= dry_s && (p.ran_s - back_s).abs() * 1e3 <= end_tolerance_ms)
            .copied()
    }
}

/// Whether the scheduler trace ran, and how completely.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceStatus {
    /// `on`, or why it was not (tracefs missing, not writable…).
    pub state: String,
    /// Scheduler events read.
    pub events: u64,
    /// Events the kernel dropped because we read too slowly (accounts
    /// overlapping a loss say so).
    pub lost: u64,
}

/// The scheduler's account of one gap: from the moment a thread stopped
/// running until it ran again, when it was runnable and who ran instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GapAccount {
    /// The thread the gap is of (the playback thread, a monitor thread).
    pub tid: u32,
    /// The CPU it waited on.
    pub cpu: usize,
    /// When it stopped running (was switched out), CLOCK_MONOTONIC ns.
    pub off_mono_ns: u64,
    /// When it became runnable (woken, or preempted while runnable).
    pub runnable_mono_ns: u64,
    /// When it ran again.
    pub ran_mono_ns: u64,
    /// Runnable but not running: waiting for the CPU, ms.
    pub runnable_ms: f64,
    /// Not runnable at all (asleep, blocked in a driver, a page fault), ms.
    pub not_runnable_ms: f64,
    /// Who ran on that CPU while it was runnable, largest first.
    pub tasks: Vec<TaskTime>,
    /// The time of tasks beyond those listed, ms.
    #[serde(default)]
    pub others_ms: f64,
    /// False when the kernel dropped events in this window.
    pub complete: bool,
    /// Time the thread held the CPU, by the scheduler's account, yet was
    /// late: lost beneath the scheduler (interrupt handlers, softirqs, the
    /// hypervisor taking the vCPU), ms. When it is not 0 the thread never
    /// left the CPU in this window: `off`, `runnable` and `ran` are all
    /// the moment it got the CPU before the late clock read.
    #[serde(default)]
    pub on_cpu_ms: f64,
}

/// A task that ran while the audio waited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskTime {
    /// Its name (`comm`).
    pub comm: String,
    /// Its thread id.
    pub pid: u32,
    /// The kernel's priority (0–99 real-time, 100–139 normal; 120 is nice 0).
    pub prio: i32,
    /// `SCHED_OTHER`, `SCHED_FIFO 90` (with its real-time priority),
    /// `SCHED_RR 50`, `SCHED_BATCH`, `SCHED_IDLE`, `SCHED_DEADLINE`; for a
    /// task gone before it could be asked, what its priority tells:
    /// `SCHED_FIFO/RR 90` or `normal`.
    pub policy: String,
    /// Its time on the CPU in the window, ms (with `tasks` > 1: of every
    /// task of this name and policy; `pid` is the one that ran longest).
    pub ms: f64,
    /// How many tasks of this name and policy ran (1: just `pid`).
    #[serde(default = "one")]
    pub tasks: u32,
}

fn one() -> u32 {
    1
}

impl GapAccount {
    /// The short clause an underrun line gains:
    /// `runnable 26.9 ms behind hackbench:4121 (SCHED_OTHER) 24.0 ms, kworker/1:2 x3 2.1 ms`
    /// (a name with `xN`: N tasks of that name)
    /// (the policy only of the first task; at most three tasks).
    pub fn clause(&self) -> String {
        if self.on_cpu_ms > 0.0 {
            return format!(
                "on the CPU {:.1} ms without running: interrupts or the hypervisor",
                self.on_cpu_ms
            );
        }
        let mut s = format!("runnable {:.1} ms", self.runnable_ms);
        if self.tasks.is_empty() {
            s += &format!(", not runnable {:.1} ms", self.not_runnable_ms);
            return s;
        }
        s += " behind ";
        let named: Vec<String> = self
            .tasks
            .iter()
            .take(3)
            .enumerate()
            .map(|(i, t)| {
                let who = if t.tasks > 1 {
                    format!("{} x{}", t.comm, t.tasks)
                } else {
                    format!("{}:{}", t.comm, t.pid)
                };
                if i == 0 {
                    format!("{who} ({}) {:.1} ms", t.policy, t.ms)
                } else {
                    format!("{who} {:.1} ms", t.ms)
                }
            })
            .collect();
        s += &named.join(", ");
        if !self.complete {
            s += " (events lost)";
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_pause_that_spans_the_whole_gap_explains_it() {
        let away = |cpu, due_s: f64, ran_s| MachinePause {
            cpu,
            since_s: due_s - 0.001,
            due_s,
            ran_s,
        };
        // A gap dry at 1.000 s, the audio back at 1.030 s.
        let (dry, back) = (1.000, 1.030);
        // Away from before the sink ran dry until the audio came back.
        let spans = [away(0, 0.995, 1.029)];
        assert_eq!(
            MachinePause::spanning(&spans, dry, back, 2.0),
            Some(spans[0])
        );
        assert!((spans[0].ms() - 34.0).abs() < 1e-9);
        // Back 5 ms before the audio: something else held it; unless one
        // period of the host's server may stand in between.
        let early = [away(1, 0.990, 1.025)];
        assert_eq!(MachinePause::spanning(&early, dry, back, 2.0), None);
        assert!(MachinePause::spanning(&early, dry, back, 5.3 + 2.0).is_some());
        // Began after the sink ran dry: the gap had begun without it;
        // unless it may have begun earlier, since the thread's last wake-up.
        let late = [away(1, 1.005, 1.030)];
        assert_eq!(MachinePause::spanning(&late, dry, back, 2.0), None);
        let maybe_before = [away(1, 1.0005, 1.030)];
        assert!(MachinePause::spanning(&maybe_before, dry, back, 2.0).is_some());
        // A storm of short pauses covering the gap between them: our
        // thread could have run in between, so none explains it.
        let storm: Vec<_> = (0..10)
            .map(|k| away(1, 0.998 + 0.003 * k as f64, 1.000 + 0.003 * k as f64))
            .collect();
        assert_eq!(MachinePause::spanning(&storm, dry, back, 2.0), None);
    }

    #[test]
    fn spikes_become_pauses_on_the_players_timeline() {
        let m = MonitorReport {
            interval_us: 1000,
            spikes: vec![LatencySpike {
                cpu: 1,
                planned_mono_ns: 5_500_000_000,
                latency_us: 12_000,
                at_s: None,
                account: None,
            }],
            ..MonitorReport::default()
        };
        let p = m.pauses(5_000_000_000);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].cpu, 1);
        assert!((p[0].due_s - 0.5).abs() < 1e-9 && (p[0].ran_s - 0.512).abs() < 1e-9);
        assert!((p[0].since_s - 0.499).abs() < 1e-9);
    }

    #[test]
    fn clause_names_the_largest_first_with_its_policy() {
        let a = GapAccount {
            tid: 7,
            cpu: 1,
            off_mono_ns: 0,
            runnable_mono_ns: 1,
            ran_mono_ns: 2,
            runnable_ms: 26.94,
            not_runnable_ms: 1.5,
            tasks: vec![
                TaskTime {
                    comm: "hackbench".into(),
                    pid: 4121,
                    prio: 120,
                    policy: "SCHED_OTHER".into(),
                    ms: 24.0,
                    tasks: 1,
                },
                TaskTime {
                    comm: "kworker/1:2".into(),
                    pid: 88,
                    prio: 120,
                    policy: "SCHED_OTHER".into(),
                    ms: 2.1,
                    tasks: 3,
                },
            ],
            others_ms: 0.0,
            complete: true,
            on_cpu_ms: 0.0,
        };
        assert_eq!(
            a.clause(),
            "runnable 26.9 ms behind hackbench:4121 (SCHED_OTHER) 24.0 ms, kworker/1:2 x3 2.1 ms"
        );
    }

    #[test]
    fn time_lost_on_the_cpu_is_said_to_be_beneath_the_scheduler() {
        let a = GapAccount {
            tid: 7,
            cpu: 1,
            off_mono_ns: 5,
            runnable_mono_ns: 5,
            ran_mono_ns: 5,
            runnable_ms: 0.0,
            not_runnable_ms: 0.0,
            tasks: vec![],
            others_ms: 0.0,
            complete: true,
            on_cpu_ms: 1.24,
        };
        assert_eq!(
            a.clause(),
            "on the CPU 1.2 ms without running: interrupts or the hypervisor"
        );
        // Records written before the field read as "not on the CPU".
        let mut v = serde_json::to_value(&a).unwrap();
        v.as_object_mut().unwrap().remove("on_cpu_ms");
        let old: GapAccount = serde_json::from_value(v).unwrap();
        assert_eq!(old.on_cpu_ms, 0.0);
    }

    #[test]
    fn spec_defaults_are_cyclictests() {
        let s: MonitorSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(s, MonitorSpec::default());
        assert_eq!((s.priority, s.interval_us), (99, 1000));
    }
}
