//! The command line against rt-tests hackbench: every option, every
//! invalid combination, exact messages, exit codes and output lines.
//!
//! Where `/usr/bin/hackbench` (Debian rt-tests, installed by `cargo xtask
//! test`) exists, each case is also run through it and the two compared
//! with the program name normalised; the expected texts below are the
//! format strings of rt-tests' source and of glibc's getopt, so the test
//! means the same without it.

use std::process::{Command, Output};

const OURS: &str = env!("CARGO_BIN_EXE_xrun-hackbench");
const REFERENCE: &str = "/usr/bin/hackbench";

fn run(prog: &str, args: &[&str]) -> Output {
    Command::new(prog).args(args).output().expect("spawn")
}

/// stdout, stderr (program name replaced by PROG) and exit code.
fn shape(prog: &str, args: &[&str]) -> (String, String, i32) {
    let o = run(prog, args);
    let norm = |b: &[u8]| String::from_utf8_lossy(b).replace(prog, "PROG");
    (
        norm(&o.stdout),
        norm(&o.stderr),
        o.status.code().unwrap_or(-1),
    )
}

fn have_reference() -> bool {
    std::path::Path::new(REFERENCE).exists()
}

/// rt-tests' usage text, from its `print_usage_exit()`.
const RT_USAGE: &str = "hackbench V 2.40\nUsage:\nhackbench <options>\n\n\
-f       --fds=NUM         number of fds\n\
-F       --fifo            use SCHED_FIFO for main thread\n\
-g       --groups=NUM      number of groups to be used\n\
-h       --help            print this message\n\
-l       --loops=LOOPS     how many message should be send\n\
-p       --pipe            send data via a pipe\n\
-i       --inet            send data via a inet tcp connection\n\
-s       --datasize=SIZE   message size\n\
-T       --threads         use POSIX threads\n\
-P       --process         use fork (default)\n";

/// Cases that must fail exactly as rt-tests fails: args, stderr line.
const USAGE_ERRORS: &[(&[&str], &str)] = &[
    (&["-f", "0"], "PROG: --fds|-f requires an integer > 0"),
    (&["-g", "0"], "PROG: --groups|-g requires an integer > 0"),
    (&["-l", "0"], "PROG: --loops|-l requires an integer > 0"),
    (&["-s", "0"], "PROG: --datasize|-s requires an integer > 0"),
    (&["-g", "abc"], "PROG: --groups|-g requires an integer > 0"),
    (&["-gx"], "PROG: --groups|-g requires an integer > 0"),
    (&["--fds=", "-g1"], "PROG: --fds|-f requires an integer > 0"),
    (
        &["--loops", "zero", "-g1"],
        "PROG: --loops|-l requires an integer > 0",
    ),
    (
        &["-p", "-i"],
        "PROG: --pipe|-p and --inet|-i cannot be used together",
    ),
    (
        &["--pipe", "--inet"],
        "PROG: --pipe|-p and --inet|-i cannot be used together",
    ),
    (&["-x"], "PROG: invalid option -- 'x'"),
    (&["-:"], "PROG: invalid option -- ':'"),
    (&["-g"], "PROG: option requires an argument -- 'g'"),
    (&["-T", "-s"], "PROG: option requires an argument -- 's'"),
    (&["--foo"], "PROG: unrecognized option '--foo'"),
    (&["--foo=3"], "PROG: unrecognized option '--foo=3'"),
    (
        &["--pipe=1"],
        "PROG: option '--pipe' doesn't allow an argument",
    ),
    (
        &["--pi=1"],
        "PROG: option '--pipe' doesn't allow an argument",
    ),
    (
        &["--groups"],
        "PROG: option '--groups' requires an argument",
    ),
    (&["--gr"], "PROG: option '--groups' requires an argument"),
    (
        &["--p"],
        "PROG: option '--p' is ambiguous; possibilities: '--pipe' '--processes'",
    ),
    (
        &["--f=2"],
        "PROG: option '--f=2' is ambiguous; possibilities: '--fds' '--fifo'",
    ),
];

