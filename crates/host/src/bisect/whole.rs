//! `cargo xtask bisect-sim --bisections`: whole bisections, as
//! `bisect-run` does them, simulated — how often the commit named is the
//! right one and confirmed, how often a wrong one is confirmed, how often
//! there is no answer, and at what cost in trials.
//!
//! A series of N commits on top of a good one (commit 0); the culprit is
//! at a position drawn uniformly from 1..=N, and every commit from it on
//! is bad. As `bisect-run`:
//!
//! 1. the baseline: `--baseline-trials` trials of the good commit;
//! 2. the bad endpoint must measure bad (the step's rule), else there is
//!    nothing to bisect — no answer;
//! 3. `git bisect`: the untested commit nearest the middle of the range
//!    left (the lower one of two), each decided by the step's rule on
//!    fresh trials; an undecided step is skipped (125) and the next nearest
//!    commit tried, as `git bisect skip` avoids skipped commits; when only
//!    skipped commits are left between the last good and the first bad,
//!    there is no single answer;
//! 4. the culprit confirmed look by look ([`Confirmer`]): fresh trials of
//!    it and of its parent, `--confirm-batch` a side a look, up to
//!    `--confirm-trials`; anything but `Confirmed` is no answer.
//!
//! Beside it, bisections of a fixed number of trials per step, no skips
//! and no confirmation (each step says whichever of the rule's two
//! one-sided p-values is smaller): one trial per step as KernelCI tests,
//! three as LKP's comparison needs at the least, and the smallest n as
//! accurate as the rule: right at least as often, and wrong at most as
//! often (or 1 %).

use super::model::{make_rule, step, RuleKind, Scenario, SimArgs, Source};
use super::posterior;
use super::rule::{ConfirmArgs, Confirmation, Confirmer, Decision, Rule};
use xrunbench_analysis::stats::Rng;

/// How one bisection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The culprit named (and, for the rule, confirmed).
    Right,
    /// Another commit named (and confirmed).
    Wrong,
    /// Nothing to bisect, only skipped commits left, or a culprit not
    /// confirmed: why.
    NoAnswer(Unanswered),
}

/// Why a bisection ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// The bad endpoint's check found nothing to bisect.
    Endpoint,
    /// The search, or the walk, could not settle on one commit.
    Unsettled,
    /// The right culprit was named but not confirmed.
    RightUnconfirmed,
    /// A wrong culprit was named, and not confirmed.
    WrongUnconfirmed,
}

/// The outcomes of many bisections of one kind.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Bisections.
    pub runs: usize,
    /// Right culprit named (and confirmed).
    pub right: usize,
    /// Wrong culprit named (and confirmed).
    pub wrong: usize,
    /// No answer.
    pub none: usize,
    /// No answer, by [`Unanswered`] in its order.
    pub unanswered: [usize; 4],
    /// Trials in all (baseline, endpoint, steps, confirmation).
    pub trials: usize,
    /// Bisect steps in all.
    pub steps: usize,
    /// Skipped steps in all.
    pub skips: usize,
}

impl Tally {
    fn add(&mut self, end: End, trials: usize, steps: usize, skips: usize) {
        self.runs += 1;
        match end {
            End::Right => self.right += 1,
            End::Wrong => self.wrong += 1,
            End::NoAnswer(why) => {
                self.none += 1;
                self.unanswered[why as usize] += 1;
            }
        }
        self.trials += trials;
        self.steps += steps;
        self.skips += skips;
    }

    /// `x` per bisection.
    pub fn rate(&self, x: usize) -> f64 {
        x as f64 / self.runs.max(1) as f64
    }
}

/// The next commit `git bisect` tests between the last good `lo` and the
/// first bad `hi`: the untested, unskipped one nearest the middle (the
/// lower of two); `None` when none is left.
pub fn next_commit(lo: usize, hi: usize, skipped: &[bool]) -> Option<usize> {
    let mid2 = lo + hi; // twice the middle, to compare distances in integers
    (lo + 1..hi)
        .filter(|&i| !skipped[i])
        .min_by_key(|&i| ((2 * i).abs_diff(mid2), i))
}

/// Where git bisect's walk of a series ended.
struct Walk {
    /// The last commit found good (0: the good endpoint).
    lo: usize,
    /// The first commit found bad (the series' length: the bad endpoint).
    hi: usize,
    /// Steps tested.
    steps: usize,
    /// Steps skipped.
    skips: usize,
}

