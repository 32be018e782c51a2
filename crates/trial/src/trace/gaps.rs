//! The gap tracker: follows scheduler events and keeps, for each watched
//! thread, every gap (switched out, runnable, ran again) and who ran on its
//! CPU meanwhile, and a latency monitor's long stretches on the CPU.

use std::collections::HashMap;

use xrunbench_schema::monitor::{GapAccount, TaskTime};

use super::parse::Event;

/// Tasks named per account (the rest are summed as `others_ms`).
const TASKS_KEPT: usize = 8;
/// Gaps kept per watched thread (beyond, the shortest are not kept).
const GAPS_KEPT: usize = 200_000;

/// Which gaps of a watched thread are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every gap (the playback thread: any may be an underrun's).
    All,
    /// A latency monitor's thread, which sleeps to the grid `first + k ×
    /// interval` and skips wake-ups it missed: a gap is kept when the
    /// thread ran at least `min_late` after its planned wake-up — every
    /// spike's gap, and almost nothing else.
    Grid {
        /// The first planned wake-up, ns.
        first: u64,
        /// The interval, ns.
        interval: u64,
        /// Keep a gap that ended at least this late, ns.
        min_late: u64,
    },
}

impl Keep {
    /// Whether a gap from `off` to `ran`, of a thread that had run since
    /// `since` (0: not seen), is kept.
    fn keeps(self, since: u64, off: u64, ran: u64) -> bool {
        match self {
            Keep::All => true,
            Keep::Grid {
                first,
                interval,
                min_late,
            } => {
                // The thread planned the first grid point after the clock
                // read it made once it got the CPU (`since`): never earlier
                // than the first one after `since` — so this keeps every
                // late gap, and a few more when it got the CPU late. The
                // first run seen: it read its clock a few µs before it was
                // switched out.
                let read = if since != 0 {
                    since
                } else {
                    off.saturating_sub(20_000)
                };
                let planned = if read < first {
                    first
                } else {
                    first + ((read - first) / interval + 1) * interval
                };
                ran.saturating_sub(planned) >= min_late
            }
        }
    }
}

/// A watched thread's state.
#[derive(Debug, Clone)]
enum Watch {
    /// Not seen yet (`since` 0), or running since `since`, with `lost`
    /// events lost before it got the CPU.
    Running { since: u64, lost: u64 },
    /// Switched out at `off`, after running since `since` (0: unknown).
    Off {
        since: u64,
        off: u64,
        cpu: usize,
        runnable: Option<u64>,
        tally: Vec<(u32, u64)>,
        complete: bool,
    },
}

/// A gap as the reader keeps it (tasks still by pid).
#[derive(Debug, Clone)]
pub struct Gap {
    /// The CPU it waited on.
    pub cpu: usize,
    /// Switched out.
    pub off: u64,
    /// Became runnable.
    pub runnable: u64,
    /// Ran again.
    pub ran: u64,
    /// (pid, ns on the CPU while it was runnable).
    pub tally: Vec<(u32, u64)>,
    /// No events lost meanwhile.
    pub complete: bool,
}

/// A stretch a latency monitor's thread held the CPU, by the scheduler's
/// account, for longer than `Keep::Grid`'s `min_late`. Its own work per
/// cycle takes microseconds, so such a stretch is time lost beneath the
/// scheduler while it was on the CPU — interrupt handlers, softirqs, or the
/// hypervisor taking the vCPU between the wake-up and the clock read (or
/// before it went to sleep, when `clock_nanosleep` then returns at once).
/// No `sched_switch` marks that time: without these a spike of that kind
/// has no gap to be accounted by.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// The CPU.
    pub cpu: usize,
    /// Got the CPU.
    pub from: u64,
    /// Left it.
    pub to: u64,
    /// No events lost meanwhile.
    pub complete: bool,
}

