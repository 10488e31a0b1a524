//! Bayesian linear regression over the encoder's columns: a Gaussian prior
//! on the weights (main effects wider than pairs), Gaussian noise, and the
//! prior and noise scales chosen by the evidence (the marginal likelihood)
//! from a small grid, then each setting's main-effect prior and each
//! pair's prior by automatic relevance ([`relevance`]), so that settings
//! and pairs which do not matter stop looking uncertain. The posterior
//! gives a mean at any row and whole weight vectors drawn from it
//! (Thompson sampling).
//!
//! Everything is computed in weight space: the precision matrix
//! `A = D⁻¹ + XᵀX/s²` is as wide as the row, not as long as the history,
//! so a study of a thousand trials costs what a study of fifty does.

use nalgebra::{DMatrix, DVector};
use rand::Rng;

use engine_bridge::Settings;

use super::acquisition::Drawn;
use super::features::{Class, Encoder};

/// Prior variances tried for main effects and, relative to them, for all
/// pairs together (each pair column gets its share, so that ten settings'
/// 45 pairs do not drown the main effects in prior noise), and noise
/// variances, all in units of the standardized response.
///
/// The smallest pair ratio is next to no pairs at all, for the evidence
/// to choose where the settings' effects add up (on the models' log
/// scale: where a speed is a product of what each setting does). Pairs
/// that only fit noise misled the first trials the models proposed; a
/// response that needs them still gets them (the strategy benchmark,
/// the same seeds before and after: `draft` over 180 seeds 15 trials →
/// 14, 75th percentile 18 → 17, 90th 24 → 21; over 15 seeds `ten` 15 →
/// 13, `vllm` 56 → 49, `cpu` 38 → 28, `offload` 67 → 58, `serving` 41 →
/// 38, `llama8` 11 → 10, `experts` 24 → 24, `midrange` 19 → 20, `ridge`
/// 71 → 73, `layers` 44 → 48, its searches moving both ways by up to a
/// hundred trials; `pocket` over 30, 32.5 → 32, 75th percentile 43 →
/// 51).
const MAIN: [f64; 2] = [0.3, 1.0];
const PAIR_RATIO: [f64; 3] = [1e-3, 0.1, 1.0];
const NOISE: [f64; 3] = [0.003, 0.03, 0.3];
/// How sharply heredity favours the pairs of settings that matter alone: a
/// pair's prior goes as the product of its two settings' main-effect
/// variances to this power. At 1.5 (the cube of the product of their
/// standard deviations) pairs of idle settings fall silent within a few
/// trials; at 0.5 the models stayed unsure whether some pair of idle
/// settings rescued a bad corner, and spent trials there (the strategy
/// benchmark, 60 seeds: `ten` 23 trials → 20, `llama8` 15 → 14.5,
/// `midrange` 30 → 29). Weak heredity, a pair's prior from the larger of
/// its two settings' weights rather than their geometric mean, found the
/// pairs of one strong and one weak setting sooner but spent trials on
/// every pair of the one that matters (8 seeds, median (slowest): `igpu`
/// 29 (124) → 14 (49), `numa` 22 (88) → 25.5 (44), `experts` 24 (50) →
/// 28 (86), `draft` 13.5 (20) → 14.5 (19)); kept strong. Nor a pair's
/// relevance let grow to weak heredity's prior, or the evidence choosing
/// between the two, nor each setting's weight the largest it has in any
/// objective: each cost `ridge` a third more trials
/// (docs/search-benchmark.md, "Heredity and relevance, once more").
const HEREDITY: f64 = 1.5;
/// A number's bends are smaller than its slope and curvature, a priori.
const SHAPE_RATIO: f64 = 0.3;
/// The drift column's prior ([`Class::Drift`]), relative to a main
/// effect's: next to none, or as large; the evidence chooses. Always as
/// large, the column cost worlds whose machine holds steady, where the
/// later trials' better region, which the settings' columns do not fully
/// explain, went to the drift instead (the strategy benchmark, 15 seeds:
/// `layers` 41 trials → 54, `experts` 27 → 34; chosen, 47 and 30), and
/// gained as much where the machine slows (`cpu` 40 → 30 either way).
const DRIFT: [f64; 2] = [1e-6, 1.0];

