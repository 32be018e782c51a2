//! `cargo xtask soak --minutes N`: one long xrun-player run on the virtual
//! sink, under continuous xrun-hackbench load, with writer stalls injected
//! at known, seeded random moments (`--selftest-stall`). Every 10 s it
//! samples the player's RSS, open file descriptors and threads (and the
//! time the hypervisor took from this machine's CPUs: steal); at the end
//! it checks that the underruns reported are exactly the stalls injected:
//! one per stall, each gap within 1 ms of (stall − audio queued when it
//! began), and no other event — except where the latency monitor beside
//! it (FIFO 99 on every CPU) shows the machine itself was away for exactly
//! the gap: a hypervisor can take a VM's CPU, and then the sink really
//! runs dry. It prints the samples and a verdict (exit 0 when RSS and fds
//! stayed flat, every stall was found and nothing else happened that the
//! machine does not explain).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use xrunbench_schema::monitor::{MachinePause as Pause, MonitorAlone, MonitorReport};
use xrunbench_schema::player::PlayerReport;
use xrunbench_schema::trial::{PlayerArgs, ToneSpec};
use xrunbench_schema::{Backend, Priority, SampleFormat};

/// Arguments of `cargo xtask soak`.
#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    /// How long the player plays.
    #[arg(long, default_value_t = 60.0)]
    pub minutes: f64,
    /// Seed of the stall schedule (printed; the same seed, the same stalls).
    #[arg(long, default_value_t = 15)]
    pub seed: u64,
    /// hackbench groups of the load (`-g`); 0: no load.
    #[arg(long, default_value_t = 4)]
    pub groups: u32,
    /// `--bin-dir`: prebuilt board binaries.
    #[command(flatten)]
    pub bins: xrunbench_host::target::binaries::BinDirArg,
}

/// How far a reported gap may be from the stall that caused it, ms.
const GAP_TOLERANCE_MS: f64 = 1.0;
/// Sampling period of RSS, fds and threads.
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// The player's buffer and period (20 ms / 5 ms, the quickstart's): a
/// stall longer than the buffer is one underrun.
const BUFFER_US: u32 = 20_000;
const PERIOD_US: u32 = 5_000;

/// The one CPU the player is pinned to: the last this process may use.
///
/// Why pinned: a FIFO 80 writer that may run anywhere is pushed by the
/// real-time balancer to whichever CPU runs a lower-priority task — also
/// when that CPU is a vCPU the hypervisor has just taken away. Then the
/// writer waits without any monitor thread being late, and its underrun
/// looks like the player's own (a trace showed 13 such migrations and a
/// 21.7 ms underrun with no monitor wake-up 10 ms late). Pinned, the
/// writer runs on every turn its CPU gets, and whatever keeps it from
/// running keeps that CPU's monitor thread too, so the monitor explains it.
fn player_cpu() -> usize {
    xrunbench_trial::fingerprint::allowed_cpus()
        .last()
        .copied()
        .unwrap_or(0)
}

/// One sample of the player process.
#[derive(Debug, Clone, Copy)]
struct Sample {
    t_s: f64,
    rss_kib: u64,
    fds: usize,
    threads: u64,
    /// Steal time of all CPUs since the soak began, ms (/proc/stat: what
    /// a hypervisor ran instead of this machine; 0 on bare metal).
    steal_ms: f64,
}

/// Steal time of all CPUs since boot, ms (`cpu` line of /proc/stat, field
/// 8, in USER_HZ ticks of 10 ms).
fn steal_ms() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("cpu "))?;
            line.split_whitespace().nth(8)?.parse::<f64>().ok()
        })
        .map_or(0.0, |ticks| ticks * 10.0)
}

