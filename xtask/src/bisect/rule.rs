//! The sequential rule behind one bisect step.
//!
//! **Question.** Is this commit's configuration worse than the baseline by
//! the threshold (bad), or no worse at all (good)? Changes between 0 and
//! the threshold are the indifference zone: either answer is acceptable.
//!
//! **Test.** A group-sequential one-sided Mann–Whitney U test with a fixed
//! alpha spent per look (a Bonferroni / Pocock-style split): the baseline's
//! trials are shifted in the *worse* direction by half the margin (margin =
//! threshold × max(|baseline mean|, the metric's resolution), so a
//! baseline of zero underruns still has a scale: one underrun per trial).
//! After each new trial two one-sided exact MWU p-values are computed
//! against that midpoint reference:
//!
//! - `p_worse`: the new trials are worse than the reference → **bad**;
//! - `p_better`: the new trials are better than the reference → **good**.
//!
//! Whichever falls to the per-look level first decides. If the true change
//! is 0, the new trials are ½ margin *better* than the reference; if it is
//! the full threshold, ½ margin worse — symmetric, like an SPRT between
//! "no change" and "threshold", but using the same rank test as `compare`
//! (robust to the skewed, zero-heavy counts underruns are), with no model.
//!
//! **Error control.** One constant per-look level c from the first look
//! that can reach it on (a Pocock-type boundary), calibrated so that, when
//! new and baseline trials are exchangeable (the change is exactly at the
//! midpoint), P(some look has one-sided p ≤ c) ≤ α. Under that null the
//! ranks are uniformly random whatever the distribution, so c is found once
//! by simulating 20 000 random rankings (fixed seed: the same c on every
//! commit) and taking the α-quantile of each path's smallest p. It is
//! exact for continuous data and close for tied data (each look's p is
//! then the exact permutation p given the ties). The same c serves both
//! sides: P(false bad) ≤ α when there is no change, P(false good) ≤ α at
//! a change of the full threshold. Correlated looks make c about twice the
//! Bonferroni split α / looks, which is what lets the rule stop early.
//! At `--max-trials` without a decision, the means decide (which side of
//! the midpoint), and the verdict says it was forced.

use crate::compare::metrics::Direction;
use crate::compare::stats;

/// What the rule says after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No regression (exit 0).
    Good,
    /// Regression beyond the threshold (exit 1).
    Bad,
    /// Run another trial.
    Continue,
}

/// One look's outcome and its reasoning.
#[derive(Debug, Clone)]
pub struct Look {
    /// The decision.
    pub decision: Decision,
    /// One-sided p that the new trials are worse than the midpoint.
    pub p_worse: f64,
    /// One-sided p that they are better.
    pub p_better: f64,
    /// The per-look level (0 at looks that cannot reject).
    pub level: f64,
    /// Whether the decision was forced at the last trial.
    pub forced: bool,
}

/// A sequential test against a fixed baseline.
#[derive(Debug, Clone)]
pub struct Rule {
    reference: Vec<f64>,
    baseline_mean: f64,
    half_margin: f64,
    direction: Direction,
    max_trials: usize,
    levels: Vec<f64>,
}

impl Rule {
    /// The rule for `baseline` (≥ 1 value), a threshold in percent, α per
    /// wrong answer, and at most `max_trials` new trials (≥ 1).
    pub fn new(
        baseline: &[f64],
        direction: Direction,
        resolution: f64,
        threshold_pct: f64,
        alpha: f64,
        max_trials: usize,
    ) -> Rule {
        let mean = baseline.iter().sum::<f64>() / baseline.len().max(1) as f64;
        let scale = mean.abs().max(resolution);
        let half_margin = threshold_pct / 100.0 * scale / 2.0;
        let sign = match direction {
            Direction::LowerIsBetter => 1.0,
            Direction::HigherIsBetter => -1.0,
        };
        let reference = baseline.iter().map(|b| b + sign * half_margin).collect();
        Rule {
            reference,
            baseline_mean: mean,
            half_margin,
            direction,
            max_trials,
            levels: calibrated_levels(alpha, baseline.len(), max_trials),
        }
    }

