//! The `cpal` sink on real, clocked servers: cpal's ALSA host through a
//! hinted `plug` PCM over a JACK dummy server, cpal's JACK host (feature
//! `cpal-jack`) and cpal's PulseAudio host on a null sink (feature
//! `cpal-pulseaudio`). Servers run real-time on CPU 0, the player's threads
//! (writer, data callback, and the host's own threads the callback waits
//! for) on CPU 1 at FIFO 80, so background load does not fake underruns
//! and a stall of the callback never stalls the server. They pass 20 runs
//! in a row beside `xrun-hackbench -g 4`. What the machine itself takes
//! (a VM's vCPU stolen by the hypervisor) is told apart with the trial's
//! latency monitor beside the player ([`Watched::machine_pause_for`]).
//!
//! The stalls are injected into the data callback itself. The callback-gap
//! figure is `callback instant − (previous playback instant + previous
//! frames / rate)`: the stalled callback's own audio never reached the
//! device in time but the formula assumes it did, so for a stall S starting
//! with Q queued and a callback of P, the expected figure is S − Q − P.

mod common;

use std::process::{Command, Output};

use common::*;
use xrunbench_schema::player::{ClockSource, EventSource, SelftestStall, Underrun};
use xrunbench_test_support::servers::{HintedJackPcm, JackServer, HINTED_JACK_PCM};

/// The common arguments: real-time on CPU 1, a 20 ms buffer.
const RT: [&str; 6] = ["--priority", "fifo:80", "--cpu", "1", "-B", "20000"];

/// The stalls of the issue, injected into the data callback.
const STALLS: [&str; 4] = [
    "--duration",
    "3.5",
    "--selftest-stall",
    "0.5:100,1.5:300,2.5:500",
];

/// Plays a 2 s tone through `cmd`, real-time (`RT`) and quiet, watched.
fn play_two_seconds(cmd: &mut Command) -> Watched {
    let wav = tone(2.0);
    let mut args = RT.to_vec();
    args.extend(["-q", wav.0.to_str().unwrap()]);
    play_watched(cmd, &args).1
}

/// Plays a 1 s tone through `cmd`, real-time (`RT`), with the `STALLS`
/// injected into its data callback, watched.
fn play_with_stalls(cmd: &mut Command) -> (Output, Watched) {
    let wav = tone(1.0);
    let mut args = RT.to_vec();
    args.extend(STALLS);
    args.push(wav.0.to_str().unwrap());
    play_watched(cmd, &args)
}

/// Asserts one callback-gap event per stall, within 10 ms of the expected
/// S − Q − P; prints every figure.
fn assert_one_gap_per_stall(w: &Watched, host: &str) {
    assert_one_gap_per_stall_beside(w, host, &[]);
}

/// As [`assert_one_gap_per_stall`], where events of the `extra` sources
/// that carry no gap may stand beside the stalls' own (printed, not
/// counted): JACK's xrun callback is server-wide, and one long stall of a
/// client's process callback can make the server report more than one.
/// So may events outside the stalls that a pause of the machine explains
/// ([`Watched::machine_pause_for`]).
fn assert_one_gap_per_stall_beside(w: &Watched, host: &str, extra: &[EventSource]) {
    let gapless_extra = |e: &Underrun| extra.contains(&e.source) && e.gap_ms == 0.0;
    let pairs = w.one_event_per_stall(host, gapless_extra);
    assert_eq!(pairs.len(), 3, "{host}: every stall ran");
    // The discrimination the excuse rests on: a callback that sleeps (the
    // sink losing audio on its own) leaves the monitor punctual. The
    // machine's own pauses (100 ms slices on a saturated VM here) may
    // fall in a stall, but none spans half of a long one.
    for (stall, _) in &pairs {
        let longest = w
            .pauses
            .iter()
            .filter(|p| stall.holds(p.due_s))
            .map(|p| p.ms())
            .fold(0.0, f64::max);
        assert!(
            stall.actual_ms < 250.0 || longest < stall.actual_ms / 2.0,
            "{host}: the monitor was away {longest:.3} ms in a stall of the callback: {stall:?}"
        );
    }
    check_stall_events(w, host, &pairs);
}

