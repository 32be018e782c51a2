//! The player's fixtures: its input files (tones, raw bytes), running it
//! and reading its report, telling its underruns from the machine's own
//! pauses, the JACK server its timing tests play through and the lock
//! that keeps them apart.
//!
//! What only the player's own integration tests can know (its binary,
//! cargo's scratch directory for them, the player's tmpfs check) stays in
//! `crates/player/tests/common`, which re-exports this module: nothing here
//! links the player or ALSA, so the host side's tests build without them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

use xrunbench_schema::monitor::{MachinePause, MonitorSpec};
use xrunbench_schema::player::{SelftestStall, Underrun};
use xrunbench_schema::PlayerReport;

use crate::servers::{JackConfig, JackServer};

/// The writer of the timing tests: a 20 ms buffer of 5 ms periods, at
/// FIFO 80.
pub const TIMED_WRITER: [&str; 6] = ["-B", "20000", "-F", "5000", "--priority", "fifo:80"];

/// The JACK dummy server the timing tests play through, on CPU 0 (the
/// player's writer and callbacks run on CPU 1, so a stall of theirs never
/// stalls the server), at FIFO 90: libjack's process threads, the ALSA
/// `jack` plugin's inside the player included, run at 85, above the
/// writers and callbacks under test (FIFO 10 and 80), which wait for them,
/// and below a hog at FIFO 90 on the writer's CPU.
pub fn timing_jack() -> JackServer {
    JackServer::start(&JackConfig {
        cpus: Some("0".into()),
        priority: Some(90),
        ..JackConfig::default()
    })
    .expect("start a JACK dummy server (cargo xtask test installs jackd2)")
}

/// Held while a timing test runs; see [`timing_lock`].
pub struct TimingGuard {
    _in_process: MutexGuard<'static, ()>,
    /// Bound to the machine-wide name; closing it on drop frees the name.
    _machine_wide: std::os::unix::net::UnixListener,
}

/// Timing tests must not run side by side: a 2-core machine has no room
/// for two real-time players and their sound servers at once. Not in this
/// test binary (a mutex), nor in another suite on the same machine: traced,
/// another suite's FIFO 90 hog on CPU 1 stalled this one's "clean" runs for
/// 285 ms, and its FIFO 80 player held a callback off for 14 ms. Across
/// processes the lock is an abstract unix socket name, which only one
/// process can bind at a time and which the kernel frees when its holder
/// exits, however it exits; it leaves no file behind.
pub fn timing_lock() -> TimingGuard {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    static LOCK: Mutex<()> = Mutex::new(());
    let in_process = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let name = SocketAddr::from_abstract_name(b"xrunbench-timing-tests").expect("a valid name");
    let machine_wide = loop {
        match UnixListener::bind_addr(&name) {
            Ok(l) => break l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Err(e) => panic!("timing lock: {e}"),
        }
    };
    TimingGuard {
        _in_process: in_process,
        _machine_wide: machine_wide,
    }
}

/// A file that is removed when dropped.
pub struct TempFile(pub PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn unique(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(
        "{}-{name}",
        crate::servers::unique_name("xrun-test")
    ))
}

/// A tone in `spec`'s format, `seconds` long, written with hound.
pub fn tone_in(dir: &Path, spec: hound::WavSpec, seconds: f64) -> TempFile {
    let path = unique(dir, "tone.wav");
    let mut w = hound::WavWriter::create(&path, spec).unwrap();
    let frames = (seconds * spec.sample_rate as f64) as u64;
    for i in 0..frames {
        let x = (i as f64 * 440.0 * std::f64::consts::TAU / spec.sample_rate as f64).sin() * 0.25;
        for _ in 0..spec.channels {
            match (spec.sample_format, spec.bits_per_sample) {
                (hound::SampleFormat::Float, _) => w.write_sample(x as f32).unwrap(),
                (_, 8) => w.write_sample((x * 127.0) as i8).unwrap(),
                (_, 16) => w.write_sample((x * 32767.0) as i16).unwrap(),
                (_, 24) => w.write_sample((x * 8_388_607.0) as i32).unwrap(),
                (_, _) => w.write_sample((x * 2_147_483_647.0) as i32).unwrap(),
            }
        }
    }
    w.finalize().unwrap();
    TempFile(path)
}

