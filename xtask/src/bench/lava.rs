//! `cargo xtask bench lava`: one scenario three ways, in one run — on the
//! VM lab over SSH (`[target] vm`: one QEMU guest, the trials typed over
//! ssh), and as jobs of a private LAVA lab (test-support's `LavaLab`:
//! lava-server and lava-worker 2023.01 on 127.0.0.1) on one device and on
//! two at once. The guests are the same: Debian's kernel, snd-dummy, the
//! board binaries, TCG. Reported: the lab's setup time, each way's wall
//! time and per-trial overhead (wall time less the audio played, per
//! trial), and the ratio of two devices to one (issue 28's goal: ≤ 0.6).

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use xrunbench_lab::arch::Arch;
use xrunbench_lab::lab::initramfs::{Sound, CONSOLE_PROMPT};
use xrunbench_lab::lab::kernel;
use xrunbench_lab::lab::vm::console_image;
use xrunbench_test_support::lava_lab::{LabDevice, LavaLab, TOKEN};

/// Arguments of `cargo xtask bench lava`.
#[derive(clap::Args)]
pub struct Args {
    /// Trials per configuration (two configurations).
    #[arg(long, default_value_t = 6)]
    pub trials: u32,
    /// Seconds of audio per trial.
    #[arg(long, default_value_t = 2)]
    pub seconds: u32,
}

/// The scenario: two configurations of `trials` trials of `seconds`
/// through snd-dummy; its `[target] vm` is the SSH way's (a lab run
/// ignores it: the board is the lab's).
fn scenario(kernel: &Path, trials: u32, seconds: u32) -> String {
    format!(
        "name = \"bench-lava\"\ntrials = {trials}\nduration = \"{seconds}s\"\nwarmup = \"0s\"\n\
         [audio]\ngenerate = {{ seconds = {seconds}, rate = 48000, channels = 2 }}\n\
         backend = \"alsa\"\ndevice = \"hw:0\"\n\
         [[config]]\nname = \"other\"\n\
         [[config]]\nname = \"fifo\"\n[config.audio]\npriority = \"fifo:80\"\n\
         [target]\nvm = {{ kernel = \"{}\", sound = \"dummy\" }}\n",
        kernel.display()
    )
}

/// The lab's part of each job: boot the kernel and the console ramdisk.
fn lab_job(kernel: &Path, initrd: &Path) -> String {
    format!(
        "device_type: qemu\n\
         timeouts: {{job: {{minutes: 10}}, action: {{minutes: 10}}, connection: {{minutes: 5}}}}\n\
         priority: medium\nvisibility: public\ncontext: {{arch: amd64}}\n\
         actions:\n\
         - deploy:\n    to: tmpfs\n    images:\n\
         \x20     kernel: {{image_arg: '-kernel {{kernel}} -append \"console=ttyS0,115200\"', url: 'file://{}'}}\n\
         \x20     ramdisk: {{image_arg: '-initrd {{ramdisk}}', url: 'file://{}'}}\n\
         - boot: {{method: qemu, media: tmpfs, prompts: ['{}'], timeout: {{minutes: 10}}}}\n",
        kernel.display(),
        initrd.display(),
        CONSOLE_PROMPT.trim_end()
    )
}

/// `cargo xtask run` with `args`: its wall time; a failed run is an
/// error with its output.
fn timed_run(args: &[&str], scenario: &Path, results: &Path) -> Result<Duration> {
    let exe = std::env::current_exe().context("finding this program")?;
    let t0 = Instant::now();
    let out = Command::new(exe)
        .arg("run")
        .arg(scenario)
        .arg("--results-dir")
        .arg(results)
        .args(args)
        .env_remove("XRUNBENCH_LAVA_TOKEN")
        .stdin(Stdio::null())
        .output()
        .context("running cargo xtask run")?;
    let wall = t0.elapsed();
    if !out.status.success() {
        bail!(
            "`run {}` failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(wall)
}

/// `cargo xtask bench lava`.
pub fn run(a: &Args) -> Result<ExitCode> {
    if a.trials == 0 || a.seconds == 0 {
        bail!("--trials and --seconds: expected at least 1");
    }
    let dir = tempfile::tempdir().context("a temporary directory")?;
    let d = dir.path();
    // Default features: the player on ALSA alone, as a board has it.
    let bins = xrunbench_lab::util::build_release_binaries(&[
        "xrunbench-trial",
        "xrunbench-player",
        "xrunbench-hackbench",
    ])?;
    let k = kernel::debian(Arch::X86_64, false)?;
    let initrd = d.join("initramfs.cpio");
    console_image(
        Arch::X86_64,
        &k.modules,
        Sound::Dummy,
        &bins,
        Vec::new(),
        &initrd,
    )?;
    let s = d.join("bench-lava.toml");
    std::fs::write(&s, scenario(&k.image, a.trials, a.seconds))?;
    let job = d.join("lab-job.yaml");
    std::fs::write(&job, lab_job(&k.image, &initrd))?;
    let token = d.join("token");
    std::fs::write(&token, TOKEN)?;
    let results = d.join("results");

    let bin_dir = bins.display().to_string();
    let ssh = timed_run(&["--bin-dir", &bin_dir], &s, &results)?;
    let t0 = Instant::now();
    let lab = LavaLab::start(&[LabDevice::qemu("qemu01"), LabDevice::qemu("qemu02")])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let setup = t0.elapsed();
    let url = lab.url();
    let job_path = job.display().to_string();
    let token_path = token.display().to_string();
    let lava = |devices: &str| {
        timed_run(
            &[
                "--lava",
                &url,
                "--lava-job",
                &job_path,
                "--lava-token-file",
                &token_path,
                "--lava-devices",
                devices,
            ],
            &s,
            &results,
        )
    };
    let one = lava("1")?;
    let two = lava("2")?;
    drop(lab);
    report(
        a,
        setup,
        &[
            ("VM lab over SSH", 1, ssh),
            ("LAVA, 1 device", 1, one),
            ("LAVA, 2 devices", 2, two),
        ],
    );
    Ok(ExitCode::SUCCESS)
}

/// The figures; a way's per-trial overhead is its wall time less the
/// audio each of its `devices` played, per trial a device ran (its boot
/// and the lab's queue included).
fn report(a: &Args, setup: Duration, ways: &[(&str, u32, Duration); 3]) {
    let trials = 2 * a.trials;
    let audio = f64::from(trials * a.seconds);
    println!(
        "bench lava: {trials} trials of {} s (2 configurations), Debian's kernel under TCG, snd-dummy",
        a.seconds
    );
    println!(
        "lab setup (lava-server, database, worker, 2 devices): {:.1} s",
        setup.as_secs_f64()
    );
    println!("{:<18} {:>8} {:>22}", "way", "wall s", "overhead s/trial");
    for (name, devices, wall) in ways {
        let w = wall.as_secs_f64();
        let per_device = f64::from(trials) / f64::from(*devices);
        println!(
            "{name:<18} {w:>8.1} {:>22.2}",
            (w - audio / f64::from(*devices)) / per_device
        );
    }
    let (ssh, one, two) = (ways[0].2, ways[1].2, ways[2].2);
    println!(
        "LAVA 1 device / SSH: {:.2}; 2 devices / 1 device: {:.2} (goal <= 0.6)",
        one.as_secs_f64() / ssh.as_secs_f64(),
        two.as_secs_f64() / one.as_secs_f64()
    );
    println!("(one run of each; the wall times include each way's boot: one guest for SSH, one a job for LAVA)");
}
