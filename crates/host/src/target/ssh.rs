//! A board over SSH, through the user's own OpenSSH client: their
//! ~/.ssh/config, agent, ProxyJump and known_hosts apply.
//!
//! - **One connection per run**: a ControlMaster (`ssh -N`, our child, in
//!   its own process group so a terminal's Ctrl-C reaches only us, and
//!   SIGTERMed by the kernel if we die) whose socket is in a private
//!   temporary directory; every command of the run is a session on it
//!   (`ProxyCommand=false` keeps a session from falling back to a
//!   connection of its own when the master is gone).
//!   Keep-alives (ServerAliveInterval/CountMax, unless the user's config
//!   sets them) make a dead link show in seconds.
//! - **Host keys are always checked**: `StrictHostKeyChecking=yes` comes
//!   first on every command line (ssh takes the first value it sees) and
//!   options that would weaken it are refused; an unknown key is one line
//!   telling how to check and add it.
//! - **No scenario value reaches a remote shell**: the trial spec goes as
//!   JSON on stdin; a remote command line is made of fixed words, numbers
//!   we produced, and paths (the workdir, the board's tmpfs) single-quoted.
//! - **A lost link** ([`Target::recover`]): reconnect with backoff up to
//!   `reconnect_timeout`, stop the trial the link cut off (it restores its
//!   knobs on SIGTERM), `xrun-trial restore`, put back what a reboot
//!   removed; the session then runs the trial again.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sha2::{Digest, Sha256};
use xrunbench_schema::probe::Probe;

use super::hooks;
use super::run::{last, run_to_end, Target, Unreachable, PID_MARKER};
use xrunbench_lab::arch::Arch;
use xrunbench_lab::board::BINARIES;
use xrunbench_lab::signals;
use xrunbench_scenario::SshTarget;

/// Keep-alive interval when neither the user's ssh config nor the target's
/// options set one, s.
const ALIVE_INTERVAL: u32 = 2;
/// Keep-alives missed before the link counts as dead.
const ALIVE_COUNT: u32 = 3;
/// How long a short remote command (uname, a hash list, a kill) may take
/// on a live link: keep-alives end it sooner on a dead one.
const SHORT_COMMAND: Duration = Duration::from_secs(60);
/// How long the `power_cycle` hook may take.
const POWER_CYCLE_LIMIT: Duration = Duration::from_secs(300);
/// The hooks' log, in the run directory.
pub const HOOK_LOG: &str = "hooks.log";
/// After the link came back, how long the trial it cut off may take to
/// restore its knobs and exit after SIGTERM before it is killed, s.
const ORPHAN_GRACE_S: u32 = 20;

/// `'text'` for a POSIX shell: the only way a path reaches the board's
/// shell.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// An `-o Key=path` option: ssh expands `%` tokens in these (so `%` is
/// doubled) and splits on blanks unless quoted.
fn path_option(key: &str, path: &Path) -> Result<String> {
    let text = path
        .to_str()
        .ok_or_else(|| anyhow!("{key}: {path:?} is not UTF-8"))?;
    if text.contains('"') || text.chars().any(char::is_control) {
        bail!("{key}: {text:?} cannot be passed to ssh (a `\"` or a control character)");
    }
    Ok(format!("{key}=\"{}\"", text.replace('%', "%%")))
}

/// What `ssh -G` says about the destination once every option applies.
#[derive(Debug, Clone, Default)]
struct SshView {
    user: String,
    host: String,
    port: u16,
    /// The user's known_hosts files.
    known_hosts: Vec<String>,
    /// Whether a keep-alive interval is already set (their config or our
    /// options).
    keepalive_set: bool,
}

impl SshView {
    fn parse(text: &str) -> SshView {
        let mut v = SshView {
            port: 22,
            ..SshView::default()
        };
        for line in text.lines() {
            let Some((k, val)) = line.split_once(' ') else {
                continue;
            };
            match k {
                "user" => v.user = val.to_string(),
                "hostname" => v.host = val.to_string(),
                "port" => v.port = val.parse().unwrap_or(22),
                "userknownhostsfile" => {
                    v.known_hosts = val.split_whitespace().map(str::to_string).collect();
                }
                "serveraliveinterval" => v.keepalive_set = val.trim() != "0",
                _ => {}
            }
        }
        v
    }
}

/// The control master: an `ssh -N` child whose socket the run's commands
/// use.
struct Master {
    child: Child,
    /// What it printed on stderr (why it failed, why the link went).
    log: Arc<Mutex<Vec<String>>>,
}

impl Master {
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn last_line(&self) -> Option<String> {
        let log = self.log.lock().ok()?;
        log.iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    }
}

