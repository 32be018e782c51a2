//! Reading what a target sends back, bounded: a board is not trusted (a
//! compromised one can print without end, or lines without end), so every
//! byte read from it counts against a limit, and past the limit the
//! command is cut off instead of read whole. Lines are escaped onto one
//! printable line before anything shows them: a board's terminal escapes
//! never reach the user's terminal.

use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use xrunbench_schema::doc::one_line;

/// The largest trial record read back, bytes: the bounded reader's own
/// (its documentation says why).
pub use xrunbench_schema::bounded::RECORD_MAX;

/// The largest `probe`, `check` or `restore` output read back, bytes.
pub use xrunbench_schema::bounded::REPORT_MAX;

/// The longest stderr line shown; the rest of a longer line is dropped
/// (and said so).
pub const LINE_MAX: usize = 4096;

/// The most stderr read from one command, bytes: a trial says a few lines
/// of progress, `check` and `restore` one per journal.
pub const STDERR_MAX: usize = 4 << 20;

/// Set once a command printed more than its limit; shared by its readers.
#[derive(Clone, Default)]
pub struct Overflow(Arc<AtomicBool>);

impl Overflow {
    /// Whether the limit was passed.
    pub fn passed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Reads `from` to its end in a thread, keeping at most `max` bytes: past
/// that `overflow` is set and the rest is read and dropped (so the writer
/// is never blocked on a full pipe while it is being stopped).
pub fn read_capped<R: Read + Send + 'static>(
    from: Option<R>,
    max: usize,
    overflow: &Overflow,
) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let overflow = overflow.clone();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(mut r) = from {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) if kept.len() + n <= max => kept.extend_from_slice(&buf[..n]),
                    Ok(_) => overflow.set(),
                }
            }
        }
        let _ = tx.send(kept);
    });
    rx
}

/// `from`'s lines, escaped onto one printable line each (a line longer
/// than [`LINE_MAX`] cut there, and said so), from a thread. Past
/// [`STDERR_MAX`] bytes in all `overflow` is set and nothing more is
/// passed on.
pub fn lines_capped<R: Read + Send + 'static>(
    from: Option<R>,
    overflow: &Overflow,
) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let Some(from) = from else {
        return rx;
    };
    let overflow = overflow.clone();
    std::thread::spawn(move || {
        let mut r = BufReader::new(from);
        let mut total = 0usize;
        let mut line = Vec::new();
        loop {
            line.clear();
            let budget = STDERR_MAX.saturating_sub(total);
            let (n, cut) = match read_line_capped(&mut r, &mut line, budget) {
                Ok(x) => x,
                Err(_) => break,
            };
            if n == 0 {
                break;
            }
            total = total.saturating_add(n);
            if total > STDERR_MAX {
                // Past the limit: say so, pass nothing more on, and drain
                // so that the writer is never blocked while it is stopped.
                overflow.set();
                let _ = std::io::copy(&mut r, &mut std::io::sink());
                break;
            }
            let mut text = one_line(&String::from_utf8_lossy(&line));
            if cut > 0 {
                text.push_str(&format!(" … [{cut} more bytes of this line not shown]"));
            }
            if tx.send(text).is_err() {
                // Nobody listens any more: drain, so the writer is not
                // blocked on a full pipe.
                let _ = std::io::copy(&mut r, &mut std::io::sink());
                break;
            }
        }
    });
    rx
}

/// Reads one line (without its newline) into `line`, at most [`LINE_MAX`]
/// bytes of it, consuming no more than just past `budget` bytes (an
/// endless line ends there); returns the bytes consumed and how many were
/// dropped.
fn read_line_capped<R: BufRead>(
    r: &mut R,
    line: &mut Vec<u8>,
    budget: usize,
) -> std::io::Result<(usize, usize)> {
    let (mut consumed, mut dropped) = (0, 0);
    loop {
        if consumed > budget {
            return Ok((consumed, dropped));
        }
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok((consumed, dropped));
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1),
            None => (buf, buf.len()),
        };
        let room = LINE_MAX.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        dropped += chunk.len().saturating_sub(room);
        let newline = done > chunk.len();
        r.consume(done);
        consumed += done;
        if newline {
            return Ok((consumed, dropped));
        }
    }
}

/// What a reader thread sent, waiting at most until `deadline`; `None`
/// when it is still reading (the pipe is held open elsewhere: an SSH
/// connection's master, a child of the command): the thread is left to
/// end on its own.
pub fn collect<T>(rx: &mpsc::Receiver<T>, deadline: Instant) -> Option<T> {
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .ok()
}

/// How long readers may take to see their end once the command is gone.
pub const DRAIN: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_its_limit_is_dropped_and_said() {
        let o = Overflow::default();
        let rx = read_capped(Some(&b"0123456789"[..]), 4, &o);
        assert!(collect(&rx, Instant::now() + DRAIN).unwrap().len() <= 4);
        assert!(o.passed());
        let o = Overflow::default();
        let rx = read_capped(Some(&b"0123"[..]), 4, &o);
        assert_eq!(collect(&rx, Instant::now() + DRAIN).unwrap(), b"0123");
        assert!(!o.passed());
    }

    #[test]
    fn lines_are_escaped_and_long_ones_cut() {
        let long = "x".repeat(LINE_MAX + 10);
        let input = format!("a\u{1b}]0;t\u{7}b\n{long}\nlast");
        let o = Overflow::default();
        let rx = lines_capped(Some(std::io::Cursor::new(input.into_bytes())), &o);
        let lines: Vec<String> = rx.iter().collect();
        assert_eq!(lines[0], "a\\u{1b}]0;t\\u{7}b");
        assert_eq!(
            lines[1],
            format!(
                "{} … [10 more bytes of this line not shown]",
                "x".repeat(LINE_MAX)
            )
        );
        assert_eq!(lines[2], "last");
        assert!(!o.passed());
    }

    #[test]
    fn one_endless_line_sets_the_overflow() {
        let o = Overflow::default();
        let rx = lines_capped(Some(std::io::repeat(b'x').take(STDERR_MAX as u64 + 10)), &o);
        let lines: Vec<String> = rx.iter().collect();
        assert!(lines.is_empty(), "{}", lines.len());
        assert!(o.passed());
    }

    #[test]
    fn endless_stderr_sets_the_overflow() {
        let o = Overflow::default();
        let lines = "y\n".repeat(STDERR_MAX / 2 + 10).into_bytes();
        let rx = lines_capped(Some(std::io::Cursor::new(lines)), &o);
        assert!(rx.iter().count() > 0);
        assert!(o.passed());
    }
}
