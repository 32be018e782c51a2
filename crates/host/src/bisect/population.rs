//! Trial populations for `bisect-sim`: the trials real runs produced,
//! read back from run directories, to bootstrap from — the distributions a
//! textbook model may not have (zero-heavy, bursty, drifting with the
//! machine's load).

use std::path::PathBuf;

use xrunbench_analysis::compare::metrics::{playback_seconds, Metric};
use xrunbench_analysis::results::RunDir;
use xrunbench_analysis::stats::Rng;

/// One trial as the simulation redraws it.
#[derive(Debug, Clone)]
pub struct TrialSample {
    /// The metric's value.
    pub value: f64,
    /// Each underrun's gap, ms (to thin the events).
    pub gaps_ms: Vec<f64>,
    /// Minutes of playback.
    pub minutes: f64,
}

/// One configuration's trials from one or more run directories.
#[derive(Debug, Clone)]
pub struct Population {
    /// `<config> (<n> trials from <dirs>)`.
    pub name: String,
    /// Its trials.
    pub trials: Vec<TrialSample>,
    /// Trial length, s, as the scenario says.
    pub trial_seconds: f64,
}

/// Reads configuration `config`'s trials from every run directory in
/// `dirs`; one line naming the directory or configuration on error.
pub fn load(dirs: &[PathBuf], config: &str, metric: Metric) -> Result<Population, String> {
    let mut trials = Vec::new();
    let mut seconds: Option<f64> = None;
    for dir in dirs {
        let run = RunDir::load(dir).map_err(|e| e.0)?;
        if !run.configs.iter().any(|c| c == config) {
            return Err(format!(
                "{}: no configuration `{config}` (have: {})",
                dir.display(),
                run.configs.join(", ")
            ));
        }
        if let Some(s) = seconds.filter(|s| (s - run.trial_seconds).abs() > 1e-9) {
            return Err(format!(
                "{}: trials of {} s, but the other run directories' are {s} s: \
                 pool runs of the same scenario",
                dir.display(),
                run.trial_seconds
            ));
        }
        seconds = Some(run.trial_seconds);
        for t in run.trials_of(config) {
            let (Some(value), Some(player)) = (metric.of(t), t.measured()) else {
                continue;
            };
            trials.push(TrialSample {
                value,
                gaps_ms: player.events.iter().map(|e| e.gap_ms).collect(),
                minutes: playback_seconds(t) / 60.0,
            });
        }
    }
    if trials.len() < 2 {
        return Err(format!(
            "configuration `{config}`: {} trial(s) with {} in {}; a population needs at least 2",
            trials.len(),
            metric.label(),
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Population {
        name: format!("{config} ({} trials)", trials.len()),
        trials,
        trial_seconds: seconds.unwrap_or(1.0),
    })
}

impl Population {
    /// A trial drawn with replacement.
    pub fn draw(&self, rng: &mut Rng) -> &TrialSample {
        &self.trials[rng.below(self.trials.len())]
    }

    /// Whether `metric` counts events, so that a trial can be thinned.
    pub fn thinnable(metric: Metric) -> bool {
        matches!(metric, Metric::Underruns | Metric::GapPerMin)
    }
}

impl TrialSample {
    /// The trial with each underrun kept with probability `keep`
    /// (binomial thinning: the same trial with `keep` × the rate of
    /// underrun events), as `metric` (underruns or gap-ms/min).
    pub fn thinned(&self, keep: f64, metric: Metric, rng: &mut Rng) -> f64 {
        let kept = self.gaps_ms.iter().filter(|_| rng.uniform() < keep);
        let per_min = |x: f64| {
            if self.minutes > 0.0 {
                x / self.minutes
            } else {
                0.0
            }
        };
        match metric {
            Metric::GapPerMin => per_min(kept.sum()),
            _ => per_min(kept.count() as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_each_underrun_with_its_probability() {
        // 100 underruns of 10 ms in 10 s: 600 per minute, 6000 ms/min.
        let t = TrialSample {
            value: 600.0,
            gaps_ms: vec![10.0; 100],
            minutes: 10.0 / 60.0,
        };
        let mut rng = Rng(3);
        let n = 4000;
        let mut mean = |metric| {
            (0..n)
                .map(|_| t.thinned(0.5, metric, &mut rng))
                .sum::<f64>()
                / n as f64
        };
        // Binomial(100, ½): s.d. 5 underruns = 30 per minute per draw.
        let tolerance = 4.0 * 30.0 / (n as f64).sqrt();
        assert!((mean(Metric::Underruns) - 300.0).abs() < tolerance);
        assert!((mean(Metric::GapPerMin) - 3000.0).abs() < 10.0 * tolerance);
        assert!(Population::thinnable(Metric::GapPerMin));
        assert!(!Population::thinnable(Metric::P1Fill));
    }
}
