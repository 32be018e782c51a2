//! User-space sound servers for tests and benchmarks.
//!
//! The machines that build and test xrunbench have no sound card. A JACK
//! server on its dummy backend consumes audio at the sample rate on its own
//! clock, and alsa-lib's `jack` plugin turns it into a real ALSA PCM
//! (`plug:jack`), so the player's ALSA path is exercised for real: real
//! `writei`, real blocking, real EPIPE on underrun.
//!
//! A PulseAudio server with a null sink ([`PulseServer`]) is the second
//! route: cpal's PulseAudio host plays to it. [`HintedJackPcm`] writes an
//! ALSA configuration that gives `plug:jack` a hinted name, which is how
//! cpal's ALSA host finds devices.
//!
//! The SSH test board ([`crate::testboard`]) is the other kind of test
//! service. The programs each server starts are in `xrunbench-programs`'
//! table, checked against `PATH` before anything starts.

use std::io;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use xrunbench_programs::{programs, Program};

use crate::procfs;

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
    /// The server's threads could not be made real-time.
    #[error("{program}: cannot run its thread {tid} at SCHED_FIFO {priority}: {source}")]
    Scheduling {
        /// The program.
        program: &'static str,
        /// The thread.
        tid: i32,
        /// The priority asked for.
        priority: u8,
        /// Why.
        source: io::Error,
    },
    /// The server did not answer within [`READY_LIMIT`], or exited first.
    #[error("{program} `{name}` not ready: {why}; its log: {log}")]
    NotReady {
        /// The program.
        program: &'static str,
        /// Server name.
        name: String,
        /// It exited (with its status), or how long we waited.
        why: String,
        /// What the server printed.
        log: String,
    },
}

/// How long a server may take to answer before it counts as hung. Not a
/// timing assumption: the wait ends as soon as the server answers or
/// exits. On a loaded machine a start takes what it takes (jackd took
/// over 5 s beside a guest's QEMU at nice -20), so the bound is far beyond
/// any healthy start.
pub const READY_LIMIT: Duration = Duration::from_secs(180);

/// Fails with [`Error::NotInstalled`] for the first of `programs` that is
/// not in `PATH`.
pub(crate) fn require(programs: &[Program]) -> Result<(), Error> {
    match xrunbench_programs::first_missing(programs) {
        Some(p) => Err(Error::NotInstalled {
            program: p.name,
            package: p.package,
        }),
        None => Ok(()),
    }
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
    /// Real-time priority of the server (`jackd -P`; `None`: jackd's own
    /// default, 10). libjack runs every client's process thread 5 below
    /// it, and that includes the thread of the ALSA `jack` plugin inside a
    /// player: a player writing at a higher priority on that thread's CPU
    /// can starve it (traced: `aplay` at FIFO 10 polling in a loop after an
    /// underrun, its recreated plugin thread at FIFO 5 pinned to the same
    /// CPU, for minutes).
    pub priority: Option<u8>,
}

