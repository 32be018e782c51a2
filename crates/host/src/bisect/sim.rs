//! `cargo xtask bisect-sim`: how often a bisect step's rule is wrong, how
//! often it cannot decide (125), how many trials it takes, against a
//! fixed-size test at the same error rates, and how many of its wrong
//! steps the culprit confirmation of `bisect-run` would catch — a Monte
//! Carlo experiment.
//!
//! Trials come from a model or from real runs:
//!
//! - model: each trial's count is Poisson with a rate that itself varies
//!   from trial to trial (gamma, shape `--shape`; `inf` = plain Poisson):
//!   the overdispersed counts real trials give. Good commits have the
//!   baseline's mean, bad ones `--factor` times it.
//! - `--from RUN_DIR… --good CONFIG --bad CONFIG`: trials drawn with
//!   replacement from those configurations' trials (bootstrap);
//!   `--thin` instead makes the good population the bad one with each
//!   underrun kept with probability 1 / `--factor` (real trials at exactly
//!   the threshold).
//!
//! Every step draws a fresh baseline of `--baseline-trials` good trials, as
//! `cargo xtask run --trials N` at the good commit does. The same seed
//! gives every rule the same baselines and trials.

use std::process::ExitCode;

use anyhow::bail;

pub use super::model::SimArgs;
use super::model::{make_rule, scenario, smaller_p_says_bad, step, RuleKind, Scenario, Source};
use super::population::{self, Population};
use super::rule::{confirm, Confirmation, Decision, Rule, CONFIRM_BATCH};
use xrunbench_analysis::stats::{self, Rng};

