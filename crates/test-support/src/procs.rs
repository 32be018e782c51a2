//! What the suites ask of the machine's processes: a child started, a
//! process gone, nothing left behind. Built on the workspace's one /proc
//! parser (this crate's `procfs`, which the servers and the test board
//! use too).

pub use crate::procfs::{cmdline, process, processes, Process};

/// Starts `cmd` with `input` written to its stdin, which stays open (as
/// the runner keeps a trial's: the trial reads its spec, and takes the end
/// of its stdin as the host gone); stdout and stderr piped.
pub fn spawn_with_open_stdin(cmd: &mut std::process::Command, input: &[u8]) -> std::process::Child {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(input).unwrap();
    stdin.flush().unwrap();
    child
}

/// Every process now, or a panic when /proc cannot be read (a test that
/// looks for leftovers must not pass for want of looking).
fn all() -> Vec<Process> {
    processes().expect("/proc is readable")
}

/// Every other process that still has a command line, with it.
fn others_with_cmdline() -> impl Iterator<Item = (Process, String)> {
    let me = std::process::id();
    all()
        .into_iter()
        .filter(move |p| p.pid != me)
        .filter_map(|p| {
            let cmd = cmdline(p.pid)?;
            Some((p, cmd))
        })
}

/// `pid: command line` of every process whose command line contains
/// `needle`, this test process excluded.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    others_with_cmdline()
        .filter(|(_, cmd)| cmd.contains(needle))
        .map(|(p, cmd)| format!("{}: {cmd}", p.pid))
        .collect()
}

/// The children of `ppid` (zombies included: a test may look for one).
pub fn children_of(ppid: u32) -> Vec<Process> {
    all().into_iter().filter(|p| p.ppid == ppid).collect()
}

/// Pids of the children of `ppid` whose command line contains `needle`.
pub fn children_named(ppid: u32, needle: &str) -> Vec<u32> {
    children_of(ppid)
        .into_iter()
        .filter(|p| cmdline(p.pid).is_some_and(|c| c.contains(needle)))
        .map(|p| p.pid)
        .collect()
}

/// The pid of a process whose command line contains every one of
/// `needles`, this test process excluded; the lowest if several.
pub fn pid_of(needles: &[&str]) -> Option<u32> {
    others_with_cmdline()
        .filter(|(p, cmd)| p.running() && needles.iter().all(|n| cmd.contains(n)))
        .map(|(p, _)| p.pid)
        .min()
}

/// Whether process `pid` runs (exists and is not a zombie: an orphan
/// reparented to an init that does not reap may linger as one).
pub fn alive(pid: u32) -> bool {
    process(pid).is_some_and(|p| p.running())
}

/// The thread ids of process `pid` (none once it is gone).
pub fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn a_child_is_found_by_parent_and_name_and_is_gone_once_reaped() {
        let me = std::process::id();
        // A duration no other sleep on the machine has.
        let seconds = format!("600.{me}");
        let mut child = Command::new("sleep")
            .arg(&seconds)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // spawn returns once exec has begun, not finished: the kernel sets
        // the new program's command line a moment later (empty until then).
        assert!(
            crate::wait_for(30, || cmdline(pid).is_some_and(|c| c.contains(&seconds))),
            "sleep {seconds} never showed its command line"
        );
        assert_eq!(children_named(me, &seconds), vec![pid]);
        assert_eq!(pid_of(&["sleep", &seconds]), Some(pid));
        assert_eq!(
            processes_mentioning(&seconds),
            vec![format!("{pid}: sleep {seconds}")]
        );
        assert!(alive(pid));
        assert_eq!(threads(pid), vec![pid]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!alive(pid));
        assert!(threads(pid).is_empty());
        assert!(children_named(me, &seconds).is_empty());
    }
}