impl Default for JackConfig {
    fn default() -> Self {
        JackConfig {
            rate: 48_000,
            period: 256,
            cpus: None,
            priority: None,
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

pub(crate) fn unique_name(prefix: &str) -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

impl JackServer {
    /// Every program [`JackServer::start`] may start.
    pub const PROGRAMS: &'static [Program] =
        &[programs::JACKD, programs::JACK_LSP, programs::TASKSET];

    /// Starts `jackd -d dummy` under a server name of its own (another jackd
    /// may hold the default name) and waits until `jack_lsp` answers.
    pub fn start(config: &JackConfig) -> Result<JackServer, Error> {
        require(Self::PROGRAMS)?;
        let name = unique_name("xrunbench");
        let log_path = std::env::temp_dir().join(format!("{name}.jackd.log"));
        let log = std::fs::File::create(&log_path).map_err(spawn_error("jackd"))?;
        let log_err = log.try_clone().map_err(spawn_error("jackd"))?;
        let mut cmd = match &config.cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus, "jackd"]);
                c
            }
            None => Command::new("jackd"),
        };
        cmd.args(["-n", &name]);
        if let Some(p) = config.priority {
            // Server options come before the driver's (`-d dummy …`).
            cmd.args(["-R", "-P", &p.to_string()]);
        }
        cmd.args(["-d", "dummy", "-r"])
            .arg(config.rate.to_string())
            .arg("-p")
            .arg(config.period.to_string())
            .env("JACK_NO_START_SERVER", "1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = cmd.spawn().map_err(spawn_error("jackd"))?;
        let mut server = JackServer {
            name,
            child: Some(child),
            log_path,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), Error> {
        let mut probe = Command::new("jack_lsp");
        probe.envs(self.env());
        wait_until_answers(&mut probe, self.child.as_mut(), Duration::from_millis(20)).map_err(
            |why| Error::NotReady {
                program: "jackd",
                name: self.name.clone(),
                why,
                log: std::fs::read_to_string(&self.log_path).unwrap_or_default(),
            },
        )
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
        if let Some(child) = self.child.take() {
            // SIGTERM lets jackd remove its sockets under /dev/shm; SIGKILL
            // only if it does not go in time.
            stop_child(child, Reach::Process);
        }
        let _ = std::fs::remove_file(&self.log_path);
    }
}

/// libjack's registry of shared-memory segments: made by the first JACK
/// process (server or client) and removed by none, so a run of JACK servers
/// leaves it behind.
pub const JACK_SHM_REGISTRY: &str = "/dev/shm/jack-shm-registry";

/// What JACK servers leave behind, noted before a batch of them runs (a
/// suite, a benchmark) and removed after it — by [`JackLeftovers::clean`]
/// or when dropped, so also on an early return — leaving the machine as it
/// was found. Not per server: while another JACK server runs, the registry
/// is its too, and removing it would cut its clients off. Hold it longer
/// than the servers (declare it first).
#[derive(Debug)]
pub struct JackLeftovers {
    /// The registry was there before (or has been removed since): leave it.
    leave: bool,
}

impl JackLeftovers {
    /// Notes whether the registry is there before any of our servers.
    pub fn note() -> JackLeftovers {
        JackLeftovers {
            leave: std::path::Path::new(JACK_SHM_REGISTRY).exists(),
        }
    }

    /// Removes the registry if it was not there before and no JACK server
    /// runs now; whether it did.
    pub fn clean(mut self) -> bool {
        self.remove()
    }

    fn remove(&mut self) -> bool {
        let removed = !self.leave
            && !jack_server_running()
            && std::fs::remove_file(JACK_SHM_REGISTRY).is_ok();
        self.leave = true;
        removed
    }
}

impl Drop for JackLeftovers {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Whether any JACK server runs on this machine (ours or not).
fn jack_server_running() -> bool {
    let Some(all) = procfs::processes() else {
        // Cannot tell: keep what may be in use.
        return true;
    };
    all.iter()
        .any(|p| matches!(p.comm.as_str(), "jackd" | "jackdbus"))
}

/// Name of the hinted `plug` PCM over JACK that [`HintedJackPcm`] defines.
pub const HINTED_JACK_PCM: &str = "xrunbench_jack";

/// An ALSA configuration file that adds a hinted `plug` PCM over `jack`
/// (cpal's ALSA host lists devices by hint only, so `plug:jack` is not
/// found by name). Removed on drop.
#[derive(Debug)]
pub struct HintedJackPcm {
    path: std::path::PathBuf,
}

impl HintedJackPcm {
    /// Writes the file.
    pub fn create() -> io::Result<HintedJackPcm> {
        let path = std::env::temp_dir().join(format!("{}.asoundrc", unique_name("xrunbench")));
        std::fs::write(
            &path,
            format!(
                "pcm.{HINTED_JACK_PCM} {{\n  type plug\n  slave.pcm \"jack\"\n  \
                 hint {{ show on description \"xrunbench: plug over JACK\" }}\n}}\n"
            ),
        )?;
        Ok(HintedJackPcm { path })
    }

    /// `ALSA_CONFIG_PATH` for a client: it replaces alsa-lib's default list,
    /// so alsa.conf (which pulls in the plugins' own files, `jack` among
    /// them) comes first, then our file.
    pub fn env(&self) -> (&'static str, String) {
        (
            "ALSA_CONFIG_PATH",
            format!("/usr/share/alsa/alsa.conf:{}", self.path.display()),
        )
    }