/// A fitted model of one response.
pub(super) struct Posterior {
    mean: DVector<f64>,
    /// The Cholesky factor of the precision matrix.
    l: DMatrix<f64>,
    /// The response's centre and scale, to map predictions back.
    centre: f64,
    scale: f64,
    /// The chosen priors' log evidence (of the standardized response).
    evidence: f64,
}

/// A standard normal draw (Box–Muller).
pub(crate) fn normal(rng: &mut impl Rng) -> f64 {
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

struct Candidate {
    evidence: f64,
    prior: Vec<f64>,
    noise: f64,
    mean: DVector<f64>,
    l: DMatrix<f64>,
}

/// What every fit needs of the data, computed once: XᵀX, Xᵀy, yᵀy and n.
/// The fits of the hyperparameter grid then cost the row's width, not the
/// history's length.
struct Data {
    gram: DMatrix<f64>,
    xty: DVector<f64>,
    yty: f64,
    n: f64,
}

impl Data {
    fn new(x: &DMatrix<f64>, y: &DVector<f64>) -> Self {
        Data { gram: x.tr_mul(x), xty: x.tr_mul(y), yty: y.dot(y), n: x.nrows() as f64 }
    }
}

fn fit_with(data: &Data, prior: &[f64], noise: f64) -> Option<Candidate> {
    let mut a = &data.gram / noise;
    for (i, p) in prior.iter().enumerate() {
        a[(i, i)] += 1.0 / p;
    }
    let chol = a.cholesky()?;
    let mean = chol.solve(&(&data.xty / noise));
    let log_det_a: f64 = 2.0 * chol.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    let log_det_d: f64 = prior.iter().map(|p| p.ln()).sum();
    // yᵀ(y − Xμ) = yᵀy − μᵀXᵀy.
    let fit = (data.yty - mean.dot(&data.xty)) / noise;
    let evidence = -0.5 * (data.n * noise.ln() + log_det_d + log_det_a + fit);
    Some(Candidate { evidence, prior: prior.to_vec(), noise, mean, l: chol.l() })
}

/// Each column's prior variance: `main` for main effects, `pair` times
/// the pair's weight for pairs, `main` times `drift` for the drift.
fn priors(classes: &[Class], main: f64, pair: f64, drift: f64, heredity: &[f64]) -> Vec<f64> {
    classes
        .iter()
        .map(|c| match c {
            Class::Intercept => 1.0,
            Class::Main(_) => main,
            Class::Shape(_) => main * SHAPE_RATIO,
            Class::Same(..) => main,
            Class::Drift => main * drift,
            Class::Pair(a, b) => pair * (heredity[*a] * heredity[*b]).sqrt().max(1e-4),
        })
        .collect()
}

/// The setting whose main effect (or bend) a column is, if it is one.
fn owner(c: &Class) -> Option<usize> {
    match c {
        Class::Main(i) | Class::Shape(i) => Some(*i),
        _ => None,
    }
}

/// The relevance group a column belongs to: its setting for a main effect
/// or bend, its own group for each pair of settings, none otherwise.
fn group(c: &Class, settings: usize) -> Option<usize> {
    match c {
        Class::Pair(a, b) => Some(settings + a * settings + b),
        _ => owner(c),
    }
}

/// How many settings the columns cover.
fn settings_in(classes: &[Class]) -> usize {
    let last = |c: &Class| match c {
        Class::Pair(a, b) => Some(*a.max(b)),
        _ => owner(c),
    };
    classes.iter().filter_map(last).max().map_or(0, |i| i + 1)
}

/// How much each setting moves the response alone, from a main-effects
/// fit (the variance of its part, to the power [`HEREDITY`] twice over),
/// scaled so that the pair columns' weights average 1.
fn heredity(x: &DMatrix<f64>, data: &Data, classes: &[Class]) -> Vec<f64> {
    let settings = settings_in(classes);
    let none = vec![1.0; settings];
    let mains = priors(classes, 1.0, 1e-8, 1.0, &none);
    let Some(fit) = NOISE
        .iter()
        .filter_map(|n| fit_with(data, &mains, *n))
        .max_by(|a, b| a.evidence.total_cmp(&b.evidence))
    else {
        return none;
    };
    let mut spread = vec![0.0; settings];
    for (s, out) in spread.iter_mut().enumerate() {
        let own = |c: &Class| owner(c) == Some(s);
        let part: Vec<f64> = (0..x.nrows())
            .map(|r| {
                classes
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| own(c))
                    .map(|(j, _)| x[(r, j)] * fit.mean[j])
                    .sum()
            })
            .collect();
        let m = part.iter().sum::<f64>() / part.len().max(1) as f64;
        let variance = part.iter().map(|p| (p - m).powi(2)).sum::<f64>() / part.len().max(1) as f64;
        // Doubled: a pair takes the square root of its two weights' product.
        *out = variance.powf(2.0 * HEREDITY);
    }
    let weights: Vec<f64> = classes
        .iter()
        .filter_map(|c| match c {
            Class::Pair(a, b) => Some((spread[*a] * spread[*b]).sqrt()),
            _ => None,
        })
        .collect();
    let mean = weights.iter().sum::<f64>() / weights.len().max(1) as f64;
    if mean <= 1e-12 {
        return none;
    }
    spread.iter().map(|s| s / mean).collect()
}

