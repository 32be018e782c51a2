//! The statistics behind the tables and the bisect verdict, written out
//! (they are small) rather than pulled from a crate: descriptive statistics
//! as mmtests prints them, Mann–Whitney U (exact or normal), Welch's t, and
//! mmtests' confidence-interval rule.
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
        let mean = v.iter().sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let stddev = sample_stddev(&v, mean);
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

fn binomial(n: usize, k: usize) -> f64 {
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

/// Standard normal CDF, from erfc (absolute error below 1e-7).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit,
/// fractional error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
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
/// I_{df/(df+t²)}(df/2, ½).
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    reg_inc_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// Regularized incomplete beta I_x(a, b) by Lentz's continued fraction
/// (Numerical Recipes `betai`/`betacf`).
fn reg_inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    // The fraction converges fast for x < (a+1)/(a+b+2); use symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-14 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; ~1e-15 relative).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series in its accurate range.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
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
    fn ln_gamma_matches_factorials() {
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-12));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-12
        ));
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
    }
}
