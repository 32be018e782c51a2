//! The `xrunbench.player/1` document and the human summary.

use std::io::Write;
use std::path::{Path, PathBuf};

use xrunbench_schema::player::{
    ClockSource, FileInfo, Negotiated, PlayerReport, ProcessInfo, Totals, Underrun, PLAYER_SCHEMA,
};

use crate::play::PlayOutcome;
use crate::sink::Setup;

/// Totals over the events; the rate is per minute of wall-clock playback.
pub fn totals(events: &[Underrun], wall_seconds: f64) -> Totals {
    // Starts from +0.0: an empty f64 sum is -0.0, printed "-0.000".
    let gap_ms_sum = events.iter().map(|e| e.gap_ms).fold(0.0, |a, b| a + b);
    let gap_ms_max = events.iter().map(|e| e.gap_ms).fold(0.0, f64::max);
    let per_minute = if wall_seconds > 0.0 {
        events.len() as f64 * 60.0 / wall_seconds
    } else {
        0.0
    };
    Totals {
        count: events.len() as u64,
        gap_ms_sum,
        gap_ms_max,
        per_minute,
    }
}

/// The negotiated parameters as the report states them.
pub fn negotiated(setup: &Setup, backend_choice: &str) -> Negotiated {
    let us = |frames: u64| frames * 1_000_000 / setup.rate as u64;
    Negotiated {
        backend: setup.backend.to_string(),
        device: setup.device.clone(),
        backend_choice: backend_choice.to_string(),
        hardware: setup.hardware,
        format: setup.format.alsa_name().to_string(),
        rate: setup.rate,
        channels: setup.channels,
        buffer_frames: setup.buffer_frames,
        period_frames: setup.period_frames,
        buffer_us: us(setup.buffer_frames),
        period_us: us(setup.period_frames),
        start_threshold: setup.start_threshold,
        stop_threshold: setup.stop_threshold,
        underrun_clock: setup.clock,
        notes: setup.notes.clone(),
    }
}

/// Assembles the report.
pub fn build(
    started_at: String,
    file: FileInfo,
    params: Negotiated,
    outcome: PlayOutcome,
    process: ProcessInfo,
) -> PlayerReport {
    let totals = totals(&outcome.events, outcome.wall_seconds);
    PlayerReport {
        schema: PLAYER_SCHEMA.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        started_mono_ns: outcome.started_mono_ns,
        audio_seconds: outcome.frames_written as f64 / params.rate as f64,
        file,
        params,
        ended: outcome.ended,
        frames_written: outcome.frames_written,
        wall_seconds: outcome.wall_seconds,
        events: outcome.events,
        totals,
        fill: outcome.near_miss.fill_summary(),
        lateness: outcome.near_miss.lateness_summary(),
        process,
        selftest_stalls: outcome.stalls,
        host_errors: outcome.host_errors,
    }
}

/// Writes the report as JSON to `dest` (`-` is stdout). A file is written
/// Where `--json` writes, checked before anything plays so that a long
/// measurement is never lost to a destination that cannot take it.
#[derive(Debug, Clone)]
pub enum JsonDest {
    /// `-`: stdout.
    Stdout,
    /// A device (`/dev/null`, `/dev/stderr`): written in place, never
    /// replaced by a file.
    Device(PathBuf),
    /// A file, written atomically (temporary beside it, then renamed).
    File(PathBuf),
}

impl JsonDest {
    /// Checks `dest` the way the final write will use it: a file's
    /// directory must take a new file (the temporary is created and removed
    /// again), a device must open for writing; a directory, FIFO or socket
    /// is refused. The error is one line naming `--json` and the path.
    pub fn check(dest: &Path) -> Result<JsonDest, String> {
        use std::os::unix::fs::FileTypeExt;
        if dest == Path::new("-") {
            return Ok(JsonDest::Stdout);
        }
        let bad = |what: String| format!("--json {}: {what}", dest.display());
        if let Ok(meta) = std::fs::metadata(dest) {
            let t = meta.file_type();
            if t.is_dir() {
                return Err(bad(
                    "is a directory: expected a file to write the report to".into(),
                ));
            }
            if t.is_char_device() {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dest)
                    .map_err(|e| bad(format!("cannot open for writing: {e}")))?;
                return Ok(JsonDest::Device(dest.to_path_buf()));
            }
            if !t.is_file() {
                return Err(bad("not a regular file or a device".into()));
            }
        }
        let parent = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(bad(format!(
                "directory {} does not exist",
                parent.display()
            )));
        }
        let probe = xrunbench_schema::doc::temp_path_for(dest);
        std::fs::File::create(&probe)
            .map_err(|e| bad(format!("cannot create a file in {}: {e}", parent.display())))?;
        let _ = std::fs::remove_file(&probe);
        Ok(JsonDest::File(dest.to_path_buf()))
    }

    /// Writes `report` here.
    pub fn write(&self, report: &PlayerReport) -> std::io::Result<()> {
        let json = report_bytes(report)?;
        match self {
            JsonDest::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(&json)?;
                out.flush()
            }
            JsonDest::Device(p) => std::fs::OpenOptions::new()
                .write(true)
                .open(p)?
                .write_all(&json),
            JsonDest::File(p) => xrunbench_schema::doc::write_atomic(p, &json),
        }
    }
}

