//! Rules `bisect-sim` weighs against the one `bisect` uses ([`Rule`]):
//! the midpoint rule `bisect` used before (with its forced verdict at the
//! cap, or a skip there), and a sequential probability ratio test on the
//! Poisson counts. They live here, not in `bisect`, because the
//! simulation shows what is wrong with them.

use super::rule::{Decision, Rule};
use xrunbench_analysis::compare::metrics::Direction;
use xrunbench_analysis::stats;

/// A bisect step's rule as the simulation drives it: one look per trial.
pub trait StepRule {
    /// The decision after the trials in `new` (k = `new.len()` ≥ 1).
    fn decide(&self, new: &[f64]) -> Decision;

    /// Whether look k can decide at all (looks that cannot are skipped:
    /// the simulation is mostly p-values).
    fn can_decide_at(&self, _k: usize) -> bool {
        true
    }
}

impl StepRule for Rule {
    fn decide(&self, new: &[f64]) -> Decision {
        if !self.can_decide_at(new.len()) {
            return Decision::Continue;
        }
        self.look(new).decision
    }

    fn can_decide_at(&self, k: usize) -> bool {
        Rule::can_decide_at(self, k)
    }
}

/// The rule `bisect` used until issue 12: both one-sided Mann–Whitney tests
/// against one *midpoint* reference, the baseline shifted by half the
/// margin (threshold × max(baseline mean, resolution)), with the same
/// per-look level; at the cap the means decide (`forced`) or the step is
/// undecided.
#[derive(Debug, Clone)]
pub struct Midpoint {
    reference: Vec<f64>,
    reference_mean: f64,
    direction: Direction,
    max_trials: usize,
    levels: Vec<f64>,
    forced: bool,
}

impl Midpoint {
    /// The rule for `baseline`; `forced`: guess by the means at the cap.
    pub fn new(
        baseline: &[f64],
        direction: Direction,
        resolution: f64,
        threshold_pct: f64,
        alpha: f64,
        max_trials: usize,
        forced: bool,
    ) -> Midpoint {
        let mean = baseline.iter().sum::<f64>() / baseline.len().max(1) as f64;
        let half_margin = threshold_pct / 100.0 * mean.abs().max(resolution) / 2.0;
        let sign = match direction {
            Direction::LowerIsBetter => 1.0,
            Direction::HigherIsBetter => -1.0,
        };
        Midpoint {
            reference: baseline.iter().map(|b| b + sign * half_margin).collect(),
            reference_mean: mean + sign * half_margin,
            direction,
            max_trials,
            levels: stats::sequential_mwu_levels(alpha, baseline.len(), max_trials),
            forced,
        }
    }
}

impl StepRule for Midpoint {
    fn decide(&self, new: &[f64]) -> Decision {
        let k = new.len();
        let level = self.levels.get(k - 1).copied().unwrap_or(0.0);
        let (p_worse, p_better) = match stats::mann_whitney(new, &self.reference) {
            Some(m) => match self.direction {
                Direction::LowerIsBetter => (m.p_greater, m.p_less),
                Direction::HigherIsBetter => (m.p_less, m.p_greater),
            },
            None => (1.0, 1.0),
        };
        if p_worse <= level {
            return Decision::Bad;
        }
        if p_better <= level {
            return Decision::Good;
        }
        if k < self.max_trials {
            return Decision::Continue;
        }
        if !self.forced {
            return Decision::Undecided;
        }
        let mean = new.iter().sum::<f64>() / k as f64;
        let worse = match self.direction {
            Direction::LowerIsBetter => mean > self.reference_mean,
            Direction::HigherIsBetter => mean < self.reference_mean,
        };
        if worse {
            Decision::Bad
        } else {
            Decision::Good
        }
    }

    fn can_decide_at(&self, k: usize) -> bool {
        self.forced && k >= self.max_trials || self.levels.get(k - 1).is_some_and(|l| *l > 0.0)
    }
}

/// Wald's SPRT between "same rate" and "rate × factor" on the underrun
/// counts, conditional on the total: given T = baseline + new counts, the
/// new count is Binomial(T, kρ / (kρ + m)) for a rate ratio ρ. Exact for
/// Poisson counts; it has no notion of trial-to-trial spread, which is
/// what the simulation shows it getting wrong. Undecided at the cap.
#[derive(Debug, Clone)]
pub struct PoissonSprt {
    baseline_count: f64,
    m: f64,
    factor: f64,
    resolution: f64,
    upper: f64,
    lower: f64,
    max_trials: usize,
}

impl PoissonSprt {
    /// The test for `baseline` (values in units of `resolution`, i.e.
    /// counts per trial once divided), rate ratio `factor` for "bad".
    pub fn new(
        baseline: &[f64],
        resolution: f64,
        factor: f64,
        alpha: f64,
        max_trials: usize,
    ) -> PoissonSprt {
        PoissonSprt {
            baseline_count: baseline.iter().map(|v| (v / resolution).round()).sum(),
            m: baseline.len() as f64,
            factor,
            resolution,
            upper: ((1.0 - alpha) / alpha).ln(),
            lower: (alpha / (1.0 - alpha)).ln(),
            max_trials,
        }
    }
}

impl StepRule for PoissonSprt {
    fn decide(&self, new: &[f64]) -> Decision {
        let k = new.len() as f64;
        let n: f64 = new.iter().map(|v| (v / self.resolution).round()).sum();
        let p0 = k / (k + self.m);
        let p1 = k * self.factor / (k * self.factor + self.m);
        let llr = n * (p1 / p0).ln() + self.baseline_count * ((1.0 - p1) / (1.0 - p0)).ln();
        if llr >= self.upper {
            Decision::Bad
        } else if llr <= self.lower {
            Decision::Good
        } else if new.len() >= self.max_trials {
            Decision::Undecided
        } else {
            Decision::Continue
        }
    }
}
