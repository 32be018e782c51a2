//! Reading a document from outside, bounded: what a board, a lab or a run
//! directory hands us is hostile until checked, and a parser given it
//! whole can be made to allocate far more than its bytes (40 M empty
//! strings in 120 MB took 2.5 GB as JSON values). So every such document
//! is read through here: only a regular file (never a FIFO, which blocks
//! for ever, nor a device like `/dev/zero`, which never ends), at most so
//! many bytes, and then scanned in one pass — values, strings, nesting and
//! each string's length counted against [`Limits`] — before any parser
//! sees it. Std and libc only, so that the board binaries could use it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest trial record read back, bytes. A record's size is set by
/// the player's events (about 400 bytes each as written): an hour-long
/// trial with an underrun every 20 ms is 70 MB; the load's rounds are
/// bounded (at most 1024 kept, about 150 KB). Past this the trial is lost.
pub const RECORD_MAX: usize = 128 << 20;

/// The largest `probe`, `check` or `restore` output read back, bytes (a
/// probe is a few KB, a check one line per problem per configuration).
pub const REPORT_MAX: usize = 8 << 20;

/// What one document may hold. A limit passed is named in the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Its bytes.
    pub bytes: usize,
    /// Its JSON values (every number, string, literal, array and object;
    /// object keys not counted).
    pub values: usize,
    /// Its string values (object keys not counted): each one is an
    /// allocation of its own once parsed, however short.
    pub strings: usize,
    /// How deep arrays and objects nest.
    pub depth: usize,
    /// The longest string (a key or a value), bytes as written.
    pub string_bytes: usize,
}

impl Limits {
    /// Every document of a run directory, and a trial record as a board
    /// prints it (the largest of them; a manifest, a lost-trial entry and
    /// a report are far smaller).
    ///
    /// - `bytes`: [`RECORD_MAX`].
    /// - `values`: an underrun event is some 13 values in 400 bytes, so a
    ///   record of [`RECORD_MAX`] bytes holds some 4.4 M; 8 Mi is twice
    ///   that, and refuses a document of a value every 16 bytes or less,
    ///   which no player writes.
    /// - `strings`: an event holds at most 4 string values (its clocks and
    ///   sources), some 1.3 M in [`RECORD_MAX`] bytes; the rest of a record
    ///   (argv-like `player_command`, knobs, the machine) needs tens or
    ///   hundreds. 2 Mi keeps a hostile record of empty strings to some
    ///   50 MB once parsed, where 40 M of them took 2.5 GB.
    /// - `depth`: a record nests 5 deep (record, player, events, event,
    ///   `also_seen_by`); 32 leaves room, and keeps a recursive parser's
    ///   stack small.
    /// - `string_bytes`: the longest strings a record needs are a failure
    ///   reason (a few lines of a board's stderr) and a kernel command line
    ///   (4 KiB at most): 1 MiB leaves room.
    pub const DOCUMENT: Limits = Limits {
        bytes: RECORD_MAX,
        values: 8 << 20,
        strings: 2 << 20,
        depth: 32,
        string_bytes: 1 << 20,
    };

    /// These limits with at most `bytes` bytes.
    pub const fn with_bytes(self, bytes: usize) -> Limits {
        Limits { bytes, ..self }
    }
}

/// Why a document was not read: one line, without the file's name (the
/// caller has it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The bytes of the regular file `path`, at most `max`: anything else (a
/// FIFO, a device, a socket, a directory — or a link to one) is refused
/// without a byte read, as is a file of more than `max` bytes.
pub fn read_regular(path: &Path, max: usize) -> Result<Vec<u8>, Refused> {
    // Opening a device can act (a watchdog starts, a tape rewinds): what
    // is not a regular file is refused before it is opened.
    let before = std::fs::metadata(path)
        .map_err(|e| Refused(format!("cannot read: {e}")))?
        .file_type();
    if !before.is_file() {
        return Err(not_regular(before));
    }
    // Non-blocking, so that a FIFO put in its place since with no writer
    // returns at once and the check below refuses it; a regular file
    // reads as usual.
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Refused(format!("cannot open: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| Refused(format!("cannot read: {e}")))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(not_regular(kind));
    }
    if meta.len() > max as u64 {
        return Err(too_big(max));
    }
    read_at_most(f, max, meta.len())
}

/// At most `max` bytes of `f` (of `len` bytes by its metadata): one more
/// is read, so a file that grew past `max` since is refused too.
fn read_at_most(f: File, max: usize, len: u64) -> Result<Vec<u8>, Refused> {
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(max).min(max) + 1);
    f.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Refused(format!("cannot read: {e}")))?;
    if bytes.len() > max {
        return Err(too_big(max));
    }
    Ok(bytes)
}

fn not_regular(kind: std::fs::FileType) -> Refused {
    Refused(format!("is {}: expected a regular file", kind_of(kind)))
}

fn too_big(max: usize) -> Refused {
    Refused(format!(
        "more than {max} bytes: refused (the limit is {max})"
    ))
}

