//! The latency monitor and the scheduler trace, on this machine's real
//! scheduler and tracefs:
//!
//! - a SCHED_FIFO hog on the player's CPU for 300 ms is one underrun whose
//!   account names the hog (comm and pid) as at least 90 % of the playback
//!   thread's runnable wait, and the monitor on that CPU (below the hog,
//!   above the player) shows a spike of the hog's length ending when the
//!   underrun was noticed (within 5 ms);
//! - a clean run at FIFO 99: no spike over the threshold while the CPU was
//!   otherwise idle (see the test for what that can honestly mean on a
//!   shared 2-CPU virtual machine);
//! - the tracing state (our instance, a mount we made) is restored on
//!   every way out: the end, an error, a panic, SIGTERM, SIGKILL followed
//!   by `xrun-trial restore`.
//!
//! They need root (SCHED_FIFO, tracefs) and two CPUs, and skip otherwise.

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};
use xrunbench_test_support::boards::bin_dir;
use xrunbench_test_support::{is_root, wait_for};

use serde_json::{json, Value};
use xrunbench_test_support::servers::{JackConfig, JackServer};

const TRACING: &str = "/sys/kernel/tracing";

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Why this machine cannot run these tests; `None` when it can.
fn cannot_run() -> Option<String> {
    if !is_root() || cpus() < 2 {
        return Some("needs root and two CPUs".into());
    }
    // Mounted or not: a trial mounts tracefs itself when it is not (and
    // unmounts it afterwards), so what these tests need is the kernel's.
    let kernel_has_tracefs = std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| {
        f.lines()
            .any(|l| l.split_whitespace().last() == Some("tracefs"))
    });
    if !kernel_has_tracefs || !Path::new(TRACING).is_dir() {
        return Some(format!(
            "this kernel has no tracefs (or no {TRACING} to mount it on)"
        ));
    }
    None
}

fn xrun_trial() -> Command {
    let mut c = Command::new(bin_dir().join("xrun-trial"));
    c.arg("--bin-dir").arg(bin_dir());
    c
}

/// A trial on the virtual sink: the writer pinned to CPU 1 at FIFO 10
/// (above everything else the machine runs there, below the hogs), 20 ms
/// buffer, 5 ms period, no load; the monitor as given.
fn spec(work: &Path, seconds: u64, monitor: Value) -> Value {
    json!({
        "schema": "xrunbench.trial-spec/1",
        "trial": { "scenario": "t", "config": "m", "k": 1, "seq": 1 },
        "audio": { "tone": { "rate": 48000, "channels": 2, "seconds": 1 } },
        "player": { "backend": "virtual", "cpu": "1", "priority": "fifo:10",
                    "buffer_time_us": 20000, "period_time_us": 5000 },
        "warmup_us": 0,
        "duration_us": seconds * 1_000_000,
        "work_dir": work,
        "monitor": monitor,
    })
}

/// Starts `xrun-trial run -` with the spec on its stdin, which stays open
/// (its end would stop the trial) until [`finish`].
fn start_trial(cmd: &mut Command, spec: &Value) -> Child {
    xrunbench_test_support::procs::spawn_with_open_stdin(
        cmd.args(["run", "-"]),
        spec.to_string().as_bytes(),
    )
}

/// Waits for a trial started by [`start_trial`], closing its stdin only
/// once it has ended.
fn finish(mut child: Child) -> Output {
    let stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    out
}

fn record_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no record ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Whether the trace instance of the `xrun-trial` with this pid exists.
fn instance_of(pid: u32) -> bool {
    Path::new(TRACING)
        .join(format!("instances/xrunbench-{pid}"))
        .is_dir()
}

/// These tests run one at a time: each needs CPU 1 to itself.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pid of a process named `xrun-player` with `needle` in its command
/// line, while one runs.
fn player_pid(needle: &str) -> Option<u32> {
    xrunbench_test_support::procs::pid_of(&["xrun-player", needle])
}