/// A board reached over SSH.
pub struct Ssh {
    settings: SshTarget,
    view: SshView,
    /// `-o` options for every ssh process after the fixed ones: the
    /// target's keys and options, then our defaults.
    options: Vec<String>,
    /// Private directory of the control socket (removed on drop).
    control: tempfile::TempDir,
    master: RefCell<Option<Master>>,
    /// The board's boot id when we last looked.
    boot_id: Option<String>,
    /// The host directory whose binaries were put on the board.
    deployed: Option<PathBuf>,
    /// WAV files put on the board's tmpfs: (host path, board path).
    staged: Vec<(PathBuf, String)>,
    /// Where hooks write their output (the run directory once a run has
    /// one; until then the control directory).
    log_dir: Option<PathBuf>,
    finished: bool,
    /// The VM lab's guest when the board is one: it outlives the
    /// connection (fields drop after [`Drop::drop`] closed the master).
    lab: Option<xrunbench_lab::lab::vm::Lab>,
}

impl Ssh {
    /// Keeps the VM lab's guest this connection goes to: it powers off
    /// when the target is dropped.
    pub fn hold(&mut self, lab: xrunbench_lab::lab::vm::Lab) {
        self.lab = Some(lab);
    }

    /// Opens the run's connection to the board `settings` names.
    pub fn connect(settings: &SshTarget) -> Result<Ssh> {
        let mut options = Vec::new();
        if let Some(p) = settings.port {
            options.push(format!("Port={p}"));
        }
        if let Some(i) = &settings.identity {
            options.push(path_option("IdentityFile", i)?);
        }
        if let Some(k) = &settings.known_hosts {
            options.push(path_option("UserKnownHostsFile", k)?);
        }
        for o in &settings.options {
            xrunbench_scenario::check_option(o).map_err(|m| anyhow!("ssh option {m}"))?;
            options.push(o.clone());
        }
        let view = ssh_view(&options, &settings.destination)?;
        options.push(format!(
            "ConnectTimeout={}",
            settings.connect_timeout.to_std().as_secs().max(1)
        ));
        if !view.keepalive_set {
            options.push(format!("ServerAliveInterval={ALIVE_INTERVAL}"));
            options.push(format!("ServerAliveCountMax={ALIVE_COUNT}"));
        }
        let mut ssh = Ssh {
            settings: settings.clone(),
            view,
            options,
            control: control_dir()?,
            master: RefCell::new(None),
            boot_id: None,
            deployed: None,
            staged: Vec::new(),
            log_dir: None,
            finished: false,
            lab: None,
        };
        let master = ssh.start_master().map_err(|e| anyhow!(e))?;
        *ssh.master.borrow_mut() = Some(master);
        ssh.boot_id = ssh.boot_id_now().ok();
        Ok(ssh)
    }

    fn socket(&self) -> PathBuf {
        self.control.path().join("master")
    }

    /// `ssh` with the fixed options first (they win), then ours; `master`:
    /// the control master itself (`-N`), else a session on it.
    fn ssh(&self, master: bool) -> Command {
        let mut c = Command::new("ssh");
        c.arg("-T");
        if master {
            c.arg("-N");
        }
        for o in [
            "BatchMode=yes".to_string(),
            "StrictHostKeyChecking=yes".to_string(),
            format!("ControlPath={}", self.socket().display()),
            format!("ControlMaster={}", if master { "yes" } else { "no" }),
            "ControlPersist=no".to_string(),
        ] {
            c.arg("-o").arg(o);
        }
        if !master {
            // A session whose master is gone would quietly open a second
            // connection of its own; this proxy (never run while the master
            // answers) makes it fail instead, as a lost link.
            c.arg("-o").arg("ProxyCommand=false");
        }
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        c.arg("--").arg(&self.settings.destination);
        // Not in our process group: a terminal's Ctrl-C is ours to handle
        // (close the trial's stdin), not a reason for ssh to drop the link.
        c.process_group(0);
        c
    }

    /// `script` run by the board's shell, on the control connection.
    fn remote(&self, script: &str) -> Command {
        let mut c = self.ssh(false);
        c.arg(script);
        c
    }

