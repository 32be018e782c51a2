//! What a compromised board can do to the host, and what it must not: a
//! fake `xrun-trial` (test-support's `FakeBoard`, copied with `--bin-dir`
//! as a board's binaries are) that lies in its records, floods its output
//! or prints terminal escapes. The host names every file from its own
//! plan, bounds what it reads back, and shows what the board printed
//! escaped; a lying trial is lost (the run then ends as after any lost
//! trial on this target: its outcome recorded, what it kept kept).

mod ssh_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;
use xrunbench_test_support::hostile::{
    claims_pid, record_of_another_machine, record_renamed, FakeBoard,
};

/// A two-trial scenario (configs `a` and `b`, 1 s each) in `dir`.
fn two_trials(dir: &Path) -> std::path::PathBuf {
    ScenarioText::virtual_sink("hostile")
        .config("a")
        .config("b")
        .write(dir)
}

/// `xtask run` of `scenario` on `board`, results under `results`.
fn run_on(board: &FakeBoard, scenario: &Path, results: &Path) -> Output {
    xtask()
        .args(["run", scenario.to_str().unwrap(), "--results-dir"])
        .arg(results)
        .arg("--bin-dir")
        .arg(board.path())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `dir`, as paths relative to it.
fn files(dir: &Path) -> Vec<String> {
    xrunbench_test_support::disk::files_under(dir)
        .iter()
        .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
        .collect()
}

#[test]
fn a_record_cannot_name_the_file_it_is_kept_in() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let s = two_trials(dir.path());
    let results = dir.path().join("deep/er/results");
    for config in [
        "../../../../../outside/escape".to_string(),
        format!("{}/abs", outside.display()),
        "zzz".to_string(),
    ] {
        let board = FakeBoard::new(&[("run", &record_renamed(&config))]);
        let out = run_on(&board, &s, &results);
        let err = stderr(&out);
        assert_eq!(files(&outside), Vec::<String>::new(), "{config}: {err}");
        // Nothing kept under a name the board chose; the trial is lost,
        // saying why, in the run's log under the host's name for it.
        let kept = files(&results);
        assert!(
            kept.iter()
                .all(|f| !f.contains("escape") && !f.contains("abs") && !f.contains("zzz")),
            "{config}: {kept:?}"
        );
        assert!(
            kept.iter().any(|f| f.ends_with("trials/a-1.lost.json")),
            "{config}: {kept:?}\n{err}"
        );
        assert!(
            err.contains("answered for trial") && err.contains("not for hostile/a-1"),
            "{config}: {err}"
        );
        assert_ne!(out.status.code(), Some(0), "{err}");
    }
}

#[test]
fn a_record_of_another_kernel_boot_or_architecture_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    // Pinned to the kernel this machine runs, as the configuration a
    // board's record would pass itself off as.
    let s = ScenarioText::virtual_sink("hostile")
        .config_with(
            "a",
            &format!("kernel = {}", support::toml_string(kernel.trim())),
        )
        .write(dir.path());
    let results = dir.path().join("results");
    let board = FakeBoard::new(&[(
        "run",
        &record_of_another_machine(
            "9.9.9-other",
            "00000000-0000-0000-0000-000000000000",
            "aarch64",
        ),
    )]);
    let out = run_on(&board, &s, &results);
    let err = stderr(&out);
    assert!(
        err.contains("trial a-1 was lost: its record says it ran on kernel `9.9.9-other`"),
        "{err}"
    );
    let kept = files(&results);
    assert!(
        kept.iter().any(|f| f.ends_with("trials/a-1.lost.json")),
        "{kept:?}"
    );
    assert!(
        !kept.iter().any(|f| f.ends_with("trials/a-1.json")),
        "{kept:?}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The table's header names the kernels of the records kept.
    assert!(!stdout.contains("kernel 9.9.9"), "{stdout}");
    assert_ne!(out.status.code(), Some(0), "{err}");
}

#[test]
fn an_endless_record_is_cut_off_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = two_trials(dir.path());
    let results = dir.path().join("results");
    // A record that never ends; the host must not read it whole.
    let board = FakeBoard::new(&[("run", "    exec yes '{\"schema\": [1, 2, 3],'")]);
    let out = run_on(&board, &s, &results);
    let err = stderr(&out);
    assert!(
        err.contains("trial a-1") && err.contains("more than") && err.contains("MiB"),
        "{err}"
    );
    // The host read a bounded part of it, stopped the trial and ended the
    // run as after any lost trial: its outcome says why.
    let runs = find_named(&results, "run.json");
    assert_eq!(runs.len(), 1, "{err}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    assert_eq!(run["outcome"]["status"], "failed", "{run}");
    assert!(
        run["outcome"]["error"]
            .as_str()
            .unwrap()
            .contains("more than"),
        "{run}"
    );
    assert!(processes_mentioning(board.path().to_str().unwrap()).is_empty());
}

