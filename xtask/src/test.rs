//! `cargo xtask test`: the lint, then the whole suite, with what they need
//! installed; and `cargo xtask lint` on its own.
//!
//! The tests start their own sound servers (a JACK dummy server per test
//! binary, see `crates/test-support`), so a plain `cargo test` works too once
//! the packages are there; this verb makes that true on a fresh machine.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use xrunbench_lab::arch::{self, Arch};
use xrunbench_lab::board::{self, build::Request, elf::GlibcVersion};
use xrunbench_lab::deps;
use xrunbench_lab::util::{cargo, run_checked};
use xrunbench_test_support::skip;

use crate::qemu_user;
use crate::session_dirs::SessionDirs;

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Extra arguments passed to `cargo test` (after `--`, to the harness).
    #[arg(trailing_var_arg = true)]
    pub rest: Vec<String>,
}

/// Arguments of `cargo xtask lint` (none).
#[derive(clap::Args)]
pub struct LintArgs {}

/// The player's cpal hosts, all built and tested (the PipeWire host is
/// built, and tested only where a PipeWire server can be started).
const PLAYER_FEATURES: &str =
    "xrunbench-player/cpal-jack,xrunbench-player/cpal-pulseaudio,xrunbench-player/cpal-pipewire";

/// `cargo test` with the suite's features and profile settings.
fn cargo_test() -> std::process::Command {
    let mut cmd = cargo();
    // --no-fail-fast: one failing test binary must not hide the others'.
    cmd.args([
        "test",
        "--no-fail-fast",
        "--workspace",
        "--features",
        PLAYER_FEATURES,
    ])
    // The pulseaudio crate (cpal's PulseAudio host) zero-fills 1 MiB per
    // socket read in the thread that runs the data callback. Unoptimised
    // that alone takes a whole CPU and the host underruns all the time;
    // optimising only that crate does not help, because debug builds
    // share generic code (Vec::resize) compiled in other crates. So the
    // suite is built at opt-level 1 (debug assertions stay on).
    .env("CARGO_PROFILE_DEV_OPT_LEVEL", "1");
    cmd
}

/// The feature sets the lint checks: code compiled only with a cpal host
/// (or only without one) must be clean in both.
const LINT_FEATURE_SETS: [(&str, Option<&str>); 2] = [
    ("default features", None),
    ("all player features", Some(PLAYER_FEATURES)),
];

/// `cargo fmt --check`, clippy `-D warnings` in every feature set, and
/// the fuzz targets compiled; all run, so that one failure does not hide
/// another.
fn lint_steps() -> Result<()> {
    let mut steps: Vec<(String, std::process::Command)> = Vec::new();
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    steps.push(("cargo fmt --check".into(), fmt));
    for (label, features) in LINT_FEATURE_SETS {
        let mut clippy = cargo();
        clippy.args(["clippy", "--workspace", "--all-targets"]);
        if let Some(f) = features {
            clippy.args(["--features", f]);
        }
        clippy.args(["--", "-D", "warnings"]);
        steps.push((format!("clippy, {label}"), clippy));
    }
    // The fuzz targets are not in the workspace (libFuzzer wants nightly's
    // flags to run), so nothing else here would notice that they stopped
    // compiling; they compile on stable.
    let mut fuzz = cargo();
    fuzz.args(["check", "--bins", "--manifest-path"])
        .arg(crate::fuzz::fuzz_dir().join("Cargo.toml"));
    steps.push(("the fuzz targets compile (fuzz/)".into(), fuzz));
    let mut failed = Vec::new();
    for (label, mut cmd) in steps {
        eprintln!("xtask lint: {label}");
        if let Err(e) = run_checked(&mut cmd) {
            eprintln!("xtask lint: {e:#}");
            failed.push(label);
        }
    }
    if !failed.is_empty() {
        bail!("lint failed: {}", failed.join("; "));
    }
    Ok(())
}

/// `cargo xtask lint`: installs what clippy needs, then lints.
pub fn lint(_args: &LintArgs) -> Result<ExitCode> {
    if let Err(e) =
        deps::ensure(&crate::needs::LINT).and_then(|()| crate::needs::ensure_rust_components())
    {
        return Ok(e.report());
    }
    lint_steps()?;
    Ok(ExitCode::SUCCESS)
}