/// Asserts that the sink gave the host's own threads, which the callback
/// waits for, the callback's scheduling (`RT`: fifo:80 on CPU 1). Left
/// below it, they were preempted by it halfway through handing it something
/// and the server ran dry (traced on the PulseAudio and PipeWire hosts
/// under load).
#[cfg(any(feature = "cpal-pulseaudio", feature = "cpal-pipewire"))]
fn assert_host_threads_share_the_callback_scheduling(
    report: &xrunbench_schema::PlayerReport,
    host: &str,
) {
    assert!(
        report
            .params
            .notes
            .iter()
            .any(|n| n.starts_with("the host's own threads ")
                && n.contains(" run at fifo:80 on CPU 1 ")),
        "{host}: {:?}",
        report.params.notes
    );
}

/// Checks each stall's event: a callback gap on the stream's clock that
/// ends within 10 ms of the stall's end and is at least the stall's own
/// loss, S − Q − P, less 10 ms. When the stalled callback came on time
/// that is the gap S − Q − P ± 10 ms; when the server delivered it late
/// (traced beside 60 busy loops: 10–20 ms, the machine itself punctual),
/// the audio ran dry before the stall began and the gap is longer by that
/// lateness, which the player rightly counts: the end is what the stall
/// fixes.
fn check_stall_events(w: &Watched, host: &str, pairs: &[(&SelftestStall, &Underrun)]) {
    let period_ms = w.report.params.period_us as f64 / 1e3;
    for (stall, e) in pairs {
        let queued_ms = stall.queued_us.expect("queued audio known") as f64 / 1e3;
        let expected = stall.actual_ms - queued_ms - period_ms;
        let end_error_ms = (e.at_s + e.gap_ms / 1e3 - (stall.at_s + stall.actual_ms / 1e3)) * 1e3;
        eprintln!(
            "{host}: stall {:.3} ms (asked {:.0}), queued {queued_ms:.3} ms, callback {period_ms:.3} ms: \
             gap {:.3} ms, expected {expected:.3} ms (error {:+.3}), ends {end_error_ms:+.3} ms from \
             the stall's end; source {:?}, also seen by {:?}",
            stall.actual_ms,
            stall.requested_ms,
            e.gap_ms,
            e.gap_ms - expected,
            e.source,
            e.also_seen_by
        );
        assert_eq!(e.source, EventSource::CallbackGap, "{host}: {e:?}");
        assert_eq!(e.gap_clock, ClockSource::Cpal);
        if w.gap_judged(host, stall, e, 10.0) {
            assert!(
                end_error_ms.abs() <= 10.0 && e.gap_ms >= expected - 10.0,
                "{host}: gap {:.3} ms ending {end_error_ms:+.3} ms from the stall's end, \
                 expected {expected:.3} ms or more ending there ± 10 ms",
                e.gap_ms
            );
        }
    }
}

fn assert_clean(w: &Watched, host: &str) {
    assert_clean_beside(w, host, &[]);
}

/// As [`assert_clean`], where gapless events of the `extra` sources may
/// appear (printed, not counted): JACK's xrun callback is server-wide and
/// also fires while the graph changes (a client activates, ports connect),
/// when this stream's own timestamps show no gap. Events a pause of the
/// machine explains are printed, not counted.
fn assert_clean_beside(w: &Watched, host: &str, extra: &[EventSource]) {
    let report = &w.report;
    let events = w.unexplained(host, |e| extra.contains(&e.source) && e.gap_ms == 0.0);
    eprintln!(
        "{host}: clean run: {} events, fill min {} us p50 {} us, lateness p99 {} us max {} us, host errors {:?}, notes {:?}",
        report.events.len(),
        report.fill.min,
        report.fill.p50,
        report.lateness.p99,
        report.lateness.max,
        report.host_errors,
        report.params.notes
    );
    assert_eq!(report.params.backend, "cpal");
    assert_eq!(report.params.underrun_clock, ClockSource::Cpal);
    assert_eq!(
        events,
        Vec::<&Underrun>::new(),
        "{host}: a clean run has no underrun"
    );
    assert_eq!(report.frames_written, 96_000);
    assert!(
        report.wall_seconds > 1.9 && report.wall_seconds < 3.0 + lost_s(report),
        "{host}: {}",
        report.wall_seconds
    );
    assert!(report.fill.count > 50, "{host}: near misses measured");
}

/// The player on cpal's `host`, playing to `device` (`None`: the host's
/// default).
fn cpal_player(host: &str, device: Option<&str>) -> Command {
    let mut cmd = player();
    cmd.args(["--backend", "cpal", "--host", host]);
    cmd.args(device.map(|d| ["-D", d]).into_iter().flatten());
    cmd
}