#[test]
fn an_endless_probe_or_line_is_cut_off_with_one_line() {
    for (cmd, script) in [
        (
            "probe",
            "    exec yes '{\"schema\": \"xrunbench.probe/1\",'",
        ),
        // One line of stderr that never ends.
        ("probe", "    exec tr '\\0' x < /dev/zero >&2"),
        ("check", "    exec yes '{'"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let s = two_trials(dir.path());
        let board = FakeBoard::new(&[(cmd, script)]);
        let out = run_on(&board, &s, &dir.path().join("results"));
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{cmd}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("xtask: ") && last.contains(&format!("xrun-trial {cmd}")),
            "{cmd} {script}: {last}"
        );
        assert!(
            err.len() < 64 * 1024,
            "{cmd}: {} bytes of stderr",
            err.len()
        );
        assert!(processes_mentioning(board.path().to_str().unwrap()).is_empty());
    }
}

#[test]
fn terminal_escapes_from_the_board_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let s = two_trials(dir.path());
    let results = dir.path().join("results");
    // The title of the user's terminal, a cleared screen: on its stderr,
    // and in its record's reason.
    let script = "    printf '\\033]0;pwned\\007\\033[2Jtrial output\\n' >&2\n    \
                  \"$REAL\" \"$@\" | sed 's|\"status\": \"ran\"|\"status\": \"failed\", \"reason\": \"\\\\u001b]0;pwned\\\\u0007\\\\u001b[2Jno\"|'";
    let board = FakeBoard::new(&[("run", script)]);
    let out = run_on(&board, &s, &results);
    let err = stderr(&out);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("\\u{1b}]0;pwned"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
}

#[test]
fn restore_lines_from_the_board_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let s = two_trials(dir.path());
    let results = dir.path().join("results");
    // ESC, BEL, a right-to-left override and an isolate in what
    // `xrun-trial restore` says it put back.
    let script =
        "    printf 'restored \\033]0;pwned\\007 \\342\\200\\256gnp.exe\\342\\201\\246\\n'";
    let board = FakeBoard::new(&[("restore", script)]);
    let out = run_on(&board, &s, &results);
    let err = stderr(&out);
    for raw in ['\u{1b}', '\u{7}', '\u{202e}', '\u{2066}'] {
        assert!(!err.contains(raw), "{raw:?} in {err:?}");
    }
    assert!(
        err.contains("restored \\u{1b}]0;pwned\\u{7} \\u{202e}gnp.exe\\u{2066}"),
        "{err}"
    );
}

/// A board program that runs until killed, ignores SIGTERM (an ignored
/// signal stays ignored across exec) and is not named `xrun-trial`: the
/// host can neither stop it politely nor find it by name. `tag` makes it
/// findable by the test, which kills it afterwards.
fn stubborn(tag: &str) -> String {
    format!("    trap '' TERM HUP INT\n    exec sleep {tag}")
}

