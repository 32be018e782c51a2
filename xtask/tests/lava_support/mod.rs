//! What the board-farm tests fetch and start, kept out of the repository:
//! Debian's lava-dispatcher 2023.01 (`apt-get download` + `dpkg-deb -x`
//! into a cache under the target directory: installing it conflicts with a
//! backported qemu), the JUnit XSD (pytest's copy of Jenkins' xUnit
//! plugin's junit-10.xsd, from pytest's source on PyPI), a static HTTP
//! server on 127.0.0.1 (`python3 -m http.server`), and the LAVA leftovers
//! on the test board cleaned up.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use xrunbench_test_support::testboard::TestBoard;

/// The Python Debian ships, whose apt-installed modules lava-run imports
/// (a pyenv `python3` on PATH would not have them).
pub const PYTHON: &str = "/usr/bin/python3";

/// The cache of fetched tools: `<the project's cache>/<what>`.
pub fn cache_dir(what: &str) -> PathBuf {
    xrunbench_paths::cache_dir().join(what)
}

/// pip's cache for the suite's downloads, in the suite's cache: given as
/// `PIP_CACHE_DIR`, since `--no-cache-dir` does not reach the pip that
/// builds an sdist's build requirements, which then writes ~/.cache/pip.
pub fn pip_cache() -> PathBuf {
    cache_dir("pip")
}

/// Runs `cmd`, panicking with its output when it fails.
pub fn checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Fills `final_dir` once, through a fresh directory renamed into place
/// (two test binaries may race; the loser's copy is dropped).
fn once(final_dir: &Path, fill: impl FnOnce(&Path)) {
    if final_dir.is_dir() {
        return;
    }
    let parent = final_dir.parent().unwrap();
    std::fs::create_dir_all(parent).unwrap();
    let tmp = tempfile::tempdir_in(parent).unwrap();
    fill(tmp.path());
    let kept = tmp.keep();
    if std::fs::rename(&kept, final_dir).is_err() {
        let _ = std::fs::remove_dir_all(&kept);
    }
}

/// lava-dispatcher 2023.01 unpacked: `<root>/usr/bin/lava-run`, its Python
/// modules under `<root>/usr/lib/python3/dist-packages`, lava-server's
/// device types under `<root>/usr/share/lava-server/device-types`, and a
/// stub `guestfs` module (imported at load time, unused by ssh jobs) in
/// `<root>/stub`.
pub fn lava_root() -> PathBuf {
    let root = cache_dir("lava-2023.01");
    once(&root, |dir| {
        let debs = dir.join("debs");
        std::fs::create_dir(&debs).unwrap();
        let download = || {
            Command::new("apt-get")
                .current_dir(&debs)
                .args(["download", "-q"])
                .args([
                    "lava-common=2023.01-2",
                    "lava-dispatcher=2023.01-2",
                    "lava-dispatcher-host=2023.01-2",
                    "lava-server=2023.01-2",
                ])
                .output()
                .expect("apt-get runs")
        };
        if !download().status.success() {
            // Old package lists: refresh them once.
            checked(
                Command::new("apt-get").args(["update", "-q"]),
                "apt-get update",
            );
            let out = download();
            assert!(
                out.status.success(),
                "apt-get download lava-*: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for deb in std::fs::read_dir(&debs).unwrap().flatten() {
            checked(
                Command::new("dpkg-deb").arg("-x").arg(deb.path()).arg(dir),
                "dpkg-deb -x",
            );
        }
        std::fs::remove_dir_all(&debs).unwrap();
        std::fs::create_dir(dir.join("stub")).unwrap();
        std::fs::write(
            dir.join("stub/guestfs.py"),
            "# lava-dispatcher imports guestfs at load time; ssh jobs never use it.\n",
        )
        .unwrap();
    });
    root
}

/// `lava-run` of `job` against `board` as job `job_id`, checking the
/// board's host key against `known_hosts`: its status and its log
/// (stderr, where 2023.01 writes the results).
pub fn lava_run(
    board: &TestBoard,
    known_hosts: &Path,
    job: &Path,
    job_id: u32,
    dir: &Path,
) -> (Output, String) {
    let root = lava_root();
    let device = dir.join("device.yaml");
    render_device(&root, board, known_hosts, &device);
    let dispatcher = dir.join("dispatcher.yaml");
    std::fs::write(&dispatcher, "dispatcher_ip: 127.0.0.1\n").unwrap();
    let python_path = format!(
        "{}:{}",
        root.join("usr/lib/python3/dist-packages").display(),
        root.join("stub").display()
    );
    let out = Command::new(PYTHON)
        .arg(root.join("usr/bin/lava-run"))
        .arg("--device")
        .arg(&device)
        .arg("--dispatcher")
        .arg(&dispatcher)
        .arg("--job-id")
        .arg(job_id.to_string())
        .arg("--output-dir")
        .arg(dir.join("lava-out"))
        .arg(job)
        .env("PYTHONPATH", python_path)
        .stdin(Stdio::null())
        .output()
        .expect("lava-run starts");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, log)
}

