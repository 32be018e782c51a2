//! Hostile input and faults: headers and buffers beyond what a PCM plays,
//! a FIFO, a report destination that cannot be written, copies left by a
//! killed player, a huge sparse file, a flood of underruns, a period longer
//! than the buffer, a file truncated while it plays, and the exit code
//! after a signal. Each is an error of one line (exit 2 for bad input) or a
//! report that is still written; never a panic, an abort or a wait that
//! only SIGKILL ends.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;
use xrunbench_schema::player::EndReason;
use xrunbench_test_support::SmallDisk;
use xrunbench_wav::canonical_wav;

/// Runs the player, expects `code` and a single stderr line containing
/// every one of `needles`.
fn expect_error(args: &[&str], code: i32, needles: &[&str]) {
    let out = player().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {n:?} not in {stderr:?}");
    }
}

fn shm_copies_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("xrun-player-{pid}-")))
        .collect()
}

#[test]
fn a_rate_beyond_any_pcm_is_refused_and_leaves_no_copy() {
    let mut bytes = canonical_wav(1, 1, 8000, 16, &[0; 64]);
    for rate in [u32::MAX, 1_000_000_000] {
        bytes[24..28].copy_from_slice(&rate.to_le_bytes());
        // On disk (not tmpfs), where the player would make a copy.
        let f = bytes_file(&bytes);
        let child = player()
            .args(["--backend", "virtual", f.0.to_str().unwrap()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("sample rate {rate} Hz, expected 1..=768000")),
            "{stderr}"
        );
        assert!(shm_copies_of(pid).is_empty());
    }
}

#[test]
fn huge_buffers_and_periods_are_refused_in_one_line() {
    let wav = tone(0.1);
    let w = wav.0.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--buffer-size", "18446744073709551615"],
            "--buffer-size 18446744073709551615",
        ),
        (
            vec!["--buffer-size", "10000000000"],
            "--buffer-size 10000000000",
        ),
        (
            vec!["--period-size", "10000000000"],
            "--period-size 10000000000",
        ),
        (vec!["-B", "4294967295"], "--buffer-time 4294967295"),
    ] {
        let mut all = vec!["--backend", "virtual"];
        all.extend(args);
        all.push(w);
        expect_error(&all, 2, &[needle, "33554432 bytes"]);
    }
    // 8-bit mono: 4295 s at 8 kHz is still 34 MB.
    let dir = std::env::temp_dir();
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 8000,
        bits_per_sample: 8,
        sample_format: hound::SampleFormat::Int,
    };
    let small = tone_in(&dir, spec, 0.1);
    expect_error(
        &[
            "--backend",
            "virtual",
            "-B",
            "4294967295",
            small.0.to_str().unwrap(),
        ],
        2,
        &["--buffer-time 4294967295", "34359738 bytes"],
    );
}

