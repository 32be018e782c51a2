//! The statistics behind the comparison tables, a run's summary, the
//! benchmarks and the bisect verdict — one home for all of them:
//! descriptive statistics as mmtests prints them, Mann–Whitney U (exact or
//! normal), Welch's t, mmtests' confidence-interval rule, the sign test,
//! and the per-look levels of the group-sequential tests that `bisect`
//! runs. The tests are written out here, where their conventions (ties,
//! exact against normal, mmtests' formulas) are ours to state; the special
//! functions under them (erfc, the incomplete beta) come from statrs.
//!
//! Nothing here returns NaN: an undefined figure is `None`. The percent
//! differences may be infinite: that is what mmtests' formulas give against
//! a baseline of 0, and the tables print it as `-inf%` / `+inf%`.

use serde::Serialize;

/// Descriptive statistics of one sample, as mmtests' `Stat.pm` defines them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Describe {
    /// Sample size (≥ 1).
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (mean of the middle two for even n).
    pub median: f64,
    /// Sample standard deviation (n − 1); 0 for n = 1.
    pub stddev: f64,
    /// stddev · 100 / mean; 0 when the sample does not vary, `None` when the
    /// mean is 0 but the values vary (the ratio is undefined).
    pub coeffvar: Option<f64>,
    /// Largest value.
    pub max: f64,
}

impl Describe {
    /// Statistics of `values`; `None` when empty. Non-finite values are
    /// dropped first (a report never holds them, but a table must not show
    /// NaN if one ever did).
    pub fn of(values: &[f64]) -> Option<Describe> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        // Identical values have a mean of exactly that value and a spread
        // of exactly 0: summed and divided, eight 14.983s leave residue
        // (a mean 1.8e-15 off, a stddev of 1.9e-15) that a table would
        // print as a tiny non-zero baseline and divide by.
        let identical = v[0] == v[n - 1];
        let mean = if identical {
            v[0]
        } else {
            v.iter().sum::<f64>() / n as f64
        };
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let stddev = if identical {
            0.0
        } else {
            sample_stddev(&v, mean)
        };
        let coeffvar = if stddev == 0.0 {
            Some(0.0)
        } else if mean == 0.0 {
            None
        } else {
            Some(stddev * 100.0 / mean)
        };
        Some(Describe {
            n,
            min: v[0],
            mean,
            median,
            stddev,
            coeffvar,
            max: v[n - 1],
        })
    }
}

fn sample_stddev(v: &[f64], mean: f64) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let ss: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
    (ss / (v.len() - 1) as f64).sqrt()
}

/// mmtests' `pndiff` (lower is better): `100 − new·100/base`. 0 vs 0 is
/// 0 %; against a baseline of 0 the formula's `new·100/0` makes it −∞ when
/// `new` grew (worse) and +∞ when it fell below 0 (better) — where
/// mmtests' `Stat.pm` returns a stand-in (−99 from `pndiff`, 100 from
/// `pdiff`) that reads like a real change. `None` only for a non-finite
/// input.
pub fn pndiff(base: f64, new: f64) -> Option<f64> {
    ratio_pct(base, new).map(|r| 100.0 - r)
}

/// mmtests' `pdiff` (higher is better): `new·100/base − 100`, with the same
/// zero rules as [`pndiff`] (so +∞ when a zero baseline grew).
pub fn pdiff(base: f64, new: f64) -> Option<f64> {
    ratio_pct(base, new).map(|r| r - 100.0)
}

/// `new·100/base`; 100 when they are equal (0 vs 0 included), ±∞ with the
/// sign of `new` against a zero baseline.
fn ratio_pct(base: f64, new: f64) -> Option<f64> {
    if !base.is_finite() || !new.is_finite() {
        return None;
    }
    if base == new {
        return Some(100.0);
    }
    if base == 0.0 {
        return Some(new.signum() * f64::INFINITY);
    }
    Some(new * 100.0 / base)
}

