//! `xrun-trial check`: the validation that must run on the machine that
//! will run the trials. For each spec: its CPUs exist here, a real-time
//! priority is permitted (the player's and the latency monitor's), the WAV is a regular file (or the tone fits in
//! tmpfs), PM-QoS is usable, the board binaries are there, and each knob
//! file exists, opens for writing, and — unless `--read-only` — keeps the
//! value when written (applied, read back and restored at once, journaled,
//! under the machine lock). Every problem is reported, one line each;
//! nothing is left changed.

use std::path::Path;

use xrunbench_schema::probe::{
    CheckProblem, CheckReport, CheckedKnob, RealtimeProbe, CHECK_SCHEMA,
};
use xrunbench_schema::trial::{AudioInput, TrialSpec};

use crate::fingerprint;
use crate::journal::{self, JournalError, Knobs, MachineLock};
use crate::knobs::{self, KnobWrite, PmQosHold};
use crate::machine::Machine;
use crate::probe;
use crate::run::is_executable;
use crate::say::say;
use crate::signals::{self, StopReason};

/// One knob file to try, and the configurations that write it.
struct ToTry {
    configs: Vec<String>,
    write: KnobWrite,
}

/// Checks `specs` against this machine. `apply`: also write each knob,
/// read it back and restore it. `Err` only when a stop was requested
/// (everything tried so far is restored).
pub fn check(
    specs: &[TrialSpec],
    machine: &Machine,
    bin_dir: &Path,
    apply: bool,
) -> Result<CheckReport, StopReason> {
    let mut report = CheckReport {
        schema: CHECK_SCHEMA.into(),
        ..CheckReport::default()
    };
    let allowed = fingerprint::allowed_cpus();
    let rt = probe::realtime();
    let mut to_try: Vec<ToTry> = Vec::new();
    for s in specs {
        let config = s.trial.config.clone();
        let mut problem = |field: Option<&str>, message: String| {
            let p = CheckProblem {
                config: config.clone(),
                field: field.map(str::to_string),
                message,
            };
            if !report.problems.contains(&p) {
                report.problems.push(p);
            }
        };
        check_player(s, &allowed, &rt, &mut problem);
        check_monitor(s, &allowed, &rt, &mut problem);
        check_audio(s, machine, &mut problem);
        if s.pm_qos_us.is_some() {
            if let Err(e) = PmQosHold::check(&machine.roots.pm_qos) {
                problem(Some("pm_qos_us"), e.to_string());
            }
        }
        check_binaries(s, bin_dir, &mut problem);
        collect_knobs(s, machine, &config, &mut to_try, &mut problem);
    }
    if apply && !to_try.is_empty() {
        try_each(machine, &to_try, &mut report)?;
    } else {
        for t in &to_try {
            let found = knobs::state(&t.write).unwrap_or_else(|e| format!("<{e}>"));
            for c in &t.configs {
                report.knobs.push(checked(c, &t.write, &found, None));
            }
        }
    }
    Ok(report)
}

/// The player's CPUs exist here and its real-time priority is permitted.
fn check_player(
    s: &TrialSpec,
    allowed: &[usize],
    rt: &RealtimeProbe,
    problem: &mut impl FnMut(Option<&str>, String),
) {
    if let Some(cpus) = &s.player.cpu {
        check_cpus("player.cpu", cpus.cpus(), allowed, problem);
    }
    if let Some(p) = s.player.priority {
        if let Some(n) = p.rt_priority() {
            check_rt_priority("player.priority", &p.to_string(), n, rt, problem);
        }
    }
}

/// The latency monitor's threads are real-time threads on CPUs of their
/// own: the same questions as the player's, asked before a trial rather
/// than failing it.
fn check_monitor(
    s: &TrialSpec,
    allowed: &[usize],
    rt: &RealtimeProbe,
    problem: &mut impl FnMut(Option<&str>, String),
) {
    if let Some(m) = s.monitor.as_ref().filter(|m| m.latency) {
        let asked = m.cpus.as_ref().map(|c| c.cpus()).unwrap_or_default();
        check_cpus("monitor.cpus", asked, allowed, problem);
        let shown = format!("SCHED_FIFO {}", m.priority);
        check_rt_priority("monitor.priority", &shown, m.priority, rt, problem);
    }
}

/// `field`'s CPUs `asked` are all among those this process may use.
fn check_cpus(
    field: &str,
    asked: &[usize],
    allowed: &[usize],
    problem: &mut impl FnMut(Option<&str>, String),
) {
    if let Some(bad) = asked.iter().find(|n| !allowed.contains(n)) {
        problem(
            Some(field),
            format!(
                "CPU {bad} is not available here (allowed: {})",
                list(allowed)
            ),
        );
    }
}

/// `field`'s real-time priority `n` (`shown` as the user wrote it) is
/// within what this process may set.
fn check_rt_priority(
    field: &str,
    shown: &str,
    n: u8,
    rt: &RealtimeProbe,
    problem: &mut impl FnMut(Option<&str>, String),
) {
    if n > rt.max_priority {
        problem(
            Some(field),
            format!(
                "{shown} is not permitted here ({}: real-time priorities up to {}); run as root or raise RLIMIT_RTPRIO",
                rt.reason, rt.max_priority
            ),
        );
    }
}