#[test]
fn a_period_longer_than_the_buffer_is_said() {
    let wav = tone(0.2);
    let mut cmd = player();
    let (out, report) = play(
        &mut cmd,
        &[
            "--backend",
            "virtual",
            "-B",
            "20000",
            "-F",
            "40000",
            wav.0.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let note = "period of 1920 frames asked for is longer than the buffer (960 frames): \
                the period is 960 frames";
    assert!(stderr.contains(note), "{stderr}");
    assert!(
        report.params.notes.iter().any(|n| n.contains(note)),
        "{:?}",
        report.params.notes
    );
    assert_eq!(report.params.period_frames, 960);
}

#[test]
fn a_fifo_as_the_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.wav");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut child = player()
        .args(["--backend", "virtual", fifo.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It answers at once; a wait on the FIFO would never end by itself.
    let mut ended = false;
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            ended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if !ended {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(ended, "still waiting on the FIFO");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file (a FIFO)"), "{stderr}");
}

#[test]
fn an_unwritable_report_destination_is_refused_before_playing() {
    let wav = tone(0.1);
    let w = wav.0.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for (dest, needle) in [
        ("/proc/x.json", "--json /proc/x.json: cannot create"),
        (d, "is a directory"),
    ] {
        // A long duration: refusing after playing would show as a summary.
        expect_error(
            &[
                "--backend",
                "virtual",
                "--duration",
                "30",
                "--json",
                dest,
                w,
            ],
            2,
            &[needle],
        );
    }
    // A device is written in place, never replaced by a file.
    let out = player()
        .args(["--backend", "virtual", "-q", "--json", "/dev/null", w])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device_());
}

/// `FileType::is_char_device` under a name the test can call on std's type.
trait CharDevice {
    fn is_char_device_(&self) -> bool;
}

impl CharDevice for std::fs::FileType {
    fn is_char_device_(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_char_device()
    }
}

#[test]
fn a_report_that_cannot_be_written_at_the_end_keeps_the_summary_and_says_where_it_is() {
    xrunbench_test_support::skip_unless_root!();
    let disk = SmallDisk::mount(64 * 1024);
    let wav = tone(1.0);
    let dest = disk.path().join("r.json");
    // The disk is full before the player starts: its check of the
    // destination (an empty file created and removed, which a full tmpfs
    // still takes) passes, the report at the end cannot be written. No
    // race with the player's start, on any machine.
    let filler = disk.path().join("filler");
    let _ = std::fs::write(&filler, vec![1u8; 128 * 1024]);
    assert_eq!(disk.free(), 0);
    let child = player()
        .args(["--backend", "virtual", "--duration", "1", "--json"])
        .arg(&dest)
        .arg(&wav.0)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("xrun-player: played 1.000 s"), "{stderr}");
    let last = stderr.lines().last().unwrap();
    let (_, rest) = last.split_once(" is in ").expect(last);
    let kept = PathBuf::from(rest.split(" instead").next().unwrap());
    let report: xrunbench_schema::PlayerReport =
        serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    std::fs::remove_file(&kept).unwrap();
    assert!(last.contains(dest.to_str().unwrap()), "{last}");
    assert_eq!(report.ended, EndReason::Duration);
}

#[test]
fn copies_left_by_a_killed_player_are_swept_by_the_next() {
    // Above the kernel's pid_max: never a live process.
    let stale = Path::new("/dev/shm").join("xrun-player-4194305-song.wav");
    std::fs::write(&stale, b"left by a SIGKILL").unwrap();
    let wav = tone(0.1);
    let mut cmd = player();
    let (out, _) = play(&mut cmd, &["--backend", "virtual", wav.0.to_str().unwrap()]);
    let exists = stale.exists();
    let _ = std::fs::remove_file(&stale);
    assert!(!exists, "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_huge_sparse_file_is_copied_only_as_far_as_it_plays() {
    xrunbench_test_support::skip_if_cannot!(no_disk_dir());
    let dir = disk_dir();
    // 2 GB of data, nearly all of it a hole.
    let mut bytes = canonical_wav(1, 2, 48_000, 16, &[0; 4]);
    let data_len: u32 = 2_000_000_000;
    // The data chunk's size field: bytes 40..44 of the canonical header.
    bytes[40..44].copy_from_slice(&data_len.to_le_bytes());
    let f = bytes_file_in(&dir, &bytes);
    let file = std::fs::OpenOptions::new().write(true).open(&f.0).unwrap();
    file.set_len(44 + u64::from(data_len)).unwrap();
    let mut cmd = player();
    let (_, report) = play(
        &mut cmd,
        &[
            "--backend",
            "virtual",
            "--duration",
            "0.2",
            "-v",
            f.0.to_str().unwrap(),
        ],
    );
    assert!(report.file.copied_to_tmpfs);
    assert_eq!(report.file.frames, u64::from(data_len) / 4);
    assert!(
        report
            .params
            .notes
            .iter()
            .any(|n| n.contains("copied 38444 of 2000000044 bytes")),
        "{:?}",
        report.params.notes
    );
}

#[test]
fn a_flood_of_underruns_is_printed_in_moderation_and_kept_whole() {
    let wav = tone(1.0);
    let mut cmd = player();
    // One frame of buffer (an underrun at nearly every write on a quiet
    // machine), and 200 stalls of the writer, 1 ms each, every 2 ms: each
    // one an underrun of its own however busy or slow the machine is, so
    // the flood is there by construction.
    let stalls: Vec<String> = (0..200)
        .map(|i| format!("{:.3}:1", 0.05 + 0.002 * f64::from(i)))
        .collect();
    let (out, report) = play(
        &mut cmd,
        &[
            "--backend",
            "virtual",
            "--buffer-size",
            "1",
            "--duration",
            "0.5",
            "--selftest-stall",
            &stalls.join(","),
            wav.0.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = stderr
        .lines()
        .filter(|l| l.starts_with("underrun!!!"))
        .count();
    assert!(report.events.len() >= 200, "{} events", report.events.len());
    // At most 10 a second of wall time (each window of a second starts
    // with the first line printed in it).
    let most = 10 * (report.wall_seconds.ceil() as usize + 1);
    assert!(
        lines <= most,
        "{lines} underrun lines in {} s",
        report.wall_seconds
    );
    assert!(
        stderr.contains("underrun lines not printed (every underrun is in the report)"),
        "{stderr}"
    );
}

#[test]
fn a_file_truncated_while_playing_is_named_and_the_report_still_written() {
    let wav = tone(3.0);
    let json = tempfile::NamedTempFile::new().unwrap();
    let child = player()
        .args(["--backend", "virtual", "--json"])
        .arg(json.path())
        .arg(&wav.0)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Playing: its stream is well past the header.
    wait_until_read(child.id(), &wav.0, 64 * 1024);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&wav.0)
        .unwrap();
    f.set_len(1000).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.contains(wav.0.to_str().unwrap()) && last.contains("truncated"),
        "{last}"
    );
    let report: xrunbench_schema::PlayerReport =
        serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap();
    assert!(report.audio_seconds > 0.0 && report.audio_seconds < 3.0);
}

#[test]
fn a_signal_ends_with_128_plus_its_number_after_the_report() {
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let wav = tone(1.0);
        let json = tempfile::NamedTempFile::new().unwrap();
        let child = player()
            .args(["--backend", "virtual", "--duration", "30", "-q", "--json"])
            .arg(json.path())
            .arg(&wav.0)
            .spawn()
            .unwrap();
        // Its handlers are in before it opens the file.
        wait_until_read(child.id(), &wav.0, 0);
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code));
        let report: xrunbench_schema::PlayerReport =
            serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap();
        assert_eq!(report.ended, EndReason::Signal);
    }
}