/// 16-bit stereo 48 kHz tone on /dev/shm (tmpfs, so no copy is made).
pub fn tone(seconds: f64) -> TempFile {
    tone_in(
        Path::new("/dev/shm"),
        hound::WavSpec {
            channels: 2,
            sample_rate: 48_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        },
        seconds,
    )
}

/// A file with these exact bytes.
pub fn bytes_file(bytes: &[u8]) -> TempFile {
    bytes_file_in(&std::env::temp_dir(), bytes)
}

/// A file in `dir` with these exact bytes.
pub fn bytes_file_in(dir: &Path, bytes: &[u8]) -> TempFile {
    let path = unique(dir, "bytes.wav");
    std::fs::write(&path, bytes).unwrap();
    TempFile(path)
}

/// Runs the player with `args` and `--json` into a temp file; returns the
/// process output and the parsed report.
pub fn play(cmd: &mut Command, args: &[&str]) -> (Output, PlayerReport) {
    let json = TempFile(unique(&std::env::temp_dir(), "report.json"));
    let out = output_or_kill(cmd.args(args).arg("--json").arg(&json.0), args, HUNG_AFTER);
    assert!(
        out.status.success(),
        "xrun-player {args:?} failed: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: PlayerReport =
        serde_json::from_slice(&std::fs::read(&json.0).expect("report written"))
            .expect("valid report");
    (out, report)
}

/// How long a player of these tests (10 s of audio at most) may run
/// before it is taken for hung: playback runs on the sound clock, not on
/// the machine's speed, so this is a backstop, not a speed limit.
pub const HUNG_AFTER: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `cmd` as [`Command::output`] does, but kills it and fails the
/// test, saying so, when it has not ended after `limit` ([`HUNG_AFTER`]
/// for [`play`]): a player
/// whose real-time thread spins (seen: cpal's PulseAudio host in an
/// unoptimised build, FIFO 80, its main thread never running again) must
/// fail its test, not hang the suite.
pub fn output_or_kill(cmd: &mut Command, args: &[&str], limit: std::time::Duration) -> Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run xrun-player");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for xrun-player") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "xrun-player {args:?} hung: still running {limit:?} after it started; killed\n{}",
                String::from_utf8_lossy(&stderr.join().unwrap_or_default())
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// A player run and what the machine did meanwhile.
pub struct Watched {
    /// The player's report.
    pub report: PlayerReport,
    /// When a FIFO-99 measuring thread on some CPU could not run for
    /// 1 ms or more, on the report's timeline.
    pub pauses: Vec<MachinePause>,
}

impl Watched {
    /// The pause of the machine that explains underrun `e`, if one does:
    /// the longest pause, on any CPU, that overlapped the event (widened
    /// by the audio queued before it, two periods and 2 ms) and was long
    /// enough to account for its gap (itself, plus that widening). On a VM
    /// the hypervisor takes vCPUs away for tens of ms at a time (steal; a
    /// saturated VM here lost them in 100 ms slices, the host's CPU quota
    /// period); no priority of ours can prevent that, and the player
    /// rightly reports the audio it cost, but it is not the sink's fault:
    /// the tests print such events and count only the rest. Any CPU,
    /// because the chain spans them: the sound server runs on CPU 0, the
    /// player on CPU 1 (traced: a 100 ms pause of CPU 0 alone starved the
    /// JACK host's callback on CPU 1 for 118 ms). A sink that loses audio
    /// on its own leaves the monitor punctual, so it still fails them; on
    /// a quiet machine there are no pauses to excuse anything.
    pub fn machine_pause_for(&self, e: &Underrun) -> Option<MachinePause> {
        let widening_ms = self.widening_ms(e);
        let from_s = e.at_s - widening_ms / 1e3;
        let to_s = e.at_s + (e.gap_ms + widening_ms) / 1e3;
        self.pauses
            .iter()
            .filter(|p| p.since_s < to_s && p.ran_s > from_s)
            .filter(|p| p.ms() + widening_ms >= e.gap_ms)
            .max_by(|a, b| a.ms().total_cmp(&b.ms()))
            .copied()
    }

