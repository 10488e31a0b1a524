//! The spread of a trial's speed requests: each measure's percentiles over
//! its requests (time to first token, time per output token, decode and
//! prefill speed), and every request drawn, so a reader sees whether a
//! trial's value is one of many alike or the middle of a scatter.

use serde_json::{Value, json};

use crate::types::SampleView;

/// One measure's spread over a trial's requests.
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadRow {
    pub label: &'static str,
    /// The measure's name where it is drawn (the figure's trace).
    pub key: &'static str,
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// The `q`-quantile of sorted `v` (0 ≤ q ≤ 1), interpolated between the
/// two nearest ranks, as numpy's default does.
fn quantile(v: &[f64], q: f64) -> f64 {
    let at = q * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

/// Each request's values of the measures a trial page shows, with the
/// request's number: TTFT (ms), time per output token (ms, the request's
/// own mean: the engine reports no single gaps), decode and prefill speed
/// (tokens a second).
type Measure = (&'static str, &'static str, Vec<(i64, f64)>);

fn measures(samples: &[SampleView]) -> Vec<Measure> {
    let each = |f: &dyn Fn(&SampleView) -> Option<f64>| -> Vec<(i64, f64)> {
        samples.iter().filter_map(|s| Some((s.idx, f(s)?))).filter(|(_, v)| v.is_finite()).collect()
    };
    vec![
        ("time to first token (ms)", "ttft_ms", each(&|s| Some(s.ttft_ms))),
        (
            "time per output token (ms)",
            "tpot_ms",
            each(&|s| (s.predicted_n > 0).then(|| s.predicted_ms / s.predicted_n as f64)),
        ),
        ("decode tok/s", "decode_tps", each(&|s| Some(s.predicted_tps))),
        ("prefill tok/s", "prefill_tps", each(&|s| Some(s.prompt_tps))),
    ]
}

/// The percentiles of each measure over the requests that have it.
pub fn rows(samples: &[SampleView]) -> Vec<SpreadRow> {
    measures(samples)
        .into_iter()
        .filter_map(|(label, key, points)| {
            let mut v: Vec<f64> = points.into_iter().map(|(_, x)| x).collect();
            if v.is_empty() {
                return None;
            }
            v.sort_by(f64::total_cmp);
            Some(SpreadRow {
                label,
                key,
                n: v.len(),
                min: v[0],
                p50: quantile(&v, 0.5),
                p90: quantile(&v, 0.9),
                p99: quantile(&v, 0.99),
                max: v[v.len() - 1],
            })
        })
        .collect()
}

/// Every request drawn as a point in the order it ran, with the median as
/// a line, one small plot per measure (their units differ); `None`
/// without requests. Scatter traces only: the quick build of plotly.js
/// draws them.
pub fn figure(samples: &[SampleView]) -> Option<Value> {
    let drawn: Vec<Measure> = measures(samples).into_iter().filter(|m| !m.2.is_empty()).collect();
    if drawn.is_empty() {
        return None;
    }
    let medians: Vec<f64> = rows(samples).iter().map(|r| r.p50).collect();
    let mut layout = json!({
        "showlegend": false,
        "margin": { "l": 60, "r": 20, "t": 20, "b": 40 },
        "grid": { "rows": 1, "columns": drawn.len(), "pattern": "independent" },
        "uirevision": "keep",
    });
    let mut traces = Vec::new();
    for (i, ((label, _, points), median)) in drawn.iter().zip(medians).enumerate() {
        let axis = if i == 0 { String::new() } else { (i + 1).to_string() };
        layout[format!("xaxis{axis}")] =
            json!({ "title": { "text": "request" }, "tickformat": "d", "dtick": 1 });
        layout[format!("yaxis{axis}")] = json!({ "title": { "text": label } });
        let x: Vec<i64> = points.iter().map(|(idx, _)| idx + 1).collect();
        let (first, last) = (x[0], x[x.len() - 1]);
        traces.push(json!({
            "type": "scatter",
            "mode": "markers",
            "name": label,
            "x": x,
            "y": points.iter().map(|(_, v)| *v).collect::<Vec<_>>(),
            "xaxis": format!("x{axis}"),
            "yaxis": format!("y{axis}"),
            "marker": { "color": "#1c7ed6", "size": 7 },
            "hovertemplate": "request %{x}: %{y}<extra></extra>",
        }));
        traces.push(json!({
            "type": "scatter",
            "mode": "lines",
            "name": "median",
            "x": [first, last],
            "y": [median, median],
            "xaxis": format!("x{axis}"),
            "yaxis": format!("y{axis}"),
            "line": { "color": "#868e96", "dash": "dot" },
            "hoverinfo": "skip",
        }));
    }
    Some(json!({ "data": traces, "layout": layout }))
}