/// Whether a client's port is connected in the JACK server's graph
/// (`jack_lsp -c` indents a port's connections under it): the cpal stream
/// runs.
fn jack_playback_connected(server: &JackServer) -> bool {
    Command::new("jack_lsp")
        .arg("-c")
        .envs(server.env())
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with(char::is_whitespace))
        })
}

/// Whether process `pid`'s main thread runs SCHED_FIFO on CPU 1 alone:
/// the player pins itself once its device is open.
fn pinned_fifo_on_cpu1(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim);
    // policy is the 41st field of stat, counted after the command's ")".
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let policy = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(41 - 3));
    cpus == Some("1") && policy == Some("1")
}

/// Whether a process named `xrun-player` runs with `needle` in its
/// command line.
fn player_running(needle: &str) -> bool {
    player_pid(needle).is_some()
}

/// A SCHED_FIFO 90 busy loop on CPU 1 for 300 ms, stopped on time by a
/// `timeout` at FIFO 91 (see CI.md). Returns the loop's pid (the shell
/// writes its own) and how long the whole command took.
fn hog_cpu1(pid_file: &Path) -> (u32, Duration) {
    let t = Instant::now();
    let script = format!(
        "echo $$ > {}; while :; do :; done",
        pid_file.to_str().unwrap()
    );
    let status = Command::new("taskset")
        .args(["-c", "1", "chrt", "-f", "91", "timeout", "0.3"])
        .args(["chrt", "-f", "90", "sh", "-c", &script])
        .status()
        .expect("run taskset/chrt/timeout");
    assert_eq!(status.code(), Some(124), "hog did not run as planned");
    let elapsed = t.elapsed();
    let pid = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (pid, elapsed)
}

/// CLOCK_MONOTONIC now, ns (the clock the trial's records are on).
fn mono_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The trace was on, every underrun of the record `r` has an account, and
/// exactly one of those of the events `counted` admits names the hog
/// `hog_pid` (comm `sh`, FIFO 90) as at least 90 % of the feeding thread's
/// runnable wait; the trial printed its clause. Returns that account.
fn the_one_underrun_behind<'r>(
    r: &'r Value,
    hog_pid: u32,
    stderr: &str,
    counted: impl Fn(&Value) -> bool,
) -> &'r Value {
    let m = &r["monitor"];
    assert_eq!(m["trace"]["state"], "on", "{stderr}");
    let accounts = m["underruns"].as_array().expect("underrun accounts");
    let events = r["player"]["events"].as_array().unwrap();
    assert_eq!(accounts.len(), events.len(), "one account per underrun");
    let hogged: Vec<&Value> = accounts
        .iter()
        .filter(|a| counted(&events[a["event"].as_u64().unwrap() as usize]))
        .filter(|a| {
            a["account"]["tasks"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["pid"] == hog_pid))
        })
        .collect();
    assert_eq!(
        hogged.len(),
        1,
        "one underrun behind the hog: {accounts:#?}"
    );
    let a = &hogged[0]["account"];
    assert_eq!(
        a["tid"], r["player"]["process"]["feeder_tid"],
        "the account is of the thread that fed the device: {a:#}"
    );
    let top = &a["tasks"][0];
    assert_eq!(top["pid"], hog_pid, "{a:#}");
    assert_eq!(top["comm"], "sh", "{a:#}");
    // FIFO 90 (or, when the hog was gone before the trace reader asked,
    // what its priority tells: FIFO or RR at 90).
    let policy = top["policy"].as_str().unwrap();
    assert!(
        policy == "SCHED_FIFO 90" || policy == "SCHED_FIFO/RR 90",
        "{a:#}"
    );
    assert!(
        f(&top["ms"]) >= 0.9 * f(&a["runnable_ms"]),
        "the hog is at least 90 % of the runnable wait: {a:#}"
    );
    let clause = hogged[0]["clause"].as_str().unwrap();
    assert!(
        stderr.contains(&format!("sh:{hog_pid} ({policy})")) && stderr.contains(clause),
        "the trial prints the clause: {stderr}"
    );
    hogged[0]
}

