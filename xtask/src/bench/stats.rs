//! The few statistics the benchmarks print.

/// Median of `values` (mean of the two middle ones for an even count);
/// `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 0 {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// CPU time and peak RSS of one finished child process, from wait4(2).
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildCost {
    /// User + system CPU, ms.
    pub cpu_ms: f64,
    /// Peak resident set, KiB.
    pub max_rss_kib: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Whether it exited 0.
    pub success: bool,
}

/// Waits for `child` with wait4(2), returning its own resource usage (not
/// the sum over every child we ever reaped, which getrusage would give).
pub fn wait_with_cost(child: std::process::Child) -> std::io::Result<ChildCost> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain old data; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own unreaped child; the pointers are valid.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The Child handle must not reap again; forgetting it is safe (no fd
    // is leaked because stdio was not piped by our callers).
    std::mem::forget(child);
    let ms = |tv: libc::timeval| tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3;
    Ok(ChildCost {
        cpu_ms: ms(ru.ru_utime) + ms(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss as u64,
        nvcsw: ru.ru_nvcsw as u64,
        nivcsw: ru.ru_nivcsw as u64,
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