/// cpal's ALSA host through the hinted `plug` PCM over JACK.
fn alsa_host_player(server: &JackServer, conf: &HintedJackPcm) -> Command {
    let mut cmd = cpal_player("alsa", Some(HINTED_JACK_PCM));
    server.configure(&mut cmd);
    conf.configure(&mut cmd);
    cmd
}

#[test]
fn alsa_host_over_jack_plays_two_seconds_cleanly() {
    let _serial = timing_lock();
    let server = timing_jack();
    let conf = HintedJackPcm::create().unwrap();
    let w = play_two_seconds(&mut alsa_host_player(&server, &conf));
    assert_eq!(w.report.params.device, format!("alsa/{HINTED_JACK_PCM}"));
    // The jack plugin rounds to its 256-frame period; the player asked
    // ALSA first and says so.
    assert_eq!(w.report.params.period_frames % 256, 0);
    assert!(!w.report.params.notes.is_empty());
    assert_clean(&w, "cpal alsa");
}

#[test]
fn alsa_host_callback_stalls_give_one_gap_each_within_10ms() {
    let _serial = timing_lock();
    let server = timing_jack();
    let conf = HintedJackPcm::create().unwrap();
    let (out, w) = play_with_stalls(&mut alsa_host_player(&server, &conf));
    assert_one_gap_per_stall(&w, "cpal alsa");
    // The ALSA host's EPIPE comes back as cpal's Xrun: both sources saw it.
    for e in w
        .report
        .events
        .iter()
        .filter(|e| w.machine_pause_for(e).is_none())
    {
        assert_eq!(e.also_seen_by, vec![EventSource::CpalXrun], "{e:?}");
    }
    // One line per event, the machine's included.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("underrun!!! (at least ").count(),
        w.report.events.len(),
        "{stderr}"
    );
}

#[cfg(feature = "cpal-jack")]
mod jack_host {
    use super::*;

    fn jack_host_player(server: &JackServer) -> Command {
        let mut cmd = cpal_player("jack", None);
        server.configure(&mut cmd);
        cmd
    }

    #[test]
    fn jack_host_plays_two_seconds_cleanly() {
        let _serial = timing_lock();
        let server = timing_jack();
        let w = play_two_seconds(&mut jack_host_player(&server));
        // JACK takes callbacks of its own period only, and floats only.
        assert_eq!(w.report.params.period_frames, 256);
        assert_eq!(w.report.params.format, "FLOAT_LE");
        assert_clean_beside(&w, "cpal jack", &[EventSource::CpalXrun]);
    }

    #[test]
    fn jack_host_callback_stalls_give_one_gap_each_within_10ms() {
        let _serial = timing_lock();
        let server = timing_jack();
        let (_, w) = play_with_stalls(&mut jack_host_player(&server));
        assert_one_gap_per_stall_beside(&w, "cpal jack", &[EventSource::CpalXrun]);
    }
}

#[cfg(feature = "cpal-pulseaudio")]
mod pulse_host {
    use super::*;
    use xrunbench_test_support::servers::{PulseConfig, PulseServer};

    fn pulse() -> PulseServer {
        PulseServer::start(&PulseConfig {
            cpus: Some("0".into()),
            fifo: Some(70),
            ..PulseConfig::default()
        })
        .expect("start a PulseAudio null-sink server (cargo xtask test installs pulseaudio)")
    }

    fn pulse_host_player(server: &PulseServer) -> Command {
        let mut cmd = cpal_player("pulseaudio", Some("xrunbench"));
        server.configure(&mut cmd);
        cmd
    }

    /// PulseAudio puts its main thread, which serves every client, back to
    /// SCHED_OTHER whatever `chrt` it was started under; the server must
    /// not be left there (see `PulseConfig::fifo`).
    #[test]
    fn pulseaudio_server_threads_all_run_real_time() {
        let _serial = timing_lock();
        let server = pulse();
        let pid = server.pid().expect("server running");
        let tasks = xrunbench_test_support::procs::threads(pid);
        assert!(tasks.len() > 1, "{tasks:?}");
        for tid in tasks {
            // SAFETY: plain syscall on a thread id.
            let policy = unsafe { libc::sched_getscheduler(tid as libc::pid_t) }
                & !libc::SCHED_RESET_ON_FORK;
            assert!(
                policy == libc::SCHED_FIFO || policy == libc::SCHED_RR,
                "pulseaudio thread {tid}: policy {policy}"
            );
        }
    }

