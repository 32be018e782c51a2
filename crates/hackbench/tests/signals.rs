//! Stopping and failing: SIGTERM/SIGINT kill and reap every worker in both
//! modes (checked in /proc), a SIGKILLed parent takes its workers with it
//! (PR_SET_PDEATHSIG), a continuous run still reports what it finished, and
//! a worker that dies makes the run fail and names it.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xrunbench_test_support::procs::{self, alive};
use xrunbench_test_support::wait_for;

const OURS: &str = env!("CARGO_BIN_EXE_xrun-hackbench");

/// A load long enough to be caught mid-round: 2 groups × 4 fds = 16 tasks.
const LONG: &[&str] = &["-g", "2", "-f", "4", "-l", "1000000"];
const TASKS: usize = 16;

fn spawn(args: &[&str]) -> Child {
    Command::new(OURS)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// The pids of `ppid`'s children.
fn children_of(ppid: u32) -> Vec<u32> {
    procs::children_of(ppid).iter().map(|p| p.pid).collect()
}

/// Waits until `ready()` or panics after 20 s.
fn wait_until(what: &str, ready: impl FnMut() -> bool) {
    assert!(wait_for(20, ready), "timed out waiting for {what}");
}

/// Waits for the child to exit (or panics after 20 s).
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "parent did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

fn stderr_of(child: Child) -> String {
    String::from_utf8_lossy(&child.wait_with_output().expect("output").stderr).into_owned()
}

#[test]
fn sigterm_and_sigint_reap_every_process_worker() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut child = spawn(LONG);
        let pid = child.id();
        wait_until("all workers", || children_of(pid).len() == TASKS);
        let workers: HashSet<u32> = children_of(pid).into_iter().collect();
        std::thread::sleep(Duration::from_millis(200)); // let the round start
        signal(&child, sig);
        let status = wait_exit(&mut child);
        assert_eq!(
            status.code(),
            Some(0),
            "stopped by signal exits 0, as rt-tests"
        );
        let leftover: Vec<u32> = workers.iter().copied().filter(|&w| alive(w)).collect();
        assert!(
            leftover.is_empty(),
            "orphans after signal {sig}: {leftover:?}"
        );
        assert!(stderr_of(child).contains("stopped by signal"));
    }
}

#[test]
fn sigterm_stops_thread_mode_promptly() {
    let mut args = vec!["-T"];
    args.extend_from_slice(LONG);
    let mut child = spawn(&args);
    let pid = child.id();
    wait_until("all threads", || procs::threads(pid).len() > TASKS);
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, libc::SIGTERM);
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(0));
    assert!(children_of(pid).is_empty());
    assert!(stderr_of(child).contains("stopped by signal"));
}

#[test]
fn sigkilled_parent_takes_its_workers_along() {
    let mut child = spawn(LONG);
    let pid = child.id();
    wait_until("all workers", || children_of(pid).len() == TASKS);
    let workers = children_of(pid);
    signal(&child, libc::SIGKILL);
    let _ = wait_exit(&mut child);
    wait_until("workers to die with their parent", || {
        workers.iter().all(|&w| !alive(w))
    });
}

#[test]
fn continuous_run_reports_finished_rounds_after_sigterm() {
    for mode in ["-P", "-T"] {
        let dir = std::env::temp_dir().join(format!("xrun-hb-sig-{}-{mode}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let path = dir.join("r.json");
        let mut child = Command::new(OURS)
            .args([mode, "-g1", "-f2", "-l50", "--duration", "60", "--json"])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // A whole round first (its Time: line), however long that takes
        // on this machine.
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut seen = String::new();
        while !seen.contains("Time: ") {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).expect("stdout") > 0,
                "{mode}: no round ended"
            );
            seen.push_str(&line);
        }
        signal(&child, libc::SIGTERM);
        let status = wait_exit(&mut child);
        assert_eq!(status.code(), Some(0));
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).expect("stdout");
        seen.push_str(&rest);
        let r: xrunbench_schema::HackbenchReport =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("report written"))
                .expect("json");
        // Stopped by the signal, not at the end of its 60 s.
        assert_eq!(r.ended, "signal");
        assert!(
            r.rounds_completed >= 1,
            "{mode}: a round ended before the signal"
        );
        assert_eq!(
            r.messages,
            r.rounds_completed * 2 * 2 * 50,
            "only whole rounds count"
        );
        let times = seen.lines().filter(|l| l.starts_with("Time: ")).count();
        assert_eq!(times as u64, r.rounds_completed);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_dead_worker_fails_the_run_and_is_named() {
    let mut child = spawn(LONG);
    let pid = child.id();
    wait_until("all workers", || children_of(pid).len() == TASKS);
    std::thread::sleep(Duration::from_millis(200));
    let victim = children_of(pid).into_iter().min().expect("a worker");
    // SAFETY: killing one worker of our child.
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(1), "rt-tests would exit 0 here");
    let err = stderr_of(child);
    assert!(
        err.contains(&format!("pid {victim}) was killed by signal 9")),
        "{err}"
    );
    assert!(children_of(pid).is_empty());
}
