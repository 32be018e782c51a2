//! Scenario validation through the real binary (and `xrun-trial probe` /
//! `check` on this machine, the local target): every invalid file of the
//! corpus fails with exit 2 and its expected one-line message, and every
//! shipped scenario validates (or, for debugfs-only ones on a machine
//! without debugfs, fails with "not permitted"; VM-lab ones are read and
//! resolved, not booted).

mod support;

use std::path::Path;

use support::{run_xtask_with_bins, workspace};

/// The `# expect: …` first line of a corpus file.
fn expectation(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let first = text.lines().next().unwrap_or_default();
    first
        .strip_prefix("# expect: ")
        .expect("corpus files start with `# expect: `")
        .to_string()
}

#[test]
fn every_invalid_scenario_fails_with_its_message_and_exit_2() {
    let dir = workspace().join("xtask/tests/scenarios/invalid");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "corpus has {} files", files.len());
    let mut failures = Vec::new();
    for f in &files {
        let want = expectation(f);
        let out = run_xtask_with_bins(&["run", f.to_str().unwrap(), "--dry-run"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = f.file_name().unwrap().to_string_lossy();
        let ok = out.status.code() == Some(2)
            && stderr.contains(&want)
            && stderr.contains(name.as_ref())
            && !stderr.contains("panicked")
            && stderr.lines().all(|l| l.starts_with("xtask: "));
        if !ok {
            failures.push(format!(
                "{name}: exit {:?}, want `{want}`, got:\n{stderr}",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether the shipped scenario at `p` runs in the VM lab (`[target]
/// vm`): its dry run would fetch its kernels and boot a guest for each,
/// minutes in the suite's other lane beside the guests' tests. Such a file
/// is read and resolved here (its `[target]` kernel fetched into the
/// lab's cache when missing), every configuration's kernel named; its
/// guests' boots, read-backs and trials are `vm_lab`'s (`vm = { debian
/// }` configurations, one guest each, in one run).
fn boots_guests(p: &Path) -> bool {
    let (_, s) = xrunbench_scenario::load(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let Some(vm) = s.target.as_ref().and_then(|t| t.vm.as_ref()) else {
        return false;
    };
    assert!(
        vm.kernel.is_file(),
        "{}: {}",
        p.display(),
        vm.kernel.display()
    );
    for c in &s.configs {
        if let Some(v) = &c.vm {
            assert!(
                v.kernel.is_some() || v.debian.is_some(),
                "{}: config `{}` names no kernel",
                p.display(),
                c.name
            );
        }
    }
    true
}

#[test]
fn shipped_scenarios_validate_here() {
    let dir = workspace().join("scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        n += 1;
        if boots_guests(&p) {
            continue;
        }
        let out = run_xtask_with_bins(&["run", p.to_str().unwrap(), "--dry-run"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let debugfs = std::fs::read_to_string(&p)
            .unwrap()
            .contains("sched_features");
        if out.status.success() {
            assert!(stdout.contains("plan ("), "{}: {stdout}", p.display());
        } else {
            // Only scenarios needing debugfs may fail here, and only cleanly.
            assert!(
                debugfs && out.status.code() == Some(2),
                "{}: {stderr}",
                p.display()
            );
            assert!(
                stderr.contains("not permitted"),
                "{}: {stderr}",
                p.display()
            );
        }
    }
    assert!(n >= 5, "expected the five shipped scenarios, found {n}");
}

#[test]
fn dry_run_shows_plan_order_and_knob_changes() {
    let dir = tempfile::tempdir().unwrap();
    let now = support::sysctl("kernel.sched_rr_timeslice_ms");
    let new = support::other_timeslice(&now);
    let p = support::ScenarioText::new("dry")
        .trials(2)
        .top("order", "\"blocked\"")
        .generate("{}")
        .audio("backend", "virtual")
        .config_with("a", &support::sysctls_line(&[(support::RR, new)]))
        .config("b")
        .config_with("c", "kernel = \"0.0-other\"")
        .write(dir.path());
    let out = run_xtask_with_bins(&[
        "run",
        p.to_str().unwrap(),
        "--dry-run",
        "--trials",
        "3",
        "--only",
        "a",
        "--only",
        "c",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("skipping config `c`: it expects kernel `0.0-other`"),
        "{stdout}"
    );
    let plan: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(plan.len(), 3, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "sysctl kernel.sched_rr_timeslice_ms: {now} -> {new}"
        )),
        "{stdout}"
    );
    assert_eq!(
        support::sysctl("kernel.sched_rr_timeslice_ms"),
        now,
        "dry run changed nothing"
    );
}

#[test]
fn unknown_only_config_is_bad_input() {
    let out = run_xtask_with_bins(&[
        "run",
        "scenarios/quickstart.toml",
        "--dry-run",
        "--only",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--only nope: no such configuration"));
}

/// A scenario whose `[target]` is a LAVA lab: `board check` says the lab's
/// devices are not a board it can reach, rather than checking this
/// machine; `run --dry-run` says a lab run has none. One line, exit 2.
#[test]
fn a_lab_scenario_is_not_checked_or_dry_run_here() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.yaml"), "device_type: qemu\n").unwrap();
    let s = dir.path().join("lab.toml");
    std::fs::write(
        &s,
        "name = \"lab\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"a\"\n[target]\n\
         lava = { url = \"http://127.0.0.1:9/\", job = \"job.yaml\" }\n",
    )
    .unwrap();
    for (args, want) in [
        (
            vec!["board", "check", s.to_str().unwrap()],
            "[target] is a LAVA lab, whose devices only its jobs reach",
        ),
        (
            vec!["run", s.to_str().unwrap(), "--dry-run"],
            "a lab run (--lava, [target] lava) takes no --dry-run or --only",
        ),
    ] {
        let out = run_xtask_with_bins(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

/// A FIFO (or any file that is not a regular file) as `audio.file` is
/// refused by validation, naming it: opening a FIFO for reading would wait
/// for a writer that never comes, and only SIGKILL ended that wait.
#[test]
fn a_fifo_as_audio_file_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.wav");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let p = support::ScenarioText::new("fifo")
        .duration("1s")
        .audio("file", fifo.to_str().unwrap())
        .audio("backend", "virtual")
        .config("a")
        .write(dir.path());
    let mut child = support::xtask()
        .args(["run", p.to_str().unwrap(), "--dry-run", "--bin-dir"])
        .arg(support::bin_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Validation probes the machine (a few seconds on a busy one); a wait on
    // the FIFO never ends, so a generous bound still tells them apart.
    let ended = support::wait_for(120, || child.try_wait().unwrap().is_some());
    if !ended {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(ended, "xtask still waits on the FIFO: {stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "audio.file: {}: not a regular file (a FIFO)",
            fifo.display()
        )),
        "{stderr}"
    );
}