/// splitmix64: the stall schedule from a seed, stable across versions.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Stalls (at s, ms): one every 4–16 s, each 40–240 ms long (always more
/// than the 20 ms buffer, so each is exactly one underrun), the first
/// after 2 s, none in the last 2 s.
fn schedule(seed: u64, seconds: f64) -> Vec<(f64, f64)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    let mut t = 2.0;
    while t < seconds - 2.0 {
        let ms = (40.0 + 200.0 * rng.unit()).round();
        out.push(((t * 1000.0).round() / 1000.0, ms));
        t += ms / 1000.0 + 4.0 + 12.0 * rng.unit();
    }
    out
}

/// The player's command line: the virtual sink at FIFO 80 pinned to `cpu`
/// (see [`player_cpu`]), the quickstart's buffer, the stalls.
fn player_args(
    seconds: f64,
    stalls: &[(f64, f64)],
    cpu: usize,
    json: &Path,
    wav: &Path,
) -> Vec<String> {
    let player = PlayerArgs {
        backend: Backend::Virtual,
        buffer_time_us: Some(BUFFER_US),
        period_time_us: Some(PERIOD_US),
        priority: Some(Priority::Fifo(80)),
        cpu: Some(
            cpu.to_string()
                .parse()
                .expect("a CPU this process may use is a CPU list"),
        ),
        ..PlayerArgs::default()
    };
    let mut a = player.to_args(wav, seconds, json);
    if !stalls.is_empty() {
        let list: Vec<String> = stalls.iter().map(|(at, ms)| format!("{at}:{ms}")).collect();
        // Among the options: before the `--` and the file that end them.
        let at = a.len() - 2;
        a.splice(at..at, ["--selftest-stall".to_string(), list.join(",")]);
    }
    a
}

