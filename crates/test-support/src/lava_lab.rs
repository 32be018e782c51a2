//! A private LAVA lab on 127.0.0.1: Debian bookworm's lava-server and
//! lava-dispatcher 2023.01, real, with a PostgreSQL cluster of its own, the
//! web server, publisher, scheduler and one worker, every one on a free
//! port of the loopback address; torn down (by pid, whole process groups)
//! on drop, even when the test that started it panics.
//!
//! Nothing is installed on the machine. The LAVA packages and the Python
//! modules they import that the machine lacks are fetched with `apt-get
//! download` and unpacked with `dpkg-deb -x` into a prefix in the suite's
//! cache (once; later labs reuse it), and run by Debian's own python3 with
//! that prefix on `PYTHONPATH` and `LD_LIBRARY_PATH`. lava-dispatcher
//! imports `guestfs` when it loads: the real Python binding and its
//! libraries are unpacked too (only imported: the jobs the lab runs need no
//! guestfs appliance). PostgreSQL is the machine's (`postgresql-15`), run
//! as its `postgres` user (initdb refuses root) on a data directory of the
//! lab's own.
//!
//! One lab at a time on a machine: `lava-run` keeps its job files under
//! `/var/lib/lava/dispatcher/tmp`, a path it does not let us move, so a
//! lab holds an exclusive lock ([`LAB_LOCK`]) while it lives, and removes
//! `/var/lib/lava` on drop when it was not there before.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xrunbench_programs::{programs, Program};

use crate::servers::{unique_name, Error};
use crate::testboard::{free_port, release_port, TestBoard};

/// The file a lab holds an exclusive `flock` on while it lives.
pub const LAB_LOCK: &str = "/run/lock/xrunbench-lava-lab.lock";

/// The API token of the lab's superuser `admin` (a test secret, known).
pub const TOKEN: &str = "xrunbench-lab-token";

/// The worker's name.
pub const WORKER: &str = "w1";

/// Where lava-run keeps its job files, whatever its worker is told.
const LAVA_RUN_DIR: &str = "/var/lib/lava";

/// PostgreSQL 15's programs, as Debian installs them.
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// Debian's python3: apt's modules and the prefix's are for it.
const PYTHON: &str = "/usr/bin/python3";

/// How long the lab's services may take to answer on a busy machine.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// The LAVA packages unpacked into the prefix.
const LAVA_PACKAGES: &[&str] = &[
    "lava-server",
    "lava-server-doc",
    "lava-common",
    "lava-dispatcher",
    "lava-dispatcher-host",
];

/// What lava-server and lava-dispatcher import (their Debian `Depends`,
/// less the system services and tools the lab does not use), unpacked
/// with everything they depend on that the machine lacks.
const PYTHON_PACKAGES: &[&str] = &[
    "gunicorn",
    "python3-aiohttp",
    "python3-celery",
    "python3-configobj",
    "python3-defusedxml",
    "python3-django",
    "python3-django-allauth",
    "python3-django-auth-ldap",
    "python3-django-environ",
    "python3-django-filters",
    "python3-django-tables2",
    "python3-djangorestframework",
    "python3-djangorestframework-extensions",
    "python3-djangorestframework-filters",
    "python3-docutils",
    "python3-eventlet",
    "python3-jinja2",
    "python3-junit.xml",
    "python3-magic",
    "python3-netifaces",
    "python3-pexpect",
    "python3-psycopg2",
    "python3-pyudev",
    "python3-requests",
    "python3-setproctitle",
    "python3-simplejson",
    "python3-tap",
    "python3-tz",
    "python3-voluptuous",
    "python3-whitenoise",
    "python3-yaml",
    "python3-zmq",
];

/// lava-dispatcher imports `guestfs` when it loads (the jobs the lab runs
/// never use it): its Python binding, unpacked without its dependencies.
const GUESTFS: &str = "python3-guestfs";

/// Packages in those dependency closures that only configure a system
/// (debconf front ends, the info index): never imported, never run.
const NOT_UNPACKED: &[&str] = &[
    "cdebconf",
    "libdebian-installer4",
    "libnewt0.52",
    "libtextwrap1",
    "install-info",
];