/// git bisect over commits 1..`commits` (0 good, `commits` bad), each step
/// decided by `decide`: `Some(true)` bad, `Some(false)` good, `None` skip.
fn walk(commits: usize, mut decide: impl FnMut(usize) -> Option<bool>) -> Walk {
    let mut w = Walk {
        lo: 0,
        hi: commits,
        steps: 0,
        skips: 0,
    };
    let mut skipped = vec![false; commits + 1];
    while let Some(i) = next_commit(w.lo, w.hi, &skipped) {
        w.steps += 1;
        match decide(i) {
            Some(true) => w.hi = i,
            Some(false) => w.lo = i,
            None => {
                skipped[i] = true;
                w.skips += 1;
            }
        }
    }
    w
}

/// `n` trials of `src`.
fn draw(src: &Source, n: usize, scn: &Scenario, rng: &mut Rng) -> Vec<f64> {
    (0..n).map(|_| src.draw(rng, scn.metric)).collect()
}

/// One bisection of `commits` commits with the culprit at `culprit`, by
/// `kind`'s rule: its end, trials, steps and skips.
fn bisect_once(
    a: &SimArgs,
    scn: &Scenario,
    kind: RuleKind,
    commits: usize,
    culprit: usize,
    rng: &mut Rng,
) -> (End, usize, usize, usize) {
    let state = |i: usize| if i >= culprit { &scn.bad } else { &scn.good };
    let base = draw(&scn.good, a.baseline_trials, scn, rng);
    let rule = make_rule(a, scn, kind, &base);
    let mut trials = base.len();
    let (k, d) = step(rule.as_ref(), &draw(&scn.bad, a.max_trials, scn, rng));
    trials += k;
    if d != Decision::Bad {
        return (End::NoAnswer(Unanswered::Endpoint), trials, 0, 0);
    }
    let w = walk(commits, |i| {
        let (k, d) = step(rule.as_ref(), &draw(state(i), a.max_trials, scn, rng));
        trials += k;
        match d {
            Decision::Good => Some(false),
            Decision::Bad => Some(true),
            Decision::Continue | Decision::Undecided => None,
        }
    });
    let (hi, steps, skips) = (w.hi, w.steps, w.skips);
    if hi - w.lo > 1 {
        // Only skipped commits between: "the first bad commit could be
        // any of …".
        return (End::NoAnswer(Unanswered::Unsettled), trials, steps, skips);
    }
    let (end, k) = confirmed(a, scn, (state(hi - 1), state(hi)), hi == culprit, rng);
    (end, trials + k, steps, skips)
}

/// One bisection by `bisect-run`'s search ([`posterior`]): the baseline,
/// the bad endpoint checked by the step's rule, the search, the
/// confirmation. Its steps are the search's visits.
fn search_once(
    a: &SimArgs,
    scn: &Scenario,
    commits: usize,
    culprit: usize,
    rng: &mut Rng,
) -> (End, usize, usize, usize) {
    let state = |i: usize| if i >= culprit { &scn.bad } else { &scn.good };
    let base = draw(&scn.good, a.baseline_trials, scn, rng);
    let rule = Rule::new(
        &base,
        scn.direction,
        scn.resolution,
        scn.threshold,
        posterior::endpoint_alpha(a.alpha),
        a.max_trials,
    );
    let endpoint = draw(&scn.bad, a.max_trials, scn, rng);
    let (k, d) = step(&rule, &endpoint);
    let mut trials = base.len() + k;
    if posterior::nothing_to_bisect(d, rule.p_values(&endpoint[..k]).0) {
        return (End::NoAnswer(Unanswered::Endpoint), trials, 0, 0);
    }
    let mut series = posterior::Series::new(commits);
    series.add(0, &base);
    series.add(commits, &endpoint[..k]);
    let family = posterior::Family::of(scn.metric, scn.resolution);
    let out = posterior::search(&mut series, family, a.search.plan(), |i, k, _| {
        Ok::<_, ()>(posterior::Measured::Trials(draw(state(i), k, scn, rng)))
    })
    .expect("the simulation's measurements do not fail");
    trials += out.trials;
    let Some(g) = out.found else {
        return (End::NoAnswer(Unanswered::Unsettled), trials, out.visits, 0);
    };
    let named = (state(g.first - 1), state(g.last));
    let (end, k) = confirmed(a, scn, named, g.last == culprit, rng);
    (end, trials + k, out.visits, 0)
}

