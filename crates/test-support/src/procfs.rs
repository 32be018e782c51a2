//! The machine's processes as /proc shows them: the one parser of
//! `/proc/PID/stat` in the workspace. The sound servers use it to find a
//! server's group and a running JACK server, the test board its sshd's
//! sessions, and the suites (through test-support) their children and
//! leftovers.

/// One process, from `/proc/PID/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its pid.
    pub pid: u32,
    /// Its command name (`comm`, at most 15 bytes).
    pub comm: String,
    /// Its state letter (`R`, `S`, `Z`, …).
    pub state: char,
    /// Its parent's pid.
    pub ppid: u32,
    /// Its process group.
    pub pgrp: u32,
}

impl Process {
    /// Whether it runs: a zombie has ended and runs nothing, though its
    /// pid stays until it is reaped.
    pub fn running(&self) -> bool {
        self.state != 'Z'
    }
}

/// Process `pid`, if it exists.
pub fn process(pid: u32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &stat)
}

/// `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses,
/// so it ends at the last ')'.
fn parse_stat(pid: u32, stat: &str) -> Option<Process> {
    let (head, tail) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let mut fields = tail.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Process {
        pid,
        comm,
        state,
        ppid,
        pgrp,
    })
}

/// Every process on the machine; `None` when /proc cannot be read. A
/// process that ends while the list is read is left out.
pub fn processes() -> Option<Vec<Process>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    Some(
        dir.filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            process(pid)
        })
        .collect(),
    )
}

/// Process `pid`'s command line with its arguments joined by spaces, if
/// it exists (empty for a kernel thread or a zombie).
pub fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        String::from_utf8_lossy(&raw)
            .trim_end_matches('\0')
            .replace('\0', " "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_read_whole() {
        let p = parse_stat(42, "42 (a (b) c) S 7 9 9 0 -1").unwrap();
        assert_eq!(
            p,
            Process {
                pid: 42,
                comm: "a (b) c".into(),
                state: 'S',
                ppid: 7,
                pgrp: 9
            }
        );
        assert!(p.running());
        assert!(!parse_stat(42, "42 (x) Z 1 1").unwrap().running());
        assert_eq!(parse_stat(42, "42 (x) S"), None);
    }

    #[test]
    fn this_process_is_listed_with_its_parent_and_command_line() {
        let me = std::process::id();
        let all = processes().unwrap();
        let mine = all.iter().find(|p| p.pid == me).expect("listed");
        assert_eq!(mine.ppid, std::os::unix::process::parent_id());
        assert!(mine.running());
        let exe = std::env::current_exe().unwrap();
        assert!(cmdline(me).unwrap().starts_with(exe.to_str().unwrap()));
    }
}