/// A device of the lab: its name, type and device dictionary (Jinja2,
/// extending the type's template).
#[derive(Debug, Clone)]
pub struct LabDevice {
    /// Its hostname in the lab.
    pub name: String,
    /// Its device type (`qemu`, `ssh`, …), added to the lab if new.
    pub device_type: String,
    /// The dictionary, e.g. `{% extends 'qemu.jinja2' %}` and its settings.
    pub dictionary: String,
    /// The device type's own template, for a type LAVA does not ship
    /// (written into the lab's device-types directory).
    pub type_template: Option<String>,
}

impl LabDevice {
    /// A QEMU device for x86_64 guests under TCG (KVM does not work on the
    /// machines this runs on), with restricted user networking.
    pub fn qemu(name: &str) -> LabDevice {
        LabDevice {
            name: name.to_string(),
            device_type: "qemu".to_string(),
            dictionary: "{% extends 'qemu.jinja2' %}\n\
                         {% set no_kvm = True %}\n\
                         {% set netdevice = 'user,restrict=on' %}\n\
                         {% set memory = 512 %}\n\
                         {% set extra_options = ['-accel tcg,thread=multi', '-smp 1'] %}\n"
                .to_string(),
            type_template: None,
        }
    }

    /// A QEMU device for arm64 guests, of the device type `qemu-arm64`: as
    /// KernelCI's qemu-arm64 devices, LAVA's `qemu` template with `arch`
    /// arm64 (`qemu-system-aarch64 -machine virt -cpu cortex-a57`), under
    /// TCG on this x86 worker, with restricted user networking.
    pub fn qemu_arm64(name: &str) -> LabDevice {
        LabDevice {
            name: name.to_string(),
            device_type: "qemu-arm64".to_string(),
            dictionary: "{% extends 'qemu-arm64.jinja2' %}\n\
                         {% set netdevice = 'user,restrict=on' %}\n\
                         {% set memory = 1024 %}\n\
                         {% set extra_options = ['-accel tcg,thread=multi', '-smp 2'] %}\n"
                .to_string(),
            type_template: Some(
                "{# device_type: qemu-arm64 #}\n\
                 {% extends 'qemu.jinja2' %}\n\
                 {% set arch = 'arm64' %}\n"
                    .to_string(),
            ),
        }
    }

    /// The SSH test board as a device of type `ssh`, its host key checked
    /// against the board's own `known_hosts`.
    pub fn ssh(name: &str, board: &TestBoard) -> LabDevice {
        LabDevice::ssh_checked_against(name, board, &board.known_hosts())
    }

    /// [`LabDevice::ssh`], its host key checked against `known_hosts`
    /// (a wrong one: the device a job must never reach).
    ///
    /// Two ways in, both checking the host key:
    ///
    /// - `ssh.jinja2`'s deploy and boot `ssh` methods (a job with a
    ///   lava-test-shell definition, as `cargo xtask lava` writes). Their
    ///   ssh and scp get `-o UserKnownHostsFile=/dev/null -o
    ///   StrictHostKeyChecking=no` appended by lava-dispatcher, after the
    ///   device's options, and `base.jinja2` sets `ssh_options` whatever
    ///   the dictionary says; ssh takes the first value it sees of an
    ///   option. So the dictionary replaces `ssh.jinja2`'s body (the same
    ///   methods) with options of ours first.
    /// - a console: the `minimal` boot method over `connection_command`,
    ///   an ssh command line entirely ours. `run --lava` needs this one:
    ///   its job's only test is `interactive`, and LAVA 2023.01's ssh
    ///   deploy wants a test with a shell (it fails at parse time with
    ///   `KeyError: 'deployment_data'`, and its validation says "Scp
    ///   overlay needs a test action"), while the ssh boot needs that
    ///   deploy's overlay.
    ///
    /// The console is a shell already logged in: no kernel's start message
    /// to wait for (`kernel_start_message` empty), only the prompt.
    /// `LogLevel=ERROR` (before base's `FATAL`) so that a refused key is
    /// said in the job's log.
    pub fn ssh_checked_against(name: &str, board: &TestBoard, known_hosts: &Path) -> LabDevice {
        let destination = board.destination();
        let user = destination.split('@').next().unwrap_or("root");
        let ours = [
            "StrictHostKeyChecking=yes".to_string(),
            format!("UserKnownHostsFile={}", known_hosts.display()),
            "BatchMode=yes".to_string(),
            "LogLevel=ERROR".to_string(),
            "PasswordAuthentication=no".to_string(),
        ];
        let listed: String = ours
            .iter()
            .map(|o| format!("          - '-o'\n          - '{o}'\n"))
            .collect();
        let console = format!(
            "ssh {} -o IdentitiesOnly=yes -i {key} -p {port} -t {destination}",
            ours.iter()
                .map(|o| format!("-o {o}"))
                .collect::<Vec<_>>()
                .join(" "),
            key = board.identity().display(),
            port = board.port(),
        );
        LabDevice {
            name: name.to_string(),
            device_type: "ssh".to_string(),
            type_template: None,
            dictionary: format!(
                "{{% extends 'ssh.jinja2' %}}\n\
                 {{% set connection_command = '{console}' %}}\n\
                 {{% set kernel_start_message = '' %}}\n\
                 {{% block body %}}\n\
                 actions:\n\
                 \x20 deploy:\n\
                 \x20   connections:\n\
                 \x20     serial:\n\
                 \x20   methods:\n\
                 \x20     ssh:\n\
                 \x20       options:\n\
                 {listed}\
                 {{{{ ssh_options }}}}\n\
                 \x20       host: \"127.0.0.1\"\n\
                 \x20       port: {port}\n\
                 \x20       user: \"{user}\"\n\
                 \x20       identity_file: \"{key}\"\n\
                 \x20 boot:\n\
                 \x20   connections:\n\
                 \x20     serial:\n\
                 \x20   methods:\n\
                 \x20     ssh:\n\
                 \x20     minimal:\n\
                 {{% endblock body %}}\n",
                port = board.port(),
                key = board.identity().display(),
            ),
        }
    }
}

