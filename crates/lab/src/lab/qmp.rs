//! QEMU's machine protocol (QMP) on a unix socket in the guest's private
//! directory: how the host learns which port the kernel gave the guest's
//! forward (`hostfwd=tcp:127.0.0.1:0-:22`, `info usernet`), so that two
//! guests started at once can never be handed the same port — the port is
//! bound by QEMU itself, never chosen beforehand and released.
//!
//! QEMU is our own child, but what it sends is still read within bounds: a
//! line at most [`LINE_MAX`], a reply within [`REPLY_WAIT`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

/// The longest line of QMP we read.
const LINE_MAX: u64 = 1 << 20;

/// How long a reply may take: QEMU answers from its main loop, which a
/// host busy with other work can delay, but never by this much.
const REPLY_WAIT: Duration = Duration::from_secs(60);

/// A QMP connection, past its capabilities negotiation.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects to the QMP socket at `path`, waiting while QEMU has not
    /// made it yet; `gone` says why to stop waiting (QEMU ended), checked
    /// between attempts, and [`REPLY_WAIT`] bounds the wait.
    pub fn connect(path: &Path, mut gone: impl FnMut() -> Option<String>) -> Result<Qmp> {
        let started = Instant::now();
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) => {
                    if let Some(why) = gone() {
                        bail!("{why}");
                    }
                    if started.elapsed() > REPLY_WAIT {
                        return Err(e).with_context(|| {
                            format!("connecting to QEMU's monitor at {}", path.display())
                        });
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        stream.set_read_timeout(Some(REPLY_WAIT))?;
        stream.set_write_timeout(Some(REPLY_WAIT))?;
        let mut q = Qmp {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        };
        let greeting = q.line()?;
        if greeting.get("QMP").is_none() {
            bail!("QEMU's monitor did not greet as QMP: {greeting}");
        }
        q.execute("qmp_capabilities", json!({}))?;
        Ok(q)
    }

    /// Runs `command` with `arguments`: its `return` value, or its error.
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value> {
        let mut request = serde_json::to_vec(&json!({
            "execute": command,
            "arguments": arguments,
        }))?;
        request.push(b'\n');
        self.writer
            .write_all(&request)
            .with_context(|| format!("sending {command} to QEMU"))?;
        loop {
            let mut reply = self.line()?;
            if reply.get("event").is_some() {
                continue;
            }
            if let Some(r) = reply.get_mut("return") {
                return Ok(r.take());
            }
            bail!(
                "QEMU refused {command}: {}",
                xrunbench_schema::doc::one_line(&reply["error"].to_string())
            );
        }
    }

    /// The text of a human monitor command (`info usernet`).
    pub fn human(&mut self, command_line: &str) -> Result<String> {
        let r = self.execute(
            "human-monitor-command",
            json!({ "command-line": command_line }),
        )?;
        Ok(r.as_str().unwrap_or_default().to_string())
    }

    /// The host port QEMU bound for the forward to the guest's `guest_port`.
    pub fn forwarded_port(&mut self, guest_port: u16) -> Result<u16> {
        let text = self.human("info usernet")?;
        forwarded_port(&text, guest_port).with_context(|| {
            format!(
                "QEMU forwards no host port to the guest's port {guest_port}: {}",
                xrunbench_schema::doc::one_line(text.trim())
            )
        })
    }

    /// One JSON line from QEMU.
    fn line(&mut self) -> Result<Value> {
        let mut buf = Vec::new();
        (&mut self.reader)
            .take(LINE_MAX)
            .read_until(b'\n', &mut buf)
            .context("reading QEMU's monitor")?;
        if buf.last() != Some(&b'\n') {
            bail!(
                "QEMU's monitor closed or sent a line over {LINE_MAX} bytes ({} read)",
                buf.len()
            );
        }
        serde_json::from_slice(&buf).context("QEMU's monitor sent a line that is not JSON")
    }
}

/// The host port of `info usernet`'s forward to `guest_port`:
/// `TCP[HOST_FORWARD]  8  127.0.0.1 40945  10.0.2.15  22  0  0`.
pub fn forwarded_port(usernet: &str, guest_port: u16) -> Option<u16> {
    usernet.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            [kind, _fd, _src, src_port, _dst, dst_port, ..]
                if kind.starts_with("TCP[HOST_FORWARD]") && dst_port.parse() == Ok(guest_port) =>
            {
                src_port.parse().ok().filter(|p| *p != 0)
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forwarded_port_is_read_from_info_usernet() {
        // QEMU 7.2's `info usernet`, as it printed here.
        let text = "Hub -1 (#net078):\r\n  Protocol[State]    FD  Source Address  Port   Dest. \
                    Address  Port RecvQ SendQ\r\n  TCP[HOST_FORWARD]   8       127.0.0.1 40945 \
                          10.0.2.15    22     0     0\r\n";
        assert_eq!(forwarded_port(text, 22), Some(40945));
        assert_eq!(forwarded_port(text, 23), None);
        assert_eq!(
            forwarded_port("TCP[HOST_FORWARD] 8 127.0.0.1 0 10.0.2.15 22 0 0", 22),
            None
        );
        assert_eq!(forwarded_port("", 22), None);
    }
}
