//! A planned trial of a resolved scenario, as the
//! [`TrialSpec`] `xrun-trial` runs: typed all the way (the player's
//! arguments come from [`PlayerArgs`], never from strings assembled here).

use std::path::PathBuf;

use xrunbench_schema::trial::{
    AudioInput, LoadArgs, PlayerArgs, TrialId, TrialSpec, TRIAL_SPEC_SCHEMA,
};

use crate::plan::PlannedTrial;
use crate::{Audio, Config, Load, Scenario};

/// The player's settings of a configuration.
pub fn player_args(a: &Audio) -> PlayerArgs {
    PlayerArgs {
        backend: a.backend,
        host: a.host,
        device: a.device.clone(),
        // The scenario checked both fit (buffer_time ≤ 71 min, period shorter).
        buffer_time_us: a
            .buffer_time
            .and_then(|b| u32::try_from(b.as_micros()).ok()),
        period_time_us: a
            .period_time
            .and_then(|p| u32::try_from(p.as_micros()).ok()),
        priority: a.priority,
        cpu: a.cpu.clone(),
    }
}

/// The load of a configuration.
pub fn load_args(l: &Load) -> LoadArgs {
    LoadArgs {
        hackbench: l.hackbench.clone(),
        start_delay_us: l.start_delay.as_micros(),
    }
}

/// The spec of `planned` (`planned.config` indexes `s.configs`): `audio`
/// is where the configuration's sound is on the target, `work_dir` where
/// the trial's logs go there. The record comes back on stdout.
pub fn trial_spec(
    s: &Scenario,
    planned: &PlannedTrial,
    audio: AudioInput,
    work_dir: Option<PathBuf>,
) -> TrialSpec {
    let c: &Config = &s.configs[planned.config];
    TrialSpec {
        schema: TRIAL_SPEC_SCHEMA.into(),
        trial: TrialId {
            scenario: s.name.clone(),
            config: c.name.clone(),
            k: planned.k,
            seq: u32::try_from(planned.seq).unwrap_or(u32::MAX),
        },
        knobs: c.knobs.clone(),
        pm_qos_us: c.pm_qos_us,
        audio,
        player: player_args(&c.audio),
        load: c.load.as_ref().map(load_args),
        warmup_us: s.warmup.as_micros(),
        duration_us: s.duration.as_micros(),
        record: None,
        work_dir,
        monitor: s.monitor.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate as scenario;
    use std::path::Path;

    #[test]
    fn quickstart_configs_become_specs() {
        let p = xrunbench_paths::workspace_root().join("scenarios/quickstart.toml");
        let (_, s) = scenario::load(&p).unwrap();
        let planned = PlannedTrial {
            seq: 2,
            config: 1,
            config_name: "fifo-80".into(),
            k: 1,
        };
        let spec = trial_spec(&s, &planned, AudioInput::File("/x.wav".into()), None);
        assert_eq!(spec.trial.stem(), "fifo-80-1");
        assert_eq!(spec.duration_us, 10_000_000);
        let args = spec
            .player
            .to_args(Path::new("/x.wav"), 10.0, Path::new("p.json"))
            .join(" ");
        assert_eq!(
            args,
            "--backend auto -B 20000 -F 5000 --priority fifo:80 --duration 10 --json p.json -q -- /x.wav"
        );
        assert_eq!(spec.load.unwrap().hackbench.groups, 10);
    }
}
