//! Host and device selection: which of cpal's hosts this build has, the
//! device `-D` names on it, and `--list-devices`.

use cpal::traits::{DeviceTrait, HostTrait};
use xrunbench_schema::CpalHost;

use super::{CpalOpenError, CpalOptions};
use crate::sink::alsa_time;

/// cpal's id of `host`, or the cargo feature this build lacks for it.
pub fn host_id(host: CpalHost) -> Result<cpal::HostId, &'static str> {
    match host {
        CpalHost::Alsa => Ok(cpal::HostId::Alsa),
        #[cfg(feature = "cpal-jack")]
        CpalHost::Jack => Ok(cpal::HostId::Jack),
        #[cfg(feature = "cpal-pulseaudio")]
        CpalHost::Pulseaudio => Ok(cpal::HostId::PulseAudio),
        #[cfg(feature = "cpal-pipewire")]
        CpalHost::Pipewire => Ok(cpal::HostId::PipeWire),
        #[allow(unreachable_patterns)] // with every feature on
        other => Err(other.player_feature().unwrap_or("?")),
    }
}

/// The host and the device `opts` names. A host this build lacks is a
/// usage error. cpal's ALSA host is refused where libasound's timestamps
/// would be written past their variables ([`alsa_time`]): it reads them
/// through the alsa crate at every callback, out of our reach. The host is
/// returned to be kept until the stream is built (PipeWire's keeps the
/// library initialised).
pub fn open_device(opts: &CpalOptions) -> Result<(cpal::Host, cpal::Device), CpalOpenError> {
    let host = opts.host.as_str();
    let id = host_id(opts.host).map_err(|feature| CpalOpenError::NotBuilt { host, feature })?;
    let fail = |what: String| CpalOpenError::Device {
        host,
        device: opts.device.clone(),
        what,
    };
    if opts.host == CpalHost::Alsa && !alsa_time::timestamps_are_safe() {
        return Err(fail(format!(
            "refused: {}; use --backend alsa",
            alsa_time::mismatch()
        )));
    }
    let cpal_host = cpal::host_from_id(id).map_err(|e| fail(format!("host unavailable: {e}")))?;
    let device = find_device(&cpal_host, &opts.device).map_err(fail)?;
    Ok((cpal_host, device))
}

/// The device's id (ALSA: the PCM name) and its human name.
pub fn device_names(d: &cpal::Device) -> (String, String) {
    let id = d.id().map(|i| i.id().to_string()).unwrap_or_default();
    let name = d
        .description()
        .map(|x| x.name().to_string())
        .unwrap_or_default();
    (id, name)
}

fn find_device(host: &cpal::Host, name: &str) -> Result<cpal::Device, String> {
    if name == "default" {
        return host
            .default_output_device()
            .ok_or_else(|| "the host has no default output device".to_string());
    }
    let devices = host
        .output_devices()
        .map_err(|e| format!("cannot list devices: {e}"))?;
    let mut seen = Vec::new();
    for d in devices {
        let (id, human) = device_names(&d);
        if id == name || human == name {
            return Ok(d);
        }
        seen.push(if human.is_empty() || human == id {
            id
        } else {
            format!("{id} ({human})")
        });
    }
    Err(format!(
        "no such output device; the host lists: {}",
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    ))
}

/// Lists every host this build has, its output devices and their
/// configurations (`xrun-player --list-devices`).
pub fn list_devices() -> String {
    let mut s = String::new();
    for choice in CpalHost::ALL {
        let id = match host_id(choice) {
            Ok(id) => id,
            Err(feature) => {
                s += &format!(
                    "host {}: not built (cargo feature {feature})\n",
                    choice.as_str()
                );
                continue;
            }
        };
        let host = match cpal::host_from_id(id) {
            Ok(h) => h,
            Err(e) => {
                s += &format!("host {}: unavailable: {e}\n", choice.as_str());
                continue;
            }
        };
        s += &format!("host {}:\n", choice.as_str());
        let devices = match host.output_devices() {
            Ok(d) => d,
            Err(e) => {
                s += &format!("  cannot list devices: {e}\n");
                continue;
            }
        };
        for d in devices {
            let (id, name) = device_names(&d);
            s += &format!("  -D {id}  ({name})\n");
            match d.supported_output_configs() {
                Ok(cfgs) => {
                    for line in compact_configs(cfgs.collect()) {
                        s += &format!("      {line}\n");
                    }
                }
                Err(e) => s += &format!("      configurations unknown: {e}\n"),
            }
        }
    }
    s
}

/// One line per format, rate range and period range, with the channel
/// counts merged (`I16 1..=32 ch …`): a device can list hundreds of ranges.
fn compact_configs(cfgs: Vec<cpal::SupportedStreamConfigRange>) -> Vec<String> {
    let mut lines: Vec<(String, u16, u16)> = Vec::new();
    for c in cfgs {
        let key = format!(
            "{:?} {}..={} Hz period {}",
            c.sample_format(),
            c.min_sample_rate(),
            c.max_sample_rate(),
            match c.buffer_size() {
                cpal::SupportedBufferSize::Range { min, .. } => format!("{min}.."),
                cpal::SupportedBufferSize::Unknown => "?".into(),
            }
        );
        match lines.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, lo, hi)) => {
                *lo = (*lo).min(c.channels());
                *hi = (*hi).max(c.channels());
            }
            None => lines.push((key, c.channels(), c.channels())),
        }
    }
    lines
        .into_iter()
        .map(|(k, lo, hi)| match (lo == hi, k.split_once(' ')) {
            (true, Some((f, rest))) => format!("{f} {lo} ch {rest}"),
            (false, Some((f, rest))) => format!("{f} {lo}..={hi} ch {rest}"),
            _ => k,
        })
        .collect()
}
