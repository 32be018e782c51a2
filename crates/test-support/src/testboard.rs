//! A test "board" reached over SSH: a private `sshd` on 127.0.0.1 with its
//! own configuration, host key, client key and `authorized_keys` in a
//! private temporary directory, started as `sshd -D -f CONFIG -E LOG` on a
//! free port, never the system's sshd. Its `known_hosts` is written from
//! its host key, so a client keeps host-key checking on
//! (`StrictHostKeyChecking=yes`) and is never prompted.
//!
//! The board is this machine: its trials change the real knobs, through
//! the real machine lock. A test cuts the link by freezing the sshd
//! process serving a connection ([`TestBoard::freeze_sessions`]: the
//! client's keep-alives then give up, as on a pulled cable), "powers the
//! board off" ([`TestBoard::power_off`]: connections frozen, nothing
//! listening) and on again ([`TestBoard::power_on`]: the frozen connections
//! are killed, as a reboot would, and sshd listens on the same port).
//! Dropping the board kills its sshd processes (never the programs they
//! started: those see their link close) and removes the directory.
//!
//! Only 127.0.0.1 is used: no network namespace (a client outside one
//! would route its private address to the real network).

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xrunbench_programs::{programs, Program};

use crate::servers::{require, spawn_error, unique_name, Error, READY_LIMIT};

/// Where Debian's openssh-server puts sshd (it must be started by its
/// absolute path, and /usr/sbin is not in every user's PATH).
pub const SSHD_PATH: &str = "/usr/sbin/sshd";

/// A private sshd on 127.0.0.1; see the module documentation.
#[derive(Debug)]
pub struct TestBoard {
    dir: PathBuf,
    port: u16,
    user: String,
    /// sshd_config lines added to ours.
    extra: String,
    child: Option<Child>,
    /// sshd processes frozen by `freeze_sessions` or `power_off`, killed
    /// by `power_on` and on drop.
    frozen: Vec<u32>,
}

impl TestBoard {
    /// Every program [`TestBoard::start`] starts, and the client that
    /// reaches the board.
    pub const PROGRAMS: &'static [Program] = &[programs::SSHD, programs::SSH_KEYGEN, programs::SSH];

    /// Creates the keys and the configuration, starts sshd and waits until
    /// it sends its banner.
    pub fn start() -> Result<TestBoard, Error> {
        TestBoard::start_with("")
    }