/// The player's RSS (KiB), open fds and threads, if it still runs.
fn sample(pid: u32, t_s: f64, steal_base: f64) -> Option<Sample> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let status = std::fs::read_to_string(proc_dir.join("status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let fds = std::fs::read_dir(proc_dir.join("fd")).ok()?.count();
    Some(Sample {
        t_s,
        rss_kib: field("VmRSS:")?,
        fds,
        threads: field("Threads:")?,
        steal_ms: steal_ms() - steal_base,
    })
}

/// Starts a child with stdout and stderr to `log`.
fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// The monitor's wake-up interval, and how late one of its wake-ups must
/// be to be kept (µs). The writer wakes with at least buffer − period
/// (15 ms) queued, so only a pause of about that length can dry the sink;
/// keeping every 1 ms spike instead filled the monitor's list (4096 per
/// CPU) within 50 minutes on this VM, leaving the rest unexplained.
const MONITOR_INTERVAL_US: u32 = 1000;
const MONITOR_THRESHOLD_US: u32 = 10_000;
/// How close a pause's end must be to the moment the writer fed the sink
/// again for the pause to be the cause, ms: the writer is the next thing
/// to run on that CPU after the monitor's FIFO-99 thread, and the monitor
/// is due every 1 ms.
const PAUSE_END_TOLERANCE_MS: f64 = 2.0;

/// The pause during which the sink ran dry (at `dry_s`) and which ended
/// when the writer ran again (`back_s`): for an underrun nobody injected
/// the writer came back to feed the sink (at the gap's end); for one that
/// found a stall late, to begin the stall.
fn pause_between(pauses: &[Pause], dry_s: f64, back_s: f64) -> Option<Pause> {
    Pause::spanning(pauses, dry_s, back_s, PAUSE_END_TOLERANCE_MS)
}

/// An underrun of the player's report nobody injected.
#[derive(Debug, Clone, Copy)]
struct Unexplained {
    at_s: f64,
    gap_ms: f64,
}

/// How the stalls and the events matched.
#[derive(Debug, Default)]
struct Matching {
    found: usize,
    /// Stalls found by an underrun that began earlier, in a machine pause
    /// the writer came back from only to stall: one line each.
    found_after_pause: Vec<String>,
    missed: Vec<String>,
    /// Underruns nobody injected and no pause of the machine explains.
    false_events: Vec<Unexplained>,
    /// Underruns nobody injected that a pause of the machine explains.
    machine_events: Vec<String>,
    worst_error_ms: f64,
}

/// Pairs each stall with the events that began during it, or with one
/// that began in a machine pause the writer came back from only to stall
/// (its gap then is the pause's rest plus the stall); an event no stall
/// explains is the machine's when a pause explains it, else false.
fn match_events(report: &PlayerReport, pauses: &[Pause]) -> Matching {
    let mut m = Matching::default();
    let mut used = vec![false; report.events.len()];
    for s in &report.selftest_stalls {
        let during: Vec<usize> = (0..report.events.len())
            .filter(|&i| !used[i] && s.holds(report.events[i].at_s))
            .collect();
        for &i in &during {
            used[i] = true;
        }
        let queued_ms = s.queued_us.unwrap_or(0) as f64 / 1e3;
        let expected = s.actual_ms - queued_ms;
        match during.as_slice() {
            [i] => {
                let err = (report.events[*i].gap_ms - expected).abs();
                m.worst_error_ms = m.worst_error_ms.max(err);
                if err <= GAP_TOLERANCE_MS {
                    m.found += 1;
                } else {
                    m.missed.push(format!(
                        "stall at {:.3} s ({:.3} ms, {queued_ms:.3} ms queued): gap {:.3} ms, \
                         expected {expected:.3} ms",
                        s.at_s, s.actual_ms, report.events[*i].gap_ms
                    ));
                }
            }
            [] => match found_after_pause(report, &used, pauses, s) {
                Some((i, line)) => {
                    used[i] = true;
                    m.found_after_pause.push(line);
                }
                None => m.missed.push(format!(
                    "stall at {:.3} s ({:.3} ms): no underrun",
                    s.at_s, s.actual_ms
                )),
            },
            more => m.missed.push(format!(
                "stall at {:.3} s ({:.3} ms): {} underruns",
                s.at_s,
                s.actual_ms,
                more.len()
            )),
        }
    }
    for (i, e) in report.events.iter().enumerate() {
        if used[i] {
            continue;
        }
        match pause_between(pauses, e.at_s, e.at_s + e.gap_ms / 1e3) {
            Some(p) => m.machine_events.push(format!(
                "underrun at {:.3} s, gap {:.3} ms: CPU {} was away {:.3} ms (FIFO 99 due at \
                 {:.3} s ran at {:.3} s)",
                e.at_s,
                e.gap_ms,
                p.cpu,
                p.ms(),
                p.due_s,
                p.ran_s
            )),
            None => m.false_events.push(Unexplained {
                at_s: e.at_s,
                gap_ms: e.gap_ms,
            }),
        }
    }
    m
}

/// The underrun that found stall `s` although it began before it: the
/// sink ran dry in a machine pause that lasted until the stall began (the
/// writer came back and stalled at once), and its gap is the rest of the
/// pause plus the stall, within [`GAP_TOLERANCE_MS`].
fn found_after_pause(
    report: &PlayerReport,
    used: &[bool],
    pauses: &[Pause],
    s: &xrunbench_schema::player::SelftestStall,
) -> Option<(usize, String)> {
    let (i, e) = report
        .events
        .iter()
        .enumerate()
        .find(|(i, e)| !used[*i] && e.at_s < s.at_s && s.at_s <= e.at_s + e.gap_ms / 1e3)?;
    let p = pause_between(pauses, e.at_s, s.at_s)?;
    let expected = (s.at_s - e.at_s) * 1e3 + s.actual_ms - s.queued_us.unwrap_or(0) as f64 / 1e3;
    ((e.gap_ms - expected).abs() <= GAP_TOLERANCE_MS).then(|| {
        (
            i,
            format!(
                "stall at {:.3} s ({:.3} ms): one underrun from {:.3} s, gap {:.3} ms (expected \
                 {expected:.3}): CPU {} was away {:.3} ms before it",
                s.at_s,
                s.actual_ms,
                e.at_s,
                e.gap_ms,
                p.cpu,
                p.ms()
            ),
        )
    })
}

/// `cargo xtask soak`.
pub fn run(args: &SoakArgs) -> Result<ExitCode> {
    if !(args.minutes.is_finite() && args.minutes > 0.0) {
        eprintln!(
            "xtask: --minutes {}: expected a positive number",
            args.minutes
        );
        return Ok(ExitCode::from(2));
    }
    let bins = match &args.bins.bin_dir {
        Some(d) => d.clone(),
        None => xrunbench_host::target::binaries::host_build(&[])?,
    };
    let seconds = args.minutes * 60.0;
    let scratch = tempfile::Builder::new()
        .prefix("xrunbench-soak-")
        .tempdir_in("/dev/shm")
        .context("a scratch directory on /dev/shm")?;
    let wav = scratch.path().join("tone.wav");
    let tone = ToneSpec {
        tone_hz: 440.0,
        seconds: Some(10.0),
        rate: 48_000,
        channels: 2,
        format: SampleFormat::S16Le,
    };
    xrunbench_wav::write_tone(&wav, &tone, 10.0).context("writing the tone")?;
    let stalls = schedule(args.seed, seconds);
    let json = scratch.path().join("player.json");
    let cpu = player_cpu();
    let player_args = player_args(seconds, &stalls, cpu, &json, &wav);
    eprintln!(
        "xtask: soak: {:.1} min, {} stalls (seed {}), hackbench -g {} beside the player \
         (fifo:80, pinned to CPU {cpu})",
        args.minutes,
        stalls.len(),
        args.seed,
        args.groups
    );
    let mut load = if args.groups > 0 {
        let load_args: Vec<String> = vec![
            "-g".into(),
            args.groups.to_string(),
            "--duration".into(),
            (seconds + 5.0).to_string(),
        ];
        Some(Helper(Some(spawn(
            &bins.join("xrun-hackbench"),
            &load_args,
            &scratch.path().join("load.log"),
        )?)))
    } else {
        None
    };
    let monitor_json = scratch.path().join("monitor.json");
    let mut monitor = Helper(Some(spawn_monitor(
        &bins,
        seconds,
        &monitor_json,
        scratch.path(),
    )?));
    let player_log = scratch.path().join("player.log");
    let mut player = Helper(Some(spawn(
        &bins.join("xrun-player"),
        &player_args,
        &player_log,
    )?));
    let samples = watch(player.child())?;
    let status = player.wait()?;
    // The player has ended: the monitor stops (and prints its report) now.
    let monitor = finish_monitor(monitor.stop(), &monitor_json, scratch.path());
    if let Some(mut l) = load.take() {
        let _ = l.stop();
    }
    if !status.success() {
        let log = std::fs::read_to_string(&player_log).unwrap_or_default();
        anyhow::bail!("xrun-player failed ({status}): {}", log.trim());
    }
    let report: PlayerReport = serde_json::from_str(
        &std::fs::read_to_string(&json).context("reading the player's report")?,
    )
    .context("parsing the player's report")?;
    let pauses = monitor.and_then(|m| {
        if m.spikes_dropped > 0 {
            println!(
                "pauses of the machine: {} not kept (the monitor's list was full): underruns \
                 after the last one kept cannot be explained",
                m.spikes_dropped
            );
        }
        match report.started_mono_ns {
            Some(start) => Ok(m.pauses(start)),
            None => Err("the player's report has no started_mono_ns".into()),
        }
    });
    Ok(verdict(&samples, &report, stalls.len(), pauses))
}

/// Starts `xrun-trial monitor` on every CPU, its report to `json`. It is
/// stopped when the player ends; its duration (the soak's, and a little
/// more) only bounds it should xtask itself be killed.
fn spawn_monitor(bins: &Path, seconds: f64, json: &Path, scratch: &Path) -> Result<Child> {
    let out =
        std::fs::File::create(json).with_context(|| format!("creating {}", json.display()))?;
    let log = scratch.join("monitor.log");
    let err = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let bin = bins.join("xrun-trial");
    let ask = MonitorAlone {
        duration_s: (seconds.ceil() + MONITOR_SLACK_S) as u64,
        interval_us: MONITOR_INTERVAL_US,
        threshold_us: MONITOR_THRESHOLD_US,
        ..MonitorAlone::default()
    };
    let child = Command::new(&bin)
        .args(ask.to_args())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    // Its threads lock memory and go FIFO 99 before the first wake-up.
    std::thread::sleep(Duration::from_millis(500));
    Ok(child)
}

/// Seconds the monitor measures beyond the player's duration.
const MONITOR_SLACK_S: f64 = 5.0;

/// A child of the soak (the player, the load, the monitor): stopped with
/// SIGTERM and reaped however the soak ends, an error included.
struct Helper(Option<Child>);

impl Helper {
    /// The child, while it has not been reaped.
    fn child(&mut self) -> &mut Child {
        self.0
            .as_mut()
            .expect("a helper is used only before it is reaped")
    }

    /// Waits for the child to end by itself.
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let status = self.child().wait()?;
        self.0 = None;
        Ok(status)
    }

    /// SIGTERM, then reaps it (hackbench reaps its workers; the monitor
    /// prints its report and exits 128 + 15).
    fn stop(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let mut c = self.0.take().expect("a helper is stopped once");
        // SAFETY: kill(2) of our own child, not yet reaped.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        c.wait()
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if self.0.is_some() {
            let _ = self.stop();
        }
    }
}

