//! Bad input gets its exit code and one line naming what is wrong; the
//! machine is left as found (tmpfs copies removed, also on SIGTERM); a
//! signal still yields a report.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use xrunbench_schema::player::EndReason;
use xrunbench_test_support::procs;
use xrunbench_wav::canonical_wav;

/// Runs the player, expects `code` and a single stderr line containing
/// every one of `needles`.
fn expect_error(args: &[&str], code: i32, needles: &[&str]) {
    let out = player().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: one line expected, got: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {n:?} not in {stderr:?}");
    }
}

#[test]
fn missing_file() {
    expect_error(
        &["--backend", "virtual", "/nonexistent/song.wav"],
        2,
        &["/nonexistent/song.wav", "No such file"],
    );
}

#[test]
fn not_a_wav() {
    let f = bytes_file(b"ID3\x04\x00 this is an mp3, honest");
    expect_error(
        &["--backend", "virtual", f.0.to_str().unwrap()],
        2,
        &[f.0.to_str().unwrap(), "expected \"RIFF\""],
    );
}

#[test]
fn truncated_header() {
    let full = canonical_wav(1, 2, 48_000, 16, &[0; 64]);
    let f = bytes_file(&full[..30]);
    expect_error(
        &["--backend", "virtual", f.0.to_str().unwrap()],
        2,
        &["truncated"],
    );
}

#[test]
fn compressed_wav() {
    let f = bytes_file(&canonical_wav(0x0011, 2, 48_000, 4, &[0; 64]));
    expect_error(
        &["--backend", "virtual", f.0.to_str().unwrap()],
        2,
        &["format tag 0x0011 (IMA ADPCM)", "expected PCM"],
    );
}

#[test]
fn zero_channels() {
    let f = bytes_file(&canonical_wav(1, 0, 48_000, 16, &[0; 64]));
    expect_error(
        &["--backend", "virtual", f.0.to_str().unwrap()],
        2,
        &["0 channels, expected at least 1"],
    );
}

#[test]
fn no_audio_frames() {
    let f = bytes_file(&canonical_wav(1, 2, 48_000, 16, &[]));
    expect_error(
        &["--backend", "virtual", f.0.to_str().unwrap()],
        2,
        &["no audio frames"],
    );
}

#[test]
fn unknown_device() {
    let wav = tone(0.1);
    expect_error(
        &[
            "--backend",
            "alsa",
            "-D",
            "nosuchpcm",
            wav.0.to_str().unwrap(),
        ],
        3,
        &["device \"nosuchpcm\"", "cannot open PCM"],
    );
}

#[test]
fn bad_option_values() {
    let wav = tone(0.1);
    let w = wav.0.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--priority", "fifo:0"], "--priority"),
        (&["--priority", "batch"], "expected fifo:N"),
        (&["--cpu", "x"], "expected a CPU list"),
        (&["--buffer-time", "0"], "--buffer-time"),
        (&["-F", "abc"], "--period-time"),
        (&["--duration", "-1"], "positive number of seconds"),
        (&["--loops", "0"], "--loops"),
        (&["--tmpfs", "sometimes"], "--tmpfs"),
        (&["--backend", "oss"], "--backend"),
        (&["--selftest-stall", "soon"], "AT_SECONDS:MILLISECONDS"),
        (&["--no-such-option"], "--no-such-option"),
    ];
    for (args, needle) in cases {
        let mut all = args.to_vec();
        all.push(w);
        expect_error(&all, 2, &[needle]);
    }
    expect_error(&["--backend", "virtual"], 2, &["FILE"]);
    expect_error(
        &["--backend", "virtual", "--json", "/no/such/dir/r.json", w],
        2,
        &["/no/such/dir"],
    );
}

#[test]
fn tmpfs_require_refuses_a_file_on_disk() {
    xrunbench_test_support::skip_if_cannot!(no_disk_dir());
    let dir = disk_dir();
    let wav = tone_in(&dir, spec16(), 0.1);
    expect_error(
        &[
            "--backend",
            "virtual",
            "--tmpfs",
            "require",
            wav.0.to_str().unwrap(),
        ],
        2,
        &["not on tmpfs"],
    );
}

fn spec16() -> hound::WavSpec {
    hound::WavSpec {
        channels: 2,
        sample_rate: 48_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    }
}

fn shm_copies_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("xrun-player-{pid}-")))
        .collect()
}

