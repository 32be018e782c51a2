//! CLOCK_MONOTONIC in nanoseconds, the one clock every figure is measured on.
//!
//! The kernel's PCM trigger timestamps are CLOCK_MONOTONIC too (the player
//! asks for that timestamp type), so they compare directly.

/// Nanoseconds on CLOCK_MONOTONIC.
pub type MonoNs = i64;

/// Now, on CLOCK_MONOTONIC.
pub fn now() -> MonoNs {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    from_timespec(ts)
}

/// A timespec as nanoseconds.
// tv_sec and tv_nsec are 32-bit on armv7: the conversion is not useless there.
#[allow(clippy::useless_conversion)]
pub fn from_timespec(ts: libc::timespec) -> MonoNs {
    i64::from(ts.tv_sec) * 1_000_000_000 + i64::from(ts.tv_nsec)
}

/// Sleeps until `deadline` on CLOCK_MONOTONIC. Returns `false` if a signal
/// interrupted the sleep (so the caller can look at its stop flag).
pub fn sleep_until(deadline: MonoNs) -> bool {
    let ts = libc::timespec {
        tv_sec: (deadline.div_euclid(1_000_000_000)) as libc::time_t,
        tv_nsec: (deadline.rem_euclid(1_000_000_000)) as libc::c_long,
    };
    // SAFETY: ts is valid; a null remainder is allowed with TIMER_ABSTIME.
    let r = unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
    r != libc::EINTR
}

/// Nanoseconds to milliseconds.
pub fn ms(ns: MonoNs) -> f64 {
    ns as f64 / 1e6
}

/// Frames at `rate` as nanoseconds.
pub fn frames_to_ns(frames: i64, rate: u32) -> MonoNs {
    (frames as i128 * 1_000_000_000 / rate as i128) as MonoNs
}