/// The monitor's report once it has been stopped, or why there is none
/// (said in the verdict: without it every underrun nobody injected is
/// false).
fn finish_monitor(
    stopped: std::io::Result<std::process::ExitStatus>,
    json: &Path,
    scratch: &Path,
) -> std::result::Result<MonitorReport, String> {
    let status = stopped.map_err(|e| format!("waiting for the monitor: {e}"))?;
    // Stopped by our SIGTERM it exits 128 + 15, its report written.
    if !status.success() && status.code() != Some(128 + libc::SIGTERM) {
        let log = std::fs::read_to_string(scratch.join("monitor.log")).unwrap_or_default();
        return Err(format!(
            "xrun-trial monitor failed ({status}): {}",
            log.trim()
        ));
    }
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))
}

/// Samples the player every [`SAMPLE_EVERY`] until it exits, printing each.
fn watch(player: &mut Child) -> Result<Vec<Sample>> {
    let began = Instant::now();
    let steal_base = steal_ms();
    let mut samples: Vec<Sample> = Vec::new();
    let mut next = Duration::from_secs(1);
    println!("     t s   rss KiB   fds  threads  steal ms");
    while player.try_wait()?.is_none() {
        if began.elapsed() >= next {
            if let Some(s) = sample(player.id(), began.elapsed().as_secs_f64(), steal_base) {
                let before = samples.last().map_or(0.0, |p| p.steal_ms);
                println!(
                    "{:>8.0} {:>9} {:>5} {:>8} {:>9.0}",
                    s.t_s,
                    s.rss_kib,
                    s.fds,
                    s.threads,
                    s.steal_ms - before
                );
                samples.push(s);
            }
            next += SAMPLE_EVERY;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(samples)
}

/// Prints the verdict; exit 0 when everything held.
fn verdict(
    samples: &[Sample],
    report: &PlayerReport,
    planned: usize,
    pauses: std::result::Result<Vec<Pause>, String>,
) -> ExitCode {
    let m = match_events(report, pauses.as_deref().unwrap_or(&[]));
    let (first, last) = match (samples.first(), samples.last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => {
            eprintln!("xtask: soak: no sample of the player was taken");
            return ExitCode::FAILURE;
        }
    };
    // Flat: after the first sample (everything mapped and locked by then)
    // RSS never grows by more than a page per minute of playing, and the
    // fds and threads never change.
    let minutes = (last.t_s - first.t_s) / 60.0;
    let rss_max = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    let rss_flat = rss_max <= first.rss_kib + 4 + (4.0 * minutes) as u64;
    let fds_flat = samples.iter().all(|s| s.fds == first.fds);
    let threads_flat = samples.iter().all(|s| s.threads == first.threads);
    let injected = report.selftest_stalls.len();
    println!(
        "samples: {} over {:.1} min; rss {} -> {} KiB (max {rss_max}): {}; fds {}: {}; threads {}: {}",
        samples.len(),
        minutes,
        first.rss_kib,
        last.rss_kib,
        if rss_flat { "flat" } else { "GREW" },
        first.fds,
        if fds_flat { "flat" } else { "CHANGED" },
        first.threads,
        if threads_flat { "flat" } else { "CHANGED" },
    );
    println!(
        "stalls: {planned} planned, {injected} injected, {} found (one underrun each, gap within \
         {GAP_TOLERANCE_MS} ms; worst {:.3} ms), {} found after a pause of the machine, {} \
         missed; {} underrun(s) the machine's, {} false event(s); {} underruns in all",
        m.found,
        m.worst_error_ms,
        m.found_after_pause.len(),
        m.missed.len(),
        m.machine_events.len(),
        m.false_events.len(),
        report.events.len()
    );
    let false_lines = m.false_events.iter().map(|e| {
        format!(
            "underrun at {:.3} s, gap {:.3} ms, no stall, no pause of the machine",
            e.at_s, e.gap_ms
        )
    });
    for l in m.missed.iter().cloned().chain(false_lines).take(20) {
        println!("  {l}");
    }
    match &pauses {
        Ok(p) => {
            let longest = p.iter().map(Pause::ms).fold(0.0, f64::max);
            println!(
                "pauses of the machine (a FIFO-99 monitor thread {MONITOR_THRESHOLD_US} us or more \
                 late): {}, longest {longest:.3} ms",
                p.len()
            );
            for l in m.found_after_pause.iter().chain(&m.machine_events).take(20) {
                println!("  {l}");
            }
        }
        Err(e) => println!(
            "pauses of the machine: unknown ({e}): every underrun nobody injected counts as false"
        ),
    }
    println!(
        "steal (time the hypervisor took from this machine's CPUs): {:.0} ms in all",
        last.steal_ms
    );
    // A false event in a window where the hypervisor took CPU time: said
    // beside it (it is still counted as false), for the same first 20
    // listed above.
    for at in m.false_events.iter().map(|e| e.at_s).take(20) {
        if let Some(w) = samples.windows(2).find(|w| w[0].t_s <= at && at < w[1].t_s) {
            println!(
                "  the false event at {at:.3} s: {:.0} ms of steal between {:.0} s and {:.0} s",
                w[1].steal_ms - w[0].steal_ms,
                w[0].t_s,
                w[1].t_s
            );
        }
    }
    let ok = rss_flat
        && fds_flat
        && threads_flat
        && injected == planned
        && m.found + m.found_after_pause.len() == injected
        && m.false_events.is_empty();
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_seeded_spaced_and_inside_the_run() {
        let a = schedule(15, 600.0);
        assert_eq!(a, schedule(15, 600.0));
        assert_ne!(a, schedule(16, 600.0));
        assert!(a.len() >= 600 / 17 && a.len() <= 600 / 4);
        for w in a.windows(2) {
            assert!(w[1].0 - w[0].0 >= 4.0);
        }
        assert!(a
            .iter()
            .all(|&(at, ms)| (2.0..598.0).contains(&at) && (40.0..=240.0).contains(&ms)));
    }

    #[test]
    fn the_player_is_pinned_to_one_cpu_it_may_use() {
        let cpu = player_cpu();
        assert!(xrunbench_trial::fingerprint::allowed_cpus().contains(&cpu));
        let a = player_args(
            60.0,
            &[(2.0, 146.0), (15.508, 152.0)],
            cpu,
            Path::new("/dev/shm/p.json"),
            Path::new("/dev/shm/t.wav"),
        );
        let after = |flag: &str| {
            let i = a.iter().position(|x| x == flag).expect(flag);
            a[i + 1].clone()
        };
        // One CPU, not a list: the monitor's threads cannot push it away.
        assert_eq!(after("--cpu"), cpu.to_string());
        assert_eq!(after("--priority"), "fifo:80");
        assert_eq!(after("--selftest-stall"), "2:146,15.508:152");
        assert_eq!(a.last().map(String::as_str), Some("/dev/shm/t.wav"));
    }

    /// The player report of the golden trial record.
    fn template_report() -> PlayerReport {
        let record: serde_json::Value =
            serde_json::from_str(include_str!("../tests/golden/trial-template.json")).unwrap();
        serde_json::from_value(record["player"].clone()).unwrap()
    }

    #[test]
    fn stalls_and_events_are_matched_by_time_and_gap() {
        let mut r = template_report();
        let e = r.events[0].clone();
        r.events = vec![e.clone(), e.clone()];
        r.selftest_stalls = vec![xrunbench_schema::player::SelftestStall {
            at_s: 1.0,
            requested_ms: 100.0,
            actual_ms: 100.0,
            queued_us: Some(20_000),
        }];
        r.events[0].at_s = 1.02;
        r.events[0].gap_ms = 80.4;
        r.events[1].at_s = 5.0;
        r.events[1].gap_ms = 12.0;
        let m = match_events(&r, &[]);
        assert_eq!((m.found, m.missed.len(), m.false_events.len()), (1, 0, 1));
        // A FIFO-99 thread held off from before the sink ran dry until the
        // writer fed it again: the machine's, not false.
        let away = |due_s: f64, ran_s: f64| Pause {
            cpu: 1,
            since_s: due_s - 0.001,
            due_s,
            ran_s,
        };
        let m = match_events(&r, &[away(4.99, 5.0125)]);
        assert_eq!((m.machine_events.len(), m.false_events.len()), (1, 0));
        // A pause that ended 5 ms before the gap did explains nothing.
        let m = match_events(&r, &[away(4.99, 5.007)]);
        assert_eq!((m.machine_events.len(), m.false_events.len()), (0, 1));
        // Nor one that began after the sink ran dry (its thread ran at
        // 5.001 s, one interval before it was due).
        let m = match_events(&r, &[away(5.002, 5.012)]);
        assert_eq!(m.false_events.len(), 1);
        r.events[0].gap_ms = 82.0;
        assert_eq!(match_events(&r, &[]).missed.len(), 1, "gap 2 ms off");
    }

    #[test]
    fn a_stall_begun_in_a_pause_of_the_machine_is_found_with_it() {
        let mut r = template_report();
        // The sink ran dry at 9.993 s while CPU 1 was away; the writer came
        // back at 10.000 s and stalled 235 ms at once: one underrun of
        // 7 + 235 ms, which began before the stall.
        r.events.truncate(1);
        r.events[0].at_s = 9.993;
        r.events[0].gap_ms = 242.2;
        r.selftest_stalls = vec![xrunbench_schema::player::SelftestStall {
            at_s: 10.0,
            requested_ms: 235.0,
            actual_ms: 235.0,
            queued_us: Some(0),
        }];
        let pause = Pause {
            cpu: 1,
            since_s: 9.979,
            due_s: 9.98,
            ran_s: 10.0,
        };
        let m = match_events(&r, &[pause]);
        assert_eq!(
            (
                m.found,
                m.found_after_pause.len(),
                m.missed.len(),
                m.false_events.len()
            ),
            (0, 1, 0, 0)
        );
        // Without the pause: a missed stall and a false event.
        let m = match_events(&r, &[]);
        assert_eq!((m.missed.len(), m.false_events.len()), (1, 1));
        // With it, but a gap that is not the pause's rest plus the stall.
        r.events[0].gap_ms = 250.0;
        let m = match_events(&r, &[pause]);
        assert_eq!((m.missed.len(), m.false_events.len()), (1, 1));
    }
}
