//! Ordinary least squares through the cross-products of a design: XᵀX,
//! Xᵀy and yᵀy are summed once over the trials, and every model made of a
//! subset of the columns (main effects, with or without an interaction) is
//! fitted from them by nalgebra's symmetric eigendecomposition, so trying
//! many models costs nothing per trial. Columns the design cannot separate
//! (aliased) leave the rank below the column count; the pseudo-inverse
//! handles them, and a contrast that depends on them is reported as not
//! estimable rather than given a number.

use nalgebra::{DMatrix, DVector, SymmetricEigen};
use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};

/// Eigenvalues of XᵀX below this share of the largest count as zero.
const RANK_TOL: f64 = 1e-10;

/// The cross-products of a design matrix and a response (centered, so
/// that the sums stay small and exact).
#[derive(Debug, Clone)]
pub struct Gram {
    xtx: DMatrix<f64>,
    xty: DVector<f64>,
    yty: f64,
    n: usize,
}

impl Gram {
    /// Sums over `rows` (every one of the same length) and `y`.
    pub fn new(rows: &[Vec<f64>], y: &[f64]) -> Gram {
        let p = rows.first().map_or(0, Vec::len);
        let mut gram =
            Gram { xtx: DMatrix::zeros(p, p), xty: DVector::zeros(p), yty: 0.0, n: rows.len() };
        for (row, &y) in rows.iter().zip(y) {
            gram.add(row, y, 1.0);
        }
        gram
    }

    /// The sums without one of their rows (`row`, `y`): the others' sums,
    /// without going over them again.
    pub fn without(&self, row: &[f64], y: f64) -> Gram {
        let mut less = self.clone();
        less.add(row, y, -1.0);
        less.n -= 1;
        less
    }

    /// Adds `row` and `y` to the sums `sign` times (-1: takes them out).
    fn add(&mut self, row: &[f64], y: f64, sign: f64) {
        let x = DVector::from_column_slice(row);
        self.xtx.ger(sign, &x, &x, 1.0);
        self.xty.axpy(sign * y, &x, 1.0);
        self.yty += sign * y * y;
    }
}

/// A linear model of some of a [`Gram`]'s columns, fitted.
#[derive(Debug, Clone)]
pub struct Fit {
    /// The columns, as indices into the full design.
    pub columns: Vec<usize>,
    pub beta: DVector<f64>,
    /// The pseudo-inverse of XᵀX: the coefficients' covariance over σ².
    pub xtx_pinv: DMatrix<f64>,
    /// Projects a coefficient vector onto what the data determines.
    projection: DMatrix<f64>,
    pub rss: f64,
    pub rank: usize,
    pub n: usize,
}

impl Fit {
    /// Least squares on `columns` of `gram`.
    pub fn new(gram: &Gram, columns: &[usize]) -> Fit {
        let p = columns.len();
        let xtx = DMatrix::from_fn(p, p, |i, j| gram.xtx[(columns[i], columns[j])]);
        let xty = DVector::from_fn(p, |i, _| gram.xty[columns[i]]);
        let eigen = SymmetricEigen::new(xtx.clone());
        let top = eigen.eigenvalues.iter().copied().fold(0.0, f64::max);
        let tol = (top * RANK_TOL).max(f64::MIN_POSITIVE);
        let kept: Vec<bool> = eigen.eigenvalues.iter().map(|l| *l > tol).collect();
        let rank = kept.iter().filter(|k| **k).count();
        let inv =
            DVector::from_fn(p, |i, _| if kept[i] { 1.0 / eigen.eigenvalues[i] } else { 0.0 });
        let q = &eigen.eigenvectors;
        let xtx_pinv = q * DMatrix::from_diagonal(&inv) * q.transpose();
        let beta = &xtx_pinv * &xty;
        let projection = &xtx_pinv * &xtx;
        let rss = (gram.yty - beta.dot(&xty)).max(0.0);
        Fit { columns: columns.to_vec(), beta, xtx_pinv, projection, rss, rank, n: gram.n }
    }

    /// Degrees of freedom left for the noise.
    pub fn df(&self) -> usize {
        self.n.saturating_sub(self.rank)
    }

    /// The noise variance, at least `floor`; `None` without a degree of
    /// freedom to estimate it from.
    pub fn sigma2(&self, floor: f64) -> Option<f64> {
        (self.df() > 0).then(|| (self.rss / self.df() as f64).max(floor))
    }

    /// `c` (over the full design's columns) restricted to this model's.
    fn restrict(&self, c: &[f64]) -> DVector<f64> {
        DVector::from_fn(self.columns.len(), |i, _| c[self.columns[i]])
    }