    /// How long after the machine returns the stream takes to run again:
    /// two periods (the server's next cycles) and 2 ms.
    fn refill_ms(&self) -> f64 {
        2.0 * self.report.params.period_us as f64 / 1e3 + 2.0
    }

    /// How far around event `e` a pause of the machine can have caused
    /// it: the audio queued before it ran dry, and [`Watched::refill_ms`].
    fn widening_ms(&self, e: &Underrun) -> f64 {
        e.queued_before_us.unwrap_or(0) as f64 / 1e3 + self.refill_ms()
    }

    /// A pause of the machine of at least `tolerance_ms` that can have
    /// moved a stall's gap away from its expected figure: one on any CPU
    /// that overlapped the stall or the refill after it. Even one wholly
    /// inside the stall's sleep: the sound server's CPU paused then moves
    /// the stream's timestamps (traced: JACK's CPU 0 away 100 ms in a
    /// 500 ms stall of the callback split its gap in two, 411 + 160 ms).
    pub fn pause_disturbing(
        &self,
        stall: &SelftestStall,
        e: &Underrun,
        tolerance_ms: f64,
    ) -> Option<MachinePause> {
        let (start_s, end_s) = (stall.at_s, stall.at_s + stall.actual_ms / 1e3);
        let back_s = e.at_s + (e.gap_ms + self.refill_ms()) / 1e3;
        self.pauses
            .iter()
            .filter(|p| p.ms() >= tolerance_ms)
            .find(|p| p.since_s < back_s.max(end_s) && p.ran_s > start_s - 0.001)
            .copied()
    }

    /// Why the machine, not the sink, lost `e`'s audio, when a pause of
    /// the machine explains it.
    pub fn the_machines(&self, e: &Underrun) -> Option<String> {
        self.machine_pause_for(e).map(|p| {
            format!(
                "the machine's, not counted: CPU {} was away {:.3} ms (FIFO 99 due at {:.3} s \
                 ran at {:.3} s)",
                p.cpu,
                p.ms(),
                p.due_s,
                p.ran_s
            )
        })
    }

    /// Prints the machine's pauses of 5 ms and more (what an unexplained
    /// event is to be read beside).
    pub fn print_pauses(&self, what: &str) {
        let long: Vec<String> = self
            .pauses
            .iter()
            .filter(|p| p.ms() >= 5.0)
            .map(|p| format!("CPU {} {:.3} s +{:.1} ms", p.cpu, p.due_s, p.ms()))
            .collect();
        eprintln!(
            "{what}: {} pauses of the machine ≥ 1 ms, ≥ 5 ms: {long:?}",
            self.pauses.len()
        );
    }

    /// Prints an event that stands beside the ones counted, and why.
    pub fn print_beside(&self, what: &str, beside: &str, e: &Underrun) {
        eprintln!(
            "{what}: beside {beside}: {:?} at {:.3} s, gap {:.3} ms{}",
            e.source,
            e.at_s,
            e.gap_ms,
            self.the_machines(e)
                .map(|why| format!(": {why}"))
                .unwrap_or_default()
        );
    }