/// The WAV is a regular file, or the tone fits in tmpfs.
fn check_audio(s: &TrialSpec, machine: &Machine, problem: &mut impl FnMut(Option<&str>, String)) {
    match &s.audio {
        AudioInput::File(p) => match std::fs::metadata(p) {
            Ok(m) if m.is_file() => {}
            Ok(_) => problem(
                Some("audio.file"),
                format!("{}: not a regular file", p.display()),
            ),
            Err(e) => problem(Some("audio.file"), format!("{}: {e}", p.display())),
        },
        AudioInput::Tone(t) => {
            let seconds = t.seconds.unwrap_or(s.duration_us as f64 / 1e6);
            let bytes =
                seconds * f64::from(t.rate) * f64::from(t.channels) * t.format.bytes() as f64;
            if let Some(free) = probe::free_bytes(&machine.tmpfs) {
                if bytes > free as f64 {
                    problem(
                        Some("audio.tone"),
                        format!(
                            "the tone needs {:.0} bytes and {} has {free} free",
                            bytes,
                            machine.tmpfs.display()
                        ),
                    );
                }
            }
        }
    }
}

/// The board binaries the spec starts are in `bin_dir`.
fn check_binaries(s: &TrialSpec, bin_dir: &Path, problem: &mut impl FnMut(Option<&str>, String)) {
    let mut needed = vec!["xrun-player"];
    if s.load.is_some() {
        needed.push("xrun-hackbench");
    }
    for b in needed {
        let p = bin_dir.join(b);
        if !is_executable(&p) {
            problem(
                None,
                format!("{} is missing or not executable", p.display()),
            );
        }
    }
}

/// Each knob file the spec writes exists and opens for writing; the
/// writes go into `to_try`, one entry per file and value, with every
/// configuration (`config` among them) that asks for it.
fn collect_knobs(
    s: &TrialSpec,
    machine: &Machine,
    config: &str,
    to_try: &mut Vec<ToTry>,
    problem: &mut impl FnMut(Option<&str>, String),
) {
    for k in &s.knobs {
        let writes = match knobs::expand(k, &machine.roots) {
            Ok(w) => w,
            Err(e) => {
                problem(None, e.to_string());
                continue;
            }
        };
        for w in writes {
            if let Err(e) = knobs::check(&w, &machine.roots) {
                problem(None, e.to_string());
                continue;
            }
            match to_try
                .iter_mut()
                .find(|t| t.write.path == w.path && t.write.value == w.value)
            {
                Some(t) if !t.configs.iter().any(|c| c == config) => {
                    t.configs.push(config.to_string());
                }
                Some(_) => {}
                None => to_try.push(ToTry {
                    configs: vec![config.to_string()],
                    write: w,
                }),
            }
        }
    }
}

/// Writes, reads back and restores each knob, one at a time, journaled
/// under the machine lock.
fn try_each(
    machine: &Machine,
    to_try: &[ToTry],
    report: &mut CheckReport,
) -> Result<(), StopReason> {
    let acquired = MachineLock::acquire(&machine.lock_path, |holder| {
        say(format_args!(
            "check: waiting for the machine lock (held by pid {holder})"
        ));
    });
    let lock = match acquired {
        Ok(l) => l,
        Err(JournalError::Interrupted(r)) => return Err(r),
        Err(e) => {
            for t in to_try {
                for c in &t.configs {
                    report.problems.push(CheckProblem {
                        config: c.clone(),
                        field: None,
                        message: format!("{}: cannot try it: {e}", t.write.what),
                    });
                }
            }
            return Ok(());
        }
    };
    for line in journal::replay_all(machine, &lock).lines {
        say(line);
    }
    for t in to_try {
        if let Some(r) = signals::stop_reason() {
            return Err(r);
        }
        let (found, read_back, error) = try_one(machine, &lock, &t.write);
        for c in &t.configs {
            report
                .knobs
                .push(checked(c, &t.write, &found, read_back.clone()));
            if let Some(e) = &error {
                report.problems.push(CheckProblem {
                    config: c.clone(),
                    field: None,
                    message: e.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Applies one knob, reads it back, restores it: (found, read back, problem).
fn try_one(
    machine: &Machine,
    lock: &MachineLock,
    w: &KnobWrite,
) -> (String, Option<String>, Option<String>) {
    let mut k = match Knobs::journal(machine, lock, "check", vec![w.clone()]) {
        Ok(k) => k,
        Err(e) => return (String::new(), None, Some(e.to_string())),
    };
    let applied = k.apply();
    let restored = k.restore();
    let rec = k.records().remove(0);
    let problem = match (applied, restored) {
        (Err(e), _) => Some(e.to_string()),
        (Ok(()), Err(e)) => Some(e),
        (Ok(()), Ok(())) => None,
    };
    (rec.found, rec.read_back, problem)
}

fn checked(config: &str, w: &KnobWrite, found: &str, read_back: Option<String>) -> CheckedKnob {
    CheckedKnob {
        config: config.to_string(),
        what: w.what.clone(),
        path: w.path.clone(),
        found: found.to_string(),
        requested: w.value.clone(),
        read_back,
    }
}

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