/// How a Mann–Whitney p-value was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MwuMethod {
    /// Exact permutation distribution of U (small samples; with ties,
    /// conditional on the tie pattern).
    Exact,
    /// Normal approximation with tie correction and continuity correction.
    Normal,
}

/// Result of a Mann–Whitney U test of `x` against `y`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mwu {
    /// U of `x`: pairs (xi, yj) with xi > yj, ties counting ½.
    pub u: f64,
    /// One-sided p for "x tends to be greater than y".
    pub p_greater: f64,
    /// One-sided p for "x tends to be less than y".
    pub p_less: f64,
    /// Two-sided p: min(1, 2 · min(p_greater, p_less)).
    pub p_two_sided: f64,
    /// How p was computed.
    pub method: MwuMethod,
}

/// Largest sample size for which the exact distribution is used; beyond it
/// the normal approximation is accurate and the exact tables get large.
const EXACT_MAX_N: usize = 50;

/// Mann–Whitney U test of `x` against `y`.
///
/// With at most 50 values on each side p comes from the exact permutation
/// distribution of U. Without ties that is the classic distribution (as
/// scipy's `method="exact"`); with ties it is the permutation distribution
/// *conditional on the observed tie pattern* (ties count ½ in U), which is
/// what an exhaustive permutation test gives — exact where the normal
/// approximation is worst, with many zeros. Larger samples use the normal
/// approximation with the tie-corrected variance and a continuity
/// correction of ½ (scipy's `method="asymptotic"`). When every value is the
/// same the test has nothing to say and all p are 1. `None` when either
/// sample is empty.
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<Mwu> {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (u, tie_term, tied) = u_statistic(x, y);
    let small = n1 <= EXACT_MAX_N && n2 <= EXACT_MAX_N;
    let (p_greater, p_less, method) = if small && !tied {
        let (ge, le) = exact_tails(n1, n2, u);
        (ge, le, MwuMethod::Exact)
    } else if small {
        let (ge, le) = exact_tails_tied(x, y, u);
        (ge, le, MwuMethod::Exact)
    } else {
        let (ge, le) = normal_tails(n1, n2, u, tie_term);
        (ge, le, MwuMethod::Normal)
    };
    Some(Mwu {
        u,
        p_greater,
        p_less,
        p_two_sided: (2.0 * p_greater.min(p_less)).min(1.0),
        method,
    })
}

/// P(U ≥ u) and P(U ≤ u) over every way of choosing which of the pooled
/// values are x's, the pooled values (and so the tie groups) fixed. Dynamic
/// programme over the tie groups in ascending order; state = x's placed so
/// far and 2U so far (ties make U a multiple of ½).
fn exact_tails_tied(x: &[f64], y: &[f64], u: f64) -> (f64, f64) {
    let mut pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    pooled.sort_by(f64::total_cmp);
    let mut groups: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < pooled.len() {
        let j = pooled[i..].iter().take_while(|v| **v == pooled[i]).count();
        groups.push(j);
        i += j;
    }
    let (k, m) = (x.len(), y.len());
    let max2 = 2 * k * m;
    // ways[a][u2]: arrangements of the groups so far with a x's and 2U = u2.
    let mut ways = vec![vec![0.0f64; max2 + 1]; k + 1];
    ways[0][0] = 1.0;
    let mut before = 0;
    for &t in &groups {
        let mut next = vec![vec![0.0f64; max2 + 1]; k + 1];
        for a in 0..=k.min(before) {
            let y_below = before - a;
            if y_below > m {
                continue;
            }
            for u2 in 0..=max2 {
                let w = ways[a][u2];
                if w == 0.0 {
                    continue;
                }
                for take in 0..=t.min(k - a) {
                    if t - take > m - y_below {
                        continue;
                    }
                    let add = 2 * take * y_below + take * (t - take);
                    if u2 + add <= max2 {
                        next[a + take][u2 + add] += w * binomial(t, take);
                    }
                }
            }
        }
        ways = next;
        before += t;
    }
    let dist = &ways[k];
    let total: f64 = dist.iter().sum();
    let obs = (2.0 * u).round() as usize;
    let ge: f64 = dist[obs.min(max2 + 1)..].iter().sum::<f64>() / total;
    let le: f64 = dist[..=obs.min(max2)].iter().sum::<f64>() / total;
    (ge.min(1.0), le.min(1.0))
}

