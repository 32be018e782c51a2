//! The private LAVA lab (test-support's `LavaLab`: real lava-server and
//! lava-worker 2023.01 on 127.0.0.1) driven by the product's REST client:
//! jobs validated and submitted, two QEMU devices booting Debian's kernel
//! with the VM lab's console initramfs at once, the outcome read from the
//! jobs' health and results; and the client's failures against the real
//! server, each one line.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{find_named, xtask, ScenarioText};

use xrunbench_host::board::arch::Arch;
use xrunbench_host::lab::initramfs::{self, Channel, Image, Sound, CONSOLE_PROMPT};
use xrunbench_host::lab::{kernel, vm};
use xrunbench_host::lava::server::{JobHealth, JobState, Server, ServerError, Token};
use xrunbench_test_support::lava_lab::{LabDevice, LavaLab, TOKEN};

/// Debian's x86_64 kernel and a console initramfs with snd-dummy and the
/// board binaries, written into `dir`.
fn guest(dir: &Path) -> (PathBuf, PathBuf) {
    let k = kernel::debian(Arch::X86_64, false).expect("Debian's kernel");
    let sound = Sound::Dummy;
    let modules = initramfs::load_order(&k.modules, sound.modules()).expect("modules");
    let bins = xrunbench_test_support::boards::bin_dir();
    let mut libraries = Vec::new();
    for b in ["xrun-trial", "xrun-player", "xrun-hackbench"] {
        libraries.extend(initramfs::host_libraries(&bins.join(b)).expect("ldd"));
    }
    libraries.sort();
    libraries.dedup();
    let initrd = dir.join("initramfs.cpio");
    Image {
        arch: Arch::X86_64,
        busybox: &vm::busybox(Arch::X86_64).expect("busybox"),
        modules,
        sound,
        libraries,
        channel: Channel::Console { bins },
    }
    .write(&initrd)
    .expect("initramfs");
    (k.image, initrd)
}

/// A job booting `kernel` and `initrd` on a `qemu` device, checking at the
/// prompt that the sound card and the board binaries are there.
fn console_job(name: &str, kernel: &Path, initrd: &Path) -> String {
    let prompt = CONSOLE_PROMPT.trim_end();
    format!(
        "device_type: qemu\n\
         job_name: {name}\n\
         timeouts:\n  job: {{minutes: 15}}\n  action: {{minutes: 10}}\n  connection: {{minutes: 5}}\n\
         priority: medium\n\
         visibility: public\n\
         context:\n  arch: amd64\n\
         actions:\n\
         - deploy:\n    to: tmpfs\n    images:\n\
         \x20     kernel:\n        image_arg: -kernel {{kernel}} -append \"console=ttyS0,115200\"\n        url: file://{k}\n\
         \x20     ramdisk:\n        image_arg: -initrd {{ramdisk}}\n        url: file://{i}\n\
         - boot:\n    method: qemu\n    media: tmpfs\n    prompts: ['{prompt}']\n    timeout: {{minutes: 10}}\n\
         - test:\n    timeout: {{minutes: 5}}\n    interactive:\n    - name: guest\n      prompts: ['{prompt}']\n      script:\n\
         \x20     - command: ls /dev/snd/pcmC0D0p && echo xrunbench-sound-$((40+2))\n        name: sound\n        successes:\n        - message: xrunbench-sound-42\n\
         \x20     - command: xrun-trial --help > /dev/null && echo xrunbench-bins-$((40+2))\n        name: binaries\n        successes:\n        - message: xrunbench-bins-42\n",
        k = kernel.display(),
        i = initrd.display(),
    )
}

/// The lab's part of a job for its `qemu` devices: booting `kernel` and
/// `initrd`, waiting for the console's prompt (what a user's `--lava-job`
/// file holds).
fn lab_job(kernel: &Path, initrd: &Path) -> String {
    let prompt = CONSOLE_PROMPT.trim_end();
    format!(
        "device_type: qemu\n\
         timeouts:\n  job: {{minutes: 10}}\n  action: {{minutes: 10}}\n  connection: {{minutes: 5}}\n\
         priority: medium\n\
         visibility: public\n\
         context:\n  arch: amd64\n\
         actions:\n\
         - deploy:\n    to: tmpfs\n    images:\n\
         \x20     kernel:\n        image_arg: -kernel {{kernel}} -append \"console=ttyS0,115200\"\n        url: file://{k}\n\
         \x20     ramdisk:\n        image_arg: -initrd {{ramdisk}}\n        url: file://{i}\n\
         - boot:\n    method: qemu\n    media: tmpfs\n    prompts: ['{prompt}']\n    timeout: {{minutes: 10}}\n",
        k = kernel.display(),
        i = initrd.display(),
    )
}

fn server(lab: &LavaLab) -> Server {
    Server::new(&lab.url(), Some(Token::new(TOKEN).unwrap())).unwrap()
}

