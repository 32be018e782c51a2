//! The VM lab: real kernels under QEMU as boards (`[target] vm`), and
//! `cargo xtask lab kernel`, which fetches one to try, and `cargo xtask lab
//! source`, a kernel tree to build and bisect.

pub mod cpio;
pub mod initramfs;
pub mod kernel;
pub mod qemu;
pub mod qmp;
pub mod source;
pub mod userland;
pub mod vm;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

/// Arguments of `cargo xtask lab`.
#[derive(clap::Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    verb: LabVerb,
}

#[derive(clap::Subcommand, Debug)]
enum LabVerb {
    /// Fetch a kernel to boot (Debian's) and print the `[target] vm`
    /// lines that boot it.
    Kernel(kernel::KernelArgs),
    /// Make a kernel tree for the lab (Debian's source, a git repository
    /// with one base commit, configured: tinyconfig and the lab's
    /// fragment) and print how to build and boot it.
    Source(source::SourceArgs),
}

/// `cargo xtask lab …`.
pub fn run(args: &LabArgs) -> Result<ExitCode> {
    match &args.verb {
        LabVerb::Kernel(k) => kernel::run(k),
        LabVerb::Source(s) => source::run(s),
    }
}

/// Makes `dir` in the lab's cache once: `make` fills a temporary sibling,
/// which is renamed to `dir` when whole, so that an interrupted make never
/// leaves one that looks finished (`dir` is finished when it holds the
/// file `ready`, which `make` writes last). A `dir` already finished is
/// kept; one another process finished first serves.
pub fn make_once(dir: &Path, ready: &str, make: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if dir.join(ready).is_file() {
        return Ok(());
    }
    let parent = dir
        .parent()
        .with_context(|| format!("{}: no parent directory", dir.display()))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    std::fs::create_dir_all(parent)?;
    sweep_dead_temporaries(parent, &name);
    let work = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let made = make(&work).and_then(|()| {
        if dir.exists() && !dir.join(ready).is_file() {
            // Half of one an interrupted make left, before `ready`.
            let _ = std::fs::remove_dir_all(dir);
        }
        match std::fs::rename(&work, dir) {
            Ok(()) => Ok(()),
            // Another make finished it first: theirs serves.
            Err(_) if dir.join(ready).is_file() => Ok(()),
            Err(e) => Err(e).with_context(|| format!("moving it to {}", dir.display())),
        }
    });
    let _ = std::fs::remove_dir_all(&work);
    made
}

/// Removes the temporaries of `name` in `parent` whose maker is gone (a
/// make killed half-way: a kernel tree's is over a gigabyte); a living
/// maker's is its own.
fn sweep_dead_temporaries(parent: &Path, name: &str) {
    let prefix = format!(".{name}.tmp-");
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: kill(2) with signal 0 only checks for existence.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_tree_is_made_once_and_never_left_half_made() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("kernels/6.1");
        // A make that fails leaves neither the tree nor its temporary.
        let e = make_once(&dir, "ready", |w| {
            std::fs::create_dir_all(w)?;
            std::fs::write(w.join("half"), "")?;
            anyhow::bail!("download failed")
        });
        assert!(e.unwrap_err().to_string().contains("download failed"));
        assert!(!dir.exists());
        assert_eq!(
            std::fs::read_dir(t.path().join("kernels")).unwrap().count(),
            0
        );
        // One that finishes is renamed into place, with its marker.
        make_once(&dir, "ready", |w| {
            std::fs::create_dir_all(w)?;
            std::fs::write(w.join("ready"), "x")?;
            Ok(())
        })
        .unwrap();
        assert!(dir.join("ready").is_file());
        // Once made, never made again.
        make_once(&dir, "ready", |_| panic!("made twice")).unwrap();
        // A half-made one (no marker) is replaced.
        std::fs::remove_file(dir.join("ready")).unwrap();
        make_once(&dir, "ready", |w| {
            std::fs::create_dir_all(w)?;
            std::fs::write(w.join("ready"), "y")?;
            Ok(())
        })
        .unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("ready")).unwrap(), "y");
    }

    #[test]
    fn a_killed_makers_temporary_is_swept_and_a_living_ones_kept() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("source/linux");
        // A pid that is no process (above any pid_max Linux allows).
        let dead = t
            .path()
            .join(format!("source/.linux.tmp-{}", libc::pid_t::MAX));
        // A living one: our parent (the test harness' runner or a shell).
        let living = t.path().join(format!(
            "source/.linux.tmp-{}",
            std::os::unix::process::parent_id()
        ));
        let other = t.path().join("source/.other.tmp-1");
        for d in [&dead, &living, &other] {
            std::fs::create_dir_all(d.join("half")).unwrap();
        }
        make_once(&dir, "ready", |w| {
            std::fs::create_dir_all(w)?;
            std::fs::write(w.join("ready"), "x")?;
            Ok(())
        })
        .unwrap();
        assert!(!dead.exists(), "a dead maker's temporary is left");
        assert!(living.exists() && other.exists());
    }
}