/// The board architectures the suite builds and runs under qemu: those
/// cross-built here (both, on an x86_64 machine).
pub fn board_arches() -> Vec<Arch> {
    [Arch::Aarch64, Arch::Armv7]
        .into_iter()
        .filter(|a| a.is_cross())
        .collect()
}

/// Installs what the suite needs, lints, then runs the suite and the
/// board stage. A failing stage does not hide the others' results.
pub fn run(args: &TestArgs) -> Result<ExitCode> {
    let targets: Vec<&str> = board_arches().iter().map(|a| a.rust_target()).collect();
    if let Err(e) = deps::ensure(&crate::needs::TEST)
        .and_then(|()| crate::needs::ensure_rust_components())
        .and_then(|()| deps::ensure_rust_targets(&targets))
    {
        return Ok(e.report());
    }
    // Started before the lint so that they use every idle moment of the
    // lint, the build and the suite; dropped (stopped) on every way out.
    // Only for the whole suite: a filtered run may not bisect at all.
    let whole = args.rest.is_empty();
    let trees_ahead = whole.then(kernel_trees_ahead).transpose()?;
    let board_ahead = whole.then(board_builds_ahead).transpose()?;
    lint_steps()?;
    let jack = xrunbench_test_support::servers::JackLeftovers::note();
    let skips = SkipLog::start()?;
    let session = SessionDirs::start()?;
    let mut failed = Vec::new();
    // What follows the other tests in their lane: the doc tests (not part
    // of --all-targets).
    let doc_tests = || {
        let mut doc = cargo_test();
        skips.configure(&mut doc);
        session.configure(&mut doc);
        match run_checked(doc.arg("--doc")) {
            Ok(()) => Vec::new(),
            Err(e) => {
                eprintln!("xtask test: {e:#}");
                vec!["doc tests".to_string()]
            }
        }
    };
    // The board stage, its builds made ahead: in the guests' lane, before
    // the bisection (its ARM guests run ahead of the host's work too).
    let board_stage = || {
        let mut failed: Vec<String> = board_ahead.and_then(Ahead::wait).into_iter().collect();
        failed.extend(board_stage_after());
        failed
    };
    let mut build = cargo_test();
    build.arg("--all-targets");
    match crate::lanes::build(build) {
        Ok(bins) => failed.extend(run_lanes(
            &bins,
            &args.rest,
            &skips,
            &session,
            doc_tests,
            // Then the trees the bisections build on: built by now, or
            // built before them, never beside their trials.
            || {
                let mut failed = board_stage();
                failed.extend(trees_ahead.and_then(Ahead::wait));
                failed
            },
        )),
        Err(e) => {
            eprintln!("xtask test: {e:#}");
            failed.push("building the workspace's tests".to_string());
            failed.extend(doc_tests());
            failed.extend(board_stage());
        }
    }
    failed.extend(skips.finish());
    failed.extend(session.finish());
    if jack.clean() {
        eprintln!(
            "xtask test: removed {} (libjack's, left by the JACK tests)",
            xrunbench_test_support::servers::JACK_SHM_REGISTRY
        );
    }
    if !failed.is_empty() {
        bail!("failed: {}", failed.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the test binaries in their two lanes (see `lanes`): the other
/// tests, then `after_others`; beside them, where QEMU can be put ahead
/// of them (root), the guests' tests, with `before_bisect` (the board
/// stage, whose ARM guests must not run beside the bisections', and the
/// kernel trees' builds, which must not either) ahead of the real-kernel
/// bisections, which also wait for the other tests (not
/// for `after_others`, the doc tests, which only compile and run at
/// normal priority). Without root the guests' lane comes after.
/// The guests' tests write to a log, shown when their lane ends. Returns
/// what failed.
fn run_lanes(
    bins: &[crate::lanes::TestBinary],
    rest: &[String],
    skips: &SkipLog,
    session: &SessionDirs,
    after_others: impl FnOnce() -> Vec<String> + Send,
    before_bisect: impl FnOnce() -> Vec<String> + Send,
) -> Vec<String> {
    use crate::lanes::{run_lane, GUEST_TESTS, LAST_GUEST_TEST};
    let of = |name: &str| -> Vec<crate::lanes::TestBinary> {
        bins.iter().filter(|b| b.name == name).cloned().collect()
    };
    let guests: Vec<crate::lanes::TestBinary> = GUEST_TESTS
        .iter()
        .filter(|n| **n != LAST_GUEST_TEST)
        .flat_map(|n| of(n))
        .collect();
    let last = of(LAST_GUEST_TEST);
    let mut others: Vec<crate::lanes::TestBinary> = bins
        .iter()
        .filter(|b| !GUEST_TESTS.contains(&b.name.as_str()))
        .cloned()
        .collect();
    // Cargo announces them as they finish building: run them in a stable
    // order, as `cargo test` does (by package, then target).
    others.sort_by(|a, b| (&a.package_dir, &a.source).cmp(&(&b.package_dir, &b.source)));
    let configure = |cmd: &mut std::process::Command| {
        skips.configure(cmd);
        session.configure(cmd);
        // As `cargo_test` built them: what they build in turn matches.
        cmd.env("CARGO_PROFILE_DEV_OPT_LEVEL", "1");
    };
    let log = xrunbench_paths::target_dir().join("xrunbench-guest-lane.log");
    let _ = std::fs::remove_file(&log);
    // The other tests' real-time threads (sound servers at FIFO 90,
    // stall hogs, players at FIFO 80) preempt QEMU whatever its nice
    // value: a hog's 500 ms on a CPU is a 500 ms gap in the guest's audio,
    // as long as the planted regression's. The bisection waits for them.
    let (others_done, others_done_rx) = std::sync::mpsc::channel::<()>();
    let guest_lane = || {
        let others_done_rx = others_done_rx;
        let mut failed = run_lane(&guests, rest, &configure, Some(&log));
        failed.extend(before_bisect());
        if others_done_rx.try_recv().is_err() {
            eprintln!(
                "xtask test: {LAST_GUEST_TEST} waits for the other tests to end (their \
                 real-time threads would preempt its guest)"
            );
            // An error: the other lane ended without saying (it panicked).
            let _ = others_done_rx.recv();
        }
        failed.extend(run_lane(&last, rest, &configure, Some(&log)));
        eprintln!("xtask test: the guests' lane ({}):", log.display());
        eprint!("{}", std::fs::read_to_string(&log).unwrap_or_default());
        failed
    };
    let mut failed = Vec::new();
    if xrunbench_lab::util::is_root() {
        eprintln!(
            "xtask test: {} running beside the other tests (log: {})",
            GUEST_TESTS.join(", "),
            log.display()
        );
        std::thread::scope(|scope| {
            let lane = scope.spawn(guest_lane);
            failed.extend(run_lane(&others, rest, &configure, None));
            let _ = others_done.send(());
            failed.extend(after_others());
            failed.extend(
                lane.join()
                    .unwrap_or_else(|_| vec!["the guests' lane".into()]),
            );
        });
    } else {
        // Without root QEMU cannot be put ahead of the other tests: the
        // guests' tests come after them.
        failed.extend(run_lane(&others, rest, &configure, None));
        let _ = others_done.send(());
        failed.extend(after_others());
        failed.extend(guest_lane());
    }
    failed
}

/// A command run in the background while the suite runs, at
/// `SCHED_IDLE`: it gets a CPU only when nothing else wants one, so the
/// tests beside it run as on an idle machine, less the caches. Used for
/// what the suite's last stages need built (hours of idle moments go
/// into the lint, the build and the tests that wait on time). Its output
/// goes to a log; it runs in a process group of its own, stopped with
/// this process on a signal and when dropped.
struct Ahead {
    what: &'static str,
    log: std::path::PathBuf,
    child: Option<std::process::Child>,
    slot: Option<usize>,
}

impl Ahead {
    /// Starts `cmd` (`what` names it in messages); a start that fails is
    /// only said (what needed it then does the work itself).
    fn start(what: &'static str, cmd: std::process::Command, log: std::path::PathBuf) -> Ahead {
        let mut ahead = Ahead {
            what,
            log,
            child: None,
            slot: None,
        };
        match ahead.spawn(cmd) {
            Ok(()) => eprintln!(
                "xtask test: {what} in the background (SCHED_IDLE; log: {})",
                ahead.log.display()
            ),
            Err(e) => eprintln!("xtask test: {what} not done ahead: {e:#}"),
        }
        ahead
    }

    fn spawn(&mut self, mut cmd: std::process::Command) -> Result<()> {
        use std::os::unix::process::CommandExt;
        if let Some(dir) = self.log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let log = std::fs::File::create(&self.log)
            .with_context(|| format!("creating {}", self.log.display()))?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        // SAFETY: between fork and exec, only sched_setscheduler(2) on this
        // process, async-signal-safe; what it runs inherits it.
        unsafe {
            cmd.pre_exec(|| {
                let param = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
        self.slot = stop_group_on_signals(child.id());
        self.child = Some(child);
        Ok(())
    }

    /// Waits for it to end (with the CPUs whatever else leaves idle); the
    /// failure to report if it failed.
    fn wait(mut self) -> Option<String> {
        let mut child = self.child.take()?;
        self.forget_group();
        match child.wait() {
            Ok(status) if status.success() => None,
            Ok(status) => {
                eprintln!(
                    "xtask test: {} failed ({status}); the end of {}:",
                    self.what,
                    self.log.display()
                );
                let text = std::fs::read_to_string(&self.log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                for line in &lines[lines.len().saturating_sub(30)..] {
                    eprintln!("  {line}");
                }
                Some(self.what.to_string())
            }
            Err(e) => Some(format!("{} (waiting for it: {e})", self.what)),
        }
    }

    /// The signal handler must not signal a group id that may be reused.
    fn forget_group(&mut self) {
        if let Some(slot) = self.slot.take() {
            AHEAD_GROUPS[slot].store(0, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.forget_group();
        let Some(mut child) = self.child.take() else {
            return;
        };
        use xrunbench_host::target::hooks::{kill_group, wait_group_gone};
        match child.try_wait() {
            Ok(None) => {
                // Not needed any more (a run that stopped early): a
                // half-built tree is resumed by the next make, a half-made
                // one swept by the next `lab source`.
                kill_group(child.id(), libc::SIGTERM);
                let _ = child.wait();
                wait_group_gone(child.id());
            }
            Ok(Some(status)) if !status.success() => eprintln!(
                "xtask test: {} failed ({status}): see {}",
                self.what,
                self.log.display()
            ),
            _ => {}
        }
    }
}

/// The architectures of the lab's kernel trees the suite bisects, in the
/// order its bisections run (`tests/kernel_bisect.rs`).
const BISECTED_ARCHES: [&str; 2] = ["x86_64", "aarch64"];

/// `lab source --debian --build` ahead, for each of [`BISECTED_ARCHES`]
/// in turn: the kernel trees the real-kernel bisections build on,
/// fetched, made and built (some three to four minutes of both CPUs
/// each). The bisections wait for it to end (a build beside their trials
/// gives their guests seconds-long gaps); a bisection's own `lab source`
/// then finds its tree built, and if the build ahead failed, makes the
/// tree itself and reports what went wrong.
fn kernel_trees_ahead() -> Result<Ahead> {
    // One process group for both: a shell runs them one after the other.
    // `/proc/PID/exe` is this binary for as long as it runs, as
    // [`this_program`] is for a child of its own.
    let mut cmd = std::process::Command::new("sh");
    cmd.args([
        "-ec",
        r#"me=$0; for arch; do "$me" lab source --debian --build --arch "$arch"; done"#,
        &format!("/proc/{}/exe", std::process::id()),
    ])
    .args(BISECTED_ARCHES);
    let log = xrunbench_lab::lab::kernel::cache_dir().join("source-ahead.log");
    Ok(Ahead::start(
        "making and building the lab's kernel trees",
        cmd,
        log,
    ))
}

/// This program, to run again as a child: `/proc/self/exe`, which stays
/// this binary when `cargo test` (built at another opt-level) has
/// replaced the file `target/debug/xtask` meanwhile.
fn this_program() -> &'static str {
    "/proc/self/exe"
}

/// The board stage's own target directory. Cargo holds a target
/// directory's lock for as long as `cargo test` runs, so builds for the
/// board stage in the suite's directory would wait for the whole suite.
fn board_stage_target_dir() -> std::path::PathBuf {
    xrunbench_test_support::boards::board_stage_target_dir()
}

/// `cargo xtask board test` in the board stage's own target directory:
/// `--build-only` for the builds ahead, nothing for the stage itself.
fn board_test_command(extra: &[&str]) -> Result<std::process::Command> {
    let mut cmd = std::process::Command::new(this_program());
    cmd.args(["board", "test"])
        .args(extra)
        .env("CARGO_TARGET_DIR", board_stage_target_dir());
    Ok(cmd)
}

/// The board stage's builds ahead (cross builds, their unit tests, the
/// older-glibc build, Debian's ARM kernels): some seven minutes of CPU
/// that would otherwise come after the suite. The stage itself then finds
/// them built.
fn board_builds_ahead() -> Result<Ahead> {
    let cmd = board_test_command(&["--build-only"])?;
    let log = board_stage_target_dir().join("builds-ahead.log");
    Ok(Ahead::start("the board stage's builds", cmd, log))
}

/// The board stage, after the suite, in its own process and target
/// directory; the failure to report if it failed.
fn board_stage_after() -> Option<String> {
    let result = board_test_command(&[]).and_then(|mut cmd| run_checked(&mut cmd));
    result.err().map(|e| {
        eprintln!("xtask test: {e:#}");
        "the board stage".to_string()
    })
}

/// The background groups' ids, for [`stop_group_on_signals`]' handler.
static AHEAD_GROUPS: [std::sync::atomic::AtomicI32; 2] = [
    std::sync::atomic::AtomicI32::new(0),
    std::sync::atomic::AtomicI32::new(0),
];

/// On SIGINT, SIGTERM or SIGHUP (Ctrl-C reaches the terminal's foreground
/// group, which a background job, in a group of its own, is not in),
/// stops group `pgid` too, then dies of the signal as before. Returns the
/// slot it holds, `None` when every slot is taken (not expected).
fn stop_group_on_signals(pgid: u32) -> Option<usize> {
    extern "C" fn handler(sig: libc::c_int) {
        // SAFETY: atomics, kill(2), signal(2) and raise(3) are
        // async-signal-safe.
        unsafe {
            for group in &AHEAD_GROUPS {
                let pgid = group.load(std::sync::atomic::Ordering::SeqCst);
                if pgid > 0 {
                    libc::kill(-pgid, libc::SIGTERM);
                }
            }
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    let pgid = libc::pid_t::try_from(pgid).ok()?;
    let slot = AHEAD_GROUPS.iter().position(|g| {
        g.compare_exchange(
            0,
            pgid,
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
        )
        .is_ok()
    })?;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only makes async-signal-safe calls.
        unsafe {
            libc::signal(sig, handler as *const () as libc::sighandler_t);
        }
    }
    Some(slot)
}

/// The skips of one suite run: every test that could not run appends a
/// line to this file (see `xrunbench-test-support`); at the end they are
/// listed, and where no test may skip (root, or CI) any skip fails the
/// suite — a check that did not run must never pass for one that did.
struct SkipLog {
    path: std::path::PathBuf,
    forbidden: bool,
}

impl SkipLog {
    /// A fresh, empty log under the target directory.
    fn start() -> Result<SkipLog> {
        let path = xrunbench_paths::target_dir().join("xrunbench-skips.log");
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => {}
        }
        let forbidden = xrunbench_lab::util::is_root() || skip::skipping_forbidden();
        Ok(SkipLog { path, forbidden })
    }

    /// Points a test command at the log; as root, skipping fails the test.
    fn configure(&self, cmd: &mut std::process::Command) {
        cmd.env(skip::SKIP_LOG_ENV, &self.path);
        if self.forbidden {
            cmd.env(skip::NO_SKIP_ENV, "1");
        }
    }

    /// Lists the skips; returns the failure to report when there were any
    /// where none may be.
    fn finish(self) -> Option<String> {
        let skips = skip::read_log(&self.path);
        let _ = std::fs::remove_file(&self.path);
        if skips.is_empty() {
            return None;
        }
        eprintln!("xtask test: {} test(s) skipped:", skips.len());
        for (test, reason) in &skips {
            eprintln!("  {test}: {reason}");
        }
        self.forbidden.then(|| {
            format!(
                "{} test(s) skipped where every test must run (root or CI)",
                skips.len()
            )
        })
    }
}

/// Prints one board check's outcome in the closing-line style of a test
/// runner and returns its name when it failed.
fn outcome(name: &str, result: Result<()>) -> Option<String> {
    match result {
        Ok(()) => {
            eprintln!("board: {name} ... ok");
            None
        }
        Err(e) => {
            eprintln!("board: {name} ... FAILED: {e:#}");
            Some(name.to_string())
        }
    }
}

/// Arguments of `cargo xtask board test`.
#[derive(clap::Args)]
pub struct BoardTestArgs {
    /// Architectures (default: those cross-built here).
    #[arg(long, value_enum, value_delimiter = ',')]
    arch: Vec<arch::ArchChoice>,
    /// Build (and fetch) everything the stage runs, with the checks on
    /// the builds, and run nothing: what `cargo xtask test` does ahead,
    /// beside the suite.
    #[arg(long)]
    build_only: bool,
}

/// `cargo xtask board test`: the board stage alone.
pub fn board_test(args: &BoardTestArgs) -> Result<ExitCode> {
    let arches = if args.arch.is_empty() {
        board_arches()
    } else {
        arch::resolve(&args.arch)
    };
    let request = Request {
        arches: arches.clone(),
        out: None,
        glibc: Some("2.28".parse().expect("a version")),
    };
    if let Err(e) = board::build::install(&request)
        .and_then(|()| deps::ensure_groups(&[&crate::needs::QEMU_USER]))
    {
        return Ok(e.report());
    }
    let stage = if args.build_only {
        Stage::BuildOnly
    } else {
        Stage::Whole
    };
    let failed = board_stage(&arches, stage)?;
    if !failed.is_empty() {
        bail!("failed: {}", failed.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// How much of the board stage to do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The builds and the checks on them; nothing run.
    BuildOnly,
    /// Everything.
    Whole,
}

/// The board stage: the board binaries cross-built for both board
/// architectures (so a 32-bit break fails here the day it is written),
/// their sizes reported against their budgets, run under qemu-user; the board crates' unit
/// tests under qemu; and the older-glibc build (zig), which must need no
/// glibc newer than it was asked for. Returns the names of failed checks.
fn board_stage(arches: &[Arch], stage: Stage) -> Result<Vec<String>> {
    let scratch = board::build::board_dir().join(format!("test.{}", std::process::id()));
    let mut failed = Vec::new();
    // One architecture at a time, so that one that does not compile (a
    // 32-bit break) does not hide the other's results. Host build scripts
    // are built once and shared.
    for &arch in arches {
        let request = Request {
            arches: vec![arch],
            out: None,
            glibc: None,
        };
        let built = match board::build::build(&request) {
            Ok(b) => b,
            Err(e) => {
                // Nothing else can run for it without its binaries.
                failed.extend(outcome(&format!("{arch} build"), Err(e)));
                continue;
            }
        };
        if stage == Stage::BuildOnly {
            failed.extend(outcome(
                &format!("{arch} board crates' unit tests built"),
                qemu_user::build_unit_tests(&built, &scratch),
            ));
            failed.extend(outcome(
                &format!("{arch} Debian's kernel fetched"),
                xrunbench_lab::lab::kernel::debian(arch, false).map(drop),
            ));
            failed.extend(outcome(
                &format!("{arch} guest's sshd and libraries fetched"),
                xrunbench_lab::lab::userland::Userland::ensure(arch).map(drop),
            ));
            continue;
        }
        eprint!("{}", board::build::report(&built));
        for b in &built {
            // Budgets are targets the table reports (with `!`), not
            // pass/fail: a size is a measurement, and a binary over its
            // budget still works.
            for bin in b.binaries.iter().filter(|x| !x.within_budget()) {
                eprintln!(
                    "board: {} {} is over its size budget: {} bytes stripped, budget {}",
                    b.arch, bin.spec.name, bin.size, bin.spec.budget
                );
            }
            for (name, result) in qemu_user::smoke(b, &scratch)? {
                failed.extend(outcome(&name, result));
            }
        }
        failed.extend(outcome(
            &format!("{arch} board crates' unit tests under qemu"),
            qemu_user::unit_tests(&built, &scratch),
        ));
        for b in &built {
            failed.extend(outcome(
                &format!("{arch} board of the VM lab: a scenario on Debian's kernel over SSH"),
                arm_board_run(b, &scratch),
            ));
        }
    }
    failed.extend(older_glibc_check(arches, &scratch, stage));
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(failed)
}

/// The scenario the board stage runs on each ARM board of the VM lab:
/// seed 003's knob (the scheduler's NEXT_BUDDY feature through debugfs)
/// on and off, a tone through ALSA's `default` device (plug and dmix in
/// front of the card, as on a board without a sound server) with
/// hackbench beside it, one short trial each. The buffer is small so that
/// the emulated board underruns, as libasound's plugins must survive.
const ARM_BOARD_SCENARIO: &str = r#"name = "arm-board"
trials = 1
duration = "2s"
warmup = "0s"
[audio]
generate = { tone_hz = 440, seconds = 2, rate = 48000, channels = 2, format = "S16_LE" }
backend = "alsa"
buffer_time = "20ms"
period_time = "5ms"
[load]
hackbench = { groups = 2, loops = 10 }
[[config]]
name = "next-buddy"
sched_features = ["NEXT_BUDDY"]
[[config]]
name = "no-next-buddy"
sched_features = ["NO_NEXT_BUDDY"]
"#;

/// A scenario run on Debian's kernel of `built`'s architecture booted
/// under QEMU as a whole board of the VM lab (`--target vm:KERNEL`): its
/// own sshd, the cross-built binaries deployed over SSH, a scheduler knob
/// set, read back and restored in the guest, the kernel's snd-aloop
/// played. The records must name the guest's architecture and kernel.
fn arm_board_run(built: &board::build::Built, scratch: &std::path::Path) -> Result<()> {
    use xrunbench_schema::trial::TrialOutcome;
    let kernel = xrunbench_lab::lab::kernel::debian(built.arch, false)?;
    let dir = scratch.join(format!("arm-board-{}", built.arch));
    std::fs::create_dir_all(&dir)?;
    let scenario = dir.join("arm-board.toml");
    std::fs::write(&scenario, ARM_BOARD_SCENARIO)?;
    let results = dir.join("results");
    let mut run = std::process::Command::new(this_program());
    run.arg("run")
        .arg(&scenario)
        .arg("--target")
        .arg(format!("vm:{}", kernel.image.display()))
        .arg("--bin-dir")
        .arg(&built.dir)
        .arg("--results-dir")
        .arg(&results);
    run_checked(&mut run)?;
    let run_dir = std::fs::read_dir(results.join("arm-board"))?
        .flatten()
        .map(|e| e.path())
        .next()
        .context("the run left no run directory")?;
    let records = xrunbench_analysis::results::RunDir::load(&run_dir)?.records;
    anyhow::ensure!(records.len() == 2, "{} trial records, not 2", records.len());
    for r in &records {
        let name = format!("{}-{}", r.trial.config, r.trial.k);
        anyhow::ensure!(
            r.outcome == TrialOutcome::Ran,
            "{name} did not run: {:?}",
            r.outcome
        );
        // `uname -m`: armv7l for armv7.
        let arch = Arch::from_uname_machine(&r.machine.arch);
        anyhow::ensure!(
            r.machine.kernel_release == kernel.release && arch == Some(built.arch),
            "{name} ran on {} {}, not {} {}",
            r.machine.arch,
            r.machine.kernel_release,
            built.arch,
            kernel.release
        );
        let wanted = if r.trial.config == "next-buddy" {
            "NEXT_BUDDY"
        } else {
            "NO_NEXT_BUDDY"
        };
        let knob = r
            .knobs
            .iter()
            .find(|k| k.path.ends_with("sched/features"))
            .with_context(|| format!("{name}: no sched_features knob in its record"))?;
        anyhow::ensure!(
            knob.requested.contains(wanted)
                && knob
                    .read_back
                    .as_deref()
                    .is_some_and(|b| b.contains(wanted))
                && knob.restored.as_deref() == Some(knob.found.as_str()),
            "{name}: sched_features asked {}, read back {:?}, restored {:?} (found {})",
            knob.requested,
            knob.read_back,
            knob.restored,
            knob.found
        );
        let p = r.player.as_ref().context("no player report")?;
        eprintln!(
            "board: {} {name}: {} underruns through `default`",
            built.arch,
            p.events.len()
        );
        // Frames, not time: exactly what was asked for, however slow the
        // emulated CPU was.
        anyhow::ensure!(
            p.frames_written == 2 * u64::from(p.file.rate),
            "{name}: wrote {} frames of 2 s at {} Hz",
            p.frames_written,
            p.file.rate
        );
    }
    Ok(())
}

/// The directory `var` names, or `$HOME/default` (what cargo and rustup
/// do when it is unset).
fn home_of(var: &str, default: &str) -> Result<std::path::PathBuf> {
    if let Some(dir) = std::env::var_os(var) {
        return Ok(dir.into());
    }
    let home = std::env::var_os("HOME").with_context(|| format!("neither {var} nor HOME set"))?;
    Ok(std::path::PathBuf::from(home).join(default))
}

/// `board build --glibc` for `arch` with `HOME` an empty directory of its
/// own (cargo's and rustup's homes and the project's cache kept where they
/// are): fails if anything
/// it ran (pip, zig, cargo-zigbuild) wrote there, which on a user's
/// machine would have gone into their home.
fn build_with_a_home_of_its_own(
    arch: Arch,
    glibc: GlibcVersion,
    scratch: &std::path::Path,
) -> Result<()> {
    let home = scratch.join("home");
    std::fs::create_dir_all(&home)?;
    let mut cmd = std::process::Command::new(this_program());
    cmd.args(["board", "build", "--arch", arch.name()])
        .arg(format!("--glibc={glibc}"))
        .env("CARGO_HOME", home_of("CARGO_HOME", ".cargo")?)
        .env("RUSTUP_HOME", home_of("RUSTUP_HOME", ".rustup")?)
        .env(xrunbench_paths::CACHE_VAR, xrunbench_paths::cache_dir())
        .env("HOME", &home);
    run_checked(&mut cmd)?;
    let written: Vec<_> = std::fs::read_dir(&home)?
        .flatten()
        .map(|e| e.file_name())
        .collect();
    anyhow::ensure!(
        written.is_empty(),
        "the build wrote outside the target directory, into its HOME: {written:?}"
    );
    Ok(())
}

/// `board build --glibc 2.28` for aarch64: the build writes nothing into
/// the user's home, and (unless only building) its binaries need no newer
/// glibc and still run.
fn older_glibc_check(arches: &[Arch], scratch: &std::path::Path, stage: Stage) -> Vec<String> {
    let Some(arch) = arches.first().copied() else {
        return vec![];
    };
    let glibc: GlibcVersion = "2.28".parse().expect("a version");
    let name = format!("{arch} built against glibc {glibc}");
    let result = build_with_a_home_of_its_own(arch, glibc, scratch).and_then(|()| {
        if stage == Stage::BuildOnly {
            return Ok(());
        }
        let request = Request {
            arches: vec![arch],
            out: None,
            glibc: Some(glibc),
        };
        // Built above: this only collects what was built.
        let built = board::build::build(&request)?;
        for bin in built.iter().flat_map(|b| &b.binaries) {
            let needs = bin.glibc.context("no glibc version needed at all")?;
            anyhow::ensure!(needs <= glibc, "{} needs glibc {needs}", bin.spec.name);
        }
        for b in &built {
            for (check, result) in qemu_user::smoke(b, scratch)? {
                result.with_context(|| check)?;
            }
        }
        Ok(())
    });
    outcome(&name, result).into_iter().collect()
}
