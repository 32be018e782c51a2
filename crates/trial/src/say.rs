//! Output that never panics: a dropped SSH session closes our stderr and
//! stdout, and `eprintln!`/`println!` would panic on the write error in the
//! middle of restoring knobs. Every line goes through here instead.

use std::fmt::Display;
use std::io::{self, Write};

/// One line on stderr, `xrun-trial: ` first; write errors are ignored.
pub fn say(line: impl Display) {
    let _ = writeln!(io::stderr().lock(), "xrun-trial: {line}");
}

/// A trial's progress: `xrun-trial: <stem>: <phase>` (the runner shows the
/// latest one beside its progress bar).
pub fn phase(stem: &str, what: impl Display) {
    say(format_args!("{stem}: {what}"));
}

/// Writes `text` to stdout and flushes; the error (a closed stdout) is the
/// caller's to ignore or report.
pub fn out(text: &str) -> io::Result<()> {
    let mut o = io::stdout().lock();
    o.write_all(text.as_bytes())?;
    o.flush()
}