/// Relevance rounds: each one re-fits with every setting's main-effect
/// prior set to what its fitted weights and their uncertainty call for.
const ROUNDS: usize = 8;
/// How far a setting's prior may shrink below, or grow above, the one
/// the grid chose: a setting judged irrelevant stays a little uncertain,
/// so that a later trial can still show it matters. At 10⁻⁴ or 10⁻²
/// `experts` and `ridge` took more trials (the same section of
/// docs/search-benchmark.md).
const SHRINK: f64 = 1e-3;
const GROW: f64 = 3.0;

/// Automatic relevance for the main effects (MacKay's evidence updates,
/// as in a relevance vector machine): each setting's columns get their
/// own prior variance, `Σ w²/c / Σ γ` over them, where `γ = 1 − Σⱼⱼ/prior`
/// is how much the data pinned the weight. A setting that does not move
/// the response shrinks towards zero, and with it the model's doubt about
/// it, which would otherwise keep proposing trials that vary it; one that
/// moves it keeps a wide prior. Each pair of settings is its own group
/// too: heredity sets a pair's starting prior from its settings' main
/// effects, and without its own update a pair of one relevant setting with
/// an idle one keeps that wide prior, and the draws keep finding gains
/// through it that the trials never bear out.
fn relevance(data: &Data, classes: &[Class], start: Candidate) -> Candidate {
    let settings = settings_in(classes);
    let own = |j: usize| group(&classes[j], settings);
    let groups = settings + settings * settings;
    let base = start.prior.clone();
    let mut best = start;
    for _ in 0..ROUNDS {
        // The posterior covariance's diagonal, from the precision's factor.
        let n = best.l.nrows();
        let Some(inverse) = best.l.solve_lower_triangular(&DMatrix::identity(n, n)) else {
            break;
        };
        let variance = |j: usize| inverse.column(j).norm_squared();
        let (mut size, mut pinned) = (vec![0.0; groups], vec![0.0; groups]);
        for (j, b) in base.iter().enumerate() {
            if let Some(s) = own(j) {
                size[s] += best.mean[j].powi(2) / b;
                pinned[s] += 1.0 - variance(j) / best.prior[j];
            }
        }
        let prior: Vec<f64> = (0..classes.len())
            .map(|j| match own(j) {
                Some(s) if pinned[s] > 1e-9 => base[j] * (size[s] / pinned[s]).clamp(SHRINK, GROW),
                _ => best.prior[j],
            })
            .collect();
        match fit_with(data, &prior, best.noise) {
            Some(next) => best = next,
            None => break,
        }
    }
    best
}

impl Posterior {
    /// The log evidence of the chosen priors: two fits of the same
    /// responses with rows of the same width compare by it.
    pub fn evidence(&self) -> f64 {
        self.evidence
    }

