//! The simulation's model of a bisect step, shared by the step study
//! ([`super::sim`]) and the whole bisections ([`super::whole`]): its
//! settings, where a hypothesis's trials come from, and the rules it
//! weighs.

use std::path::PathBuf;

use super::alternatives::{Midpoint, PoissonSprt, StepRule};
use super::population::Population;
use super::rule::{ConfirmArgs, Decision, Rule};
use xrunbench_analysis::compare::metrics::{Direction, Metric};
use xrunbench_analysis::stats::Rng;

/// Arguments of `cargo xtask bisect-sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Simulated bisect steps per hypothesis (good, bad).
    #[arg(long, default_value_t = 2000)]
    pub runs: usize,
    /// Baseline trials.
    #[arg(long, default_value_t = 8)]
    pub baseline_trials: usize,
    /// --max-trials of the rule.
    #[arg(long, default_value_t = 10)]
    pub max_trials: usize,
    /// Model: mean count per trial at the good state.
    #[arg(long, default_value_t = 5.0)]
    pub mean: f64,
    /// Factor of the bad state (2 = twice the underruns); the threshold is
    /// (factor − 1) × 100 % unless --threshold says otherwise.
    #[arg(long, default_value_t = 2.0)]
    pub factor: f64,
    /// Model: gamma shape of the per-trial rate (smaller = more
    /// trial-to-trial spread; `inf` = plain Poisson).
    #[arg(long, default_value_t = 4.0)]
    pub shape: f64,
    /// --alpha of the rule.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// --threshold of the rule, percent (default: from --factor).
    #[arg(long, value_name = "PCT")]
    pub threshold: Option<f64>,
    /// Rules to weigh (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "bisect")]
    pub rule: Vec<RuleKind>,
    /// Bootstrap from these run directories instead of the model.
    #[arg(long, value_name = "RUN_DIR")]
    pub from: Vec<PathBuf>,
    /// With --from: the good state's configuration.
    #[arg(long, value_name = "CONFIG")]
    pub good: Option<String>,
    /// With --from: the bad state's configuration.
    #[arg(long, value_name = "CONFIG")]
    pub bad: Option<String>,
    /// With --from: the good state is the bad configuration's trials with
    /// each underrun kept with probability 1 / --factor.
    #[arg(long)]
    pub thin: bool,
    /// With --from: the metric the rule decides on.
    #[arg(long, value_enum, default_value_t = Metric::Underruns)]
    pub metric: Metric,
    /// Sweep the model over means 1–50, shapes 1–∞ and factors 1.5–4
    /// (error rates and skips only; no fixed-size benchmark).
    #[arg(long)]
    pub grid: bool,
    /// Skip the fixed-size benchmark (it costs most of the time).
    #[arg(long)]
    pub no_fixed: bool,
    /// Simulate whole bisections (baseline, endpoint, steps with skips,
    /// confirmation) of series of these many commits, instead of steps.
    #[arg(long, value_name = "N,…", value_delimiter = ',', num_args = 0..)]
    pub bisections: Option<Vec<usize>>,
    /// With --bisections: how the culprit is confirmed.
    #[command(flatten)]
    pub confirm: ConfirmArgs,
    /// With --bisections and --rule posterior: the search's options.
    #[command(flatten)]
    pub search: super::posterior::SearchArgs,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// A rule the simulation can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuleKind {
    /// The rule `bisect` uses ([`Rule`]).
    Bisect,
    /// The pre-issue-12 midpoint rule, undecided (125) at the cap.
    Midpoint,
    /// The pre-issue-12 midpoint rule as it shipped: the means decide at
    /// the cap.
    MidpointForced,
    /// Wald's SPRT on the Poisson counts (conditional on the total).
    PoissonSprt,
    /// `bisect-run`'s search: a posterior over the whole series
    /// ([`super::posterior`]); whole bisections only.
    Posterior,
}

impl RuleKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            RuleKind::Bisect => "bisect",
            RuleKind::Midpoint => "midpoint",
            RuleKind::MidpointForced => "midpoint-forced",
            RuleKind::PoissonSprt => "poisson-sprt",
            RuleKind::Posterior => "posterior",
        }
    }
}

