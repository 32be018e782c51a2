//! The board binaries run under qemu-user, for `cargo xtask test`: each
//! one starts, does its job and says so, and the board crates' unit tests
//! pass — on both board architectures, so that a 32-bit break fails the
//! suite the day it is written. Emulation checks function, never timing:
//! nothing here asserts how long anything took.

use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use xrunbench_lab::arch::Arch;
use xrunbench_lab::board::build::Built;
use xrunbench_lab::board::sysroot::cross_env;
use xrunbench_lab::board::BOARD_CRATES;
use xrunbench_lab::util::{cargo, run_checked};
use xrunbench_schema::player::{EndReason, PlayerReport};
use xrunbench_schema::probe::{Probe, PROBE_SCHEMA};
use xrunbench_schema::trial::ToneSpec;

/// An ALSA configuration with one PCM, `null` (hinted, so that device
/// listing shows it). The machine's own configuration loads plugin hooks
/// (PulseAudio, PipeWire, JACK) built for the machine's architecture,
/// which an emulated board binary cannot load: alsa-lib then fails to
/// read any configuration at all.
pub const ALSA_CONF: &str = "\
pcm.null {
\ttype null
\thint {
\t\tshow on
\t\tdescription \"xrunbench board test: discards all samples\"
\t}
}
";

/// How long one emulated command may run before it counts as hung (a
/// glibc mix-up under qemu spins forever at the first fork).
const HANG: Duration = Duration::from_secs(120);

/// Runs board binaries of one architecture: through qemu with the board's
/// sysroot when cross-built, directly when native.
#[derive(Debug, Clone)]
pub struct Emulator {
    arch: Arch,
    sysroot: Option<PathBuf>,
}

impl Emulator {
    /// The emulator for what `built` holds.
    pub fn for_built(built: &Built) -> Emulator {
        Emulator {
            arch: built.arch,
            sysroot: built.sysroot.clone(),
        }
    }

    /// The command line prefix: `qemu-ARCH -L SYSROOT`, or nothing.
    fn prefix(&self) -> Vec<OsString> {
        match &self.sysroot {
            // The sysroot holds the board's own complete glibc, so -L never
            // mixes two builds of it.
            Some(s) => vec![self.arch.qemu().into(), "-L".into(), s.into()],
            None => vec![],
        }
    }

    /// A command running `program` (a board binary) here.
    pub fn command(&self, program: &Path) -> Command {
        let mut argv = self.prefix();
        argv.push(program.into());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }

    /// The value of cargo's `CARGO_TARGET_<T>_RUNNER` (whitespace-split by
    /// cargo, so the sysroot's path may hold none).
    pub fn cargo_runner(&self) -> Result<Option<String>> {
        let argv: Vec<String> = self
            .prefix()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        if argv.is_empty() {
            return Ok(None);
        }
        if argv.iter().any(|a| a.contains(char::is_whitespace)) {
            bail!(
                "the sysroot path {:?} holds whitespace, which cargo's runner setting cannot \
                 carry; set CARGO_TARGET_DIR to a path without",
                self.sysroot
            );
        }
        Ok(Some(argv.join(" ")))
    }
}

/// Runs `cmd` to its end with stdout and stderr captured, killing it after
/// [`HANG`].
fn run_captured(mut cmd: Command, scratch: &Path) -> Result<Output> {
    let shown = format!("{cmd:?}");
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(File::create(&out_path)?)
        .stderr(File::create(&err_path)?)
        .spawn()
        .with_context(|| format!("starting {shown}"))?;
    let deadline = Instant::now() + HANG;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{shown}: still running after {} s, killed", HANG.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: fs::read(&out_path)?,
        stderr: fs::read(&err_path)?,
    })
}