/// C(n, k) as f64 (exact up to 2⁵³, close beyond).
pub(crate) fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// U of x, Σ(t³ − t) over tie groups of the pooled sample, and whether any
/// value is tied.
fn u_statistic(x: &[f64], y: &[f64]) -> (f64, f64, bool) {
    let mut pooled: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank_sum_x = 0.0;
    let mut tie_term = 0.0;
    let mut tied = false;
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j+1 share their average.
        let avg = (i + j + 2) as f64 / 2.0;
        let t = (j - i + 1) as f64;
        if t > 1.0 {
            tied = true;
            tie_term += t * t * t - t;
        }
        rank_sum_x += avg * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        i = j + 1;
    }
    let n1 = x.len() as f64;
    (rank_sum_x - n1 * (n1 + 1.0) / 2.0, tie_term, tied)
}

/// P(U ≥ u) and P(U ≤ u) under H0 from the exact distribution of U, by the
/// recurrence c(m, n, k) = c(m − 1, n, k − n) + c(m, n − 1, k).
fn exact_tails(n1: usize, n2: usize, u: f64) -> (f64, f64) {
    let freq = exact_distribution(n1, n2);
    let total: f64 = freq.iter().sum();
    let k = u.round() as usize;
    let ge: f64 = freq[k.min(freq.len())..].iter().sum::<f64>() / total;
    let le: f64 = freq[..=k.min(freq.len() - 1)].iter().sum::<f64>() / total;
    (ge.min(1.0), le.min(1.0))
}

/// Number of arrangements giving each U = 0 ..= n1·n2 (as f64: C(100, 50)
/// overflows u64, and the relative precision of f64 is plenty for p).
pub(crate) fn exact_distribution(n1: usize, n2: usize) -> Vec<f64> {
    // prev[n][k] holds c(m − 1, n, k); we build m = 0 ..= n1.
    let max_u = n1 * n2;
    let mut prev: Vec<Vec<f64>> = (0..=n2)
        .map(|_| {
            let mut v = vec![0.0; max_u + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for m in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for n in 1..=n2 {
            for k in 0..=m * n {
                let from_x = if k >= n { prev[n][k - n] } else { 0.0 };
                cur[n][k] = from_x + cur[n - 1][k];
            }
        }
        prev = cur;
    }
    prev.swap_remove(n2)
}

fn normal_tails(n1: usize, n2: usize, u: f64, tie_term: f64) -> (f64, f64) {
    let (a, b) = (n1 as f64, n2 as f64);
    let n = a + b;
    let mean = a * b / 2.0;
    let var = a * b / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var.is_nan() || var <= 0.0 {
        return (1.0, 1.0);
    }
    let sd = var.sqrt();
    let z_ge = (u - mean - 0.5) / sd;
    let z_le = (u - mean + 0.5) / sd;
    ((1.0 - normal_cdf(z_ge)).min(1.0), normal_cdf(z_le).min(1.0))
}

/// Standard normal CDF, from statrs' erfc (accurate to a few ulp).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-z / std::f64::consts::SQRT_2)
}

/// Result of Welch's unequal-variance t-test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    /// t statistic of mean(x) − mean(y).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p.
    pub p_two_sided: f64,
}