/// Where a hypothesis's trials come from.
pub(super) enum Source<'a> {
    /// Gamma–Poisson counts.
    Model { mean: f64, shape: f64 },
    /// Real trials, redrawn.
    Trials(&'a Population),
    /// Real trials with each underrun kept with this probability.
    Thinned(&'a Population, f64),
}

impl Source<'_> {
    pub(super) fn draw(&self, rng: &mut Rng, metric: Metric) -> f64 {
        match self {
            Source::Model { mean, shape } => count(rng, *mean, *shape),
            Source::Trials(p) => p.draw(rng).value,
            Source::Thinned(p, keep) => {
                let t = p.draw(rng).clone();
                t.thinned(*keep, metric, rng)
            }
        }
    }
}

/// Everything one row of the table needs besides the rule.
pub(super) struct Scenario<'a> {
    pub(super) name: String,
    pub(super) good: Source<'a>,
    pub(super) bad: Source<'a>,
    pub(super) metric: Metric,
    pub(super) resolution: f64,
    pub(super) direction: Direction,
    pub(super) threshold: f64,
    pub(super) factor: f64,
}

pub(super) fn scenario<'a>(
    a: &SimArgs,
    pops: &'a Option<(Population, Population)>,
) -> Scenario<'a> {
    // Rounded so that ×1.2 prints as 20, not 19.999999999999996.
    let threshold = a
        .threshold
        .unwrap_or(((a.factor - 1.0) * 100.0 * 1e9).round() / 1e9);
    match pops {
        None => Scenario {
            name: format!(
                "model: Poisson(Gamma(shape {}, mean {})), bad ×{}",
                a.shape, a.mean, a.factor
            ),
            good: Source::Model {
                mean: a.mean,
                shape: a.shape,
            },
            bad: Source::Model {
                mean: a.mean * a.factor,
                shape: a.shape,
            },
            metric: Metric::Underruns,
            resolution: 1.0,
            direction: Direction::LowerIsBetter,
            threshold,
            factor: a.factor,
        },
        Some((good, bad)) => {
            let (good_src, name) = if a.thin {
                (
                    Source::Thinned(bad, 1.0 / a.factor),
                    format!(
                        "{} thinned ×1/{} vs {}, {}",
                        bad.name,
                        a.factor,
                        bad.name,
                        a.metric.label()
                    ),
                )
            } else {
                (
                    Source::Trials(good),
                    format!("{} vs {}, {}", good.name, bad.name, a.metric.label()),
                )
            };
            Scenario {
                name,
                good: good_src,
                bad: Source::Trials(bad),
                metric: a.metric,
                resolution: a.metric.resolution(bad.trial_seconds),
                direction: a.metric.direction(),
                threshold,
                factor: a.factor,
            }
        }
    }
}

pub(super) fn make_rule(
    a: &SimArgs,
    scn: &Scenario,
    kind: RuleKind,
    base: &[f64],
) -> Box<dyn StepRule> {
    let (d, r, t, al, max) = (
        scn.direction,
        scn.resolution,
        scn.threshold,
        a.alpha,
        a.max_trials,
    );
    match kind {
        // The search checks its bad endpoint with the step's rule.
        RuleKind::Bisect | RuleKind::Posterior => Box::new(Rule::new(base, d, r, t, al, max)),
        RuleKind::Midpoint => Box::new(Midpoint::new(base, d, r, t, al, max, false)),
        RuleKind::MidpointForced => Box::new(Midpoint::new(base, d, r, t, al, max, true)),
        RuleKind::PoissonSprt => Box::new(PoissonSprt::new(base, r, scn.factor, al, max)),
    }
}

/// The trials a step of `rule` takes on `stream` and its decision.
pub(super) fn step(rule: &dyn StepRule, stream: &[f64]) -> (usize, Decision) {
    for k in 1..=stream.len() {
        if !rule.can_decide_at(k) {
            continue;
        }
        let d = rule.decide(&stream[..k]);
        if d != Decision::Continue {
            return (k, d);
        }
    }
    (stream.len(), Decision::Undecided)
}

