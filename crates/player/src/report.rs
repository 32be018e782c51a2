//! The `xrunbench.player/1` document and the human summary.

use std::io::Write;
use std::path::Path;

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
        underrun_clock: if setup.backend == "virtual" {
            ClockSource::Virtual
        } else if setup.backend == "cpal" {
            ClockSource::Cpal
        } else if setup.hardware {
            ClockSource::Kernel
        } else {
            ClockSource::Player
        },
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
/// whole or not at all (temporary file, then rename).
pub fn write_json(report: &PlayerReport, dest: &Path) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(report).map_err(std::io::Error::other)?;
    if dest == Path::new("-") {
        let mut out = std::io::stdout().lock();
        out.write_all(&json)?;
        return out.write_all(b"\n");
    }
    let tmp = dest.with_extension(format!("tmp{}", std::process::id()));
    let result = std::fs::write(&tmp, &json).and_then(|()| std::fs::rename(&tmp, dest));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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

/// Now as RFC 3339 UTC with milliseconds, without a date crate.
pub fn rfc3339_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs() as i64, d.subsec_millis())
}

/// Seconds since the epoch as RFC 3339 UTC (civil-from-days, H. Hinnant).
pub fn rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_796_000_000, 0), "2026-11-30T00:53:20.000Z");
    }

    #[test]
    fn totals_of_no_events_are_zero() {
        let t = totals(&[], 10.0);
        assert_eq!(
            (t.count, t.gap_ms_sum, t.gap_ms_max, t.per_minute),
            (0, 0.0, 0.0, 0.0)
        );
    }
}
