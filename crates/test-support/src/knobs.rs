//! The real kernel knobs the suites change (as root) to prove that knobs
//! go back: two sysctls every Linux has, read from /proc and given values
//! other than the ones found.

use std::path::Path;

/// `kernel.sched_rr_timeslice_ms`: harmless to change, read back exactly.
pub const RR: &str = "kernel.sched_rr_timeslice_ms";

/// `kernel.sched_autogroup_enabled`: a second knob, for "every knob back".
pub const AG: &str = "kernel.sched_autogroup_enabled";

/// A sysctl's current value (`kernel.x_y` read from /proc/sys/kernel/x_y).
pub fn sysctl(name: &str) -> String {
    std::fs::read_to_string(Path::new("/proc/sys").join(name.replace('.', "/")))
        .unwrap()
        .trim()
        .to_string()
}

/// A value for [`RR`] different from `now`.
pub fn other_timeslice(now: &str) -> &'static str {
    if now == "50" {
        "60"
    } else {
        "50"
    }
}

/// A value for [`AG`] different from `now`.
pub fn other_autogroup(now: &str) -> &'static str {
    if now == "0" {
        "1"
    } else {
        "0"
    }
}

/// A configuration's `sysctl = { "name" = value, … }` line.
pub fn sysctls_line(pairs: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("\"{name}\" = {value}"))
        .collect();
    format!("sysctl = {{ {} }}", pairs.join(", "))
}

/// A value for `name` ([`RR`] or [`AG`]) different from `now`.
pub fn other_value(name: &str, now: &str) -> &'static str {
    match name {
        RR => other_timeslice(now),
        AG => other_autogroup(now),
        _ => panic!("no other value known for {name}"),
    }
}

/// A configuration's `sysctl = { … }` line giving each of `names` ([`RR`],
/// [`AG`]) a value other than the one it has now.
pub fn changed_sysctls(names: &[&str]) -> String {
    let pairs: Vec<(&str, &str)> = names
        .iter()
        .map(|&name| (name, other_value(name, &sysctl(name))))
        .collect();
    sysctls_line(&pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sysctls_line_is_an_inline_table_of_the_pairs() {
        assert_eq!(
            sysctls_line(&[(RR, "-5"), (AG, "1")]),
            "sysctl = { \"kernel.sched_rr_timeslice_ms\" = -5, \"kernel.sched_autogroup_enabled\" = 1 }"
        );
        assert_eq!(other_value(RR, "50"), "60");
        assert_eq!(other_value(AG, "0"), "1");
    }
}
