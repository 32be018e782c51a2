//! The suite's test binaries, built once by cargo and run in two lanes
//! at once: the tests that boot guests under QEMU (the lab's, LAVA's, the
//! real-kernel bisections), one after another, beside all the others, one
//! after another. Most tests wait on time (sound servers' clocks, boards,
//! timeouts), so one lane after the other left a CPU idle for most of an
//! hour. The guests run at nice -20 in a scheduling group of their own
//! (as root), ahead of the other lane; the other lane's tests must pass
//! beside 60 busy loops anyway. The bisections, whose verdicts need their
//! guest ahead of everything, come last in their lane and wait for the
//! other lane's tests: their real-time threads preempt QEMU whatever its
//! nice value. Cargo cannot run them so: it holds the target
//! directory's lock for as long as `cargo test` runs, so the binaries are
//! run here as cargo would (in their package's directory, with
//! `CARGO_MANIFEST_DIR`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// The test binaries of the guests' lane, in the order it runs them: those
/// that boot guests under QEMU; test-support's own tests, whose LAVA lab
/// must not share the machine with `lava_lab`'s (one lab at a time: in one
/// lane neither waits on the other's lock); the installed binary's, a
/// whole build, where this lane has time to spare before the bisections
/// (it waits for the other lane anyway); and the real-kernel bisections
/// last (by then the kernel trees they need have been built, and the
/// other lane is done).
pub const GUEST_TESTS: [&str; 5] = [
    "vm_lab",
    "xrunbench_test_support",
    "lava_lab",
    "installed_binary",
    LAST_GUEST_TEST,
];

/// The guests' test that runs last, after the board stage: the real-kernel
/// bisections (x86_64, then aarch64), whose verdicts need their guest
/// ahead of everything else.
pub const LAST_GUEST_TEST: &str = "kernel_bisect";

/// The test binary whose tests are all `#[ignore]`d so that `cargo test`
/// leaves it out: run with `--ignored`.
pub const IGNORED_TESTS: [&str; 1] = [LAST_GUEST_TEST];

/// One test executable as cargo built it.
#[derive(Debug, Clone)]
pub struct TestBinary {
    /// The target's name (`vm_lab`, `xrunbench_host`).
    pub name: String,
    /// What it is for people: `tests/vm_lab.rs`, `unittests src/lib.rs`.
    pub source: String,
    /// Its package's directory (cargo runs it there).
    pub package_dir: PathBuf,
    /// The executable.
    pub exe: PathBuf,
}

/// Builds what `cmd` (a `cargo test … --no-run`) builds and returns the
/// test executables, in cargo's order.
pub fn build(mut cmd: Command) -> Result<Vec<TestBinary>> {
    cmd.args(["--no-run", "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped());
    let shown = format!("{cmd:?}");
    let mut child = cmd.spawn().with_context(|| format!("running {shown}"))?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let mut out = Vec::new();
    for line in BufReader::new(stdout).lines() {
        if let Some(b) = test_binary(&line?) {
            out.push(b);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("{shown} failed: {status}");
    }
    Ok(out)
}

/// The test executable a line of cargo's JSON messages announces, if it
/// announces one.
fn test_binary(line: &str) -> Option<TestBinary> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v["reason"] != "compiler-artifact" || v["profile"]["test"] != true {
        return None;
    }
    let exe = PathBuf::from(v["executable"].as_str()?);
    let package_dir = Path::new(v["manifest_path"].as_str()?)
        .parent()?
        .to_path_buf();
    let target = &v["target"];
    let name = target["name"].as_str()?.to_string();
    let src = Path::new(target["src_path"].as_str()?);
    let rel = src.strip_prefix(&package_dir).unwrap_or(src).display();
    let kinds: Vec<&str> = target["kind"]
        .as_array()?
        .iter()
        .filter_map(|k| k.as_str())
        .collect();
    let source = if kinds
        .iter()
        .any(|k| ["test", "bench", "example"].contains(k))
    {
        rel.to_string()
    } else {
        format!("unittests {rel}")
    };
    Some(TestBinary {
        name,
        source,
        package_dir,
        exe,
    })
}

/// How a lane runs a binary: its command configured by the suite (skip
/// log, session directories, …).
pub type Configure<'a> = &'a (dyn Fn(&mut Command) + Sync);

/// Runs `bins` one after another, each with `args` after its own (and
/// `--ignored` for [`IGNORED_TESTS`]); their output to `log` when given,
/// else ours. Returns the names of those that failed.
pub fn run_lane(
    bins: &[TestBinary],
    args: &[String],
    configure: Configure<'_>,
    log: Option<&Path>,
) -> Vec<String> {
    let mut failed = Vec::new();
    for b in bins {
        let began = Instant::now();
        let result = run_one(b, args, configure, log);
        let secs = began.elapsed().as_secs_f64();
        match result {
            Ok(()) => eprintln!(
                "xtask test: {} ({}) passed in {secs:.0} s",
                b.source, b.name
            ),
            Err(e) => {
                eprintln!(
                    "xtask test: {} ({}) failed in {secs:.0} s: {e:#}",
                    b.source, b.name
                );
                failed.push(format!("{} ({})", b.source, b.name));
            }
        }
    }
    failed
}

fn run_one(
    b: &TestBinary,
    args: &[String],
    configure: Configure<'_>,
    log: Option<&Path>,
) -> Result<()> {
    let mut cmd = Command::new(&b.exe);
    cmd.current_dir(&b.package_dir)
        .env("CARGO_MANIFEST_DIR", &b.package_dir);
    if IGNORED_TESTS.contains(&b.name.as_str()) {
        // Its tests each boot a guest that must have the machine to
        // itself (the kernel bisections): one at a time.
        cmd.args(["--ignored", "--test-threads=1"]);
    }
    cmd.args(args);
    configure(&mut cmd);
    let header = format!("     Running {} ({})", b.source, b.exe.display());
    if let Some(log) = log {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        writeln!(f, "{header}")?;
        cmd.stdout(f.try_clone()?).stderr(f);
    } else {
        eprintln!("{header}");
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {}", b.exe.display()))?;
    if !status.success() {
        bail!("{status}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_messages_name_the_test_executables() {
        let test = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/xtask#0.1.0","manifest_path":"/w/xtask/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"vm_lab","src_path":"/w/xtask/tests/vm_lab.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/vm_lab-1","fresh":true}"#;
        let b = test_binary(test).unwrap();
        assert_eq!(b.name, "vm_lab");
        assert_eq!(b.source, "tests/vm_lab.rs");
        assert_eq!(b.package_dir, Path::new("/w/xtask"));
        assert_eq!(b.exe, Path::new("/w/target/debug/deps/vm_lab-1"));
        let lib = test
            .replace(r#"["test"]"#, r#"["lib"]"#)
            .replace("tests/vm_lab.rs", "src/lib.rs");
        assert_eq!(test_binary(&lib).unwrap().source, "unittests src/lib.rs");
        // Not a test build, or no executable: nothing to run.
        assert!(test_binary(&test.replace(r#""test":true"#, r#""test":false"#)).is_none());
        assert!(test_binary(r#"{"reason":"build-finished","success":true}"#).is_none());
        assert!(test_binary("Compiling").is_none());
    }
}
