//! Checks against this machine, all made before anything runs: the WAV is
//! there, the CPUs exist, every knob file exists and opens for writing, the
//! kernel is the one a configuration expects. Reads only; writes nothing.

use std::path::Path;

use super::knobs::{self, PmQosHold, SysPaths};
use super::scenario::{AudioSource, Config, Scenario};

/// The scenario narrowed to what runs here, and why the rest does not.
#[derive(Debug)]
pub struct Checked {
    /// The configurations that will run.
    pub scenario: Scenario,
    /// One line per configuration skipped for its kernel.
    pub skipped: Vec<String>,
}

/// This machine's `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Applies `--only`, skips configurations meant for another kernel, and
/// checks the rest. Every problem found is one line in the error list.
pub fn check_system(
    mut s: Scenario,
    only: &[String],
    sys: &SysPaths,
) -> Result<Checked, Vec<String>> {
    let file = s.path.display().to_string();
    let mut errors = Vec::new();
    for name in only {
        if !s.configs.iter().any(|c| &c.name == name) {
            let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
            errors.push(format!(
                "{file}: --only {name}: no such configuration (have: {})",
                names.join(", ")
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if !only.is_empty() {
        s.configs.retain(|c| only.contains(&c.name));
    }
    let release = kernel_release();
    let mut skipped = Vec::new();
    s.configs.retain(|c| match &c.kernel {
        Some(k) if *k != release => {
            skipped.push(format!(
                "{file}: skipping config `{}`: it expects kernel `{k}`, this machine runs `{release}`",
                c.name
            ));
            false
        }
        _ => true,
    });
    if s.configs.is_empty() {
        errors.push(format!(
            "{file}: nothing to run: every configuration was skipped"
        ));
        errors.extend(skipped);
        return Err(errors);
    }
    for c in &s.configs {
        errors.extend(check_config(&file, c, sys));
    }
    if errors.is_empty() {
        Ok(Checked {
            scenario: s,
            skipped,
        })
    } else {
        Err(errors)
    }
}

fn check_config(file: &str, c: &Config, sys: &SysPaths) -> Vec<String> {
    let at = format!("{file}: config `{}`", c.name);
    let mut errors = Vec::new();
    if let AudioSource::File(wav_path) = &c.audio.source {
        if let Err(e) = check_wav(wav_path) {
            errors.push(format!("{at}: audio.file: {e}"));
        }
    }
    if let Some(cpus) = &c.audio.cpu {
        let allowed = allowed_cpus();
        if let Some(bad) = cpus.cpus().iter().find(|n| !allowed.contains(n)) {
            errors.push(format!(
                "{at}: audio.cpu: CPU {bad} is not available here (allowed: {})",
                list(&allowed)
            ));
        }
    }
    for spec in &c.knobs {
        match knobs::expand(spec, sys) {
            Ok(writes) => {
                for w in writes {
                    if let Err(e) = knobs::check(&w) {
                        errors.push(format!("{at}: {e}"));
                    }
                }
            }
            Err(e) => errors.push(format!("{at}: {e}")),
        }
    }
    if c.pm_qos_us.is_some() {
        if let Err(e) = PmQosHold::check() {
            errors.push(format!("{at}: {e}"));
        }
    }
    errors
}

fn check_wav(path: &Path) -> Result<(), String> {
    if !path.exists() {
        return Err(format!("{}: no such file", path.display()));
    }
    // The player's own reader: its errors name the file and what was expected.
    xrunbench_wav::WavStream::open(path)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// CPUs this process may run on (the player inherits the same mask).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1))
                .collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&i| libc::CPU_ISSET(i, &set))
            .collect()
    }
}

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
