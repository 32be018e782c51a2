//! Process settings the player applies to itself: scheduling policy and
//! priority, CPU affinity, locked memory; and what the process cost.

use std::fmt;
use std::str::FromStr;

/// `--priority`: a scheduling policy for the playback thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// SCHED_FIFO at this priority (1..=99).
    Fifo(i32),
    /// SCHED_RR at this priority (1..=99).
    Rr(i32),
    /// SCHED_OTHER, optionally with a nice value (-20..=19).
    Other(Option<i32>),
}

impl FromStr for Priority {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected = "expected fifo:N or rr:N (N in 1..=99), or other[:NICE] (NICE in -20..=19)";
        let (policy, value) = match s.split_once(':') {
            Some((p, v)) => (p, Some(v)),
            None => (s, None),
        };
        let number = |v: Option<&str>, lo: i32, hi: i32| -> Result<i32, String> {
            let v = v.ok_or_else(|| format!("{s:?}: {expected}"))?;
            match v.parse::<i32>() {
                Ok(n) if (lo..=hi).contains(&n) => Ok(n),
                _ => Err(format!("{s:?}: {expected}")),
            }
        };
        match policy {
            "fifo" => Ok(Priority::Fifo(number(value, 1, 99)?)),
            "rr" => Ok(Priority::Rr(number(value, 1, 99)?)),
            "other" if value.is_none() => Ok(Priority::Other(None)),
            "other" => Ok(Priority::Other(Some(number(value, -20, 19)?))),
            _ => Err(format!("{s:?}: {expected}")),
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Priority::Fifo(n) => write!(f, "fifo:{n}"),
            Priority::Rr(n) => write!(f, "rr:{n}"),
            Priority::Other(None) => write!(f, "other"),
            Priority::Other(Some(n)) => write!(f, "other:{n}"),
        }
    }
}

/// `--cpu`: a CPU list in taskset's syntax (`0`, `0,2`, `1-3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?}: expected a CPU list like 0 or 0,2 or 1-3");
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                ),
                None => {
                    let n: usize = part.trim().parse().map_err(|_| bad())?;
                    (n, n)
                }
            };
            if lo > hi || hi >= libc::CPU_SETSIZE as usize {
                return Err(bad());
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(usize::to_string).collect();
        write!(f, "{}", parts.join(","))
    }
}

fn last_os_error() -> String {
    std::io::Error::last_os_error().to_string()
}

/// Applies `prio` to the calling thread with system calls only (no
/// allocation: safe in a real-time callback). Returns 0 or the errno.
pub fn set_priority_raw(prio: Priority) -> i32 {
    set_thread_priority_raw(0, prio)
}

/// Applies `prio` to thread `tid` of this process (0: the calling thread)
/// with system calls only. Returns 0 or the errno.
pub fn set_thread_priority_raw(tid: libc::pid_t, prio: Priority) -> i32 {
    let (policy, rt) = match prio {
        Priority::Fifo(n) => (libc::SCHED_FIFO, n),
        Priority::Rr(n) => (libc::SCHED_RR, n),
        Priority::Other(_) => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param { sched_priority: rt };
    // SAFETY: plain syscall on a thread id (0: the caller); param is valid.
    if unsafe { libc::sched_setscheduler(tid, policy, &param) } != 0 {
        return errno();
    }
    if let Priority::Other(Some(nice)) = prio {
        // SAFETY: plain syscall; on Linux PRIO_PROCESS with a thread id is
        // that thread (0: the caller).
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } != 0 {
            return errno();
        }
    }
    0
}

/// Whether thread `tid` runs under a real-time policy (SCHED_FIFO or
/// SCHED_RR); `None` when it cannot be read (the thread has gone).
pub fn is_real_time(tid: libc::pid_t) -> Option<bool> {
    // SAFETY: plain syscall on a thread id.
    match unsafe { libc::sched_getscheduler(tid) } {
        p if p < 0 => None,
        p => {
            let p = p & !libc::SCHED_RESET_ON_FORK;
            Some(p == libc::SCHED_FIFO || p == libc::SCHED_RR)
        }
    }
}

/// The ids of this process's threads, as `/proc/self/task` lists them.
pub fn thread_ids() -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The calling thread's policy and priority, as [`current_scheduling`]
/// saves them for [`restore_scheduling`].
#[derive(Clone, Copy)]
pub struct Scheduling {
    policy: i32,
    param: libc::sched_param,
}