/// Welch's t-test of `x` against `y`. `None` when either sample has fewer
/// than two values or both have zero variance (t is undefined; R's
/// `t.test` refuses such data as "essentially constant" too).
pub fn welch(x: &[f64], y: &[f64]) -> Option<Welch> {
    let (dx, dy) = (Describe::of(x)?, Describe::of(y)?);
    if dx.n < 2 || dy.n < 2 {
        return None;
    }
    let (vx, vy) = (
        dx.stddev * dx.stddev / dx.n as f64,
        dy.stddev * dy.stddev / dy.n as f64,
    );
    let se2 = vx + vy;
    if se2 <= 0.0 {
        return None;
    }
    let t = (dx.mean - dy.mean) / se2.sqrt();
    let df = se2 * se2 / (vx * vx / (dx.n as f64 - 1.0) + vy * vy / (dy.n as f64 - 1.0));
    Some(Welch {
        t,
        df,
        p_two_sided: student_t_two_sided(t, df),
    })
}

/// Two-sided p of Student's t with `df` degrees of freedom:
/// I_{df/(df+t²)}(df/2, ½), statrs' regularized incomplete beta. NaN when
/// `t` or `df` is (no p to be had).
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    statrs::function::beta::checked_beta_reg(df / 2.0, 0.5, df / (df + t * t))
        .map_or(f64::NAN, |p| p.clamp(0.0, 1.0))
}

/// z for a two-sided 95 % normal interval (R's `qnorm(0.975)`).
pub const Z_975: f64 = 1.959_963_984_540_054;

/// mmtests' interval rule (commit 8cd087ae, `Stat.pm::cidiff`): each
/// side's interval is mean ± 1.96·stddev — *not* divided by √n, as mmtests
/// computes it — and the difference of means is divided by the sum of the
/// two half-widths; |ratio| > 1 (intervals do not overlap) is significant.
/// When both half-widths are 0, `cidiff` returns the raw difference of the
/// means, so a difference of more than 1 in the metric's units counts.
/// `None` when either side has fewer than 2 values: mmtests' stddev of one
/// value is NaN, so there is no interval and no mark.
pub fn mmtests_ci_ratio(base: &[f64], new: &[f64]) -> Option<f64> {
    let (b, n) = (Describe::of(base)?, Describe::of(new)?);
    if b.n < 2 || n.n < 2 {
        return None;
    }
    let halves = Z_975 * (b.stddev + n.stddev);
    let diff = n.mean - b.mean;
    if halves == 0.0 {
        return Some(diff);
    }
    Some(diff / halves)
}

/// Smallest one-sided exact Mann–Whitney p of `k` values against `m`
/// (complete separation): 1 / C(k + m, k).
pub fn smallest_exact_p(k: usize, m: usize) -> f64 {
    1.0 / binomial(k + m, k)
}

/// Per-look levels (index k − 1, k = 1 ..= `max`) of a one-sided
/// group-sequential exact Mann–Whitney test of k new values against `m`
/// fixed ones, with probability at most `alpha` that *some* look rejects
/// when new and fixed values are exchangeable. 0 at looks that cannot
/// reject (complete separation is not below the level).
///
/// One constant level c from the first look that can reach it on (a
/// Pocock-type boundary). Under exchangeability the ranks are uniformly
/// random whatever the distribution, so c is found once by simulating
/// 100 000 random rankings (fixed seed: the same c in every process) and
/// taking the α-quantile of each path's smallest p — about twice the
/// Bonferroni split α / looks, because successive looks share their
/// trials. Exact for continuous data; with ties each look's p is the exact
/// permutation p given the ties, which can only be larger. Beyond the exact
/// tables (m or max > 50) the Bonferroni split [`bonferroni_levels`].
/// Memoized per (α, m, max).
pub fn sequential_mwu_levels(alpha: f64, m: usize, max: usize) -> Vec<f64> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    /// (α bits, m, max) → levels.
    type Levels = HashMap<(u64, usize, usize), Vec<f64>>;
    static CACHE: Mutex<Option<Levels>> = Mutex::new(None);
    if m > EXACT_MAX_N || max > EXACT_MAX_N || m == 0 {
        return bonferroni_levels(alpha, m, max);
    }
    let key = (alpha.to_bits(), m, max);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    if let Some(v) = map.get(&key) {
        return v.clone();
    }
    let c = calibrate_pocock(alpha, m, max);
    let levels: Vec<f64> = (1..=max)
        .map(|k| if smallest_exact_p(k, m) <= c { c } else { 0.0 })
        .collect();
    map.insert(key, levels.clone());
    levels
}

