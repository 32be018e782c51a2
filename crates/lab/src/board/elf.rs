//! What a binary needs from the board's C library: the symbol versions in
//! its ELF `.gnu.version_r` section (e.g. `GLIBC_2.34` from `libc.so.6`).
//! The highest `GLIBC_x.y` there is the oldest glibc the binary runs on.
//! Also the libraries it loads (`DT_NEEDED`) and the machine it is for.
//!
//! Read with the `object` crate, for little-endian ELF32 and ELF64
//! (armv7, aarch64, x86_64), so that no binutils of the right architecture
//! is needed.

use std::fmt;
use std::str::FromStr;

use object::read::elf::FileHeader;
use object::LittleEndian;

/// Why a file's version needs could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ElfError {
    /// Not an ELF file, or one we do not read (big-endian).
    #[error("not a little-endian ELF file")]
    NotElf,
    /// A header, section or string points outside the file.
    #[error("truncated or corrupt ELF file ({0})")]
    Corrupt(String),
}

/// The versions a binary needs from one shared library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionNeed {
    /// The library's soname (`libc.so.6`).
    pub file: String,
    /// The version names (`GLIBC_2.34`, `ALSA_0.9`).
    pub versions: Vec<String>,
}

/// A glibc release, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GlibcVersion {
    /// Major (2).
    pub major: u32,
    /// Minor (34).
    pub minor: u32,
}

impl fmt::Display for GlibcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for GlibcVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?}: expected a glibc version such as 2.28");
        let (major, minor) = s.split_once('.').ok_or_else(bad)?;
        Ok(GlibcVersion {
            major: major.parse().map_err(|_| bad())?,
            minor: minor.parse().map_err(|_| bad())?,
        })
    }
}

impl GlibcVersion {
    /// The release a symbol version names: `GLIBC_2.34` → 2.34,
    /// `GLIBC_2.2.5` → 2.2; `None` for other names (`GLIBC_PRIVATE`,
    /// `ALSA_0.9`, `GCC_3.0`).
    pub fn of_symbol_version(name: &str) -> Option<GlibcVersion> {
        let rest = name.strip_prefix("GLIBC_")?;
        let mut parts = rest.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(GlibcVersion { major, minor })
    }
}

/// The oldest glibc that has every `GLIBC_*` version in `needs`; `None`
/// when the binary needs no versioned glibc symbol (a static binary).
pub fn min_glibc(needs: &[VersionNeed]) -> Option<GlibcVersion> {
    needs
        .iter()
        .flat_map(|n| &n.versions)
        .filter_map(|v| GlibcVersion::of_symbol_version(v))
        .max()
}

/// The versions `elf` needs, per library, in file order.
pub fn version_needs(elf: &[u8]) -> Result<Vec<VersionNeed>, ElfError> {
    match class_of(elf)? {
        1 => needs_of::<object::elf::FileHeader32<LittleEndian>>(elf),
        _ => needs_of::<object::elf::FileHeader64<LittleEndian>>(elf),
    }
}

/// The libraries `elf` loads (its `DT_NEEDED` entries), in file order;
/// none for a static binary.
pub fn needed(elf: &[u8]) -> Result<Vec<String>, ElfError> {
    match class_of(elf)? {
        1 => needed_of::<object::elf::FileHeader32<LittleEndian>>(elf),
        _ => needed_of::<object::elf::FileHeader64<LittleEndian>>(elf),
    }
}

/// The architecture `elf` was built for (its `e_machine`), when it is one
/// of ours.
pub fn arch(elf: &[u8]) -> Result<Option<crate::arch::Arch>, ElfError> {
    use crate::arch::Arch;
    class_of(elf)?;
    // e_machine: a 16-bit field right after e_ident (16 bytes) and e_type.
    let machine = elf
        .get(18..20)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or(ElfError::NotElf)?;
    Ok(match machine {
        object::elf::EM_X86_64 => Some(Arch::X86_64),
        object::elf::EM_AARCH64 => Some(Arch::Aarch64),
        object::elf::EM_ARM => Some(Arch::Armv7),
        _ => None,
    })
}

/// The ELF class of a little-endian ELF file (1: ELF32, 2: ELF64), from
/// e_ident: the magic, the class, the data encoding (1: little-endian).
fn class_of(elf: &[u8]) -> Result<u8, ElfError> {
    let ident = elf.get(..6).ok_or(ElfError::NotElf)?;
    if &ident[..4] != b"\x7fELF" || ident[5] != 1 || !matches!(ident[4], 1 | 2) {
        return Err(ElfError::NotElf);
    }
    Ok(ident[4])
}