/// A running private LAVA lab; see the module documentation.
#[derive(Debug)]
pub struct LavaLab {
    dir: PathBuf,
    prefix: PathBuf,
    http: u16,
    ws: u16,
    events: u16,
    pg_port: u16,
    services: Vec<(&'static str, Child)>,
    postgres: bool,
    made_lava_run_dir: bool,
    _lock: File,
}

impl LavaLab {
    /// The programs a lab starts beside the unpacked ones (PostgreSQL's
    /// are started by their path under /usr/lib/postgresql; their package,
    /// postgresql-15, is in the suite's install list).
    pub const PROGRAMS: &'static [Program] = &[
        programs::APT_CACHE,
        programs::DPKG_DEB,
        programs::LDD,
        programs::CHOWN,
        programs::RUNUSER,
        programs::PYTHON3,
        programs::QEMU_X86,
    ];

    /// Unpacks the lab's software (once per cache), starts the database and
    /// the services, adds `devices` (each Good, on the one worker) and
    /// waits until the worker is online.
    pub fn start(devices: &[LabDevice]) -> Result<LavaLab, Error> {
        // A port found free may be taken before a service binds it: then
        // the whole lab again, on other ports (the failed one torn down).
        let mut last = None;
        for _ in 0..3 {
            match LavaLab::start_once(devices) {
                Ok(lab) => return Ok(lab),
                Err((e, true)) => last = Some(e),
                Err((e, false)) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::NotReady {
            program: "lava lab",
            name: "ports".into(),
            why: "no free ports".into(),
            log: String::new(),
        }))
    }

    /// One attempt at [`LavaLab::start`]; with the error, whether a port
    /// was taken under it (worth another attempt).
    fn start_once(devices: &[LabDevice]) -> Result<LavaLab, (Error, bool)> {
        let lock = take_lab_lock().map_err(|e| (e, false))?;
        let prefix = prefix().map_err(|e| (e, false))?;
        let dir = std::env::temp_dir().join(unique_name("xrunbench-lava-lab"));
        std::fs::create_dir_all(dir.join("log")).map_err(|e| (io("lava lab")(e), false))?;
        let mut lab = LavaLab {
            dir,
            prefix,
            http: 0,
            ws: 0,
            events: 0,
            pg_port: 0,
            services: Vec::new(),
            postgres: false,
            made_lava_run_dir: !Path::new(LAVA_RUN_DIR).exists(),
            _lock: lock,
        };
        let started = lab.bring_up(devices);
        match started {
            Ok(()) => Ok(lab),
            Err(e) => {
                let taken = lab.a_port_was_taken();
                Err((e, taken))
            }
        }
    }

