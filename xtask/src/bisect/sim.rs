//! `cargo xtask bisect-sim`: how many trials the sequential rule needs to
//! decide a change of underruns, against a fixed-n test with the same
//! error rates — a Monte Carlo experiment on a model of underrun counts.
//!
//! Model: each trial's underrun count is Poisson with a rate that itself
//! varies from trial to trial (gamma, shape `--shape`): the overdispersed
//! counts real trials give. "Good" commits have the baseline mean, "bad"
//! ones `--factor` times it.

use std::process::ExitCode;

use super::rule::{Decision, Rule};
use crate::compare::metrics::Direction;
use crate::compare::stats;

/// Arguments of `cargo xtask bisect-sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Simulated bisect steps per hypothesis.
    #[arg(long, default_value_t = 2000)]
    pub runs: usize,
    /// Baseline trials.
    #[arg(long, default_value_t = 8)]
    pub baseline_trials: usize,
    /// --max-trials of the rule.
    #[arg(long, default_value_t = 10)]
    pub max_trials: usize,
    /// Mean underruns per trial at the good state.
    #[arg(long, default_value_t = 5.0)]
    pub mean: f64,
    /// Factor of the bad state (2 = twice the underruns).
    #[arg(long, default_value_t = 2.0)]
    pub factor: f64,
    /// Gamma shape of the per-trial rate (smaller = more trial-to-trial
    /// spread; infinity = plain Poisson).
    #[arg(long, default_value_t = 4.0)]
    pub shape: f64,
    /// --alpha of the rule.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs the experiment and prints the comparison.
pub fn run(a: &SimArgs) -> anyhow::Result<ExitCode> {
    let mut rng = Rng(super::rule::Rng(a.seed.max(1)));
    let threshold = (a.factor - 1.0) * 100.0;
    let mut seq = [Tally::default(), Tally::default()];
    let max_fixed = 40;
    let mut fixed_wrong = [vec![0usize; max_fixed + 1], vec![0usize; max_fixed + 1]];
    for (h, mean) in [a.mean, a.mean * a.factor].into_iter().enumerate() {
        for _ in 0..a.runs {
            let base: Vec<f64> = (0..a.baseline_trials)
                .map(|_| rng.count(a.mean, a.shape))
                .collect();
            let rule = Rule::new(
                &base,
                Direction::LowerIsBetter,
                1.0,
                threshold,
                a.alpha,
                a.max_trials,
            );
            let stream: Vec<f64> = (0..max_fixed.max(a.max_trials))
                .map(|_| rng.count(mean, a.shape))
                .collect();
            let (k, d) = sequential(&rule, &stream);
            seq[h].add(k, wrong(h, d));
            let reference: Vec<f64> = base
                .iter()
                .map(|b| b + (rule.reference_mean() - rule.baseline_mean()))
                .collect();
            for n in 1..=max_fixed {
                if wrong(h, fixed(&stream[..n], &reference)) {
                    fixed_wrong[h][n] += 1;
                }
            }
        }
    }
    let rate = |w: usize| w as f64 / a.runs as f64;
    println!(
        "model: underruns/trial ~ Poisson(Gamma(shape {}, mean {})); bad = x{}; baseline {} trials; \
         rule: --max-trials {} --alpha {} --threshold {}; {} runs per hypothesis",
        a.shape, a.mean, a.factor, a.baseline_trials, a.max_trials, a.alpha, threshold, a.runs
    );
    let first = |v: Vec<f64>| {
        v.iter()
            .position(|l| *l > 0.0)
            .map(|i| format!("{:.4} from trial {}", v[i], i + 1))
            .unwrap_or_else(|| "none".into())
    };
    println!(
        "per-look level: calibrated {} (Bonferroni would be {})",
        first(super::rule::calibrated_levels(
            a.alpha,
            a.baseline_trials,
            a.max_trials
        )),
        first(super::rule::spend(a.alpha, a.baseline_trials, a.max_trials))
    );
    for (h, name) in ["good (x1)", "bad (x{f})"].iter().enumerate() {
        println!(
            "sequential, {:<10}: mean trials {:.2}, wrong verdicts {:.2}%, forced at the cap {:.1}%",
            name.replace("{f}", &a.factor.to_string()),
            seq[h].trials as f64 / a.runs as f64,
            100.0 * rate(seq[h].wrong),
            100.0 * seq[h].capped as f64 / a.runs as f64
        );
    }
    let target = [rate(seq[0].wrong), rate(seq[1].wrong)];
    let n_same = (1..=max_fixed)
        .find(|&n| rate(fixed_wrong[0][n]) <= target[0] && rate(fixed_wrong[1][n]) <= target[1]);
    for n in [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20] {
        println!(
            "fixed n = {n:>2}: wrong verdicts good {:.2}%, bad {:.2}%",
            100.0 * rate(fixed_wrong[0][n]),
            100.0 * rate(fixed_wrong[1][n])
        );
    }
    let avg = (seq[0].trials + seq[1].trials) as f64 / (2 * a.runs) as f64;
    match n_same {
        Some(n) => println!(
            "=> sequential: {avg:.2} trials per step on average; fixed-n needs {n} for the same error rates"
        ),
        None => println!("=> sequential: {avg:.2} trials per step; no fixed n <= {max_fixed} matches its error rates"),
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Default)]
struct Tally {
    trials: usize,
    wrong: usize,
    capped: usize,
}

impl Tally {
    fn add(&mut self, (k, forced): (usize, bool), wrong: bool) {
        self.trials += k;
        self.wrong += wrong as usize;
        self.capped += forced as usize;
    }
}

fn wrong(hypothesis: usize, d: Decision) -> bool {
    match hypothesis {
        0 => d != Decision::Good,
        _ => d != Decision::Bad,
    }
}

/// Trials used (and whether the cap forced it) and the verdict.
fn sequential(rule: &Rule, stream: &[f64]) -> ((usize, bool), Decision) {
    for k in 1..=stream.len() {
        let look = rule.look(&stream[..k]);
        if look.decision != Decision::Continue {
            return ((k, look.forced), look.decision);
        }
    }
    ((stream.len(), true), Decision::Good)
}

/// The fixed-n test: all n trials, then whichever one-sided MWU p against
/// the midpoint is smaller (ties: the means).
fn fixed(new: &[f64], reference: &[f64]) -> Decision {
    let Some(m) = stats::mann_whitney(new, reference) else {
        return Decision::Good;
    };
    if m.p_greater < m.p_less {
        Decision::Bad
    } else if m.p_less < m.p_greater {
        Decision::Good
    } else {
        let mn = new.iter().sum::<f64>() / new.len() as f64;
        let mr = reference.iter().sum::<f64>() / reference.len() as f64;
        if mn > mr {
            Decision::Bad
        } else {
            Decision::Good
        }
    }
}

/// The rule's generator plus the distributions the model needs.
struct Rng(super::rule::Rng);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0.uniform()
    }

    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Gamma(shape, scale 1), Marsaglia–Tsang (shape ≥ 1; boosted below).
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.uniform().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v > 0.0 && self.uniform().ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    fn poisson(&mut self, lambda: f64) -> f64 {
        // Knuth's product method; rates here are small.
        let l = (-lambda).exp();
        let (mut k, mut p) = (0.0, 1.0);
        loop {
            p *= self.uniform();
            if p <= l {
                return k;
            }
            k += 1.0;
        }
    }

    fn count(&mut self, mean: f64, shape: f64) -> f64 {
        let rate = if shape.is_finite() {
            self.gamma(shape) * mean / shape
        } else {
            mean
        };
        self.poisson(rate)
    }
}