/// `cmd`'s stdout, or an error with its stderr when it failed.
fn stdout_of(cmd: Command, scratch: &Path) -> Result<String> {
    let shown = format!("{cmd:?}");
    let out = run_captured(cmd, scratch)?;
    if !out.status.success() {
        bail!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Checks hackbench's output is rt-tests' for `-g 1 -l 10` in `mode`
/// ("process" or "threaded"), with a `Time:` that is a number.
fn check_hackbench_output(stdout: &str, mode: &str) -> Result<()> {
    let banner = format!(
        "Running in {mode} mode with 1 groups using 40 file descriptors each (== 40 tasks)"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    ensure!(
        lines.contains(&banner.as_str()),
        "no {banner:?} in {stdout:?}"
    );
    ensure!(
        lines.contains(&"Each sender will pass 10 messages of 100 bytes"),
        "no message line in {stdout:?}"
    );
    let time = lines
        .iter()
        .find_map(|l| l.strip_prefix("Time: "))
        .with_context(|| format!("no Time: line in {stdout:?}"))?;
    time.trim()
        .parse::<f64>()
        .with_context(|| format!("Time: {time:?} is not a number"))?;
    Ok(())
}

/// Checks a player report says it played `seconds` of audio to `backend`
/// (`device`) and stopped because the duration was reached.
fn check_player_report(json: &str, backend: &str, device: &str, seconds: f64) -> Result<()> {
    let r: PlayerReport =
        serde_json::from_str(json).with_context(|| format!("player report {json:?}"))?;
    ensure!(
        r.params.backend == backend && r.params.device == device,
        "played to {} {}, not {backend} {device}",
        r.params.backend,
        r.params.device
    );
    ensure!(
        r.ended == EndReason::Duration,
        "ended by {:?}, not the duration",
        r.ended
    );
    // Frames, not time: exactly what was asked for, however slow qemu is.
    let asked = (seconds * f64::from(r.file.rate)).round() as u64;
    ensure!(
        r.frames_written == asked,
        "wrote {} frames, asked for {asked}",
        r.frames_written
    );
    Ok(())
}

/// One named check's outcome.
pub type CheckResult = (String, Result<()>);

/// Runs each board binary of `built` under emulation; `scratch` is a
/// private directory. Every check runs; each one's outcome is returned.
pub fn smoke(built: &Built, scratch: &Path) -> Result<Vec<CheckResult>> {
    let emu = Emulator::for_built(built);
    fs::create_dir_all(scratch)?;
    let alsa_conf = scratch.join("alsa.conf");
    fs::write(&alsa_conf, ALSA_CONF)?;
    // On tmpfs, as the player wants it.
    let wav = TmpfsFile(PathBuf::from(format!(
        "/dev/shm/xrunbench-board-{}-{}.wav",
        built.arch,
        std::process::id()
    )));
    let tone = ToneSpec {
        seconds: Some(1.0),
        ..ToneSpec::default()
    };
    xrunbench_wav::write_tone(&wav.0, &tone, 1.0)?;
    let binary = |name: &str| -> Result<PathBuf> {
        Ok(built
            .binary(name)
            .with_context(|| format!("{name} was not built"))?
            .path
            .clone())
    };
    let hackbench = binary("xrun-hackbench")?;
    let player = binary("xrun-player")?;
    let trial = binary("xrun-trial")?;
    let run = |program: &Path, args: &[&str]| -> Result<String> {
        let mut cmd = emu.command(program);
        cmd.args(args).env("ALSA_CONFIG_PATH", &alsa_conf);
        stdout_of(cmd, scratch)
    };
    let wav_path = wav.0.to_string_lossy().into_owned();
    let mut results: Vec<CheckResult> = Vec::new();
    let mut check = |name: &str, f: &dyn Fn() -> Result<()>| {
        results.push((format!("{} {name}", built.arch), f()));
    };
    check("xrun-hackbench -g 1 -l 10 (processes)", &|| {
        check_hackbench_output(&run(&hackbench, &["-g", "1", "-l", "10"])?, "process")
    });
    check("xrun-hackbench -T -g 1 -l 10 (threads)", &|| {
        check_hackbench_output(
            &run(&hackbench, &["-T", "-g", "1", "-l", "10"])?,
            "threaded",
        )
    });
    check("xrun-player --list-devices", &|| {
        let out = run(&player, &["--list-devices"])?;
        ensure!(
            out.lines().any(
                |l| l.trim_start().starts_with("-D null") && l.contains("xrunbench board test")
            ),
            "the hinted null PCM is not listed: {out:?}"
        );
        Ok(())
    });
    check("xrun-player plays 1 s on the virtual sink", &|| {
        let out = run(
            &player,
            &[
                "--backend",
                "virtual",
                "--duration",
                "1",
                "--json",
                "-",
                &wav_path,
            ],
        )?;
        check_player_report(&out, "virtual", "virtual", 1.0)
    });
    check("xrun-player plays 1 s to ALSA's null PCM", &|| {
        let out = run(
            &player,
            &["-D", "null", "--duration", "1", "--json", "-", &wav_path],
        )?;
        check_player_report(&out, "alsa", "null", 1.0)
    });
    check("xrun-trial probe", &|| {
        check_probe(&run(&trial, &["probe"])?, built.arch, &built.dir)
    });
    check(
        "xrun-trial (release) holds no fault-injection hook",
        &|| release_has_no_fault_hook(&trial),
    );
    Ok(results)
}

/// The release `xrun-trial` has no fault-injection hook: its bytes do not
/// hold the variable's name, which the hook (feature `fault-injection`)
/// reads. (A trial cannot run under qemu-user, which does not follow
/// `xrun-trial`'s exec of the player; the suite runs a release trial with
/// the variable set on this machine instead, in `xtask/tests/faults.rs`.)
fn release_has_no_fault_hook(trial: &Path) -> Result<()> {
    let bytes = fs::read(trial)?;
    ensure!(
        !bytes
            .windows(FAULT_ENV.len())
            .any(|w| w == FAULT_ENV.as_bytes()),
        "{} holds the string {FAULT_ENV}: the fault-injection feature is in a release build",
        trial.display()
    );
    Ok(())
}

/// The variable the suite's own `xrun-trial` builds obey (feature
/// `fault-injection`), and release builds must not.
const FAULT_ENV: &str = "XRUNBENCH_FAULT";

/// Checks `xrun-trial probe`'s document: ours, from a machine of `arch`
/// (qemu-user reports the emulated one), and finding its two siblings in
/// `dir`.
fn check_probe(json: &str, arch: Arch, dir: &Path) -> Result<()> {
    let p: Probe = serde_json::from_str(json).with_context(|| format!("probe {json:?}"))?;
    ensure!(p.schema == PROBE_SCHEMA, "schema {:?}", p.schema);
    ensure!(
        Arch::from_uname_machine(&p.machine.arch) == Some(arch),
        "machine.arch {:?} is not {arch}",
        p.machine.arch
    );
    let canonical = |d: &Path| fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
    ensure!(
        canonical(&p.binaries.dir) == canonical(dir) && p.binaries.player && p.binaries.hackbench,
        "xrun-player and xrun-hackbench not found beside xrun-trial: {:?}",
        p.binaries
    );
    Ok(())
}

/// A file on tmpfs, removed on drop.
struct TmpfsFile(PathBuf);

impl Drop for TmpfsFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Runs the board crates' unit tests for every `built` architecture, in
/// one `cargo test` with each target's runner set to its emulator.
pub fn unit_tests(built: &[Built], scratch: &Path) -> Result<()> {
    run_checked(&mut unit_test_command(built, scratch)?)
}

/// Builds what [`unit_tests`] runs, and runs nothing: the compile, which
/// is most of its time, can be done ahead (`cargo xtask test` does it
/// beside the suite).
pub fn build_unit_tests(built: &[Built], scratch: &Path) -> Result<()> {
    run_checked(unit_test_command(built, scratch)?.arg("--no-run"))
}

/// The `cargo test` of [`unit_tests`].
fn unit_test_command(built: &[Built], scratch: &Path) -> Result<Command> {
    fs::create_dir_all(scratch)?;
    let alsa_conf = scratch.join("alsa.conf");
    fs::write(&alsa_conf, ALSA_CONF)?;
    let mut cmd = cargo();
    cmd.args(["test", "--no-fail-fast", "--lib", "--bins"])
        // As the suite: optimised a little, debug assertions on.
        .env("CARGO_PROFILE_DEV_OPT_LEVEL", "1")
        .env("ALSA_CONFIG_PATH", &alsa_conf);
    for b in built {
        cmd.args(["--target", b.arch.rust_target()]);
        if let Some(s) = &b.sysroot {
            cmd.envs(cross_env(b.arch, s, true));
        }
        if let Some(runner) = Emulator::for_built(b).cargo_runner()? {
            let upper = b.arch.rust_target().to_uppercase().replace('-', "_");
            cmd.env(format!("CARGO_TARGET_{upper}_RUNNER"), runner);
        }
    }
    for c in BOARD_CRATES {
        cmd.args(["--package", c]);
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hackbench_output_is_checked_line_by_line() {
        let good =
            "Running in process mode with 1 groups using 40 file descriptors each (== 40 tasks)\n\
                    Each sender will pass 10 messages of 100 bytes\nTime: 0.097\n";
        check_hackbench_output(good, "process").unwrap();
        assert!(check_hackbench_output(good, "threaded").is_err());
        let no_time = good.replace("Time: 0.097", "Time: ");
        assert!(check_hackbench_output(&no_time, "process").is_err());
    }

    #[test]
    fn the_runner_is_qemu_with_the_sysroot() {
        let emu = Emulator {
            arch: Arch::Armv7,
            sysroot: Some(PathBuf::from("/t/board/sysroot/armhf")),
        };
        assert_eq!(
            emu.cargo_runner().unwrap().as_deref(),
            Some("qemu-arm -L /t/board/sysroot/armhf")
        );
        let spaced = Emulator {
            arch: Arch::Aarch64,
            sysroot: Some(PathBuf::from("/my target/sysroot")),
        };
        assert!(spaced.cargo_runner().is_err());
        let native = Emulator {
            arch: Arch::X86_64,
            sysroot: None,
        };
        assert_eq!(native.cargo_runner().unwrap(), None);
    }
}