/// The device dictionary: lava-server's `ssh.jinja2` rendered with the
/// board's host, port, user and key, as a LAVA admin would — and with the
/// board's host key checked (see [`check_host_keys`]).
fn render_device(root: &Path, board: &TestBoard, known_hosts: &Path, out: &Path) {
    let types = root.join("usr/share/lava-server/device-types");
    let user = board.destination().split('@').next().unwrap().to_string();
    let script = format!(
        "import jinja2\n\
         env = jinja2.Environment(loader=jinja2.FileSystemLoader({types:?}))\n\
         t = env.from_string(\"{{% extends 'ssh.jinja2' %}}\")\n\
         open({out:?}, 'w').write(t.render(ssh_host='127.0.0.1', ssh_port={port}, \
         ssh_user={user:?}, ssh_identity_file={key:?}))\n",
        types = types.display().to_string(),
        out = out.display().to_string(),
        port = board.port(),
        key = board.identity().display().to_string(),
    );
    checked(
        Command::new(PYTHON).arg("-c").arg(script),
        "rendering ssh.jinja2",
    );
    let rendered = std::fs::read_to_string(out).unwrap();
    std::fs::write(out, check_host_keys(&rendered, known_hosts)).unwrap();
}

/// The device dictionary's ssh `options` with host-key checking first.
/// lava-dispatcher appends `-o UserKnownHostsFile=/dev/null -o
/// StrictHostKeyChecking=no` to every ssh and scp it runs, after the
/// device's options (`base.jinja2` sets those, so a render variable cannot
/// replace them); ssh takes the first value it sees of each option, so
/// ours, first, stand. `LogLevel=ERROR` before base's `FATAL`, so that a
/// refused key is said in the job log.
fn check_host_keys(device: &str, known_hosts: &Path) -> String {
    let ours: String = [
        "StrictHostKeyChecking=yes".to_string(),
        format!("UserKnownHostsFile={}", known_hosts.display()),
        "BatchMode=yes".to_string(),
        "LogLevel=ERROR".to_string(),
    ]
    .iter()
    .map(|o| format!("          - '-o'\n          - '{o}'\n"))
    .collect();
    let at = "      ssh:\n        options:\n";
    assert_eq!(
        device.matches(at).count(),
        1,
        "one ssh options list: {device}"
    );
    device.replacen(at, &format!("{at}{ours}"), 1)
}

/// What LAVA leaves on its board and on its worker, removed on drop:
/// `/lava-<id>`, `/lava-<id>-overlay-*.tar.gz` (the board is this
/// machine), `/var/lib/lava/dispatcher/tmp/<id>`, and /var/lib/lava if
/// the test made it.
pub struct LavaLeftovers {
    _one_job_at_a_time: std::sync::MutexGuard<'static, ()>,
    job_ids: Vec<u32>,
    made_var_lib_lava: bool,
}

