//! Stream configuration: the sample format the device takes (the file's
//! own when it can, converted on the reader side when not) and the
//! callback size (`BufferSize::Fixed`: cpal's defaults are far too large to
//! ever underrun).

use cpal::traits::DeviceTrait;
use xrunbench_schema::{CpalHost, SampleFormat};

use super::host::device_names;
use crate::sink::{resolve_frames, BufferRequest, StreamFormat};

/// The format and callback size for `fmt` on `device`: the request's
/// period, within what the host allows (and on the ALSA host, what alsa-lib
/// grants, see [`alsa_granted_period`]); every change says why in `notes`.
pub fn negotiate(
    host: CpalHost,
    device: &cpal::Device,
    fmt: StreamFormat,
    req: &BufferRequest,
) -> Result<Choice, String> {
    let mut choice = choose_config(device, fmt, requested_period(req, fmt.rate))?;
    if host == CpalHost::Alsa {
        let (dev_id, _) = device_names(device);
        if let Some(p) = alsa_granted_period(&dev_id, fmt, choice.format, choice.period) {
            if p != choice.period {
                choice.notes.push(format!(
                    "ALSA grants a period of {p} frames, not {}: asking cpal for {p}",
                    choice.period
                ));
                choice.period = p;
            }
        }
    }
    Ok(choice)
}

/// cpal's name of a format the device may be fed, if it has one.
pub fn to_cpal(f: SampleFormat) -> Option<cpal::SampleFormat> {
    match f {
        SampleFormat::U8 => Some(cpal::SampleFormat::U8),
        SampleFormat::S16Le => Some(cpal::SampleFormat::I16),
        SampleFormat::S32Le => Some(cpal::SampleFormat::I32),
        SampleFormat::FloatLe => Some(cpal::SampleFormat::F32),
        // cpal's I24 is 4 bytes wide, not packed: convert instead.
        SampleFormat::S24_3Le => None,
    }
}

/// Formats to try, best first: the file's own, then float, then integers.
fn format_preference(file: SampleFormat) -> Vec<SampleFormat> {
    let mut v = vec![file];
    for f in [
        SampleFormat::FloatLe,
        SampleFormat::S32Le,
        SampleFormat::S16Le,
    ] {
        if !v.contains(&f) {
            v.push(f);
        }
    }
    v.retain(|f| to_cpal(*f).is_some());
    v
}

/// One supported configuration range, for an error message.
fn describe_config(c: &cpal::SupportedStreamConfigRange) -> String {
    let buffer = match c.buffer_size() {
        cpal::SupportedBufferSize::Range { min, max } => format!("period {min}..={max}"),
        cpal::SupportedBufferSize::Unknown => "period ?".into(),
    };
    format!(
        "{:?} {} ch {}..={} Hz {buffer}",
        c.sample_format(),
        c.channels(),
        c.min_sample_rate(),
        c.max_sample_rate()
    )
}

/// The period (callback size) to ask for: `--period-*` when given, else
/// half of `--buffer-*` (cpal double-buffers: its hosts make the device
/// buffer two callbacks long), else aplay's default period.
fn requested_period(req: &BufferRequest, rate: u32) -> u64 {
    let (buffer, period) = resolve_frames(req, rate);
    let period_given = req.period_frames.is_some() || req.period_time_us.is_some();
    let buffer_given = req.buffer_frames.is_some() || req.buffer_time_us.is_some();
    if !period_given && buffer_given {
        return (buffer / 2).max(1);
    }
    period
}

/// The sample format and callback size for this file on a device.
pub struct Choice {
    /// What the device is fed (the file's own format, or a conversion).
    pub format: SampleFormat,
    /// Frames per callback to ask for (`BufferSize::Fixed`).
    pub period: u32,
    /// What differs from the request, and why.
    pub notes: Vec<String>,
}

