//! Real kernels bisected end to end, x86_64 then aarch64: Debian's
//! linux-source-6.1 made a git tree by `lab source`, the scheduler series of `tests/kernel_series` on
//! top of it (eight commits: comments, a debug line, a rename, a commit
//! that does not build, the helper it needed, throughput-friendly
//! granularities — the regression — a Kconfig help text, an rt.c comment),
//! and `bisect-run` in that tree with `--deploy` building each commit's
//! kernel, the VM lab booting it with snd-dummy and the trials run in it.
//!
//! Asserted: the culprit named and confirmed is the planted commit, the
//! commit that does not build is a skip (its deploy exited 125), every
//! measured step ran the kernel built from its commit, and the tree is
//! reset afterwards. The scenario lives outside the tree.
//!
//! The regression is measured by the longest underrun gap. With 100 ms of
//! buffer, a SCHED_OTHER player and `hackbench -g 6` beside it, the lab's
//! kernel at its base left gaps of 128–214 ms on a quiet host; with 10/15
//! ms granularities (what the culprit makes the defaults on 2 CPUs)
//! 453–824 ms: the player waits out whole slices.
//!
//! The decision's settings follow from those figures, not from habit. A
//! guest's trial now and then has one gap of seconds on a quiet host too
//! (2789 ms among the base kernel's 170–376 ms in a CI run; 1944 and
//! 6226 ms in a quiet local suite), and the rule's tests are on ranks:
//! such a trial weighs as one rank, but with a baseline of 4 it is a
//! quarter of the baseline, and the bad endpoint's trials, above the other
//! three every time, reached p 0.129 (6 trials), never the level 0.032:
//! the endpoint was undecided and the test failed. With 8 baseline trials
//! the same outlier leaves p 0.024 at the 4th trial (level 0.021 for 8
//! looks of 8), 0.010 at the 6th. The threshold is 200 % (bad = three
//! times the baseline's gap): at 100 % the bad reference, twice gaps of
//! 84–278 ms, overlaps a good kernel's own gaps, and a simulation drawing
//! from 16 measured base-kernel trials left 12 % of good steps undecided
//! and judged 3.5 % bad with 4 baseline trials (2 % bad with 8); at 200 %
//! with 8, none of 200 good or 200 bad steps was wrong or undecided, and
//! with a 7 % chance of a seconds-long trial, 2 % of good steps were
//! judged bad and 11 % of the culprit's undecided. The planted regression
//! (453–824 ms) lies inside that zone, where the rule's "worse than the
//! baseline" decides it. The culprit's confirmation keeps its default, 8
//! trials of each side a look (up to 40): one outlier among 4 of the
//! parent's left p 0.17.
//!
//! Boots differ: in one quiet suite run the baseline's boot gave 85–211 ms
//! (median 185) and three good steps, each its own boot, 122–313 ms; one
//! of them, 220–253 ms, lay above all eight baseline trials and below the
//! whole bad reference, so both tests rejected at once. Inside the zone
//! the rule takes the nearer state (halfway is 2× the baseline's median
//! at 200 %): a good kernel's 1.1–1.4× is good, the culprit's 3–4× bad.
//!
//! A verdict measured in an emulated guest needs QEMU ahead of the host's
//! other work: under TCG the guest's timing follows the host's load. As
//! root the lab gives it that (nice -20 in a scheduling group of its own,
//! `lab::qemu::LAB_NICE`). Beside 60 busy loops, with QEMU at -20 in the
//! loops' group instead, the base kernel's longest gaps were 398–2294 ms,
//! as bad as the culprit's; in a group of its own (1.7 of the 2 CPUs) they
//! were 90–567 ms and once 3319 ms, and one of two bisections there judged
//! a good step bad (240–405 ms against a baseline of 176–275 ms) under the
//! old tie-break — between the two states and nearer the baseline, so good
//! under the nearer-state rule. With that rule, beside 60 busy loops, the
//! whole test passed in 738 s (quiet: 695–780 s): baseline 103–506 ms,
//! good steps 148–205, the culprit 452–754, its confirmation 132–220
//! against 501–736. Without root QEMU runs at the host's priority (2 % of a
//! CPU beside the loops: an 8 s trial took some 12 min), so there a busy
//! host is a reason this test cannot run, said as such, never a wrong
//! verdict.
//!
//! The same regression on arm64: the lab's aarch64 tree (`lab source
//! --arch aarch64`, cross-built; `-M virt`, 2 emulated Cortex-A57, the
//! built-in snd-aloop) with patches 1, 2, 6, 7 and 8 of the series, the
//! same scenario and rule with 6 s trials. Measured by hand, quiet: the
//! base kernel's longest gaps were 96–250 ms (and once 482), the
//! culprit's 364–712 ms: the same 3× as on x86_64, so the same settings
//! hold. An incremental step's build is 8–15 s.
//!
//! The player starts first and the load 1 s later (`start_delay`), as in
//! the LKML report (`aplay … &`, then `hackbench 6`): a player started
//! beside hackbench's 240 processes on the emulated CPUs took 3–5 s to
//! open its card and play, which was half of every trial's time.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