/// A trial of `spec` (in `work`) started with `cmd`, with the FIFO hog on
/// CPU 1 for 300 ms a second after its player started, run to its end.
struct HoggedTrial {
    record: Value,
    stderr: String,
    trial_pid: u32,
    player_pid: u32,
    hog_pid: u32,
    /// CLOCK_MONOTONIC just before the hog started, ns.
    hog_at_ns: u64,
    hog_took: Duration,
}

/// A trial with a 300 ms FIFO hog on the player's CPU once it plays:
/// `playing(pid)` says when the player (pid) has got that far.
fn hogged_trial(
    cmd: &mut Command,
    spec: &Value,
    work: &Path,
    playing: &dyn Fn(u32) -> bool,
) -> HoggedTrial {
    let child = start_trial(cmd, spec);
    let trial_pid = child.id();
    let needle = work.to_str().unwrap().to_string();
    assert!(
        wait_for(30, || player_running(&needle)),
        "the player never started"
    );
    let player_pid = player_pid(&needle).expect("the player runs");
    // However long its start took on this machine; then the first
    // periods (5 ms each) pass.
    assert!(
        wait_for(60, || playing(player_pid)),
        "the player never played"
    );
    std::thread::sleep(Duration::from_millis(200));
    let hog_at_ns = mono_now_ns();
    let (hog_pid, hog_took) = hog_cpu1(&work.join("hog.pid"));
    let out = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    HoggedTrial {
        record: record_of(&out),
        stderr,
        trial_pid,
        player_pid,
        hog_pid,
        hog_at_ns,
        hog_took,
    }
}

#[test]
fn a_fifo_hog_is_one_underrun_that_names_it_and_one_spike_of_its_length() {
    xrunbench_test_support::skip_if_cannot!(cannot_run());
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    // The monitor at FIFO 80: above the player (so it runs first when the
    // hog ends), below the hog (so the hog holds it off too).
    let monitor = json!({ "cpus": "1", "priority": 80, "threshold_us": 1000, "trace": true });
    let t = hogged_trial(
        &mut xrun_trial(),
        &spec(work.path(), 3, monitor),
        work.path(),
        &pinned_fifo_on_cpu1,
    );
    let (r, hog_pid, hog_took) = (&t.record, t.hog_pid, t.hog_took);
    let m = &r["monitor"];
    let events = r["player"]["events"].as_array().unwrap();
    let hogged = the_one_underrun_behind(r, hog_pid, &t.stderr, |_| true);
    // The spike on CPU 1: about the hog's length, ending when the player
    // noticed the underrun (the monitor runs first, then the player).
    let event = &events[hogged["event"].as_u64().unwrap() as usize];
    let noticed_s = f(&event["at_s"]) + f(&event["at_least_ms"]) / 1e3;
    let spikes = m["spikes"].as_array().unwrap();
    let spike = spikes
        .iter()
        .max_by_key(|s| s["latency_us"].as_u64().unwrap())
        .expect("a spike");
    let lat_ms = f(&spike["latency_us"]) / 1e3;
    assert!(
        lat_ms >= 250.0 && lat_ms <= hog_took.as_secs_f64() * 1e3 + 5.0,
        "spike {lat_ms:.3} ms for a 300 ms hog (the command took {hog_took:?})"
    );
    let spike_end_s = f(&spike["at_s"]) + lat_ms / 1e3;
    assert!(
        (spike_end_s - noticed_s).abs() <= 0.005,
        "spike ends at {spike_end_s:.4} s, underrun noticed at {noticed_s:.4} s"
    );
    // The spike's own account names the hog too.
    let sa = &spike["account"];
    assert_eq!(sa["tasks"][0]["pid"], hog_pid, "{sa:#}");
    assert!(!instance_of(t.trial_pid), "instance removed");
}