    /// Ports, database, configuration, services.
    fn bring_up(&mut self, devices: &[LabDevice]) -> Result<(), Error> {
        for port in [
            &mut self.http,
            &mut self.ws,
            &mut self.events,
            &mut self.pg_port,
        ] {
            *port = free_port().map_err(io("lava lab"))?;
        }
        self.start_postgres()?;
        self.configure(devices)?;
        self.start_services()
    }

    /// Whether a service's log says its address was in use.
    fn a_port_was_taken(&self) -> bool {
        let logs = [self.dir.join("pg/log"), self.dir.join("log")];
        let mut text = std::fs::read_to_string(&logs[0]).unwrap_or_default();
        if let Ok(entries) = std::fs::read_dir(&logs[1]) {
            for e in entries.flatten() {
                text.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        text.contains("Address already in use") || text.contains("Connection in use")
    }

    /// The server's base URL, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.http)
    }

    /// `lava-server manage ARGS`: its stdout, or the failure with its output.
    pub fn manage(&self, args: &[&str]) -> Result<String, Error> {
        let out = self
            .python(&self.prefix.join("usr/bin/lava-server"))
            .arg("manage")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .map_err(io("lava-server"))?;
        if !out.status.success() {
            return Err(Error::NotReady {
                program: "lava-server",
                name: format!("manage {}", args.join(" ")),
                why: format!("it failed ({})", out.status),
                log: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Sets a device's health (`GOOD`, `MAINTENANCE`, `RETIRED`, …): how a
    /// test takes a device offline mid-run.
    pub fn set_health(&self, device: &str, health: &str) -> Result<(), Error> {
        self.manage(&["devices", "update", "--health", health, device])
            .map(drop)
    }

    /// The log of the service `name` (`gunicorn`, `publisher`, `scheduler`,
    /// `worker`), for a failing test's message.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join("log").join(format!("{name}.log")))
            .unwrap_or_default()
    }

    /// Debian's python3 running `script` with the prefix and the lab's
    /// settings in its environment.
    fn python(&self, script: &Path) -> Command {
        let mut cmd = Command::new(PYTHON);
        cmd.arg(script).envs(self.env()).stdin(Stdio::null());
        cmd
    }

    /// The environment lava-server's settings (`lava_server.settings.prod`)
    /// are read from, and what finds the prefix's modules and libraries.
    fn env(&self) -> Vec<(String, String)> {
        let p = self.prefix.display();
        let d = self.dir.display();
        let yaml = |k: &str, v: String| (format!("LAVA_YAML_SETTINGS_{k}"), v);
        vec![
            // Debian's python first: a pyenv python3 has none of apt's modules.
            (
                "PATH".into(),
                format!("/usr/bin:/bin:/usr/sbin:/sbin:{p}/usr/bin"),
            ),
            (
                "PYTHONPATH".into(),
                format!("{p}/usr/lib/python3/dist-packages"),
            ),
            (
                "LD_LIBRARY_PATH".into(),
                format!("{p}/usr/lib/x86_64-linux-gnu:{p}/lib/x86_64-linux-gnu"),
            ),
            (
                "DATABASE_URL".into(),
                format!("postgresql://lava@127.0.0.1:{}/lavaserver", self.pg_port),
            ),
            ("SECRET_KEY".into(), unique_name("xrunbench-lab-secret")),
            ("ALLOWED_HOSTS".into(), "127.0.0.1,localhost".into()),
            yaml("DEVICES_PATH", format!("{d}/devices")),
            yaml(
                "DEVICE_TYPES_PATHS",
                format!(
                    "[\"{d}/device-types\", \
                     \"{p}/etc/lava-server/dispatcher-config/device-types\", \
                     \"{p}/usr/share/lava-server/device-types\"]"
                ),
            ),
            yaml("HEALTH_CHECKS_PATH", format!("{d}/health-checks")),
            yaml("DISPATCHER_CONFIG_PATH", format!("{d}/dispatcher.d")),
            yaml("MEDIA_ROOT", format!("{d}/media")),
            yaml("STATIC_ROOT", format!("{p}/usr/share/lava-server/static")),
            yaml("DJANGO_LOGFILE", format!("{d}/log/django.log")),
            yaml("EVENT_NOTIFICATION", "true".into()),
            yaml(
                "INTERNAL_EVENT_SOCKET",
                format!("ipc://{d}/internal.events"),
            ),
            yaml("EVENT_SOCKET", format!("tcp://127.0.0.1:{}", self.events)),
        ]
    }

    /// initdb (as `postgres`: it refuses root), a server on 127.0.0.1
    /// only, and the lab's database.
    fn start_postgres(&mut self) -> Result<(), Error> {
        let pg = self.dir.join("pg");
        std::fs::create_dir(&pg).map_err(io("postgres"))?;
        chown_to_postgres(&pg)?;
        // The postgres user must reach the data directory.
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755))
            .map_err(io("postgres"))?;
        let data = pg.join("data");
        let data_s = data.display().to_string();
        run_as_postgres(&[
            &format!("{PG_BIN}/initdb"),
            "-D",
            &data_s,
            "-U",
            "lava",
            "--auth=trust",
            "-E",
            "UTF8",
        ])?;
        let opts = format!("-h 127.0.0.1 -p {} -k {}", self.pg_port, pg.display());
        let log = pg.join("log").display().to_string();
        run_as_postgres(&[
            &format!("{PG_BIN}/pg_ctl"),
            "-D",
            &data_s,
            "-l",
            &log,
            "-o",
            &opts,
            "-w",
            "start",
        ])?;
        self.postgres = true;
        let port = self.pg_port.to_string();
        checked(
            Command::new(format!("{PG_BIN}/createdb")).args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "lava",
                "lavaserver",
            ]),
            "createdb",
        )
        .map(drop)
    }