#[test]
fn two_qemu_devices_run_two_jobs_at_once_and_their_results_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, initrd) = guest(dir.path());
    let lab = LavaLab::start(&[LabDevice::qemu("qemu01"), LabDevice::qemu("qemu02")])
        .unwrap_or_else(|e| panic!("{e}"));
    let server = server(&lab);
    let job = console_job("xrunbench lab console", &kernel, &initrd);
    server.validate(&job).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<u64> = (0..2)
        .flat_map(|_| server.submit(&job).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(ids.len(), 2);
    // Both must be running at once, each on its own device.
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut seen_together = false;
    let mut devices: Vec<String> = loop {
        let jobs: Vec<_> = ids.iter().map(|id| server.job(*id).unwrap()).collect();
        if jobs.iter().all(|j| j.state == JobState::Running) {
            seen_together = true;
        }
        if jobs.iter().all(|j| j.state == JobState::Finished) {
            for j in &jobs {
                assert_eq!(
                    j.health,
                    JobHealth::Complete,
                    "job {}: {:?}; worker log: {}",
                    j.id,
                    j.health,
                    lab.log("worker")
                );
            }
            break jobs
                .iter()
                .filter_map(|j| j.actual_device.clone())
                .collect();
        }
        assert!(Instant::now() < deadline, "jobs not finished: {jobs:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(seen_together, "the two jobs never ran at the same time");
    devices.sort();
    assert_eq!(devices, ["qemu01", "qemu02"]);
    for id in ids {
        let cases = server.tests(id).unwrap();
        for name in ["sound", "binaries"] {
            let case = cases
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("job {id}: no case {name} in {cases:?}"));
            assert_eq!(case.result, "pass", "job {id}: {case:?}");
        }
    }
}

#[test]
fn the_real_server_refuses_a_wrong_token_and_a_bad_job_in_one_line_each() {
    let lab = LavaLab::start(&[LabDevice::qemu("qemu01")]).unwrap_or_else(|e| panic!("{e}"));
    let wrong = Server::new(&lab.url(), Some(Token::new("not-the-token").unwrap())).unwrap();
    let e = wrong.submit("device_type: qemu\n").unwrap_err();
    assert!(matches!(e, ServerError::Unauthorized { .. }), "{e:?}");
    let line = e.to_string();
    assert!(
        !line.contains("not-the-token") && !line.contains('\n'),
        "{line}"
    );
    let e = server(&lab).submit("x: 1\n").unwrap_err();
    assert!(matches!(e, ServerError::Rejected { .. }), "{e:?}");
    assert!(e.to_string().contains("extra keys not allowed"), "{e}");
}

/// Every file under `dir`, read (lossily) as text.
fn all_text_under(dir: &Path) -> String {
    let mut out = String::new();
    for e in walk(dir) {
        out.push_str(&String::from_utf8_lossy(&std::fs::read(&e).unwrap()));
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_scenario_submitted_to_the_lab_runs_on_both_devices_at_once_and_comes_back_as_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, initrd) = guest(dir.path());
    let lab = LavaLab::start(&[LabDevice::qemu("qemu01"), LabDevice::qemu("qemu02")])
        .unwrap_or_else(|e| panic!("{e}"));
    let job = dir.path().join("lab-job.yaml");
    std::fs::write(&job, lab_job(&kernel, &initrd)).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    // Two configurations × two trials of 2 s through the guest's snd-dummy
    // card: each device runs trial 1 (or 2) of both, interleaved.
    let s = ScenarioText::new("lab")
        .trials(2)
        .duration("2s")
        .warmup("0s")
        .generate("{ seconds = 2, rate = 48000, channels = 2 }")
        .audio("backend", "alsa")
        .audio("device", "hw:0")
        .config("plain")
        .config_with("fifo", "[config.audio]\npriority = \"fifo:80\"")
        .write(dir.path());
    let results = dir.path().join("results");
    let out = xtask()
        .arg("run")
        .arg(&s)
        .arg("--lava")
        .arg(lab.url())
        .arg("--lava-job")
        .arg(&job)
        .arg("--lava-devices")
        .arg("2")
        .arg("--lava-token-file")
        .arg(&token)
        .arg("--results-dir")
        .arg(&results)
        .env_remove("XRUNBENCH_LAVA_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stdout}\n{stderr}\ngunicorn log: {}\nworker log: {}",
        lab.log("gunicorn"),
        lab.log("worker")
    );
    // Both jobs ran, one on each device, and the manifest says which
    // trials ran where.
    let runs = find_named(&results, "run.json");
    assert_eq!(runs.len(), 1, "{stdout}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    let target = run["target"].as_str().unwrap();
    for device in ["qemu01", "qemu02"] {
        assert!(target.contains(&format!(" on {device} (")), "{target}");
    }
    assert!(
        target.contains("(plain-1 fifo-1)") && target.contains("(plain-2 fifo-2)"),
        "{target}"
    );
    assert!(
        stdout.contains(" on qemu01") && stdout.contains(" on qemu02"),
        "{stdout}"
    );
    // Every trial came back measured, and the table has both columns.
    let trials = runs[0].parent().unwrap().join("trials");
    for stem in ["plain-1", "plain-2", "fifo-1", "fifo-2"] {
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(trials.join(format!("{stem}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(record["trial"]["config"], stem.split('-').next().unwrap());
        assert!(record["player"].is_object(), "{stem}: {record}");
    }
    assert!(
        run["outcome"].to_string().contains("completed"),
        "{}",
        run["outcome"]
    );
    let table = stdout
        .lines()
        .find(|l| l.contains("plain") && l.contains("fifo"))
        .unwrap_or_else(|| panic!("no table header in {stdout}"));
    assert!(!table.is_empty());
    assert!(
        stdout.contains("devices: qemu01, qemu02: too few trials"),
        "{stdout}"
    );
    // The token is nowhere: not in the output, not in the run directory.
    for (what, text) in [
        ("stdout", stdout.to_string()),
        ("stderr", stderr.to_string()),
        ("results", all_text_under(&results)),
    ] {
        assert!(!text.contains(TOKEN), "the token is in {what}");
    }
}
