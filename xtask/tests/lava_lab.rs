//! The product against a private LAVA lab (test-support's `LavaLab`: real
//! lava-server and lava-worker 2023.01 on 127.0.0.1, two QEMU devices
//! booting Debian's kernel with the VM lab's console initramfs):
//! `run --lava` spreads a scenario's trials over both devices at once and
//! brings them back as a table; `bisect-run --lava` names the commit whose
//! ramdisk stalls the player; and the faults — a server that is not there,
//! a wrong or missing token, a job the server rejects, a job that ends
//! Incomplete, a device taken offline with its job canceled — are one line
//! each and lose nothing. The SSH test board is a device too (type `ssh`):
//! a scenario runs on it with its host key checked, and behind a wrong
//! known_hosts it is never reached.
//!
//! One lab for the whole binary, started by the first test that needs it
//! and torn down by `main` when the last has run (its start and teardown
//! were most of a test's time, and the lab's lock let only one lab run at
//! a time anyway): this binary has its own harness (libtest-mimic, the
//! same command line and output as libtest's) so that `main` owns the lab.
//! The tests run one at a time, each on the devices it needs put in the
//! health it needs, and read job ids from the server, never assuming them.

mod lava_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lava_support::{on_board, LavaLeftovers};
use support::{
    cross_board_binaries, find_named, git, stopped_player_script, write_script, xtask, ScenarioText,
};

use xrunbench_lab::arch::Arch;
use xrunbench_lab::lab::initramfs::{Sound, CONSOLE_PROMPT};
use xrunbench_lab::lab::kernel;
use xrunbench_lava::server::{JobState, Server, ServerError, Token};
use xrunbench_test_support::lava_lab::{LabDevice, LavaLab, TOKEN};
use xrunbench_test_support::testboard::TestBoard;

/// Debian's x86_64 kernel and a console initramfs with snd-dummy and the
/// board binaries, written into `dir`.
fn guest(dir: &Path) -> (PathBuf, PathBuf) {
    let bins = xrunbench_test_support::boards::bin_dir();
    guest_with(dir, "initramfs.cpio", &bins, Vec::new())
}

/// Debian's x86_64 kernel and a console initramfs `name` in `dir` with
/// snd-dummy, the board binaries of `bins` and `extra` files (host path,
/// guest path).
fn guest_with(
    dir: &Path,
    name: &str,
    bins: &Path,
    extra: Vec<(PathBuf, PathBuf)>,
) -> (PathBuf, PathBuf) {
    // Once for the whole binary: the tests run at once, and two fetches
    // of the kernel would share apt's lists directory (and its lock).
    static KERNEL: OnceLock<kernel::Kernel> = OnceLock::new();
    let k = KERNEL.get_or_init(|| kernel::debian(Arch::X86_64, false).expect("Debian's kernel"));
    let initrd = dir.join(name);
    xrunbench_lab::lab::vm::console_image(
        Arch::X86_64,
        &k.modules,
        Sound::Dummy,
        bins,
        extra,
        &initrd,
    )
    .expect("initramfs");
    (k.image.clone(), initrd)
}

/// The lab's part of a job for its `qemu` devices: booting `kernel` and
/// `initrd`, waiting for the console's prompt (what a user's `--lava-job`
/// file holds).
fn lab_job(kernel: &Path, initrd: &Path) -> String {
    qemu_job("qemu", "arch: amd64", "ttyS0", 10, kernel, initrd)
}

/// A job of `device_type` booting `kernel` and `initrd` under LAVA's
/// `qemu` boot method with the job `context` (YAML, one line each), the
/// kernel's console on `console`, waiting at most `minutes` for the
/// console's prompt.
fn qemu_job(
    device_type: &str,
    context: &str,
    console: &str,
    minutes: u32,
    kernel: &Path,
    initrd: &Path,
) -> String {
    let prompt = CONSOLE_PROMPT.trim_end();
    let context: String = context.lines().map(|l| format!("  {l}\n")).collect();
    format!(
        "device_type: {device_type}\n\
         timeouts:\n  job: {{minutes: {minutes}}}\n  action: {{minutes: {minutes}}}\n  connection: {{minutes: 5}}\n\
         priority: medium\n\
         visibility: public\n\
         context:\n{context}\
         actions:\n\
         - deploy:\n    to: tmpfs\n    images:\n\
         \x20     kernel:\n        image_arg: -kernel {{kernel}} -append \"console={console},115200\"\n        url: file://{k}\n\
         \x20     ramdisk:\n        image_arg: -initrd {{ramdisk}}\n        url: file://{i}\n\
         - boot:\n    method: qemu\n    media: tmpfs\n    prompts: ['{prompt}']\n    timeout: {{minutes: {minutes}}}\n",
        k = kernel.display(),
        i = initrd.display(),
    )
}