/// α split evenly over the looks k0 ..= max, where k0 is the first look at
/// which complete separation of k0 new from m fixed values could reach
/// α / (max − k0 + 1). Index k − 1; 0 means "cannot reject at this look".
pub fn bonferroni_levels(alpha: f64, m: usize, max: usize) -> Vec<f64> {
    for k0 in 1..=max {
        let level = alpha / (max - k0 + 1) as f64;
        if smallest_exact_p(k0, m) <= level {
            return (1..=max)
                .map(|k| if k >= k0 { level } else { 0.0 })
                .collect();
        }
    }
    vec![0.0; max]
}

/// Random rankings simulated to calibrate the boundary.
const CALIBRATION_PATHS: usize = 100_000;

/// The α-quantile of the smallest one-sided exact p over looks 1..=max,
/// over random rankings of m fixed and max new values.
fn calibrate_pocock(alpha: f64, m: usize, max: usize) -> f64 {
    // tails[k - 1][u] = P(U ≥ u) for k new vs m fixed values, no ties.
    let tails: Vec<Vec<f64>> = (1..=max)
        .map(|k| {
            let f = exact_distribution(k, m);
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
            let mut fixed: Vec<f64> = (0..m).map(|_| rng.uniform()).collect();
            fixed.sort_by(f64::total_cmp);
            let mut u = 0usize;
            let mut best = 1.0f64;
            for tail in &tails {
                let x = rng.uniform();
                u += fixed.partition_point(|b| *b < x);
                best = best.min(tail[u]);
            }
            best
        })
        .collect();
    mins.sort_by(f64::total_cmp);
    // The largest attainable c with P(min p ≤ c) ≤ α.
    let allowed = (alpha * CALIBRATION_PATHS as f64).floor() as usize;
    let mut c = 0.0;
    let mut i = 0;
    while i < mins.len() {
        let v = mins[i];
        let end = i + mins[i..].iter().take_while(|w| **w == v).count();
        if end > allowed {
            break;
        }
        c = v;
        i = end;
    }
    c
}

/// P(Bin(k, ½) ≤ j): the one-sided p of a sign test that fewer than half
/// of k trials show something, when j of them do.
pub fn sign_test_p(k: usize, j: usize) -> f64 {
    let total = 2f64.powi(k as i32);
    ((0..=j.min(k)).map(|i| binomial(k, i)).sum::<f64>() / total).min(1.0)
}

/// Per-look levels (index k − 1) of a one-sided group-sequential sign test
/// ([`sign_test_p`] at looks k = 1 ..= `max`), with probability at most
/// `alpha` that some look rejects when each trial shows something with
/// probability ½: the largest constant level with that property, found
/// exactly (a dynamic programme over the number of trials showing
/// something). 0 at looks that cannot reject.
pub fn sequential_sign_levels(alpha: f64, max: usize) -> Vec<f64> {
    let mut candidates: Vec<f64> = (1..=max)
        .flat_map(|k| (0..=k).map(move |j| sign_test_p(k, j)))
        .filter(|p| *p <= alpha)
        .collect();
    candidates.sort_by(f64::total_cmp);
    candidates.dedup();
    let c = candidates
        .into_iter()
        .take_while(|c| sign_rejection_probability(*c, max) <= alpha)
        .last()
        .unwrap_or(0.0);
    (1..=max)
        .map(|k| if sign_test_p(k, 0) <= c { c } else { 0.0 })
        .collect()
}