    /// The schema, the superuser and its token, the worker, the devices.
    fn configure(&mut self, devices: &[LabDevice]) -> Result<(), Error> {
        for sub in [
            "devices",
            "device-types",
            "health-checks",
            "dispatcher.d",
            "media",
            "worker",
        ] {
            std::fs::create_dir_all(self.dir.join(sub)).map_err(io("lava lab"))?;
        }
        self.manage(&["migrate", "--no-input"])?;
        self.manage(&["users", "add", "--superuser", "--staff", "admin"])?;
        self.manage(&["tokens", "add", "--user", "admin", "--secret", TOKEN])?;
        // `workers add` prints the worker's own token, as `Token: SECRET`.
        let added = self.manage(&["workers", "add", WORKER])?;
        let worker_token = added
            .lines()
            .find_map(|l| l.trim().strip_prefix("Token: "))
            .ok_or_else(|| Error::NotReady {
                program: "lava-server",
                name: "workers add".into(),
                why: "it named no token".into(),
                log: "no `Token: ` line in its output".into(),
            })?;
        write_secret(&self.dir.join("worker/token.in"), worker_token)?;
        let mut types: Vec<&str> = Vec::new();
        for d in devices {
            if !types.contains(&d.device_type.as_str()) {
                if let Some(template) = &d.type_template {
                    let file = self
                        .dir
                        .join("device-types")
                        .join(format!("{}.jinja2", d.device_type));
                    std::fs::write(&file, template).map_err(io("lava lab"))?;
                }
                self.manage(&["device-types", "add", &d.device_type])?;
                types.push(&d.device_type);
            }
            let dict = self.dir.join("devices").join(format!("{}.jinja2", d.name));
            std::fs::write(&dict, &d.dictionary).map_err(io("lava lab"))?;
            self.manage(&[
                "devices",
                "add",
                "--device-type",
                &d.device_type,
                "--worker",
                WORKER,
                &d.name,
            ])?;
            self.set_health(&d.name, "GOOD")?;
        }
        Ok(())
    }