    /// The events no pause of the machine explains, but those `beside`
    /// lets stand (printed, with the machine's, not returned).
    pub fn unexplained(&self, what: &str, beside: impl Fn(&Underrun) -> bool) -> Vec<&Underrun> {
        let (excused, counted): (Vec<&Underrun>, Vec<&Underrun>) = self
            .report
            .events
            .iter()
            .partition(|e| beside(e) || self.machine_pause_for(e).is_some());
        for e in excused {
            self.print_beside(what, "the run", e);
        }
        self.print_pauses(what);
        counted
    }

    /// Whether event `e` is stall `s`'s: it began during the stall, or
    /// it began before and ran into it (the sound server delivered the
    /// stalled callback late: the audio ran dry before the stall began,
    /// and its gap ran on through it); or, when a pause of the machine of
    /// 5 ms or more disturbed the stall ([`Watched::pause_disturbing`]),
    /// it began before the audio queued, two periods and 2 ms had passed
    /// after the stall (the stream resyncing once both were over).
    fn of_stall(&self, s: &SelftestStall, e: &Underrun) -> bool {
        let end_s = s.at_s + s.actual_ms / 1e3;
        if s.holds(e.at_s) || (e.at_s < s.at_s && e.at_s + e.gap_ms / 1e3 > s.at_s) {
            return true;
        }
        (end_s..=end_s + self.widening_ms(e) / 1e3).contains(&e.at_s)
            && self.pause_disturbing(s, e, 5.0).is_some()
    }

    /// Pairs every injected stall with the one event that began during
    /// it, and asserts that every other event is one `beside` lets stand
    /// or one a pause of the machine explains. A stall is a stall whatever
    /// the machine did meanwhile: its event is counted, never excused; but
    /// a pause of the machine inside it can split its gap in two (see
    /// [`Watched::pause_disturbing`]), and then the first is paired and the
    /// split printed.
    pub fn one_event_per_stall(
        &self,
        what: &str,
        beside: impl Fn(&Underrun) -> bool,
    ) -> Vec<(&SelftestStall, &Underrun)> {
        let stalls = &self.report.selftest_stalls;
        let in_a_stall = |e: &Underrun| stalls.iter().any(|s| self.of_stall(s, e));
        let outside = self.unexplained(what, |e| beside(e) || in_a_stall(e));
        assert_eq!(
            outside,
            Vec::<&Underrun>::new(),
            "{what}: events outside the stalls that no pause of the machine explains"
        );
        stalls
            .iter()
            .map(|s| {
                let during: Vec<&Underrun> = self
                    .report
                    .events
                    .iter()
                    .filter(|e| self.of_stall(s, e) && !beside(e))
                    .collect();
                assert!(
                    !during.is_empty(),
                    "{what}: no event in stall {s:?}: {:#?}",
                    self.report.events
                );
                if during.len() > 1 {
                    let Some(p) = self.pause_disturbing(s, during[0], 5.0) else {
                        panic!(
                            "{what}: one event per stall expected, stall {s:?}: {:#?}",
                            self.report.events
                        );
                    };
                    eprintln!(
                        "{what}: stall at {:.3} s: {} events, split by the machine away {:.3} ms \
                         on CPU {} at {:.3} s",
                        s.at_s,
                        during.len(),
                        p.ms(),
                        p.cpu,
                        p.due_s
                    );
                }
                (s, during[0])
            })
            .collect()
    }

    /// Whether the gap of stall `s`'s event `e` can be held to
    /// `tolerance_ms`: not when a pause of the machine at least that long
    /// can have moved it ([`Watched::pause_disturbing`]); then says so.
    pub fn gap_judged(
        &self,
        what: &str,
        s: &SelftestStall,
        e: &Underrun,
        tolerance_ms: f64,
    ) -> bool {
        match self.pause_disturbing(s, e, tolerance_ms) {
            None => true,
            Some(p) => {
                eprintln!(
                    "{what}: stall at {:.3} s: its gap {:.3} ms is not held to ± {tolerance_ms} ms: \
                     the machine was away {:.3} ms on CPU {} at {:.3} s, at its edge",
                    s.at_s,
                    e.gap_ms,
                    p.ms(),
                    p.cpu,
                    p.due_s
                );
                false
            }
        }
    }
}

