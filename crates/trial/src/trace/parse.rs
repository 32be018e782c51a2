//! `trace_pipe`'s lines read into scheduler events (`sched_switch`,
//! `sched_wakeup`, lost-event markers).

/// One scheduler event, as `trace_pipe` prints it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// `sched_switch` on `cpu`.
    Switch {
        /// CPU.
        cpu: usize,
        /// CLOCK_MONOTONIC ns.
        ts: u64,
        /// The task leaving.
        prev_comm: &'a str,
        /// Its pid.
        prev_pid: u32,
        /// Its kernel priority.
        prev_prio: i32,
        /// Whether it left runnable (preempted: state `R`/`R+`).
        prev_runnable: bool,
        /// The task coming in.
        next_comm: &'a str,
        /// Its pid.
        next_pid: u32,
        /// Its kernel priority.
        next_prio: i32,
    },
    /// `sched_wakeup`: `pid` became runnable on `target_cpu`.
    Wakeup {
        /// The CPU the event happened on.
        cpu: usize,
        /// The task running there then (the line's `comm-pid`).
        current: u32,
        /// CLOCK_MONOTONIC ns.
        ts: u64,
        /// The task.
        pid: u32,
        /// The CPU it will run on.
        target_cpu: usize,
    },
    /// `CPU:N [LOST M EVENTS]`.
    Lost(u64),
}

fn field<'a>(s: &'a str, key: &str, end: Option<&str>) -> Option<&'a str> {
    let at = s.find(key)? + key.len();
    let rest = &s[at..];
    Some(match end {
        Some(e) => &rest[..rest.rfind(e)?],
        None => rest.split_whitespace().next()?,
    })
}

/// Parses one `trace_pipe` line; `None` for anything else.
pub fn parse_line(line: &str) -> Option<Event<'_>> {
    if let Some(rest) = line.strip_prefix("CPU:") {
        let n = rest.split("[LOST ").nth(1)?.split_whitespace().next()?;
        return n.parse().ok().map(Event::Lost);
    }
    let (head, kind, body) = if let Some(i) = line.find(": sched_switch: ") {
        (&line[..i], 's', &line[i + 16..])
    } else if let Some(i) = line.find(": sched_wakeup: ") {
        (&line[..i], 'w', &line[i + 16..])
    } else {
        return None;
    };
    // `comm-pid [CPU] flags TIMESTAMP`: the comm may hold anything, so
    // read from the right.
    let mut it = head.split_whitespace().rev();
    let ts = parse_ts(it.next()?)?;
    let _flags = it.next()?;
    let cpu: usize = it
        .next()?
        .strip_prefix('[')?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    if kind == 'w' {
        // What is left is `comm-pid` (the comm may hold blanks and dashes).
        let current = it.next()?.rsplit_once('-')?.1.parse().ok()?;
        return Some(Event::Wakeup {
            cpu,
            current,
            ts,
            pid: field(body, " pid=", None)?.parse().ok()?,
            target_cpu: field(body, "target_cpu=", None)?.parse().ok()?,
        });
    }
    let (prev, next) = body.split_once(" ==> ")?;
    let state = field(prev, "prev_state=", None)?;
    Some(Event::Switch {
        cpu,
        ts,
        prev_comm: field(prev, "prev_comm=", Some(" prev_pid="))?,
        prev_pid: field(prev, " prev_pid=", None)?.parse().ok()?,
        prev_prio: field(prev, " prev_prio=", None)?.parse().ok()?,
        prev_runnable: state.starts_with('R'),
        next_comm: field(next, "next_comm=", Some(" next_pid="))?,
        next_pid: field(next, " next_pid=", None)?.parse().ok()?,
        next_prio: field(next, " next_prio=", None)?.parse().ok()?,
    })
}

/// `12541.288387` (seconds, µs) as ns.
fn parse_ts(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.')?;
    let sec: u64 = sec.parse().ok()?;
    let digits = frac.len().min(9);
    let frac_ns: u64 = frac[..digits].parse().ok()?;
    Some(sec * 1_000_000_000 + frac_ns * 10u64.pow((9 - digits) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SW: &str = "            bash-7921    [001] d..2. 12541.289620: sched_switch: prev_comm=my task prev_pid=7921 prev_prio=120 prev_state=S ==> next_comm=hackbench next_pid=7923 next_prio=120";
    const WK: &str = "            bash-7921    [001] dN.6. 12541.289617: sched_wakeup: comm=bash pid=7918 prio=120 target_cpu=001";

    #[test]
    fn parses_switch_wakeup_and_loss() {
        match parse_line(SW).unwrap() {
            Event::Switch {
                cpu,
                ts,
                prev_comm,
                prev_pid,
                prev_runnable,
                next_comm,
                next_pid,
                ..
            } => {
                assert_eq!((cpu, ts), (1, 12_541_289_620_000));
                assert_eq!(
                    (prev_comm, prev_pid, prev_runnable),
                    ("my task", 7921, false)
                );
                assert_eq!((next_comm, next_pid), ("hackbench", 7923));
            }
            e => panic!("{e:?}"),
        }
        assert_eq!(
            parse_line(WK),
            Some(Event::Wakeup {
                cpu: 1,
                current: 7921,
                ts: 12_541_289_617_000,
                pid: 7918,
                target_cpu: 1
            })
        );
        assert_eq!(parse_line("CPU:1 [LOST 42 EVENTS]"), Some(Event::Lost(42)));
        assert_eq!(parse_line("# tracer: nop"), None);
    }
}