/// The report as the file holds it: pretty JSON and a final newline.
fn report_bytes(report: &PlayerReport) -> std::io::Result<Vec<u8>> {
    let mut json = serde_json::to_vec_pretty(report).map_err(std::io::Error::other)?;
    json.push(b'\n');
    Ok(json)
}

/// Keeps a report that could not go where `--json` said: in the temporary
/// directory, else on /dev/shm. Returns where it went.
pub fn keep_elsewhere(report: &PlayerReport) -> Option<PathBuf> {
    let json = report_bytes(report).ok()?;
    xrunbench_schema::player::kept_report_paths(std::process::id())
        .into_iter()
        .find(|p| xrunbench_schema::doc::write_atomic(p, &json).is_ok())
}

fn ms(us: u64) -> f64 {
    us as f64 / 1e3
}

/// The short human summary printed on stderr at the end.
pub fn summary(r: &PlayerReport) -> String {
    let p = &r.params;
    let t = &r.totals;
    let mut s = format!(
        "xrun-player: played {:.3} s of {} in {:.3} s ({})\n",
        r.audio_seconds,
        r.file.path,
        r.wall_seconds,
        match r.ended {
            xrunbench_schema::player::EndReason::EndOfFile => "end of file",
            xrunbench_schema::player::EndReason::Duration => "duration reached",
            xrunbench_schema::player::EndReason::Signal => "stopped by signal",
            xrunbench_schema::player::EndReason::FatalUnderrun => "fatal underrun",
        }
    );
    s += &format!(
        "  device: {} {} ({}), {} {} Hz {} ch, buffer {} frames ({:.3} ms), period {} frames ({:.3} ms)\n",
        p.backend,
        p.device,
        p.backend_choice,
        p.format,
        p.rate,
        p.channels,
        p.buffer_frames,
        ms(p.buffer_us),
        p.period_frames,
        ms(p.period_us)
    );
    s += &format!(
        "  underruns: {} ({:.2}/min), gaps: sum {:.3} ms, max {:.3} ms (clock: {})\n",
        t.count,
        t.per_minute,
        t.gap_ms_sum,
        t.gap_ms_max,
        clock_name(p.underrun_clock)
    );
    if r.fill.count > 0 {
        s += &format!(
            "  buffer fill at wake-up: min {:.3} ms, p0.1 {:.3}, p1 {:.3}, p50 {:.3} ms; lateness p99 {:.3} ms, max {:.3} ms\n",
            ms(r.fill.min),
            ms(r.fill.p0_1),
            ms(r.fill.p1),
            ms(r.fill.p50),
            ms(r.lateness.p99),
            ms(r.lateness.max)
        );
    }
    for h in &r.host_errors {
        s += &format!(
            "  host errors: {} x {} (first: {})\n",
            h.count, h.kind, h.first_message
        );
    }
    let pr = &r.process;
    s += &format!(
        "  cpu: user {:.1} ms, sys {:.1} ms; max rss {} KiB; mlock: {}; priority: {}; affinity: {}\n",
        pr.cpu_user_ms, pr.cpu_sys_ms, pr.max_rss_kib, pr.mlock, pr.priority, pr.affinity
    );
    s
}

fn clock_name(c: ClockSource) -> &'static str {
    match c {
        ClockSource::Kernel => "kernel trigger timestamp",
        ClockSource::Player => "player's monotonic clock",
        ClockSource::Virtual => "virtual device clock",
        ClockSource::Cpal => "cpal stream instants",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_of_no_events_are_zero() {
        let t = totals(&[], 10.0);
        assert_eq!(
            (t.count, t.gap_ms_sum, t.gap_ms_max, t.per_minute),
            (0, 0.0, 0.0, 0.0)
        );
    }
}