    /// Starts the control master and waits until its socket is there.
    fn start_master(&self) -> Result<Master, String> {
        let socket = self.socket();
        let _ = std::fs::remove_file(&socket);
        let mut cmd = self.ssh(true);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; it only sets a flag of the
        // child. If we die, the kernel SIGTERMs the master, which closes
        // the link: the board's trial sees that and restores its knobs.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start ssh (openssh-client): {e}"))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        if let Some(err) = child.stderr.take() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(mut l) = log.lock() {
                        l.push(line);
                    }
                }
            });
        }
        // Key exchange and authentication come after the TCP connect that
        // ConnectTimeout bounds; a slow board gets half a minute more.
        let deadline =
            Instant::now() + self.settings.connect_timeout.to_std() + Duration::from_secs(30);
        loop {
            if socket.exists() {
                return Ok(Master { child, log });
            }
            if let Ok(Some(status)) = child.try_wait() {
                // Let the reader take the last lines.
                std::thread::sleep(Duration::from_millis(100));
                let lines = log.lock().map(|l| l.clone()).unwrap_or_default();
                return Err(self.connect_error(&lines, &status.to_string()));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "cannot connect to {}: no session after {} s",
                    self.settings.destination,
                    (self.settings.connect_timeout.to_std() + Duration::from_secs(30)).as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One line for a failed connection, from what ssh said.
    fn connect_error(&self, log: &[String], status: &str) -> String {
        let text = log.join("\n");
        let (host, port) = (&self.view.host, self.view.port);
        let known = self
            .view
            .known_hosts
            .first()
            .cloned()
            .unwrap_or_else(|| "~/.ssh/known_hosts".into());
        let scan = if port == 22 {
            format!("ssh-keyscan {host}")
        } else {
            format!("ssh-keyscan -p {port} {host}")
        };
        let on_board =
            "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the board's console";
        if text.contains("IDENTIFICATION HAS CHANGED") || text.contains("has changed and") {
            let entry = if port == 22 {
                host.clone()
            } else {
                format!("[{host}]:{port}")
            };
            return format!(
                "refusing {host} port {port}: its host key does not match the one in {known} \
                 (a reinstalled board, or someone in between); check the new key: \
                 `{scan} | ssh-keygen -lf -` must print the fingerprint {on_board} prints; only \
                 then remove the old one (`ssh-keygen -R '{entry}' -f {known}`) and add the new"
            );
        }
        if text.contains("Host key verification failed") || text.contains("host key is known") {
            return format!(
                "refusing {host} port {port}: its host key is not in {known} and host keys are \
                 always checked; check it and add it: `{scan} > board.keys`, compare \
                 `ssh-keygen -lf board.keys` with {on_board}, then `cat board.keys >> {known}`"
            );
        }
        if text.contains("Permission denied") {
            return format!(
                "{} refused our keys ({}): xrunbench never prompts (BatchMode), so load the key \
                 into your agent (`ssh-add`), or name it with [target] identity, or install it \
                 on the board (`ssh-copy-id`)",
                self.settings.destination,
                last(text.as_bytes())
            );
        }
        let why = log
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .cloned()
            .unwrap_or_else(|| format!("ssh exited with {status}"));
        format!("cannot connect to {}: {why}", self.settings.destination)
    }

    /// Whether the control master is still up.
    fn link_up(&self) -> bool {
        let mut m = self.master.borrow_mut();
        m.as_mut().is_some_and(Master::alive) && self.socket().exists()
    }

    /// Whether the link is up and the board answers on it now (a master
    /// may still be running for a moment after its link died).
    fn link_answers(&self) -> bool {
        self.link_up()
            && self
                .exec("true", None, Duration::from_secs(15), "checking the link")
                .is_ok_and(|o| o.status.success())
    }

    /// Runs `script` on the board; fails when the link is down, or after
    /// `timeout`.
    fn exec(
        &self,
        script: &str,
        input: Option<Vec<u8>>,
        timeout: Duration,
        what: &str,
    ) -> Result<std::process::Output> {
        if !self.link_up() {
            bail!("{what}: the link to {} is down", self.describe());
        }
        run_to_end(
            self.remote(script),
            input,
            Some(timeout),
            false,
            what,
            &|| self.close_master(),
        )
    }

    /// Like [`Ssh::exec`], failing unless the script exits 0; returns its
    /// stdout.
    fn exec_ok(
        &self,
        script: &str,
        input: Option<Vec<u8>>,
        timeout: Duration,
        what: &str,
    ) -> Result<String> {
        let out = self.exec(script, input, timeout, what)?;
        if !out.status.success() {
            bail!(
                "{what} on {} failed ({}): {}",
                self.describe(),
                out.status,
                last(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn boot_id_now(&self) -> Result<String> {
        let id = self.exec_ok(
            "cat /proc/sys/kernel/random/boot_id",
            None,
            SHORT_COMMAND,
            "reading the boot id",
        )?;
        let id = id.trim().to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            bail!("the board's boot id `{id}` is not a UUID");
        }
        Ok(id)
    }

    /// The lab guest's QEMU pid, when the board is one.
    pub fn lab_pid(&self) -> Option<u32> {
        self.lab.as_ref().map(|l| l.pid())
    }

    /// Before its lab guest is frozen (QEMU's `stop`): the link closed
    /// cleanly, so that no keepalive times out against a guest that
    /// cannot answer, then the guest frozen.
    pub fn pause(&mut self) -> Result<()> {
        self.close_master();
        match self.lab.as_mut() {
            Some(lab) => lab.freeze(),
            None => Ok(()),
        }
    }

    /// Its lab guest running again and the link back; the guest must be
    /// the boot it was (a frozen guest does not reboot).
    pub fn resume(&mut self) -> Result<(), Unreachable> {
        if let Some(lab) = self.lab.as_mut() {
            lab.thaw()
                .map_err(|e| Unreachable(format!("{}: {e:#}", lab.describe)))?;
        }
        if !self.link_answers() {
            self.reconnect()?;
        }
        let boot = self
            .boot_id_now()
            .map_err(|e| Unreachable(format!("{}: {e:#}", self.describe())))?;
        match &self.boot_id {
            Some(b) if *b != boot => Err(Unreachable(format!(
                "{} booted again while it was frozen (boot id changed)",
                self.describe()
            ))),
            _ => {
                self.boot_id = Some(boot);
                Ok(())
            }
        }
    }

    /// The board's /proc/version: which kernel it booted (`bisect` checks
    /// it against the commit's).
    pub fn proc_version(&self) -> Result<String> {
        let v = self.exec_ok(
            "cat /proc/version",
            None,
            SHORT_COMMAND,
            "reading /proc/version",
        )?;
        Ok(v.trim().to_string())
    }

    /// The board's boot id when the connection was opened.
    pub fn boot_id(&self) -> Option<&str> {
        self.boot_id.as_deref()
    }

    /// The architecture whose binaries the board runs: `[target] arch`,
    /// or from `uname -m`.
    pub fn board_arch(&self) -> Result<String> {
        if self.settings.arch != "auto" {
            return Ok(self.settings.arch.clone());
        }
        let m = self.exec_ok("uname -m", None, SHORT_COMMAND, "uname -m")?;
        match Arch::from_uname_machine(&m) {
            Some(a) => Ok(a.name().to_string()),
            None => bail!(
                "{} runs `{}` (uname -m), not one of {}: if its userland is not its kernel's, \
                 set [target] arch",
                self.describe(),
                m.trim(),
                Arch::names()
            ),
        }
    }

    /// The board's directory for the binaries.
    fn bin_dir(&self) -> String {
        format!("{}/bin", self.settings.workdir.trim_end_matches('/'))
    }

    /// Copies into the workdir the board binaries of `dir` whose content
    /// differs from what is there (by SHA-256), then checks what arrived.
    /// Returns what was copied (`None`: nothing, all were up to date).
    pub fn deploy(&mut self, dir: &Path) -> Result<Option<String>> {
        let mut local = Vec::new();
        for name in BINARIES.iter().map(|b| b.name) {
            let path = dir.join(name);
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let hash = hex(&Sha256::digest(&bytes));
            local.push((name, bytes, hash));
        }
        let there = self.remote_hashes()?;
        let mut copied = Vec::new();
        for (name, bytes, hash) in &local {
            if there.as_ref().and_then(|t| t.get(*name)) == Some(hash) {
                continue;
            }
            let dst = format!("{}/{name}", self.bin_dir());
            self.put_file(bytes.clone(), &dst, "0755")?;
            copied.push(format!("{name} ({:.2} MB)", bytes.len() as f64 / 1e6));
        }
        if let Some(after) = self.remote_hashes()? {
            for (name, _, hash) in &local {
                if after.get(*name) != Some(hash) {
                    bail!(
                        "{name} on {} does not have the content we copied (SHA-256 differs)",
                        self.describe()
                    );
                }
            }
        }
        self.deployed = Some(dir.to_path_buf());
        Ok((!copied.is_empty())
            .then(|| format!("copied {} to {}", copied.join(", "), self.bin_dir())))
    }

    /// Where the board binaries go on the board.
    pub fn board_bin_dir(&self) -> String {
        self.bin_dir()
    }

    /// SHA-256 of each board binary in the workdir; `None` when the board
    /// has no `sha256sum` (then every binary is copied every run).
    fn remote_hashes(&self) -> Result<Option<BTreeMap<String, String>>> {
        let script = format!(
            "command -v sha256sum >/dev/null 2>&1 || {{ echo nosum; exit 0; }}; \
             cd {} 2>/dev/null || exit 0; \
             for f in {}; do [ -f \"$f\" ] && sha256sum \"$f\"; done; exit 0",
            quote(&self.bin_dir()),
            BINARIES
                .iter()
                .map(|b| b.name)
                .collect::<Vec<_>>()
                .join(" ")
        );
        let out = self.exec_ok(&script, None, SHORT_COMMAND, "hashing the board binaries")?;
        if out.trim() == "nosum" {
            return Ok(None);
        }
        Ok(Some(
            out.lines()
                .filter_map(|l| {
                    let (hash, name) = l.split_once(char::is_whitespace)?;
                    Some((
                        name.trim().trim_start_matches('*').to_string(),
                        hash.to_string(),
                    ))
                })
                .collect(),
        ))
    }

    /// Writes `bytes` to `dst` on the board (a temporary name, then a
    /// rename: a trial still running the old binary keeps it).
    fn put_file(&self, bytes: Vec<u8>, dst: &str, mode: &str) -> Result<()> {
        let (dir, name) = dst.rsplit_once('/').unwrap_or((".", dst));
        let dir = if dir.is_empty() { "/" } else { dir };
        let tmp = format!("{dir}/.{name}.xrunbench-new");
        let script = format!(
            "mkdir -p {d} && cat > {t} && chmod {mode} {t} && mv -f {t} {f}",
            d = quote(dir),
            t = quote(&tmp),
            f = quote(dst)
        );
        // A slow link moves ~50 kB/s; keep-alives catch a dead one sooner.
        let timeout = SHORT_COMMAND + Duration::from_secs(bytes.len() as u64 / 50_000);
        self.exec_ok(&script, Some(bytes), timeout, &format!("copying to {dst}"))
            .map(drop)
    }

    /// Sends SIGTERM to the trial the link cut off (pid `pid` in the boot
    /// we knew), waits for it to restore its knobs and exit, and SIGKILLs
    /// it if it did not (its journal is then replayed). Checked on the
    /// board: same boot, and the pid is still an `xrun-trial`.
    fn stop_orphan(&self, pid: u32, boot_id: &str) -> Result<Option<String>> {
        let script = format!(
            "p={pid}; [ \"$(cat /proc/sys/kernel/random/boot_id)\" = {boot} ] || exit 0; \
             grep -q xrun-trial /proc/$p/cmdline 2>/dev/null || exit 0; \
             kill -TERM $p; echo stopped; i=0; \
             while [ $i -lt {ORPHAN_GRACE_S} ] && grep -q xrun-trial /proc/$p/cmdline 2>/dev/null; \
             do sleep 1; i=$((i+1)); done; \
             grep -q xrun-trial /proc/$p/cmdline 2>/dev/null || exit 0; kill -KILL $p; echo killed",
            boot = quote(boot_id)
        );
        let out = self.exec_ok(
            &script,
            None,
            SHORT_COMMAND + Duration::from_secs(ORPHAN_GRACE_S.into()),
            "stopping the trial the link cut off",
        )?;
        Ok(if out.contains("killed") {
            Some(format!(
                "the trial the link cut off (pid {pid}) did not stop on SIGTERM: killed; its journal is replayed next"
            ))
        } else if out.contains("stopped") {
            Some(format!(
                "stopped the trial the link cut off (pid {pid}); it restored its knobs"
            ))
        } else {
            None
        })
    }

    /// Reconnects with backoff (1, 2, 4, 8, 8… s) for up to
    /// `reconnect_timeout`.
    fn reconnect(&mut self) -> Result<(), Unreachable> {
        self.close_master();
        let began = Instant::now();
        let limit = self.settings.reconnect_timeout.to_std();
        let mut delay = Duration::from_secs(1);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let err = match self.start_master() {
                Ok(m) => {
                    *self.master.borrow_mut() = Some(m);
                    return Ok(());
                }
                Err(e) => e,
            };
            if err.starts_with("refusing ") {
                // A host key problem does not heal by waiting.
                return Err(Unreachable(err));
            }
            if signals::stop_requested().is_some() {
                return Err(Unreachable("stopped while reconnecting".into()));
            }
            if began.elapsed() + delay > limit {
                return Err(Unreachable(format!(
                    "{} did not come back within {} s ({attempts} attempt(s); last: {err})",
                    self.describe(),
                    limit.as_secs()
                )));
            }
            xrunbench_lab::say!(
                ": {} not back yet ({err}); next attempt in {} s",
                self.describe(),
                delay.as_secs()
            );
            let wake = Instant::now() + delay;
            while Instant::now() < wake && signals::stop_requested().is_none() {
                std::thread::sleep(Duration::from_millis(100));
            }
            delay = (delay * 2).min(Duration::from_secs(8));
        }
    }

    /// Runs the `power_cycle` hook, if there is one, with the link closed:
    /// a line for people, or why the board cannot come back.
    fn power_cycle(&mut self) -> Result<Option<String>, Unreachable> {
        let Some(cmd) = self.settings.power_cycle.clone() else {
            return Ok(None);
        };
        self.close_master();
        let log = self
            .log_dir
            .clone()
            .unwrap_or_else(|| self.control.path().to_path_buf())
            .join(HOOK_LOG);
        xrunbench_lab::say!(": {} is lost: power_cycle hook: {cmd}", self.describe());
        let env = [("XRUNBENCH_TARGET", self.settings.destination.as_str())];
        let outcome = hooks::Hook {
            name: "power_cycle",
            command: &cmd,
            dir: None,
            env: &env,
            timeout: Some(POWER_CYCLE_LIMIT),
        }
        .run(&log);
        if !outcome.succeeded() {
            return Err(Unreachable(format!(
                "the power_cycle hook `{cmd}` {} (its output: {})",
                outcome.describe(),
                log.display()
            )));
        }
        Ok(Some(format!("power-cycled {} (`{cmd}`)", self.describe())))
    }

    /// Closes the control master (politely, then by signal) if it runs.
    fn close_master(&self) {
        let Some(mut m) = self.master.borrow_mut().take() else {
            return;
        };
        if m.alive() {
            let mut exit = Command::new("ssh");
            exit.arg("-o")
                .arg(format!("ControlPath={}", self.socket().display()))
                .args(["-O", "exit", "--", &self.settings.destination])
                .process_group(0);
            let _ = run_to_end(
                exit,
                None,
                Some(Duration::from_secs(5)),
                false,
                "ssh -O exit",
                &|| {},
            );
        }
        let _ = m.child.kill();
        let _ = m.child.wait();
    }

    /// `xrun-trial restore` with a time limit (it waits for the machine
    /// lock); its lines.
    fn restore_within(&self, limit: Duration) -> Result<Vec<String>> {
        let out = self.exec(
            &self.trial_script(&["restore"]),
            None,
            limit,
            "xrun-trial restore",
        )?;
        let lines = super::run::shown_lines(&out.stdout);
        match out.status.code() {
            Some(0 | 1) => Ok(lines),
            _ => bail!(
                "xrun-trial restore failed ({}): {}",
                out.status,
                last(&out.stderr)
            ),
        }
    }

    /// Puts back a WAV the board lost (a reboot clears its tmpfs).
    fn restage(&self) -> Result<Vec<String>> {
        let mut lines = Vec::new();
        for (host, there) in &self.staged {
            let out = self.exec(
                &format!("test -f {}", quote(there)),
                None,
                SHORT_COMMAND,
                "looking for the staged WAV",
            )?;
            if !out.status.success() {
                let bytes =
                    std::fs::read(host).with_context(|| format!("reading {}", host.display()))?;
                self.put_file(bytes, there, "0644")?;
                lines.push(format!("copied {} to {there} again", host.display()));
            }
        }
        Ok(lines)
    }

    /// `exec WORKDIR/bin/xrun-trial ARGS` for the board's shell.
    fn trial_script(&self, args: &[&str]) -> String {
        let mut s = format!("exec {}", quote(&format!("{}/xrun-trial", self.bin_dir())));
        for a in args {
            s.push(' ');
            s.push_str(&quote(a));
        }
        s
    }

    /// After the link came back: the cut-off trial stopped, journals
    /// replayed, binaries and WAV put back if a reboot took them.
    fn after_reconnect(&mut self, orphan: Option<u32>) -> Result<Vec<String>> {
        let mut lines = vec![format!("reconnected to {}", self.describe())];
        let boot = self.boot_id_now()?;
        match (&self.boot_id, orphan) {
            (Some(b), _) if *b != boot => {
                lines.push("the board rebooted since the last trial (boot id changed)".into());
            }
            (Some(b), Some(pid)) => lines.extend(self.stop_orphan(pid, b)?),
            _ => {}
        }
        self.boot_id = Some(boot);
        Ok(lines)
    }
}

impl Target for Ssh {
    fn describe(&self) -> String {
        if let Some(lab) = &self.lab {
            return lab.describe.clone();
        }
        if self.view.port == 22 {
            format!("ssh {}", self.settings.destination)
        } else {
            format!("ssh {} port {}", self.settings.destination, self.view.port)
        }
    }

    fn xrun_trial(&self, args: &[&str]) -> Command {
        self.remote(&self.trial_script(args))
    }

    fn trial_command(&self) -> Command {
        // `exec` keeps the shell's pid: the one we may have to signal.
        self.remote(&format!(
            "echo {} $$ >&2; {}",
            PID_MARKER.trim_end(),
            self.trial_script(&["run", "-"])
        ))
    }

    fn run_trial(
        &self,
        spec: &xrunbench_schema::TrialSpec,
        progress: &mut dyn FnMut(&str),
        stop: &dyn Fn() -> bool,
    ) -> super::run::TrialRun {
        if !self.link_up() {
            return super::run::TrialRun::Lost {
                reason: format!("the link to {} was down before it started", self.describe()),
                pid: None,
            };
        }
        super::run::run_trial_on(self, spec, progress, stop)
    }

    fn spawned_trial_pid(&self, _spawned: u32) -> Option<u32> {
        None
    }

    fn trial_timeout(&self) -> Option<Duration> {
        Some(self.settings.trial_timeout.to_std())
    }

    fn trial_clock(&self) -> super::run::TrialClock {
        match self
            .lab
            .as_ref()
            .and_then(|l| Some((l.emulated_pid()?, l.cpus())))
        {
            Some((pid, cpus)) => super::run::TrialClock::CpuOf { pid, cpus },
            None => super::run::TrialClock::Wall,
        }
    }

    fn signal_trial(&self, pid: u32, hard: bool) {
        let sig = if hard { "KILL" } else { "TERM" };
        let mut script = format!(
            "p={pid}; grep -q xrun-trial /proc/$p/cmdline 2>/dev/null || exit 0; kill -{sig} $p"
        );
        if hard {
            // SIGKILL takes effect when the trial next runs: on a loaded
            // board, a while later. Until it is gone it may hold the card
            // and its knobs, and the next attempt would start beside it;
            // so "stopped" is waited for (up to 10 s), not assumed.
            script.push_str(
                "; i=0; while [ $i -lt 200 ] && grep -q xrun-trial /proc/$p/cmdline 2>/dev/null; \
                 do sleep 0.05; i=$((i+1)); done",
            );
        }
        let _ = self.exec(&script, None, SHORT_COMMAND, "stopping the trial");
    }

    fn drop_link(&self) {
        self.close_master();
    }

    fn link_note(&self) -> Option<String> {
        // A session ends a moment before its master does when the link
        // drops: give the master that moment.
        let until = Instant::now() + Duration::from_secs(3);
        while self.link_up() {
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let m = self.master.borrow();
        let why = m
            .as_ref()
            .and_then(Master::last_line)
            .unwrap_or_else(|| "the control connection ended".into());
        Some(format!("link lost: {why}"))
    }

    fn retries(&self) -> u32 {
        self.settings.retries
    }

    fn keep_logs_in(&mut self, dir: &Path) {
        self.log_dir = Some(dir.to_path_buf());
    }

    fn recover(&mut self, orphan: Option<u32>) -> Result<Vec<String>, Unreachable> {
        let mut lines = Vec::new();
        if !self.link_answers() {
            if let Some(line) = self.power_cycle()? {
                lines.push(line);
            }
            self.reconnect()?;
            lines.extend(
                self.after_reconnect(orphan).map_err(|e| {
                    Unreachable(format!("{} came back, then: {e:#}", self.describe()))
                })?,
            );
        } else if let (Some(pid), Some(boot)) = (orphan, self.boot_id.clone()) {
            // The link held (the trial died or overran): make sure it is gone.
            if let Ok(Some(l)) = self.stop_orphan(pid, &boot) {
                lines.push(l);
            }
        }
        let who = self.describe();
        let step = |e: anyhow::Error| Unreachable(format!("after a lost trial on {who}: {e:#}"));
        lines.extend(
            self.restore_within(self.settings.trial_timeout.to_std())
                .map_err(step)?
                .into_iter()
                .filter(|l| !l.starts_with("nothing to restore")),
        );
        if let Some(dir) = self.deployed.clone() {
            lines.extend(self.deploy(&dir).map_err(step)?);
        }
        lines.extend(self.restage().map_err(step)?);
        Ok(lines)
    }

    fn finish(&mut self) -> Vec<String> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let mut lines = Vec::new();
        if !self.staged.is_empty() {
            let paths: Vec<String> = self.staged.iter().map(|(_, p)| quote(p)).collect();
            let removed = self.exec(
                &format!("rm -f {}", paths.join(" ")),
                None,
                SHORT_COMMAND,
                "removing the staged WAV",
            );
            let shown: Vec<&str> = self.staged.iter().map(|(_, p)| p.as_str()).collect();
            match removed {
                Ok(o) if o.status.success() => {
                    lines.push(format!("removed {} from the board", shown.join(", ")));
                }
                _ => lines.push(format!(
                    "could not remove {} from the board (link down): its tmpfs is cleared at its next boot",
                    shown.join(", ")
                )),
            }
        }
        self.close_master();
        lines
    }

    fn stage_audio(&mut self, host_path: &Path, probe: &Probe) -> Result<PathBuf> {
        let bytes =
            std::fs::read(host_path).with_context(|| format!("reading {}", host_path.display()))?;
        let dir = probe
            .tmpfs
            .dir
            .to_str()
            .unwrap_or("/dev/shm")
            .trim_end_matches('/');
        let need = bytes.len() as u64;
        match probe.tmpfs.free_bytes {
            None => bail!(
                "{} has no tmpfs at {dir} to put {} on",
                self.describe(),
                host_path.display()
            ),
            Some(free) if free < need + (1 << 20) => bail!(
                "{}: {} MB free on its tmpfs {dir}, {} needs {} MB",
                self.describe(),
                free >> 20,
                host_path.display(),
                (need >> 20) + 1
            ),
            Some(_) => {}
        }
        let tag = self
            .control
            .path()
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .replace(|c: char| !c.is_ascii_alphanumeric(), "")
            })
            .unwrap_or_default();
        let dst = format!("{dir}/xrunbench-{tag}-{}.wav", self.staged.len() + 1);
        self.put_file(bytes, &dst, "0644")?;
        self.staged.push((host_path.to_path_buf(), dst.clone()));
        xrunbench_lab::say!(": put {} on the board as {dst}", host_path.display());
        Ok(PathBuf::from(dst))
    }

    /// The unknown parameters the board's kernel says it passed to user
    /// space instead of taking (its log's `Unknown kernel command line
    /// parameters "…"` line); empty when it names none.
    fn unknown_parameters(&self) -> Result<Vec<String>> {
        let log = self.exec_ok("dmesg", None, SHORT_COMMAND, "reading the kernel's log")?;
        Ok(log
            .lines()
            .filter_map(|l| l.split("Unknown kernel command line parameters \"").nth(1))
            .filter_map(|rest| rest.split('"').next())
            .flat_map(|words| words.split_whitespace().map(str::to_string))
            .collect())
    }

    fn work_dir(&self, _run_dir: &Path) -> Option<PathBuf> {
        // The player's and the load's logs stay in a temporary directory
        // on the board; their reports come back in the record.
        None
    }
}

impl Drop for Ssh {
    fn drop(&mut self) {
        for line in self.finish() {
            xrunbench_lab::say!(": {line}");
        }
    }
}

/// The private directory of the control socket: under the temporary
/// directory when its path needs no quoting in an ssh option, else /tmp.
fn control_dir() -> Result<tempfile::TempDir> {
    let tmp = std::env::temp_dir();
    let plain = tmp.to_str().is_some_and(|t| {
        t.len() < 60
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    });
    let base = if plain { tmp } else { PathBuf::from("/tmp") };
    tempfile::Builder::new()
        .prefix("xrunbench-ssh-")
        .tempdir_in(&base)
        .with_context(|| format!("creating a private directory in {}", base.display()))
}

/// `ssh -G` with `options`: what the destination resolves to.
fn ssh_view(options: &[String], destination: &str) -> Result<SshView> {
    let mut c = Command::new("ssh");
    c.args(["-G", "-T"]);
    for o in options {
        c.arg("-o").arg(o);
    }
    c.arg("--").arg(destination);
    let out = run_to_end(
        c,
        None,
        Some(Duration::from_secs(30)),
        false,
        "ssh -G",
        &|| {},
    )
    .context("running ssh (Debian package openssh-client)")?;
    if !out.status.success() {
        bail!(
            "ssh does not accept the target {destination}: {}",
            last(&out.stderr)
        );
    }
    Ok(SshView::parse(&String::from_utf8_lossy(&out.stdout)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_every_byte_one_word() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$(x) `y` ;&|"), "'$(x) `y` ;&|'");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote("a'b $(c) `d` \\e \"f\"")))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a'b $(c) `d` \\e \"f\""
        );
    }

    #[test]
    fn path_options_are_quoted_and_percent_escaped() {
        assert_eq!(
            path_option("IdentityFile", Path::new("/a b/%h")).unwrap(),
            "IdentityFile=\"/a b/%%h\""
        );
        assert!(path_option("IdentityFile", Path::new("/a\"b")).is_err());
    }

    #[test]
    fn ssh_g_output_is_read() {
        let v = SshView::parse(
            "user root\nhostname 127.0.0.1\nport 2222\nserveraliveinterval 0\n\
             userknownhostsfile /tmp/kh /root/.ssh/known_hosts2\n",
        );
        assert_eq!(
            (v.user.as_str(), v.host.as_str(), v.port),
            ("root", "127.0.0.1", 2222)
        );
        assert_eq!(v.known_hosts[0], "/tmp/kh");
        assert!(!v.keepalive_set);
        assert!(SshView::parse("serveraliveinterval 1\n").keepalive_set);
    }
}
