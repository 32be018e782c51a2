//! A `newc` cpio archive, as the kernel unpacks an initramfs: written
//! here (no `cpio` program needed), uncompressed (the guest's memory holds
//! it either way, and an emulated CPU decompresses slowly).

use std::io::{self, Write};

/// One entry of an archive.
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file with these bytes and permission bits.
    File(Vec<u8>, u32),
    /// A symbolic link to this target.
    Symlink(String),
}

/// Writes `entries` (path without a leading `/`, entry) and the trailer.
/// Parents must come before what they hold.
pub fn write(out: &mut impl Write, entries: &[(String, Entry)]) -> io::Result<()> {
    for (ino, (name, entry)) in entries.iter().enumerate() {
        let (mode, data): (u32, &[u8]) = match entry {
            Entry::Dir => (0o040_755, &[]),
            Entry::File(bytes, perm) => (0o100_000 | (perm & 0o7777), bytes),
            Entry::Symlink(target) => (0o120_777, target.as_bytes()),
        };
        header(out, ino as u32 + 1, mode, data.len(), name)?;
        out.write_all(data)?;
        pad(out, data.len())?;
    }
    header(out, 0, 0, 0, "TRAILER!!!")
}

fn header(out: &mut impl Write, ino: u32, mode: u32, size: usize, name: &str) -> io::Result<()> {
    let nlink = if mode & 0o170_000 == 0o040_000 { 2 } else { 1 };
    let name_len = name.len() + 1;
    write!(
        out,
        "070701{ino:08x}{mode:08x}{uid:08x}{gid:08x}{nlink:08x}{mtime:08x}{size:08x}\
         {maj:08x}{min:08x}{rmaj:08x}{rmin:08x}{name_len:08x}{check:08x}",
        uid = 0,
        gid = 0,
        mtime = 0,
        maj = 0,
        min = 0,
        rmaj = 0,
        rmin = 0,
        check = 0,
    )?;
    out.write_all(name.as_bytes())?;
    out.write_all(&[0])?;
    // The header (110 bytes) and the name are padded to 4 bytes together.
    pad(out, 110 + name_len)
}

fn pad(out: &mut impl Write, len: usize) -> io::Result<()> {
    out.write_all(&[0u8; 3][..(4 - len % 4) % 4])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_is_what_cpio_reads_back() {
        let entries = vec![
            ("bin".to_string(), Entry::Dir),
            (
                "bin/hello".to_string(),
                Entry::File(b"#!/bin/sh\necho hi\n".to_vec(), 0o755),
            ),
            ("bin/sh".to_string(), Entry::Symlink("busybox".into())),
        ];
        let mut bytes = Vec::new();
        write(&mut bytes, &entries).unwrap();
        assert_eq!(bytes.len() % 4, 0);
        assert!(bytes.starts_with(b"070701"));
        // GNU cpio reads it back.
        let mut child = std::process::Command::new("cpio")
            .args(["-t", "-v"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("cpio (cargo xtask test installs it)");
        child.stdin.take().unwrap().write_all(&bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(
            listing.contains("bin/hello") && listing.contains("-rwxr-xr-x"),
            "{listing}"
        );
        assert!(listing.contains("bin/sh -> busybox"), "{listing}");
    }
}