/// The cpal sink feeds the device from its host's callback thread, not
/// from the player's main thread, and times its events on the stream's
/// clock: through cpal's JACK host (a dummy server real-time on CPU 0, the
/// callback thread at FIFO 10 on CPU 1), a FIFO hog on CPU 1 is one
/// callback gap whose account is of the callback thread and names the hog.
#[test]
fn a_fifo_hog_is_one_cpal_callback_gap_that_names_it() {
    xrunbench_test_support::skip_if_cannot!(cannot_run());
    let _serial = serial();
    let server = JackServer::start(&JackConfig {
        cpus: Some("0".into()),
        priority: Some(90),
        ..JackConfig::default()
    })
    .expect("start a JACK dummy server (cargo xtask test installs jackd2)");
    let work = tempfile::tempdir().unwrap();
    let monitor = json!({ "latency": false, "trace": true });
    let mut spec = spec(work.path(), 3, monitor);
    spec["player"] = json!({ "backend": "cpal", "host": "jack", "cpu": "1",
                             "priority": "fifo:10", "buffer_time_us": 20000 });
    let mut cmd = xrun_trial();
    server.configure(&mut cmd);
    let t = hogged_trial(&mut cmd, &spec, work.path(), &|pid| {
        pinned_fifo_on_cpu1(pid) && jack_playback_connected(&server)
    });
    let player = &t.record["player"];
    assert!(player["started_mono_ns"].as_u64().is_some(), "{player:#}");
    let feeder = player["process"]["feeder_tid"]
        .as_u64()
        .expect("feeder_tid");
    assert_ne!(
        feeder,
        u64::from(t.player_pid),
        "the callback thread fed the device, not the main thread"
    );
    // JACK's xrun callback is server-wide and may add gap-less events
    // beside the gap: the callback gap is the one counted.
    let hogged = the_one_underrun_behind(&t.record, t.hog_pid, &t.stderr, |e| {
        e["source"] == "callback_gap"
    });
    // On CLOCK_MONOTONIC, the device ran dry while the hog ran (the event
    // is timed on JACK's clock, put there by the callback that saw it).
    let event = &player["events"][hogged["event"].as_u64().unwrap() as usize];
    let started = player["started_mono_ns"].as_u64().unwrap();
    let dry_s = (started as f64 + f(&event["at_s"]) * 1e9 - t.hog_at_ns as f64) / 1e9;
    assert!(
        dry_s > 0.0 && dry_s < t.hog_took.as_secs_f64(),
        "ran dry {dry_s:.4} s after the hog began (it took {:?})",
        t.hog_took
    );
    eprintln!(
        "cpal jack: dry {:.1} ms into the hog; {}",
        dry_s * 1e3,
        hogged["clause"]
    );
}