    /// The web server, publisher, scheduler and worker, each in its own
    /// process group; waits until the worker is online.
    fn start_services(&mut self) -> Result<(), Error> {
        let d = self.dir.display().to_string();
        let bin = self.prefix.join("usr/bin");
        let http = format!("127.0.0.1:{}", self.http);
        let mut gunicorn = Command::new(PYTHON);
        gunicorn.envs(self.env()).args([
            "-m",
            "gunicorn",
            "lava_server.wsgi",
            "--bind",
            &http,
            "--worker-class",
            "eventlet",
            "--workers",
            "2",
            "--log-file",
            &format!("{d}/log/gunicorn.log"),
        ]);
        self.spawn("gunicorn", gunicorn)?;
        let mut publisher = self.python(&bin.join("lava-server"));
        publisher.args(["manage", "lava-publisher", "--host", "127.0.0.1"]);
        publisher.args(["--port", &self.ws.to_string(), "-u", "root", "-g", "root"]);
        publisher.args(["-o", &format!("{d}/log/publisher.log")]);
        self.spawn("publisher", publisher)?;
        let mut scheduler = self.python(&bin.join("lava-server"));
        let events = format!("tcp://127.0.0.1:{}", self.events);
        scheduler.args(["manage", "lava-scheduler", "--event-url", &events]);
        scheduler.args([
            "-u",
            "root",
            "-g",
            "root",
            "-o",
            &format!("{d}/log/scheduler.log"),
        ]);
        self.spawn("scheduler", scheduler)?;
        self.wait_http("api/v0.2/workers/")?;
        let mut worker = self.python(&bin.join("lava-worker"));
        worker.args(["--name", WORKER, "--url", &self.url()]);
        worker.args(["--ws-url", &format!("http://127.0.0.1:{}/ws/", self.ws)]);
        worker.args(["--token-file", &format!("{d}/worker/token.in")]);
        worker.args(["--worker-dir", &format!("{d}/worker")]);
        worker.args(["--log-file", &format!("{d}/log/worker.log")]);
        self.spawn("worker", worker)?;
        self.wait_worker_online()
    }

    fn spawn(&mut self, name: &'static str, mut cmd: Command) -> Result<(), Error> {
        let out = File::create(self.dir.join("log").join(format!("{name}.out")))
            .map_err(io("lava lab"))?;
        let err = out.try_clone().map_err(io("lava lab"))?;
        let child = cmd
            .current_dir(&self.dir)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io(name))?;
        self.services.push((name, child));
        Ok(())
    }

    /// Waits until `GET path` answers 200 (the web server is up and reads
    /// the database).
    fn wait_http(&self, path: &str) -> Result<(), Error> {
        let url = format!("{}{path}", self.url());
        let ok = poll(READY_WITHIN, || http_get(&url).is_some());
        if ok {
            return Ok(());
        }
        Err(self.not_ready("gunicorn"))
    }

    /// Waits until the server says the worker is online.
    fn wait_worker_online(&self) -> Result<(), Error> {
        let url = format!("{}api/v0.2/workers/{WORKER}/", self.url());
        let ok = poll(READY_WITHIN, || {
            http_get(&url).is_some_and(|body| body.contains("\"state\":\"Online\""))
        });
        if ok {
            return Ok(());
        }
        Err(self.not_ready("worker"))
    }

    fn not_ready(&self, name: &'static str) -> Error {
        Error::NotReady {
            program: name,
            name: self.url(),
            why: format!("no answer in {READY_WITHIN:?}"),
            log: self.log(name),
        }
    }
}