/// A fixed-size test's answer: whichever one-sided p of the bisect rule
/// is smaller decides — `Some(true)`: worse than the baseline (bad);
/// `None`: a tie.
pub(super) fn smaller_p_says_bad(p_worse: f64, p_better: f64) -> Option<bool> {
    (p_worse != p_better).then_some(p_worse < p_better)
}

impl SimArgs {
    /// The model-only settings of these arguments (for a grid cell).
    /// The arguments as `bisect-sim` alone has them: clap's defaults, the
    /// one place they are written.
    pub(super) fn defaults() -> SimArgs {
        #[derive(clap::Parser)]
        struct Alone {
            #[command(flatten)]
            args: SimArgs,
        }
        <Alone as clap::Parser>::parse_from(["bisect-sim"]).args
    }

    /// The model experiment with a bisection's own settings (`bisect-run`
    /// weighs its chances with it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn for_model(
        mean: f64,
        shape: f64,
        threshold: f64,
        baseline_trials: usize,
        max_trials: usize,
        alpha: f64,
        confirm: ConfirmArgs,
        runs: usize,
    ) -> SimArgs {
        SimArgs {
            runs,
            baseline_trials,
            max_trials,
            mean,
            factor: 1.0 + threshold / 100.0,
            shape,
            alpha,
            threshold: Some(threshold),
            no_fixed: true,
            confirm,
            ..SimArgs::defaults()
        }
    }

    pub(super) fn clone_model(&self) -> SimArgs {
        SimArgs {
            runs: self.runs,
            baseline_trials: self.baseline_trials,
            max_trials: self.max_trials,
            mean: self.mean,
            factor: self.factor,
            shape: self.shape,
            alpha: self.alpha,
            threshold: self.threshold,
            rule: self.rule.clone(),
            from: Vec::new(),
            good: None,
            bad: None,
            thin: false,
            metric: Metric::Underruns,
            grid: false,
            no_fixed: true,
            bisections: None,
            confirm: self.confirm,
            search: self.search,
            seed: self.seed,
        }
    }
}

/// A gamma–Poisson count: Poisson with a Gamma(shape, mean / shape) rate.
pub(super) fn count(rng: &mut Rng, mean: f64, shape: f64) -> f64 {
    let rate = if shape.is_finite() {
        gamma(rng, shape) * mean / shape
    } else {
        mean
    };
    poisson(rng, rate)
}

fn normal(rng: &mut Rng) -> f64 {
    let (u1, u2) = (rng.uniform(), rng.uniform());
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Gamma(shape, scale 1), Marsaglia–Tsang (shape ≥ 1; boosted below).
fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        return gamma(rng, shape + 1.0) * rng.uniform().powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v > 0.0 && rng.uniform().ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// Poisson(λ): Knuth's product method on slices of λ ≤ 30 (Poisson counts
/// add), so that e^−λ never underflows.
fn poisson(rng: &mut Rng, lambda: f64) -> f64 {
    let mut left = lambda;
    let mut k = 0.0;
    while left > 0.0 {
        let slice = left.min(30.0);
        left -= slice;
        let l = (-slice).exp();
        let mut p = 1.0;
        loop {
            p *= rng.uniform();
            if p <= l {
                break;
            }
            k += 1.0;
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunbench_analysis::stats;

    #[test]
    fn model_counts_have_the_mean_and_spread_asked_for() {
        let mut rng = Rng(7);
        for (mean, shape) in [(5.0, 4.0), (50.0, f64::INFINITY), (1.0, 1.0)] {
            let n = 20_000;
            let v: Vec<f64> = (0..n).map(|_| count(&mut rng, mean, shape)).collect();
            let d = stats::Describe::of(&v).unwrap();
            // Gamma–Poisson: variance = mean + mean² / shape.
            let var = mean + mean * mean / shape;
            assert!(
                (d.mean - mean).abs() < 4.0 * (var / n as f64).sqrt(),
                "{d:?}"
            );
            let ratio = d.stddev * d.stddev / var;
            assert!((0.9..1.1).contains(&ratio), "{mean} {shape}: {ratio}");
        }
    }
}