/// The culprit named, confirmed with fresh trials of its parent's and its
/// own state (`states`): how the bisection ends (`right`: the commit named
/// is the culprit), and the trials spent.
fn confirmed(
    a: &SimArgs,
    scn: &Scenario,
    states: (&Source, &Source),
    right: bool,
    rng: &mut Rng,
) -> (End, usize) {
    let confirmer = Confirmer {
        direction: scn.direction,
        resolution: scn.resolution,
        threshold_pct: scn.threshold,
        alpha: a.alpha,
        plan: a.confirm.plan(),
    };
    let out = confirmer
        .run(|_, n| Ok::<_, ()>((draw(states.0, n, scn, rng), draw(states.1, n, scn, rng))))
        .expect("the simulation's measurements do not fail");
    let end = match (out.confirmed.verdict, right) {
        (Confirmation::Confirmed, true) => End::Right,
        (Confirmation::Confirmed, false) => End::Wrong,
        (_, true) => End::NoAnswer(Unanswered::RightUnconfirmed),
        (_, false) => End::NoAnswer(Unanswered::WrongUnconfirmed),
    };
    (end, out.parent.len() + out.culprit.len())
}

/// One bisection with `n` trials per step, no endpoint check, no skip and
/// no confirmation.
fn fixed_once(
    a: &SimArgs,
    scn: &Scenario,
    n: usize,
    commits: usize,
    culprit: usize,
    rng: &mut Rng,
) -> (End, usize, usize) {
    let state = |i: usize| if i >= culprit { &scn.bad } else { &scn.good };
    let base = draw(&scn.good, a.baseline_trials, scn, rng);
    let rule = Rule::new(
        &base,
        scn.direction,
        scn.resolution,
        scn.threshold,
        a.alpha,
        n,
    );
    let mut trials = base.len();
    let w = walk(commits, |i| {
        let (p_worse, p_better) = rule.p_values(&draw(state(i), n, scn, rng));
        trials += n;
        // A tie: a coin (a fixed-size bisection never skips).
        Some(
            super::model::smaller_p_says_bad(p_worse, p_better)
                .unwrap_or_else(|| rng.uniform() < 0.5),
        )
    });
    let end = if w.hi == culprit {
        End::Right
    } else {
        End::Wrong
    };
    (end, trials, w.steps)
}

/// `runs` bisections of `commits` commits by `kind`'s rule (the same seed,
/// the same culprits).
pub(super) fn simulate(a: &SimArgs, scn: &Scenario, kind: RuleKind, commits: usize) -> Tally {
    let mut rng = Rng(a.seed.max(1) ^ (commits as u64).rotate_left(17));
    let mut t = Tally::default();
    for _ in 0..a.runs {
        let culprit = 1 + rng.below(commits);
        let (end, trials, steps, skips) = match kind {
            RuleKind::Posterior => search_once(a, scn, commits, culprit, &mut rng),
            _ => bisect_once(a, scn, kind, commits, culprit, &mut rng),
        };
        t.add(end, trials, steps, skips);
    }
    t
}

/// `runs` fixed-size bisections of `n` trials per step.
pub(super) fn simulate_fixed(a: &SimArgs, scn: &Scenario, n: usize, commits: usize) -> Tally {
    let mut rng = Rng(a.seed.max(1) ^ (commits as u64).rotate_left(17) ^ 0xF1_8ED);
    let mut t = Tally::default();
    for _ in 0..a.runs {
        let culprit = 1 + rng.below(commits);
        let (end, trials, steps) = fixed_once(a, scn, n, commits, culprit, &mut rng);
        t.add(end, trials, steps, 0);
    }
    t
}

/// What a bisection can expect, weighed before it starts.
#[derive(Debug, Clone)]
pub struct Expectation {
    /// The baseline's mean count per trial.
    pub mean: f64,
    /// Its gamma shape (method of moments; `inf`: no more spread than
    /// Poisson).
    pub shape: f64,
    /// The simulated bisections.
    pub tally: Tally,
}