#[test]
fn usage_errors_match_rt_tests_byte_for_byte() {
    for (args, line) in USAGE_ERRORS {
        let (out, err, code) = shape(OURS, args);
        assert_eq!(code, 1, "{args:?}");
        assert_eq!(err, format!("{line}\n"), "{args:?}");
        assert!(out.starts_with(RT_USAGE), "{args:?}: usage on stdout");
        if have_reference() {
            let (rout, rerr, rcode) = shape(REFERENCE, args);
            assert_eq!(
                (rerr.as_str(), rcode),
                (err.as_str(), code),
                "{args:?} vs rt-tests"
            );
            assert!(
                out.starts_with(&rout),
                "{args:?}: our usage extends rt-tests'"
            );
        }
    }
}

#[test]
fn help_prints_usage_and_exits_0() {
    for args in [&["-h"][..], &["--help"], &["--he"], &["-g", "3", "-h"]] {
        let (out, err, code) = shape(OURS, args);
        assert_eq!((code, err.as_str()), (0, ""), "{args:?}");
        assert!(out.starts_with(RT_USAGE));
        if have_reference() {
            let (rout, _, rcode) = shape(REFERENCE, args);
            assert_eq!(rcode, 0);
            assert_eq!(rout, RT_USAGE, "the text we copied is rt-tests' text");
        }
    }
}

/// Matches rt-tests' `"Time: %lu.%03lu\n"`.
fn is_time_line(l: &str) -> bool {
    let Some(t) = l.strip_prefix("Time: ") else {
        return false;
    };
    let Some((s, ms)) = t.split_once('.') else {
        return false;
    };
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit())
        && ms.len() == 3
        && ms.bytes().all(|b| b.is_ascii_digit())
}

/// Valid command lines (small loads): same banner, same shape, exit 0.
const VALID: &[&[&str]] = &[
    &["-g", "1", "-f", "2", "-l", "2"],
    &["-g1", "-f2", "-l2", "-s", "7"],
    &["-T", "-g", "2", "-f", "1", "-l", "3"],
    &["-P", "-g", "1", "-f", "1", "-l", "1"],
    &["-T", "-P", "-g", "1", "-f", "1", "-l", "1"],
    &["-p", "-g", "1", "-f", "2", "-l", "2"],
    &["-i", "-g", "1", "-f", "2", "-l", "2"],
    &["-Tp", "-g1", "-f2", "-l2"],
    &["-Ti", "-g1", "-f2", "-l2"],
    &[
        "--threads",
        "--pipe",
        "--groups",
        "2",
        "--fds=2",
        "--loops=2",
        "--datasize=3",
    ],
    &[
        "--process",
        "--inet",
        "--gr=1",
        "--fd",
        "1",
        "--lo",
        "1",
        "--data",
        "1",
    ],
    &["--thr", "--pi", "-g", "1", "-f", "1", "-l", "1"],
    &["-g", "+2x", "-f", " 1", "-l", "1"],
    &["-g", "4294967297", "-f", "1", "-l", "1"],
];

#[test]
fn valid_runs_print_rt_tests_lines() {
    for args in VALID {
        let (out, err, code) = shape(OURS, args);
        assert_eq!((code, err.as_str()), (0, ""), "{args:?}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{args:?}: {out}");
        assert!(is_time_line(lines[2]), "{args:?}: {}", lines[2]);
        if have_reference() {
            let (rout, rerr, rcode) = shape(REFERENCE, args);
            assert_eq!((rcode, rerr.as_str()), (0, ""), "{args:?}");
            let rlines: Vec<&str> = rout.lines().collect();
            assert_eq!(
                rlines[..2],
                lines[..2],
                "{args:?}: banner differs from rt-tests"
            );
            assert!(is_time_line(rlines[2]));
        }
    }
}

