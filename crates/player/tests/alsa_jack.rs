//! The `alsa` sink on a real, clocked PCM: a JACK server on its dummy
//! backend, reached through alsa-lib's `plug:jack`. The server runs on
//! CPU 0 and the player's writer thread on CPU 1, so a stall of the writer
//! never stalls the device; JACK's threads, the `jack` plugin's inside the
//! player included, run real-time above every writer under test. They pass
//! 20 runs in a row beside `xrun-hackbench -g 4`.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use xrunbench_schema::player::ClockSource;
use xrunbench_test_support::servers::{JackServer, JACK_PCM};

fn jack_player(server: &JackServer) -> Command {
    let mut cmd = player();
    server.configure(&mut cmd);
    cmd
}

/// Plays through plug:jack with the timing tests' writer
/// ([`TIMED_WRITER`]) on CPU 1 and `more`, watched.
fn play_timed(server: &JackServer, more: &[&str]) -> (Output, Watched) {
    let args: Vec<&str> = ["-D", JACK_PCM]
        .into_iter()
        .chain(TIMED_WRITER)
        .chain(["--cpu", "1"])
        .chain(more.iter().copied())
        .collect();
    play_watched(&mut jack_player(server), &args)
}

#[test]
fn two_seconds_play_cleanly_through_plug_jack() {
    let _serial = timing_lock();
    let server = timing_jack();
    let wav = tone(2.0);
    let (_, w) = play_timed(&server, &["-q", wav.0.to_str().unwrap()]);
    let report = &w.report;
    assert_eq!(report.params.backend, "alsa");
    assert_eq!(report.params.device, JACK_PCM);
    assert!(
        !report.params.hardware,
        "the jack plugin is not a hardware PCM"
    );
    assert_eq!(report.params.underrun_clock, ClockSource::Player);
    // JACK rounds to its 256-frame period.
    assert_eq!(
        (report.params.buffer_frames, report.params.period_frames),
        (1024, 256)
    );
    assert_no_underrun_but_the_machines(&w, "plug:jack");
    assert_eq!(report.frames_written, 96_000);
    // Playing 2 s took about 2 s on the server's clock, and what the
    // machine's underruns cost.
    assert!(
        report.wall_seconds > 1.9 && report.wall_seconds < 2.5 + lost_s(report),
        "{}",
        report.wall_seconds
    );
    assert!(report.fill.count > 300);
}

#[test]
fn writer_stalls_of_100_300_500_ms_give_one_underrun_each_within_3ms() {
    let _serial = timing_lock();
    let server = timing_jack();
    let wav = tone(1.0);
    let (out, w) = play_timed(
        &server,
        &[
            "--duration",
            "3.5",
            "--selftest-stall",
            "0.5:100,1.5:300,2.5:500",
            wav.0.to_str().unwrap(),
        ],
    );
    assert_one_underrun_per_stall(&w, "plug:jack", 3.0);
    for e in &w.report.events {
        assert_eq!(e.gap_clock, ClockSource::Player);
    }
    // aplay's words on stderr, one line per underrun (the machine's too).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("underrun!!! (at least ").count(),
        w.report.events.len(),
        "{stderr}"
    );
}

/// Waits until the tool under test (process `pid`) plays: its JACK ports
/// are connected to the server's playback ports and, with `on_cpu`, its
/// main thread runs pinned there (the player applies `--cpu` after opening
/// the device); then lets the first periods pass. A hog before that stalls
/// nothing: beside `xrun-hackbench -g 4` getting there took longer than
/// the fixed second these tests used to wait, and the player reported no
/// underrun.
fn wait_until_playing(server: &JackServer, pid: u32, on_cpu: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pinned = on_cpu.map_or(true, |cpu| main_thread_cpus(pid).as_deref() == Some(cpu));
        if pinned && playback_connected(server) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} did not start playing within 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// The writer the hog stalls: plug:jack, a 20 ms buffer of 5 ms periods,
/// on CPU 1 at FIFO 10: above anything else the machine runs (so only the
/// hog stalls it), below the hog at FIFO 90, which takes that CPU whole.
const HOGGED_WRITER: [&str; 10] = [
    "-D",
    JACK_PCM,
    "-B",
    "20000",
    "-F",
    "5000",
    "--cpu",
    "1",
    "--priority",
    "fifo:10",
];

/// Whether any port is connected in the server's graph (`jack_lsp -c`
/// indents a port's connections under it): only the server's own ports
/// and the tool's exist.
fn playback_connected(server: &JackServer) -> bool {
    Command::new("jack_lsp")
        .arg("-c")
        .envs(server.env())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with(char::is_whitespace))
        })
        .unwrap_or(false)
}

