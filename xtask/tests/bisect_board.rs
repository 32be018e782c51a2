//! Bisecting on a board, for real, on the SSH test board (a private sshd
//! on 127.0.0.1; the board is this machine, so its trials change the real
//! `kernel.sched_rr_timeslice_ms` through the real machine lock).
//!
//! A throwaway git repository plays the kernel tree. Each commit holds
//! what its deploy command (`deploy.sh`, the same at every commit) puts
//! on the board: `stall` (1: the board's player is stopped for 600 ms
//! after every 200 ms it runs — a task the kernel does not run, as a
//! scheduler regression would do — so its 300 ms buffer runs dry), `kernel` (the
//! string `expect_kernel` prints: this machine's release, or another one)
//! and `mode` (`broken`: the commit does not build, exit 125;
//! `unreachable`: the first deploy powers the board off, the next one on).
//!
//! - one step per infrastructure case: a commit that does not build is a
//!   skip with no trial; a board that does not come back once is retried
//!   with the deploy re-run, then measured good; a board with the wrong
//!   kernel is never measured (skip after its retries); each step record
//!   says why;
//! - `bisect-run` names the culprit, confirms it (parent, culprit and the
//!   revert in a worktree) and writes the report, the repository back on
//!   its branch;
//! - a series whose bad commit is no worse stops before the search with
//!   both endpoints' figures (exit 1);
//! - Ctrl-C in the middle of the search: exit 130, the repository back
//!   on its branch, the knob restored on the board.
//!
//! Needs root (the board's sshd, the knob); skipped otherwise. Each test
//! takes the suite's knob lock.

mod ssh_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ssh_support::*;
use support::{git, write_script, ScenarioText, RR};
use xrunbench_test_support::testboard::TestBoard;

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// This machine's kernel release: in the board's /proc/version.
fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap()
        .trim()
        .to_string()
}

/// The world of one test: the board (powered off and on by a thread when
/// `deploy.sh` asks), the board binaries, the repository.
struct Lab {
    dir: tempfile::TempDir,
    board: Arc<Mutex<TestBoard>>,
    done: Arc<AtomicBool>,
    power: Option<std::thread::JoinHandle<()>>,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let board = Arc::new(Mutex::new(board("")));
        let done = Arc::new(AtomicBool::new(false));
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let power = {
            let (board, done) = (Arc::clone(&board), Arc::clone(&done));
            std::thread::spawn(move || power_switch(&board, &state, &done))
        };
        let lab = Lab {
            dir,
            board,
            done,
            power: Some(power),
        };
        lab.board_binaries();
        lab
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// The board's binaries: the real ones, xrun-trial told to find the
    /// player beside this wrapper, and a player that stalls when the
    /// deployed `stall` says 1.
    fn board_binaries(&self) {
        let real = std::env::var_os("XRUNBENCH_BIN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(support::bin_dir);
        let bin = self.path("bins");
        std::fs::create_dir(&bin).unwrap();
        write_script(
            &bin.join("xrun-trial"),
            &format!(
                "exec {} --bin-dir \"$(dirname \"$0\")\" \"$@\"\n",
                quoted(&real.join("xrun-trial"))
            ),
        );
        write_script(
            &bin.join("xrun-hackbench"),
            &format!("exec {} \"$@\"\n", quoted(&real.join("xrun-hackbench"))),
        );
        let player = quoted(&real.join("xrun-player"));
        write_script(
            &bin.join("xrun-player"),
            &format!(
                "if [ \"$(cat {stall} 2>/dev/null)\" != 1 ]; then exec {player} \"$@\"; fi\n{}",
                support::stopped_player_script(&player),
                stall = quoted(&self.path("state/board-stall")),
            ),
        );
    }

    /// The repository: the scenario and deploy.sh, no commits yet.
    fn repo(&self) -> PathBuf {
        let repo = self.path("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        let table = self.board.lock().unwrap().keepalive_target(
            &self.path("board"),
            "deploy = \"sh deploy.sh\"\nexpect_kernel = \"cat kernel\"\n\
             boot_timeout = \"4s\"\nretries = 1",
        );
        let text = ScenarioText::virtual_sink("board-bisect")
            .trials(5)
            .warmup("200ms")
            .generate("{ seconds = 1, rate = 48000, channels = 2 }")
            .audio("buffer_time", "300ms")
            .audio("period_time", "50ms")
            .audio("priority", "fifo:80")
            .config_with("player", &support::changed_sysctls(&[RR]))
            .tail(&table)
            .text();
        std::fs::write(repo.join("scenario.toml"), text).unwrap();
        let state = self.path("state");
        let s = quoted(&state);
        std::fs::write(
            repo.join("deploy.sh"),
            format!(
                r#"S={s}
case "$(cat mode)" in
broken) echo "make: *** [Makefile:1234: vmlinux] Error 2"; exit 125 ;;
unreachable)
    if [ ! -e "$S/went-down" ]; then
        touch "$S/went-down" "$S/power-off"
        while [ ! -e "$S/off" ]; do sleep 0.1; done
        echo "installed; the board did not come back"
    else
        touch "$S/power-on"
        while [ ! -e "$S/on" ]; do sleep 0.1; done
    fi ;;
esac
cp stall "$S/board-stall"
echo "deployed $XRUNBENCH_COMMIT (attempt $XRUNBENCH_ATTEMPT) to $XRUNBENCH_TARGET"
"#
            ),
        )
        .unwrap();
        repo
    }

    /// Runs `xtask bisect-run scenario.toml --good GOOD --bad BAD EXTRA…`
    /// from `repo`.
    fn bisect_run(&self, repo: &Path, good: &str, bad: &str, extra: &[&str]) -> Xtask {
        let mut args = vec!["bisect-run", "scenario.toml", "--good", good, "--bad", bad];
        args.extend_from_slice(extra);
        self.xtask(repo, &args)
    }

    /// Runs `xtask ARGS` from `repo` in its own process group.
    fn xtask(&self, repo: &Path, args: &[&str]) -> Xtask {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
        cmd.current_dir(repo)
            .args(args)
            .arg("--results-dir")
            .arg(self.path("results"))
            .arg("--bin-dir")
            .arg(self.path("bins"));
        Xtask::spawn_command(cmd, self.dir.path())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(p) = self.power.take() {
            let _ = p.join();
        }
    }
}

