//! A scenario on a board over SSH, for real: a private sshd on 127.0.0.1
//! (the test board of `crates/test-support`) whose host key is in the
//! client's known_hosts, so host-key checking stays on. The runner reaches
//! it with the OpenSSH client, puts the board binaries and the WAV there,
//! and runs every trial as `xrun-trial run -` on the board.
//!
//! Needs root (the board's sshd, and a login as ourselves); skipped
//! otherwise.

mod ssh_support;
mod support;

use std::path::Path;

use ssh_support::*;
use support::toml_string;

/// Two configurations × two trials, short, on the virtual sink, under a
/// small load; `[target]` appended by the caller.
fn base_scenario(name: &str) -> String {
    support::ScenarioText::plain_and_nice(name, "other:-5").text()
}

/// `Amean   underruns/min` … : the (statistic, metric) of every row of a
/// comparison table, and its header.
fn table_rows(text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn a_scenario_runs_on_the_board_with_the_same_table_as_here() {
    xrunbench_test_support::skip_unless_root!();
    let board = board("");
    let dir = tempfile::tempdir().unwrap();
    let local_file = support::scenario(dir.path(), "twoplaces", &base_scenario("twoplaces"));
    // The board's scenario names a board that does not exist; --target
    // and -o choose the test board, as a user overrides from the command
    // line (the table only adds the workdir).
    let workdir = dir.path().join("board-workdir");
    let remote_file = support::scenario(
        dir.path(),
        "twoplaces-board",
        &format!(
            "{}[target]\nssh = \"nobody@board.invalid\"\nworkdir = {}\n",
            base_scenario("twoplaces"),
            toml_string(&workdir.display().to_string())
        ),
    );
    let (local_res, remote_res) = (dir.path().join("local"), dir.path().join("remote"));
    let mut local = Xtask::spawn(
        &[
            "run",
            local_file.to_str().unwrap(),
            "--results-dir",
            local_res.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(local.wait(600), Some(0), "{}", local.output());
    let mut args: Vec<String> = vec![
        "run".into(),
        remote_file.display().to_string(),
        "--results-dir".into(),
        remote_res.display().to_string(),
        "--target".into(),
        board.destination(),
    ];
    for o in board.ssh_options() {
        args.extend(["-o".into(), o]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut remote = Xtask::spawn(&args, dir.path());
    assert_eq!(remote.wait(600), Some(0), "{}", remote.output());

    let (l, r) = (run_dir(&local_res), run_dir(&remote_res));
    let table = |run: &Path| std::fs::read_to_string(run.join("comparison.txt")).unwrap();
    assert_eq!(
        table_rows(&table(&l)),
        table_rows(&table(&r)),
        "same rows\n{}\n{}",
        table(&l),
        table(&r)
    );
    assert_eq!(trial_files(&l), trial_files(&r));
    assert_eq!(trial_files(&r).len(), 4, "{:?}", trial_files(&r));

    // Where it ran: run.json names the board, the records carry the
    // board's fingerprint (here the board is this machine).
    let run = json(&r.join("run.json"));
    assert_eq!(
        run["target"],
        format!("ssh {} port {}", board.destination(), board.port())
    );
    assert_eq!(
        run["scenario"]["target"]["destination"],
        board.destination()
    );
    let record = json(&r.join("trials/plain-1.json"));
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(record["machine"]["boot_id"], boot.trim());
    let trial_bin = workdir.join("bin/xrun-trial");
    assert!(
        record["player_command"][0]
            .as_str()
            .unwrap()
            .starts_with(workdir.join("bin").to_str().unwrap()),
        "the board's player ran: {}",
        record["player_command"]
    );
    assert!(trial_bin.is_file());

    // compare merges a board run and a local one like any two runs.
    let out = support::run_xtask(&["compare", l.to_str().unwrap(), r.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("plain") && text.contains("nice"), "{text}");

    // A second run finds the binaries up to date (content hashes), and
    // nothing of either run is left running.
    let mut again = Xtask::spawn(&args, dir.path());
    let again_code = again.wait(600);
    assert_eq!(again_code, Some(0), "{}", again.output());
    assert!(
        again.stderr().contains("board binaries in") && again.stderr().contains("up to date"),
        "{}",
        again.output()
    );
    assert!(
        !remote.stderr().contains("up to date"),
        "the first run copied them: {}",
        remote.output()
    );
    assert!(ssh_left(&board).is_empty(), "{:?}", ssh_left(&board));
}

#[test]
fn an_unknown_or_changed_host_key_is_refused_with_how_to_check_it() {
    xrunbench_test_support::skip_unless_root!();
    let board = board("");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("known_hosts.empty");
    std::fs::write(&empty, "").unwrap();
    let wrong = board.wrong_known_hosts().unwrap();
    for (known_hosts, expect) in [
        (&empty, "its host key is not in"),
        (&wrong, "its host key does not match"),
    ] {
        let s = support::scenario(
            dir.path(),
            "hostkey",
            &format!(
                "{}[target]\nssh = \"{}\"\nport = {}\nidentity = {}\nknown_hosts = {}\n",
                base_scenario("hostkey"),
                board.destination(),
                board.port(),
                toml_string(&board.identity().display().to_string()),
                toml_string(&known_hosts.display().to_string()),
            ),
        );
        let res = dir.path().join("results");
        let mut x = Xtask::spawn(
            &[
                "run",
                s.to_str().unwrap(),
                "--results-dir",
                res.to_str().unwrap(),
            ],
            dir.path(),
        );
        assert_eq!(x.wait(120), Some(1), "{}", x.output());
        let err = x.stderr();
        let refusals: Vec<&str> = err.lines().filter(|l| l.contains("refusing")).collect();
        assert_eq!(refusals.len(), 1, "{err}");
        let line = refusals[0];
        assert!(line.starts_with("xtask: refusing 127.0.0.1 port"), "{line}");
        assert!(line.contains(expect), "{line}");
        assert!(
            line.contains(&format!("ssh-keyscan -p {} 127.0.0.1", board.port())),
            "{line}"
        );
        assert!(line.contains("ssh-keygen -lf"), "{line}");
        assert!(!line.contains("StrictHostKeyChecking=no"), "{line}");
        assert!(
            !res.exists() || support::find_named(&res, "run.json").is_empty(),
            "nothing ran"
        );
        assert!(ssh_left(&board).is_empty(), "{:?}", ssh_left(&board));
    }
}

#[test]
fn scenario_values_with_shell_metacharacters_arrive_verbatim() {
    xrunbench_test_support::skip_unless_root!();
    let board = board("");
    let dir = tempfile::tempdir().unwrap();
    let marks = dir.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let m = |n: u32| marks.join(format!("m{n}")).display().to_string();
    // Each would create a file if any shell (here or on the board)
    // evaluated it.
    let device = format!(
        "x'; touch {}; echo \"$(touch {})\" `touch {}` \\ $HOME %h ' && touch {} #",
        m(1),
        m(2),
        m(3),
        m(4)
    );
    let workdir = dir
        .path()
        .join(format!("w d'$(touch {})`touch {}`;\"", m(5), m(6)));
    // The WAV's own name is the host's business: on the board it gets
    // ours.
    let wav = dir.path().join("a b'c$d;e.wav");
    xrunbench_wav::write_tone(
        &wav,
        &serde_json::from_str(r#"{"tone_hz": 440, "rate": 8000, "channels": 1, "seconds": 1}"#)
            .unwrap(),
        1.0,
    )
    .unwrap();
    let s = support::ScenarioText::new("meta")
        .trials(1)
        .duration("1s")
        .warmup("200ms")
        .audio("file", &wav.display().to_string())
        .audio("backend", "virtual")
        .audio("device", &device)
        .config("a")
        .tail(&board.target_table(
            &[],
            &format!("workdir = {}", toml_string(&workdir.display().to_string())),
        ))
        .write(dir.path());
    let res = dir.path().join("results");
    let mut x = Xtask::spawn(
        &[
            "run",
            s.to_str().unwrap(),
            "--results-dir",
            res.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(x.wait(600), Some(0), "{}", x.output());
    let run = run_dir(&res);
    let record = json(&run.join("trials/a-1.json"));
    let cmd: Vec<&str> = record["player_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let at = cmd
        .iter()
        .position(|a| *a == "-D")
        .expect("-D in the command");
    assert_eq!(cmd[at + 1], device, "the device arrived verbatim");
    assert!(
        cmd[0].starts_with(workdir.join("bin").to_str().unwrap()),
        "the binaries are in the literal workdir: {}",
        cmd[0]
    );
    assert!(workdir.join("bin/xrun-player").is_file());
    // The staged WAV was ours, on the board's tmpfs, and is gone.
    let played = cmd.last().unwrap();
    assert!(played.starts_with("/dev/shm/xrunbench-"), "{played}");
    assert!(!Path::new(played).exists(), "the staged WAV is removed");
    assert!(
        x.stderr()
            .contains(&format!("removed {played} from the board")),
        "{}",
        x.output()
    );
    let made: Vec<_> = std::fs::read_dir(&marks).unwrap().flatten().collect();
    assert!(made.is_empty(), "a shell evaluated a value: {made:?}");
}

#[test]
fn board_check_prints_what_the_board_offers_against_what_the_scenario_needs() {
    xrunbench_test_support::skip_unless_root!();
    let board = board("");
    let dir = tempfile::tempdir().unwrap();
    let rr = support::sysctl("kernel.sched_rr_timeslice_ms");
    let new = support::other_timeslice(&rr);
    let workdir = dir.path().join("w");
    let target = board.target_table(
        &[],
        &format!("workdir = {}", toml_string(&workdir.display().to_string())),
    );
    let body = |cpu: &str| {
        support::ScenarioText::new("chk")
            .generate("{ seconds = 1, rate = 8000, channels = 1 }")
            .audio("backend", "virtual")
            .config_with("a", &support::sysctls_line(&[(support::RR, new)]))
            .config_with(
                "b",
                &format!("[config.audio]\npriority = \"fifo:10\"\ncpu = \"{cpu}\""),
            )
            .tail(&target)
            .text()
    };
    let ok = support::scenario(dir.path(), "chk", &body("0"));
    let out =
        support::run_xtask_with_bins(&["board", "check", ok.to_str().unwrap(), "--read-only"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        format!(
            "board check: ssh {} port {}",
            board.destination(),
            board.port()
        ),
        format!("architecture   {}", std::env::consts::ARCH),
        "RT priority    up to 99 (root)".into(),
        "needs: 10 (b)".into(),
        "needs: cpu 0 (b)".into(),
        format!("kernel.sched_rr_timeslice_ms (a): {rr} -> {new}, not written (--read-only)"),
        "tmpfs".into(),
        "result: the scenario can run on this board".into(),
    ] {
        assert!(text.contains(&want), "missing `{want}` in:\n{text}");
    }
    assert_eq!(support::sysctl("kernel.sched_rr_timeslice_ms"), rr);

    let bad = support::scenario(dir.path(), "chk-bad", &body("4000"));
    let out =
        support::run_xtask_with_bins(&["board", "check", bad.to_str().unwrap(), "--read-only"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("result: 1 problem(s):"), "{text}");
    assert!(text.contains("config `b`: audio.cpu"), "{text}");
    assert!(ssh_left(&board).is_empty(), "{:?}", ssh_left(&board));
}
