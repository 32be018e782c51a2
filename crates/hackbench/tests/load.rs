//! The load itself, end to end: every message and byte arrives (counted by
//! the receivers), in every mode and transport, through the library and
//! through the binary's JSON report; large messages in thread mode; a
//! failed worker fails the run by name. Nothing here asserts speed.

use std::process::Command;

use xrunbench_hackbench::{run_for, run_round, Limit, Mode, Params, Transport};
use xrunbench_schema::hackbench::{HackbenchReport, HACKBENCH_SCHEMA};

const OURS: &str = env!("CARGO_BIN_EXE_xrun-hackbench");

fn small(mode: Mode, transport: Transport) -> Params {
    Params {
        groups: 2,
        fds: 3,
        loops: 7,
        datasize: 33,
        mode,
        transport,
        fifo: false,
    }
}

const MODES: [Mode; 2] = [Mode::Process, Mode::Thread];
const TRANSPORTS: [Transport; 3] = [Transport::Socket, Transport::Pipe, Transport::Inet];

#[test]
fn every_message_and_byte_arrives_in_every_mode() {
    for mode in MODES {
        for transport in TRANSPORTS {
            let p = small(mode, transport);
            let r = run_round(&p).unwrap_or_else(|e| panic!("{mode:?}/{transport:?}: {e}"));
            // groups × fds² × loops messages of datasize bytes.
            assert_eq!(r.messages, 2 * 3 * 3 * 7, "{mode:?}/{transport:?}");
            assert_eq!(r.bytes, 2 * 3 * 3 * 7 * 33, "{mode:?}/{transport:?}");
            assert!(
                r.voluntary_ctxsw > 0,
                "workers block at least on the barrier"
            );
        }
    }
}

#[test]
fn large_messages_work_in_thread_mode() {
    // rt-tests segfaults here: its 64 KiB stack buffer overflows the
    // PTHREAD_STACK_MIN stack.
    for mode in MODES {
        let p = Params {
            groups: 1,
            fds: 2,
            loops: 2,
            datasize: 65536,
            mode,
            transport: Transport::Socket,
            fifo: false,
        };
        let r = run_round(&p).expect("-s 65536");
        assert_eq!(r.bytes, 2 * 2 * 2 * 65536);
    }
    let out = Command::new(OURS)
        .args(["-T", "-s", "65536", "-g", "1", "-f", "2", "-l", "2"])
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Each sender will pass 2 messages of 65536 bytes\nTime: "),
        "{stdout}"
    );
}

#[test]
fn run_for_counts_rounds() {
    let p = small(Mode::Thread, Transport::Pipe);
    let mut seen = 0;
    let limit = Limit {
        rounds: Some(3),
        duration: None,
    };
    let s = run_for(&p, &limit, |_| seen += 1);
    assert_eq!(
        (s.rounds.completed(), seen, s.ended.as_str()),
        (3, 3, "rounds")
    );
    let one = run_for(&p, &Limit::default(), |_| {});
    assert_eq!(
        one.rounds.completed(),
        1,
        "no limit means plain hackbench: one round"
    );
}

fn json_of(args: &[&str]) -> HackbenchReport {
    let out = Command::new(OURS)
        .args(args)
        .args(["--json", "-"])
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{args:?}: {out:?}");
    // With --json -, stdout is the report alone; the human lines go to stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("Running in "), "{stderr}");
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

#[test]
fn json_report_counts_everything_the_receivers_got() {
    for (mode, flag) in [("process", "-P"), ("thread", "-T")] {
        for (transport, tflag) in [("socket", None), ("pipe", Some("-p")), ("inet", Some("-i"))] {
            let mut args = vec![
                flag, "-g", "2", "-f", "4", "-l", "5", "-s", "10", "--repeat", "2",
            ];
            args.extend(tflag);
            let r = json_of(&args);
            assert_eq!(r.schema, HACKBENCH_SCHEMA);
            assert_eq!(
                (r.params.mode.as_str(), r.params.transport.as_str()),
                (mode, transport)
            );
            assert_eq!(r.rounds_completed, 2);
            assert_eq!(r.rounds_us.len(), 2);
            assert_eq!(r.messages, 2 * (2 * 4 * 4 * 5));
            assert_eq!(r.bytes, r.messages * 10);
            assert_eq!(r.ended, "rounds");
            assert_eq!(r.error, None);
            assert!(r
                .rounds
                .iter()
                .all(|x| x.messages == 160 && x.bytes == 1600));
            assert_eq!(
                r.voluntary_ctxsw,
                r.rounds.iter().map(|x| x.voluntary_ctxsw).sum::<u64>()
            );
        }
    }
}

#[test]
fn duration_runs_rounds_back_to_back_and_writes_a_file() {
    let dir = std::env::temp_dir().join(format!("xrun-hackbench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("report.json");
    let out = Command::new(OURS)
        .args(["-g1", "-f2", "-l2", "--duration", "0.3", "--json"])
        .arg(&path)
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{out:?}");
    let r: HackbenchReport =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("report")).expect("json");
    assert_eq!(r.ended, "duration");
    assert!(r.rounds_completed >= 1);
    let times = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("Time: "))
        .count();
    assert_eq!(times as u64, r.rounds_completed, "one Time: line per round");
    assert!(
        !path.with_extension("json.tmp").exists(),
        "written by rename"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_report_fails_before_the_load_runs() {
    let out = Command::new(OURS)
        .args(["-g1", "-f1", "-l1", "--json", "/nonexistent-dir/r.json"])
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write the report /nonexistent-dir/r.json"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing ran");
}

#[test]
fn a_long_load_keeps_a_bounded_evenly_spread_sample_and_exact_totals() {
    // More rounds than the report keeps: every count stays exact, the
    // kept rounds are every k-th one.
    let n = 3000u64;
    let r = json_of(&["-T", "-g", "1", "-f", "1", "-l", "1", "--repeat", "3000"]);
    assert_eq!(r.rounds_completed, n);
    let k = r.rounds_kept_every;
    assert!(k.is_power_of_two() && k > 1, "k {k}");
    assert_eq!(r.rounds_us.len() as u64, n.div_ceil(k));
    assert!(r.rounds_us.len() <= xrunbench_hackbench::rounds::CAP);
    assert_eq!(r.rounds.len(), r.rounds_us.len());
    assert_eq!(r.messages, n, "one message per round, all counted");
    let total = r.rounds_us_total.expect("the exact total");
    assert!(total >= r.rounds_us.iter().sum::<u64>());
    assert_eq!(r.round_totals(), Some((n, total)));
}