#[test]
fn a_clean_run_at_fifo_99_has_no_spike_on_an_idle_cpu() {
    xrunbench_test_support::skip_if_cannot!(cannot_run());
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    let threshold_us: u32 = 1000;
    let monitor =
        json!({ "cpus": "1", "priority": 99, "threshold_us": threshold_us, "trace": true });
    let out = finish(start_trial(
        &mut xrun_trial(),
        &spec(work.path(), 5, monitor),
    ));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let r = record_of(&out);
    let m = &r["monitor"];
    let cpu = &m["cpus"][0];
    // It measured: about one wake-up per interval (missed ones are
    // skipped, as cyclictest skips them, so allow for a few).
    let cycles = cpu["latency"]["count"].as_u64().unwrap();
    assert!(cycles >= 4000, "{cycles} wake-ups in 5 s at 1 ms");
    // "Otherwise idle" on a shared 2-CPU virtual machine cannot mean that
    // nothing else ever runs on CPU 1 (other jobs' tasks do, and in kernel
    // mode a voluntary-preemption kernel lets them finish a section before
    // a FIFO 99 thread gets the CPU), nor that the hypervisor never takes
    // the vCPU (the timer interrupt then arrives late). Both are real
    // latency and stay spikes. What the trace lets us assert honestly:
    // every spike over the threshold is explained — another task was on
    // the CPU (it was not idle then), or the wake-up itself came late
    // (below the scheduler), or the CPU was taken from it while it had it
    // (interrupts, the hypervisor: the scheduler saw it on the CPU the
    // whole time) — and none happened while the CPU was idle and the
    // timer on time. And the monitor never reports less than the
    // kernel's own stamps say (it cannot read its clock before it runs).
    let lost = m["trace"]["lost"].as_u64().unwrap();
    let (mut busy, mut timer_late, mut on_cpu) = (0, 0, 0);
    for s in m["spikes"].as_array().unwrap() {
        let Some(a) = s.get("account") else {
            assert!(lost > 0, "a spike without an account: {s:#}");
            continue;
        };
        let planned = s["planned_mono_ns"].as_u64().unwrap();
        if f(&a["on_cpu_ms"]) > 0.0 {
            // It had the CPU from before its read was due until the read.
            let got_cpu = a["ran_mono_ns"].as_u64().unwrap();
            let read = planned + s["latency_us"].as_u64().unwrap() * 1000;
            assert!(
                got_cpu <= read && a["tasks"].as_array().unwrap().is_empty(),
                "an on-CPU account that does not cover the spike: {s:#}"
            );
            on_cpu += 1;
            continue;
        }
        let woken_late_us = a["runnable_mono_ns"]
            .as_u64()
            .unwrap()
            .saturating_sub(planned)
            / 1000;
        let ran_late_us = a["ran_mono_ns"].as_u64().unwrap().saturating_sub(planned) / 1000;
        // The idle task on the CPU while the thread was runnable is the
        // wake-up path below the scheduler too (idle exit, a vCPU the
        // hypervisor had not given back): no task held the CPU.
        let tasks = a["tasks"].as_array().unwrap();
        let idle_ms: f64 = tasks
            .iter()
            .filter(|t| t["pid"] == 0)
            .map(|t| f(&t["ms"]))
            .sum();
        let others_ms: f64 = tasks
            .iter()
            .filter(|t| t["pid"] != 0)
            .map(|t| f(&t["ms"]))
            .sum::<f64>()
            + f(&a["others_ms"]);
        assert!(
            s["latency_us"].as_u64().unwrap() + 10 >= ran_late_us,
            "the monitor reports less than the trace: {s:#}"
        );
        // What neither the wake-up path nor another task on the CPU
        // explains: runnable, nothing (not even idle) on the CPU, not run.
        let below_us = woken_late_us + (idle_ms * 1e3) as u64;
        let unexplained_us = ran_late_us.saturating_sub(below_us + (others_ms * 1e3) as u64);
        assert!(
            unexplained_us * 2 <= u64::from(threshold_us),
            "{unexplained_us} us of a spike that neither the wake-up path nor a task explains: {s:#}"
        );
        if others_ms * 1e3 >= below_us as f64 {
            busy += 1;
        } else {
            timer_late += 1;
        }
    }
    eprintln!(
        "clean run: max {} us; spikes over {threshold_us} us: {busy} with another task on the CPU, \
         {timer_late} late below the scheduler (timer, idle exit, hypervisor), \
         {on_cpu} lost on the CPU (interrupts, hypervisor); none unexplained",
        cpu["latency"]["max"]
    );
}

/// A trial with the trace on, against the real tracefs, ended by `fault`
/// (`XRUNBENCH_FAULT`) or by a signal once it runs; no instance of ours is
/// left.
fn ends_without_leaving_an_instance(fault: &str, signal: Option<libc::c_int>) {
    let work = tempfile::tempdir().unwrap();
    let monitor = json!({ "latency": false, "trace": true });
    let mut cmd = xrun_trial();
    cmd.env("XRUNBENCH_FAULT", fault);
    let child = start_trial(&mut cmd, &spec(work.path(), 30, monitor));
    let pid = child.id();
    if let Some(sig) = signal {
        assert!(wait_for(30, || instance_of(pid)), "the trace never started");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    }
    let out = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{fault}: {stderr}");
    if signal == Some(libc::SIGKILL) {
        assert!(instance_of(pid), "SIGKILL leaves the instance");
        let r = xrun_trial().arg("restore").output().unwrap();
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(
            r.status.success() && text.contains("trace instance"),
            "{text}"
        );
    }
    assert!(
        !instance_of(pid),
        "{fault} {signal:?}: instance left; {stderr}"
    );
}

