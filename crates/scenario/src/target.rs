//! `[target]`: the board a scenario runs on (over SSH, or booted in the VM
//! lab), its defaults, and its keys checked and resolved.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::file::TargetSpec;
use crate::units::Span;

/// Default `[target] workdir`: under the login's home.
pub const DEFAULT_WORKDIR: &str = ".cache/xrunbench";
/// Default `[target] connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Span = Span::from_secs(10);
/// Default `[target] retries`: as often as KernelCI retries a job whose
/// failure is infrastructure.
pub const DEFAULT_RETRIES: u32 = 3;
/// Default `[target] reconnect_timeout`.
pub const DEFAULT_RECONNECT_TIMEOUT: Span = Span::from_secs(60);
/// Default `[target] boot_timeout`.
pub const DEFAULT_BOOT_TIMEOUT: Span = Span::from_secs(300);

/// `[target]` resolved: defaults filled, paths absolute, options checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshTarget {
    /// The OpenSSH destination.
    pub destination: String,
    /// `Port`, if set.
    pub port: Option<u16>,
    /// `IdentityFile`, if set (absolute).
    pub identity: Option<PathBuf>,
    /// `UserKnownHostsFile`, if set (absolute).
    pub known_hosts: Option<PathBuf>,
    /// ssh_config options, `Key=Value`: `--ssh-option`s first (the first
    /// value ssh sees wins), then the file's.
    pub options: Vec<String>,
    /// The board's directory for the binaries.
    pub workdir: String,
    /// `auto`, or the architecture whose binaries the board runs.
    pub arch: String,
    /// Connecting may take this long.
    pub connect_timeout: Span,
    /// A trial running longer is stopped and counted lost.
    pub trial_timeout: Span,
    /// Lost trials are run again this many times; so is a bisect step
    /// whose deployment failed (infrastructure).
    pub retries: u32,
    /// Reconnecting is tried for this long.
    pub reconnect_timeout: Span,
    /// The `power_cycle` hook, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cycle: Option<String>,
    /// `bisect`'s deploy command, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<String>,
    /// How long the board may take to come back after the deploy command.
    #[serde(default = "default_boot_timeout")]
    pub boot_timeout: Span,
    /// The command printing the kernel string expected in /proc/version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_kernel: Option<String>,
    /// The VM lab's guest, when the board is one: booted before the
    /// connection, which then goes to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<xrunbench_lab::lab::vm::VmSettings>,
}

impl SshTarget {
    /// This board's settings (options and timeouts kept) pointed at a
    /// booted lab guest: root on 127.0.0.1 at the guest's port, with the
    /// lab's key and the guest's host key.
    pub fn to_guest(&self, reach: &xrunbench_lab::lab::vm::GuestSsh) -> SshTarget {
        let mut ssh = self.clone();
        ssh.destination = "root@127.0.0.1".into();
        ssh.port = Some(reach.port);
        ssh.identity = Some(reach.identity.clone());
        ssh.known_hosts = Some(reach.known_hosts.clone());
        // Only the lab's key: not one from the user's agent or config.
        ssh.options.insert(0, "IdentitiesOnly=yes".into());
        ssh
    }
}

fn default_boot_timeout() -> Span {
    DEFAULT_BOOT_TIMEOUT
}