/// P(some look k ≤ max has sign_test_p(k, j_k) ≤ c) for a fair walk j_k.
fn sign_rejection_probability(c: f64, max: usize) -> f64 {
    // alive[j]: probability of j trials showing something so far, not yet
    // rejected.
    let mut alive = vec![1.0f64];
    let mut rejected = 0.0;
    for k in 1..=max {
        let mut next = vec![0.0f64; k + 1];
        for (j, p) in alive.iter().enumerate() {
            next[j] += p / 2.0;
            next[j + 1] += p / 2.0;
        }
        for (j, p) in next.iter_mut().enumerate() {
            if sign_test_p(k, j) <= c {
                rejected += *p;
                *p = 0.0;
            }
        }
        alive = next;
    }
    rejected
}

/// xorshift64*: enough randomness for a calibration or a Monte Carlo
/// study, with no dependency. The seed must not be 0.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Uniform in 0 .. n (n ≥ 1).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.uniform() * n as f64) as usize).min(n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn bonferroni_skips_looks_that_cannot_reject() {
        // m = 5: min p at k = 1..5 is 1/6, 1/21, 1/56, 1/126, 1/252.
        let l = bonferroni_levels(0.05, 5, 10);
        assert_eq!(l[0], 0.0);
        assert_eq!(l[2], 0.0);
        let used = l.iter().filter(|x| **x > 0.0).count();
        assert!(l
            .iter()
            .all(|x| *x == 0.0 || (*x - 0.05 / used as f64).abs() < 1e-12));
        assert!(l.iter().sum::<f64>() <= 0.05 + 1e-12);
    }

    #[test]
    fn pocock_level_is_looser_than_bonferroni_and_controls_alpha() {
        for alpha in [0.05, 0.01] {
            let cal = sequential_mwu_levels(alpha, 8, 10);
            let bon = bonferroni_levels(alpha, 8, 10);
            let c = cal.iter().copied().fold(0.0, f64::max);
            let b = bon.iter().copied().fold(0.0, f64::max);
            assert!(c > b && c < alpha, "calibrated {c} vs Bonferroni {b}");
            // An independent check of the calibration: random rankings
            // from another seed reject at some look at most α (+ 3 SE).
            let mut rng = Rng(42);
            let paths = 20_000;
            let mut rejected = 0;
            for _ in 0..paths {
                let fixed: Vec<f64> = (0..8).map(|_| rng.uniform()).collect();
                let mut new = Vec::new();
                for level in &cal {
                    new.push(rng.uniform());
                    let p = mann_whitney(&new, &fixed).unwrap().p_greater;
                    if p <= *level {
                        rejected += 1;
                        break;
                    }
                }
            }
            let rate = rejected as f64 / paths as f64;
            let se = (alpha * (1.0 - alpha) / paths as f64).sqrt();
            assert!(rate <= alpha + 3.0 * se, "α {alpha}: rejected {rate}");
            assert!(rate >= alpha / 2.0, "α {alpha}: {rate}: far too strict");
        }
    }

    #[test]
    fn sequential_sign_test_spends_alpha_exactly() {
        assert_eq!(sign_test_p(3, 0), 0.125);
        assert!((sign_test_p(4, 1) - 5.0 / 16.0).abs() < 1e-12);
        for alpha in [0.05, 0.01] {
            let levels = sequential_sign_levels(alpha, 10);
            let c = levels.iter().copied().fold(0.0, f64::max);
            let spent = sign_rejection_probability(c, 10);
            assert!(
                spent <= alpha && spent > alpha / 3.0,
                "{alpha}: {c} spends {spent}"
            );
            // The first look that can reject: all-nothing, 2^-k ≤ c.
            let first = levels.iter().position(|l| *l > 0.0).unwrap() + 1;
            assert!(0.5f64.powi(first as i32) <= c && 0.5f64.powi(first as i32 - 1) > c);
        }
    }

    #[test]
    fn exact_distribution_counts_sum_to_binomial() {
        // C(7, 3) = 35 arrangements, symmetric around n1·n2/2.
        let f = exact_distribution(3, 4);
        assert_eq!(f.len(), 13);
        assert_eq!(f.iter().sum::<f64>(), 35.0);
        assert_eq!(f[0], 1.0);
        assert_eq!(f[1], 1.0);
        assert_eq!(f[2], 2.0);
        assert_eq!(f[6], f[6]);
        for k in 0..=12 {
            assert_eq!(f[k], f[12 - k]);
        }
    }

    #[test]
    fn percent_conventions() {
        assert_eq!(pndiff(0.0, 0.0), Some(0.0));
        assert_eq!(pdiff(0.0, 0.0), Some(0.0));
        // Against a zero baseline: the formula's infinities, signed so
        // that positive is still better.
        assert_eq!(pndiff(0.0, 3.0), Some(f64::NEG_INFINITY));
        assert_eq!(pdiff(0.0, 3.0), Some(f64::INFINITY));
        assert_eq!(pndiff(3.0, 0.0), Some(100.0));
        assert_eq!(pdiff(3.0, 0.0), Some(-100.0));
        assert_eq!(pndiff(f64::NAN, 1.0), None);
        assert!(close(pndiff(0.3992, 0.3892).unwrap(), 2.505, 1e-3));
        assert!(close(pdiff(10.0, 12.0).unwrap(), 20.0, 1e-12));
    }
    // Reference values: scipy 1.x `mannwhitneyu(x, y, method="exact")`
    // (no ties) and `permutation_test(..., n_resamples=inf)` on U (ties),
    // `ttest_ind(equal_var=False)` and `t.sf`, computed once and pasted.

    #[test]
    fn mwu_exact_matches_scipy() {
        let m = mann_whitney(&[1.1, 2.2, 3.3, 4.4], &[5.5, 6.6, 7.7]).unwrap();
        assert_eq!(m.u, 0.0);
        assert_eq!(m.method, MwuMethod::Exact);
        assert!(close(m.p_two_sided, 0.05714285714285714, 1e-12));
        assert!(close(m.p_greater, 1.0, 1e-12));
        let m = mann_whitney(
            &[3.1, 5.2, 7.3, 1.4, 9.5],
            &[2.6, 4.7, 6.8, 8.9, 10.1, 11.2],
        )
        .unwrap();
        assert_eq!(m.u, 10.0);
        assert!(close(m.p_two_sided, 0.42857142857142855, 1e-12));
        assert!(close(m.p_greater, 0.8354978354978355, 1e-12));
        let m = mann_whitney(
            &[0.389, 0.376, 0.41, 0.40],
            &[0.37, 0.36, 0.38, 0.375, 0.365],
        )
        .unwrap();
        assert_eq!(m.u, 19.0);
        assert!(close(m.p_two_sided, 0.031746031746031744, 1e-12));
        assert!(close(m.p_greater, 0.015873015873015872, 1e-12));
    }

    #[test]
    fn mwu_with_ties_is_the_exact_permutation_distribution() {
        let m = mann_whitney(&[0.0, 0.0, 1.0, 2.0], &[0.0, 3.0, 3.0, 5.0, 6.0]).unwrap();
        assert_eq!(m.u, 3.0);
        assert!(close(m.p_greater, 0.9682539682539683, 1e-12));
        assert!(close(m.p_less, 0.05555555555555555, 1e-12));
        let m = mann_whitney(&[0.0, 0.0, 0.0], &[0.0, 0.0, 1.0, 1.0]).unwrap();
        assert!(close(m.p_greater, 1.0, 1e-12));
        assert!(close(m.p_less, 0.2857142857142857, 1e-12));
    }

    #[test]
    fn mwu_normal_approximation_matches_scipy_for_large_samples() {
        let x: Vec<f64> = (0..120).step_by(2).map(f64::from).collect();
        let y: Vec<f64> = (0..110).step_by(2).map(|v| f64::from(v) + 7.0).collect();
        let m = mann_whitney(&x, &y).unwrap();
        assert_eq!(m.method, MwuMethod::Normal);
        assert_eq!(m.u, 1595.0);
        assert!(close(m.p_two_sided, 0.7602584471103586, 1e-6));
    }

    #[test]
    fn mwu_degenerate_samples_never_nan() {
        let zeros = [0.0; 5];
        let m = mann_whitney(&zeros, &zeros).unwrap();
        assert_eq!((m.p_greater, m.p_less, m.p_two_sided), (1.0, 1.0, 1.0));
        let m = mann_whitney(&[1.0], &[2.0]).unwrap();
        assert_eq!(m.p_two_sided, 1.0);
        assert!(mann_whitney(&[], &[1.0]).is_none());
        let big = vec![0.0; 80];
        let m = mann_whitney(&big, &big).unwrap();
        assert_eq!(m.p_two_sided, 1.0);
    }

    #[test]
    fn welch_matches_scipy() {
        let w = welch(
            &[1.0, 2.0, 3.0, 4.0, 5.0],
            &[2.0, 4.0, 6.0, 8.0, 10.0, 12.0],
        )
        .unwrap();
        assert!(close(w.t, -2.3763541031440183, 1e-12));
        assert!(close(w.p_two_sided, 0.04928433820673053, 1e-9));
        let w = welch(&[0.3992, 0.41, 0.39], &[0.3892, 0.38, 0.385, 0.39]).unwrap();
        assert!(close(w.t, 2.2003134010109364, 1e-9));
        assert!(close(w.p_two_sided, 0.12738551680751153, 1e-9));
        assert!(close(
            student_t_two_sided(2.5, 7.3),
            0.03965023466560043,
            1e-9
        ));
        assert!(welch(&[1.0], &[2.0, 3.0]).is_none());
        assert!(welch(&[1.0, 1.0], &[2.0, 2.0]).is_none());
    }

    #[test]
    fn mmtests_ci_rule() {
        // Half-widths 1.96·1 each: a difference of 4 > 3.92 does not overlap.
        let r = mmtests_ci_ratio(&[9.0, 10.0, 11.0], &[13.0, 14.0, 15.0]).unwrap();
        assert!(close(r, 4.0 / (2.0 * Z_975), 1e-12));
        assert!(r > 1.0);
        // Both spreads 0: the raw difference, significant only beyond 1.
        assert_eq!(mmtests_ci_ratio(&[0.0, 0.0], &[0.0, 0.0]), Some(0.0));
        assert_eq!(mmtests_ci_ratio(&[0.0, 0.0], &[1.0, 1.0]), Some(1.0));
        assert_eq!(mmtests_ci_ratio(&[6.0, 6.0], &[0.0, 0.0]), Some(-6.0));
        assert_eq!(mmtests_ci_ratio(&[0.25, 0.25], &[0.75, 0.75]), Some(0.5));
        // One value on either side: no interval, no test.
        assert_eq!(mmtests_ci_ratio(&[1.0], &[5.0, 6.0]), None);
        assert_eq!(mmtests_ci_ratio(&[1.0, 2.0], &[9.0]), None);
    }

    #[test]
    fn describe_zero_variance_and_single_values() {
        let d = Describe::of(&[0.0, 0.0, 0.0]).unwrap();
        assert_eq!((d.mean, d.stddev, d.coeffvar), (0.0, 0.0, Some(0.0)));
        let d = Describe::of(&[4.0]).unwrap();
        assert_eq!((d.n, d.median, d.stddev), (1, 4.0, 0.0));
        let d = Describe::of(&[-1.0, 1.0]).unwrap();
        assert_eq!(d.coeffvar, None, "varies around a zero mean: undefined");
        let d = Describe::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!(close(d.stddev, 1.2909944487358056, 1e-12));
        assert!(close(d.coeffvar.unwrap(), 51.63977794943222, 1e-9));
        // Identical values: exactly their value and exactly no spread,
        // where summing would leave residue (8 × 14.983 / 8 ≠ 14.983).
        let d = Describe::of(&[14.983; 8]).unwrap();
        assert_eq!(
            (d.mean, d.median, d.stddev, d.coeffvar),
            (14.983, 14.983, 0.0, Some(0.0))
        );
    }
}