/// The chances of a bisection of `commits` commits whose baseline counted
/// `counts` (events per trial), with its own settings: the model fitted to
/// the baseline (mean, and shape from its variance), 300 bisections.
/// `None` when the baseline is too sparse to fit (under half an event a
/// trial) or too short.
pub fn expect_from_baseline(
    counts: &[f64],
    commits: usize,
    threshold: f64,
    max_trials: usize,
    alpha: f64,
    confirm: ConfirmArgs,
    search: posterior::SearchArgs,
) -> Option<Expectation> {
    let n = counts.len();
    if n < 2 || commits < 1 {
        return None;
    }
    let mean = counts.iter().sum::<f64>() / n as f64;
    if !(mean >= 0.5 && mean.is_finite()) {
        return None;
    }
    let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    // Gamma–Poisson: var = mean + mean² / shape.
    let shape = if var > mean {
        (mean * mean / (var - mean)).max(0.1)
    } else {
        f64::INFINITY
    };
    let a = SimArgs::for_model(mean, shape, threshold, n, max_trials, alpha, confirm, 300);
    let a = SimArgs { search, ..a };
    let scn = super::model::scenario(&a, &None);
    // A series of one commit is its own culprit: bisected as two.
    let tally = simulate(&a, &scn, RuleKind::Posterior, commits.max(2));
    Some(Expectation { mean, shape, tally })
}

/// The fixed sizes tried for "the same accuracy".
const FIXED_SIZES: [usize; 16] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64];

/// The table's header.
pub const HEADER: &str = "| series | bisection | right, confirmed | wrong, confirmed | no answer \
    | trials | steps (skipped) | trials vs fixed n, same accuracy | no answer: endpoint / \
    unsettled / right, unconfirmed / wrong, unconfirmed |\n\
    |---|---|---|---|---|---|---|---|---|";

/// One row.
fn row(commits: usize, what: &str, t: &Tally, vs: &str) -> String {
    format!(
        "| {commits} | {what} | {:.1} % | {:.1} % | {:.1} % | {:.1} | {:.2} ({:.2}) | {vs} | {} |",
        100.0 * t.rate(t.right),
        100.0 * t.rate(t.wrong),
        100.0 * t.rate(t.none),
        t.rate(t.trials),
        t.rate(t.steps),
        t.rate(t.skips),
        t.unanswered
            .iter()
            .map(|n| format!("{:.1}", 100.0 * t.rate(*n)))
            .collect::<Vec<_>>()
            .join(" / ")
            + " %",
    )
}

/// The rows for a series of `commits`: each rule, then the fixed-size
/// bisections (KernelCI's one trial, LKP's three, and the smallest n as
/// accurate as the first rule).
pub(super) fn rows(a: &SimArgs, scn: &Scenario, commits: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut first: Option<Tally> = None;
    for &kind in &a.rule {
        let t = simulate(a, scn, kind, commits);
        let mut vs = "–".to_string();
        if first.is_none() && !a.no_fixed {
            vs = match same_accuracy(a, scn, commits, &t) {
                Some((n, f)) => format!(
                    "n = {n}: {:.1} trials, {:.1} % right, {:.1} % wrong; ratio {:.2}",
                    f.rate(f.trials),
                    100.0 * f.rate(f.right),
                    100.0 * f.rate(f.wrong),
                    t.rate(t.trials) / f.rate(f.trials)
                ),
                None => format!("> {} per step", FIXED_SIZES[FIXED_SIZES.len() - 1]),
            };
        }
        out.push(row(commits, kind.name(), &t, &vs));
        first.get_or_insert(t);
    }
    for (n, who) in [
        (1, "KernelCI: 1 trial per step"),
        (3, "LKP: 3 trials per step"),
    ] {
        let f = simulate_fixed(a, scn, n, commits);
        out.push(row(commits, who, &f, "–"));
    }
    out
}

