//! Shared test helpers: WAV files, running the player, reading its report.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

use xrunbench_schema::monitor::{MachinePause, MonitorSpec};
use xrunbench_schema::player::Underrun;
use xrunbench_schema::PlayerReport;

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
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    dir.join(format!(
        "xrun-test-{}-{}-{name}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
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

/// Why no directory on a disk (not tmpfs) is to be had here; `None` when
/// [`disk_dir`] is one. The temporary directory may well be tmpfs; the
/// target directory's scratch space rarely is.
pub fn no_disk_dir() -> Option<String> {
    let dir = disk_dir();
    xrunbench_player::is_on_tmpfs(&dir)
        .unwrap()
        .then(|| format!("{} is on tmpfs: no disk to copy from", dir.display()))
}

/// Cargo's scratch directory for this crate's tests, for files the player
/// must find on a disk (see [`no_disk_dir`]).
pub fn disk_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The player binary.
pub fn player() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xrun-player"))
}

/// Runs the player with `args` and `--json` into a temp file; returns the
/// process output and the parsed report.
pub fn play(cmd: &mut Command, args: &[&str]) -> (Output, PlayerReport) {
    let json = TempFile(unique(&std::env::temp_dir(), "report.json"));
    let out = cmd
        .args(args)
        .arg("--json")
        .arg(&json.0)
        .output()
        .expect("run xrun-player");
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

/// A player run and what the machine did meanwhile.
pub struct Watched {
    /// The player's report.
    pub report: PlayerReport,
    /// When a FIFO-99 measuring thread on some CPU could not run for
    /// 1 ms or more, on the report's timeline.
    pub pauses: Vec<MachinePause>,
}

impl Watched {
    /// The pause of the machine that explains underrun `e`: one that began
    /// before the sink ran dry and ended when the audio came back, give or
    /// take one period (the host's thread waits for the server's next
    /// cycle after the machine returns) and 2 ms. On a VM the hypervisor
    /// takes a vCPU away for tens of ms at a time (steal); no priority of
    /// ours can prevent that, and the player rightly reports the audio it
    /// cost, but it is not the sink's fault: the tests print such events
    /// and count only the rest. A sink that loses audio on its own leaves
    /// the monitor punctual, so it still fails them.
    pub fn machine_pause_for(&self, e: &Underrun) -> Option<MachinePause> {
        let tolerance_ms = self.report.params.period_us as f64 / 1e3 + 2.0;
        MachinePause::spanning(&self.pauses, e.at_s, e.at_s + e.gap_ms / 1e3, tolerance_ms)
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
        .expect("a cpal report says when playback started");
    let pauses = measured.pauses(start);
    (out, Watched { report, pauses })
}

/// The canonical 16-byte fmt chunk + data chunk, for malformed-file tests.
pub fn wav_bytes(tag: u16, channels: u16, rate: u32, bits: u16, data: &[u8]) -> Vec<u8> {
    let block = channels * bits.div_ceil(8);
    let mut v = Vec::new();
    v.extend_from_slice(b"RIFF");
    v.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    v.extend_from_slice(b"WAVEfmt ");
    v.extend_from_slice(&16u32.to_le_bytes());
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(&channels.to_le_bytes());
    v.extend_from_slice(&rate.to_le_bytes());
    v.extend_from_slice(&(rate * block as u32).to_le_bytes());
    v.extend_from_slice(&block.to_le_bytes());
    v.extend_from_slice(&bits.to_le_bytes());
    v.extend_from_slice(b"data");
    v.extend_from_slice(&(data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    v
}

/// Asserts that a stall produced exactly one underrun whose gap is
/// within `tolerance_ms` of (stall − audio queued when it began).
pub fn assert_one_underrun_per_stall(report: &PlayerReport, tolerance_ms: f64) {
    assert_eq!(
        report.events.len(),
        report.selftest_stalls.len(),
        "one underrun per stall expected: {:#?}",
        report.events
    );
    for (stall, event) in report.selftest_stalls.iter().zip(&report.events) {
        let queued_ms = stall.queued_us.expect("queued audio known") as f64 / 1e3;
        let expected = stall.actual_ms - queued_ms;
        eprintln!(
            "stall {:.3} ms (asked {:.0}) with {:.3} ms queued: gap {:.3} ms, at least {:?} ms, expected {:.3} ms",
            stall.actual_ms, stall.requested_ms, queued_ms, event.gap_ms, event.at_least_ms, expected
        );
        assert!(
            (stall.actual_ms - stall.requested_ms).abs() < 5.0,
            "the stall itself overran: {stall:?}"
        );
        assert!(
            (event.gap_ms - expected).abs() <= tolerance_ms,
            "gap {:.3} ms, expected {expected:.3} ± {tolerance_ms} ms",
            event.gap_ms
        );
        let at_least = event.at_least_ms.expect("at-least figure present");
        assert!(at_least <= event.gap_ms + 1e-6 && at_least > 0.0);
    }
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
            is_alive(pid),
            "process {pid} ended before it read {bytes} bytes with {} open",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Whether process `pid` still runs (neither gone nor a zombie).
pub fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}
