//! The VM lab on a real kernel: Debian's x86_64 kernel booted under QEMU
//! (TCG here: KVM does not run a guest on these machines) with a kernel
//! sound driver, the trials run inside it over SSH to 127.0.0.1, knobs
//! journaled, set, read back and restored in the guest. Only what holds
//! under any host load is asserted (records, knobs, exit codes, the
//! player's ALSA state on a kernel driver), never absolute counts: an
//! emulated CPU's timing follows the host's load.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use serde_json::Value;
use support::*;

/// One guest at a time: two emulated guests on two CPUs would only slow
/// each other down.
fn one_guest() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The kernel `lab kernel ARGS` fetches into the cache (its `--target
/// vm:` line).
fn lab_kernel(args: &[&str]) -> PathBuf {
    let mut all = vec!["lab", "kernel", "--debian"];
    all.extend(args);
    let text = xtask_stdout(&all);
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("# or on the command line: --target vm:"))
        .unwrap_or_else(|| panic!("no --target line in: {text}"));
    PathBuf::from(path.trim())
}

/// Debian's x86_64 kernel, fetched into the cache by `lab kernel` (once).
fn kernel() -> PathBuf {
    static K: OnceLock<PathBuf> = OnceLock::new();
    K.get_or_init(|| lab_kernel(&[])).clone()
}

/// QEMU processes whose command line holds `tag` (each test marks its
/// guests with a kernel argument of its own).
fn guests(tag: &str) -> Vec<String> {
    processes_mentioning(tag)
        .into_iter()
        .filter(|p| p.contains("qemu-system"))
        .collect()
}

/// `kernel = "<the test kernel>"`, for a `vm = { … }` table.
fn kernel_field() -> String {
    format!("kernel = {}", toml_string(&kernel().display().to_string()))
}

/// The `[target]` table: `vm = { FIELDS, append = "TAG" }` (the tag on the
/// guest's command line finds this test's QEMU).
fn vm_table(fields: &str, tag: &str) -> String {
    format!("[target]\nvm = {{ {fields}, append = \"{tag}\" }}\n")
}

/// A scenario playing `seconds` of 48 kHz stereo through ALSA in the guest.
fn guest_scenario(name: &str, seconds: u32) -> ScenarioText {
    ScenarioText::new(name)
        .generate(&format!(
            "{{ seconds = {seconds}, rate = 48000, channels = 2 }}"
        ))
        .audio("backend", "alsa")
}

/// `cargo xtask run S --results-dir RESULTS` with the suite's board binaries.
fn run_command(s: &Path, results: &Path) -> Command {
    let mut cmd = xtask();
    cmd.arg("run")
        .arg(s)
        .arg("--results-dir")
        .arg(results)
        .arg("--bin-dir")
        .arg(bin_dir());
    cmd
}