/// Follows scheduler events and keeps the gaps of the watched threads.
#[derive(Debug, Default)]
pub struct GapTracker {
    /// Per CPU: since when its current task runs (0: not seen yet).
    cpus: Vec<u64>,
    /// Per CPU: the task the trace last showed running there.
    current: Vec<Option<u32>>,
    /// Per CPU: the time of the last event seen there.
    last: Vec<u64>,
    watched: HashMap<u32, (Watch, Keep)>,
    gaps: HashMap<u32, Vec<Gap>>,
    /// The long stretches on the CPU of `Keep::Grid` threads.
    held: HashMap<u32, Vec<Held>>,
    /// pid → (comm, kernel prio), as last seen.
    pub tasks: HashMap<u32, (String, i32)>,
    /// pid → scheduling policy, asked when it first held a watched thread
    /// off (while it most likely still exists); used only while it fits
    /// the priority the trace shows.
    policies: HashMap<u32, Policy>,
    /// Events seen.
    pub events: u64,
    /// Events the kernel said it lost.
    pub lost: u64,
}

impl GapTracker {
    /// Watches `tid`, keeping the gaps `keep` says.
    pub fn watch(&mut self, tid: u32, keep: Keep) {
        self.watched
            .entry(tid)
            .or_insert((Watch::Running { since: 0, lost: 0 }, keep));
    }

    /// Feeds one event.
    pub fn feed(&mut self, e: &Event<'_>) {
        match *e {
            Event::Lost(n) => {
                self.lost += n;
                for (w, _) in self.watched.values_mut() {
                    if let Watch::Off { complete, .. } = w {
                        *complete = false;
                    }
                }
            }
            Event::Wakeup {
                cpu: on,
                current,
                ts,
                pid,
                target_cpu,
            } => {
                self.events += 1;
                self.running(on, current, ts);
                if let Some((
                    Watch::Off {
                        runnable: r @ None,
                        cpu,
                        ..
                    },
                    _,
                )) = self.watched.get_mut(&pid)
                {
                    *r = Some(ts);
                    *cpu = target_cpu;
                }
            }
            Event::Switch {
                cpu,
                ts,
                prev_comm,
                prev_pid,
                prev_prio,
                prev_runnable,
                next_comm,
                next_pid,
                next_prio,
            } => {
                self.events += 1;
                self.running(cpu, prev_pid, ts);
                remember(&mut self.tasks, prev_pid, prev_comm, prev_prio);
                remember(&mut self.tasks, next_pid, next_comm, next_prio);
                self.switch(cpu, ts, prev_pid, prev_runnable, next_pid);
            }
        }
    }

    /// `pid` is running on `cpu` at `ts` (an event says so). When the
    /// trace showed another task there last, it missed the switch between
    /// them — some kernels do not trace every switch out of the idle task
    /// (a Firecracker guest's 6.18 does not, on all CPUs but the first) —
    /// and it is taken as made right after the last event seen there: the
    /// idle task switches as soon as the interrupt that woke a task
    /// returns. Without this, a watched thread woken on an idle CPU would
    /// never be seen running, and its gaps would run into one another.
    fn running(&mut self, cpu: usize, pid: u32, ts: u64) {
        if self.current.len() <= cpu {
            self.current.resize(cpu + 1, None);
            self.last.resize(cpu + 1, 0);
            self.cpus.resize(cpu + 1, 0);
        }
        if let Some(was) = self.current[cpu] {
            if was != pid {
                let at = self.last[cpu];
                self.switch(cpu, at, was, false, pid);
            }
        }
        self.current[cpu] = Some(pid);
        self.last[cpu] = ts;
    }

    /// A switch on `cpu` at `ts` from `prev` to `next`, shown by the trace
    /// or inferred (see [`GapTracker::running`]).
    fn switch(&mut self, cpu: usize, ts: u64, prev: u32, prev_runnable: bool, next: u32) {
        let since = self.cpus[cpu];
        self.charge(cpu, prev, since, ts);
        if let Some((w, keep)) = self.watched.get_mut(&prev) {
            let (since, lost) = match *w {
                Watch::Running { since, lost } => (since, lost),
                Watch::Off { .. } => (0, 0),
            };
            if let Keep::Grid { min_late, .. } = *keep {
                if since != 0 && ts.saturating_sub(since) >= min_late {
                    let held = self.held.entry(prev).or_default();
                    if held.len() < GAPS_KEPT {
                        held.push(Held {
                            cpu,
                            from: since,
                            to: ts,
                            complete: lost == self.lost,
                        });
                    }
                }
            }
            *w = Watch::Off {
                since,
                off: ts,
                cpu,
                runnable: prev_runnable.then_some(ts),
                tally: Vec::new(),
                complete: true,
            };
        }
        self.close(next, ts);
        self.cpus[cpu] = ts;
        self.current[cpu] = Some(next);
        self.last[cpu] = ts;
    }