    /// Applies [`HintedJackPcm::env`] to a command.
    pub fn configure<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        let (k, v) = self.env();
        cmd.env(k, v)
    }
}

impl Drop for HintedJackPcm {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Settings of a PulseAudio null-sink server.
#[derive(Debug, Clone)]
pub struct PulseConfig {
    /// Sample rate of the null sink, Hz.
    pub rate: u32,
    /// CPUs the server (and its keepalive client) are pinned to.
    pub cpus: Option<String>,
    /// SCHED_FIFO priority for the server and its keepalive client, so that
    /// background load cannot starve it into underruns that are not the
    /// player's; JACK runs its process thread real-time by itself.
    ///
    /// `chrt -f` alone does not reach the server: PulseAudio resets its main
    /// thread to SCHED_OTHER at start-up (`pa_reset_priority`, then nice
    /// −11), and that thread runs the native protocol, every request for
    /// audio and every byte a client sends. Traced with `xrun-hackbench -g 4`
    /// beside, it waited up to 61 ms for a CPU and a client with 20 ms
    /// queued ran dry ("Implicit underrun" in the server's log). So once
    /// the server answers, its threads that are still SCHED_OTHER get this
    /// priority; the sink's I/O thread keeps the real-time priority
    /// PulseAudio gives it.
    pub fifo: Option<u8>,
    /// Warm-up after the keepalive stream starts: an idle null sink renders
    /// up to 2 s ahead, and stalls in that time are absorbed (CI notes).
    pub warm_up: Duration,
}

impl Default for PulseConfig {
    fn default() -> Self {
        PulseConfig {
            rate: 48_000,
            cpus: None,
            fifo: None,
            warm_up: Duration::from_millis(2500),
        }
    }
}

/// A PulseAudio server with one null sink, in a runtime directory of its
/// own, with a low-latency keepalive stream; everything is killed, reaped
/// and removed on drop.
#[derive(Debug)]
pub struct PulseServer {
    runtime_dir: std::path::PathBuf,
    server: Option<Child>,
    keepalive: Option<Child>,
    log_path: std::path::PathBuf,
}

/// `program`, under `taskset -c CPUS` and `chrt -f PRIO` when asked.
fn pinned(program: &str, cpus: &Option<String>, fifo: Option<u8>) -> Command {
    let mut argv: Vec<String> = Vec::new();
    if let Some(cpus) = cpus {
        argv.extend(["taskset".into(), "-c".into(), cpus.clone()]);
    }
    if let Some(prio) = fifo {
        argv.extend(["chrt".into(), "-f".into(), prio.to_string()]);
    }
    argv.push(program.into());
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

impl PulseServer {
    /// Every program [`PulseServer::start`] may start.
    pub const PROGRAMS: &'static [Program] = &[
        programs::PULSEAUDIO,
        programs::PACTL,
        programs::PACAT,
        programs::TASKSET,
        programs::CHRT,
    ];

    /// Starts `pulseaudio` with a null sink and the native protocol only,
    /// waits until `pactl info` answers, starts the keepalive `pacat` and
    /// waits out the warm-up.
    pub fn start(config: &PulseConfig) -> Result<PulseServer, Error> {
        require(Self::PROGRAMS)?;
        let spawn_err = spawn_error("pulseaudio");
        let files = RuntimeFiles::create("xrunbench-pulse", "pulseaudio")?;
        let mut server = PulseServer {
            runtime_dir: files.runtime_dir,
            server: None,
            keepalive: None,
            log_path: files.log_path,
        };
        let mut cmd = pinned("pulseaudio", &config.cpus, config.fifo);
        cmd.args([
            "-n",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
            // Root may run it (our CI runs as root); it then warns only.
            "--system=no",
            "-L",
        ])
        .arg(format!(
            "module-native-protocol-unix auth-cookie={}",
            server.cookie_path().display()
        ))
        .arg("-L")
        .arg(format!(
            "module-null-sink sink_name=xrunbench rate={}",
            config.rate
        ))
        .envs(server.env())
        .stdin(Stdio::null())
        .stdout(files.stdout)
        .stderr(files.stderr);
        server.server = Some(cmd.spawn().map_err(spawn_err)?);
        server.wait_ready()?;
        if let (Some(priority), Some(pid)) = (config.fifo, server.pid()) {
            make_threads_fifo("pulseaudio", pid, priority)?;
        }
        let keepalive = pinned("pacat", &config.cpus, config.fifo)
            .args([
                "-p",
                "--raw",
                "--latency-msec=10",
                "--client-name=keepalive",
            ])
            .envs(server.env())
            .stdin(Stdio::from(
                std::fs::File::open("/dev/zero").map_err(spawn_err)?,
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(spawn_error("pacat"))?;
        server.keepalive = Some(keepalive);
        std::thread::sleep(config.warm_up);
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), Error> {
        let mut probe = Command::new("pactl");
        probe.arg("info").envs(self.env());
        wait_until_answers(&mut probe, self.server.as_mut(), Duration::from_millis(20)).map_err(
            |why| Error::NotReady {
                program: "pulseaudio",
                name: self.runtime_dir.display().to_string(),
                why,
                log: std::fs::read_to_string(&self.log_path).unwrap_or_default(),
            },
        )
    }

    /// PID of the server process.
    pub fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Child::id)
    }

    /// The server's authentication cookie, in its runtime directory: by
    /// default it would be `~/.config/pulse/cookie`, which outlives the
    /// server (and the pure-Rust client cpal uses looks only there or at
    /// `$PULSE_COOKIE`, never under `$XDG_CONFIG_HOME`).
    fn cookie_path(&self) -> std::path::PathBuf {
        self.runtime_dir.join("cookie")
    }

    /// Environment a client needs to reach this server: its runtime
    /// directory (the socket is `$XDG_RUNTIME_DIR/pulse/native`), no
    /// autospawn of another one, and its cookie.
    pub fn env(&self) -> [(&'static str, String); 3] {
        [
            ("XDG_RUNTIME_DIR", self.runtime_dir.display().to_string()),
            (
                "PULSE_SERVER",
                format!("unix:{}/pulse/native", self.runtime_dir.display()),
            ),
            ("PULSE_COOKIE", self.cookie_path().display().to_string()),
        ]
    }

    /// Applies [`PulseServer::env`] to a command.
    pub fn configure<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.envs(self.env())
    }
}

/// Gives every thread of process `pid` that runs under SCHED_OTHER the
/// SCHED_FIFO `priority`; threads already real-time keep theirs.
fn make_threads_fifo(program: &'static str, pid: u32, priority: u8) -> Result<(), Error> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(spawn_error(program))?;
    for tid in tasks.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
        // SAFETY: plain syscalls on a thread id; param is valid.
        let failed = unsafe {
            if libc::sched_getscheduler(tid) & !libc::SCHED_RESET_ON_FORK != libc::SCHED_OTHER {
                continue;
            }
            let param = libc::sched_param {
                sched_priority: i32::from(priority),
            };
            libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) != 0
        };
        if failed {
            return Err(Error::Scheduling {
                program,
                tid,
                priority,
                source: io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}

/// The processes of process group `pgid`, with their command names.
fn group_members(pgid: u32) -> Vec<(u32, String)> {
    procfs::processes()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| (p.pid, p.comm))
        .collect()
}

/// Makes [`Error::Spawn`] for `program` from the I/O error.
pub(crate) fn spawn_error(program: &'static str) -> impl Fn(io::Error) -> Error + Copy {
    move |source| Error::Spawn { program, source }
}

/// A server's private runtime directory and its log, which gets its
/// stdout and stderr; both under the temporary directory, named uniquely.
struct RuntimeFiles {
    runtime_dir: std::path::PathBuf,
    log_path: std::path::PathBuf,
    stdout: std::fs::File,
    stderr: std::fs::File,
}

impl RuntimeFiles {
    fn create(prefix: &str, program: &'static str) -> Result<RuntimeFiles, Error> {
        let spawn_err = spawn_error(program);
        let name = unique_name(prefix);
        let runtime_dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&runtime_dir).map_err(spawn_err)?;
        let log_path = std::env::temp_dir().join(format!("{name}.log"));
        let stdout = std::fs::File::create(&log_path).map_err(spawn_err)?;
        let stderr = stdout.try_clone().map_err(spawn_err)?;
        Ok(RuntimeFiles {
            runtime_dir,
            log_path,
            stdout,
            stderr,
        })
    }
}

/// What [`stop_child`] signals: the child, or the process group it leads.
#[derive(Clone, Copy)]
enum Reach {
    Process,
    Group,
}

/// Stops the process group `child` leads (SIGTERM, then SIGKILL after
/// 3 s) and reaps the child.
pub(crate) fn stop_group(child: Child) {
    stop_child(child, Reach::Group);
}

/// SIGTERM, then SIGKILL if it has not gone within 3 s, to the child or
/// its whole group; the child always reaped.
fn stop_child(mut child: Child, reach: Reach) {
    let target = match reach {
        Reach::Process => child.id() as libc::pid_t,
        Reach::Group => -(child.id() as libc::pid_t),
    };
    // SAFETY: kill(2) takes two integers and touches none of our memory;
    // the pid is our own child's (or the group it leads), not yet reaped,
    // so it cannot name another process.
    unsafe {
        libc::kill(target, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) if Instant::now() > deadline => {
                // SAFETY: as above; the child is still not reaped.
                unsafe {
                    libc::kill(target, libc::SIGKILL);
                }
                let _ = child.wait();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Runs `probe` every `interval` until it exits 0 (the server answers).
/// Fails, saying why, when `server` has exited first, or after
/// [`READY_LIMIT`] (a hung server).
fn wait_until_answers(
    probe: &mut Command,
    mut server: Option<&mut Child>,
    interval: Duration,
) -> Result<(), String> {
    probe.stdout(Stdio::null()).stderr(Stdio::null());
    let start = Instant::now();
    while start.elapsed() < READY_LIMIT {
        if probe.status().is_ok_and(|s| s.success()) {
            return Ok(());
        }
        if let Some(Ok(Some(status))) = server.as_deref_mut().map(Child::try_wait) {
            return Err(format!(
                "it exited ({status}) after {:.1} s",
                start.elapsed().as_secs_f64()
            ));
        }
        std::thread::sleep(interval);
    }
    Err(format!("no answer in {READY_LIMIT:?}"))
}

impl Drop for PulseServer {
    fn drop(&mut self) {
        // The client first, so the server is not left serving a stream.
        if let Some(c) = self.keepalive.take() {
            stop_child(c, Reach::Process);
        }
        if let Some(c) = self.server.take() {
            stop_child(c, Reach::Process);
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
        let _ = std::fs::remove_file(&self.log_path);
    }
}

/// Name of the null sink [`PipeWireServer`] creates.
pub const PIPEWIRE_SINK: &str = "xrunbench";

/// A PipeWire server with WirePlumber (which links streams to sinks) and a
/// null sink, on a D-Bus session bus of its own, in a runtime directory of
/// its own; the whole process group is stopped and reaped on drop.
#[derive(Debug)]
pub struct PipeWireServer {
    runtime_dir: std::path::PathBuf,
    session: Option<Child>,
    log_path: std::path::PathBuf,
}

impl PipeWireServer {
    /// Every program [`PipeWireServer::start`] may start.
    pub const PROGRAMS: &'static [Program] = &[
        programs::DBUS_RUN_SESSION,
        programs::DBUS_DAEMON,
        programs::SH,
        programs::PIPEWIRE,
        programs::SLEEP,
        programs::WIREPLUMBER,
        programs::PW_CLI,
        programs::TASKSET,
    ];

    /// Starts `pipewire` and `wireplumber` under `dbus-run-session` (pinned
    /// to `cpus` when given), waits until `pw-cli` answers, creates the null
    /// sink and gives WirePlumber a moment to see it.
    pub fn start(cpus: Option<&str>) -> Result<PipeWireServer, Error> {
        require(Self::PROGRAMS)?;
        let spawn_err = spawn_error("pipewire");
        let files = RuntimeFiles::create("xrunbench-pw", "pipewire")?;
        let mut server = PipeWireServer {
            runtime_dir: files.runtime_dir,
            session: None,
            log_path: files.log_path,
        };
        let mut cmd = pinned("dbus-run-session", &cpus.map(str::to_string), None);
        // Its own process group: drop stops the bus, pipewire and
        // wireplumber together.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.args(["--", "sh", "-c", "pipewire & sleep 0.3; wireplumber & wait"])
            .envs(server.env())
            .stdin(Stdio::null())
            .stdout(files.stdout)
            .stderr(files.stderr);
        server.session = Some(cmd.spawn().map_err(spawn_err)?);
        server.wait_for(&["info", "0"])?;
        let sink = format!(
            "{{ factory.name=support.null-audio-sink node.name={PIPEWIRE_SINK} \
             media.class=Audio/Sink object.linger=true audio.position=[FL FR] audio.rate=48000 }}"
        );
        server.wait_for(&["create-node", "adapter", &sink])?;
        // WirePlumber links new streams to sinks it knows of.
        std::thread::sleep(Duration::from_millis(1500));
        Ok(server)
    }

    /// Gives the threads PipeWire and WirePlumber left at SCHED_OTHER SCHED_FIFO
    /// `priority`; their data-loop threads are real-time by their own choice.
    /// Their main loops connect, negotiate and link a new stream: traced
    /// with `xrun-hackbench -g 4` beside, they waited 0.5 s and 0.3 s for a
    /// CPU while a player's stream started, and the run took 2.8 s for a
    /// 2 s file.
    pub fn make_real_time(&self, priority: u8) -> Result<(), Error> {
        let Some(session) = self.session.as_ref().map(Child::id) else {
            return Ok(());
        };
        for (pid, program) in group_members(session) {
            let program = match program.as_str() {
                "pipewire" => "pipewire",
                "wireplumber" => "wireplumber",
                _ => continue,
            };
            make_threads_fifo(program, pid, priority)?;
        }
        Ok(())
    }

    fn wait_for(&mut self, args: &[&str]) -> Result<(), Error> {
        let mut probe = Command::new("pw-cli");
        probe.args(args).envs(self.env());
        wait_until_answers(&mut probe, self.session.as_mut(), Duration::from_millis(50)).map_err(
            |why| Error::NotReady {
                program: "pipewire",
                name: self.runtime_dir.display().to_string(),
                why,
                log: std::fs::read_to_string(&self.log_path).unwrap_or_default(),
            },
        )
    }

    /// Environment a client needs to reach this server.
    pub fn env(&self) -> [(&'static str, String); 1] {
        [("XDG_RUNTIME_DIR", self.runtime_dir.display().to_string())]
    }

    /// Applies [`PipeWireServer::env`] to a command.
    pub fn configure<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.envs(self.env())
    }
}

impl Drop for PipeWireServer {
    fn drop(&mut self) {
        if let Some(child) = self.session.take() {
            // The bus, pipewire and wireplumber: the group the child leads.
            stop_child(child, Reach::Group);
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
        let _ = std::fs::remove_file(&self.log_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_exits_before_it_answers_ends_the_wait_with_its_status() {
        let mut server = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let mut never = Command::new("sh");
        never.args(["-c", "exit 1"]);
        let why = wait_until_answers(&mut never, Some(&mut server), Duration::from_millis(20))
            .unwrap_err();
        assert!(why.starts_with("it exited (exit status: 3)"), "{why}");
    }

    #[test]
    fn a_server_that_answers_ends_the_wait() {
        let mut server = Command::new("sleep").arg("600").spawn().unwrap();
        let mut answers = Command::new("sh");
        answers.args(["-c", "exit 0"]);
        let answered =
            wait_until_answers(&mut answers, Some(&mut server), Duration::from_millis(20));
        server.kill().unwrap();
        server.wait().unwrap();
        assert_eq!(answered, Ok(()));
    }

    #[test]
    fn jack_servers_leave_the_registry_as_they_found_it() {
        crate::skip_unless!(
            xrunbench_programs::exists("jackd") && xrunbench_programs::exists("jack_lsp"),
            "jackd not installed (jackd2; cargo xtask test installs it)"
        );
        let path = std::path::Path::new(JACK_SHM_REGISTRY);
        // Another JACK server (the user's) shares the registry: ours must
        // not take it away from it.
        let existed = path.exists() || jack_server_running();
        let leftovers = JackLeftovers::note();
        let server = JackServer::start(&JackConfig::default()).unwrap();
        assert!(path.exists(), "jackd runs without {JACK_SHM_REGISTRY}");
        // While a server runs the registry is in use.
        assert!(!JackLeftovers { leave: false }.clean());
        assert!(path.exists());
        drop(server);
        assert_eq!(leftovers.clean(), !existed);
        assert_eq!(path.exists(), existed);
    }
}