fn run(s: &Path, results: &Path) -> Output {
    run_command(s, results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The trial records under `results`, by file name.
fn records(results: &Path) -> Vec<(String, Value)> {
    let runs = find_named(results, "run.json");
    assert_eq!(runs.len(), 1);
    let trials = runs[0].parent().unwrap().join("trials");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&trials)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                json(&p),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn a_scenario_runs_on_a_real_kernel_with_its_sound_driver_knobs_and_load() {
    let _g = one_guest();
    let tag = "xrb_test=scenario";
    let dir = tempfile::tempdir().unwrap();
    let s = guest_scenario("lab", 3)
        .trials(2)
        .duration("3s")
        .warmup("1s")
        .audio("device", "hw:0")
        .audio("buffer_time", "20ms")
        .audio("period_time", "5ms")
        .hackbench("{ groups = 4 }")
        .config_with(
            "other",
            "sched_features = [\"NEXT_BUDDY\"]\n[config.audio]\npriority = \"other\"",
        )
        .config_with("fifo", "[config.audio]\npriority = \"fifo:80\"")
        .tail(&vm_table(
            &format!("{}, sound = \"dummy\"", kernel_field()),
            tag,
        ))
        .write(dir.path());
    let results = dir.path().join("results");
    let out = run(&s, &results);
    let err = String::from_utf8_lossy(&out.stderr);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    assert!(guests(tag).is_empty(), "QEMU left: {:?}", guests(tag));
    // The run names the guest and how its CPUs ran.
    let run = json(&find_named(&results, "run.json")[0]);
    let target = run["target"].as_str().unwrap();
    assert!(
        target.starts_with("vm ") && (target.contains("TCG") || target.contains("KVM")),
        "{target}"
    );
    let release = release_of(&kernel());
    assert_eq!(run["fingerprint"]["kernel_release"], release.as_str());
    assert!(table.contains(&format!("Kernel: {release}")), "{table}");
    let recs = records(&results);
    assert_eq!(recs.len(), 4, "{recs:?}");
    for (name, r) in &recs {
        assert_eq!(r["outcome"]["status"], "ran", "{name}: {r}");
        assert_eq!(r["machine"]["kernel_release"], release.as_str());
        assert!(
            r["machine"]["cpu_model"].as_str().unwrap().contains("QEMU") || target.contains("KVM"),
            "{name}: {}",
            r["machine"]["cpu_model"]
        );
        // ALSA on the kernel's driver, not a plugin.
        let p = &r["player"]["params"];
        assert_eq!(
            (p["backend"].as_str(), p["device"].as_str()),
            (Some("alsa"), Some("hw:0"))
        );
        assert_eq!(p["hardware"], true, "{name}: {p}");
        assert_eq!(r["load"]["ended"], "signal", "{name}");
        // The scheduler feature: set, read back and put back in the guest.
        if name.starts_with("other") {
            let k = &r["knobs"][0];
            assert_eq!(k["path"], "/sys/kernel/debug/sched/features", "{k}");
            assert_eq!(k["read_back"], "NEXT_BUDDY", "{k}");
            assert_eq!(k["restored"], k["found"], "{k}");
        } else {
            assert!(r["knobs"].as_array().unwrap().is_empty());
        }
    }
}

/// ssh to the guest that QEMU process `tag` runs, as the lab's own
/// connection does: its client key, its host key checked.
fn guest_ssh(tag: &str, dir: &Path, script: &str) -> Output {
    let line = guests(tag).into_iter().next().expect("the guest runs");
    // QEMU binds the forward on a port the kernel chooses: its monitor
    // (the socket its command line names) says which.
    let monitor = line
        .split("unix:")
        .nth(1)
        .and_then(|r| r.split(",server").next())
        .unwrap_or_else(|| panic!("no monitor socket in {line}"));
    let port = xrunbench_lab::lab::qmp::Qmp::connect(Path::new(monitor), || None)
        .and_then(|mut q| q.forwarded_port(22))
        .unwrap_or_else(|e| panic!("no forward from {monitor}: {e:#}"));
    let keys = xrunbench_lab::lab::kernel::cache_dir().join("keys");
    let host = std::fs::read_to_string(keys.join("host_key.pub")).unwrap();
    let fields: Vec<&str> = host.split_whitespace().take(2).collect();
    let known = dir.join("known_hosts");
    std::fs::write(&known, format!("[127.0.0.1]:{port} {}\n", fields.join(" "))).unwrap();
    std::process::Command::new("ssh")
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "IdentitiesOnly=yes",
            // The guest's network comes up after QEMU starts: an attempt
            // before it must fail, not wait on QEMU's forward.
            "-o",
            "ConnectTimeout=10",
        ])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known.display()))
        .arg("-i")
        .arg(keys.join("client_key"))
        .args(["-p", &port.to_string(), "root@127.0.0.1", script])
        .output()
        .unwrap()
}

/// Run in the guest, detached from the ssh session: wait for card 0's
/// playback stream to be RUNNING, then stop the player for 300 ms.
const STALL_ON_RUNNING: &str =
    "setsid sh -c 'until cat /proc/asound/card0/pcm0p/sub*/status 2>/dev/null | grep -q RUNNING; \
     do sleep 0.05; done; p=$(pidof xrun-player); kill -STOP $p; sleep 0.3; kill -CONT $p' \
     </dev/null >/dev/null 2>&1 &";

