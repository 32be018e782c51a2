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
//! **Error control.** Looks where even complete separation could not reach
//! the level (the exact p of k new vs m baseline trials is at least
//! 1 / C(k+m, k)) spend nothing; the α is split evenly over the looks that
//! can reject. By the union bound P(false bad) ≤ α and P(false good) ≤ α,
//! whatever the number of looks actually taken. At `--max-trials` without
//! a decision, the means decide (which side of the midpoint), and the
//! verdict says it was forced.

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
            levels: spend(alpha, baseline.len(), max_trials),
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
/// 1 / C(k0+m, k0)) could reach α / (max − k0 + 1). The minimum p falls and
/// the level rises with k0, so the first such k0 keeps the most looks, and
/// every later look can reject too. Index k − 1; 0 means "cannot decide".
pub fn spend(alpha: f64, m: usize, max: usize) -> Vec<f64> {
    let min_p = |k: usize| 1.0 / binomial(k + m, k);
    for k0 in 1..=max {
        let level = alpha / (max - k0 + 1) as f64;
        if min_p(k0) <= level {
            return (1..=max)
                .map(|k| if k >= k0 { level } else { 0.0 })
                .collect();
        }
    }
    vec![0.0; max]
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