/// The CPUs process `pid`'s main thread may run on, as `/proc` lists them.
fn main_thread_cpus(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// A SCHED_FIFO busy loop pinned to `cpu` for `secs`, stopped on time by a
/// `timeout` one priority above it (at the same priority it could not run
/// until RT throttling let it). Returns how long the hog really ran.
fn hog_cpu(cpu: &str, secs: &str) -> Duration {
    let t = Instant::now();
    let status = Command::new("taskset")
        .args([
            "-c",
            cpu,
            "chrt",
            "-f",
            "91",
            "timeout",
            secs,
            "chrt",
            "-f",
            "90",
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .status()
        .expect("run taskset/chrt/timeout");
    // timeout exits 124 when it had to stop the loop: the expected case.
    assert_eq!(
        status.code(),
        Some(124),
        "hog did not run as planned: {status:?}"
    );
    t.elapsed()
}

#[test]
fn a_real_scheduling_stall_is_one_underrun_of_the_right_length() {
    let _serial = timing_lock();
    let server = timing_jack();
    let wav = tone(3.0);
    let json = TempFile(std::env::temp_dir().join(format!("xrun-hog-{}.json", std::process::id())));
    let child = jack_player(&server)
        .args(HOGGED_WRITER)
        .args(["-q", "--json"])
        .arg(&json.0)
        .arg(&wav.0)
        .spawn()
        .unwrap();
    wait_until_playing(&server, child.id(), Some("1"));
    let hog = hog_cpu("1", "0.3");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let report: xrunbench_schema::PlayerReport =
        serde_json::from_slice(&std::fs::read(&json.0).unwrap()).unwrap();
    let buffer_ms = report.params.buffer_us as f64 / 1e3;
    eprintln!("hog ran {hog:?}; events: {:#?}", report.events);
    assert_eq!(
        report.events.len(),
        1,
        "one underrun expected: {:#?}",
        report.events
    );
    let gap = report.events[0].gap_ms;
    // The writer was starved for the hog's 300 ms (its CPU time, not the
    // fork/exec of the helpers around it), minus the audio still queued.
    assert!(
        gap >= 300.0 - buffer_ms - 5.0 && gap <= hog.as_secs_f64() * 1e3 + 3.0,
        "gap {gap:.3} ms for a 300 ms stall with {buffer_ms:.3} ms buffered (hog {hog:?})"
    );
}

/// Pins one thread (a process's main thread when given its pid) to `cpu`.
fn pin_thread(tid: u32, cpu: &str) {
    let status = Command::new("taskset")
        .args(["-p", "-c", cpu, &tid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn aplay_and_xrun_player_see_the_same_stall() {
    let _serial = timing_lock();
    let server = timing_jack();
    let wav = tone(3.0);
    let mut results = Vec::new();
    for tool in ["aplay", "xrun-player"] {
        let mut cmd = match tool {
            // Both at FIFO 10: only the hog (FIFO 90) stalls them.
            "aplay" => {
                let mut c = Command::new("chrt");
                c.args([
                    "-f", "10", "aplay", "-D", JACK_PCM, "-B", "20000", "-F", "5000",
                ]);
                c
            }
            _ => {
                let mut c = player();
                c.args(HOGGED_WRITER);
                c
            }
        };
        server.configure(&mut cmd);
        let child = cmd
            .arg(&wav.0)
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        if tool == "aplay" {
            wait_until_playing(&server, child.id(), None);
            // Pin aplay's writer (main) thread only, as --cpu does for ours:
            // `taskset -c 1 aplay` would freeze the jack plugin's client
            // thread with it, and a frozen plugin reports no underrun.
            pin_thread(child.id(), "1");
        } else {
            wait_until_playing(&server, child.id(), Some("1"));
        }
        let hog = hog_cpu("1", "0.3");
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let figures: Vec<String> = stderr
            .lines()
            .filter(|l| l.starts_with("underrun!!!"))
            .map(str::to_string)
            .collect();
        results.push((tool, hog, figures));
    }
    eprintln!("same 300 ms scheduling stall on CPU 1, same PCM ({JACK_PCM}):");
    for (tool, hog, figures) in &results {
        eprintln!("  {tool:12} (hog ran {hog:?}): {figures:?}");
    }
    eprintln!(
        "  (on plugin PCMs aplay's figure is the time since the stream last started, \
         not the underrun's length: see shared CI notes)"
    );
    for (tool, _, figures) in &results {
        assert_eq!(
            figures.len(),
            1,
            "{tool} should report exactly one underrun: {figures:?}"
        );
    }
}

#[test]
fn every_hound_format_plays_through_plug() {
    let _serial = timing_lock();
    let server = timing_jack();
    let specs = [
        (1, 44_100, 8, hound::SampleFormat::Int),
        (2, 48_000, 16, hound::SampleFormat::Int),
        (2, 48_000, 24, hound::SampleFormat::Int),
        (2, 32_000, 32, hound::SampleFormat::Int),
        (2, 48_000, 32, hound::SampleFormat::Float),
        (4, 48_000, 16, hound::SampleFormat::Int), // WAVE_FORMAT_EXTENSIBLE
    ];
    for (channels, rate, bits, fmt) in specs {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: bits,
            sample_format: fmt,
        };
        let wav = tone_in(std::path::Path::new("/dev/shm"), spec, 0.3);
        let (_, report) = play(
            &mut jack_player(&server),
            &["-D", JACK_PCM, "-q", wav.0.to_str().unwrap()],
        );
        assert_eq!(report.file.channels, channels);
        assert_eq!(report.file.rate, rate);
        assert_eq!(report.frames_written, report.file.frames, "{spec:?}");
    }
}