/// Runs the experiment and prints the table.
pub fn run(a: &SimArgs) -> anyhow::Result<ExitCode> {
    check(a)?;
    if a.grid {
        return grid(a);
    }
    let pops = populations(a)?;
    let scn = scenario(a, &pops);
    if let Some(series) = &a.bisections {
        return bisections(a, &scn, series);
    }
    println!(
        "bisect-sim: {}; baseline {} trials; --max-trials {} --alpha {} --threshold {}; \
         {} steps per hypothesis, seed {}; per-look level {}",
        scn.name,
        a.baseline_trials,
        a.max_trials,
        a.alpha,
        scn.threshold,
        a.runs,
        a.seed,
        describe_level(a),
    );
    let mut fixed = (!a.no_fixed).then(|| Fixed::new(a, &scn));
    println!("{HEADER}");
    for &kind in &a.rule {
        let tallies = simulate(a, &scn, kind);
        println!("{}", row(kind, &tallies, fixed.as_mut(), a.alpha));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whole bisections of each series length, one table.
fn bisections(a: &SimArgs, scn: &Scenario, series: &[usize]) -> anyhow::Result<ExitCode> {
    let series: Vec<usize> = if series.is_empty() {
        vec![8, 32, 128]
    } else {
        series.to_vec()
    };
    println!(
        "bisect-sim --bisections: {}; whole bisections as bisect-run does them: a baseline of {} \
         trials, the bad endpoint measured, steps of up to --max-trials {} at --alpha {} \
         --threshold {} with skips, the culprit confirmed with up to {} trials a side, {} a look; the culprit \
         uniform over the series; {} bisections per row, seed {}",
        scn.name,
        a.baseline_trials,
        a.max_trials,
        a.alpha,
        scn.threshold,
        a.confirm.confirm_trials,
        a.confirm.confirm_batch,
        a.runs,
        a.seed
    );
    println!("{}", super::whole::HEADER);
    for &n in &series {
        for line in super::whole::rows(a, scn, n) {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check(a: &SimArgs) -> anyhow::Result<()> {
    if let Some(series) = &a.bisections {
        if series.iter().any(|&n| !(2..=100_000).contains(&n)) {
            bail!("--bisections: each series is 2 to 100000 commits");
        }
        if a.grid {
            bail!("--bisections and --grid are two experiments: one at a time");
        }
        a.confirm.check().map_err(anyhow::Error::msg)?;
        a.search.check().map_err(anyhow::Error::msg)?;
    } else if a.rule.contains(&RuleKind::Posterior) {
        bail!("--rule posterior searches whole series: give --bisections");
    }
    if a.runs == 0 || a.max_trials == 0 || a.baseline_trials < 2 {
        bail!("--runs and --max-trials must be at least 1, --baseline-trials at least 2");
    }
    if !(a.alpha > 0.0 && a.alpha < 0.5) {
        bail!(
            "--alpha {}: expected a probability between 0 and 0.5",
            a.alpha
        );
    }
    if !(a.factor > 1.0 && a.factor.is_finite()) {
        bail!("--factor {}: expected a finite number above 1", a.factor);
    }
    if a.shape.is_nan() || a.shape <= 0.0 || !(a.mean > 0.0 && a.mean.is_finite()) {
        bail!("--shape and --mean must be positive (--shape may be inf)");
    }
    if a.threshold.is_some_and(|t| !(t > 0.0 && t.is_finite())) {
        bail!("--threshold must be a positive percentage");
    }
    if a.from.is_empty() && (a.good.is_some() || a.bad.is_some() || a.thin) {
        bail!("--good, --bad and --thin need --from RUN_DIR");
    }
    if !a.from.is_empty() {
        if a.grid {
            bail!("--grid sweeps the model; it does not take --from");
        }
        if a.bad.is_none() || (a.good.is_none() != a.thin) {
            bail!("--from needs --bad CONFIG and either --good CONFIG or --thin");
        }
        if a.thin && !Population::thinnable(a.metric) {
            bail!(
                "--thin thins underrun events: --metric underruns or gap-per-min, not {}",
                a.metric.label()
            );
        }
    }
    Ok(())
}

/// (good, bad) populations of --from.
fn populations(a: &SimArgs) -> anyhow::Result<Option<(Population, Population)>> {
    let Some(bad) = &a.bad else { return Ok(None) };
    let bad = population::load(&a.from, bad, a.metric).map_err(anyhow::Error::msg)?;
    let good = match &a.good {
        Some(g) => population::load(&a.from, g, a.metric).map_err(anyhow::Error::msg)?,
        None => bad.clone(),
    };
    Ok(Some((good, bad)))
}

fn describe_level(a: &SimArgs) -> String {
    let levels = stats::sequential_mwu_levels(a.alpha, a.baseline_trials, a.max_trials);
    match levels.iter().position(|l| *l > 0.0) {
        Some(i) => format!("{:.4} from trial {}", levels[i], i + 1),
        None => "none (the baseline is too small)".into(),
    }
}

/// One hypothesis's outcomes.
#[derive(Default, Clone)]
struct Tally {
    runs: usize,
    trials: usize,
    wrong: usize,
    undecided: usize,
    /// Wrong steps the culprit confirmation would catch (not confirmed).
    caught: usize,
    /// ... of which it refutes outright.
    refuted: usize,
    /// Bad hypothesis only: true culprits the confirmation confirms.
    confirmed: usize,
}

impl Tally {
    fn rate(&self, x: usize) -> f64 {
        x as f64 / self.runs.max(1) as f64
    }
}

/// [good, bad] tallies of `kind` on `scn`.
fn simulate(a: &SimArgs, scn: &Scenario, kind: RuleKind) -> [Tally; 2] {
    let mut rng = Rng(a.seed.max(1));
    let mut confirm_rng = Rng(a.seed.max(1) ^ 0xC0F1_2A11);
    let mut out = [Tally::default(), Tally::default()];
    for (h, source) in [&scn.good, &scn.bad].into_iter().enumerate() {
        for _ in 0..a.runs {
            let base: Vec<f64> = (0..a.baseline_trials)
                .map(|_| scn.good.draw(&mut rng, scn.metric))
                .collect();
            let stream: Vec<f64> = (0..a.max_trials)
                .map(|_| source.draw(&mut rng, scn.metric))
                .collect();
            let rule = make_rule(a, scn, kind, &base);
            let (k, d) = step(rule.as_ref(), &stream);
            let t = &mut out[h];
            t.runs += 1;
            t.trials += k;
            t.undecided += usize::from(d == Decision::Undecided);
            let wrong = match h {
                0 => d == Decision::Bad,
                _ => d == Decision::Good,
            };
            let mut draw = |src: &Source| -> Vec<f64> {
                (0..CONFIRM_BATCH)
                    .map(|_| src.draw(&mut confirm_rng, scn.metric))
                    .collect()
            };
            let check = |parent: &[f64], culprit: &[f64]| {
                confirm(
                    parent,
                    culprit,
                    None,
                    scn.direction,
                    scn.resolution,
                    scn.threshold,
                    a.alpha,
                )
                .verdict
            };
            if wrong {
                t.wrong += 1;
                // The culprit a wrong step leads to has a parent in its
                // own state.
                let (parent, culprit) = (draw(source), draw(source));
                let v = check(&parent, &culprit);
                t.caught += usize::from(v != Confirmation::Confirmed);
                t.refuted += usize::from(v == Confirmation::Refuted);
            }
            if h == 1 {
                let (parent, culprit) = (draw(&scn.good), draw(&scn.bad));
                let v = check(&parent, &culprit);
                t.confirmed += usize::from(v == Confirmation::Confirmed);
            }
        }
    }
    out
}

/// The fixed-size benchmark: n trials, then whichever one-sided p of the
/// bisect rule (worse than the baseline, better than the bad reference) is
/// smaller decides (equal: a coin, counted as half wrong).
struct Fixed {
    /// [good, bad]: (baseline, 80 new trials) per run.
    streams: [Vec<(Vec<f64>, Vec<f64>)>; 2],
    rules: [Vec<Rule>; 2],
    /// Wrong rates by n, computed when first asked.
    rates: Vec<Option<[f64; 2]>>,
}

/// The sizes tried, in order.
const FIXED_SIZES: [usize; 25] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 24, 28, 32, 40, 48, 64, 80,
];

impl Fixed {
    fn new(a: &SimArgs, scn: &Scenario) -> Fixed {
        let mut rng = Rng(a.seed.max(1) ^ 0xF1_8ED);
        let mut streams = [Vec::new(), Vec::new()];
        let mut rules = [Vec::new(), Vec::new()];
        let max = *FIXED_SIZES.last().unwrap_or(&1);
        for (h, source) in [&scn.good, &scn.bad].into_iter().enumerate() {
            for _ in 0..a.runs {
                let base: Vec<f64> = (0..a.baseline_trials)
                    .map(|_| scn.good.draw(&mut rng, scn.metric))
                    .collect();
                let stream: Vec<f64> = (0..max)
                    .map(|_| source.draw(&mut rng, scn.metric))
                    .collect();
                rules[h].push(Rule::new(
                    &base,
                    scn.direction,
                    scn.resolution,
                    scn.threshold,
                    a.alpha,
                    a.max_trials,
                ));
                streams[h].push((base, stream));
            }
        }
        Fixed {
            streams,
            rules,
            rates: vec![None; FIXED_SIZES.len()],
        }
    }

    fn rates(&mut self, i: usize) -> [f64; 2] {
        if let Some(r) = self.rates[i] {
            return r;
        }
        let n = FIXED_SIZES[i];
        let mut r = [0.0; 2];
        for (h, rate) in r.iter_mut().enumerate() {
            let mut wrong = 0.0;
            for (rule, (_, stream)) in self.rules[h].iter().zip(&self.streams[h]) {
                let (p_worse, p_better) = rule.p_values(&stream[..n]);
                // A tie is a coin: half a wrong answer.
                let says_bad = smaller_p_says_bad(p_worse, p_better).map_or(0.5, f64::from);
                wrong += if h == 0 { says_bad } else { 1.0 - says_bad };
            }
            *rate = wrong / self.streams[h].len().max(1) as f64;
        }
        self.rates[i] = Some(r);
        r
    }

    /// The smallest n whose wrong rates are both at most `target`.
    fn n_for(&mut self, target: [f64; 2]) -> Option<usize> {
        (0..FIXED_SIZES.len()).find_map(|i| {
            let r = self.rates(i);
            (r[0] <= target[0] && r[1] <= target[1]).then_some(FIXED_SIZES[i])
        })
    }
}

/// The table's header.
const HEADER: &str = "| rule | trials/step | wrong: good → bad | wrong: bad → good \
    | 125: good / bad | per decided step | fixed n, same rates | ratio | fixed n at α \
    | wrong steps caught | true culprit confirmed |\n\
    |---|---|---|---|---|---|---|---|---|---|---|";

/// One rule's results as a table row.
fn row(kind: RuleKind, tallies: &[Tally; 2], fixed: Option<&mut Fixed>, alpha: f64) -> String {
    let [g, b] = tallies;
    let runs = (g.runs + b.runs).max(1) as f64;
    let per_step = (g.trials + b.trials) as f64 / runs;
    let decided = (g.runs + b.runs - g.undecided - b.undecided) as f64 / runs;
    let per_decided = if decided > 0.0 {
        format!("{:.2}", per_step / decided)
    } else {
        "–".into()
    };
    let (same, at_alpha, ratio) = match fixed {
        Some(f) => {
            let same = f.n_for([g.rate(g.wrong), b.rate(b.wrong)]);
            let at_alpha = f.n_for([alpha, alpha]);
            let ratio = match same {
                Some(n) if decided > 0.0 => format!("{:.2}", per_step / decided / n as f64),
                _ => "–".into(),
            };
            let show = |n: Option<usize>| n.map_or("> 80".to_string(), |n| n.to_string());
            (show(same), show(at_alpha), ratio)
        }
        None => ("–".into(), "–".into(), "–".into()),
    };
    let wrong = g.wrong + b.wrong;
    let caught = if wrong > 0 {
        format!(
            "{:.1} % ({} of {}; refuted {:.1} %)",
            100.0 * (g.caught + b.caught) as f64 / wrong as f64,
            g.caught + b.caught,
            wrong,
            100.0 * (g.refuted + b.refuted) as f64 / wrong as f64,
        )
    } else {
        "– (none wrong)".into()
    };
    format!(
        "| {} | {:.2} | {:.2} % | {:.2} % | {:.1} % / {:.1} % | {} | {} | {} | {} | {} | {:.1} % |",
        kind.name(),
        per_step,
        100.0 * g.rate(g.wrong),
        100.0 * b.rate(b.wrong),
        100.0 * g.rate(g.undecided),
        100.0 * b.rate(b.undecided),
        per_decided,
        same,
        ratio,
        at_alpha,
        caught,
        100.0 * b.rate(b.confirmed),
    )
}

/// Means, shapes and factors of `--grid`.
const GRID_MEANS: [f64; 6] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0];
const GRID_SHAPES: [f64; 5] = [1.0, 2.0, 4.0, 10.0, f64::INFINITY];
const GRID_FACTORS: [f64; 4] = [1.5, 2.0, 3.0, 4.0];

/// The sweep: one row per (mean, shape, factor) and rule, then the worst
/// cells.
fn grid(a: &SimArgs) -> anyhow::Result<ExitCode> {
    println!(
        "bisect-sim --grid: model Poisson(Gamma(shape, mean)), bad = factor × mean, threshold \
         (factor − 1) × 100 %; baseline {} trials; --max-trials {} --alpha {}; {} steps per \
         hypothesis and cell, seed {}",
        a.baseline_trials, a.max_trials, a.alpha, a.runs, a.seed
    );
    println!("| rule | mean | shape | factor | trials/step | wrong: good → bad | wrong: bad → good | 125: good / bad |");
    println!("|---|---|---|---|---|---|---|---|");
    // Three binomial standard errors above α flag a cell.
    let se = (a.alpha * (1.0 - a.alpha) / a.runs as f64).sqrt();
    for &kind in &a.rule {
        let mut worst = [(0.0f64, String::new()), (0.0f64, String::new())];
        let mut over = Vec::new();
        for &mean in &GRID_MEANS {
            for &shape in &GRID_SHAPES {
                for &factor in &GRID_FACTORS {
                    let cell = SimArgs {
                        mean,
                        shape,
                        factor,
                        threshold: None,
                        ..a.clone_model()
                    };
                    let scn = scenario(&cell, &None);
                    let [g, b] = simulate(&cell, &scn, kind);
                    let name = format!("mean {mean}, shape {shape}, ×{factor}");
                    // "Bad" promises a change of the threshold *and* of at
                    // least one count per trial; below that floor a false
                    // good is not a broken promise.
                    let floor = (factor - 1.0) * mean < 1.0;
                    for (i, t) in [&g, &b].into_iter().enumerate() {
                        let r = t.rate(t.wrong);
                        if i == 1 && floor {
                            continue;
                        }
                        if r > worst[i].0 {
                            worst[i] = (r, name.clone());
                        }
                        if r > a.alpha + 3.0 * se {
                            over.push(format!(
                                "{name}: {} {:.2} %",
                                ["false bad", "false good"][i],
                                100.0 * r
                            ));
                        }
                    }
                    println!(
                        "| {} | {mean} | {shape} | {factor} | {:.2} | {:.2} % | {:.2} %{} | {:.1} % / {:.1} % |",
                        kind.name(),
                        (g.trials + b.trials) as f64 / (g.runs + b.runs) as f64,
                        100.0 * g.rate(g.wrong),
                        100.0 * b.rate(b.wrong),
                        if floor { " (below the floor)" } else { "" },
                        100.0 * g.rate(g.undecided),
                        100.0 * b.rate(b.undecided),
                    );
                }
            }
        }
        println!(
            "{}: worst false bad {:.2} % ({}), worst false good {:.2} % ({}; changes of at least one \
             count per trial); cells above α + 3 SE ({:.2} %): {}",
            kind.name(),
            100.0 * worst[0].0,
            worst[0].1,
            100.0 * worst[1].0,
            worst[1].1,
            100.0 * (a.alpha + 3.0 * se),
            if over.is_empty() {
                "none".to_string()
            } else {
                over.join("; ")
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn checked(args: &[&str]) -> Result<(), String> {
        let cli = Cli::try_parse_from(std::iter::once("bisect-sim").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        check(&cli.sim).map_err(|e| e.to_string())
    }

    #[test]
    fn bad_arguments_are_one_line_each() {
        assert!(checked(&[]).is_ok());
        assert!(checked(&["--grid", "--alpha", "0.01"]).is_ok());
        for (args, says) in [
            (&["--alpha", "0.7"][..], "--alpha 0.7"),
            (&["--factor", "1"], "--factor 1"),
            (&["--shape", "0"], "--shape"),
            (&["--thin"], "need --from"),
            (&["--from", "x", "--good", "a"], "--bad CONFIG"),
            (
                &["--from", "x", "--bad", "a", "--thin", "--metric", "p1-fill"],
                "p1fill-ms",
            ),
            (
                &["--from", "x", "--bad", "a", "--good", "b", "--grid"],
                "--grid",
            ),
        ] {
            let err = checked(args).unwrap_err();
            assert!(err.contains(says) && !err.contains('\n'), "{args:?}: {err}");
        }
    }

    #[test]
    fn the_rule_keeps_its_promise_where_the_old_one_did_not() {
        // Seeded, so the same figures every time; 600 steps per hypothesis
        // put α + 3 standard errors at 7.7 %.
        let cli = Cli::try_parse_from(["bisect-sim", "--runs", "600", "--no-fixed"]).unwrap();
        let a = &cli.sim;
        let scn = scenario(a, &None);
        let limit = a.alpha + 3.0 * (a.alpha * (1.0 - a.alpha) / 600.0).sqrt();
        let [g, b] = simulate(a, &scn, RuleKind::Bisect);
        assert!(g.rate(g.wrong) <= limit && b.rate(b.wrong) <= limit);
        assert!(g.undecided > 0 && b.undecided > 0, "skips, not guesses");
        let [g, b] = simulate(a, &scn, RuleKind::MidpointForced);
        assert!(
            b.rate(b.wrong) > limit,
            "forced at the cap: {}",
            b.rate(b.wrong)
        );
        assert_eq!(g.undecided + b.undecided, 0);
    }
}
