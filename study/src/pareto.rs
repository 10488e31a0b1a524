//! Pareto fronts and hypervolume over objective vectors.

use crate::study::Goal;

/// Whether `a` dominates `b`: at least as good everywhere, better somewhere
/// (both oriented so that larger is better).
pub fn dominates(a: &[f64], b: &[f64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x >= y) && a.iter().zip(b).any(|(x, y)| x > y)
}

/// Indices of the non-dominated points. Points are sorted on the first
/// objective, so a point can only be dominated by one before it, and only
/// the front so far is compared with: O(n log n + n·front), which keeps a
/// 100,000-trial study fast where the pairwise O(n²) sort would not be.
pub fn front(points: &[Vec<f64>], goals: &[Goal]) -> Vec<usize> {
    let oriented: Vec<Vec<f64>> =
        points.iter().map(|p| p.iter().zip(goals).map(|(v, g)| g.oriented(*v)).collect()).collect();
    let mut order: Vec<usize> =
        (0..points.len()).filter(|&i| oriented[i].iter().all(|v| v.is_finite())).collect();
    order.sort_by(|&a, &b| {
        oriented[b]
            .iter()
            .zip(&oriented[a])
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut kept: Vec<usize> = Vec::new();
    for i in order {
        let p = &oriented[i];
        let dominated = kept.iter().any(|&k| dominates(&oriented[k], p) || oriented[k] == *p);
        if !dominated {
            kept.push(i);
        }
    }
    kept.sort_unstable();
    kept
}

/// The hypervolume the points dominate up to `reference` (a point worse than
/// all of them), through the optimizer crate's exact algorithm.
pub fn hypervolume(points: &[Vec<f64>], goals: &[Goal], reference: &[f64]) -> f64 {
    let directions: Vec<optimizer::Direction> = goals
        .iter()
        .map(|g| match g {
            Goal::Max => optimizer::Direction::Maximize,
            Goal::Min => optimizer::Direction::Minimize,
        })
        .collect();
    let front: Vec<Vec<f64>> =
        front(points, goals).into_iter().map(|i| points[i].clone()).collect();
    optimizer::pareto::hypervolume(&front, reference, &directions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_of_speed_and_memory() {
        // (tok/s, GiB): faster is better, smaller is better.
        let points = vec![
            vec![10.0, 4.0],
            vec![12.0, 6.0],
            vec![9.0, 5.0],  // dominated by the first
            vec![12.0, 6.0], // a duplicate is kept once
            vec![8.0, 2.0],
            vec![f64::NAN, 1.0],
        ];
        let goals = [Goal::Max, Goal::Min];
        assert_eq!(front(&points, &goals), vec![0, 1, 4]);
        let brute: Vec<usize> = (0..5)
            .filter(|&i| {
                let o = |p: &Vec<f64>| vec![p[0], -p[1]];
                !(0..i).chain(i + 1..5).any(|j| {
                    dominates(&o(&points[j]), &o(&points[i])) || (j < i && points[j] == points[i])
                })
            })
            .collect();
        assert_eq!(front(&points, &goals), brute);
        // Reference (0 tok/s, 10 GiB): boxes 12x4 + 10x(6-4)... computed by hand.
        let hv = hypervolume(&points, &goals, &[0.0, 10.0]);
        assert!((hv - (12.0 * 4.0 + 10.0 * 2.0 + 8.0 * 2.0)).abs() < 1e-9, "{hv}");
    }
}