/// `a directory`, `a character device`, … : what a path is, as every tool
/// names it (the runner's validation, the player, this reader).
pub fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        "a regular file"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// [`read_regular`] within `limits.bytes`, then [`scan_json`]: the bytes
/// of a JSON document no parser can be made to blow up on.
pub fn read_json(path: &Path, limits: &Limits) -> Result<Vec<u8>, Refused> {
    let bytes = read_regular(path, limits.bytes)?;
    scan_json(&bytes, limits)?;
    Ok(bytes)
}

/// Counts, in one pass and without allocating, what parsing `bytes` as
/// JSON would build, and refuses it past `limits` (the limit named). It
/// does not check that `bytes` is JSON: the parser after it does.
pub fn scan_json(bytes: &[u8], limits: &Limits) -> Result<(), Refused> {
    if bytes.len() > limits.bytes {
        return Err(too_big(limits.bytes));
    }
    Scan::new(limits).run(bytes)
}

/// The state of [`scan_json`]'s pass.
struct Scan<'a> {
    limits: &'a Limits,
    /// Whether each open container is an object, innermost last (at most
    /// `limits.depth`: the stack is bounded too).
    objects: Vec<bool>,
    values: usize,
    strings: usize,
    /// Inside an object, a string is a key when it follows `{` or `,`.
    key_next: bool,
    /// Inside a number or a literal (`true`, `false`, `null`).
    in_scalar: bool,
}

impl<'a> Scan<'a> {
    fn new(limits: &'a Limits) -> Self {
        Scan {
            limits,
            objects: Vec::new(),
            values: 0,
            strings: 0,
            key_next: false,
            in_scalar: false,
        }
    }

    fn run(mut self, bytes: &[u8]) -> Result<(), Refused> {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let scalar = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.');
            if scalar && !self.in_scalar {
                self.value()?;
            }
            self.in_scalar = scalar;
            match b {
                b'"' => i = self.string(bytes, i + 1)?,
                b'[' | b'{' => self.open(b == b'{')?,
                b']' | b'}' => {
                    self.objects.pop();
                    self.key_next = false;
                }
                b',' => self.key_next = self.objects.last() == Some(&true),
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// One more value.
    fn value(&mut self) -> Result<(), Refused> {
        self.values += 1;
        if self.values > self.limits.values {
            return Err(Refused(format!(
                "more than {} JSON values: refused (the limit is {})",
                self.limits.values, self.limits.values
            )));
        }
        Ok(())
    }

    /// An array or an object opens.
    fn open(&mut self, object: bool) -> Result<(), Refused> {
        self.value()?;
        if self.objects.len() >= self.limits.depth {
            return Err(Refused(format!(
                "nested more than {} deep: refused (the limit is {})",
                self.limits.depth, self.limits.depth
            )));
        }
        self.objects.push(object);
        self.key_next = object;
        Ok(())
    }

    /// The string starting at `start` (just past its opening quote);
    /// returns the index of its closing quote (or the end).
    fn string(&mut self, bytes: &[u8], start: usize) -> Result<usize, Refused> {
        let key = std::mem::take(&mut self.key_next);
        if !key {
            self.value()?;
            self.strings += 1;
            if self.strings > self.limits.strings {
                return Err(Refused(format!(
                    "more than {} strings: refused (the limit is {})",
                    self.limits.strings, self.limits.strings
                )));
            }
        }
        let mut i = start;
        while i < bytes.len() && bytes[i] != b'"' {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let len = i.min(bytes.len()) - start;
        if len > self.limits.string_bytes {
            return Err(Refused(format!(
                "a string of {len} bytes: refused (the limit is {} bytes a string)",
                self.limits.string_bytes
            )));
        }
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        bytes: 1000,
        values: 10,
        strings: 3,
        depth: 3,
        string_bytes: 5,
    };

    #[test]
    fn a_document_within_the_limits_passes() {
        let doc = br#"{"a": [1, -2.5e3, "xy\"z", true], "b": {"c": null}}"#;
        scan_json(doc, &SMALL).unwrap();
        // Keys count neither as values nor as strings.
        scan_json(br#"{"k1":1,"k2":2,"k3":3,"k4":4}"#, &SMALL).unwrap();
    }

    #[test]
    fn each_limit_is_named_when_passed() {
        let cases: [(&[u8], &str); 5] = [
            (br#"["","","",""]"#, "more than 3 strings"),
            (b"[1,2,3,4,5,6,7,8,9,10]", "more than 10 JSON values"),
            (b"[[[[]]]]", "nested more than 3 deep"),
            (br#"{"k": "abcdef"}"#, "a string of 6 bytes"),
            (&[b' '; 1001], "more than 1000 bytes"),
        ];
        for (doc, want) in cases {
            let e = scan_json(doc, &SMALL).unwrap_err().0;
            assert!(e.contains(want) && e.contains("limit"), "{e}");
        }
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("xrunbench-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.json");
        std::fs::write(&file, b"[1]").unwrap();
        assert_eq!(read_json(&file, &SMALL).unwrap(), b"[1]");
        let e = read_regular(Path::new("/dev/zero"), 10).unwrap_err().0;
        assert!(e.contains("a character device"), "{e}");
        let e = read_regular(&dir, 10).unwrap_err().0;
        assert!(e.contains("a directory"), "{e}");
        let e = read_regular(&file, 2).unwrap_err().0;
        assert!(e.contains("more than 2 bytes"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
