//! The deploying part of a bisect step (issue 12 §1): the user's `deploy`
//! command (build, install, reboot) run on the host in the kernel tree,
//! its output in the step's `deploy.log`; then the board waited for
//! (`boot_timeout`) and the kernel it booted checked against the one built
//! at this commit (`expect_kernel`, default `make -s kernelrelease` in a
//! kernel tree). What fails here is sorted: "this commit cannot be built"
//! is a skip (125), everything else — the deploy command failing, the board
//! not back, the wrong kernel — is infrastructure, retried by the step with
//! the deploy re-run, and never a verdict.
//!
//! The hook runner is this module's own (a small one): the LAVA/labgrid
//! hooks of the target (`power_cycle`) may share it later.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::run::scenario::{self, Scenario, SshTarget, DEFAULT_BOOT_TIMEOUT, DEFAULT_RETRIES};
use crate::run::signals;
use crate::run::units::Span;
use crate::target::Ssh;

/// The exit status of `deploy` that means "this commit cannot be built".
pub const HOOK_SKIP: i32 = 125;

/// The deployment options of the command line; each replaces the
/// scenario's `[target]` key of the same name.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DeployArgs {
    /// Build, install and boot this commit's kernel: a shell command run
    /// on the host in the kernel tree before each step (exit 125: cannot
    /// be built, skip the commit; other failures are retried).
    #[arg(long, value_name = "CMD")]
    pub deploy: Option<String>,
    /// How long the board may take to come back after --deploy (300s).
    #[arg(long, value_name = "SPAN", value_parser = Span::parse)]
    pub boot_timeout: Option<Span>,
    /// A shell command printing the string the board's /proc/version must
    /// contain (default: `make -s kernelrelease` in a kernel tree).
    #[arg(long, value_name = "CMD")]
    pub expect_kernel: Option<String>,
    /// How often an infrastructure failure (deploy failed, board not back,
    /// wrong kernel, link lost) is retried with the deploy re-run (3).
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
}

/// How a step deploys, resolved from the scenario and the command line.
#[derive(Debug, Clone)]
pub struct Deploy {
    /// The deploy command; `None`: the step measures what already runs.
    pub command: Option<String>,
    /// How long the board may take to come back.
    pub boot_timeout: Duration,
    /// The expected-kernel command, if given.
    pub expect_kernel: Option<String>,
    /// Infrastructure failures retried this often.
    pub retries: u32,
    /// The kernel tree: where the commands run.
    pub tree: PathBuf,
}

impl Deploy {
    /// The scenario's `[target]` deploy keys with `args` over them; an
    /// error is one line naming the option.
    pub fn resolve(s: &Scenario, args: &DeployArgs, tree: &Path) -> Result<Deploy, String> {
        for (name, cmd) in [
            ("--deploy", &args.deploy),
            ("--expect-kernel", &args.expect_kernel),
        ] {
            if let Some(c) = cmd {
                scenario::check_command(c).map_err(|m| format!("{name}: {m}"))?;
            }
        }
        if args.boot_timeout.is_some_and(|b| b.as_micros() < 1_000_000) {
            return Err("--boot-timeout: must be at least 1s".into());
        }
        let t = s.target.as_ref();
        Ok(Deploy {
            command: args
                .deploy
                .clone()
                .or_else(|| t.and_then(|t| t.deploy.clone())),
            boot_timeout: args
                .boot_timeout
                .or(t.map(|t| t.boot_timeout))
                .unwrap_or(DEFAULT_BOOT_TIMEOUT)
                .to_std(),
            expect_kernel: args
                .expect_kernel
                .clone()
                .or_else(|| t.and_then(|t| t.expect_kernel.clone())),
            retries: args
                .retries
                .or(t.map(|t| t.retries))
                .unwrap_or(DEFAULT_RETRIES),
            tree: tree.to_path_buf(),
        })
    }
}

/// How a run of a host command (deploy, expect-kernel) ended.
#[derive(Debug)]
pub enum HookEnd {
    /// Exit 0; its stdout.
    Done(String),
    /// It exited non-zero, or was killed: the status, one line.
    Failed(Option<i32>, String),
    /// SIGINT/SIGTERM arrived: it was stopped.
    Interrupted,
}