/// The smallest fixed size whose bisections are as accurate as the
/// rule's: right at least as often, and wrong at most as often (or 1 % of
/// the time, whichever is more: a fixed bisection always names a commit,
/// so being right as often is not enough — its other answers are wrong
/// ones, where the rule's are "no answer").
fn same_accuracy(
    a: &SimArgs,
    scn: &Scenario,
    commits: usize,
    rule: &Tally,
) -> Option<(usize, Tally)> {
    let wrong_cap = rule.rate(rule.wrong).max(0.01);
    FIXED_SIZES.iter().find_map(|&n| {
        let f = simulate_fixed(a, scn, n, commits);
        (f.rate(f.right) >= rule.rate(rule.right) && f.rate(f.wrong) <= wrong_cap).then_some((n, f))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults, 300 bisections, a model of `factor` and `shape`.
    fn args(factor: f64, shape: f64) -> SimArgs {
        SimArgs {
            runs: 300,
            factor,
            shape,
            ..SimArgs::defaults()
        }
    }

    #[test]
    fn a_clear_regression_is_named_right_and_confirmed() {
        let a = args(10.0, f64::INFINITY);
        let scn = super::super::model::scenario(&a, &None);
        let t = simulate(&a, &scn, RuleKind::Bisect, 32);
        assert_eq!(t.runs, 300);
        assert!(t.rate(t.right) >= 0.95, "{t:?}");
        assert!(t.rate(t.wrong) <= 0.01, "{t:?}");
        // Every bisection pays its baseline, endpoint and confirmation.
        assert!(t.trials >= 300 * (8 + 1 + 2 * 8), "{t:?}");
        // Five steps halve 32 commits.
        assert!((4.5..=6.0).contains(&t.rate(t.steps)), "{t:?}");
        let k = simulate_fixed(&a, &scn, 1, 32);
        assert!(k.rate(k.right) >= 0.8, "{k:?}");
        assert_eq!(k.none, 0);
    }

    #[test]
    fn noise_costs_answers_not_wrong_culprits() {
        // The case: 5 underruns a trial, shape 4, twice as many.
        let a = args(2.0, 4.0);
        let scn = super::super::model::scenario(&a, &None);
        let t = simulate(&a, &scn, RuleKind::Bisect, 32);
        assert_eq!(t.right + t.wrong + t.none, t.runs);
        assert_eq!(t.unanswered.iter().sum::<usize>(), t.none, "{t:?}");
        // The walk loses most of its answers before it names anything: a
        // bad endpoint not shown bad, or a skip next to the culprit.
        let before_naming = t.unanswered[Unanswered::Endpoint as usize]
            + t.unanswered[Unanswered::Unsettled as usize];
        assert!(5 * before_naming > 4 * t.none, "{t:?}");
        // The confirmation keeps wrong culprits near its α share of the
        // wrong steps; what noise costs is answers.
        assert!(t.rate(t.wrong) <= 0.03, "{t:?}");
        assert!(t.none > t.wrong, "{t:?}");
        // One trial a step names a culprit every time, most often the
        // wrong one.
        let k = simulate_fixed(&a, &scn, 1, 32);
        assert!(k.rate(k.wrong) > 0.5, "{k:?}");
    }

    #[test]
    fn a_bisection_is_weighed_from_its_baseline_s_own_spread() {
        // Mean 5, variance 11.25: gamma shape 4 (the model).
        let counts = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        let var = counts.iter().map(|c: &f64| (c - 5.0).powi(2)).sum::<f64>() / 8.0;
        let search = SimArgs::defaults().search;
        let confirm = ConfirmArgs {
            confirm_trials: 8,
            confirm_batch: 8,
        };
        let e = expect_from_baseline(&counts, 8, 100.0, 10, 0.05, confirm, search).unwrap();
        assert_eq!(e.mean, 5.0);
        assert!((e.shape - 25.0 / (var - 5.0)).abs() < 1e-9, "{e:?}");
        assert_eq!(e.tally.runs, 300);
        // Poisson-tight counts: no extra spread.
        let e = expect_from_baseline(&[5.0, 5.0, 6.0, 4.0], 8, 100.0, 10, 0.05, confirm, search)
            .unwrap();
        assert!(e.shape.is_infinite());
        // Too sparse or too short to fit: nothing promised.
        assert!(
            expect_from_baseline(&[0.0, 0.0, 1.0, 0.0], 8, 100.0, 10, 0.05, confirm, search)
                .is_none()
        );
        assert!(expect_from_baseline(&[5.0], 8, 100.0, 10, 0.05, confirm, search).is_none());
    }

    #[test]
    fn git_bisect_s_order_middle_first_then_around_skips() {
        let none = vec![false; 9];
        assert_eq!(next_commit(0, 8, &none), Some(4));
        assert_eq!(next_commit(4, 8, &none), Some(6));
        assert_eq!(next_commit(0, 3, &none), Some(1));
        assert_eq!(next_commit(5, 6, &none), None);
        let mut skipped = none.clone();
        skipped[4] = true;
        assert_eq!(next_commit(0, 8, &skipped), Some(3));
        skipped[3] = true;
        assert_eq!(next_commit(0, 8, &skipped), Some(5));
        // Only skipped commits left.
        assert_eq!(next_commit(2, 5, &skipped), None);
    }
}