    /// Whether `c`ᵀβ is something the data determines (c lies in X's row space).
    pub fn is_estimable(&self, c: &[f64]) -> bool {
        let c = self.restrict(c);
        let projected = self.projection.transpose() * &c;
        (projected - &c).amax() <= 1e-6 * c.amax().max(1.0)
    }

    /// The model's prediction for a design row.
    pub fn predict(&self, row: &[f64]) -> f64 {
        self.restrict(row).dot(&self.beta)
    }

    /// A row's leverage: its own weight in its prediction.
    pub fn leverage(&self, row: &[f64]) -> f64 {
        let x = self.restrict(row);
        (x.transpose() * &self.xtx_pinv * &x)[(0, 0)]
    }

    /// `c`ᵀβ and its standard error, noise variance `sigma2`; `None` when
    /// the design does not determine it.
    pub fn contrast(&self, c: &[f64], sigma2: f64) -> Option<(f64, f64)> {
        if !self.is_estimable(c) {
            return None;
        }
        let c = self.restrict(c);
        let var = (c.transpose() * &self.xtx_pinv * &c)[(0, 0)].max(0.0) * sigma2;
        Some((c.dot(&self.beta), var.sqrt()))
    }
}

impl Fit {
    /// Each row's weight in `c`ᵀβ, which is `Σ w_k y_k` over the rows
    /// fitted (`rows`, in the order the [`Gram`] summed them).
    pub fn weights<'a>(&self, c: &[f64], rows: impl Iterator<Item = &'a [f64]>) -> Vec<f64> {
        let pc = &self.xtx_pinv * self.restrict(c);
        rows.map(|row| self.restrict(row).dot(&pc)).collect()
    }
}

/// The F-test of a reduced model against a fuller one fitted to the same
/// data: the p-value and the degrees of freedom the test has (the rank the
/// fuller model adds). `None` when the fuller one adds nothing the data can
/// separate, or leaves no noise to judge by. `floor`: the least noise
/// variance believed (spreads smaller than that are rounding).
pub fn f_test(reduced: &Fit, full: &Fit, floor: f64) -> Option<(f64, usize)> {
    f_test_against(reduced, full, full, floor)
}

/// [`f_test`] with the noise judged from `error`, a model at least as full
/// as `full` (a Type-II test judges a main effect against the whole
/// model's residual, not against one that leaves its interactions out).
pub fn f_test_against(reduced: &Fit, full: &Fit, error: &Fit, floor: f64) -> Option<(f64, usize)> {
    let df1 = full.rank.checked_sub(reduced.rank).filter(|d| *d > 0)?;
    let sigma2 = error.sigma2(floor)?;
    let gain = (reduced.rss - full.rss).max(0.0);
    let f = gain / df1 as f64 / sigma2;
    let p = FisherSnedecor::new(df1 as f64, error.df() as f64).ok()?.sf(f);
    Some((p, df1))
}

/// Student's t quantile for a two-sided interval of `level` (0.95, 0.90).
pub fn t_quantile(level: f64, df: usize) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1) as f64)
        .map(|t| t.inverse_cdf(0.5 + level / 2.0))
        .unwrap_or(f64::INFINITY)
}

/// The two-sided p-value of a t statistic; 1 (no evidence) for one that
/// is not a number, and 0 for an infinite one.
pub fn t_p(t: f64, df: usize) -> f64 {
    if t.is_nan() {
        return 1.0;
    }
    if t.is_infinite() {
        return 0.0;
    }
    StudentsT::new(0.0, 1.0, df.max(1) as f64).map_or(1.0, |d| (2.0 * d.sf(t.abs())).min(1.0))
}