/// The board's power switch, as deploy.sh asks for it through files in
/// `state`: `power-off` (answered with `off` once the board is off) and
/// `power-on` (answered with `on`).
fn power_switch(board: &Mutex<TestBoard>, state: &Path, done: &AtomicBool) {
    let (mut off, mut on) = (false, false);
    while !done.load(Ordering::SeqCst) {
        if !off && state.join("power-off").exists() {
            board.lock().unwrap().power_off();
            std::fs::write(state.join("off"), "").unwrap();
            off = true;
        }
        if !on && state.join("power-on").exists() {
            board
                .lock()
                .unwrap()
                .power_on()
                .expect("the board powers on");
            std::fs::write(state.join("on"), "").unwrap();
            on = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Commits what `deploy.sh` deploys: `stall`, `kernel`, `mode`.
fn commit(repo: &Path, stall: bool, kernel: &str, mode: &str, subject: &str) -> String {
    std::fs::write(repo.join("stall"), if stall { "1\n" } else { "0\n" }).unwrap();
    std::fs::write(repo.join("kernel"), format!("{kernel}\n")).unwrap();
    std::fs::write(repo.join("mode"), format!("{mode}\n")).unwrap();
    // The harmless commits change this only: a file of their own, so that
    // the culprit's revert applies on the bad commit.
    let notes = repo.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    let n = std::fs::read_dir(&notes).unwrap().count();
    std::fs::write(notes.join(n.to_string()), subject).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", subject]);
    git(repo, &["rev-parse", "HEAD"])
}

/// The only step directory labelled `label…` under `results`: its record.
fn step_record(results: &Path, label: &str) -> serde_json::Value {
    let found: Vec<PathBuf> = support::find_named(results, "step.json")
        .into_iter()
        .filter(|p| {
            p.parent()
                .and_then(|d| d.file_name())
                .is_some_and(|n| n.to_string_lossy().contains(label))
        })
        .collect();
    assert_eq!(found.len(), 1, "one step {label} in {}", results.display());
    json(&found[0])
}

#[test]
fn infrastructure_failures_are_retried_or_skipped_never_a_verdict() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let before = support::sysctl(RR);
    let lab = Lab::new();
    let repo = lab.repo();
    let k = release();
    let good = commit(&repo, false, &k, "ok", "start");
    let broken = commit(&repo, false, &k, "broken", "does not build");
    let unreachable = commit(&repo, false, &k, "unreachable", "the board hangs once");
    let wrong = commit(
        &repo,
        false,
        "5.4.0-not-booted",
        "ok",
        "falls back to an old kernel",
    );

    // The baseline at the good commit (`run` does not deploy).
    git(&repo, &["checkout", "-q", &good]);
    let mut x = lab.xtask(&repo, &["run", "scenario.toml"]);
    assert_eq!(x.wait(300), Some(0), "{}", x.output());
    let baseline = run_dir(&lab.path("results"));
    let bisect_dir = lab.path("bisection");
    let step = |commit: &str| {
        git(&repo, &["checkout", "-q", commit]);
        let mut x = lab.xtask(
            &repo,
            &[
                "bisect",
                "scenario.toml",
                "--baseline",
                baseline.to_str().unwrap(),
                "--bisect-dir",
                bisect_dir.to_str().unwrap(),
                "--max-trials",
                "8",
            ],
        );
        let code = x.wait(300);
        (code, x)
    };

    // Does not build: skip at once, no trial, the build's words in the log.
    let (code, x) = step(&broken);
    assert_eq!(code, Some(125), "{}", x.output());
    assert!(x.stderr().contains("cannot be built"), "{}", x.output());
    let r = step_record(&bisect_dir, &broken[..12]);
    assert_eq!(r["decision"]["verdict"], "skip", "{r}");
    assert_eq!(r["trials"].as_array().unwrap().len(), 0, "{r}");
    assert_eq!(r["attempts"].as_array().unwrap().len(), 1, "{r}");
    let log = std::fs::read_to_string(
        support::find_named(&bisect_dir, "deploy.log")
            .into_iter()
            .find(|p| p.to_string_lossy().contains(&broken[..12]))
            .unwrap(),
    )
    .unwrap();
    assert!(log.contains("vmlinux] Error 2"), "{log}");

    // The board does not come back once: retried with the deploy re-run,
    // then measured (good: nothing changed but the hang).
    let (code, x) = step(&unreachable);
    assert_eq!(code, Some(0), "{}", x.output());
    let r = step_record(&bisect_dir, &unreachable[..12]);
    let attempts = r["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{r}");
    assert_eq!(attempts[0]["ended"], "infrastructure", "{r}");
    assert!(
        attempts[0]["why"]
            .as_str()
            .unwrap()
            .contains("board not back"),
        "{r}"
    );
    assert_eq!(attempts[0]["trials"], 0, "{r}");
    assert_eq!(attempts[1]["ended"], "measured", "{r}");
    assert_eq!(r["decision"]["verdict"], "good", "{r}");
    assert!(r["decision"]["p_better"].as_f64().unwrap() <= 0.05, "{r}");
    assert!(r["kernel_seen"].as_str().unwrap().contains(&k), "{r}");
    assert!(x.stderr().contains("infrastructure failure, not a verdict"));

    // The wrong kernel: never measured, whatever the retries.
    let (code, x) = step(&wrong);
    assert_eq!(code, Some(125), "{}", x.output());
    let r = step_record(&bisect_dir, &wrong[..12]);
    assert_eq!(r["trials"].as_array().unwrap().len(), 0, "{r}");
    assert_eq!(r["kernel_expected"], "5.4.0-not-booted", "{r}");
    for a in r["attempts"].as_array().unwrap() {
        assert_eq!(a["ended"], "infrastructure", "{r}");
        assert!(a["why"].as_str().unwrap().contains("wrong kernel"), "{r}");
    }
    assert_eq!(r["attempts"].as_array().unwrap().len(), 2, "{r}");
    assert!(
        x.stderr().contains("infrastructure failed 2 time(s)"),
        "{}",
        x.output()
    );
    assert_eq!(support::sysctl(RR), before, "the knob is restored");
}

/// good → harmless → harmless → culprit (stalls) → harmless → bad.
fn history(repo: &Path) -> (String, String, String) {
    let k = release();
    let good = commit(repo, false, &k, "ok", "start: the player as built");
    commit(repo, false, &k, "ok", "sched: tweak a comment");
    commit(repo, false, &k, "ok", "sched: rename a helper");
    let culprit = commit(
        repo,
        true,
        &k,
        "ok",
        "sched: stall the player 300 ms every 600 ms",
    );
    commit(repo, true, &k, "ok", "docs: another comment");
    let bad = commit(repo, true, &k, "ok", "and another");
    (good, culprit, bad)
}

#[test]
fn bisect_run_names_confirms_and_reports_the_culprit() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let before = support::sysctl(RR);
    let lab = Lab::new();
    let repo = lab.repo();
    let (good, culprit, bad) = history(&repo);
    let junit = lab.path("bisect.xml");
    let mut x = lab.bisect_run(
        &repo,
        &good,
        &bad,
        &[
            "--max-trials",
            "8",
            "--confirm-trials",
            "5",
            "--confirm-revert",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let code = x.wait(900);
    let out = x.stdout();
    eprintln!("{out}");
    assert_eq!(code, Some(0), "{}", x.output());
    assert!(
        out.contains(&format!("{culprit} is the first bad commit")),
        "{}",
        x.output()
    );
    let report = support::find_named(&lab.path("results"), "report.txt");
    assert_eq!(report.len(), 1);
    let text = std::fs::read_to_string(&report[0]).unwrap();
    let oneline = git(&repo, &["log", "--oneline", "-1", &culprit]);
    assert!(
        text.contains(&format!("first bad commit: {oneline}")),
        "{text}"
    );
    assert!(text.contains("CONFIRMED"), "{text}");
    assert!(text.contains("revert on the bad commit"), "{text}");
    assert!(text.contains(&release()), "{text}");
    // The table: parent, culprit and revert columns, mmtests' rows.
    for col in ["parent-", "culprit-", "revert-", "Amean"] {
        assert!(text.contains(col), "{col}: {text}");
    }
    assert!(text.lines().all(|l| l.len() <= 80), "{text}");
    assert!(report[0].with_extension("md").is_file());
    let x_ml = std::fs::read_to_string(&junit).unwrap();
    assert!(x_ml.contains("failures=\"0\""), "{x_ml}");
    // Reset: back on the branch, no bisection, no worktree left.
    assert_eq!(git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    assert!(
        Command::new("git")
            .current_dir(&repo)
            .args(["bisect", "log"])
            .output()
            .unwrap()
            .status
            .code()
            != Some(0)
    );
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(support::sysctl(RR), before, "the knob is restored");
    // The search's verdicts replay in git bisect to the same culprit.
    let log = support::find_named(&lab.path("results"), "git-bisect.log");
    assert_eq!(log.len(), 1);
    let replay = git(&repo, &["bisect", "replay", log[0].to_str().unwrap()]);
    git(&repo, &["bisect", "reset"]);
    assert!(
        replay.contains(&format!("{culprit} is the first bad commit")),
        "{replay}"
    );
}

#[test]
fn a_series_with_no_regression_stops_before_the_search_with_its_figures() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let lab = Lab::new();
    let repo = lab.repo();
    let k = release();
    let good = commit(&repo, false, &k, "ok", "start: the player as built");
    commit(&repo, false, &k, "ok", "sched: tweak a comment");
    let bad = commit(&repo, false, &k, "ok", "sched: rename a helper");
    let mut x = lab.bisect_run(&repo, &good, &bad, &["--max-trials", "4"]);
    assert_eq!(x.wait(600), Some(1), "{}", x.output());
    let out = x.stdout();
    assert!(out.contains("there is nothing to bisect"), "{}", x.output());
    // With both endpoints' figures, and no search.
    assert!(
        out.contains("baseline mean") && out.contains("bad commit mean"),
        "{}",
        x.output()
    );
    assert!(!out.contains("bisect-run: searching"), "{}", x.output());
    assert_eq!(git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
}

#[test]
fn ctrl_c_mid_bisection_resets_the_repository_and_restores_the_knob() {
    xrunbench_test_support::skip_unless_root!();
    let _g = support::knob_lock();
    let before = support::sysctl(RR);
    let lab = Lab::new();
    let repo = lab.repo();
    let (good, _, bad) = history(&repo);
    let mut x = lab.bisect_run(&repo, &good, &bad, &["--max-trials", "8"]);
    // In the search, a trial on the board with the knob applied.
    assert!(
        support::wait_for(600, || x.stdout().contains("bisect-run: searching")
            && support::sysctl(RR) != before),
        "the search did not start a trial: {}",
        x.output()
    );
    x.signal_group(libc::SIGINT);
    assert_eq!(x.wait(120), Some(130), "{}", x.output());
    assert_eq!(support::sysctl(RR), before, "the knob is restored");
    assert!(
        trial_on_board(&lab.board.lock().unwrap()).is_none(),
        "a trial still runs on the board"
    );
    assert_eq!(git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    assert!(
        Command::new("git")
            .current_dir(&repo)
            .args(["bisect", "log"])
            .output()
            .unwrap()
            .status
            .code()
            != Some(0)
    );
    assert!(
        x.stderr().contains("the tree is back where it was"),
        "{}",
        x.output()
    );
}