/// Kills what [`stubborn`] left running.
fn kill_stubborn(tag: &str) {
    for line in processes_mentioning(&format!("sleep {tag}")) {
        // `PID: command line`.
        if let Some(pid) = line.split(':').next().and_then(|p| p.parse::<i32>().ok()) {
            // SAFETY: kill(2) of a test's own leftover.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// `xtask run` of `scenario` (in `dir`) on `fake`, a trial that will not
/// end: its exit code (waited for at most 300 s) and the run.
fn run_stubborn(
    scenario: &Path,
    dir: &Path,
    fake: &FakeBoard,
) -> (Option<i32>, ssh_support::Xtask) {
    let res = dir.join("results");
    let mut x = ssh_support::Xtask::spawn_with_bins(
        &[
            "run",
            scenario.to_str().unwrap(),
            "--results-dir",
            res.to_str().unwrap(),
        ],
        dir,
        fake.path(),
    );
    (x.wait(300), x)
}

/// The run ended 1 with trial a-1 lost past its `secs` s timeout.
fn assert_lost_past_timeout(code: Option<i32>, x: &ssh_support::Xtask, secs: u32) {
    assert_eq!(code, Some(1), "{}", x.output());
    let said = format!("trial a-1 was lost: it ran past its trial_timeout of {secs} s");
    assert!(x.stderr().contains(&said), "{}", x.output());
}

#[test]
fn a_trial_that_will_not_die_on_an_ssh_board_is_cut_off_with_its_session() {
    xrunbench_test_support::skip_unless_root!();
    let tag = "100201";
    let fake = FakeBoard::new(&[("run", &stubborn(tag))]);
    let board = ssh_support::board("");
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().join("board");
    let s = ScenarioText::virtual_sink("stubborn")
        .config("a")
        .tail(&board.keepalive_target(&workdir, "trial_timeout = \"4s\"\nretries = 0"))
        .write(dir.path());
    // The host gives up on it: its timeout, the grace, then the session
    // (whose master held its pipes) dropped. Not ten minutes.
    let (code, x) = run_stubborn(&s, dir.path(), &fake);
    kill_stubborn(tag);
    assert_lost_past_timeout(code, &x, 4);
    assert!(
        ssh_support::ssh_left(&board).is_empty(),
        "{:?}",
        ssh_support::ssh_left(&board)
    );
}

#[test]
fn a_trial_here_that_never_ends_is_cut_off_at_its_trial_timeout() {
    let tag = "100401";
    let fake = FakeBoard::new(&[("run", &stubborn(tag))]);
    let dir = tempfile::tempdir().unwrap();
    // A tiny trial, so that a timeout of a few seconds is still far
    // beyond it.
    let s = ScenarioText::virtual_sink("hung")
        .duration("100ms")
        .config("a")
        .tail("[target]\ntrial_timeout = \"5s\"\n")
        .write(dir.path());
    let (code, x) = run_stubborn(&s, dir.path(), &fake);
    let left = processes_mentioning(&format!("sleep {tag}"));
    kill_stubborn(tag);
    assert_lost_past_timeout(code, &x, 5);
    assert!(
        find_named(&dir.path().join("results"), "a-1.lost.json").len() == 1,
        "{}",
        x.output()
    );
    // Killed with what it started: the machine left as found.
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_pid_a_trial_here_claims_is_never_signalled() {
    // An unrelated process of this machine, named by a lying trial that
    // then will not stop when asked.
    let mut victim = std::process::Command::new("sleep")
        .arg("100402")
        .spawn()
        .unwrap();
    let tag = "100403";
    let script = format!("{}\n{}", claims_pid(victim.id()), stubborn(tag));
    let fake = FakeBoard::new(&[("run", &script)]);
    let dir = tempfile::tempdir().unwrap();
    let s = two_trials(dir.path());
    let res = dir.path().join("results");
    let mut x = ssh_support::Xtask::spawn_with_bins(
        &[
            "run",
            s.to_str().unwrap(),
            "--results-dir",
            res.to_str().unwrap(),
        ],
        dir.path(),
        fake.path(),
    );
    let running = wait_for(120, || {
        !processes_mentioning(&format!("sleep {tag}")).is_empty()
    });
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(x.child.id() as libc::pid_t, libc::SIGINT) };
    // The trial ignores its closed stdin and SIGTERM: the host ends it
    // (and only it) the hard way.
    let code = x.wait(300);
    let victim_lives = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    kill_stubborn(tag);
    assert!(running, "the trial never started: {}", x.output());
    assert_eq!(code, Some(130), "{}", x.output());
    assert!(
        victim_lives,
        "the pid the trial claimed was signalled: {}",
        x.output()
    );
}

#[test]
fn sigint_ends_a_probe_check_or_restore_that_never_answers() {
    for (i, cmd) in ["probe", "check", "restore"].into_iter().enumerate() {
        let tag = format!("10030{i}");
        let fake = FakeBoard::new(&[(cmd, &stubborn(&tag))]);
        let dir = tempfile::tempdir().unwrap();
        let s = two_trials(dir.path());
        let args: Vec<String> = match cmd {
            "restore" => vec![
                "restore".into(),
                "--bin-dir".into(),
                fake.path().display().to_string(),
            ],
            _ => vec![
                "run".into(),
                s.display().to_string(),
                "--results-dir".into(),
                dir.path().join("results").display().to_string(),
                "--bin-dir".into(),
                fake.path().display().to_string(),
            ],
        };
        let mut child = xtask()
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert!(
            wait_for(120, || !processes_mentioning(&format!("sleep {tag}"))
                .is_empty()),
            "{cmd}: the board never got the command"
        );
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let ended = wait_for(60, || child.try_wait().unwrap().is_some());
        if !ended {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        kill_stubborn(&tag);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(ended, "{cmd}: SIGINT did not end it: {err}");
        assert_ne!(out.status.code(), Some(0), "{cmd}: {err}");
        assert!(err.contains("signal 2"), "{cmd}: {err}");
    }
}

/// The scenario `text` written as `tree.toml` in `dir` and run there, as
/// a bisection's baseline: the scenario, the results directory, the run.
fn baseline_run(dir: &Path, text: &str) -> (PathBuf, PathBuf, PathBuf) {
    let s = scenario(dir, "tree", text);
    let results = dir.join("results");
    let out = run_xtask_with_bins(&[
        "run",
        s.to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let baseline = find_named(&results, "run.json")[0]
        .parent()
        .unwrap()
        .to_path_buf();
    (s, results, baseline)
}

/// `xtask bisect` of `scenario` in `dir` against `baseline`, one step.
fn bisect_step(dir: &Path, scenario: &Path, baseline: &Path, results: &Path) -> Command {
    let mut cmd = xtask();
    cmd.current_dir(dir)
        .args(["bisect", scenario.to_str().unwrap(), "--baseline"])
        .arg(baseline)
        .arg("--results-dir")
        .arg(results)
        .arg("--bin-dir")
        .arg(bin_dir());
    cmd
}

#[test]
fn a_bisected_scenario_that_gains_host_commands_is_refused_and_runs_none() {
    xrunbench_test_support::skip_unless_root!();
    let board = ssh_support::board("");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran-on-the-host");
    let workdir = dir.path().join("board");
    let body = |extra: &str| {
        ScenarioText::virtual_sink("tree")
            .trials(2)
            .config("a")
            .tail(&board.keepalive_target(&workdir, extra))
            .text()
    };
    // The baseline, as the bisection starts: no host command anywhere.
    let (s, results, baseline) = baseline_run(dir.path(), &body(""));
    let touch = support::toml_string(&format!("touch {}", marker.display()));
    for (what, extra) in [
        ("deploy", format!("deploy = {touch}")),
        ("expect_kernel", format!("expect_kernel = {touch}")),
        ("power_cycle", format!("power_cycle = {touch}")),
    ] {
        // A later commit of the tree adds it.
        std::fs::write(&s, body(&extra)).unwrap();
        let out = bisect_step(dir.path(), &s, &baseline, &results)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(125), "{what}: {err}");
        assert!(
            err.contains(&format!("at this commit the scenario changes {what}")),
            "{what}: {err}"
        );
        assert!(!marker.exists(), "{what} ran on the host: {err}");
    }
    // An ssh option that runs a command is the same.
    let hostile = body("").replace(
        "options = [",
        &format!(
            "options = [{}, ",
            support::toml_string(&format!("LocalCommand=touch {}", marker.display()))
        ),
    );
    std::fs::write(&s, hostile).unwrap();
    let out = xtask()
        .current_dir(dir.path())
        .args(["bisect", s.to_str().unwrap(), "--baseline"])
        .arg(&baseline)
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("changes ssh options"), "{err}");
    assert!(!marker.exists(), "{err}");
}

/// A LAVA server a hostile tree may name: it only listens, and says
/// whether anything connected to it.
struct Listener(std::net::TcpListener);

impl Listener {
    fn new() -> Listener {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        Listener(l)
    }

    fn url(&self) -> String {
        format!("http://{}/", self.0.local_addr().unwrap())
    }

    fn reached(&self) -> bool {
        self.0.accept().is_ok()
    }
}

#[test]
fn a_bisected_scenario_cannot_run_host_commands_or_send_the_token_through_a_lab() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran-on-the-host");
    let job = dir.path().join("job.yaml");
    std::fs::write(
        &job,
        "device_type: qemu\nactions:\n- deploy:\n    to: tmpfs\n- boot:\n    method: qemu\n    prompts: ['# ']\n",
    )
    .unwrap();
    let body = |target: &str| {
        ScenarioText::virtual_sink("tree")
            .trials(2)
            .config("a")
            .tail(target)
            .text()
    };
    // The baseline as the bisection starts: this machine, nothing on the
    // host.
    let (s, results, baseline) = baseline_run(dir.path(), &body(""));
    let lab = Listener::new();
    let touch = support::toml_string(&format!("touch {}", marker.display()));
    let table = |extra: &str| {
        format!(
            "[target]\nlava = {{ url = {}, job = {}{extra} }}\ndeploy = {touch}\n",
            support::toml_string(&lab.url()),
            support::toml_string(&job.display().to_string()),
        )
    };
    let users_lab = Listener::new();
    for (what, target, command_line_lab) in [
        ("a lab and a deploy", table(""), false),
        ("a lab, its deploy under --lava", table(""), true),
        (
            "a token file the user did not name",
            table(", token_file = \"/etc/machine-id\""),
            false,
        ),
    ] {
        std::fs::write(&s, body(&target)).unwrap();
        let mut cmd = bisect_step(dir.path(), &s, &baseline, &results);
        cmd.env("XRUNBENCH_LAVA_TOKEN", "the-users-secret");
        if command_line_lab {
            cmd.args(["--lava", &users_lab.url(), "--lava-job"])
                .arg(&job);
        }
        let out = cmd.output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(125), "{what}: {err}");
        assert!(
            err.contains("at this commit the scenario changes"),
            "{what}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: one line: {err}");
        assert!(
            !marker.exists(),
            "{what}: the tree's deploy ran on the host"
        );
        assert!(!lab.reached(), "{what}: the tree's lab was reached");
        assert!(
            !users_lab.reached(),
            "{what}: a step of a refused commit reached the lab"
        );
        assert!(!err.contains("the-users-secret"), "{err}");
    }
}