    /// The midpoint reference's mean (what the new mean is compared with).
    pub fn reference_mean(&self) -> f64 {
        match self.direction {
            Direction::LowerIsBetter => self.baseline_mean + self.half_margin,
            Direction::HigherIsBetter => self.baseline_mean - self.half_margin,
        }
    }

    /// The baseline's mean.
    pub fn baseline_mean(&self) -> f64 {
        self.baseline_mean
    }

    /// Per-look levels, index k − 1.
    pub fn levels(&self) -> &[f64] {
        &self.levels
    }

    /// Looks at the new trials so far (k = `new.len()` ≥ 1).
    pub fn look(&self, new: &[f64]) -> Look {
        let k = new.len();
        let level = self.levels.get(k.wrapping_sub(1)).copied().unwrap_or(0.0);
        let (p_worse, p_better) = match stats::mann_whitney(new, &self.reference) {
            Some(m) => match self.direction {
                Direction::LowerIsBetter => (m.p_greater, m.p_less),
                Direction::HigherIsBetter => (m.p_less, m.p_greater),
            },
            None => (1.0, 1.0),
        };
        let mut decision = if p_worse <= level {
            Decision::Bad
        } else if p_better <= level {
            Decision::Good
        } else {
            Decision::Continue
        };
        let forced = decision == Decision::Continue && k >= self.max_trials;
        if forced {
            decision = self.by_means(new);
        }
        Look {
            decision,
            p_worse,
            p_better,
            level,
            forced,
        }
    }

    fn by_means(&self, new: &[f64]) -> Decision {
        let mean = new.iter().sum::<f64>() / new.len().max(1) as f64;
        let worse = match self.direction {
            Direction::LowerIsBetter => mean > self.reference_mean(),
            Direction::HigherIsBetter => mean < self.reference_mean(),
        };
        if worse {
            Decision::Bad
        } else {
            Decision::Good
        }
    }
}

/// α split evenly over the looks k0 ..= max, where k0 is the first look at
/// which complete separation of k0 new from m baseline trials (exact p =
/// 1 / C(k0+m, k0)) could reach α / (max − k0 + 1): the Bonferroni
/// boundary, used when the samples are too large to calibrate. Index
/// k − 1; 0 means "cannot decide at this look".
pub fn spend(alpha: f64, m: usize, max: usize) -> Vec<f64> {
    for k0 in 1..=max {
        let level = alpha / (max - k0 + 1) as f64;
        if min_p(k0, m) <= level {
            return (1..=max)
                .map(|k| if k >= k0 { level } else { 0.0 })
                .collect();
        }
    }
    vec![0.0; max]
}

fn min_p(k: usize, m: usize) -> f64 {
    1.0 / binomial(k + m, k)
}

/// Random rankings simulated to calibrate the boundary.
const CALIBRATION_PATHS: usize = 20_000;

/// The calibrated Pocock-type levels (see the module docs), memoized per
/// (α, m, max) because the simulation study builds many rules. Falls back
/// to [`spend`] beyond the exact tables' size.
pub fn calibrated_levels(alpha: f64, m: usize, max: usize) -> Vec<f64> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    /// (α bits, m, max) → levels.
    type Levels = HashMap<(u64, usize, usize), Vec<f64>>;
    static CACHE: Mutex<Option<Levels>> = Mutex::new(None);
    if m > 50 || max > 50 || m == 0 {
        return spend(alpha, m, max);
    }
    let key = (alpha.to_bits(), m, max);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    if let Some(v) = map.get(&key) {
        return v.clone();
    }
    let c = calibrate(alpha, m, max);
    let levels: Vec<f64> = (1..=max)
        .map(|k| if min_p(k, m) <= c { c } else { 0.0 })
        .collect();
    map.insert(key, levels.clone());
    levels
}