/// One bisection of the suite: which of `tests/kernel_series`' patches
/// (by number) make its series, which is the culprit and which does not
/// build, on which architecture's tree, with which card and trial length.
struct Plan {
    arch: &'static str,
    sound: &'static str,
    patches: &'static [u32],
    culprit: u32,
    broken: Option<u32>,
    seconds: u32,
}

impl Plan {
    /// The plan's patches, in order.
    fn series(&self) -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernel_series");
        let mut all: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "patch"))
            .collect();
        all.sort();
        assert_eq!(all.len(), 8, "{}", dir.display());
        self.patches
            .iter()
            .map(|n| all[*n as usize - 1].clone())
            .collect()
    }

    /// The commit patch `n` became, of the series' `commits`.
    fn commit_of<'c>(&self, commits: &'c [String], n: u32) -> &'c str {
        let at = self.patches.iter().position(|p| *p == n).unwrap();
        &commits[at]
    }
}

/// A lab kernel tree as `lab source --debian --arch ARCH` hands it out
/// (made once): where it is, the `make` that builds its image, and the
/// image a `[target] vm` boots.
struct LabTree {
    path: PathBuf,
    make: String,
    image: PathBuf,
}

impl LabTree {
    fn of(arch: &str) -> LabTree {
        let text = xtask_stdout(&["lab", "source", "--debian", "--arch", arch]);
        let (path, make) = text
            .lines()
            .find_map(|l| l.strip_prefix("cd ")?.split_once(" && "))
            .unwrap_or_else(|| panic!("no `cd TREE && make …` line in: {text}"));
        let image = text
            .lines()
            .find_map(|l| l.strip_prefix("vm = { kernel = ")?.split('"').nth(1))
            .unwrap_or_else(|| panic!("no `vm = {{ kernel = …` line in: {text}"));
        LabTree {
            path: PathBuf::from(path.trim()),
            // Quiet: a step's log keeps the compiler's warnings only.
            make: make.trim().replacen("make ", "make -s ", 1),
            image: PathBuf::from(image),
        }
    }

    /// `bisect-run`'s deploy: the image of the checked-out commit, 125
    /// (skip) when it does not build.
    fn deploy(&self) -> String {
        format!("{} || exit 125", self.make)
    }
}