impl SshTarget {
    /// A target with every default, for `destination` (`--target` without a
    /// `[target]` table), for trials of `duration` after `warmup`.
    pub fn with_defaults(destination: &str, duration: Span, warmup: Span) -> Result<Self, String> {
        check_destination(destination)?;
        Ok(SshTarget {
            destination: destination.to_string(),
            port: None,
            identity: None,
            known_hosts: None,
            options: Vec::new(),
            workdir: DEFAULT_WORKDIR.into(),
            arch: "auto".into(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            trial_timeout: default_trial_timeout(duration, warmup),
            retries: DEFAULT_RETRIES,
            reconnect_timeout: DEFAULT_RECONNECT_TIMEOUT,
            power_cycle: None,
            deploy: None,
            boot_timeout: DEFAULT_BOOT_TIMEOUT,
            expect_kernel: None,
            vm: None,
        })
    }

    /// The VM lab's board for `vm`: root on the guest, reached on
    /// 127.0.0.1 (port, key and known_hosts filled when it boots); trials
    /// given the time an emulated CPU may need under load.
    pub fn lab(vm: xrunbench_lab::lab::vm::VmSettings, duration: Span, warmup: Span) -> Self {
        let mut t = SshTarget::with_defaults("root@127.0.0.1", duration, warmup)
            .expect("a valid destination");
        t.trial_timeout = lab_trial_timeout(duration, warmup);
        t.vm = Some(vm);
        t
    }
}

/// Default `trial_timeout` in the VM lab: six times the trial's length and
/// two minutes (a 10 s trial took 45 s of an emulated guest's time on a
/// busy host); under TCG it is counted in QEMU's CPU time per emulated
/// CPU (`TrialClock::CpuOf`).
pub fn lab_trial_timeout(duration: Span, warmup: Span) -> Span {
    Span::from_micros(6 * (duration.as_micros() + warmup.as_micros()) + 120_000_000)
}

/// Default `[target] trial_timeout`: twice the trial's own length and a
/// minute for starting, stopping and the machine lock.
pub fn default_trial_timeout(duration: Span, warmup: Span) -> Span {
    Span::from_micros(2 * (duration.as_micros() + warmup.as_micros()) + 60_000_000)
}

/// `[target] trial_timeout` `tt`, checked: longer than a trial of
/// `duration` after `warmup`.
pub(super) fn check_trial_timeout(
    tt: Span,
    duration: Span,
    warmup: Span,
) -> Result<Span, (&'static str, String)> {
    let trial = Span::from_micros(duration.as_micros() + warmup.as_micros());
    if tt <= trial {
        return Err((
            "trial_timeout",
            format!("{tt} must be longer than a trial (warmup + duration = {trial})"),
        ));
    }
    Ok(tt)
}

/// An OpenSSH destination we pass on: not an option, no blanks or control
/// characters.
pub fn check_destination(d: &str) -> Result<(), String> {
    if d.is_empty() || d.starts_with('-') || d.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "`{d}` is not an ssh destination like root@rpi4.lab (no leading `-`, no blanks)"
        ));
    }
    Ok(())
}

/// `[target] lava = {…}` resolved: the lab as `--lava` would name it (its
/// files absolute), and the keys of `bisect`'s deploy, which runs on the
/// host before each step's jobs.
#[derive(Debug, Clone)]
pub struct LavaTarget {
    /// The server, the job file, devices, the token file.
    pub lab: crate::lava::LavaTargetArgs,
    /// `deploy`, if given.
    pub deploy: Option<String>,
    /// `expect_kernel`, if given.
    pub expect_kernel: Option<String>,
    /// `retries`: a step the lab did not finish is run again this often.
    pub retries: u32,
}

