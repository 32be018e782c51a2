//! Writing and dating documents: one atomic write, one UTC formatter, and
//! one way to quote a document's own text in a one-line error, for every
//! tool (std only, so the board binaries can use them).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsync,
/// rename, then fsync of the directory. A reader sees the old file or the
/// whole new one, never half of it; on any failure the temporary file is
/// removed and the old file (if any) is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = temp_path_for(path);
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = renamed {
        let _ = fs::remove_file(&tmp);
        return Err(io::Error::new(
            e.kind(),
            format!("writing {}: {e}", path.display()),
        ));
    }
    // The rename is durable only once the directory entry is.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The temporary name [`write_atomic`] uses for `path`: hidden, beside it,
/// and marked with our pid so a sweep can tell a dead writer's leftovers.
pub fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// The pid a temporary's name carries: `PID` of `.NAME.tmp-PID`.
pub fn temp_owner(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    name.rsplit_once(".tmp-")
        .and_then(|(_, pid)| pid.parse::<u32>().ok())
}

/// Whether process `pid` is gone: no /proc entry, or a zombie (its files
/// are closed; in a container nobody may ever reap it).
pub fn process_gone(pid: u32) -> bool {
    let stat = match fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) {
        Ok(s) => s,
        Err(_) => return true,
    };
    // `pid (comm) STATE …`: the comm may hold anything, so read after ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, Some("Z" | "X"))
}

/// Removes every temporary (`.NAME.tmp-PID`) under `dir`, recursively,
/// whose writer is gone: what a SIGKILL between the create and the rename
/// of [`write_atomic`] (or a scratch file named the same way) leaves.
/// Returns what it removed. A live writer's files are never touched.
pub fn sweep_dead_temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { continue };
        let path = e.path();
        if kind.is_dir() {
            removed.extend(sweep_dead_temporaries(&path));
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if temp_owner(&name).is_some_and(process_gone) && fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// `t` as RFC 3339 UTC with whole seconds: `2026-11-30T21:49:32Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let c = Civil::of(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// `t` as RFC 3339 UTC with milliseconds: `2026-11-30T21:49:32.123Z`.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let c = Civil::of(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second, c.millis
    )
}

/// `t` as `YYYYMMDDTHHMMSSZ`: UTC, sorts by time, safe in file names.
pub fn utc_stamp(t: SystemTime) -> String {
    let c = Civil::of(t);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// UTC calendar fields of an instant.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
}

impl Civil {
    /// Howard Hinnant's days-to-civil algorithm: exact for every date,
    /// without a date crate for one function. Instants before the epoch
    /// count as the epoch.
    fn of(t: SystemTime) -> Civil {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX / 2);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        Civil {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
            millis: since.subsec_millis(),
        }
    }
}

/// The most bytes [`one_line`] shows of a text: a reason or a line a
/// board, a lab or a log hands over fits many times (a serde error quoting
/// a field, a failed trial's reason), while a 50 MB "reason" is cut here
/// instead of flooding the terminal and every document that stores it.
pub const MAX_SHOWN: usize = 4096;

/// The format characters (Unicode General_Category Cf, Unicode 15, with
/// the unassigned U+2065 of the bidi block): invisible, and the bidi ones
/// (U+202A–U+202E, U+2066–U+2069) reorder what a terminal shows after
/// them. A hand table: the board binaries carry no Unicode table crate.
const FORMAT_CHARS: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// Whether `c` is one [`one_line`] escapes: a control character (Cc: C0,
/// DEL, C1, so also `\t`, `\n`, U+0085), a format character (Cf, see
/// [`FORMAT_CHARS`]), or the line and paragraph separators U+2028/U+2029
/// — everything that is invisible, moves the cursor or reorders the line.
/// Other spaces (U+00A0, U+3000) are shown: they neither hide text nor
/// break the line.
pub fn is_hidden(c: char) -> bool {
    let cp = u32::from(c);
    c.is_control()
        || matches!(cp, 0x2028 | 0x2029)
        || FORMAT_CHARS.iter().any(|&(lo, hi)| (lo..=hi).contains(&cp))
}

