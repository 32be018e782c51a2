//! The private LAVA lab (test-support's `LavaLab`: real lava-server and
//! lava-worker 2023.01 on 127.0.0.1) driven by the product's REST client:
//! jobs validated and submitted, two QEMU devices booting Debian's kernel
//! with the VM lab's console initramfs at once, the outcome read from the
//! jobs' health and results; and the client's failures against the real
//! server, each one line.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