#[test]
fn the_player_plays_each_kernel_driver_and_a_stop_of_it_is_an_underrun() {
    let _g = one_guest();
    for sound in ["dummy", "aloop", "hda"] {
        let tag = format!("xrb_test=driver-{sound}");
        let dir = tempfile::tempdir().unwrap();
        let s = guest_scenario(sound, 6)
            .trials(1)
            .duration("6s")
            .warmup("0s")
            .audio("device", "hw:0")
            .audio("buffer_time", "100ms")
            .audio("period_time", "25ms")
            .audio("priority", "fifo:80")
            .config("play")
            .tail(&vm_table(
                &format!("{}, sound = \"{sound}\"", kernel_field()),
                &tag,
            ))
            .write(dir.path());
        let results = dir.path().join("results");
        let mut child = run_command(&s, &results)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Stop the player in the guest for 300 ms of its time once its
        // stream runs (HDA's gaps under TCG are not to be trusted: it only
        // has to play). The guest itself watches for the stream's RUNNING
        // state and stops the player on it, so when it lands does not
        // depend on how fast ssh or the host is: the watcher is put in
        // place by the first ssh that gets through — no later than the
        // run's own probe, which must still be followed by its check, its
        // trial set-up and the 6 s of play.
        // The wait ends with the run too: a run that failed (a boot past
        // its limit) is reported with what it said, not as a silent guest.
        let stalled = sound != "hda";
        let mut ended = false;
        let answered = stalled
            && wait_for(3000, || {
                ended = matches!(child.try_wait(), Ok(Some(_)));
                ended
                    || !guests(&tag).is_empty()
                        && guest_ssh(&tag, dir.path(), STALL_ON_RUNNING)
                            .status
                            .success()
            });
        if stalled && (ended || !answered) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{sound}: the guest never answered ssh; the run ended ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sound}: {err}");
        assert!(guests(&tag).is_empty(), "{sound}: QEMU left");
        let recs = records(&results);
        let (_, r) = &recs[0];
        let p = &r["player"];
        assert_eq!(p["ended"], "duration", "{sound}: {p}");
        assert_eq!(p["params"]["hardware"], true, "{sound}");
        // Frames, not time: all of it, however slow the guest.
        assert_eq!(p["frames_written"], 6 * 48000, "{sound}");
        if stalled {
            // 300 ms stopped behind 100 ms of buffer: an underrun of about
            // 200 ms, as the kernel's card saw it (at least 100 ms here:
            // the guest's clock and the stop are the host's to schedule).
            let gaps: Vec<f64> = p["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|e| e["gap_ms"].as_f64())
                .collect();
            assert!(
                gaps.iter().any(|&g| g >= 100.0),
                "{sound}: gaps {gaps:?} (the player stopped for 300 ms once its stream ran)"
            );
        }
    }
}

#[test]
fn bad_lab_input_is_one_line_and_leaves_no_guest() {
    let _g = one_guest();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let not_a_kernel = dir.path().join("not-a-kernel");
    std::fs::write(&not_a_kernel, vec![0x5a; 4 << 20]).unwrap();
    // A modules tree without the driver asked for.
    let no_hda = dir.path().join("modules");
    std::fs::create_dir_all(&no_hda).unwrap();
    std::fs::write(no_hda.join("modules.dep"), "kernel/sound/core/snd.ko:\n").unwrap();
    let cases: Vec<(String, String, i32, String)> = vec![
        (
            "missing".into(),
            format!(
                "kernel = {}",
                toml_string(&dir.path().join("nope/bzImage").display().to_string())
            ),
            2,
            "target.vm.kernel: ".into(),
        ),
        (
            "garbage".into(),
            format!(
                "kernel = {}",
                toml_string(&not_a_kernel.display().to_string())
            ),
            1,
            "before the guest was ready".into(),
        ),
        (
            "no-driver".into(),
            format!(
                "kernel = {}, modules = {}, sound = \"hda\"",
                toml_string(&kernel().display().to_string()),
                toml_string(&no_hda.display().to_string())
            ),
            2,
            "target.vm.sound: the kernel".into(),
        ),
    ];
    for (name, vm, code, want) in cases {
        let tag = format!("xrb_test=bad-{name}");
        let s = ScenarioText::new(&name)
            .trials(1)
            .duration("1s")
            .generate("{ seconds = 1 }")
            .audio("backend", "alsa")
            .config("a")
            .tail(&vm_table(&vm, &tag))
            .write(dir.path());
        let out = run(&s, &results);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("xtask: ") && last.contains(&want),
            "{name}: {last}\n{err}"
        );
        assert!(guests(&tag).is_empty(), "{name}: QEMU left");
    }
}