    /// Fits `y` on the rows `x`, whose columns have the given classes.
    /// `None` only when there is nothing to fit.
    pub fn fit(rows: &[Vec<f64>], y: &[f64], classes: &[Class]) -> Option<Self> {
        Self::fit_noisier(rows, y, classes, 0.0)
    }

    /// As [`Self::fit`], the noise variance (in units of the standardized
    /// response) chosen from those of at least `least`.
    pub fn fit_noisier(
        rows: &[Vec<f64>],
        y: &[f64],
        classes: &[Class],
        least: f64,
    ) -> Option<Self> {
        Self::fit_weighted(rows, y, None, classes, least)
    }

    /// As [`Self::fit_noisier`], each trial's squared error weighed by its
    /// `weights` entry: a trial of weight ½ is read as twice as noisy as
    /// one of weight 1 ([`super::robust`]). The evidence that picks the
    /// prior and noise scales leaves out the weights' own constant, which
    /// does not change which of them wins.
    pub fn fit_weighted(
        rows: &[Vec<f64>],
        y: &[f64],
        weights: Option<&[f64]>,
        classes: &[Class],
        least: f64,
    ) -> Option<Self> {
        if rows.is_empty() {
            return None;
        }
        let centre = y.iter().sum::<f64>() / y.len() as f64;
        let spread = (y.iter().map(|v| (v - centre).powi(2)).sum::<f64>() / y.len() as f64).sqrt();
        let scale = if spread > 1e-12 { spread } else { 1.0 };
        // Weighted least squares: each row and response scaled by √w.
        let root = |i: usize| weights.map_or(1.0, |w| w[i].sqrt());
        let x = DMatrix::from_fn(rows.len(), classes.len(), |i, j| rows[i][j] * root(i));
        let y = DVector::from_iterator(
            y.len(),
            y.iter().enumerate().map(|(i, v)| (v - centre) / scale * root(i)),
        );
        let pairs = classes.iter().filter(|c| matches!(c, Class::Pair(..))).count();
        let mains = classes.iter().filter(|c| matches!(c, Class::Main(_))).count();
        let share = mains.max(1) as f64 / pairs.max(1) as f64;
        // Heredity: a pair's prior in proportion to how much its two
        // settings move the response alone.
        let data = Data::new(&x, &y);
        let heredity = heredity(&x, &data, classes);
        let drifts: &[f64] = if classes.contains(&Class::Drift) { &DRIFT } else { &[1.0] };
        let mut best: Option<Candidate> = None;
        for main in MAIN {
            for ratio in PAIR_RATIO {
                for drift in drifts {
                    let prior = priors(classes, main, main * ratio * share, *drift, &heredity);
                    for noise in NOISE.into_iter().filter(|n| *n >= least) {
                        if let Some(c) = fit_with(&data, &prior, noise)
                            && best.as_ref().is_none_or(|b| c.evidence > b.evidence)
                        {
                            best = Some(c);
                        }
                    }
                }
            }
        }
        let best = best?;
        let best = relevance(&data, classes, best);
        Some(Posterior { mean: best.mean, l: best.l, centre, scale, evidence: best.evidence })
    }

    /// The posterior mean at `row`, on the response's own scale.
    pub fn mean_at(&self, row: &[f64]) -> f64 {
        self.centre + self.scale * row.iter().zip(self.mean.iter()).map(|(a, b)| a * b).sum::<f64>()
    }

    /// The posterior mean, as a function of rows.
    pub fn mean(&self) -> Draw {
        Draw { weights: self.mean.clone(), centre: self.centre, scale: self.scale }
    }

    /// One weight vector drawn from the posterior, as a function of rows.
    pub fn draw(&self, rng: &mut impl Rng) -> Draw {
        let z = DVector::from_fn(self.mean.len(), |_, _| normal(rng));
        // w = μ + L⁻ᵀz has covariance (LLᵀ)⁻¹ = A⁻¹.
        let offset = self.l.transpose().solve_upper_triangular(&z).unwrap_or_else(|| z * 0.0);
        Draw { weights: &self.mean + offset, centre: self.centre, scale: self.scale }
    }
}

