//! `cargo xtask board check [SCENARIO] [--target DEST] [-o KEY=VALUE]…`:
//! connects to the board (the scenario's `[target]`, or `--target`; this
//! machine when neither names one), puts the board binaries there as `run`
//! does, and prints what the board offers — from `xrun-trial probe` and
//! `xrun-trial check` run there — against what the scenario needs:
//! architecture, kernel, ALSA playback devices, real-time priority, CPUs,
//! governors, the scheduler's debugfs, PM-QoS, tmpfs space and each knob
//! (found, requested, read back). Exit 0 when the scenario can run there,
//! 1 when it cannot (every problem, one line each), 2 on bad input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use xrunbench_schema::doc::one_line;
use xrunbench_schema::probe::{CheckReport, Probe};
use xrunbench_schema::trial::AudioInput;
use xrunbench_schema::Backend;

use crate::run::{session, TargetArgs};
use xrunbench_lab::signals;
use xrunbench_scenario::plan::PlannedTrial;
use xrunbench_scenario::{self as scenario, AudioSource, Scenario};
use xrunbench_scenario::{spec, validate};

/// Arguments of `cargo xtask board check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// A scenario whose needs are checked; its [target] is the board
    /// unless --target names another.
    pub scenario: Option<PathBuf>,
    /// The board.
    #[command(flatten)]
    pub target: TargetArgs,
    /// `--bin-dir`: prebuilt board binaries.
    #[command(flatten)]
    pub bins: crate::target::binaries::BinDirArg,
    /// Do not write the knobs: only check that they exist and open for
    /// writing (by default each is written, read back and restored at
    /// once, as `run` validates).
    #[arg(long)]
    pub read_only: bool,
}

/// `cargo xtask board check`.
pub fn run(args: &CheckArgs) -> Result<ExitCode> {
    signals::install()?;
    let bad = |line: String| {
        xrunbench_lab::say!(": {line}");
        Ok(ExitCode::from(2))
    };
    let mut s = match &args.scenario {
        Some(p) => match scenario::load(p) {
            Ok((_, s)) => s,
            Err(e) => return bad(e.0),
        },
        // No configurations: only the board is shown.
        None => Scenario::without_configs("--target", None),
    };
    if let Err(m) = args.target.apply(&mut s) {
        return bad(m);
    }
    if s.lava.is_some() {
        // Checking this machine instead would answer another question.
        return bad(format!(
            "{}: [target] is a LAVA lab, whose devices only its jobs reach; give --target DEST \
             to check a board",
            s.path.display()
        ));
    }
    if let Err(e) = xrunbench_lab::deps::ensure(xrunbench_lab::deps::for_run(
        args.bins.bin_dir.is_some(),
        s.runs_on(),
    )) {
        return Ok(e.report());
    }
    let mut target = session::open_target(&s, args.bins.bin_dir.clone())?;
    let probe = target.probe()?;
    let mut problems = Vec::new();
    let mut skipped = Vec::new();
    let mut report = None;
    if !s.configs.is_empty() {
        let release = probe.machine.kernel_release.clone();
        match validate::narrow(s.clone(), &[], &|_| release.clone()) {
            Ok((narrowed, sk)) => {
                skipped = sk;
                let host = validate::host_checks(&narrowed);
                problems.extend(host.iter().map(|(_, l)| l.clone()));
                let r = target.check(&specs(&narrowed), args.read_only)?;
                problems.extend(board_lines(&narrowed, &r, &host));
                report = Some(r);
                s = narrowed;
            }
            Err(lines) => problems.extend(lines),
        }
    }
    for l in target.finish() {
        xrunbench_lab::say!(": {l}");
    }
    print!(
        "{}",
        render(
            &target.describe(),
            args.scenario.as_deref(),
            &probe,
            &s,
            report.as_ref()
        )
    );
    for l in &skipped {
        println!("note: {l}");
    }
    if problems.is_empty() {
        if args.scenario.is_some() {
            println!("result: the scenario can run on this board");
        }
        Ok(ExitCode::SUCCESS)
    } else {
        println!("result: {} problem(s):", problems.len());
        for p in &problems {
            println!("  {p}");
        }
        Ok(ExitCode::FAILURE)
    }
}