/// The α-quantile of the smallest one-sided exact p over looks 1..=max,
/// over random rankings of m baseline and max new values.
fn calibrate(alpha: f64, m: usize, max: usize) -> f64 {
    // tails[k][u] = P(U ≥ u) for k new vs m baseline values, no ties.
    let tails: Vec<Vec<f64>> = (1..=max)
        .map(|k| {
            let f = crate::compare::stats::exact_distribution(k, m);
            let total: f64 = f.iter().sum();
            let mut acc = 0.0;
            let mut t: Vec<f64> = f
                .iter()
                .rev()
                .map(|x| {
                    acc += x;
                    acc / total
                })
                .collect();
            t.reverse();
            t
        })
        .collect();
    let mut rng = Rng(0x5EED_0FB1_5EC7);
    let mut mins: Vec<f64> = (0..CALIBRATION_PATHS)
        .map(|_| {
            let mut base: Vec<f64> = (0..m).map(|_| rng.uniform()).collect();
            base.sort_by(f64::total_cmp);
            let mut u = 0usize;
            let mut best = 1.0f64;
            for tail in &tails {
                let x = rng.uniform();
                u += base.partition_point(|b| *b < x);
                best = best.min(tail[u]);
            }
            best
        })
        .collect();
    mins.sort_by(f64::total_cmp);
    // Largest attainable c with P(min p <= c) <= alpha.
    let allowed = (alpha * CALIBRATION_PATHS as f64).floor() as usize;
    let mut c = 0.0;
    for (i, &v) in mins.iter().enumerate() {
        let count = mins[i..].iter().take_while(|w| **w == v).count() + i;
        if count > allowed {
            break;
        }
        c = v;
    }
    c
}

/// xorshift64*: enough randomness for a calibration or a Monte Carlo
/// study, with no dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in (0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_skips_looks_that_cannot_reject() {
        // m = 5: min p at k = 1..5 is 1/6, 1/21, 1/56, 1/126, 1/252.
        let l = spend(0.05, 5, 10);
        assert_eq!(l[0], 0.0);
        assert_eq!(l[2], 0.0);
        let used = l.iter().filter(|x| **x > 0.0).count();
        assert!(l
            .iter()
            .all(|x| *x == 0.0 || (*x - 0.05 / used as f64).abs() < 1e-12));
        assert!(l.iter().sum::<f64>() <= 0.05 + 1e-12);
    }

    #[test]
    fn calibrated_boundary_is_looser_than_bonferroni_but_controls_alpha() {
        let cal = calibrated_levels(0.05, 10, 10);
        let bon = spend(0.05, 10, 10);
        let c = cal.iter().copied().fold(0.0, f64::max);
        let b = bon.iter().copied().fold(0.0, f64::max);
        assert!(c > b, "calibrated {c} vs Bonferroni {b}");
        assert!(c < 0.05);
    }

    #[test]
    fn all_zero_baseline_and_all_zero_new_is_good() {
        let r = Rule::new(&[0.0; 8], Direction::LowerIsBetter, 6.0, 100.0, 0.05, 10);
        let mut new = Vec::new();
        let mut last = Decision::Continue;
        for _ in 0..10 {
            new.push(0.0);
            last = r.look(&new).decision;
            if last != Decision::Continue {
                break;
            }
        }
        assert_eq!(last, Decision::Good);
        assert!(new.len() < 10, "decided before the cap");
    }

    #[test]
    fn a_clear_regression_is_bad() {
        let base = [1.0, 2.0, 0.0, 1.0, 3.0, 2.0, 1.0, 0.0];
        let r = Rule::new(&base, Direction::LowerIsBetter, 6.0, 100.0, 0.05, 10);
        let new = [30.0, 28.0, 35.0, 40.0];
        assert_eq!(r.look(&new).decision, Decision::Bad);
    }
}
