//! `xrun-trial probe`: what this machine offers for each knob kind and
//! what else a trial needs here, as one `xrunbench.probe/1` document.
//! Reads only.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use xrunbench_schema::probe::{
    AlsaPcm, BinariesProbe, PmQosProbe, Probe, RealtimeProbe, SchedDebugProbe, SoundProbe,
    TmpfsProbe, PROBE_SCHEMA,
};

use crate::fingerprint;
use crate::knobs::PmQosHold;
use crate::machine::{is_root, Machine};
use crate::run::is_executable;

/// Probes this machine; `bin_dir` is where the board binaries should be.
pub fn probe(machine: &Machine, bin_dir: &Path) -> Probe {
    Probe {
        schema: PROBE_SCHEMA.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        machine: fingerprint::collect(),
        allowed_cpus: fingerprint::allowed_cpus(),
        realtime: realtime(),
        sched_debug: sched_debug(&machine.roots.sched_debug),
        available_governors: available_governors(&machine.roots.cpu),
        pm_qos: PmQosProbe {
            device: machine.roots.pm_qos.clone(),
            present: machine.roots.pm_qos.exists(),
            writable: PmQosHold::check(&machine.roots.pm_qos).is_ok(),
        },
        sound: sound(Path::new("/proc/asound")),
        tmpfs: TmpfsProbe {
            dir: machine.tmpfs.clone(),
            free_bytes: free_bytes(&machine.tmpfs),
        },
        binaries: BinariesProbe {
            dir: bin_dir.to_path_buf(),
            player: is_executable(&bin_dir.join("xrun-player")),
            hackbench: is_executable(&bin_dir.join("xrun-hackbench")),
        },
        journal_dir: machine
            .state_dirs
            .first()
            .map(|d| d.join("journal"))
            .unwrap_or_default(),
    }
}

/// Root may use any real-time priority; others up to RLIMIT_RTPRIO.
pub fn realtime() -> RealtimeProbe {
    if is_root() {
        return RealtimeProbe {
            allowed: true,
            max_priority: 99,
            reason: "root".into(),
        };
    }
    // SAFETY: rlimit is plain data that getrlimit fills.
    let cur = unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_RTPRIO, &mut r) != 0 {
            0
        } else {
            // rlim_t is 32 bits on armv7, 64 elsewhere.
            #[allow(clippy::unnecessary_cast)]
            let v = r.rlim_cur as u64;
            v
        }
    };
    let max = u8::try_from(cur.min(99)).unwrap_or(99);
    RealtimeProbe {
        allowed: max > 0,
        max_priority: max,
        reason: format!("not root, RLIMIT_RTPRIO {max}"),
    }
}

fn sched_debug(dir: &Path) -> SchedDebugProbe {
    let features_file = dir.join("features");
    SchedDebugProbe {
        dir: dir.to_path_buf(),
        present: dir.is_dir(),
        writable: fs::OpenOptions::new()
            .write(true)
            .open(&features_file)
            .is_ok(),
        features: fs::read_to_string(&features_file)
            .map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

fn available_governors(cpu_root: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Ok(entries) = fs::read_dir(cpu_root) {
        for e in entries.flatten() {
            if let Ok(list) =
                fs::read_to_string(e.path().join("cpufreq/scaling_available_governors"))
            {
                out.extend(list.split_whitespace().map(str::to_string));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Cards and playback PCMs from /proc/asound (`cards`, `pcm`).
fn sound(asound: &Path) -> SoundProbe {
    let cards = fs::read_to_string(asound.join("cards"))
        .map(|t| {
            t.lines()
                .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
                .map(|l| l.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let playback = fs::read_to_string(asound.join("pcm"))
        .map(|t| t.lines().filter_map(parse_pcm_line).collect())
        .unwrap_or_default();
    SoundProbe { cards, playback }
}

/// `00-00: ID : NAME : playback 1 : capture 1` → a playback PCM.
fn parse_pcm_line(line: &str) -> Option<AlsaPcm> {
    let (numbers, rest) = line.split_once(": ")?;
    let (card, device) = numbers.split_once('-')?;
    let fields: Vec<&str> = rest.split(" : ").map(str::trim).collect();
    if !fields.iter().any(|f| f.starts_with("playback")) {
        return None;
    }
    Some(AlsaPcm {
        card: card.trim().parse().ok()?,
        device: device.trim().parse().ok()?,
        id: fields.first()?.to_string(),
        name: fields.get(1).map(|s| s.to_string()).unwrap_or_default(),
    })
}

/// Bytes an unprivileged writer may still use on the file system of `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data that statvfs(3) fills; `c` is a valid
    // NUL-terminated path.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return None;
        }
        // The field types are 32 bits on armv7, 64 elsewhere.
        #[allow(clippy::unnecessary_cast)]
        let bytes = (s.f_bavail as u64).saturating_mul(s.f_frsize as u64);
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcm_lines_with_playback_are_listed() {
        let p = parse_pcm_line("00-03: HDMI 0 : HDMI 0 : playback 1").unwrap();
        assert_eq!((p.card, p.device, p.id.as_str()), (0, 3, "HDMI 0"));
        assert!(parse_pcm_line("01-00: USB Mic : USB Audio : capture 1").is_none());
    }

    #[test]
    fn probe_of_this_machine_is_complete() {
        let m = Machine::real();
        let p = probe(&m, Path::new("/nonexistent"));
        assert_eq!(p.schema, PROBE_SCHEMA);
        assert!(!p.allowed_cpus.is_empty());
        assert!(!p.binaries.player);
        assert!(p.tmpfs.free_bytes.is_some());
    }
}