/// Holm's step-down adjustment: each p-value raised so that claiming every
/// adjusted p ≤ α keeps the chance of any false claim at α.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|a, b| p[*a].total_cmp(&p[*b]));
    let m = p.len();
    let mut out = vec![1.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statistic_that_is_not_a_number_is_no_evidence() {
        assert_eq!(t_p(f64::NAN, 5), 1.0);
        assert_eq!(t_p(f64::INFINITY, 5), 0.0);
        assert!((t_p(0.0, 5) - 1.0).abs() < 1e-12);
    }

    fn rows(n: usize, p: usize, f: impl Fn(usize, usize) -> f64) -> Vec<Vec<f64>> {
        (0..n).map(|i| (0..p).map(|j| f(i, j)).collect()).collect()
    }

    #[test]
    fn a_line_is_fitted_with_textbook_numbers() {
        // y = 1 + 2x with residuals ±0.1: slope 1.96, its standard error
        // sqrt(σ² / Σ(x - x̄)²) with Σ(x - x̄)² = 5.
        let xs = [0.0, 1.0, 2.0, 3.0];
        let y = [1.1, 2.9, 5.1, 6.9];
        let x = rows(4, 2, |i, j| if j == 0 { 1.0 } else { xs[i] });
        let fit = Fit::new(&Gram::new(&x, &y), &[0, 1]);
        assert!((fit.beta[1] - 1.96).abs() < 1e-9, "{}", fit.beta);
        assert_eq!((fit.rank, fit.df()), (2, 2));
        let sigma2 = fit.sigma2(0.0).unwrap();
        assert!((fit.rss - 0.032).abs() < 1e-9, "{}", fit.rss);
        let (est, se) = fit.contrast(&[0.0, 1.0], sigma2).unwrap();
        assert!((est - 1.96).abs() < 1e-9);
        assert!((se - (sigma2 / 5.0).sqrt()).abs() < 1e-9);
        let total: f64 = x.iter().map(|r| fit.leverage(r)).sum();
        assert!((total - 2.0).abs() < 1e-9, "leverages sum to the rank");
    }

    #[test]
    fn aliased_columns_are_not_estimable() {
        // Columns 1 and 2 always equal: their sum is determined, each is not.
        let x = rows(4, 3, |i, j| if j == 0 || i % 2 == 1 { 1.0 } else { 0.0 });
        let fit = Fit::new(&Gram::new(&x, &[1.0, 3.0, 1.1, 2.9]), &[0, 1, 2]);
        assert_eq!(fit.rank, 2);
        assert!(!fit.is_estimable(&[0.0, 1.0, 0.0]));
        assert!(fit.is_estimable(&[0.0, 1.0, 1.0]));
    }

    #[test]
    fn a_row_taken_out_leaves_the_others_sums() {
        // The last row is the only one with column 2 set: without it, that
        // column is not estimable, as with the others' sums made anew.
        let x = rows(5, 3, |i, j| [1.0, (i % 2) as f64, f64::from(u8::from(i == 4))][j]);
        let y = [1.0, 2.5, 0.5, 3.0, 9.0];
        let less = Gram::new(&x, &y).without(&x[4], y[4]);
        let anew = Gram::new(&x[..4], &y[..4]);
        assert_eq!((less.n, less.xtx.clone(), less.xty.clone()), (anew.n, anew.xtx, anew.xty));
        assert!((less.yty - anew.yty).abs() < 1e-12);
        let fit = Fit::new(&less, &[0, 1, 2]);
        assert!(!fit.is_estimable(&x[4]) && fit.is_estimable(&x[3]));
    }

    #[test]
    fn holm_matches_a_worked_example() {
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.005]);
        let expected = [0.03, 0.06, 0.06, 0.02];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!((a - e).abs() < 1e-12, "{adjusted:?}");
        }
    }

    #[test]
    fn the_f_test_matches_one_way_analysis_of_variance() {
        // Three groups of three: F = 27 on (2, 6) degrees of freedom, where
        // the tail is (1 + 2F/6)^-3 = 0.001 exactly.
        let y = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        let x = rows(9, 3, |i, j| if j == 0 || i / 3 == j { 1.0 } else { 0.0 });
        let gram = Gram::new(&x, &y);
        let (p, df) = f_test(&Fit::new(&gram, &[0]), &Fit::new(&gram, &[0, 1, 2]), 0.0).unwrap();
        assert_eq!(df, 2);
        assert!((p - 0.001).abs() < 1e-9, "{p}");
    }

    #[test]
    fn a_type_two_test_judges_a_main_effect_against_the_whole_model() {
        // A 2×2 design, two trials a cell, whose cell means (2, 6, 3, 11)
        // are off the additive fit by ±1: A's sum of squares over B alone
        // is 72; against the within-cell noise (8 on 4 degrees of
        // freedom), F = 36 and p = 0.00388 (Student's t with 4 degrees
        // of freedom at 6, in closed form); against the additive model's
        // residual (16 on 5) it would be F = 22.5 and p = 0.0051.
        let y = [1.0, 3.0, 5.0, 7.0, 2.0, 4.0, 10.0, 12.0];
        let x = rows(8, 4, |i, j| {
            let (a, b) = (f64::from(u8::from(i % 4 >= 2)), f64::from(u8::from(i >= 4)));
            [1.0, a, b, a * b][j]
        });
        let gram = Gram::new(&x, &y);
        let (reduced, with, whole) =
            (Fit::new(&gram, &[0, 2]), Fit::new(&gram, &[0, 1, 2]), Fit::new(&gram, &[0, 1, 2, 3]));
        let (p, df) = f_test_against(&reduced, &with, &whole, 0.0).unwrap();
        assert_eq!(df, 1);
        assert!((p - 0.003_882_5).abs() < 1e-6, "{p}");
        let (p_additive, _) = f_test(&reduced, &with, 0.0).unwrap();
        assert!(p_additive > 1.3 * p, "{p_additive} against {p}");
    }
}