/// Saves the calling thread's policy and priority (`None`: unreadable).
pub fn current_scheduling() -> Option<Scheduling> {
    // SAFETY: plain syscalls on the calling thread; param is written by the
    // kernel.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut param: libc::sched_param = std::mem::zeroed();
        if policy < 0 || libc::sched_getparam(0, &mut param) != 0 {
            return None;
        }
        Some(Scheduling { policy, param })
    }
}

/// Puts back what [`current_scheduling`] saved (the nice value was never
/// changed). Returns 0 or the errno.
pub fn restore_scheduling(saved: &Scheduling) -> i32 {
    // SAFETY: plain syscall on the calling thread; param is valid.
    if unsafe { libc::sched_setscheduler(0, saved.policy, &saved.param) } != 0 {
        return errno();
    }
    0
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

/// Applies `prio` to the calling thread. Returns what the report says:
/// the setting, and `failed: …` when it did not take.
pub fn apply_priority(prio: Priority) -> String {
    describe_result(&prio.to_string(), set_priority_raw(prio))
}

/// The report's words for a setting and its errno (0: it took).
pub fn describe_result(setting: &str, errno: i32) -> String {
    match errno {
        0 => setting.to_string(),
        e => format!("{setting} failed: {}", std::io::Error::from_raw_os_error(e)),
    }
}

/// The CPU set of `cpus`, built ahead so that applying it allocates nothing.
pub fn cpu_set(cpus: &CpuList) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_SET indexes within CPU_SETSIZE
    // (checked when the list was parsed).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in &cpus.0 {
            libc::CPU_SET(c, &mut set);
        }
        set
    }
}

/// Pins the calling thread to `set` (system call only). Returns 0 or the errno.
pub fn set_affinity_raw(set: &libc::cpu_set_t) -> i32 {
    set_thread_affinity_raw(0, set)
}

/// Pins thread `tid` of this process (0: the calling thread) to `set`
/// (system call only). Returns 0 or the errno.
pub fn set_thread_affinity_raw(tid: libc::pid_t, set: &libc::cpu_set_t) -> i32 {
    // SAFETY: set is a valid cpu_set_t of the size given.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if r != 0 {
        errno()
    } else {
        0
    }
}

/// Pins the calling thread to `cpus`. Returns the report's string.
pub fn apply_affinity(cpus: &CpuList) -> String {
    describe_result(&cpus.to_string(), set_affinity_raw(&cpu_set(cpus)))
}

/// Locks the process's memory so that no page fault stalls playback.
///
/// MCL_ONFAULT locks pages as they are touched instead of faulting in
/// every mapping up front: without it, mlockall would make every library
/// and thread stack (8 MiB each, and the sound server's client threads have
/// them) resident, multiplying the RSS for nothing. The playback buffers
/// are touched before playback starts, so the steady state still never
/// faults.
pub fn lock_memory() -> String {
    let flags = libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT;
    // SAFETY: plain syscall.
    if unsafe { libc::mlockall(flags) } == 0 {
        return "locked (current+future, on fault)".into();
    }
    // Kernels before 4.4 do not know MCL_ONFAULT.
    // SAFETY: plain syscall.
    if unsafe { libc::mlockall(libc::MCL_CURRENT) } == 0 {
        return "locked (current)".into();
    }
    format!("failed: {}", last_os_error())
}

/// CPU time and peak memory of this process so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// User CPU, ms.
    pub user_ms: f64,
    /// System CPU, ms.
    pub sys_ms: f64,
    /// Peak RSS, KiB.
    pub max_rss_kib: u64,
}

/// getrusage(RUSAGE_SELF).
pub fn usage() -> Usage {
    // SAFETY: rusage is plain data, filled by the call.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |tv: libc::timeval| tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3;
    Usage {
        user_ms: ms(ru.ru_utime),
        sys_ms: ms(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_priorities() {
        assert_eq!("fifo:80".parse(), Ok(Priority::Fifo(80)));
        assert_eq!("rr:1".parse(), Ok(Priority::Rr(1)));
        assert_eq!("other".parse(), Ok(Priority::Other(None)));
        assert_eq!("other:-5".parse(), Ok(Priority::Other(Some(-5))));
        for bad in ["fifo", "fifo:0", "fifo:100", "rr:x", "idle", "other:20", ""] {
            assert!(bad.parse::<Priority>().is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_cpu_lists() {
        assert_eq!("1".parse(), Ok(CpuList(vec![1])));
        assert_eq!("0,2-3,2".parse(), Ok(CpuList(vec![0, 2, 3])));
        for bad in ["", "a", "3-1", "1,", "99999"] {
            assert!(bad.parse::<CpuList>().is_err(), "{bad}");
        }
    }
}
