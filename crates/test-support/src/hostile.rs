//! A compromised board, as the host sees it: a directory of board binaries
//! (for `--bin-dir`) whose `xrun-trial` is a script that misbehaves on the
//! commands a test chooses and hands every other command to the suite's
//! real `xrun-trial`. The player and hackbench beside it are the real
//! ones, so a misbehaving `xrun-trial` can still run a real trial and then
//! lie about it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::boards;

/// A board directory with a fake `xrun-trial`; removed on drop.
pub struct FakeBoard {
    dir: tempfile::TempDir,
}

impl FakeBoard {
    /// A board whose `xrun-trial SUBCOMMAND …` runs `script` (sh; `$REAL`
    /// is the real `xrun-trial`, `"$@"` the arguments) for each
    /// (subcommand, script) in `fakes`, and the real one for the others.
    pub fn new(fakes: &[(&str, &str)]) -> FakeBoard {
        let real = boards::bin_dir();
        let dir = tempfile::tempdir().unwrap();
        for b in ["xrun-player", "xrun-hackbench"] {
            std::fs::copy(real.join(b), dir.path().join(b)).unwrap();
        }
        let mut cases = String::new();
        for (cmd, script) in fakes {
            cases.push_str(&format!("  {cmd})\n{script}\n    ;;\n"));
        }
        let text = format!(
            "#!/bin/sh\n# A compromised board's xrun-trial (xrunbench's tests).\n\
             REAL={real}\ncase \"$1\" in\n{cases}  *) exec \"$REAL\" \"$@\" ;;\nesac\n",
            real = shell_quote(&real.join("xrun-trial").display().to_string()),
        );
        let path = dir.path().join("xrun-trial");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeBoard { dir }
    }

    /// The directory to give as `--bin-dir`.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The fake `xrun-trial`.
    pub fn trial(&self) -> PathBuf {
        self.dir.path().join("xrun-trial")
    }
}

/// `s` quoted for sh.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A `run` script: the real trial, whose record's `config` is replaced by
/// `config` on its way out (a board that names the file its record goes
/// to).
pub fn record_renamed(config: &str) -> String {
    format!(
        "    \"$REAL\" \"$@\" | sed 's|\"config\": \"[^\"]*\"|\"config\": {}|'",
        serde_quote(config)
    )
}

/// `s` as a JSON string (no characters that need escaping expected).
fn serde_quote(s: &str) -> String {
    format!("\"{s}\"")
}

/// A line of a `run` script claiming, on stderr, that the trial is pid
/// `pid` (the marker a link's trial command prints first): a board that
/// would have the host signal a process of its choosing.
pub fn claims_pid(pid: u32) -> String {
    format!("    echo 'xrunbench-pid {pid}' >&2")
}

/// A `run` script: the real trial, whose record says on its way out that
/// it ran on kernel `kernel`, boot `boot_id` and architecture `arch` (a
/// board that passes a record off as another machine's).
pub fn record_of_another_machine(kernel: &str, boot_id: &str, arch: &str) -> String {
    let field = |name: &str, value: &str| {
        format!(
            "s|\"{name}\": \"[^\"]*\"|\"{name}\": {}|",
            serde_quote(value)
        )
    };
    format!(
        "    \"$REAL\" \"$@\" | sed -e '{}' -e '{}' -e '{}'",
        field("kernel_release", kernel),
        field("boot_id", boot_id),
        field("arch", arch)
    )
}

/// A FIFO at `path` with no writer: a reader that opens it blocking waits
/// for ever.
pub fn fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo {}", path.display());
}

/// A file of `len` zero bytes at `path`, sparse: a document past a byte
/// bound that costs the disk nothing.
pub fn sparse_file(path: &Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// The JSON document `doc` (an object) with `n` empty strings more in its
/// array `field` (which must be the first field of that name in `doc`): a
/// record that is small as bytes and huge once parsed.
pub fn with_empty_strings(doc: &str, field: &str, n: usize) -> String {
    let key = format!("\"{field}\":");
    let at = doc.find(&key).expect("the field is in the document") + key.len();
    let open = at + doc[at..].find('[').expect("the field is an array") + 1;
    let mut out = String::with_capacity(doc.len() + 3 * n);
    out.push_str(&doc[..open]);
    for _ in 0..n {
        out.push_str("\"\",");
    }
    let rest = &doc[open..];
    if rest.trim_start().starts_with(']') {
        out.pop();
    }
    out.push_str(rest);
    out
}