/// As [`play`], beside the trial's latency monitor (FIFO 99, 1 ms, a
/// thread on every CPU), whose late wake-ups are the machine's pauses.
/// Needs root, as the timing tests' real-time priorities do.
pub fn play_watched(cmd: &mut Command, args: &[&str]) -> (Output, Watched) {
    let cpus = xrunbench_trial::fingerprint::allowed_cpus();
    let monitor = xrunbench_trial::monitor::Monitor::start(&MonitorSpec::default(), &cpus)
        .expect("the latency monitor starts (root: FIFO 99)");
    let (out, report) = play(cmd, args);
    let measured = monitor.stop();
    let start = report
        .started_mono_ns
        .expect("a report says when playback started");
    let pauses = measured.pauses(start);
    (out, Watched { report, pauses })
}

/// Asserts that every stall produced exactly one underrun whose gap is
/// within `tolerance_ms` of (stall − audio queued when it began), and
/// that every other underrun was the machine's ([`Watched`]). A gap a
/// pause of the machine can have moved is printed, not held to the
/// tolerance ([`Watched::gap_judged`]).
pub fn assert_one_underrun_per_stall(w: &Watched, what: &str, tolerance_ms: f64) {
    for (stall, event) in w.one_event_per_stall(what, |_| false) {
        let queued_ms = stall.queued_us.expect("queued audio known") as f64 / 1e3;
        let expected = stall.actual_ms - queued_ms;
        eprintln!(
            "{what}: stall {:.3} ms (asked {:.0}) with {:.3} ms queued: gap {:.3} ms, at least {:?} ms, expected {:.3} ms",
            stall.actual_ms, stall.requested_ms, queued_ms, event.gap_ms, event.at_least_ms, expected
        );
        let at_least = event.at_least_ms.expect("at-least figure present");
        assert!(at_least <= event.gap_ms + 1e-6 && at_least > 0.0);
        if !w.gap_judged(what, stall, event, tolerance_ms) {
            continue;
        }
        assert!(
            (stall.actual_ms - stall.requested_ms).abs() < 5.0,
            "{what}: the stall itself overran: {stall:?}"
        );
        assert!(
            (event.gap_ms - expected).abs() <= tolerance_ms,
            "{what}: gap {:.3} ms, expected {expected:.3} ± {tolerance_ms} ms",
            event.gap_ms
        );
    }
}

/// The audio time the run's underruns cost, s: a run that lost the
/// machine's pauses takes that much longer to play its file.
pub fn lost_s(report: &PlayerReport) -> f64 {
    report.events.iter().map(|e| e.gap_ms).sum::<f64>() / 1e3
}

/// Asserts that no underrun but the machine's ([`Watched`]) happened.
pub fn assert_no_underrun_but_the_machines(w: &Watched, what: &str) {
    assert_eq!(
        w.unexplained(what, |_| false),
        Vec::<&Underrun>::new(),
        "{what}: no underrun expected"
    );
}

/// Waits until process `pid` holds `path` open and has read at least
/// `bytes` in all (`rchar` of /proc/PID/io; the player reads its file with
/// pread, so the file's offset says nothing) — a point in the player's
/// life that every machine reaches, however slow, unlike a sleep. Panics
/// when the process ends first.
pub fn wait_until_read(pid: u32, path: &Path, bytes: u64) {
    let fds = format!("/proc/{pid}/fd");
    let read = || {
        std::fs::read_to_string(format!("/proc/{pid}/io"))
            .ok()
            .and_then(|io| {
                io.lines()
                    .find_map(|l| l.strip_prefix("rchar:"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    loop {
        let open = std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == path));
        if open && read() >= bytes {
            return;
        }
        assert!(
            crate::procs::alive(pid),
            "process {pid} ended before it read {bytes} bytes with {} open",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