/// Draws of a linear model, read at configurations through the encoder.
pub(super) struct LinearDraws<'a> {
    pub encoder: &'a Encoder,
    pub draws: Vec<Draw>,
}

impl Drawn for LinearDraws<'_> {
    fn at(&self, config: &Settings) -> Vec<f64> {
        let row = self.encoder.row(config);
        self.draws.iter().map(|d| d.at(&row)).collect()
    }
}

/// Several linear models' draws read as one, draw by draw combined by
/// `pick` (the largest chance to fail of any kind, the least slack of any
/// limit).
pub(super) struct DrawWise<'a> {
    pub models: Vec<LinearDraws<'a>>,
    pub pick: fn(f64, f64) -> f64,
}

impl Drawn for DrawWise<'_> {
    fn at(&self, config: &Settings) -> Vec<f64> {
        let mut each = self.models.iter().map(|m| m.at(config));
        let first = each.next().unwrap_or_default();
        each.fold(first, |acc, v| acc.into_iter().zip(v).map(|(a, b)| (self.pick)(a, b)).collect())
    }
}

/// A drawn model.
pub(super) struct Draw {
    weights: DVector<f64>,
    centre: f64,
    scale: f64,
}

impl Draw {
    /// A draw over some of a row's columns (`columns`, in order) read
    /// over whole rows of `width`: the other columns weigh nothing.
    pub fn widened(self, columns: &[usize], width: usize) -> Draw {
        let mut weights = DVector::zeros(width);
        for (w, c) in self.weights.iter().zip(columns) {
            weights[*c] = *w;
        }
        Draw { weights, ..self }
    }

    /// The model at `row`. A row shorter than the weights (the encoder's,
    /// without the objectives' drift column) reads the model as of the
    /// study's first trial.
    pub fn at(&self, row: &[f64]) -> f64 {
        self.centre
            + self.scale * row.iter().zip(self.weights.iter()).map(|(a, b)| a * b).sum::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn learns_a_line_and_is_unsure_far_from_the_data() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let classes = [Class::Intercept, Class::Main(0), Class::Main(1)];
        // y = 3 + 2·a, b never varied.
        let rows: Vec<Vec<f64>> = (0..12).map(|i| vec![1.0, f64::from(i % 4) / 3.0, 0.0]).collect();
        let y: Vec<f64> = rows.iter().map(|r| 3.0 + 2.0 * r[1] + 0.01 * normal(&mut rng)).collect();
        let p = Posterior::fit(&rows, &y, &classes).unwrap();
        assert!(
            (p.mean_at(&[1.0, 0.5, 0.0]) - 4.0).abs() < 0.05,
            "{}",
            p.mean_at(&[1.0, 0.5, 0.0])
        );
        let spread = |row: &[f64], rng: &mut rand::rngs::StdRng| {
            let draws: Vec<f64> = (0..200).map(|_| p.draw(rng).at(row)).collect();
            let m = draws.iter().sum::<f64>() / 200.0;
            (draws.iter().map(|d| (d - m).powi(2)).sum::<f64>() / 200.0).sqrt()
        };
        let seen = spread(&[1.0, 0.5, 0.0], &mut rng);
        let unseen = spread(&[1.0, 0.5, 1.0], &mut rng);
        assert!(unseen > 10.0 * seen, "seen {seen}, unseen {unseen}");
    }

    #[test]
    fn settings_that_do_not_matter_stop_looking_uncertain() {
        // Eight settings of three columns each, twelve trials, and only the
        // first moves the response: without relevance the others' weights
        // stay as wide as their prior, and every untried combination of
        // them looks worth a trial.
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let mut classes = vec![Class::Intercept];
        for s in 0..8 {
            classes.extend([Class::Main(s); 3]);
        }
        let rows: Vec<Vec<f64>> = (0..12)
            .map(|_| {
                let mut r = vec![1.0];
                r.extend((0..24).map(|_| f64::from(u8::from(rng.random::<bool>()))));
                r
            })
            .collect();
        let y: Vec<f64> = rows.iter().map(|r| 2.0 * r[1] + 0.01 * normal(&mut rng)).collect();
        let p = Posterior::fit(&rows, &y, &classes).unwrap();
        // One trial's row, then the same with setting 5's columns flipped.
        let here = rows[0].clone();
        let mut there = here.clone();
        for c in &mut there[16..19] {
            *c = 1.0 - *c;
        }
        let moves: Vec<f64> = (0..200)
            .map(|_| {
                let d = p.draw(&mut rng);
                d.at(&there) - d.at(&here)
            })
            .collect();
        let spread = (moves.iter().map(|m| m * m).sum::<f64>() / 200.0).sqrt();
        assert!(spread < 0.2, "setting 5 still moves the response by ±{spread:.2} (of 2)");
    }