    /// [`TestBoard::start`] with `extra` sshd_config lines (e.g. `SetEnv
    /// XRUNBENCH_FAULT=sleep`: every program the board starts sees it).
    pub fn start_with(extra: &str) -> Result<TestBoard, Error> {
        require(&[programs::SSH_KEYGEN])?;
        if !Path::new(SSHD_PATH).is_file() {
            return Err(Error::NotInstalled {
                program: "sshd",
                package: programs::SSHD.package,
            });
        }
        let dir = std::env::temp_dir().join(unique_name("xrunbench-testboard"));
        std::fs::create_dir(&dir)
            .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(spawn_error("sshd"))?;
        let mut board = TestBoard {
            dir,
            port: 0,
            user: current_user(),
            extra: extra.to_string(),
            child: None,
            frozen: Vec::new(),
        };
        for key in ["host_ed25519", "id_ed25519"] {
            board.keygen(key)?;
        }
        let client = board.read("id_ed25519.pub")?;
        board.write("authorized_keys", &client)?;
        // sshd (as root) wants its privilege-separation directory, which
        // the package's service would create.
        if running_as_root() {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        // A port found free may be taken before sshd binds it: try another.
        let mut last = None;
        for _ in 0..5 {
            release_port(board.port);
            board.port = free_port().map_err(spawn_error("sshd"))?;
            board.write_config()?;
            match board.listen() {
                Ok(()) => {
                    board.write_known_hosts()?;
                    return Ok(board);
                }
                Err(e) if board.log().contains("Address already in use") => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(Error::NotReady {
            program: "sshd",
            name: "testboard".into(),
            why: "every port tried was taken".into(),
            log: String::new(),
        }))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read(&self, name: &str) -> Result<String, Error> {
        std::fs::read_to_string(self.path(name)).map_err(spawn_error("sshd"))
    }

    fn write(&self, name: &str, text: &str) -> Result<(), Error> {
        std::fs::write(self.path(name), text).map_err(spawn_error("sshd"))
    }

    fn keygen(&self, name: &str) -> Result<(), Error> {
        let status = Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "xrunbench-testboard",
                "-f",
            ])
            .arg(self.path(name))
            .stdin(Stdio::null())
            .status()
            .map_err(spawn_error("ssh-keygen"))?;
        if !status.success() {
            return Err(Error::Spawn {
                program: "ssh-keygen",
                source: std::io::Error::other(format!("ssh-keygen failed: {status}")),
            });
        }
        Ok(())
    }

    fn write_config(&self) -> Result<(), Error> {
        let d = self.dir.display();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nUsePAM no\nStrictModes no\n\
             PermitRootLogin prohibit-password\nPubkeyAuthentication yes\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             GSSAPIAuthentication no\nX11Forwarding no\nPrintMotd no\nPrintLastLog no\n\
             ClientAliveInterval 0\nMaxSessions 20\nMaxStartups 20\nLogLevel VERBOSE\n\
             Subsystem sftp internal-sftp\n{extra}\n",
            port = self.port,
            extra = self.extra
        );
        self.write("sshd_config", &config)
    }

    /// `known_hosts` as a client writes it for a non-default port.
    fn write_known_hosts(&self) -> Result<(), Error> {
        let line = self.known_hosts_line("host_ed25519.pub")?;
        self.write("known_hosts", &line)
    }

    fn known_hosts_line(&self, pub_key: &str) -> Result<String, Error> {
        let key = self.read(pub_key)?;
        let mut fields = key.split_whitespace();
        let (Some(kind), Some(blob)) = (fields.next(), fields.next()) else {
            return Err(spawn_error("sshd")(std::io::Error::other(format!(
                "{pub_key} is not a public key"
            ))));
        };
        Ok(format!("[127.0.0.1]:{} {kind} {blob}\n", self.port))
    }