    /// Charges `pid`'s run on `cpu` from `since` to `now` to every watched
    /// thread waiting runnable there.
    fn charge(&mut self, cpu: usize, pid: u32, since: u64, now: u64) {
        for (w, _) in self.watched.values_mut() {
            if let Watch::Off {
                cpu: c,
                runnable: Some(r),
                tally,
                ..
            } = w
            {
                if *c != cpu || since == 0 {
                    continue;
                }
                let from = since.max(*r);
                if now > from {
                    match tally.iter_mut().find(|(p, _)| *p == pid) {
                        Some((_, ns)) => *ns += now - from,
                        None => {
                            tally.push((pid, now - from));
                            if let std::collections::hash_map::Entry::Vacant(e) =
                                self.policies.entry(pid)
                            {
                                if let Some(p) = live_policy(pid) {
                                    e.insert(p);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// `tid` runs again at `ts`: its gap ends.
    fn close(&mut self, tid: u32, ts: u64) {
        let Some((w, keep)) = self.watched.get_mut(&tid) else {
            return;
        };
        let keep = *keep;
        let running = Watch::Running {
            since: ts,
            lost: self.lost,
        };
        if let Watch::Off {
            since,
            off,
            cpu,
            runnable,
            tally,
            complete,
        } = std::mem::replace(w, running)
        {
            if !keep.keeps(since, off, ts) {
                return;
            }
            let runnable = runnable.unwrap_or(ts);
            let gaps = self.gaps.entry(tid).or_default();
            if gaps.len() < GAPS_KEPT {
                gaps.push(Gap {
                    cpu,
                    off,
                    runnable,
                    ran: ts,
                    tally,
                    complete,
                });
            }
        }
    }

    /// The gaps kept of `tid`, in time order.
    pub fn gaps_of(&self, tid: u32) -> &[Gap] {
        self.gaps.get(&tid).map_or(&[], Vec::as_slice)
    }

    /// The account of `tid`'s gap that ended last at or before `by` (and
    /// after `not_before`): what held it off when it should have run.
    pub fn account(&self, tid: u32, not_before: u64, by: u64) -> Option<GapAccount> {
        let g = self
            .gaps_of(tid)
            .iter()
            .rev()
            .find(|g| g.ran <= by && g.ran >= not_before)?;
        Some(self.describe(tid, g))
    }

    /// The account of `tid`'s gap that covers `at` (it went off the CPU
    /// at or before, and ran again after): what kept it away when the
    /// device ran dry. The moment it noticed does not always tell which
    /// gap that was — cpal's JACK host stamps a callback with the start of
    /// its JACK cycle, which can be before the thread ran, and it may run
    /// and sleep again within that cycle.
    pub fn account_covering(&self, tid: u32, at: u64) -> Option<GapAccount> {
        let g = self
            .gaps_of(tid)
            .iter()
            .rev()
            .find(|g| g.off <= at && at < g.ran)?;
        Some(self.describe(tid, g))
    }

    /// The account of a late clock read at `read` (planned for `planned`)
    /// by a `Keep::Grid` thread that had the CPU then: the stretch it held
    /// the CPU that covers the read, and how much of the lateness was spent
    /// on the CPU. For a spike no gap accounts for (see [`Held`]).
    pub fn held_account(&self, tid: u32, planned: u64, read: u64) -> Option<GapAccount> {
        // The trace stamps in µs; the clock read is a little before the
        // switch out.
        const SLACK: u64 = 2_000;
        let h = self
            .held
            .get(&tid)?
            .iter()
            .find(|h| h.from <= read && read <= h.to + SLACK)?;
        let on_cpu = read.saturating_sub(h.from.max(planned));
        Some(GapAccount {
            tid,
            cpu: h.cpu,
            off_mono_ns: h.from,
            runnable_mono_ns: h.from,
            ran_mono_ns: h.from,
            runnable_ms: 0.0,
            not_runnable_ms: 0.0,
            tasks: Vec::new(),
            others_ms: 0.0,
            complete: h.complete,
            on_cpu_ms: on_cpu as f64 / 1e6,
        })
    }

    /// A kept gap as the schema's account: tasks of one name and policy
    /// together (forty hackbench workers are one culprit, not forty),
    /// largest first.
    pub fn describe(&self, tid: u32, g: &Gap) -> GapAccount {
        let ms = |ns: u64| ns as f64 / 1e6;
        // (comm, policy) → (ns, largest pid and its ns, prio, tasks)
        let mut groups: Vec<(String, String, u64, u32, u64, i32, u32)> = Vec::new();
        for &(pid, ns) in &g.tally {
            let (comm, prio) = self
                .tasks
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| ("?".into(), 120));
            let policy = self.policy(pid, &comm, prio);
            match groups.iter_mut().find(|x| x.0 == comm && x.1 == policy) {
                Some(x) => {
                    x.2 += ns;
                    x.6 += 1;
                    if ns > x.4 {
                        (x.3, x.4, x.5) = (pid, ns, prio);
                    }
                }
                None => groups.push((comm, policy, ns, pid, ns, prio, 1)),
            }
        }
        groups.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        let others: u64 = groups.iter().skip(TASKS_KEPT).map(|x| x.2).sum();
        let tasks = groups
            .into_iter()
            .take(TASKS_KEPT)
            .map(|(comm, policy, ns, pid, _, prio, n)| TaskTime {
                comm,
                pid,
                prio,
                policy,
                ms: ms(ns),
                tasks: n,
            })
            .collect();
        GapAccount {
            tid,
            cpu: g.cpu,
            off_mono_ns: g.off,
            runnable_mono_ns: g.runnable,
            ran_mono_ns: g.ran,
            runnable_ms: ms(g.ran - g.runnable),
            not_runnable_ms: ms(g.runnable - g.off),
            tasks,
            others_ms: ms(others),
            complete: g.complete,
            on_cpu_ms: 0.0,
        }
    }

    /// The policy of `pid` as it fits the priority the trace saw: asked
    /// when it held a watched thread off, else now, else that of a task of
    /// the same name and priority that could be asked (a hackbench worker
    /// that exited is what its siblings are), else what the priority tells.
    fn policy(&self, pid: u32, comm: &str, prio: i32) -> String {
        self.policies
            .get(&pid)
            .cloned()
            .filter(|p| p.fits(prio))
            .or_else(|| live_policy(pid).filter(|p| p.fits(prio)))
            .or_else(|| {
                self.policies
                    .iter()
                    .filter(|(other, p)| {
                        p.fits(prio) && self.tasks.get(other).is_some_and(|t| t.0 == comm)
                    })
                    .map(|(_, p)| p.clone())
                    .next()
            })
            .map_or_else(|| policy_from_prio(prio), |p| p.name)
    }
}

fn remember(tasks: &mut HashMap<u32, (String, i32)>, pid: u32, comm: &str, prio: i32) {
    match tasks.get_mut(&pid) {
        Some(t) if t.0 == comm && t.1 == prio => {}
        Some(t) => *t = (comm.to_string(), prio),
        None => {
            tasks.insert(pid, (comm.to_string(), prio));
        }
    }
}

/// The scheduling policy of `pid` if it still exists (the event has only
/// the kernel priority), with the real-time priority for FIFO and RR:
/// `SCHED_OTHER`, `SCHED_FIFO 90`, …
fn live_policy(pid: u32) -> Option<Policy> {
    if pid == 0 {
        return Some(Policy {
            name: "idle".into(),
            prio: None,
        });
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscalls on a pid; -1 when it is gone.
    let (p, rc) = unsafe {
        (
            libc::sched_getscheduler(pid as libc::pid_t),
            libc::sched_getparam(pid as libc::pid_t, &mut param),
        )
    };
    if p < 0 || rc < 0 {
        return None;
    }
    let rt = param.sched_priority;
    let (name, prio) = match p & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_OTHER => ("SCHED_OTHER".into(), None),
        libc::SCHED_FIFO => (format!("SCHED_FIFO {rt}"), Some(99 - rt)),
        libc::SCHED_RR => (format!("SCHED_RR {rt}"), Some(99 - rt)),
        libc::SCHED_BATCH => ("SCHED_BATCH".into(), None),
        libc::SCHED_IDLE => ("SCHED_IDLE".into(), None),
        6 => ("SCHED_DEADLINE".into(), Some(-1)),
        other => (format!("policy {other}"), None),
    };
    Some(Policy { name, prio })
}

/// A policy as asked, and the kernel priority it implies (`None`: a normal
/// policy, 100–139).
#[derive(Debug, Clone)]
struct Policy {
    name: String,
    prio: Option<i32>,
}

impl Policy {
    /// Whether it fits the priority the trace saw last (a task may change
    /// policy: `chrt` execs into the hog after `timeout` forked it).
    fn fits(&self, prio: i32) -> bool {
        match self.prio {
            Some(p) => p == prio,
            None => prio >= 100,
        }
    }
}

/// What a kernel priority tells of a task that is gone: `SCHED_FIFO/RR 90`
/// (real-time priority 99 − prio) or `normal`.
fn policy_from_prio(prio: i32) -> String {
    if prio < 100 {
        format!("SCHED_FIFO/RR {}", 99 - prio)
    } else {
        "normal".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name per test pid (tasks of one name are one culprit).
    fn name(pid: u32) -> &'static str {
        match pid {
            0 => "swapper/0",
            10 => "audio",
            66 => "hog",
            77 => "other",
            _ => "task",
        }
    }

    fn sw(cpu: usize, ms: u64, prev: u32, runnable: bool, next: u32) -> Event<'static> {
        sw_ns(cpu, ms * 1_000_000, prev, runnable, next)
    }

    fn sw_ns(cpu: usize, ts: u64, prev: u32, runnable: bool, next: u32) -> Event<'static> {
        Event::Switch {
            cpu,
            ts,
            prev_comm: name(prev),
            prev_pid: prev,
            prev_prio: 120,
            prev_runnable: runnable,
            next_comm: name(next),
            next_pid: next,
            next_prio: 120,
        }
    }

    const MS: u64 = 1_000_000;

    /// A tracker watching thread 10 as a monitor thread: a 1 ms grid from
    /// 10 ms, gaps kept from 0.5 ms late.
    fn monitor_tracker() -> GapTracker {
        let mut t = GapTracker::default();
        t.watch(
            10,
            Keep::Grid {
                first: 10 * MS,
                interval: MS,
                min_late: MS / 2,
            },
        );
        t
    }

    /// Thread 10 woken on CPU 1 at `ts` by the idle task's interrupt.
    fn wake_from_idle(ts: u64) -> Event<'static> {
        Event::Wakeup {
            cpu: 1,
            current: 0,
            ts,
            pid: 10,
            target_cpu: 1,
        }
    }

    #[test]
    fn tasks_of_one_name_are_one_culprit() {
        let mut t = GapTracker::default();
        t.watch(10, Keep::All);
        t.feed(&sw(0, 1, 0, false, 10));
        t.feed(&sw(0, 2, 10, true, 5));
        t.feed(&sw(0, 4, 5, true, 6));
        t.feed(&sw(0, 7, 6, false, 10));
        let a = t.account(10, 0, 10_000_000).unwrap();
        assert_eq!(a.tasks.len(), 1);
        assert_eq!(
            (a.tasks[0].tasks, a.tasks[0].pid, a.tasks[0].ms),
            (2, 6, 5.0)
        );
        assert!(a.clause().contains("task x2"), "{}", a.clause());
    }

    #[test]
    fn the_gap_covering_the_dry_moment_is_the_underruns_not_the_last_one() {
        let mut t = GapTracker::default();
        t.watch(10, Keep::All);
        t.feed(&sw(1, 1, 0, false, 10)); // audio runs
        t.feed(&sw(1, 2, 10, true, 66)); // the hog takes the CPU until 300 ms
        t.feed(&sw(1, 300, 66, false, 10));
        // It catches up, sleeps 0.5 ms for its next cycle, and runs again:
        // a callback stamped with its cycle's start notices "by 301 ms".
        t.feed(&sw_ns(1, 300 * MS + 100_000, 10, false, 0));
        t.feed(&sw_ns(1, 300 * MS + 600_000, 0, false, 10));
        let dry = 12 * MS;
        let covering = t.account_covering(10, dry).unwrap();
        assert_eq!(
            (covering.off_mono_ns, covering.ran_mono_ns),
            (2 * MS, 300 * MS)
        );
        assert_eq!(covering.tasks[0].pid, 66);
        // The last gap by then is the short sleep, which explains nothing.
        let last = t.account(10, dry, 301 * MS).unwrap();
        assert!(last.tasks.is_empty(), "{last:?}");
        // On the CPU at that moment: no gap covers it.
        assert_eq!(t.account_covering(10, 300 * MS + 50_000), None);
    }

    #[test]
    fn a_gap_is_split_into_asleep_and_runnable_and_charged_to_who_ran() {
        let mut t = GapTracker::default();
        t.watch(10, Keep::All);
        t.feed(&sw(1, 100, 5, false, 10)); // audio runs
        t.feed(&sw(1, 101, 10, false, 0)); // audio sleeps
        t.feed(&sw(1, 102, 0, false, 66)); // hog starts
        t.feed(&Event::Wakeup {
            cpu: 1,
            current: 66,
            ts: 105_000_000,
            pid: 10,
            target_cpu: 1,
        });
        t.feed(&sw(1, 395, 66, false, 77)); // hog ends
        t.feed(&sw(1, 396, 77, false, 10)); // audio runs
        let a = t.account(10, 0, 400_000_000).unwrap();
        assert_eq!(a.not_runnable_ms, 4.0);
        assert_eq!(a.runnable_ms, 291.0);
        assert_eq!(a.tasks[0].pid, 66);
        assert_eq!(a.tasks[0].ms, 290.0);
        assert_eq!(a.tasks[1].pid, 77);
        assert_eq!(a.tasks[1].ms, 1.0);
    }

    #[test]
    fn preempted_while_runnable_counts_as_runnable_from_the_switch() {
        let mut t = GapTracker::default();
        t.watch(10, Keep::All);
        t.feed(&sw(0, 1, 0, false, 10));
        t.feed(&sw(0, 2, 10, true, 66));
        t.feed(&sw(0, 12, 66, false, 10));
        let a = t.account(10, 0, 20_000_000).unwrap();
        assert_eq!((a.runnable_ms, a.not_runnable_ms), (10.0, 0.0));
        assert_eq!(a.tasks[0].ms, 10.0);
    }

    #[test]
    fn lost_events_mark_open_gaps_incomplete() {
        let mut t = GapTracker::default();
        t.watch(10, Keep::All);
        t.feed(&sw(0, 1, 10, true, 66));
        t.feed(&Event::Lost(3));
        t.feed(&sw(0, 5, 66, false, 10));
        assert!(!t.account(10, 0, 10_000_000).unwrap().complete);
        assert_eq!(t.lost, 3);
    }

    #[test]
    fn a_monitor_thread_keeps_only_its_late_wakeups() {
        let ms = 1_000_000;
        let keep = Keep::Grid {
            first: 10 * ms,
            interval: ms,
            min_late: ms / 2,
        };
        let us = 1_000;
        // Got the CPU at 12.005 (woken for 12 ms), slept at 12.012: it
        // planned 13 ms and ran at 13.01 — on time, although it slept so
        // soon after the 12 ms grid point.
        assert!(!keep.keeps(12 * ms + 5 * us, 12 * ms + 12 * us, 13 * ms + 10 * us));
        // … ran at 14.2: 1.2 ms late, although the gap is only 2.2 ms.
        assert!(keep.keeps(12 * ms + 5 * us, 12 * ms + 12 * us, 14 * ms + ms / 5));
        // A previous wake-up 0.3 ms late leaves a short gap; still kept.
        assert!(keep.keeps(
            12 * ms + 3 * ms / 10,
            12 * ms + 310 * us,
            13 * ms + 6 * ms / 10
        ));
        // Not seen running yet: planned after its switch-out.
        assert!(!keep.keeps(0, 12 * ms + ms / 10, 13 * ms + ms / 100));
        assert!(keep.keeps(0, 12 * ms + ms / 10, 14 * ms + ms / 5));
        // Before the first planned wake-up.
        assert!(!keep.keeps(0, 9 * ms, 10 * ms + 1000));
    }

    #[test]
    fn a_monitor_thread_late_while_it_had_the_cpu_is_accounted_by_its_stretch_on_it() {
        let (ms, us) = (MS, 1_000);
        let mut t = monitor_tracker();
        // Woken for 13 ms and ran at 13.005 (on time: its gap is not
        // kept), then the CPU was taken beneath the scheduler: it read its
        // clock at 14.243 ms and slept at 14.25.
        t.feed(&sw_ns(1, 12 * ms + 5 * us, 0, false, 10));
        t.feed(&sw_ns(1, 12 * ms + 12 * us, 10, false, 0));
        t.feed(&wake_from_idle(13 * ms));
        t.feed(&sw_ns(1, 13 * ms + 5 * us, 0, false, 10));
        t.feed(&sw_ns(1, 14 * ms + 250 * us, 10, false, 0));
        let (planned, read) = (13 * ms, 14 * ms + 243 * us);
        assert_eq!(t.account(10, planned, read + ms), None);
        let a = t.held_account(10, planned, read).unwrap();
        assert_eq!((a.cpu, a.ran_mono_ns), (1, 13 * ms + 5 * us));
        assert!((a.on_cpu_ms - 1.238).abs() < 1e-9, "{a:?}");
        assert!(a.tasks.is_empty() && a.complete);
        assert!(a.clause().contains("interrupts or the hypervisor"));
        // A cycle's few microseconds on the CPU are no stretch.
        t.feed(&sw_ns(1, 15 * ms + 5 * us, 0, false, 10));
        t.feed(&sw_ns(1, 15 * ms + 9 * us, 10, false, 0));
        assert_eq!(t.held_account(10, 15 * ms, 15 * ms + 8 * us), None);
    }

    #[test]
    fn a_switch_the_trace_did_not_show_is_inferred_from_who_runs_next() {
        // A kernel that does not trace switches out of the idle task: the
        // monitor thread sleeps at 12.012 ms, idle's timer interrupt wakes
        // it at 13.000, and the next line is its own switch out at 13.020.
        let (ms, us) = (MS, 1_000);
        let mut t = monitor_tracker();
        t.feed(&sw_ns(1, 12 * ms + 5 * us, 0, false, 10));
        t.feed(&sw_ns(1, 12 * ms + 12 * us, 10, false, 0));
        for k in 13..=20 {
            // On time, eight times over: no gap kept, no stretch held.
            t.feed(&wake_from_idle(k * ms));
            t.feed(&sw_ns(1, k * ms + 20 * us, 10, false, 0));
        }
        assert!(t.gaps_of(10).is_empty());
        assert_eq!(t.held_account(10, 20 * ms, 20 * ms + 10 * us), None);
        // Woken 1.3 ms late at 22.3 (planned 21): kept, and run at once.
        t.feed(&wake_from_idle(22 * ms + 300 * us));
        t.feed(&sw_ns(1, 22 * ms + 320 * us, 10, false, 0));
        let a = t.account(10, 21 * ms, 22 * ms + 310 * us).unwrap();
        assert_eq!(a.ran_mono_ns, 22 * ms + 300 * us);
        assert_eq!(a.runnable_ms, 0.0);
        // Nothing was lost: the kernel just does not trace that switch.
        assert!(a.complete);
    }
}
