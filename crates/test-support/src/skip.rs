//! How a test that cannot run says so.
//!
//! libtest has no way for a running test to report itself "ignored", and
//! it captures what a test prints through `eprintln!`. So a skip is made
//! visible three ways: a line written straight to the process's stderr
//! (not captured, so `cargo test` shows it beside the test list), a line
//! appended to the file named by [`SKIP_LOG_ENV`] (`cargo xtask test`
//! reads it and lists every skip at the end), and — where no test may
//! skip — a panic, so the test fails with the reason instead of passing
//! having checked nothing.

use std::io::Write;

/// Environment variable naming the file every skip is appended to, one
/// line each: `test<TAB>reason`.
pub const SKIP_LOG_ENV: &str = "XRUNBENCH_SKIP_LOG";

/// Environment variable that, set to `1`, turns every skip into a failure
/// (`cargo xtask test` sets it when it runs as root).
pub const NO_SKIP_ENV: &str = "XRUNBENCH_NO_SKIP";

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether a skip must fail the test: in CI (`CI` set, as every CI system
/// sets it), or when [`NO_SKIP_ENV`] is `1`.
pub fn skipping_forbidden() -> bool {
    let set = |name: &str| {
        std::env::var(name)
            .map(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
            .unwrap_or(false)
    };
    set("CI") || set(NO_SKIP_ENV)
}

/// Records that test `name` did not run, and why; panics instead where
/// skipping is forbidden. Use [`skip_unless!`](crate::skip_unless), which
/// also returns from the test.
pub fn skipped(name: &str, reason: &str) {
    let reason = reason.replace(['\n', '\t'], " ");
    if skipping_forbidden() {
        panic!("{name} cannot run here and no test may skip (CI or root): {reason}");
    }
    // Straight to fd 2: eprintln! would be captured by the test harness.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {name}: {reason}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        // One write of one short line with O_APPEND: lines from tests
        // running in parallel (and from several test binaries) never mix.
        let line = format!("{name}\t{reason}\n");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The skips a log file holds, as (test, reason) pairs in the order they
/// were written; an absent file holds none.
pub fn read_log(path: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(t, r)| (t.to_string(), r.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_name_is_the_function_path() {
        let name = crate::test_name!();
        assert!(
            name.ends_with("skip::tests::test_name_is_the_function_path"),
            "{name}"
        );
    }

    #[test]
    fn a_log_line_reads_back_as_test_and_reason() {
        let dir = std::env::temp_dir().join(format!("xrb-skiplog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skips");
        std::fs::write(&log, "a::b\tneeds root\nbroken line\nc::d\tno jackd\n").unwrap();
        assert_eq!(
            read_log(&log),
            vec![
                ("a::b".to_string(), "needs root".to_string()),
                ("c::d".to_string(), "no jackd".to_string())
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