#[test]
fn a_file_on_disk_is_copied_to_tmpfs_and_the_copy_removed() {
    xrunbench_test_support::skip_if_cannot!(no_disk_dir());
    let dir = disk_dir();
    let wav = tone_in(&dir, spec16(), 0.2);
    let mut cmd = player();
    let (_, report) = play(
        &mut cmd,
        &["--backend", "virtual", "-q", wav.0.to_str().unwrap()],
    );
    assert!(report.file.copied_to_tmpfs);
    assert!(report.file.played_from.starts_with("/dev/shm/xrun-player-"));
    assert!(
        !Path::new(&report.file.played_from).exists(),
        "tmpfs copy left behind"
    );
}

#[test]
fn sigterm_ends_playback_writes_the_report_and_removes_the_copy() {
    let dir = std::env::temp_dir();
    let wav = tone_in(&dir, spec16(), 1.0);
    let json = TempFile(dir.join(format!("xrun-sigterm-{}.json", std::process::id())));
    let child = player()
        .args(["--backend", "virtual", "--duration", "30", "-q", "--json"])
        .arg(&json.0)
        .arg(&wav.0)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Playing (from its tmpfs copy, when the temporary directory is on a
    // disk): then it is the signal that ends it.
    wait_until_playing(pid, &wav.0);
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    // 128 + SIGTERM, as a shell reports it, after the report is written.
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: xrunbench_schema::PlayerReport =
        serde_json::from_slice(&std::fs::read(&json.0).unwrap()).unwrap();
    assert_eq!(report.ended, EndReason::Signal);
    assert!(report.audio_seconds < 30.0, "{}", report.audio_seconds);
    assert!(shm_copies_of(pid).is_empty(), "tmpfs copy left behind");
}

#[test]
fn fatal_errors_stop_at_the_first_underrun_with_exit_1() {
    let _serial = timing_lock();
    let wav = tone(1.0);
    let json =
        TempFile(std::env::temp_dir().join(format!("xrun-fatal-{}.json", std::process::id())));
    let out = player()
        .args([
            "--backend",
            "virtual",
            "-B",
            "20000",
            "--fatal-errors",
            "--selftest-stall",
            "0.3:100",
            "--json",
        ])
        .arg(&json.0)
        .arg(&wav.0)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: xrunbench_schema::PlayerReport =
        serde_json::from_slice(&std::fs::read(&json.0).unwrap()).unwrap();
    assert_eq!(report.ended, EndReason::FatalUnderrun);
    assert_eq!(report.events.len(), 1);
    assert!(report.audio_seconds < 0.5);
}

#[test]
fn auto_backend_says_which_it_chose() {
    let wav = tone(0.1);
    let out = player()
        .args(["--duration", "0.05", wav.0.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let expected = if xrunbench_player::has_sound_card() {
        "auto: alsa"
    } else {
        "auto: virtual, no sound card"
    };
    assert!(stderr.contains(expected), "{stderr}");
}

#[test]
fn verbose_prints_the_negotiated_setup() {
    let wav = tone(0.1);
    let out = player()
        .args([
            "--backend",
            "virtual",
            "-v",
            "-B",
            "20000",
            wav.0.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("buffer_size  : 960"), "{stderr}");
    assert!(stderr.contains("period_size  : 240"), "{stderr}");
}

/// Waits until the player `pid` streams `wav` or its tmpfs copy (past the
/// header: 4 KiB in).
fn wait_until_playing(pid: u32, wav: &Path) {
    let source = if xrunbench_player::is_on_tmpfs(wav).unwrap() {
        wav.to_path_buf()
    } else {
        loop {
            if let Some(copy) = shm_copies_of(pid).first() {
                break Path::new("/dev/shm").join(copy);
            }
            assert!(
                procs::alive(pid),
                "the player ended before it copied {}",
                wav.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait_until_read(pid, &source, 4096);
}

/// The tests' backstop against a hung player: one still running past its
/// limit is killed (and reaped) and its test fails, saying so, instead of
/// hanging the suite.
#[test]
fn a_player_running_past_the_tests_limit_is_killed_and_named() {
    let wav = tone(1.0);
    let args = [
        "--backend",
        "virtual",
        "--duration",
        "600",
        "-q",
        wav.0.to_str().unwrap(),
    ];
    let mut cmd = player();
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        output_or_kill(cmd.args(args), &args, Duration::from_millis(500))
    }))
    .expect_err("a 600 s playback outlives a 0.5 s limit");
    let message = failed
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.contains("hung: still running 500ms after it started; killed"),
        "{message}"
    );
    assert_eq!(
        procs::processes_mentioning(&format!("600 -q {}", wav.0.display())),
        Vec::<String>::new(),
        "the player is gone"
    );
}