/// `[target]` with a `lava` table: the lab checked (the token never in the
/// scenario), and only the keys a lab run uses beside it; an error names
/// the key.
pub(super) fn resolve_lava(
    t: &TargetSpec,
    base_dir: &Path,
) -> Result<LavaTarget, (&'static str, String)> {
    let l = t.lava.as_ref().expect("a [target] with lava");
    let board_keys = [
        ("ssh", t.ssh.is_some()),
        ("vm", t.vm.is_some()),
        ("port", t.port.is_some()),
        ("identity", t.identity.is_some()),
        ("known_hosts", t.known_hosts.is_some()),
        ("options", !t.options.is_empty()),
        ("workdir", t.workdir.is_some()),
        ("arch", t.arch.is_some()),
        ("connect_timeout", t.connect_timeout.is_some()),
        ("trial_timeout", t.trial_timeout.is_some()),
        ("reconnect_timeout", t.reconnect_timeout.is_some()),
        ("power_cycle", t.power_cycle.is_some()),
        ("boot_timeout", t.boot_timeout.is_some()),
    ];
    refuse_given(
        &board_keys,
        "not with `lava`: the lab's job file says how its devices are reached and booted",
    )?;
    if l.token.is_some() {
        return Err((
            "lava.token",
            format!(
                "a token is never written in the scenario (it is copied into every run \
                 directory): put it in a file named by `token_file`, or in ${}",
                crate::lava::TOKEN_ENV
            ),
        ));
    }
    crate::lava::check_base_url(&l.url).map_err(|m| ("lava.url", m))?;
    let job = host_file(&l.job, base_dir).map_err(|m| ("lava.job", m))?;
    let token_file = l
        .token_file
        .as_deref()
        .map(|p| host_file(p, base_dir))
        .transpose()
        .map_err(|m| ("lava.token_file", m))?;
    let devices = l.devices.unwrap_or(1);
    if devices == 0 {
        return Err(("lava.devices", "0: expected at least 1".into()));
    }
    check_step_keys(t)?;
    Ok(LavaTarget {
        lab: crate::lava::LavaTargetArgs {
            lava: Some(l.url.trim().to_string()),
            lava_job: Some(job),
            lava_devices: devices,
            lava_token_file: token_file,
        },
        deploy: t.deploy.clone(),
        expect_kernel: t.expect_kernel.clone(),
        retries: t.retries.unwrap_or(DEFAULT_RETRIES),
    })
}