    /// Starts sshd on `self.port` and waits for its banner.
    fn listen(&mut self) -> Result<(), Error> {
        let log = self.path("sshd.log");
        let _ = std::fs::remove_file(&log);
        let child = Command::new(SSHD_PATH)
            .arg("-D")
            .arg("-f")
            .arg(self.path("sshd_config"))
            .arg("-E")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(spawn_error("sshd"))?;
        self.child = Some(child);
        let start = Instant::now();
        while start.elapsed() < READY_LIMIT {
            // A banner alone may be another board's sshd that took the
            // same port first (a free port is free only until bound): only
            // our sshd's own log says the port is ours.
            if self.bound() && self.banner() {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    self.child = None;
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop_listener();
        Err(Error::NotReady {
            program: "sshd",
            name: format!("127.0.0.1:{}", self.port),
            why: format!("not listening after {:.1} s", start.elapsed().as_secs_f64()),
            log: self.log(),
        })
    }

    /// Whether this board's sshd says it listens on `self.port`.
    fn bound(&self) -> bool {
        self.log().contains(&format!(
            "Server listening on 127.0.0.1 port {}.",
            self.port
        ))
    }

    /// Whether sshd answers with its `SSH-2.0-` banner.
    fn banner(&self) -> bool {
        let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).is_ok() && &buf == b"SSH-"
    }

    /// The port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The ssh destination: this user at 127.0.0.1.
    pub fn destination(&self) -> String {
        format!("{}@127.0.0.1", self.user)
    }

    /// The client's private key (its public half is authorized).
    pub fn identity(&self) -> PathBuf {
        self.path("id_ed25519")
    }

    /// A known_hosts file holding the board's host key.
    pub fn known_hosts(&self) -> PathBuf {
        self.path("known_hosts")
    }

    /// A known_hosts file naming another key for this board (what a
    /// reinstalled board, or someone in between, looks like).
    pub fn wrong_known_hosts(&self) -> Result<PathBuf, Error> {
        self.keygen("other_ed25519")?;
        let line = self.known_hosts_line("other_ed25519.pub")?;
        self.write("known_hosts.wrong", &line)?;
        Ok(self.path("known_hosts.wrong"))
    }

    /// ssh_config options that reach the board with checked host keys:
    /// `Port`, `IdentityFile`, `UserKnownHostsFile`, `IdentitiesOnly`.
    pub fn ssh_options(&self) -> Vec<String> {
        vec![
            format!("Port={}", self.port),
            format!("IdentityFile={}", self.identity().display()),
            format!("UserKnownHostsFile={}", self.known_hosts().display()),
            "IdentitiesOnly=yes".into(),
        ]
    }

    /// A scenario's `[target]` table for this board: `ssh`, `port`,
    /// `identity`, `known_hosts`, and `options` (`IdentitiesOnly=yes` and
    /// `options`), then the `extra` lines (`workdir = …`, `retries = 1`…).
    pub fn target_table(&self, options: &[&str], extra: &str) -> String {
        let options: Vec<String> = std::iter::once("IdentitiesOnly=yes")
            .chain(options.iter().copied())
            .map(toml_string)
            .collect();
        format!(
            "[target]\nssh = {}\nport = {}\nidentity = {}\nknown_hosts = {}\n\
             options = [{}]\n{extra}\n",
            toml_string(&self.destination()),
            self.port,
            toml_string(&self.identity().display().to_string()),
            toml_string(&self.known_hosts().display().to_string()),
            options.join(", ")
        )
    }

    /// The `[target]` table of the runner's tests: this board with ssh
    /// keep-alives every second (a cut link is noticed in about 3 s, not
    /// never as with ssh's defaults), `workdir = <workdir>`, then the
    /// `extra` lines.
    pub fn keepalive_target(&self, workdir: &Path, extra: &str) -> String {
        self.target_table(
            &["ServerAliveInterval=1", "ServerAliveCountMax=3"],
            &format!(
                "workdir = {}\n{extra}",
                toml_string(&workdir.display().to_string())
            ),
        )
    }

    /// Its sshd_config (with `PidFile` beside it, `sshd.pid`): what an
    /// outside power switch runs sshd with to "power the board on"
    /// (`/usr/sbin/sshd -f CONFIG`, which daemonizes).
    pub fn sshd_config(&self) -> PathBuf {
        self.path("sshd_config")
    }

    /// The pid of the listening sshd.
    pub fn listener(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The sshd processes serving connections (every sshd below the
    /// listener).
    pub fn sessions(&self) -> Vec<u32> {
        let Some(root) = self.listener() else {
            return Vec::new();
        };
        descendants(root)
            .into_iter()
            .filter(|&p| comm(p).as_deref() == Some("sshd"))
            .collect()
    }

    /// Freezes (SIGSTOP) every connection's sshd: the link goes silent,
    /// as on a pulled cable; returns their pids. New connections still
    /// work.
    pub fn freeze_sessions(&mut self) -> Vec<u32> {
        let pids = self.sessions();
        for &p in &pids {
            signal(p, libc::SIGSTOP);
        }
        self.frozen.extend(&pids);
        pids
    }

    /// Cuts the power, as far as the network can tell: every connection
    /// frozen, nothing listening (a new connection is refused).
    pub fn power_off(&mut self) {
        self.freeze_sessions();
        self.stop_listener();
    }

    /// Powers the board back on: the frozen connections are killed (the
    /// programs they served see their link close), and sshd listens on the
    /// same port again.
    pub fn power_on(&mut self) -> Result<(), Error> {
        self.kill_frozen();
        if self.child.is_none() {
            self.listen()?;
        }
        Ok(())
    }

    /// sshd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }

    fn kill_frozen(&mut self) {
        for p in self.frozen.drain(..) {
            if comm(p).as_deref() == Some("sshd") {
                signal(p, libc::SIGKILL);
                signal(p, libc::SIGCONT);
            }
        }
    }

    fn stop_listener(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TestBoard {
    fn drop(&mut self) {
        // Connections first (they are found through the listener), then
        // the listener; the programs they started see their link close.
        for p in self.sessions() {
            signal(p, libc::SIGKILL);
        }
        self.kill_frozen();
        self.stop_listener();
        release_port(self.port);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2); at worst ESRCH.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Ports this process's boards hold (listening or powered off), so that
/// two boards started at once never pick the same one: a port found free
/// is free only until someone binds it, and a board keeps its port while
/// powered off.
static PORTS_HELD: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// A TCP port free on 127.0.0.1 right now and held by no board of this
/// process; it is held until [`release_port`].
pub(crate) fn free_port() -> std::io::Result<u16> {
    let mut held = PORTS_HELD.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        if !held.contains(&port) {
            held.push(port);
            return Ok(port);
        }
    }
}

/// Lets another board of this process have `port`.
pub(crate) fn release_port(port: u16) {
    PORTS_HELD
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|&p| p != port);
}

/// Whether the tests run as root (effective uid 0).
fn running_as_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot
    // fail.
    unsafe { libc::geteuid() == 0 }
}

/// The user the tests run as (who the board lets in).
fn current_user() -> String {
    if running_as_root() {
        return "root".into();
    }
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "root".into())
}

/// A process's `comm` (`sshd`).
fn comm(pid: u32) -> Option<String> {
    crate::procfs::process(pid).map(|p| p.comm)
}

/// Every process below `root`, from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let parent_of: Vec<(u32, u32)> = crate::procfs::processes()
        .unwrap_or_default()
        .iter()
        .map(|p| (p.pid, p.ppid))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parent_of {
            if parent == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// A TOML basic string.
pub fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_strings_escape_quotes_and_backslashes() {
        assert_eq!(toml_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }

    /// The board answers a client that checks its host key, and the sshd
    /// serving that client is found while the session is open.
    #[test]
    fn board_starts_and_lets_a_checked_client_in() {
        use std::io::{BufRead, BufReader};
        crate::skip_unless!(
            Path::new(SSHD_PATH).is_file(),
            "sshd not installed (openssh-server; cargo xtask test installs it)"
        );
        let board = TestBoard::start().expect("test board starts");
        let mut cmd = Command::new("ssh");
        cmd.args([
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
        ]);
        for o in board.ssh_options() {
            cmd.arg("-o").arg(o);
        }
        // The session stays open until we close its stdin.
        let mut child = cmd
            .arg(board.destination())
            .arg("echo up; cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ssh runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let sessions = board.sessions();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            line.trim(),
            "up",
            "{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            board.log()
        );
        assert!(!sessions.is_empty(), "the session's sshd is found");
        assert!(out.status.success());
    }

    /// Powered off, nothing answers on its port; powered on, sshd answers
    /// there again.
    #[test]
    fn board_powers_off_and_on_on_the_same_port() {
        crate::skip_unless!(
            Path::new(SSHD_PATH).is_file(),
            "sshd not installed (openssh-server; cargo xtask test installs it)"
        );
        let mut board = TestBoard::start().expect("test board starts");
        let port = board.port();
        assert!(board.banner());
        board.power_off();
        assert!(board.listener().is_none());
        assert!(!board.banner(), "nothing listens while it is off");
        board.power_on().expect("sshd starts again");
        assert_eq!(board.port(), port);
        assert!(board.banner());
    }
}