impl Drop for LavaLab {
    fn drop(&mut self) {
        // The worker first, so that no job is left running on a device.
        while let Some((_, child)) = self.services.pop() {
            crate::servers::stop_group(child);
        }
        if self.postgres {
            let data = self.dir.join("pg/data").display().to_string();
            let _ = run_as_postgres(&[
                &format!("{PG_BIN}/pg_ctl"),
                "-D",
                &data,
                "-m",
                "immediate",
                "-w",
                "stop",
            ]);
        }
        for port in [self.http, self.ws, self.events, self.pg_port] {
            release_port(port);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if self.made_lava_run_dir {
            let _ = std::fs::remove_dir_all(LAVA_RUN_DIR);
        }
    }
}

/// The lab's lock, taken without waiting: a second lab on the machine
/// would share lava-run's directory.
fn take_lab_lock() -> Result<File, Error> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LAB_LOCK)
        .map_err(io("lava lab"))?;
    let deadline = Instant::now() + READY_WITHIN * 10;
    loop {
        // SAFETY: flock(2) on a descriptor we own, open for the call.
        let r = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        if r == 0 {
            return Ok(file);
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady {
                program: "lava lab",
                name: LAB_LOCK.into(),
                why: format!("the lock still held after {:?}", READY_WITHIN * 10),
                log: "another lab holds the lock".into(),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The prefix with LAVA and what it imports that the machine lacks, in
/// the suite's cache. What the machine lacks changes (the suite installs
/// some of the same modules, a purge removes them), so each start unpacks
/// whatever is missing now and the prefix has not got yet (the list of
/// unpacked packages is kept beside it).
fn prefix() -> Result<PathBuf, Error> {
    let dir = xrunbench_paths::cache_dir().join("lava-lab");
    let prefix = dir.join("prefix");
    let list = dir.join("unpacked");
    let mut unpacked: Vec<String> = std::fs::read_to_string(&list)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    let mut wanted: Vec<String> = missing_closure(PYTHON_PACKAGES)?;
    wanted.extend(LAVA_PACKAGES.iter().map(|s| s.to_string()));
    // guestfs's binding alone, not its closure (an appliance builder and
    // ~120 packages the import never loads): the libraries its module
    // links are added below, one by one.
    wanted.push(GUESTFS.to_string());
    wanted.retain(|p| !unpacked.contains(p));
    let debs = dir.join("debs");
    // guestfs's libraries link more than Python modules do: then the
    // packages of the libraries still missing, until none is.
    for _ in 0..5 {
        if wanted.is_empty() {
            wanted = packages_of_libraries(&missing_libraries(&prefix))?;
            wanted.retain(|p| !unpacked.contains(p));
            if wanted.is_empty() {
                break;
            }
        }
        let _ = std::fs::remove_dir_all(&debs);
        std::fs::create_dir_all(&debs).map_err(io("lava lab"))?;
        download(&debs, &wanted)?;
        unpack_all(&debs, &prefix)?;
        unpacked.append(&mut wanted);
    }
    let _ = std::fs::remove_dir_all(&debs);
    drop_dangling_links(&prefix);
    std::fs::write(&list, unpacked.join("\n") + "\n").map_err(io("lava lab"))?;
    Ok(prefix)
}

/// The packages in the dependency closure of `roots` that the machine
/// lacks (and [`NOT_UNPACKED`] does not exclude).
fn missing_closure(roots: &[&str]) -> Result<Vec<String>, Error> {
    let out = checked(
        Command::new("apt-cache")
            .args(["depends", "--recurse", "--no-recommends", "--no-suggests"])
            .args([
                "--no-conflicts",
                "--no-breaks",
                "--no-replaces",
                "--no-enhances",
            ])
            .arg("--no-pre-depends")
            .args(roots),
        "apt-cache depends",
    )?;
    let installed = checked(
        Command::new("dpkg-query").args(["-W", "-f", "${Package} ${Status}\\n"]),
        "dpkg-query",
    )?;
    let installed: Vec<&str> = installed
        .lines()
        .filter(|l| l.ends_with(" installed"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let mut out: Vec<String> = out
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('<'))
        .filter(|l| !installed.contains(l) && !NOT_UNPACKED.contains(l))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

fn download(dir: &Path, packages: &[String]) -> Result<(), Error> {
    checked(
        Command::new("apt-get")
            .args(["-qq", "download"])
            .args(packages)
            .current_dir(dir),
        "apt-get download",
    )
    .map(drop)
}

fn unpack_all(debs: &Path, prefix: &Path) -> Result<(), Error> {
    for entry in std::fs::read_dir(debs).map_err(io("lava lab"))? {
        let deb = entry.map_err(io("lava lab"))?.path();
        checked(
            Command::new("dpkg-deb").arg("-x").arg(&deb).arg(prefix),
            "dpkg-deb -x",
        )?;
    }
    Ok(())
}

/// Shared libraries the prefix's libraries and Python extensions need
/// that neither the prefix nor the machine has.
fn missing_libraries(prefix: &Path) -> Vec<String> {
    let dirs = [
        prefix.join("usr/lib/x86_64-linux-gnu"),
        prefix.join("lib/x86_64-linux-gnu"),
        prefix.join("usr/lib/python3/dist-packages"),
    ];
    let path = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let mut missing = Vec::new();
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            if !name.contains(".so") || p.is_symlink() {
                continue;
            }
            let Ok(out) = Command::new("ldd")
                .arg(&p)
                .env("LD_LIBRARY_PATH", &path)
                .output()
            else {
                continue;
            };
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some((lib, _)) = line.trim().split_once(" => not found") {
                    if !missing.iter().any(|m: &String| m == lib) {
                        missing.push(lib.to_string());
                    }
                }
            }
        }
    }
    missing
}

/// The Debian packages that ship `libs` (by Debian's naming: the soname
/// without `.so`, its version appended, as `libfuse.so.2` → `libfuse2`),
/// checked with apt-cache.
fn packages_of_libraries(libs: &[String]) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    for lib in libs {
        let (stem, version) = lib.split_once(".so.").unwrap_or((lib.as_str(), ""));
        let candidates = [
            format!("{stem}{version}"),
            format!("{stem}-{version}"),
            format!("{stem}{version}t64"),
        ];
        let found = candidates.into_iter().find(|c| {
            Command::new("apt-cache")
                .args(["show", "--no-all-versions", c])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        match found {
            Some(p) => out.push(p),
            None => {
                return Err(Error::NotReady {
                    program: "lava lab",
                    name: lib.clone(),
                    why: "not packaged".into(),
                    log: "no Debian package found for this library".into(),
                })
            }
        }
    }
    Ok(out)
}

/// Removes links into directories of packages the machine has and the
/// prefix does not (jquery, sphinx's JavaScript): gunicorn's static-file
/// scan fails on a dangling link.
fn drop_dangling_links(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_symlink() {
            if !p.exists() {
                let _ = std::fs::remove_file(&p);
            }
        } else if p.is_dir() {
            drop_dangling_links(&p);
        }
    }
}

/// `chown postgres DIR`.
fn chown_to_postgres(dir: &Path) -> Result<(), Error> {
    checked(Command::new("chown").arg("postgres:").arg(dir), "chown").map(drop)
}

fn run_as_postgres(args: &[&str]) -> Result<String, Error> {
    checked(
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .args(args)
            .current_dir("/"),
        args[0],
    )
}

fn write_secret(path: &Path, secret: &str) -> Result<(), Error> {
    let mut f = File::options()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(io("lava lab"))?;
    f.write_all(secret.as_bytes()).map_err(io("lava lab"))
}

/// Runs `cmd`; its stdout, or [`Error::NotReady`] with its output.
fn checked(cmd: &mut Command, what: &str) -> Result<String, Error> {
    let out = cmd.stdin(Stdio::null()).output().map_err(io("lava lab"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(Error::NotReady {
        program: "lava lab",
        name: what.to_string(),
        why: format!("it failed ({})", out.status),
        log: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    })
}

fn io(program: &'static str) -> impl Fn(std::io::Error) -> Error + Copy {
    move |source| Error::Spawn { program, source }
}

fn poll(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    ok()
}

/// A plain HTTP/1.0 GET on 127.0.0.1: the body when the status is 200.
fn http_get(url: &str) -> Option<String> {
    use std::io::Read;
    let rest = url.strip_prefix("http://")?;
    let (addr, path) = rest.split_once('/')?;
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_comes_up_with_its_devices_and_leaves_nothing() {
        crate::skip_unless!(
            Path::new(PG_BIN).join("initdb").is_file(),
            "PostgreSQL 15 not installed (postgresql-15; cargo xtask test installs it)"
        );
        let lab = LavaLab::start(&[LabDevice::qemu("qemu01"), LabDevice::qemu("qemu02")])
            .unwrap_or_else(|e| panic!("{e}"));
        // What the machine had, as the lab found it under its lock (another
        // lab, in another test binary, may be up until then).
        let had_run_dir = !lab.made_lava_run_dir;
        let devices = http_get(&format!("{}api/v0.2/devices/", lab.url())).unwrap();
        for name in ["qemu01", "qemu02"] {
            assert!(
                devices.contains(&format!("\"hostname\":\"{name}\"")),
                "{devices}"
            );
        }
        assert!(devices.contains("\"health\":\"Good\""), "{devices}");
        let groups: Vec<u32> = lab.services.iter().map(|(_, c)| c.id()).collect();
        let dir = lab.dir.clone();
        drop(lab);
        let left: Vec<_> = crate::procs::processes()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| groups.contains(&p.pgrp) && p.running())
            .collect();
        assert!(left.is_empty(), "left running: {left:?}");
        assert!(!dir.exists(), "{} left", dir.display());
        // Under the lock again: no other lab is between its start and its
        // end, so the run directory is as every lab leaves it.
        let _no_lab = take_lab_lock().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Path::new(LAVA_RUN_DIR).exists(), had_run_dir);
    }
}