/// What a run on the lab takes, written into a directory: the console
/// guest, the job file booting it, the token's file, where results go.
struct LabFiles {
    kernel: PathBuf,
    initrd: PathBuf,
    job: PathBuf,
    token: PathBuf,
    results: PathBuf,
}

fn lab_files(dir: &Path) -> LabFiles {
    let (kernel, initrd) = guest(dir);
    let job = dir.join("lab-job.yaml");
    std::fs::write(&job, lab_job(&kernel, &initrd)).unwrap();
    // A file as users write one: the token and a newline.
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    LabFiles {
        kernel,
        initrd,
        job,
        token,
        results: dir.join("results"),
    }
}

fn server(lab: &LavaLab) -> Server {
    Server::new(&lab.url(), Some(Token::new(TOKEN).unwrap())).unwrap()
}

/// A test of this binary: what it needs of the lab, it asks the fixture.
type LabTest = fn(&Fixture);

/// The tests, in the order they run.
const TESTS: [(&str, LabTest); 6] = [
    (
        "a_scenario_submitted_to_the_lab_runs_on_both_devices_at_once_and_comes_back_as_a_table",
        a_scenario_submitted_to_the_lab_runs_on_both_devices_at_once_and_comes_back_as_a_table,
    ),
    (
        "lab_faults_are_one_line_each_and_lose_nothing",
        lab_faults_are_one_line_each_and_lose_nothing,
    ),
    (
        "a_device_taken_offline_mid_run_with_its_job_canceled_costs_no_trial",
        a_device_taken_offline_mid_run_with_its_job_canceled_costs_no_trial,
    ),
    (
        "a_bisection_through_the_lab_names_the_commit_that_stalls_the_player",
        a_bisection_through_the_lab_names_the_commit_that_stalls_the_player,
    ),
    (
        "the_ssh_test_board_as_a_lab_device_runs_a_scenario_and_a_wrong_host_key_never_reaches_it",
        the_ssh_test_board_as_a_lab_device_runs_a_scenario_and_a_wrong_host_key_never_reaches_it,
    ),
    (
        "an_arm64_qemu_device_runs_a_scenario_on_debian_s_arm64_kernel",
        an_arm64_qemu_device_runs_a_scenario_on_debian_s_arm64_kernel,
    ),
];

