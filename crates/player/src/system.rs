//! Process settings the player applies to itself: scheduling policy and
//! priority, CPU affinity, locked memory; and what the process cost.

use xrunbench_schema::{CpuList, Priority};

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
        Priority::Fifo(n) => (libc::SCHED_FIFO, i32::from(n)),
        Priority::Rr(n) => (libc::SCHED_RR, i32::from(n)),
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
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, i32::from(nice)) } != 0
        {
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

/// The calling thread's kernel id (what a scheduler trace names it by).
pub fn current_tid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
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
/// CPUs a `cpu_set_t` cannot name are left out (`--cpu` refuses them).
pub fn cpu_set(cpus: &CpuList) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data, all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.cpus() {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: c is within the set, checked above.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    set
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