/// Runs `command` by `sh -c` in `tree`, in a process group of its own
/// (stopped with SIGTERM to the group when we are asked to stop), stdin
/// closed, `env` added; its stderr (and, unless `capture`, its stdout) is
/// appended to `log`.
pub fn run_hook(
    command: &str,
    tree: &Path,
    log: &Path,
    env: &[(&str, String)],
    capture: bool,
) -> HookEnd {
    let file = match OpenOptions::new().create(true).append(true).open(log) {
        Ok(f) => f,
        Err(e) => return HookEnd::Failed(None, format!("cannot open {}: {e}", log.display())),
    };
    let out_to = |f: &File| f.try_clone().map(Stdio::from);
    let (Ok(err), Ok(out)) = (out_to(&file), out_to(&file)) else {
        return HookEnd::Failed(None, format!("cannot write {}", log.display()));
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(tree)
        .stdin(Stdio::null())
        .stderr(err)
        .stdout(if capture { Stdio::piped() } else { out })
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return HookEnd::Failed(None, format!("cannot start sh: {e}")),
    };
    let reader = child.stdout.take().map(|mut o| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut o, &mut s);
            s
        })
    });
    let mut stopped = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if !stopped && signals::stop_requested().is_some() {
            // Its own group: a terminal's Ctrl-C did not reach it.
            signal_group(child.id(), libc::SIGTERM);
            stopped = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    if stopped || signals::stop_requested().is_some() {
        return HookEnd::Interrupted;
    }
    match status {
        Some(s) if s.success() => HookEnd::Done(stdout),
        Some(s) => HookEnd::Failed(s.code(), describe_status(s)),
        None => HookEnd::Failed(None, "lost track of it".into()),
    }
}

fn signal_group(pid: u32, sig: i32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) on the process group we created; at worst ESRCH.
        unsafe {
            libc::kill(-pid, sig);
        }
    }
}

fn describe_status(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

/// Appends a header line to the step's log (which attempt, which command).
pub fn log_line(log: &Path, line: &str) {
    if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(log) {
        let _ = writeln!(f, "==== {line}");
    }
}

/// Whether `tree` is a Linux kernel tree (the default expected kernel is
/// then `make -s kernelrelease`): a top Makefile and Kconfig.
pub fn is_kernel_tree(tree: &Path) -> bool {
    tree.join("Makefile").is_file() && tree.join("Kconfig").is_file()
}

/// The string the board's /proc/version must contain after this step's
/// deployment: `expect_kernel`'s output, else `make -s kernelrelease` in
/// a kernel tree, else none (not checked). `Err`: it could not be had —
/// the same at every retry, so the step skips.
pub fn expected_kernel(d: &Deploy, log: &Path) -> Result<Option<String>, String> {
    let (cmd, what) = match &d.expect_kernel {
        Some(c) => (c.as_str(), "expect_kernel"),
        None if is_kernel_tree(&d.tree) => ("make -s kernelrelease", "make -s kernelrelease"),
        None => return Ok(None),
    };
    match run_hook(cmd, &d.tree, log, &[], true) {
        HookEnd::Done(out) => {
            let s = out.trim().to_string();
            if s.is_empty() || s.contains('\n') {
                Err(format!(
                    "{what} printed {s:?}: expected one line, the string the board's \
                     /proc/version must contain"
                ))
            } else {
                Ok(Some(s))
            }
        }
        HookEnd::Failed(_, why) => Err(format!("{what} failed ({why}); see {}", log.display())),
        HookEnd::Interrupted => Err("interrupted".into()),
    }
}

/// How waiting for the board after a deployment ended.
#[derive(Debug)]
pub enum BoardEnd {
    /// It answers, running the expected kernel (when one is expected):
    /// its /proc/version.
    Up(String),
    /// Not back in time, or back with another kernel: one line. Never a
    /// verdict.
    Infra(String),
    /// SIGINT/SIGTERM arrived.
    Interrupted,
}

/// What one look at the board saw.
struct Look {
    version: String,
    boot_id: Option<String>,
}

/// Looks at the board once: connects (`target`) or reads this machine.
fn look(target: Option<&SshTarget>, remaining: Duration) -> Result<Look, String> {
    let Some(t) = target else {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string());
        return Ok(Look {
            version: read("/proc/version").map_err(|e| format!("/proc/version: {e}"))?,
            boot_id: read("/proc/sys/kernel/random/boot_id").ok(),
        });
    };
    let mut t = t.clone();
    // One connection attempt never outlasts what is left of boot_timeout.
    let secs = remaining
        .as_secs()
        .clamp(1, t.connect_timeout.to_std().as_secs().max(1));
    t.connect_timeout = Span::from_secs(secs);
    let ssh = Ssh::connect(&t).map_err(|e| format!("{e:#}"))?;
    let version = ssh.proc_version().map_err(|e| format!("{e:#}"))?;
    Ok(Look {
        version,
        boot_id: ssh.boot_id().map(str::to_string),
    })
}