impl LavaLeftovers {
    /// Before the job runs. Holds the suite's LAVA lock until dropped: two
    /// jobs at once share /var/lib/lava, which the first one's cleanup
    /// removes under the other (seen: `scp: stat local …`).
    pub fn new(job_id: u32) -> Self {
        LavaLeftovers::of_jobs([job_id])
    }

    /// [`LavaLeftovers::new`] for several jobs (a lab's, by their ids):
    /// one guard, since the lock it holds is taken once.
    pub fn of_jobs(job_ids: impl IntoIterator<Item = u32>) -> Self {
        static LAVA: std::sync::Mutex<()> = std::sync::Mutex::new(());
        LavaLeftovers {
            _one_job_at_a_time: LAVA.lock().unwrap_or_else(|e| e.into_inner()),
            job_ids: job_ids.into_iter().collect(),
            made_var_lib_lava: !Path::new("/var/lib/lava").exists(),
        }
    }
}

/// What LAVA's ssh deploy of job `id` put on the board (this machine):
/// `/lava-<id>` and `/lava-<id>-overlay-*.tar.gz`.
pub fn on_board(id: u32) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/") {
        let dir = format!("lava-{id}");
        let overlay = format!("lava-{id}-overlay-");
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == dir || name.starts_with(&overlay) {
                out.push(e.path());
            }
        }
    }
    out
}

impl Drop for LavaLeftovers {
    fn drop(&mut self) {
        for &id in &self.job_ids {
            for p in on_board(id) {
                let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
            }
            let _ = std::fs::remove_dir_all(format!("/var/lib/lava/dispatcher/tmp/{id}"));
        }
        if self.made_var_lib_lava {
            let _ = std::fs::remove_dir_all("/var/lib/lava");
        }
    }
}

/// A static HTTP server on 127.0.0.1 serving `dir`, stopped on drop.
pub struct HttpServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl HttpServer {
    /// Starts `python3 -m http.server` on a port the kernel picks, and
    /// waits for the line that names it.
    pub fn start(dir: &Path) -> HttpServer {
        let mut child = Command::new(PYTHON)
            .args(["-u", "-m", "http.server", "--bind", "127.0.0.1", "0"])
            .arg("--directory")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // "Serving HTTP on 127.0.0.1 port 41234 (http://…) ..."
                if let Some(p) = line
                    .split_whitespace()
                    .skip_while(|w| *w != "port")
                    .nth(1)
                    .and_then(|p| p.parse::<u16>().ok())
                {
                    let _ = tx.send(p);
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Ok(p) = rx.recv_timeout(Duration::from_millis(100)) {
                break p;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("python3 -m http.server did not say its port within 30 s");
            }
        };
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JUnit XSD Jenkins' xUnit plugin ships (junit-10.xsd, MIT), as
/// pytest's sources on PyPI carry it: `pip download` of the source
/// archive, the one file taken out.
pub fn junit_xsd() -> PathBuf {
    let dir = cache_dir("junit-xsd");
    once(&dir, |tmp| {
        checked(
            Command::new(PYTHON)
                .args(["-m", "pip", "download", "--no-deps", "--no-binary", ":all:"])
                .env("PIP_CACHE_DIR", pip_cache())
                .args(["--quiet", "pytest==8.3.5", "-d"])
                .arg(tmp),
            "pip download pytest (its sources hold junit-10.xsd)",
        );
        checked(
            Command::new("tar")
                .arg("-xzf")
                .arg(tmp.join("pytest-8.3.5.tar.gz"))
                .arg("-C")
                .arg(tmp)
                .arg("--strip-components=3")
                .arg("pytest-8.3.5/testing/example_scripts/junit-10.xsd"),
            "tar: junit-10.xsd",
        );
        std::fs::remove_file(tmp.join("pytest-8.3.5.tar.gz")).unwrap();
    });
    dir.join("junit-10.xsd")
}

/// `xmllint --schema XSD FILE`: Ok, or xmllint's complaint.
pub fn validate_junit(file: &Path) -> Result<(), String> {
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(junit_xsd())
        .arg(file)
        .output()
        .expect("xmllint runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