/// git in `tree` with a fixed identity and date, so the series' commits
/// have the same ids on every machine.
fn git_fixed(tree: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(tree)
        .env("GIT_AUTHOR_NAME", "Lab Series")
        .env("GIT_AUTHOR_EMAIL", "lab-series@xrunbench.invalid")
        .env("GIT_COMMITTER_NAME", "Lab Series")
        .env("GIT_COMMITTER_EMAIL", "lab-series@xrunbench.invalid")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Busy and total ticks of all CPUs (the `cpu` line of /proc/stat; idle
/// and iowait count as not busy, steal as busy).
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        // user … steal; guest time is already in user.
        .take(8)
        .map(|f| f.parse().unwrap())
        .collect();
    let total: u64 = fields.iter().sum();
    (
        total - fields[3] - fields.get(4).copied().unwrap_or(0),
        total,
    )
}

/// Why the host cannot hold an emulated guest's timing now, if it cannot:
/// QEMU cannot be put ahead of the host's other work (not root) and more
/// than a quarter of the host's CPU time is busy over 3 s while this test
/// does nothing.
fn host_busy() -> Option<String> {
    if xrunbench_test_support::is_root() {
        // The lab runs QEMU at nice -20 in a group of its own.
        return None;
    }
    let (busy0, total0) = cpu_ticks();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (busy1, total1) = cpu_ticks();
    let share = (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64;
    (share > 0.25).then(|| {
        format!(
            "the host is busy with other work ({:.0} % of its CPU time over 3 s) and, not being \
             root, the lab cannot run QEMU ahead of it: an emulated guest's timing follows the \
             host's load, so no verdict measured in it would mean anything",
            share * 100.0
        )
    })
}

/// Applies `patches` on a branch `series` made afresh from `lab-base`,
/// after clearing what a killed run may have left; the series' commits,
/// oldest first.
fn apply_series(tree: &Path, patches: &[PathBuf]) -> Vec<String> {
    // What a run killed half-way may have left: an `am` or a bisection.
    for left in [&["am", "--abort"][..], &["bisect", "reset"][..]] {
        let _ = Command::new("git").current_dir(tree).args(left).output();
    }
    // The series on a branch of its own, from the base every time.
    git_fixed(tree, &["checkout", "-q", "-f", "-B", "series", "lab-base"]);
    let mut am = vec!["am", "-q", "--committer-date-is-author-date"];
    let names: Vec<String> = patches.iter().map(|p| p.display().to_string()).collect();
    am.extend(names.iter().map(String::as_str));
    git_fixed(tree, &am);
    let commits: Vec<String> = git_fixed(tree, &["rev-list", "--reverse", "lab-base..series"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(commits.len(), patches.len());
    commits
}

/// Builds the kernel image at the checked-out commit and checks that the
/// build succeeded.
fn build_image(tree: &LabTree) {
    let built = std::time::Instant::now();
    let make = Command::new("sh")
        .current_dir(&tree.path)
        .args(["-c", &tree.make])
        .output()
        .unwrap();
    assert!(
        make.status.success(),
        "{} at the series' top: {}",
        tree.make,
        String::from_utf8_lossy(&make.stderr)
    );
    eprintln!(
        "{} at the series' top: {:.0} s",
        tree.make,
        built.elapsed().as_secs_f64()
    );
}

/// Writes the scenario (the player beside hackbench in a VM booting the
/// tree's image with the plan's card, trials of its length) into `dir`;
/// its path.
fn write_scenario(dir: &Path, tree: &LabTree, plan: &Plan) -> PathBuf {
    let seconds = plan.seconds;
    ScenarioText::new("kernel-series")
        .trials(4)
        .duration(&format!("{seconds}s"))
        .warmup("0s")
        .generate(&format!(
            "{{ seconds = {seconds}, rate = 48000, channels = 2 }}"
        ))
        .audio("backend", "alsa")
        .audio("device", "hw:0")
        .audio("buffer_time", "100ms")
        .audio("period_time", "25ms")
        .audio("priority", "other")
        .hackbench("{ groups = 6 }")
        .load_start_delay("1s")
        .config("play")
        .tail(&format!(
            "[target]\nvm = {{ kernel = {}, sound = {} }}",
            toml_string(&tree.image.display().to_string()),
            toml_string(plan.sound)
        ))
        .write(dir)
}

/// Checks that the bisection's one report names `culprit` as the first bad
/// commit and confirms it.
fn assert_report_confirms(results: &Path, culprit: &str, stdout: &str) {
    let report = find_named(results, "report.txt");
    assert_eq!(report.len(), 1, "{stdout}");
    let text = std::fs::read_to_string(&report[0]).unwrap();
    // The report names it by its abbreviated id (the report wraps its
    // subject) and confirms it against its parent with fresh trials.
    let named = text
        .split("first bad commit: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no first bad commit in the report: {text}"));
    assert!(
        named.len() >= 7 && culprit.starts_with(named),
        "the report names {named}, not {culprit}: {text}"
    );
    assert!(text.contains("CONFIRMED: the culprit is worse"), "{text}");
}

/// Checks the bisection's steps: `broken` (which does not build) only ever
/// a skip, and every measured step on the kernel built from its commit.
fn assert_steps(results: &Path, broken: Option<&str>) {
    let steps: Vec<serde_json::Value> = find_named(results, "step.json")
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    // The commit that does not build, if the search asked about it:
    // a skip, never a verdict.
    for s in steps
        .iter()
        .filter(|s| broken.is_some_and(|b| s["commit"] == b))
    {
        assert_eq!(s["decision"]["verdict"], "skip", "{s:#}");
        assert_eq!(s["attempts"][0]["deploy"], "exited 125", "{s:#}");
    }
    // Every measured step ran the kernel built from its own commit.
    let measured: Vec<&serde_json::Value> = steps
        .iter()
        .filter(|s| s["trials"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert!(measured.len() >= 4, "{steps:#?}");
    for s in measured {
        let commit = s["commit"].as_str().unwrap();
        let expected = s["kernel_expected"].as_str().unwrap();
        assert!(expected.ends_with(&format!("-g{}", &commit[..12])), "{s:#}");
        assert!(
            s["kernel_seen"].as_str().unwrap().contains(expected),
            "{s:#}"
        );
    }
}

/// Bisects the plan's series on the lab's tree for its architecture, with
/// the board binaries of `bins`, and checks the answer.
fn bisect_the_series(plan: &Plan, bins: &Path) {
    let tree = LabTree::of(plan.arch);
    let commits = apply_series(&tree.path, &plan.series());
    let broken = plan.broken.map(|n| plan.commit_of(&commits, n));
    let culprit = plan.commit_of(&commits, plan.culprit);
    // The scenario names the image: it must exist before the bisection
    // (any commit's: every step builds its own).
    build_image(&tree);

    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path(), &tree, plan);
    let results = dir.path().join("results");
    let started = std::time::Instant::now();
    let out = xtask()
        .current_dir(&tree.path)
        .arg("bisect-run")
        .arg(&scenario)
        .args(["--good", "lab-base", "--bad", "series"])
        .args(["--deploy", &tree.deploy()])
        .args(["--metric", "max-gap", "--threshold", "200"])
        .args(["--baseline-trials", "8", "--max-trials", "8"])
        .arg("--results-dir")
        .arg(&results)
        .arg("--bin-dir")
        .arg(bins)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "{stdout}\nbisect-run ({}) took {:.0} s",
        plan.arch,
        started.elapsed().as_secs_f64()
    );
    // CI shows a failure's head and tail: its verdicts again at the end.
    let verdicts: Vec<&str> = stdout.lines().filter(|l| l.starts_with("bisect")).collect();
    let verdicts = verdicts.join("\n");
    assert!(
        out.status.success(),
        "{stdout}\n{stderr}\nbisect-run {}; its own lines:\n{verdicts}",
        out.status
    );
    assert!(
        stdout.contains(&format!("{culprit} is the first bad commit")),
        "bisect did not name {culprit}:\n{stdout}\n{stderr}\nits own lines:\n{verdicts}"
    );
    assert_report_confirms(&results, culprit, &stdout);
    assert_steps(&results, broken);
    // The tree is left as bisect-run found it: no bisection in progress.
    assert!(
        !tree.path.join(".git/BISECT_LOG").exists(),
        "git bisect not reset"
    );
}

// Both ignored so that `cargo test --all-targets` builds and lints them
// but does not run them. `cargo xtask test` runs them last in the guests'
// lane, one at a time, when the kernel trees they build on have been made
// and built and the other tests are done.
// By hand, one at a time (each guest needs the machine to itself):
// `cargo test --test kernel_bisect -- --ignored --test-threads=1`.

#[test]
#[ignore = "the suite's longest test: `cargo xtask test` runs it in the guests' lane, alone"]
fn bisect_run_names_the_scheduler_commit_that_made_audio_worse_in_a_real_kernel() {
    xrunbench_test_support::skip_if_cannot!(host_busy());
    let plan = Plan {
        arch: "x86_64",
        sound: "dummy",
        patches: &[1, 2, 3, 4, 5, 6, 7, 8],
        culprit: 6,
        broken: Some(4),
        seconds: 8,
    };
    bisect_the_series(&plan, &bin_dir());
}

/// A shorter series on the aarch64 tree (`-M virt`, cross-built, its
/// guest's card the built-in snd-aloop), with the cross-built board
/// binaries: patches 3–5 left out (the commit that does not build among
/// them, which the x86_64 bisection covers), so fewer visits.
#[test]
#[ignore = "`cargo xtask test` runs it after the x86_64 bisection, alone"]
fn bisect_run_names_the_scheduler_commit_that_made_audio_worse_in_an_arm64_kernel() {
    xrunbench_test_support::skip_if_cannot!(host_busy());
    let plan = Plan {
        arch: "aarch64",
        sound: "aloop",
        patches: &[1, 2, 6, 7, 8],
        culprit: 6,
        broken: None,
        seconds: 6,
    };
    let bins = tempfile::tempdir().unwrap();
    bisect_the_series(&plan, &cross_board_binaries("aarch64", bins.path()));
}