/// Waits up to `boot_timeout` until the board answers with `expected` in
/// its /proc/version. A board still running its old kernel right after a
/// deploy that reboots it asynchronously is waited for; one that booted
/// again (its boot id changed) into another kernel is infrastructure at
/// once (it fell back to an old kernel).
pub fn wait_for_board(
    target: Option<&SshTarget>,
    boot_timeout: Duration,
    expected: Option<&str>,
) -> BoardEnd {
    let start = Instant::now();
    let deadline = start + boot_timeout;
    let mut first_boot: Option<Option<String>> = None;
    let mut last: String;
    loop {
        if signals::stop_requested().is_some() {
            return BoardEnd::Interrupted;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        match look(target, remaining) {
            Ok(l) => match expected {
                None => return BoardEnd::Up(l.version),
                Some(e) if l.version.contains(e) => return BoardEnd::Up(l.version),
                Some(e) => {
                    last = format!(
                        "wrong kernel: /proc/version is `{}`, expected it to contain `{e}` \
                         (the board booted another kernel)",
                        l.version
                    );
                    match &first_boot {
                        None => first_boot = Some(l.boot_id),
                        Some(b) if *b != l.boot_id => return BoardEnd::Infra(last),
                        Some(_) => {}
                    }
                }
            },
            Err(e) if e.starts_with("refusing") => return BoardEnd::Infra(e),
            Err(e) => last = e,
        }
        if signals::stop_requested().is_some() {
            return BoardEnd::Interrupted;
        }
        if Instant::now() >= deadline {
            return BoardEnd::Infra(format!(
                "board not back with the expected kernel within boot_timeout {} s: {last}",
                boot_timeout.as_secs()
            ));
        }
        let pause = Duration::from_secs(2).min(deadline.saturating_duration_since(Instant::now()));
        std::thread::sleep(pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_hook_runs_in_the_tree_and_logs_there() {
        let t = tree();
        let log = t.path().join("deploy.log");
        std::fs::write(t.path().join("marker"), "m").unwrap();
        let env = [("XRUNBENCH_COMMIT", "abc".to_string())];
        match run_hook(
            "cat marker; echo \"$XRUNBENCH_COMMIT\" >&2",
            t.path(),
            &log,
            &env,
            false,
        ) {
            HookEnd::Done(_) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "mabc\n");
        match run_hook("exit 125", t.path(), &log, &[], false) {
            HookEnd::Failed(Some(125), why) => assert_eq!(why, "exit status 125"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_expected_kernel_comes_from_the_command_or_a_kernel_tree() {
        let t = tree();
        let log = t.path().join("deploy.log");
        let mut d = Deploy {
            command: None,
            boot_timeout: Duration::from_secs(1),
            expect_kernel: None,
            retries: 0,
            tree: t.path().to_path_buf(),
        };
        // Not a kernel tree, nothing given: not checked.
        assert_eq!(expected_kernel(&d, &log), Ok(None));
        d.expect_kernel = Some("echo ' 6.8.0-rc1-gabc '".into());
        assert_eq!(expected_kernel(&d, &log), Ok(Some("6.8.0-rc1-gabc".into())));
        d.expect_kernel = Some("true".into());
        assert!(expected_kernel(&d, &log)
            .unwrap_err()
            .contains("expected one line"));
        d.expect_kernel = Some("exit 3".into());
        assert!(expected_kernel(&d, &log)
            .unwrap_err()
            .contains("exit status 3"));
        // A kernel tree: make -s kernelrelease (here, a Makefile that
        // only knows that target).
        d.expect_kernel = None;
        std::fs::write(t.path().join("Kconfig"), "").unwrap();
        std::fs::write(
            t.path().join("Makefile"),
            "kernelrelease:\n\t@echo 6.9.0-test\n",
        )
        .unwrap();
        let path = std::env::var_os("PATH").unwrap_or_default();
        if std::env::split_paths(&path).any(|d| d.join("make").is_file()) {
            assert_eq!(expected_kernel(&d, &log), Ok(Some("6.9.0-test".into())));
        }
    }

    #[test]
    fn this_machine_is_up_with_its_own_kernel_and_not_with_another() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let t = Duration::from_secs(1);
        assert!(matches!(
            wait_for_board(None, t, Some(release.trim())),
            BoardEnd::Up(_)
        ));
        // Same boot, wrong kernel: waited for (a reboot may still come),
        // then infrastructure.
        match wait_for_board(None, t, Some("0.0.0-not-this-one")) {
            BoardEnd::Infra(why) => assert!(why.contains("wrong kernel"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