    #[test]
    fn a_pair_of_a_setting_that_matters_with_an_idle_one_falls_silent() {
        // Five settings on one column each, with every pair's column, and
        // only the first moves the response. Heredity gives the first
        // setting's pairs a wide prior; each pair's own relevance shrinks
        // it once the trials show the pair does nothing. Without that, the
        // draws disagree on what the idle settings do where the first is
        // high, and the search keeps trying them there.
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut classes = vec![Class::Intercept];
        classes.extend((0..5).map(Class::Main));
        for a in 0..5 {
            classes.extend((a + 1..5).map(|b| Class::Pair(a, b)));
        }
        let row = |v: &[f64]| {
            let mut r = vec![1.0];
            r.extend(v);
            for a in 0..5 {
                r.extend((a + 1..5).map(|b| 4.0 * (v[a] - 0.5) * (v[b] - 0.5)));
            }
            r
        };
        let rows: Vec<Vec<f64>> =
            (0..8).map(|_| row(&(0..5).map(|_| rng.random::<f64>()).collect::<Vec<_>>())).collect();
        let y: Vec<f64> = rows.iter().map(|r| 2.0 * r[1] + 0.01 * normal(&mut rng)).collect();
        let p = Posterior::fit(&rows, &y, &classes).unwrap();
        let (low, high) = (row(&[0.9, 0.1, 0.1, 0.1, 0.1]), row(&[0.9, 0.9, 0.9, 0.9, 0.9]));
        let moves: Vec<f64> = (0..200)
            .map(|_| {
                let d = p.draw(&mut rng);
                d.at(&high) - d.at(&low)
            })
            .collect();
        let m = moves.iter().sum::<f64>() / 200.0;
        let spread = (moves.iter().map(|v| (v - m).powi(2)).sum::<f64>() / 200.0).sqrt();
        assert!(spread < 0.09, "the idle settings still move the response by ±{spread:.3}");
    }

    #[test]
    fn pairs_follow_the_settings_that_matter_alone_sharply() {
        // Three settings on balanced ±1 columns: the first moves the
        // response twice as far as the second, the third half as far. The
        // pair of the first with the third then weighs (4 / 1)^1.5 = 8
        // times the pair of the second with the third, not 2.
        let classes = [
            Class::Intercept,
            Class::Main(0),
            Class::Main(1),
            Class::Main(2),
            Class::Pair(0, 2),
            Class::Pair(1, 2),
        ];
        let level = |i: usize, bit: usize| if (i >> bit) & 1 == 1 { 1.0 } else { -1.0 };
        let rows: Vec<Vec<f64>> = (0..16)
            .map(|i| {
                let (a, b, c) = (level(i, 0), level(i, 1), level(i, 2));
                vec![1.0, a, b, c, a * c, b * c]
            })
            .collect();
        let y: Vec<f64> = rows.iter().map(|r| 2.0 * r[1] + r[2] + 0.5 * r[3]).collect();
        let x = DMatrix::from_fn(rows.len(), classes.len(), |i, j| rows[i][j]);
        let data = Data::new(&x, &DVector::from_vec(y));
        let h = heredity(&x, &data, &classes);
        let ratio = (h[0] * h[2]).sqrt() / (h[1] * h[2]).sqrt();
        assert!((ratio - 8.0).abs() < 0.5, "pair weights {ratio:.2} apart");
    }