/// libtest's command line and output (libtest-mimic), the tests one at a
/// time, and the shared lab torn down before the exit status is given —
/// whether the tests passed, failed or panicked (a panic is caught and
/// reported as the test's failure, as libtest does).
fn main() -> ExitCode {
    let mut args = libtest_mimic::Arguments::from_args();
    // One at a time: they share the lab's devices and set their health.
    args.test_threads = Some(1);
    let fixture = Arc::new(Fixture::default());
    let trials = TESTS
        .into_iter()
        .map(|(name, test)| {
            let fixture = Arc::clone(&fixture);
            libtest_mimic::Trial::test(name, move || {
                // Said, as libtest does not: the lab's start is in the
                // first test's time.
                let started = Instant::now();
                test(&fixture);
                eprintln!("{name}: {:.0?}", started.elapsed());
                Ok(())
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    fixture.tear_down();
    conclusion.exit_code()
}

/// What the tests share: the lab, started by the first test that asks
/// for it (a run of tests that need none starts none), or why it could
/// not start (said by every test that asks).
#[derive(Default)]
struct Fixture {
    lab: Mutex<Option<Result<SharedLab, String>>>,
}

/// The lab the tests share: two QEMU devices, `qemu01` and `qemu02`, and,
/// as root, the SSH test board as two `ssh` devices: `ssh01`, and `ssh02`
/// behind a wrong known_hosts.
struct SharedLab {
    // Declared first: torn down before the board its devices reach.
    lab: LavaLab,
    board: Option<SshBoard>,
}

/// The SSH test board and a known_hosts that names another key for it.
struct SshBoard {
    board: TestBoard,
    wrong_known_hosts: PathBuf,
}

impl SharedLab {
    fn start() -> Result<SharedLab, String> {
        let mut devices = vec![
            LabDevice::qemu("qemu01"),
            LabDevice::qemu("qemu02"),
            LabDevice::qemu_arm64("qemu-arm64-01"),
        ];
        // The board is a private sshd: root's (the SSH test skips without).
        let board = if xrunbench_test_support::is_root() {
            // The board's sessions find the built board binaries, as a
            // board with them installed would.
            let bins = xrunbench_test_support::boards::bin_dir();
            let board =
                TestBoard::start_with(&format!("SetEnv XRUNBENCH_BIN_DIR={}", bins.display()))
                    .map_err(|e| format!("the test board (a private sshd): {e}"))?;
            let wrong = board
                .wrong_known_hosts()
                .map_err(|e| format!("the test board's wrong known_hosts: {e}"))?;
            devices.push(LabDevice::ssh("ssh01", &board));
            devices.push(LabDevice::ssh_checked_against("ssh02", &board, &wrong));
            Some(SshBoard {
                board,
                wrong_known_hosts: wrong,
            })
        } else {
            None
        };
        let lab = LavaLab::start(&devices).map_err(|e| e.to_string())?;
        Ok(SharedLab { lab, board })
    }
}

impl Fixture {
    /// The lab, started if no test has yet; held until the guard is
    /// dropped.
    fn lab(&self) -> LabInUse<'_> {
        let mut guard = self.lab.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = guard.get_or_insert_with(SharedLab::start) {
            panic!("the lab did not start: {e}");
        }
        LabInUse(guard)
    }

    /// [`Fixture::lab`] with both QEMU devices Good: a test before may
    /// have taken one offline. (The server says which are not: each
    /// `manage` call is a Django start of its own, seconds.)
    fn qemu_lab(&self) -> LabInUse<'_> {
        let lab = self.lab();
        let devices = server(&lab).devices(Some("qemu")).unwrap();
        assert_eq!(devices.len(), 2, "{devices:?}");
        for d in devices.iter().filter(|d| d.health != "Good") {
            lab.set_health(&d.hostname, "GOOD")
                .unwrap_or_else(|e| panic!("{e}"));
        }
        lab
    }

    /// Tears the lab down (if a test started it).
    fn tear_down(&self) {
        drop(self.lab.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}

/// The started lab, one test's while it holds it.
struct LabInUse<'a>(std::sync::MutexGuard<'a, Option<Result<SharedLab, String>>>);

impl LabInUse<'_> {
    fn shared(&self) -> &SharedLab {
        match self.0.as_ref() {
            Some(Ok(shared)) => shared,
            _ => unreachable!("Fixture::lab hands out only a started lab"),
        }
    }

    /// The SSH test board its `ssh` devices reach (root's lab has one).
    fn ssh_board(&self) -> &SshBoard {
        self.shared()
            .board
            .as_ref()
            .expect("the lab has ssh devices when the tests run as root")
    }
}

impl std::ops::Deref for LabInUse<'_> {
    type Target = LavaLab;
    fn deref(&self) -> &LavaLab {
        &self.shared().lab
    }
}

/// The id the lab's next job gets: the server numbers its jobs 1, 2, …,
/// and the tests before this one have submitted some.
fn next_job_id(lab: &LavaLab) -> u64 {
    let server = server(lab);
    (1..).find(|&id| server.job(id).is_err()).unwrap()
}

/// A child killed and reaped if the test ends (fails) before waiting for
/// it: a run left going would keep submitting to the shared lab.
struct Reaped(Option<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Every file under `dir`, read (lossily) as text.
fn all_text_under(dir: &Path) -> String {
    let mut out = String::new();
    for e in walk(dir) {
        out.push_str(&String::from_utf8_lossy(&std::fs::read(&e).unwrap()));
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn a_scenario_submitted_to_the_lab_runs_on_both_devices_at_once_and_comes_back_as_a_table(
    fixture: &Fixture,
) {
    let dir = tempfile::tempdir().unwrap();
    let LabFiles {
        job,
        token,
        results,
        ..
    } = lab_files(dir.path());
    let lab = fixture.qemu_lab();
    // Two configurations × two trials of 2 s through the guest's snd-dummy
    // card: each device runs trial 1 (or 2) of both, interleaved. The lab is
    // the scenario's own `[target] lava` (the other tests give it on the
    // command line), the token in a file beside it.
    std::fs::copy(&job, dir.path().join("board-job.yaml")).unwrap();
    std::fs::copy(&token, dir.path().join("lava-token")).unwrap();
    let s = plain_and_fifo("lab", 2)
        .tail(&format!(
            "[target]\nlava = {{ url = \"{}\", job = \"board-job.yaml\", devices = 2, \
             token_file = \"lava-token\" }}\n",
            lab.url()
        ))
        .write(dir.path());
    let out = xtask()
        .arg("run")
        .arg(&s)
        .arg("--results-dir")
        .arg(&results)
        .env_remove("XRUNBENCH_LAVA_TOKEN")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stdout}\n{stderr}\ngunicorn log: {}\nworker log: {}",
        lab.log("gunicorn"),
        lab.log("worker")
    );
    // Both jobs ran, one on each device, and the manifest says which
    // trials ran where.
    let runs = find_named(&results, "run.json");
    assert_eq!(runs.len(), 1, "{stdout}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    let target = run["target"].as_str().unwrap();
    for device in ["qemu01", "qemu02"] {
        assert!(target.contains(&format!(" on {device} (")), "{target}");
    }
    assert!(
        target.contains("(plain-1 fifo-1)") && target.contains("(plain-2 fifo-2)"),
        "{target}"
    );
    assert!(
        stdout.contains(" on qemu01") && stdout.contains(" on qemu02"),
        "{stdout}"
    );
    // Every trial came back measured, and the table has both columns.
    assert_trials_back(&runs[0], &run, &["plain-1", "plain-2", "fifo-1", "fifo-2"]);
    let table = stdout
        .lines()
        .find(|l| l.contains("plain") && l.contains("fifo"))
        .unwrap_or_else(|| panic!("no table header in {stdout}"));
    assert!(!table.is_empty());
    assert!(
        stdout.contains("devices: qemu01, qemu02: too few trials"),
        "{stdout}"
    );
    // The token is nowhere: not in the output, not in the run directory.
    for (what, text) in [
        ("stdout", stdout.to_string()),
        ("stderr", stderr.to_string()),
        ("results", all_text_under(&results)),
    ] {
        assert!(!text.contains(TOKEN), "the token is in {what}");
    }
}

/// `trials` × 2 s per configuration through the guest's card `hw:0`: a
/// SCHED_OTHER player (`plain`) and one at FIFO 80 (`fifo`).
fn plain_and_fifo(name: &str, trials: u32) -> ScenarioText {
    ScenarioText::new(name)
        .trials(trials)
        .duration("2s")
        .warmup("0s")
        .generate("{ seconds = 2, rate = 48000, channels = 2 }")
        .audio("backend", "alsa")
        .audio("device", "hw:0")
        .config("plain")
        .config_with("fifo", "[config.audio]\npriority = \"fifo:80\"")
}

/// `cargo xtask run S --lava URL --lava-job JOB --lava-token-file TOKEN
/// --results-dir RESULTS`, its output piped, the token's variable unset.
fn lab_run_command(s: &Path, url: &str, job: &Path, token: &Path, results: &Path) -> Command {
    let mut cmd = xtask();
    cmd.arg("run")
        .arg(s)
        .arg("--lava")
        .arg(url)
        .arg("--lava-job")
        .arg(job)
        .arg("--lava-token-file")
        .arg(token)
        .arg("--results-dir")
        .arg(results)
        .env_remove("XRUNBENCH_LAVA_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// [`lab_run_command`] with `extra` arguments, run to its end.
fn run_on_lab(
    s: &Path,
    url: &str,
    job: &Path,
    token: &Path,
    results: &Path,
    extra: &[&str],
) -> std::process::Output {
    lab_run_command(s, url, job, token, results)
        .args(extra)
        .output()
        .unwrap()
}

/// One trial of 1 s per configuration through the guest's snd-dummy card.
fn small_scenario(dir: &Path, trials: u32) -> PathBuf {
    ScenarioText::new("labfault")
        .trials(trials)
        .duration("1s")
        .warmup("0s")
        .generate("{ seconds = 1, rate = 48000, channels = 2 }")
        .audio("backend", "alsa")
        .audio("device", "hw:0")
        .config("plain")
        .write(dir)
}

/// Exit status `code`, stderr one line holding every one of `words`,
/// no run directory written.
#[track_caller]
fn refused(out: &std::process::Output, code: i32, words: &[&str], results: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    for w in words {
        assert!(lines[0].contains(w), "`{w}` not in: {stderr}");
    }
    assert!(find_named(results, "run.json").is_empty(), "{stderr}");
}

fn lab_faults_are_one_line_each_and_lose_nothing(fixture: &Fixture) {
    let dir = tempfile::tempdir().unwrap();
    let LabFiles {
        kernel,
        initrd,
        job,
        token,
        results,
    } = lab_files(dir.path());
    let s = small_scenario(dir.path(), 1);

    // No server there: one line naming the URL; the lab's failure (exit
    // 1, which a bisect step retries as infrastructure), not bad input.
    // (A port the kernel gave this test and took back: nobody listens.)
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nobody = format!("http://127.0.0.1:{port}/");
    let out = run_on_lab(&s, &nobody, &job, &token, &results, &[]);
    refused(&out, 1, &["cannot reach", &nobody], &results);

    let lab = fixture.qemu_lab();
    let url = lab.url();
    // A wrong token: refused, and never said.
    let wrong = dir.path().join("wrong-token");
    std::fs::write(&wrong, "not-the-lab-token").unwrap();
    let out = run_on_lab(&s, &url, &job, &wrong, &results, &[]);
    refused(&out, 2, &["token"], &results);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not-the-lab-token"));
    // No token at all.
    let out = run_on_lab(&s, &url, &job, &dir.path().join("nope"), &results, &[]);
    refused(&out, 2, &["nope"], &results);
    // The client alone against the real server: a wrong token is a 403,
    // said without the token; a job that is not one is refused with the
    // server's reason.
    let client = Server::new(&url, Some(Token::new("not-the-token").unwrap())).unwrap();
    let e = client.submit("device_type: qemu\n").unwrap_err();
    assert!(matches!(e, ServerError::Unauthorized { .. }), "{e:?}");
    let line = e.to_string();
    assert!(
        !line.contains("not-the-token") && !line.contains('\n'),
        "{line}"
    );
    let e = server(&lab).submit("x: 1\n").unwrap_err();
    assert!(matches!(e, ServerError::Rejected { .. }), "{e:?}");
    assert!(e.to_string().contains("extra keys not allowed"), "{e}");
    // A job the server rejects: its reason quoted.
    let nope = dir.path().join("nope-job.yaml");
    std::fs::write(
        &nope,
        lab_job(&kernel, &initrd).replace("device_type: qemu", "device_type: nope"),
    )
    .unwrap();
    let out = run_on_lab(&s, &url, &nope, &token, &results, &[]);
    refused(&out, 2, &["Device type 'nope' is unavailable"], &results);
    // A job file with a test of its own.
    let with_test = dir.path().join("test-job.yaml");
    std::fs::write(
        &with_test,
        format!(
            "{}- test:\n    interactive: []\n",
            lab_job(&kernel, &initrd)
        ),
    )
    .unwrap();
    let out = run_on_lab(&s, &url, &with_test, &token, &results, &[]);
    refused(&out, 2, &["test-job.yaml", "`test` action"], &results);

    // A job that cannot deploy ends Incomplete: submitted again, then
    // reported; no run directory (no record came back), exit 1.
    let broken = dir.path().join("broken-job.yaml");
    std::fs::write(
        &broken,
        lab_job(&dir.path().join("no-such-kernel"), &initrd),
    )
    .unwrap();
    let out = run_on_lab(&s, &url, &broken, &token, &results, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "ended Incomplete: the lab's failure, not a verdict; submitting share 1/1 again"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("ended Incomplete (2 tries)"), "{stderr}");
    assert!(stderr.contains("no trial record came back"), "{stderr}");
    assert!(find_named(&results, "run.json").is_empty(), "{stderr}");
}

fn a_device_taken_offline_mid_run_with_its_job_canceled_costs_no_trial(fixture: &Fixture) {
    let dir = tempfile::tempdir().unwrap();
    let LabFiles {
        job,
        token,
        results,
        ..
    } = lab_files(dir.path());
    let s = small_scenario(dir.path(), 2);
    let lab = fixture.qemu_lab();
    let server = server(&lab);
    // The run's two jobs are the lab's next two.
    let first = next_job_id(&lab);
    let mut child = Reaped(Some(
        lab_run_command(&s, &lab.url(), &job, &token, &results)
            .args(["--lava-devices", "2"])
            .spawn()
            .unwrap(),
    ));
    // When a job runs on qemu02: the device goes to maintenance and its
    // job is canceled, as a lab admin does.
    let deadline = Instant::now() + Duration::from_secs(1200);
    let victim = loop {
        let running = (first..first + 2).find_map(|id| {
            let j = server.job(id).ok()?;
            (j.state == JobState::Running && j.actual_device.as_deref() == Some("qemu02"))
                .then_some(id)
        });
        if let Some(id) = running {
            break id;
        }
        assert!(Instant::now() < deadline, "no job ran on qemu02");
        std::thread::sleep(Duration::from_millis(200));
    };
    lab.set_health("qemu02", "MAINTENANCE")
        .unwrap_or_else(|e| panic!("{e}"));
    server.cancel(victim).unwrap();
    let out = child.0.take().unwrap().wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "job {victim} ended Canceled: the lab's failure, not a verdict"
        )),
        "{stderr}"
    );
    // Every trial came back, both shares from qemu01 in the end.
    let runs = find_named(&results, "run.json");
    assert_eq!(runs.len(), 1, "{stdout}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    let target = run["target"].as_str().unwrap();
    assert!(!target.contains("qemu02"), "{target}");
    assert_eq!(target.matches(" on qemu01 (").count(), 2, "{target}");
    assert!(
        run["outcome"].to_string().contains("completed"),
        "{}",
        run["outcome"]
    );
}

/// The kernel tree of the bisection through the lab: what changes from
/// commit to commit is the ramdisk the deploy command publishes for the
/// lab to fetch (`ARTIFACTS/<commit>/initramfs.cpio`); from one commit on,
/// its player is stopped for 600 ms after every 200 ms it runs (a task
/// the kernel does not run, as a scheduler regression would do), so its
/// 300 ms buffer runs dry. The scenario never changes.
const BISECT_SCENARIO: &str = r#"name = "lab-bisect"
trials = 5
duration = "2s"
warmup = "0s"

[audio]
generate = { seconds = 2, rate = 48000, channels = 2 }
backend = "alsa"
device = "hw:0"
buffer_time = "300ms"
period_time = "50ms"

[[config]]
name = "player"
"#;

/// The bisection's tree under `dir`, with its deploy command and job
/// file.
struct BisectTree {
    repo: PathBuf,
    good: String,
    culprit: String,
    bad: String,
    deploy: String,
    job: PathBuf,
}

fn bisect_tree(dir: &Path) -> BisectTree {
    let real = xrunbench_test_support::boards::bin_dir();
    let (kernel, good_image) = guest(dir);
    // The regressed build: the player behind a script that stops it.
    let stalled = dir.join("stalled-bin");
    std::fs::create_dir(&stalled).unwrap();
    for b in ["xrun-trial", "xrun-hackbench"] {
        std::fs::copy(real.join(b), stalled.join(b)).unwrap();
    }
    write_script(
        &stalled.join("xrun-player"),
        &stopped_player_script("/lab/real/xrun-player"),
    );
    let (_, bad_image) = guest_with(
        dir,
        "stalled.cpio",
        &stalled,
        vec![(real.join("xrun-player"), "/lab/real/xrun-player".into())],
    );
    let repo = dir.join("tree");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("scenario.toml"), BISECT_SCENARIO).unwrap();
    let commit = |note: &str, stalls: bool| {
        let marker = repo.join("STALLS");
        if stalls {
            std::fs::write(&marker, "").unwrap();
        } else {
            let _ = std::fs::remove_file(&marker);
        }
        std::fs::write(repo.join("NOTES"), note).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", note]);
        git(&repo, &["rev-parse", "HEAD"]).trim().to_owned()
    };
    let good = commit("start", false);
    commit("a comment", false);
    let culprit = commit("sched: the player stops", true);
    commit("another comment", true);
    let bad = commit("and another", true);
    // The deploy command publishes the commit's ramdisk where the job
    // file's URL names it.
    let artifacts = dir.join("artifacts");
    let deploy = format!(
        "d='{a}'/\"$XRUNBENCH_COMMIT\" && mkdir -p \"$d\" && \
         if [ -e STALLS ]; then cp '{bad}' \"$d/initramfs.cpio\"; \
         else cp '{good}' \"$d/initramfs.cpio\"; fi",
        a = artifacts.display(),
        bad = bad_image.display(),
        good = good_image.display(),
    );
    let job = dir.join("lab-job.yaml");
    std::fs::write(
        &job,
        lab_job(
            &kernel,
            &artifacts.join("${XRUNBENCH_COMMIT}/initramfs.cpio"),
        ),
    )
    .unwrap();
    BisectTree {
        repo,
        good,
        culprit,
        bad,
        deploy,
        job,
    }
}

fn a_bisection_through_the_lab_names_the_commit_that_stalls_the_player(fixture: &Fixture) {
    let dir = tempfile::tempdir().unwrap();
    let BisectTree {
        repo,
        good,
        culprit,
        bad,
        deploy,
        job,
    } = bisect_tree(dir.path());
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let lab = fixture.qemu_lab();
    let results = dir.path().join("results");
    let out = xtask()
        .current_dir(&repo)
        .arg("bisect-run")
        .arg("scenario.toml")
        .args(["--good", &good, "--bad", &bad, "--deploy", &deploy])
        .args(["--metric", "max-gap", "--threshold", "200"])
        .args(["--baseline-trials", "5", "--max-trials", "6"])
        .args(["--confirm-trials", "4"])
        .args(["--lava", &lab.url(), "--lava-devices", "2", "--lava-job"])
        .arg(&job)
        .arg("--lava-token-file")
        .arg(&token)
        .arg("--results-dir")
        .arg(&results)
        .env_remove("XRUNBENCH_LAVA_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Shown with --nocapture: what a user sees.
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{stderr}\nworker log: {}",
        lab.log("worker")
    );
    assert!(
        stdout.contains(&format!("{culprit} is the first bad commit")),
        "bisect did not name {culprit}:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" on qemu01") && stdout.contains(" on qemu02"),
        "{stdout}"
    );
    assert!(
        !repo.join(".git/BISECT_LOG").exists(),
        "git bisect not reset"
    );
    assert!(
        !all_text_under(&results).contains(TOKEN),
        "the token is in the results"
    );
}

/// The lab's part of a job for its `ssh` devices: the device's console
/// (the `minimal` boot over its ssh connection command; no deploy: see
/// `LabDevice::ssh`), waiting for root's bash prompt on the board.
const SSH_JOB: &str = "device_type: ssh\n\
     timeouts:\n  job: {minutes: 10}\n  action: {minutes: 10}\n  connection: {minutes: 2}\n\
     priority: medium\n\
     visibility: public\n\
     actions:\n\
     - boot:\n    method: minimal\n    reset: false\n    prompts: ['root@']\n    timeout: {minutes: 2}\n";

/// What the product's interactive test writes on a device, which it must
/// remove again (a board reached over SSH keeps its /tmp).
const PRODUCT_ON_BOARD: &[&str] = &[
    "/tmp/xrunbench-run.b64",
    "/tmp/xrunbench-run.sh",
    "/tmp/xrunbench",
];

/// The SSH test board as a lab device: a scenario runs on it through the
/// device's console (LAVA's `minimal` boot over an ssh connection command;
/// LAVA's ssh deploy needs a lava-test-shell test, which `run --lava` does
/// not add), its host key checked against the board's known_hosts, every
/// record comes back and nothing is left on the board.
/// The same board behind a wrong known_hosts is never reached: the job
/// ends Incomplete, is submitted again, ends Incomplete again, and the
/// run says so (exit 1). One lab for both: its start is the slow part.
fn the_ssh_test_board_as_a_lab_device_runs_a_scenario_and_a_wrong_host_key_never_reaches_it(
    fixture: &Fixture,
) {
    xrunbench_test_support::skip_unless_root!();
    let dir = tempfile::tempdir().unwrap();
    let lab = fixture.lab();
    let SshBoard {
        board,
        wrong_known_hosts: wrong,
    } = lab.ssh_board();
    // The lab's next three jobs: the good run's, then the wrong device's
    // two tries.
    let first = u32::try_from(next_job_id(&lab)).unwrap();
    let ids = [first, first + 1, first + 2];
    let leftovers = LavaLeftovers::of_jobs(ids);
    assert_host_keys_checked(&lab, "ssh01", &board.known_hosts());
    assert_host_keys_checked(&lab, "ssh02", wrong);
    // One device at a time takes the jobs: the wrong one waits.
    lab.set_health("ssh02", "MAINTENANCE")
        .unwrap_or_else(|e| panic!("{e}"));
    lab.set_health("ssh01", "GOOD")
        .unwrap_or_else(|e| panic!("{e}"));
    let job = dir.path().join("ssh-job.yaml");
    std::fs::write(&job, SSH_JOB).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let s = ScenarioText::plain_and_nice("labssh", "other:5").write(dir.path());

    let started = Instant::now();
    let results = dir.path().join("results");
    let out = run_on_lab(&s, &lab.url(), &job, &token, &results, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("ssh01 run: {:.0?}", started.elapsed());
    assert!(
        out.status.success(),
        "{stdout}\n{stderr}\njob {first}'s log: {}",
        server(&lab).log(u64::from(first)).unwrap_or_default()
    );
    assert_every_record_on(&results, "ssh01", &stdout);
    for p in PRODUCT_ON_BOARD {
        assert!(!Path::new(p).exists(), "{p} left on the board");
    }
    // No LAVA overlay either: the job deploys nothing.
    assert!(
        on_board(first).is_empty(),
        "job {first} left {:?}",
        on_board(first)
    );

    // The same board, a wrong key known: never reached.
    lab.set_health("ssh01", "MAINTENANCE")
        .unwrap_or_else(|e| panic!("{e}"));
    lab.set_health("ssh02", "GOOD")
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let results = dir.path().join("results-wrong");
    let out = run_on_lab(&s, &lab.url(), &job, &token, &results, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("ssh02 run: {:.0?}", started.elapsed());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stderr}\nworker log: {}",
        lab.log("worker")
    );
    assert!(
        stderr.contains(&format!(
            "job {} ended Incomplete: the lab's failure, not a verdict",
            ids[1]
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("job {} ended Incomplete (2 tries)", ids[2])),
        "{stderr}"
    );
    assert!(stderr.contains("no trial record came back"), "{stderr}");
    assert!(find_named(&results, "run.json").is_empty(), "{stderr}");
    for id in [ids[1], ids[2]] {
        assert!(on_board(id).is_empty(), "job {id} reached the board");
        let job = server(&lab).job(u64::from(id)).unwrap();
        assert_eq!(job.actual_device.as_deref(), Some("ssh02"));
        // Refused by ssh for its key, in ssh's words, not for anything else.
        let log = server(&lab).log(u64::from(id)).unwrap();
        assert!(
            log.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
                || log.contains("Host key verification failed"),
            "job {id}: ssh did not refuse the key: {log}"
        );
    }
    for p in PRODUCT_ON_BOARD {
        assert!(!Path::new(p).exists(), "{p} on the board");
    }
    drop(leftovers);
    for id in ids {
        assert!(
            on_board(id).is_empty(),
            "job {id}'s deploy left on the board"
        );
    }
}

/// The lab's part of a job for its `qemu-arm64` devices, as KernelCI's
/// qemu-arm64 jobs: `kernel` and `initrd` on `-machine virt`, the
/// console on the PL011 UART.
fn arm64_lab_job(kernel: &Path, initrd: &Path) -> String {
    qemu_job(
        "qemu-arm64",
        "arch: arm64\ncpu: cortex-a57\nmachine: virt",
        "ttyAMA0",
        15,
        kernel,
        initrd,
    )
}

/// An arm64 board in the lab: Debian's arm64 kernel with the console
/// initramfs of the cross-built binaries (their libraries from Debian's
/// arm64 packages) on the `qemu-arm64` device; `run --lava` brings its
/// trials back, recorded as run on aarch64 and that kernel.
fn an_arm64_qemu_device_runs_a_scenario_on_debian_s_arm64_kernel(fixture: &Fixture) {
    let dir = tempfile::tempdir().unwrap();
    let bins = cross_board_binaries("aarch64", dir.path());
    let kernel = kernel::debian(Arch::Aarch64, false).expect("Debian's arm64 kernel");
    let initrd = dir.path().join("initramfs-arm64.cpio");
    xrunbench_lab::lab::vm::console_image(
        Arch::Aarch64,
        &kernel.modules,
        Sound::Aloop,
        &bins,
        Vec::new(),
        &initrd,
    )
    .expect("the arm64 console initramfs");
    let job = dir.path().join("arm64-job.yaml");
    std::fs::write(&job, arm64_lab_job(&kernel.image, &initrd)).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let lab = fixture.lab();
    lab.set_health("qemu-arm64-01", "GOOD")
        .unwrap_or_else(|e| panic!("{e}"));
    let first = next_job_id(&lab);
    let s = plain_and_fifo("labarm64", 1).write(dir.path());
    let results = dir.path().join("results");
    let out = run_on_lab(&s, &lab.url(), &job, &token, &results, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stdout}\n{stderr}\njob {first}'s log: {}",
        server(&lab).log(first).unwrap_or_default()
    );
    let runs = find_named(&results, "run.json");
    assert_eq!(runs.len(), 1, "{stdout}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    assert!(
        run["target"]
            .as_str()
            .unwrap()
            .contains(" on qemu-arm64-01 ("),
        "{}",
        run["target"]
    );
    assert_trials_back(&runs[0], &run, &["plain-1", "fifo-1"]);
    for stem in ["plain-1", "fifo-1"] {
        let record = runs[0]
            .parent()
            .unwrap()
            .join("trials")
            .join(format!("{stem}.json"));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
        assert_eq!(r["machine"]["arch"], "aarch64", "{stem}");
        assert_eq!(
            r["machine"]["kernel_release"].as_str(),
            Some(kernel.release.as_str()),
            "{stem}"
        );
        assert_eq!(r["player"]["params"]["device"], "hw:0", "{stem}");
    }
}

/// One run directory under `results`, its target naming `device` alone,
/// every trial of `ScenarioText::plain_and_nice` back and measured, the
/// run completed.
#[track_caller]
fn assert_every_record_on(results: &Path, device: &str, stdout: &str) {
    let runs = find_named(results, "run.json");
    assert_eq!(runs.len(), 1, "{stdout}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    let target = run["target"].as_str().unwrap();
    assert_eq!(target.matches(" on ").count(), 1, "{target}");
    assert!(target.contains(&format!(" on {device} (")), "{target}");
    assert_trials_back(&runs[0], &run, &["plain-1", "plain-2", "nice-1", "nice-2"]);
}

/// Every trial of `stems` has its record beside `run_json` (its run,
/// `run`), of its configuration and measured; the run completed.
#[track_caller]
fn assert_trials_back(run_json: &Path, run: &serde_json::Value, stems: &[&str]) {
    let trials = run_json.parent().unwrap().join("trials");
    for stem in stems {
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(trials.join(format!("{stem}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(record["trial"]["config"], stem.split('-').next().unwrap());
        assert!(record["player"].is_object(), "{stem}: {record}");
    }
    assert!(
        run["outcome"].to_string().contains("completed"),
        "{}",
        run["outcome"]
    );
}

/// The server's own rendering of `device`'s dictionary: the ssh and scp
/// of its deploy and boot `ssh` methods check the key against
/// `known_hosts` (our options come before the `StrictHostKeyChecking=no`
/// the dispatcher appends), and so does its console.
#[track_caller]
fn assert_host_keys_checked(lab: &LavaLab, device: &str, known_hosts: &Path) {
    let config = lab
        .manage(&[
            "shell",
            "-c",
            &format!(
                "import json; from lava_scheduler_app.models import Device; \
             c = Device.objects.get(hostname='{device}').load_configuration(); \
             print(json.dumps([c['actions']['deploy']['methods']['ssh']['options'], \
             c['commands']['connect']]))"
            ),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    let (options, console): (Vec<String>, String) = serde_json::from_str(config.trim()).unwrap();
    let known = format!("UserKnownHostsFile={}", known_hosts.display());
    assert_eq!(
        options[..4],
        ["-o", "StrictHostKeyChecking=yes", "-o", known.as_str()],
        "{options:?}"
    );
    assert!(
        console.starts_with(&format!("ssh -o StrictHostKeyChecking=yes -o {known} ")),
        "{console}"
    );
}