fn choose_config(
    device: &cpal::Device,
    fmt: StreamFormat,
    want_period: u64,
) -> Result<Choice, String> {
    let ranges: Vec<_> = device
        .supported_output_configs()
        .map_err(|e| format!("cannot query configurations: {e}"))?
        .collect();
    let fits = |r: &&cpal::SupportedStreamConfigRange, f: cpal::SampleFormat| {
        r.channels() == fmt.channels
            && r.sample_format() == f
            && (r.min_sample_rate()..=r.max_sample_rate()).contains(&fmt.rate)
    };
    for format in format_preference(fmt.format) {
        let cf = to_cpal(format).expect("filtered by format_preference");
        let Some(range) = ranges.iter().find(|r| fits(r, cf)) else {
            continue;
        };
        let mut notes = Vec::new();
        if format != fmt.format {
            notes.push(format!(
                "the device does not take {} at {} Hz, {} ch: converting to {} on the reader side",
                fmt.format.alsa_name(),
                fmt.rate,
                fmt.channels,
                format.alsa_name()
            ));
        }
        let want = u32::try_from(want_period).unwrap_or(u32::MAX);
        let period = match range.buffer_size() {
            cpal::SupportedBufferSize::Range { min, max } => want.clamp(*min, *max),
            cpal::SupportedBufferSize::Unknown => want,
        };
        if period != want {
            notes.push(format!(
                "the host allows callbacks of {} frames only: asked for {want}, using {period}",
                describe_range(range.buffer_size())
            ));
        }
        return Ok(Choice {
            format,
            period,
            notes,
        });
    }
    Err(format!(
        "no configuration for {} {} Hz {} ch; it accepts: {}",
        fmt.format.alsa_name(),
        fmt.rate,
        fmt.channels,
        ranges
            .iter()
            .map(describe_config)
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

fn describe_range(b: &cpal::SupportedBufferSize) -> String {
    match b {
        cpal::SupportedBufferSize::Range { min, max } if min == max => format!("{min}"),
        cpal::SupportedBufferSize::Range { min, max } => format!("{min}..={max}"),
        cpal::SupportedBufferSize::Unknown => "?".into(),
    }
}

/// cpal's ALSA host sets the buffer (2 × period) before the period, which
/// the `jack` plugin refuses unless both fit its own period (CI notes: set
/// the period first). So ask alsa-lib first, period before buffer as aplay
/// does, which period it grants, and request exactly that from cpal.
fn alsa_granted_period(
    pcm: &str,
    fmt: StreamFormat,
    format: SampleFormat,
    want: u32,
) -> Option<u32> {
    use alsa::pcm::{Access, HwParams, PCM};
    let pcm = PCM::new(pcm, alsa::Direction::Playback, true).ok()?;
    let hwp = HwParams::any(&pcm).ok()?;
    hwp.set_access(Access::RWInterleaved).ok()?;
    hwp.set_format(crate::sink::alsa::alsa_format(format))
        .ok()?;
    hwp.set_channels(u32::from(fmt.channels)).ok()?;
    hwp.set_rate(fmt.rate, alsa::ValueOr::Nearest).ok()?;
    // Frames is a C long: 32 bits on armv7, where the conversion can fail.
    #[allow(clippy::unnecessary_fallible_conversions)]
    let want = alsa::pcm::Frames::try_from(want).ok()?;
    let period = hwp
        .set_period_size_near(want, alsa::ValueOr::Nearest)
        .ok()?;
    hwp.set_buffer_size_near(2 * period).ok()?;
    pcm.hw_params(&hwp).ok()?;
    let granted = pcm.hw_params_current().ok()?.get_period_size().ok()?;
    u32::try_from(granted).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_follows_the_request() {
        let b = |bt: Option<u32>, pt: Option<u32>| BufferRequest {
            buffer_time_us: bt,
            period_time_us: pt,
            ..Default::default()
        };
        assert_eq!(requested_period(&b(Some(20_000), None), 48_000), 480);
        assert_eq!(requested_period(&b(Some(20_000), Some(5_000)), 48_000), 240);
        assert_eq!(requested_period(&b(None, None), 48_000), 6_000);
    }

    #[test]
    fn formats_prefer_the_files_own() {
        assert_eq!(
            format_preference(SampleFormat::S16Le),
            vec![
                SampleFormat::S16Le,
                SampleFormat::FloatLe,
                SampleFormat::S32Le
            ]
        );
        assert_eq!(
            format_preference(SampleFormat::S24_3Le)[0],
            SampleFormat::FloatLe
        );
    }
}