/// `msg` on one printable line, at most [`MAX_SHOWN`] bytes: the one
/// escaper for every text from outside (a board's line or reason, a lab's
/// device name, a log's field) and for serde errors, which quote a
/// document's own strings (an unknown field's name). Each [`is_hidden`]
/// character is escaped as Rust writes it (`\n`, `\u{1b}`, `\u{202e}`);
/// a longer text is cut and ends `…(N bytes)`, N its length as given.
/// Applying it again changes nothing.
pub fn one_line(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(MAX_SHOWN));
    for c in msg.chars() {
        if is_hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        // Escaping stops past the bound: a 50 MB text costs no 50 MB copy.
        if out.len() > MAX_SHOWN {
            break;
        }
    }
    if out.len() <= MAX_SHOWN {
        return out;
    }
    let mark = format!("…({} bytes)", msg.len());
    let mut cut = MAX_SHOWN - mark.len();
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    // An escape (`\u{1b}`) is not cut in half: it would read as text.
    if let Some(open) = out[..cut].rfind("\\u{") {
        if !out[open..cut].contains('}') {
            cut = open;
        }
    }
    out.truncate(cut);
    out.push_str(&mark);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_line_escapes_control_characters_only() {
        assert_eq!(
            one_line("unknown field `a\nb\u{1b}`, é"),
            "unknown field `a\\nb\\u{1b}`, é"
        );
    }

    #[test]
    fn one_line_escapes_bidi_and_invisible_characters() {
        assert_eq!(
            one_line("a\u{202e}b\u{2066}c\u{200b}d\u{feff}e\u{2028}f\u{ad}g\u{e0041}h"),
            "a\\u{202e}b\\u{2066}c\\u{200b}d\\u{feff}e\\u{2028}f\\u{ad}g\\u{e0041}h"
        );
        // Visible text of every script, and plain spaces, stay as they are.
        for shown in ["é ü 日本 العربية", "a\u{a0}b", "x\u{3000}y", "\u{1f600}"] {
            assert_eq!(one_line(shown), shown);
        }
        for c in [
            '\u{7}', '\u{85}', '\u{200e}', '\u{2069}', '\u{61c}', '\u{2064}',
        ] {
            assert!(is_hidden(c), "{c:?}");
        }
    }

    #[test]
    fn a_long_text_is_cut_with_its_length_and_stays_cut() {
        let long = "x".repeat(50 << 20);
        let shown = one_line(&long);
        assert!(shown.len() <= MAX_SHOWN, "{}", shown.len());
        assert!(shown.ends_with("x…(52428800 bytes)"), "{}", &shown[4000..]);
        assert_eq!(one_line(&shown), shown);
        // Escapes and wide characters are never cut in half.
        for unit in ["\u{1b}", "é", "日"] {
            let shown = one_line(&unit.repeat(10_000));
            assert!(shown.len() <= MAX_SHOWN);
            let kept = shown.rsplit_once('…').expect("cut").0;
            assert_eq!(kept.len() % one_line(unit).len(), 0, "{unit:?}");
            assert_eq!(one_line(&shown), shown);
        }
        let exact = "y".repeat(MAX_SHOWN);
        assert_eq!(one_line(&exact), exact);
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_042);
        assert_eq!(utc_stamp(t), "20231114T221320Z");
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339_millis(t), "2023-11-14T22:13:20.042Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(utc_stamp(leap), "20000229T000000Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn only_temporaries_of_gone_writers_are_swept() {
        let dir = std::env::temp_dir().join(format!("xrunbench-sweep-test-{}", std::process::id()));
        let sub = dir.join("trials");
        fs::create_dir_all(&sub).unwrap();
        // A pid above the kernel's pid_max is never a live process.
        let dead = sub.join(".a-1.json.tmp-4194305");
        let live = sub.join(format!(".b-1.json.tmp-{}", std::process::id()));
        let kept = [
            sub.join("a-1.json"),
            sub.join("x.tmp-4194305"),
            live.clone(),
        ];
        for p in kept.iter().chain([&dead]) {
            fs::write(p, b"x").unwrap();
        }
        assert_eq!(sweep_dead_temporaries(&dir), std::slice::from_ref(&dead));
        assert!(!dead.exists() && kept.iter().all(|p| p.exists()));
        assert_eq!(temp_owner(".x.tmp-12"), Some(12));
        assert_eq!(temp_owner(".x.tmp-"), None);
        assert!(!process_gone(std::process::id()));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_file() {
        let dir = std::env::temp_dir().join(format!("xrunbench-doc-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        // A destination that cannot be renamed onto (a directory) fails,
        // names the path, and removes the temporary file.
        let sub = dir.join("sub");
        fs::create_dir(&sub).unwrap();
        let e = write_atomic(&sub, b"x").unwrap_err().to_string();
        assert!(e.contains("sub"), "{e}");
        assert!(!temp_path_for(&sub).exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