/// One spec per configuration. A WAV file is named by its host path: it
/// is not copied for a check (the host reads its header, and the tmpfs
/// row compares its size with the space there).
fn specs(s: &Scenario) -> Vec<xrunbench_schema::TrialSpec> {
    s.configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let planned = PlannedTrial {
                seq: i + 1,
                config: i,
                config_name: c.name.clone(),
                k: 1,
            };
            let audio = match &c.audio.source {
                AudioSource::File(p) => AudioInput::File(p.clone()),
                AudioSource::Generate(t) => AudioInput::Tone(t.clone()),
            };
            spec::trial_spec(s, &planned, audio, None)
        })
        .collect()
}

/// The board's problems in the scenario's terms, without the WAV files
/// that are not on the board because a check does not copy them.
fn board_lines(s: &Scenario, r: &CheckReport, host: &[(String, String)]) -> Vec<String> {
    let mut report = r.clone();
    report.problems.retain(|p| {
        p.field.as_deref() != Some("audio.file")
            || !s
                .configs
                .iter()
                .any(|c| c.name == p.config && matches!(c.audio.source, AudioSource::File(_)))
    });
    validate::target_lines(s, &report, host)
}

/// Bytes a configuration's sound takes on the board's tmpfs.
fn sound_bytes(source: &AudioSource) -> u64 {
    match source {
        AudioSource::File(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
        AudioSource::Generate(t) => {
            let frames = t.seconds.unwrap_or(0.0) * f64::from(t.rate);
            (frames * f64::from(t.channels) * t.format.bytes() as f64) as u64 + 44
        }
    }
}

/// `label  offered` and, with a scenario, `needs: …` beneath. Both are
/// mostly the probe's words (arch, model, kernel, cards): escaped and
/// capped here, where every row goes through.
fn row(out: &mut String, label: &str, offered: &str, needs: Option<String>) {
    out.push_str(&format!("{label:<14} {}\n", one_line(offered)));
    if let Some(n) = needs {
        out.push_str(&format!("{:<14} needs: {}\n", "", one_line(&n)));
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

/// The configurations (by name) for which `pick` says something.
fn per_config(s: &Scenario, pick: impl Fn(&scenario::Config) -> Option<String>) -> Vec<String> {
    s.configs
        .iter()
        .filter_map(|c| pick(c).map(|w| format!("{w} ({})", c.name)))
        .collect()
}

fn or_nothing(items: Vec<String>, nothing: &str) -> String {
    if items.is_empty() {
        nothing.to_string()
    } else {
        items.join(", ")
    }
}

/// The whole report: one row per thing a trial needs from the board.
fn render(
    target: &str,
    scenario_file: Option<&Path>,
    p: &Probe,
    s: &Scenario,
    report: Option<&CheckReport>,
) -> String {
    let with = scenario_file.is_some();
    let need = |text: String| with.then_some(text);
    let mut out = format!(
        "board check: {target}{}\n",
        scenario_file
            .map(|f| format!(" against {}", f.display()))
            .unwrap_or_default()
    );
    push_board_rows(&mut out, p);
    push_kernel_and_playback_rows(&mut out, p, s, &need);
    push_scheduling_rows(&mut out, p, s, &need);
    push_interface_rows(&mut out, p, s, &need);
    if let Some(r) = report {
        push_knob_rows(&mut out, r);
    }
    out
}

/// The rows of what the board is (architecture) and what it was given
/// (the board binaries): the scenario asks nothing of either.
fn push_board_rows(out: &mut String, p: &Probe) {
    let m = &p.machine;
    let ours = xrunbench_lab::arch::Arch::from_uname_machine(&m.arch)
        .map_or("none of ours", xrunbench_lab::arch::Arch::name);
    row(
        out,
        "architecture",
        &format!(
            "{} (board binaries: {ours}){}",
            m.arch,
            m.board_model
                .as_ref()
                .map(|b| format!(", {b}"))
                .unwrap_or_default()
        ),
        None,
    );
    let bins = if p.binaries.player && p.binaries.hackbench {
        "xrun-trial, xrun-player, xrun-hackbench"
    } else {
        "xrun-trial only (xrun-player or xrun-hackbench missing)"
    };
    row(
        out,
        "binaries",
        &format!("{bins} in {}", p.binaries.dir.display()),
        None,
    );
}

/// The kernel row and the ALSA playback row, each with what the
/// scenario's configurations need of it when `need` says so.
fn push_kernel_and_playback_rows(
    out: &mut String,
    p: &Probe,
    s: &Scenario,
    need: &impl Fn(String) -> Option<String>,
) {
    let m = &p.machine;
    row(
        out,
        "kernel",
        &format!("{} {}", m.kernel_release, m.kernel_version),
        need(or_nothing(
            per_config(s, |c| c.kernel.as_ref().map(|k| format!("{k} only"))),
            "any",
        )),
    );
    let pcms: Vec<String> = p
        .sound
        .playback
        .iter()
        .map(|a| format!("hw:{},{} {}", a.card, a.device, a.id))
        .collect();
    row(
        out,
        "ALSA playback",
        &or_nothing(
            pcms,
            "none (no sound card: backend auto plays to the virtual sink)",
        ),
        need(or_nothing(
            per_config(s, |c| match (c.audio.backend, &c.audio.device) {
                (Backend::Virtual, _) | (Backend::Auto, None) => None,
                (Backend::Cpal, d) => Some(format!(
                    "cpal {} {}",
                    c.audio.host.map(|h| h.as_str()).unwrap_or("alsa"),
                    d.as_deref().unwrap_or("default")
                )),
                (_, d) => Some(format!("ALSA {}", d.as_deref().unwrap_or("default"))),
            }),
            "no device (auto: a card if any, else the virtual sink)",
        )),
    );
}

/// The rows of what decides when the player runs (RT priority, CPUs,
/// governors), each with what the configurations need when `need` says so.
fn push_scheduling_rows(
    out: &mut String,
    p: &Probe,
    s: &Scenario,
    need: &impl Fn(String) -> Option<String>,
) {
    let m = &p.machine;
    let rt = if p.realtime.allowed {
        format!("up to {} ({})", p.realtime.max_priority, p.realtime.reason)
    } else {
        format!("none ({})", p.realtime.reason)
    };
    row(
        out,
        "RT priority",
        &rt,
        need(or_nothing(
            per_config(s, |c| {
                c.audio
                    .priority
                    .and_then(|pr| pr.rt_priority())
                    .map(|n| n.to_string())
            }),
            "none",
        )),
    );
    let cpus: Vec<String> = p.allowed_cpus.iter().map(usize::to_string).collect();
    row(
        out,
        "CPUs",
        &format!("{} allowed: {}", cpus.len(), cpus.join(",")),
        need(or_nothing(
            per_config(s, |c| c.audio.cpu.as_ref().map(|l| format!("cpu {l}"))),
            "any",
        )),
    );
    let now: Vec<&str> = m.governors.values().map(String::as_str).collect();
    let mut now = now;
    now.dedup();
    row(
        out,
        "governors",
        &if p.available_governors.is_empty() {
            "none (no cpufreq)".to_string()
        } else {
            format!(
                "{} now; available: {}",
                now.join(","),
                p.available_governors.join(" ")
            )
        },
        need(or_nothing(
            per_config(s, |c| {
                c.knobs.iter().find_map(|k| match k {
                    scenario::KnobSpec::Governor { value } => Some(value.clone()),
                    _ => None,
                })
            }),
            "unchanged",
        )),
    );
}

/// The rows of the kernel interfaces a trial writes to or through
/// (debugfs, PM-QoS, tmpfs), each with what the configurations need of
/// it when `need` says so.
fn push_interface_rows(
    out: &mut String,
    p: &Probe,
    s: &Scenario,
    need: &impl Fn(String) -> Option<String>,
) {
    let sd = &p.sched_debug;
    row(
        out,
        "debugfs",
        &format!(
            "{}: {}",
            sd.dir.display(),
            match (sd.present, sd.writable) {
                (false, _) => "absent",
                (true, false) => "present, not writable",
                (true, true) => "present, writable",
            }
        ),
        need(or_nothing(
            per_config(s, |c| {
                let words: Vec<String> = c
                    .knobs
                    .iter()
                    .filter_map(|k| match k {
                        scenario::KnobSpec::SchedFeature { word } => Some(word.clone()),
                        scenario::KnobSpec::SchedDebug { file, .. } => Some(file.clone()),
                        _ => None,
                    })
                    .collect();
                (!words.is_empty()).then(|| format!("writable: {}", words.join(" ")))
            }),
            "nothing",
        )),
    );
    row(
        out,
        "PM-QoS",
        &format!(
            "{}: {}",
            p.pm_qos.device.display(),
            match (p.pm_qos.present, p.pm_qos.writable) {
                (false, _) => "absent",
                (true, false) => "present, not writable",
                (true, true) => "writable",
            }
        ),
        need(or_nothing(
            per_config(s, |c| c.pm_qos_us.map(|us| format!("hold {us} us"))),
            "not used",
        )),
    );
    row(
        out,
        "tmpfs",
        &format!(
            "{}: {}",
            p.tmpfs.dir.display(),
            p.tmpfs
                .free_bytes
                .map_or("none".to_string(), |b| format!("{} free", mb(b)))
        ),
        need(or_nothing(
            per_config(s, |c| Some(mb(sound_bytes(&c.audio.source)))),
            "nothing",
        )),
    );
}

/// A row per knob of the check: the value found, the one requested, and
/// what was read back after writing it (nothing, read-only).
fn push_knob_rows(out: &mut String, r: &CheckReport) {
    for k in &r.knobs {
        let back = k
            .read_back
            .as_ref()
            .map(|v| format!(", read back {v}"))
            .unwrap_or_else(|| ", not written (--read-only)".into());
        row(
            out,
            "knob",
            &format!(
                "{} ({}): {} -> {}{back}",
                k.what, k.config, k.found, k.requested
            ),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe of an armv7 board with `machine` changed by `edit`.
    fn probe(edit: impl FnOnce(&mut serde_json::Value)) -> Probe {
        let mut v = serde_json::json!({
            "schema": "xrunbench.probe/1", "version": "0",
            "machine": {"kernel_release": "6.1.0", "kernel_version": "#1", "arch": "armv7l",
                "hostname": "b", "cmdline": "", "cpu_model": "", "cpu_count": 4,
                "governors": {}, "boot_id": "x"},
            "allowed_cpus": [0, 1, 2, 3],
            "realtime": {"allowed": true, "max_priority": 99, "reason": "root"},
            "sched_debug": {"dir": "/sys/kernel/debug/sched", "present": false, "writable": false, "features": []},
            "available_governors": [],
            "pm_qos": {"device": "/dev/cpu_dma_latency", "present": true, "writable": true},
            "sound": {"cards": [], "playback": []},
            "tmpfs": {"dir": "/dev/shm", "free_bytes": 100000000u64},
            "binaries": {"dir": "/root/.cache/xrunbench/bin", "player": true, "hackbench": true},
            "journal_dir": "/var/lib/xrunbench/journal"
        });
        edit(&mut v["machine"]);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_row_per_need_under_what_is_offered() {
        let p = Path::new("s.toml");
        let text = "name = \"s\"\n[audio]\ngenerate = { seconds = 1, rate = 8000, channels = 1 }\n\
                    [[config]]\nname = \"a\"\n[config.audio]\npriority = \"fifo:80\"\n\
                    [[config]]\nname = \"b\"\nkernel = \"9.9\"\n";
        let s = scenario::resolve(p, &scenario::parse(p, text).unwrap()).unwrap();
        let text = render("ssh root@b", Some(p), &probe(|_| {}), &s, None);
        assert!(text.contains("armv7l (board binaries: armv7)"), "{text}");
        assert!(text.contains("needs: 9.9 only (b)"), "{text}");
        assert!(text.contains("needs: 0.02 MB (a), 0.02 MB (b)"), "{text}");
        assert!(text.contains("needs: 80 (a)"), "{text}");
        assert!(text.lines().all(|l| l.len() <= 100), "{text}");
    }

    #[test]
    fn the_probes_words_are_shown_escaped() {
        let s = Scenario::without_configs("--target", None);
        let hostile = "x\u{1b}[2J\u{7}\u{202e}y\u{2066}";
        let p = probe(|m| {
            m["arch"] = serde_json::json!(format!("armv7l{hostile}"));
            m["board_model"] = serde_json::json!(format!("Pi{hostile}"));
            m["kernel_release"] = serde_json::json!(format!("6.1{hostile}"));
        });
        let text = render("ssh root@b", None, &p, &s, None);
        let shown = "x\\u{1b}[2J\\u{7}\\u{202e}y\\u{2066}";
        for word in ["armv7l", "Pi", "6.1"] {
            assert!(text.contains(&format!("{word}{shown}")), "{word}: {text}");
        }
        assert!(
            text.chars()
                .all(|c| c == '\n' || !xrunbench_schema::doc::is_hidden(c)),
            "{text:?}"
        );
    }
}
