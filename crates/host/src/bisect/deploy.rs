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
//! The commands run through the target's one hook runner
//! ([`crate::target::hooks`]), like `power_cycle`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::target::hooks::{Hook, HookOutcome};
use crate::target::Ssh;
use xrunbench_lab::signals;
use xrunbench_scenario::units::Span;
use xrunbench_scenario::{
    self as scenario, Scenario, SshTarget, DEFAULT_BOOT_TIMEOUT, DEFAULT_RETRIES,
};

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
        let commands = StepCommands::of(s, args);
        Ok(Deploy {
            command: commands.deploy,
            boot_timeout: args
                .boot_timeout
                .or(s.target.as_ref().map(|t| t.boot_timeout))
                .unwrap_or(DEFAULT_BOOT_TIMEOUT)
                .to_std(),
            expect_kernel: commands.expect_kernel,
            retries: commands.retries.unwrap_or(DEFAULT_RETRIES),
            tree: tree.to_path_buf(),
        })
    }
}

/// The commands a step runs on the host, and how often it retries: the
/// command line's over the board's `[target]` keys over the lab's. The one
/// reading of them, for the step and for the trust rule alike
/// ([`super::trust`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepCommands {
    /// The deploy command.
    pub deploy: Option<String>,
    /// The expected-kernel command.
    pub expect_kernel: Option<String>,
    /// Retries, if any source gives them.
    pub retries: Option<u32>,
}

impl StepCommands {
    /// What `s` with `args` over it gives.
    pub fn of(s: &Scenario, args: &DeployArgs) -> StepCommands {
        let t = s.target.as_ref();
        // A lab's `[target]` has the deploy keys too (the deploy runs on
        // the host, the lab boots what it published).
        let lab = s.lava.as_ref();
        StepCommands {
            deploy: args
                .deploy
                .clone()
                .or_else(|| t.and_then(|t| t.deploy.clone()))
                .or_else(|| lab.and_then(|l| l.deploy.clone())),
            expect_kernel: args
                .expect_kernel
                .clone()
                .or_else(|| t.and_then(|t| t.expect_kernel.clone()))
                .or_else(|| lab.and_then(|l| l.expect_kernel.clone())),
            retries: args
                .retries
                .or(t.map(|t| t.retries))
                .or(lab.map(|l| l.retries)),
        }
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
    let hook = Hook {
        name: what,
        command: cmd,
        dir: Some(&d.tree),
        env: &[],
        timeout: None,
    };
    match hook.run_capturing(log) {
        (HookOutcome::Succeeded, out) => {
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
        (HookOutcome::Interrupted, _) => Err("interrupted".into()),
        (other, _) => Err(format!(
            "{what} {}; see {}",
            other.describe(),
            log.display()
        )),
    }
}

/// Whether the run boots the board itself (`[target] vm`): then there is
/// nothing to wait for after a deployment — the next session boots the
/// image the deploy command built — and the kernel is checked in it.
pub fn boots_itself(target: Option<&SshTarget>) -> bool {
    target.is_some_and(|t| t.vm.is_some())
}

/// Why `seen` (a booted guest's `uname -r` and `uname -v`) is not the
/// kernel expected, if it is not: one line, an infrastructure failure.
pub fn wrong_kernel(seen: &str, expected: Option<&str>) -> Option<String> {
    let e = expected?;
    (!seen.contains(e)).then(|| {
        format!(
            "wrong kernel: the guest booted `{seen}`, expected it to contain `{e}` (is \
             target.vm.kernel the image the deploy command builds?)"
        )
    })
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
    fn a_lava_target_s_deploy_keys_come_from_its_target_table() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("board-job.yaml"), "device_type: qemu\n").unwrap();
        let p = dir.path().join("s.toml");
        let text = "name = \"x\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"a\"\n\
                    [target]\nlava = { url = \"https://lava.example.org/\", job = \"board-job.yaml\" }\n\
                    deploy = \"./publish.sh\"\nretries = 1\n";
        let s = scenario::resolve(&p, &scenario::parse(&p, text).unwrap()).unwrap();
        let d = Deploy::resolve(&s, &DeployArgs::default(), dir.path()).unwrap();
        assert_eq!((d.command.as_deref(), d.retries), (Some("./publish.sh"), 1));
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
        assert!(expected_kernel(&d, &log).unwrap_err().contains("exited 3"));
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
    fn a_guest_booted_by_the_run_is_checked_for_the_kernel_built() {
        let seen = "6.1.176-g0123456789ab #1 SMP PREEMPT_DYNAMIC Thu Jan  1 00:00:00 UTC 2026";
        assert_eq!(wrong_kernel(seen, None), None);
        assert_eq!(wrong_kernel(seen, Some("6.1.176-g0123456789ab")), None);
        let why = wrong_kernel(seen, Some("6.1.176-gfedcba987654")).unwrap();
        assert!(
            why.starts_with("wrong kernel: the guest booted `6.1.176-g0123"),
            "{why}"
        );
        assert!(!why.contains('\n'));
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
