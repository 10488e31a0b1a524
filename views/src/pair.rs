//! Two settings at once: a grid of their values with each cell coloured by
//! the median of its trials on one metric (a contour plot of a grid that
//! has words on its axes as often as numbers). Drawn with scatter markers,
//! which the quick build of plotly.js has.

use serde_json::{Value, json};

use crate::figures::value_order;

/// The median of `v` (not empty).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Setting `a` across, `b` up; `points` are (a's value index, b's value
/// index, metric); a cell's size grows with its trials.
pub fn figure(
    a: (&str, &[String]),
    b: (&str, &[String]),
    points: &[(u32, u32, f64)],
    metric: &str,
) -> Value {
    let label = |v: &str| if v.is_empty() { "default".to_string() } else { v.to_string() };
    let (mut x, mut y, mut z, mut n) = (vec![], vec![], vec![], vec![]);
    for i in value_order(a.1) {
        for j in value_order(b.1) {
            let mut cell: Vec<f64> = points
                .iter()
                .filter(|p| p.0 as usize == i && p.1 as usize == j)
                .map(|p| p.2)
                .collect();
            if cell.is_empty() {
                continue;
            }
            n.push(cell.len());
            z.push(median(&mut cell));
            x.push(label(&a.1[i]));
            y.push(label(&b.1[j]));
        }
    }
    let most = n.iter().copied().max().unwrap_or(1) as f64;
    // Each axis in value order, whichever cells are missing.
    let order = |values: &[String]| -> Vec<String> {
        value_order(values).into_iter().map(|i| label(&values[i])).collect()
    };
    let size: Vec<f64> = n.iter().map(|k| 14.0 + 26.0 * (*k as f64 / most).sqrt()).collect();
    json!({
        "data": [{
            "type": "scatter",
            "mode": "markers",
            "x": x,
            "y": y,
            "text": n.iter().map(|k| format!("{k} trial{}", if *k == 1 { "" } else { "s" })).collect::<Vec<_>>(),
            "marker": { "color": z, "size": size, "colorscale": "Viridis", "showscale": true,
                        "colorbar": { "title": { "text": metric } }, "symbol": "square" },
            "hovertemplate": "%{x}, %{y}: median %{marker.color} over %{text}<extra></extra>",
        }],
        "layout": {
            "xaxis": { "title": { "text": a.0 }, "type": "category",
                       "categoryorder": "array", "categoryarray": order(a.1) },
            "yaxis": { "title": { "text": b.0 }, "type": "category",
                       "categoryorder": "array", "categoryarray": order(b.1) },
            "showlegend": false,
            "margin": { "l": 80, "r": 20, "t": 20, "b": 60 },
            "uirevision": "keep",
        },
    })
}