/// The first of `keys` (name, whether given) that is given, refused with
/// `why`.
fn refuse_given(keys: &[(&'static str, bool)], why: &str) -> Result<(), (&'static str, String)> {
    match keys.iter().find(|(_, given)| *given) {
        Some((key, _)) => Err((key, why.to_string())),
        None => Ok(()),
    }
}

/// The keys of `[target]` a bisect step uses on any target (`retries`,
/// `deploy`, `expect_kernel`) checked; an error names the key.
fn check_step_keys(t: &TargetSpec) -> Result<(), (&'static str, String)> {
    if let Some(r) = t.retries.filter(|r| *r > 100) {
        return Err(("retries", format!("{r} is more than 100")));
    }
    for (key, cmd) in [("deploy", &t.deploy), ("expect_kernel", &t.expect_kernel)] {
        if let Some(c) = cmd {
            check_command(c).map_err(|m| (key, m))?;
        }
    }
    Ok(())
}

/// `[target]` with its defaults; an error names the key.
pub(super) fn resolve_target(
    t: &TargetSpec,
    base_dir: &Path,
    duration: Span,
    warmup: Span,
) -> Result<SshTarget, (&'static str, String)> {
    let mut out = match (&t.ssh, &t.vm) {
        (Some(_), Some(_)) => {
            return Err((
                "vm",
                "a board is reached over ssh or booted as a vm, not both: drop one".into(),
            ))
        }
        (None, None) => {
            return Err((
                "ssh",
                "missing: name the board, e.g. ssh = \"root@rpi4.lab\", boot one: vm = { \
                 kernel = \"bzImage\" }, or name a LAVA lab: lava = { url = …, job = … }"
                    .into(),
            ))
        }
        (Some(ssh), None) => {
            SshTarget::with_defaults(ssh, duration, warmup).map_err(|m| ("ssh", m))?
        }
        (None, Some(vm)) => {
            refuse_given(
                &[
                    ("port", t.port.is_some()),
                    ("identity", t.identity.is_some()),
                    ("known_hosts", t.known_hosts.is_some()),
                ],
                "the VM lab sets it (its own port, key and host key)",
            )?;
            let settings =
                xrunbench_lab::lab::vm::VmSettings::resolve(vm, base_dir).map_err(|(k, m)| {
                    (
                        match k {
                            "kernel" => "vm.kernel",
                            "debian" => "vm.debian",
                            "rt" => "vm.rt",
                            "modules" => "vm.modules",
                            "arch" => "vm.arch",
                            "cpus" => "vm.cpus",
                            "memory" => "vm.memory",
                            "sound" => "vm.sound",
                            "accel" => "vm.accel",
                            _ => "vm.append",
                        },
                        m,
                    )
                })?;
            SshTarget::lab(settings, duration, warmup)
        }
    };
    apply_connection_keys(t, base_dir, &mut out)?;
    apply_trial_and_boot_keys(t, duration, warmup, &mut out)?;
    Ok(out)
}

/// The keys of `[target]` about reaching the board (port, key files,
/// ssh options, workdir, arch, connect timeout) checked and set on `out`;
/// an error names the key.
fn apply_connection_keys(
    t: &TargetSpec,
    base_dir: &Path,
    out: &mut SshTarget,
) -> Result<(), (&'static str, String)> {
    if t.port == Some(0) {
        return Err(("port", "must be 1 to 65535".into()));
    }
    out.port = t.port;
    out.identity = t
        .identity
        .as_deref()
        .map(|p| host_file(p, base_dir))
        .transpose()
        .map_err(|m| ("identity", m))?;
    out.known_hosts = t
        .known_hosts
        .as_deref()
        .map(|p| host_file(p, base_dir))
        .transpose()
        .map_err(|m| ("known_hosts", m))?;
    if out.known_hosts.as_deref() == Some(Path::new("/dev/null")) {
        return Err((
            "known_hosts",
            "/dev/null would accept any host key: host keys are always checked".into(),
        ));
    }
    for o in &t.options {
        check_option(o).map_err(|m| ("options", m))?;
    }
    out.options = t.options.clone();
    if let Some(w) = &t.workdir {
        check_workdir(w).map_err(|m| ("workdir", m))?;
        out.workdir = w.clone();
    }
    if let Some(a) = &t.arch {
        use xrunbench_lab::arch::Arch;
        if a != "auto" && Arch::from_name(a).is_none() {
            return Err(("arch", format!("`{a}` is not auto, {}", Arch::names())));
        }
        out.arch = a.clone();
    }
    if let Some(c) = t.connect_timeout {
        if !(1_000_000..=3_600_000_000).contains(&c.as_micros()) {
            return Err(("connect_timeout", format!("{c} is outside 1s..1h")));
        }
        out.connect_timeout = c;
    }
    Ok(())
}

/// The keys of `[target]` about running trials and bringing the board
/// back or up (trial timeout, retries, reconnect timeout, power cycle,
/// deploy, boot timeout, expected kernel) checked and set on `out`; an
/// error names the key.
fn apply_trial_and_boot_keys(
    t: &TargetSpec,
    duration: Span,
    warmup: Span,
    out: &mut SshTarget,
) -> Result<(), (&'static str, String)> {
    if let Some(tt) = t.trial_timeout {
        out.trial_timeout = check_trial_timeout(tt, duration, warmup)?;
    }
    check_step_keys(t)?;
    if let Some(r) = t.retries {
        out.retries = r;
    }
    if let Some(r) = t.reconnect_timeout {
        out.reconnect_timeout = r;
    }
    if let Some(c) = &t.power_cycle {
        if c.trim().is_empty() {
            return Err((
                "power_cycle",
                "is empty: a host command line like \"labgrid-client -p rpi4 power cycle\"".into(),
            ));
        }
        out.power_cycle = Some(c.clone());
    }
    if let Some(d) = &t.deploy {
        out.deploy = Some(d.clone());
    }
    if let Some(b) = t.boot_timeout {
        if !(1_000_000..=86_400_000_000).contains(&b.as_micros()) {
            return Err(("boot_timeout", format!("{b} is outside 1s..24h")));
        }
        out.boot_timeout = b;
    }
    if let Some(k) = &t.expect_kernel {
        out.expect_kernel = Some(k.clone());
    }
    Ok(())
}

/// A file on the host named in `[target]`: `~/…` is under $HOME, a
/// relative path under the scenario's directory; it must exist.
fn host_file(p: &Path, base_dir: &Path) -> Result<PathBuf, String> {
    let path = match p.strip_prefix("~") {
        Ok(rest) => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(rest),
            None => return Err(format!("{}: `~` needs $HOME", p.display())),
        },
        Err(_) => base_dir.join(p),
    };
    if path != Path::new("/dev/null") && !path.is_file() {
        return Err(format!("{}: no such file", path.display()));
    }
    Ok(path)
}

/// A host command of `[target]` (`deploy`, `expect_kernel`), run by
/// `sh -c`: not blank.
pub fn check_command(c: &str) -> Result<(), String> {
    if c.trim().is_empty() || c.contains('\0') {
        return Err("must be a shell command, e.g. \"./deploy-to-board.sh\"".into());
    }
    Ok(())
}

/// `[target] workdir`: one path the board's shell gets quoted, so `~` is
/// not expanded there.
pub fn check_workdir(w: &str) -> Result<(), String> {
    if w.is_empty() || w.chars().any(|c| c == '\0' || c == '\n' || c == '\r') {
        return Err(format!("`{w}` must be a non-empty path on one line"));
    }
    if w.starts_with('~') {
        return Err(format!(
            "`{w}`: `~` is not expanded; a relative path is already under the login's home"
        ));
    }
    Ok(())
}

/// ssh_config options a scenario may not set: ours (the control
/// connection, no prompts, a command per session) and those that would
/// turn host-key checking off.
const RESERVED: [&str; 10] = [
    "batchmode",
    "controlmaster",
    "controlpath",
    "controlpersist",
    "stricthostkeychecking",
    "remotecommand",
    "requesttty",
    "sessiontype",
    "stdinnull",
    "forkafterauthentication",
];

/// Checks one `Key=Value` ssh_config option from a scenario or the
/// command line: well-formed, not one we set ourselves, not one that
/// turns host-key checking off.
pub fn check_option(option: &str) -> Result<(), String> {
    let Some((key, value)) = option.split_once('=') else {
        return Err(format!(
            "`{option}` is not an ssh option like ServerAliveInterval=1"
        ));
    };
    let (key, value) = (key.trim(), value.trim());
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!("`{option}`: `{key}` is not an ssh_config keyword"));
    }
    if value.is_empty() || value.chars().any(char::is_control) {
        return Err(format!("`{option}`: the value must be one non-empty line"));
    }
    let lower = key.to_ascii_lowercase();
    if lower == "stricthostkeychecking" {
        return Err(format!(
            "`{option}`: host keys are always checked (StrictHostKeyChecking=yes)"
        ));
    }
    if RESERVED.contains(&lower.as_str()) {
        return Err(format!("`{option}`: xrunbench sets {key} itself"));
    }
    if (lower == "userknownhostsfile" || lower == "globalknownhostsfile")
        && value.split_whitespace().any(|v| v == "/dev/null")
    {
        return Err(format!(
            "`{option}`: /dev/null would accept any host key: host keys are always checked"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_that_weaken_host_keys_or_take_ours_are_refused() {
        for bad in [
            "StrictHostKeyChecking=no",
            "stricthostkeychecking=accept-new",
            "UserKnownHostsFile=/dev/null",
            "GlobalKnownHostsFile=/etc/x /dev/null",
            "ControlPath=/tmp/x",
            "BatchMode=no",
            "RemoteCommand=sh",
            "Port",
            "Po rt=2",
            "Port=",
            "Port=2\nProxyCommand=x",
        ] {
            assert!(check_option(bad).is_err(), "{bad}");
        }
        for good in [
            "ServerAliveInterval=1",
            "ProxyJump=gw.lab",
            "UserKnownHostsFile=~/.ssh/lab_hosts",
        ] {
            assert_eq!(check_option(good), Ok(()), "{good}");
        }
    }
}