/// `/tmp/xrunbench-lab.*` directories: what a lab leaves if it does not
/// clean up after itself.
fn lab_dirs() -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("xrunbench-lab."))
        })
        .collect()
}

/// `run` of `s`, sent SIGINT once `there` holds of its stderr so far;
/// how it ended and its stderr. Fails the test if it never gets there or
/// does not end.
fn interrupted(
    s: &Path,
    results: &Path,
    there: &dyn Fn(&str) -> bool,
) -> (std::process::ExitStatus, String) {
    let err_file = results.with_extension("stderr");
    let mut child = run_command(s, results)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_file).unwrap())
        .spawn()
        .unwrap();
    let stderr = || std::fs::read_to_string(&err_file).unwrap_or_default();
    // Until it gets there, or ends without (then at once, with its
    // stderr: a guest that failed to boot ends the run).
    let mut ended_early = None;
    let reached = wait_for(900, || {
        if there(&stderr()) {
            return true;
        }
        ended_early = child.try_wait().unwrap();
        ended_early.is_some()
    }) && ended_early.is_none();
    if !reached {
        let _ = child.kill();
        let _ = child.wait();
        match ended_early {
            Some(status) => panic!("the run ended ({status}) before it got there: {}", stderr()),
            None => panic!("never got there: {}", stderr()),
        }
    }
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let ended = wait_for(300, || child.try_wait().unwrap().is_some());
    if !ended {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    assert!(ended, "SIGINT did not end the run: {}", stderr());
    (status, stderr())
}

#[test]
fn ctrl_c_during_the_boot_or_a_trial_leaves_no_guest() {
    let _g = one_guest();
    let before = lab_dirs();
    for when in ["boot", "trial"] {
        let tag = format!("xrb_test=ctrl-c-{when}");
        let dir = tempfile::tempdir().unwrap();
        let s = guest_scenario(when, 2)
            .trials(2)
            .duration("20s")
            .warmup("0s")
            .config_with("a", "sched_features = [\"NEXT_BUDDY\"]")
            .tail(&vm_table(&kernel_field(), &tag))
            .write(dir.path());
        let results = dir.path().join("results");
        let (status, stderr) = interrupted(&s, &results, &|err| match when {
            "boot" => !guests(&tag).is_empty(),
            _ => err.contains("trial 1/2 a-1 starting"),
        });
        assert_ne!(status.code(), Some(0), "{when}: {stderr}");
        if when == "trial" {
            assert_eq!(status.code(), Some(130), "{stderr}");
            let run = json(&find_named(&results, "run.json")[0]);
            assert_eq!(run["outcome"]["status"], "interrupted", "{run}");
        }
        assert!(
            guests(&tag).is_empty(),
            "{when}: QEMU left: {:?}",
            guests(&tag)
        );
    }
    let left: Vec<PathBuf> = lab_dirs()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert!(left.is_empty(), "lab directories left: {left:?}");
}