#[test]
fn the_trace_is_undone_on_every_way_out() {
    xrunbench_test_support::skip_if_cannot!(cannot_run());
    let _serial = serial();
    ends_without_leaving_an_instance("error", None);
    ends_without_leaving_an_instance("panic", None);
    ends_without_leaving_an_instance("sleep", Some(libc::SIGTERM));
    ends_without_leaving_an_instance("sleep", Some(libc::SIGKILL));
}

/// A private tracefs mount (under `--test-root`): the trial mounts it,
/// journaled, and unmounts it afterwards — also after a SIGKILL, by
/// `xrun-trial restore`.
#[test]
fn a_mount_the_trial_made_is_unmounted() {
    xrunbench_test_support::skip_if_cannot!(cannot_run());
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let mnt = root.path().join("sys/kernel/tracing");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = || mnt.join("events").is_dir();
    let work = tempfile::tempdir().unwrap();
    let monitor = json!({ "latency": false, "trace": true });
    let mut cmd = xrun_trial();
    cmd.arg("--test-root").arg(root.path());
    let out = finish(start_trial(
        &mut cmd,
        &spec(work.path(), 1, monitor.clone()),
    ));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        record_of(&out)["monitor"]["trace"]["state"],
        "on",
        "{stderr}"
    );
    assert!(!mounted(), "unmounted after the trial");
    // SIGKILL while mounted: the journal says so, `restore` undoes it.
    let mut cmd = xrun_trial();
    cmd.arg("--test-root").arg(root.path());
    cmd.env("XRUNBENCH_FAULT", "sleep");
    let mut child = start_trial(&mut cmd, &spec(work.path(), 30, monitor));
    let pid = child.id();
    assert!(wait_for(30, mounted), "never mounted");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(mounted(), "SIGKILL leaves it mounted");
    let r = xrun_trial()
        .arg("--test-root")
        .arg(root.path())
        .arg("restore")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{text}");
    assert!(text.contains("tracefs mount"), "{text}");
    assert!(!mounted(), "restore unmounted it");
    assert!(!instance_of(pid));
}

/// `xrun-trial check --read-only FILE`: its output and its stdout.
fn check_read_only(file: &Path) -> (Output, String) {
    let out = xrun_trial()
        .args(["check", "--read-only"])
        .arg(file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

/// `check` asks the monitor's questions before a trial does: a CPU that is
/// not here is one line naming `monitor.cpus`, exit 1, nothing started.
#[test]
fn check_refuses_a_monitor_on_a_cpu_that_is_not_here() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("spec.json");
    let monitor = json!({ "cpus": "63", "priority": 99 });
    std::fs::write(&file, spec(work.path(), 1, monitor).to_string()).unwrap();
    let (out, stdout) = check_read_only(&file);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.contains("config `m`: monitor.cpus: CPU 63 is not available here (allowed: "),
        "{stdout}"
    );
    // The same monitor on a CPU that is here passes.
    let here = json!({ "cpus": "0", "priority": 99 });
    std::fs::write(&file, spec(work.path(), 1, here).to_string()).unwrap();
    let (out, stdout) = check_read_only(&file);
    // Running a FIFO-99 monitor needs root; without it only the refusal
    // above was checked, and that is said.
    if is_root() {
        assert_eq!(out.status.code(), Some(0), "{stdout}");
    } else {
        xrunbench_test_support::skipped(
            xrunbench_test_support::test_name!(),
            "the half that passes needs root",
        );
    }
}