    #[test]
    fn mixed_cache_types_are_learnt_without_a_main_effect() {
        // Decode falls to 40 % whenever the K and V cache types differ,
        // and neither type moves it alone: over a balanced set of trials
        // every type's average is the same. Ten trials (three of them
        // matched) are enough to expect an untried matched pair to be
        // well over twice as fast as an untried mixed one.
        use crate::space::{Domain, Param};
        let types = Domain::Values(["f16", "q8_0", "q4_0"].map(String::from).to_vec());
        let threads = Domain::Int { min: 1, max: 16, step: 1, log: false };
        let params = [
            Param { name: "k".into(), domain: types.clone() },
            Param { name: "v".into(), domain: types },
            Param { name: "threads".into(), domain: threads },
        ];
        let encoder = Encoder::new(&params, &Settings::new());
        let config = |k: &str, v: &str, t: i64| -> Settings {
            [("k", k.to_string()), ("v", v.to_string()), ("threads", t.to_string())]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b))
                .collect()
        };
        let speed = |c: &Settings| -> f64 {
            let t: f64 = c["threads"].parse().unwrap();
            (if c["k"] == c["v"] { 1.0f64 } else { 0.4 }).ln() + 0.01 * t
        };
        let tried = [
            config("f16", "f16", 4),
            config("q4_0", "q4_0", 12),
            config("q8_0", "q8_0", 8),
            config("f16", "q8_0", 2),
            config("q8_0", "f16", 14),
            config("f16", "q4_0", 10),
            config("q4_0", "f16", 6),
            config("q8_0", "q4_0", 16),
            config("q4_0", "q8_0", 1),
            config("q4_0", "f16", 9),
        ];
        let rows: Vec<Vec<f64>> = tried.iter().map(|c| encoder.row(c)).collect();
        let y: Vec<f64> = tried.iter().map(speed).collect();
        let p = Posterior::fit(&rows, &y, &encoder.classes).unwrap();
        let at = |c: Settings| p.mean_at(&encoder.row(&c));
        let (matched, mixed) = (at(config("q8_0", "q8_0", 12)), at(config("q8_0", "q4_0", 12)));
        assert!(
            (matched - mixed).exp() > 2.0,
            "matched {:.2} against mixed {:.2}",
            matched.exp(),
            mixed.exp()
        );
    }

    #[test]
    fn a_count_from_zero_peaks_where_its_ratios_say() {
        // Speculative decoding: each drafted token is accepted with a
        // chance that falls from 0.85 by 0.04 a token, and each costs 9 %
        // of a step, so decode peaks at 5 tokens (4 is within 0.5 %).
        // Measured at 0, 1, 2, 3, 8, 12, 16 and 24 tokens, the model read
        // by the tokens' ratios peaks at 4 or 5; read along a line, as a
        // count of layers is, its bends sit at 6, 12 and 18 and it peaks
        // at 6 or past it, where decode is lower and each token costs
        // memory.
        use crate::space::{Domain, Param};
        let decode = |n: u32| -> f64 {
            let (mut accepted, mut chance) = (1.0, 1.0);
            for i in 0..n {
                chance *= 0.85 - 0.04 * f64::from(i);
                accepted += chance;
            }
            (accepted / (1.0 + 0.09 * f64::from(n))).ln()
        };
        let peak = |name: &str| -> u32 {
            let domain = Domain::Int { min: 0, max: 24, step: 1, log: false };
            let encoder = Encoder::new(&[Param { name: name.into(), domain }], &Settings::new());
            let row = |n: u32| encoder.row(&[(name.to_string(), n.to_string())].into());
            let tried = [0, 1, 2, 3, 8, 12, 16, 24];
            let rows: Vec<Vec<f64>> = tried.iter().map(|n| row(*n)).collect();
            let y: Vec<f64> = tried.iter().map(|n| decode(*n)).collect();
            let p = Posterior::fit(&rows, &y, &encoder.classes).unwrap();
            (1..=24).max_by(|a, b| p.mean_at(&row(*a)).total_cmp(&p.mean_at(&row(*b)))).unwrap()
        };
        assert!((4..=5).contains(&peak("draft_max")), "{}", peak("draft_max"));
        assert!(peak("n_gpu_layers") >= 6, "{}", peak("n_gpu_layers"));
    }
}