#[test]
fn kvm_asked_for_where_it_does_not_run_is_one_line() {
    let _g = one_guest();
    let tag = "xrb_test=kvm";
    let dir = tempfile::tempdir().unwrap();
    let s = guest_scenario("kvm", 1)
        .trials(1)
        .duration("1s")
        .config("a")
        .tail(&vm_table(
            &format!("{}, accel = \"kvm\"", kernel_field()),
            tag,
        ))
        .write(dir.path());
    let out = run(&s, &dir.path().join("results"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(guests(tag).is_empty(), "QEMU left");
    if out.status.success() {
        // A machine whose KVM runs guests: the run says so.
        let run = json(&find_named(&dir.path().join("results"), "run.json")[0]);
        assert!(run["target"].as_str().unwrap().contains("KVM"), "{run}");
    } else {
        // Here (nested, kvm_pvm): /dev/kvm opens, but a guest does not run.
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("xtask: target.vm.accel = \"kvm\": "),
            "{last}\n{err}"
        );
        assert_eq!(out.status.code(), Some(1), "{err}");
    }
}

/// Debian's newest x86_64 6.12 kernel (`lab kernel --version 6.12`).
fn kernel_612() -> PathBuf {
    static K: OnceLock<PathBuf> = OnceLock::new();
    K.get_or_init(|| lab_kernel(&["--version", "6.12"])).clone()
}

/// The release of a kernel `lab kernel` unpacked (`…/vmlinuz-RELEASE`).
fn release_of(kernel: &Path) -> String {
    kernel
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("vmlinuz-")
        .to_string()
}

/// A scenario whose two configurations boot two kernels: `k61` the
/// target's, `k612` its own, named by version (the one `kernel_612`
/// fetched: the newest 6.12 in the cache).
fn two_kernel_scenario(dir: &Path, name: &str, tag: &str, duration: &str) -> PathBuf {
    kernel_612();
    guest_scenario(name, 2)
        .trials(2)
        .duration(duration)
        .warmup("0s")
        .audio("device", "hw:0")
        .config("k61")
        .config_with("k612", "vm = { debian = \"6.12\" }")
        .tail(&vm_table(
            &format!("{}, sound = \"dummy\"", kernel_field()),
            tag,
        ))
        .write(dir)
}

#[test]
fn two_kernels_run_in_one_run_one_guest_each_the_idle_one_frozen() {
    let _g = one_guest();
    let (r61, r612) = (release_of(&kernel()), release_of(&kernel_612()));
    assert_ne!(r61, r612);
    let before = lab_dirs();

    // A whole run: one table, each column on its own kernel.
    let tag = "xrb_test=two-kernels";
    let dir = tempfile::tempdir().unwrap();
    let s = two_kernel_scenario(dir.path(), "two", tag, "2s");
    let results = dir.path().join("results");
    let out = run(&s, &results);
    let err = String::from_utf8_lossy(&out.stderr);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    assert!(guests(tag).is_empty(), "QEMU left: {:?}", guests(tag));
    assert_eq!(find_named(&results, "run.json").len(), 1);
    assert!(
        table.contains(&format!("Kernel: k61 {r61}, k612 {r612}.")),
        "{table}"
    );
    let recs = records(&results);
    assert_eq!(recs.len(), 4, "{recs:?}");
    for (name, r) in &recs {
        assert_eq!(r["outcome"]["status"], "ran", "{name}: {r}");
        let want = if name.starts_with("k612") {
            &r612
        } else {
            &r61
        };
        assert_eq!(r["machine"]["kernel_release"], want.as_str(), "{name}");
    }
    // The guest not measured was frozen: its QEMU took (next to) no CPU
    // while the other's trials ran. CPU time, not wall-clock time: a busy
    // host does not make a stopped QEMU run.
    let cost = err
        .lines()
        .find_map(|l| l.split("frozen guests took ").nth(1))
        .unwrap_or_else(|| panic!("no frozen guests' cost: {err}"));
    let share: f64 = cost
        .rsplit('(')
        .next()
        .and_then(|p| p.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unreadable cost: {cost}"));
    assert!(share < 1.0, "a frozen guest took CPU: {cost}");

    // SIGINT while a guest is frozen: every QEMU reaped, nothing left.
    let tag = "xrb_test=two-kernels-ctrl-c";
    let dir = tempfile::tempdir().unwrap();
    let s = two_kernel_scenario(dir.path(), "two-c", tag, "20s");
    let results = dir.path().join("results");
    let (status, stderr) = interrupted(&s, &results, &|err| {
        err.contains("trial 2/4 k612-1 starting") && guests(tag).len() == 2
    });
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(guests(tag).is_empty(), "QEMU left: {:?}", guests(tag));
    let left: Vec<PathBuf> = lab_dirs()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert!(left.is_empty(), "lab directories left: {left:?}");
}