    #[test]
    fn pulseaudio_host_plays_two_seconds_cleanly() {
        let _serial = timing_lock();
        let server = pulse();
        let w = play_two_seconds(&mut pulse_host_player(&server));
        assert_eq!(w.report.params.device, "pulseaudio/xrunbench");
        assert_clean(&w, "cpal pulseaudio");
        assert_host_threads_share_the_callback_scheduling(&w.report, "cpal pulseaudio");
    }

    #[test]
    fn pulseaudio_host_callback_stalls_give_one_gap_each_within_10ms() {
        let _serial = timing_lock();
        let server = pulse();
        let (_, w) = play_with_stalls(&mut pulse_host_player(&server));
        assert_one_gap_per_stall(&w, "cpal pulseaudio");
    }
}

#[cfg(feature = "cpal-pipewire")]
mod pipewire_host {
    use super::*;
    use xrunbench_test_support::servers::{PipeWireServer, PIPEWIRE_SINK};

    fn pipewire_host_player(server: &PipeWireServer) -> Command {
        let mut cmd = cpal_player("pipewire", Some(PIPEWIRE_SINK));
        server.configure(&mut cmd);
        cmd
    }

    fn server() -> PipeWireServer {
        let server = PipeWireServer::start(Some("0"))
            .expect("start PipeWire + WirePlumber (cargo xtask test installs them)");
        // As PulseAudio's (`pulse()`): its data loop is real-time already,
        // the main loops that start a stream are not.
        server
            .make_real_time(70)
            .expect("PipeWire threads at FIFO 70");
        server
    }

    #[test]
    fn pipewire_host_plays_two_seconds_cleanly() {
        let _serial = timing_lock();
        let server = server();
        let w = play_two_seconds(&mut pipewire_host_player(&server));
        assert_eq!(w.report.params.device, format!("pipewire/{PIPEWIRE_SINK}"));
        assert_clean(&w, "cpal pipewire");
        assert_host_threads_share_the_callback_scheduling(&w.report, "cpal pipewire");
    }

    /// PipeWire's host hands the callback a playback instant equal to the
    /// callback instant (queued 0), so the expected figure is S − P.
    #[test]
    fn pipewire_host_callback_stalls_give_one_gap_each_within_10ms() {
        let _serial = timing_lock();
        let server = server();
        let (_, w) = play_with_stalls(&mut pipewire_host_player(&server));
        assert_one_gap_per_stall(&w, "cpal pipewire");
    }
}

fn run_fail(args: &[&str]) -> (i32, String) {
    let out = player().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), stderr)
}

#[test]
fn list_devices_needs_no_file_and_names_every_host() {
    let out = player().arg("--list-devices").output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    for host in ["alsa", "jack", "pulseaudio", "pipewire"] {
        assert!(stdout.contains(&format!("host {host}")), "{stdout}");
    }
}

#[test]
fn bad_cpal_choices_get_one_line_and_their_exit_code() {
    let wav = tone(0.1);
    let file = wav.0.to_str().unwrap();
    // Unknown host: usage.
    let (code, stderr) = run_fail(&["--backend", "cpal", "--host", "coreaudio", file]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // A device the ALSA host does not list: device error, naming it.
    let (code, stderr) = run_fail(&["--backend", "cpal", "-D", "no_such_pcm", file]);
    assert_eq!(code, 3, "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("no_such_pcm") && last.contains("no such output device"),
        "{stderr}"
    );
    // A host this build lacks: usage, naming the feature.
    #[cfg(not(feature = "cpal-pipewire"))]
    {
        let (code, stderr) = run_fail(&["--backend", "cpal", "--host", "pipewire", file]);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("cpal-pipewire"), "{stderr}");
    }
}

#[test]
fn reports_without_event_sources_still_parse() {
    // An event as written before the cpal sink: no `source`.
    let old = r#"{"at_s":1.0,"file_frame":1,"file_loop":0,"at_least_ms":2.0,
        "at_least_clock":"player","gap_ms":3.0,"gap_clock":"player","queued_before_us":null}"#;
    let e: xrunbench_schema::player::Underrun = serde_json::from_str(old).unwrap();
    assert_eq!(e.source, EventSource::DeviceEpipe);
    assert!(e.also_seen_by.is_empty());
}