/// [`needed`] of a file of the class `Elf`.
fn needed_of<Elf: FileHeader<Endian = LittleEndian>>(data: &[u8]) -> Result<Vec<String>, ElfError> {
    use object::read::elf::Dyn;
    let corrupt = |e: object::read::Error| ElfError::Corrupt(e.to_string());
    let header = Elf::parse(data).map_err(corrupt)?;
    let endian = header.endian().map_err(|_| ElfError::NotElf)?;
    let sections = header.sections(endian, data).map_err(corrupt)?;
    let Some((dynamic, strings_at)) = sections.dynamic(endian, data).map_err(corrupt)? else {
        return Ok(Vec::new());
    };
    let strings = sections
        .strings(endian, data, strings_at)
        .map_err(corrupt)?;
    let mut out = Vec::new();
    for d in dynamic {
        if d.tag32(endian) == Some(object::elf::DT_NEEDED) {
            let name = d.string(endian, strings).map_err(corrupt)?;
            out.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(out)
}

/// [`version_needs`] of a file of the class `Elf`.
fn needs_of<Elf: FileHeader<Endian = LittleEndian>>(
    data: &[u8],
) -> Result<Vec<VersionNeed>, ElfError> {
    let corrupt = |e: object::read::Error| ElfError::Corrupt(e.to_string());
    let header = Elf::parse(data).map_err(corrupt)?;
    let endian = header.endian().map_err(|_| ElfError::NotElf)?;
    let sections = header.sections(endian, data).map_err(corrupt)?;
    let Some((mut needs, strings_at)) = sections.gnu_verneed(endian, data).map_err(corrupt)? else {
        return Ok(Vec::new());
    };
    let strings = sections
        .strings(endian, data, strings_at)
        .map_err(corrupt)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut out = Vec::new();
    while let Some((need, mut auxes)) = needs.next().map_err(corrupt)? {
        let file = text(need.file(endian, strings).map_err(corrupt)?);
        let mut versions = Vec::new();
        while let Some(aux) = auxes.next().map_err(corrupt)? {
            versions.push(text(aux.name(endian, strings).map_err(corrupt)?));
        }
        out.push(VersionNeed { file, versions });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF with a `.gnu.version_r` naming `needs`, laid out as a
    /// linker does (section headers at the end), of either class.
    fn synthetic_elf(wide: bool, needs: &[(&str, &[&str])]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut name = |s: &str| {
            let off = strtab.len() as u32;
            strtab.extend_from_slice(s.as_bytes());
            strtab.push(0);
            off
        };
        let mut verneed = Vec::new();
        for (i, (file, versions)) in needs.iter().enumerate() {
            let last = i + 1 == needs.len();
            let size = 16 + 16 * versions.len() as u32;
            verneed.extend_from_slice(&1u16.to_le_bytes());
            verneed.extend_from_slice(&(versions.len() as u16).to_le_bytes());
            verneed.extend_from_slice(&name(file).to_le_bytes());
            verneed.extend_from_slice(&16u32.to_le_bytes());
            verneed.extend_from_slice(&(if last { 0 } else { size }).to_le_bytes());
            for (j, v) in versions.iter().enumerate() {
                let last_aux = j + 1 == versions.len();
                verneed.extend_from_slice(&0u32.to_le_bytes());
                verneed.extend_from_slice(&0u16.to_le_bytes());
                verneed.extend_from_slice(&0u16.to_le_bytes());
                verneed.extend_from_slice(&name(v).to_le_bytes());
                verneed.extend_from_slice(&(if last_aux { 0u32 } else { 16 }).to_le_bytes());
            }
        }
        let header_len = if wide { 64 } else { 52 };
        let strtab_at = header_len;
        let verneed_at = strtab_at + strtab.len();
        let shoff = verneed_at + verneed.len();
        let entsize: usize = if wide { 64 } else { 40 };
        let mut f = vec![0u8; header_len];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = if wide { 2 } else { 1 };
        f[5] = 1;
        // EI_VERSION: EV_CURRENT, as every linker writes it.
        f[6] = 1;
        if wide {
            f[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
            f[0x3a..0x3c].copy_from_slice(&(entsize as u16).to_le_bytes());
            f[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
            f[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
        } else {
            f[0x20..0x24].copy_from_slice(&(shoff as u32).to_le_bytes());
            f[0x2e..0x30].copy_from_slice(&(entsize as u16).to_le_bytes());
            f[0x30..0x32].copy_from_slice(&3u16.to_le_bytes());
            f[0x32..0x34].copy_from_slice(&1u16.to_le_bytes());
        }
        f.extend_from_slice(&strtab);
        f.extend_from_slice(&verneed);
        // Section 0: null; 1: .dynstr (SHT_STRTAB), also the section names'
        // table (e_shstrndx: every name is its empty string at 0); 2:
        // .gnu.version_r.
        let sections = [
            (0u32, 0usize, 0usize, 0u32, 0u32),
            (3, strtab_at, strtab.len(), 0, 0),
            (
                object::elf::SHT_GNU_VERNEED,
                verneed_at,
                verneed.len(),
                1,
                needs.len() as u32,
            ),
        ];
        for (kind, offset, size, link, info) in sections {
            let mut sh = vec![0u8; entsize];
            sh[4..8].copy_from_slice(&kind.to_le_bytes());
            if wide {
                sh[24..32].copy_from_slice(&(offset as u64).to_le_bytes());
                sh[32..40].copy_from_slice(&(size as u64).to_le_bytes());
                sh[40..44].copy_from_slice(&link.to_le_bytes());
                sh[44..48].copy_from_slice(&info.to_le_bytes());
            } else {
                sh[16..20].copy_from_slice(&(offset as u32).to_le_bytes());
                sh[20..24].copy_from_slice(&(size as u32).to_le_bytes());
                sh[24..28].copy_from_slice(&link.to_le_bytes());
                sh[28..32].copy_from_slice(&info.to_le_bytes());
            }
            f.extend_from_slice(&sh);
        }
        f
    }

    const NEEDS: &[(&str, &[&str])] = &[
        ("libasound.so.2", &["ALSA_0.9", "ALSA_0.9.0rc4"]),
        ("libc.so.6", &["GLIBC_2.17", "GLIBC_2.34", "GLIBC_2.4"]),
        ("libgcc_s.so.1", &["GCC_3.0"]),
    ];

    #[test]
    fn reads_both_classes() {
        for wide in [false, true] {
            let needs = version_needs(&synthetic_elf(wide, NEEDS)).unwrap();
            let got: Vec<(&str, Vec<&str>)> = needs
                .iter()
                .map(|n| {
                    (
                        n.file.as_str(),
                        n.versions.iter().map(String::as_str).collect(),
                    )
                })
                .collect();
            let want: Vec<(&str, Vec<&str>)> =
                NEEDS.iter().map(|(f, v)| (*f, v.to_vec())).collect();
            assert_eq!(got, want, "ELF{}", if wide { 64 } else { 32 });
            assert_eq!(
                min_glibc(&needs),
                Some(GlibcVersion {
                    major: 2,
                    minor: 34
                })
            );
        }
    }

    #[test]
    fn versions_compare_as_numbers() {
        let v = |s: &str| GlibcVersion::of_symbol_version(s).unwrap();
        assert!(v("GLIBC_2.4") < v("GLIBC_2.17"));
        assert_eq!(v("GLIBC_2.2.5"), "2.2".parse().unwrap());
        assert_eq!(GlibcVersion::of_symbol_version("GLIBC_PRIVATE"), None);
        assert!("2".parse::<GlibcVersion>().is_err());
        assert!("2.x".parse::<GlibcVersion>().is_err());
    }

    #[test]
    fn a_truncated_file_is_an_error_not_a_panic() {
        let full = synthetic_elf(true, NEEDS);
        for len in [0, 5, 40, full.len() / 2, full.len() - 1] {
            assert!(version_needs(&full[..len]).is_err(), "{len} bytes");
        }
        assert_eq!(version_needs(b"#!/bin/sh\n"), Err(ElfError::NotElf));
    }

    /// The reader against a real binary the linker made: this test program
    /// links glibc dynamically, so it needs some GLIBC_2.x from libc.so.6.
    #[test]
    fn reads_a_real_linked_binary() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let needs = version_needs(&exe).unwrap();
        let libc = needs.iter().find(|n| n.file == "libc.so.6");
        assert!(libc.is_some(), "{needs:?}");
        assert!(min_glibc(&needs).unwrap() >= "2.2".parse().unwrap());
    }

    #[test]
    fn the_libraries_a_program_loads_and_its_machine_are_read() {
        // This test's own binary: linked against glibc, built for here.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(needed(&me).unwrap().iter().any(|n| n == "libc.so.6"));
        assert_eq!(arch(&me).unwrap(), crate::arch::Arch::host());
        assert_eq!(needed(b"#!/bin/sh\n"), Err(ElfError::NotElf));
        assert_eq!(arch(b"\x7fELF\x03\x01"), Err(ElfError::NotElf));
    }
}