#[test]
fn banner_numbers_follow_rt_tests_arithmetic() {
    let (out, _, code) = shape(OURS, &["-T", "-g", "3", "-f", "2", "-l", "1", "-s", "5"]);
    assert_eq!(code, 0);
    assert!(out.starts_with(
        "Running in threaded mode with 3 groups using 4 file descriptors each (== 12 tasks)\n\
         Each sender will pass 1 messages of 5 bytes\nTime: "
    ));
}

#[test]
fn deliberate_differences_from_rt_tests() {
    // Negative values: rt-tests stores them unsigned and runs out of memory.
    for (opt, name) in [
        ("-g", "--groups|-g"),
        ("-f", "--fds|-f"),
        ("-l", "--loops|-l"),
        ("-s", "--datasize|-s"),
    ] {
        let (_, err, code) = shape(OURS, &[opt, "-3"]);
        assert_eq!(
            (code, err),
            (1, format!("PROG: {name} requires an integer > 0\n"))
        );
    }
    // `--groups=N` as the last argument: rt-tests 2.4 rejects it.
    let (out, _, code) = shape(OURS, &["-f", "1", "-l", "1", "--groups=2"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("Running in process mode with 2 groups"));
}

#[test]
fn old_positional_form_sets_groups_mode_and_loops() {
    let (out, _, code) = shape(OURS, &["-f", "1", "3"]);
    assert_eq!(code, 0);
    assert!(out.starts_with(
        "Running in process mode with 3 groups using 2 file descriptors each (== 6 tasks)\n"
    ));
    let (out, _, code) = shape(OURS, &["-f", "1", "-pipe", "2", "thread", "4"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(
        "Running in threaded mode with 2 groups using 2 file descriptors each (== 4 tasks)\n\
         Each sender will pass 4 messages of 100 bytes\n"
    ));
    let (out, _, code) = shape(OURS, &["-f", "1", "-l", "1", "--", "2"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Running in process mode with 2 groups"),
        "{out}"
    );
    let (_, err, code) = shape(OURS, &["0"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "PROG: <num groups> requires an integer > 0, not '0'\n")
    );
    let (_, err, code) = shape(OURS, &["2", "fibers"]);
    assert_eq!(code, 1);
    assert!(err.contains("'process' or 'thread'"), "{err}");
}

#[test]
fn extension_options_are_validated() {
    for (args, line) in [
        (
            &["--repeat", "0"][..],
            "PROG: --repeat requires an integer > 0",
        ),
        (
            &["--duration", "0"],
            "PROG: --duration requires a number of seconds > 0",
        ),
        (
            &["--duration", "soon"],
            "PROG: --duration requires a number of seconds > 0",
        ),
        (&["--json="], "PROG: --json requires a file name or -"),
        (&["--json"], "PROG: option '--json' requires an argument"),
    ] {
        let (out, err, code) = shape(OURS, args);
        assert_eq!((code, err), (1, format!("{line}\n")), "{args:?}");
        assert!(out.starts_with(RT_USAGE));
    }
}

#[test]
fn repeat_prints_one_time_line_per_round() {
    let (out, _, code) = shape(OURS, &["-g1", "-f2", "-l2", "--repeat", "3"]);
    assert_eq!(code, 0);
    let times = out.lines().filter(|l| is_time_line(l)).count();
    assert_eq!(times, 3, "{out}");
}

#[test]
fn fifo_either_runs_or_fails_like_rt_tests() {
    let (out, err, code) = shape(OURS, &["-F", "-g1", "-f2", "-l2"]);
    if code == 0 {
        assert!(out.lines().last().is_some_and(is_time_line), "{out}");
    } else {
        assert_eq!(code, 1);
        assert!(
            err.contains("can't change to fifo in main (error: Operation not permitted)"),
            "{err}"
        );
    }
    if have_reference() {
        let (_, _, rcode) = shape(REFERENCE, &["-F", "-g1", "-f2", "-l2"]);
        assert_eq!(rcode, code, "-F succeeds here iff it succeeds for rt-tests");
    }
}
