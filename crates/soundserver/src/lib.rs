//! User-space sound servers for tests and benchmarks.
//!
//! The machines that build and test xrunbench have no sound card. A JACK
//! server on its dummy backend consumes audio at the sample rate on its own
//! clock, and alsa-lib's `jack` plugin turns it into a real ALSA PCM
//! (`plug:jack`), so the player's ALSA path is exercised for real: real
//! `writei`, real blocking, real EPIPE on underrun.
//!
//! Host-only: this crate is a dev-dependency of the player and a dependency
//! of `xtask`, never of a board binary.

use std::io;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Errors starting a sound server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server binary is not installed.
    #[error(
        "`{program}` not found: install Debian package `{package}` (cargo xtask test installs it)"
    )]
    NotInstalled {
        /// The missing program.
        program: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The server could not be spawned.
    #[error("starting {program}: {source}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// Why.
        source: io::Error,
    },
    /// The server did not become ready in time.
    #[error("{program} `{name}` not ready after {waited:?}; its log: {log}")]
    NotReady {
        /// The program.
        program: &'static str,
        /// Server name.
        name: String,
        /// How long we waited.
        waited: Duration,
        /// What the server printed.
        log: String,
    },
}

/// ALSA PCM name that plays into the JACK server named by
/// `JACK_DEFAULT_SERVER` (format conversion by the `plug` layer: the bare
/// `jack` PCM accepts FLOAT_LE only).
pub const JACK_PCM: &str = "plug:jack";

/// Settings of a JACK dummy server.
#[derive(Debug, Clone)]
pub struct JackConfig {
    /// Sample rate, Hz.
    pub rate: u32,
    /// JACK period, frames. ALSA buffer sizes on `plug:jack` come in
    /// multiples of it.
    pub period: u32,
    /// CPUs the server is pinned to (`None`: no pinning).
    pub cpus: Option<String>,
}

impl Default for JackConfig {
    fn default() -> Self {
        JackConfig {
            rate: 48_000,
            period: 256,
            cpus: None,
        }
    }
}

/// A running JACK server on the dummy backend, killed and reaped on drop.
#[derive(Debug)]
pub struct JackServer {
    name: String,
    child: Option<Child>,
    log_path: std::path::PathBuf,
}

fn unique_name(prefix: &str) -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

fn program_exists(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

impl JackServer {
    /// Starts `jackd -d dummy` under a server name of its own (another jackd
    /// may hold the default name) and waits until `jack_lsp` answers.
    pub fn start(config: &JackConfig) -> Result<JackServer, Error> {
        for (program, package) in [("jackd", "jackd2"), ("jack_lsp", "jackd2")] {
            if !program_exists(program) {
                return Err(Error::NotInstalled { program, package });
            }
        }
        let name = unique_name("xrunbench");
        let log_path = std::env::temp_dir().join(format!("{name}.jackd.log"));
        let log = std::fs::File::create(&log_path).map_err(|source| Error::Spawn {
            program: "jackd",
            source,
        })?;
        let log_err = log.try_clone().map_err(|source| Error::Spawn {
            program: "jackd",
            source,
        })?;
        let mut cmd = match &config.cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus, "jackd"]);
                c
            }
            None => Command::new("jackd"),
        };
        cmd.args(["-n", &name, "-d", "dummy", "-r"])
            .arg(config.rate.to_string())
            .arg("-p")
            .arg(config.period.to_string())
            .env("JACK_NO_START_SERVER", "1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = cmd.spawn().map_err(|source| Error::Spawn {
            program: "jackd",
            source,
        })?;
        let mut server = JackServer {
            name,
            child: Some(child),
            log_path,
        };
        server.wait_ready(Duration::from_secs(5))?;
        Ok(server)
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), Error> {
        let start = Instant::now();
        while start.elapsed() < limit {
            let ok = Command::new("jack_lsp")
                .envs(self.env())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(Error::NotReady {
            program: "jackd",
            name: self.name.clone(),
            waited: limit,
            log: std::fs::read_to_string(&self.log_path).unwrap_or_default(),
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// PID of the server process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Environment a client needs to reach this server (and never start
    /// one of its own).
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            ("JACK_DEFAULT_SERVER", self.name.clone()),
            ("JACK_NO_START_SERVER", "1".to_string()),
        ]
    }

    /// Applies [`JackServer::env`] to a command.
    pub fn configure<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.envs(self.env())
    }
}

impl Drop for JackServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM lets jackd remove its sockets under /dev/shm; SIGKILL
            // only if it does not go in time.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        let _ = std::fs::remove_file(&self.log_path);
    }
}
