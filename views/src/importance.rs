//! Each setting's importance on one metric, drawn: its furthest change
//! against the baseline with its interval (95 % for an effect, 90 % for a
//! "no effect", the equivalence test's), the "no effect" margin as
//! a band, and what is not determined yet marked as such at zero, never as
//! a small effect.

use serde_json::{Value, json};

use crate::types::ImportanceView;

/// The figure of `view`, the largest change at the top.
pub fn figure(view: &ImportanceView) -> Value {
    // Plotly draws categories from the bottom: the first row goes last.
    let rows: Vec<_> = view.rows.iter().rev().collect();
    let trace = |verdict: &str, name: &str, color: &str| {
        let chosen: Vec<_> = rows.iter().filter(|r| r.verdict == verdict).collect();
        let est: Vec<f64> = chosen.iter().map(|r| r.est.unwrap_or(0.0)).collect();
        let plus: Vec<f64> =
            chosen.iter().map(|r| r.hi.zip(r.est).map_or(0.0, |(h, e)| h - e)).collect();
        let minus: Vec<f64> =
            chosen.iter().map(|r| r.est.zip(r.lo).map_or(0.0, |(e, l)| e - l)).collect();
        let text: Vec<String> = chosen
            .iter()
            .map(|r| match (r.verdict.as_str(), r.value.as_str()) {
                ("open", _) => "not determined yet".to_string(),
                (_, "") => "the engine's default".to_string(),
                (_, v) => format!("at {v}"),
            })
            .collect();
        json!({
            "type": "scatter",
            "mode": "markers",
            "orientation": "h",
            "name": name,
            "x": est,
            "y": chosen.iter().map(|r| r.setting.as_str()).collect::<Vec<_>>(),
            "text": text,
            "error_x": { "type": "data", "symmetric": false, "array": plus, "arrayminus": minus,
                         "visible": verdict != "open", "color": color },
            "marker": { "color": color, "size": 10,
                        "symbol": if verdict == "open" { "circle-open" } else { "circle" } },
            "hovertemplate": "%{y} %{text}: %{x}<extra></extra>",
        })
    };
    let unit = if view.unit.is_empty() { String::new() } else { format!(" ({})", view.unit) };
    let shapes: Vec<Value> = view
        .margin
        .filter(|m| *m > 0.0)
        .map(|m| {
            json!({ "type": "rect", "xref": "x", "yref": "paper", "x0": -m, "x1": m, "y0": 0, "y1": 1,
                    "fillcolor": "#adb5bd", "opacity": 0.2, "line": { "width": 0 } })
        })
        .into_iter()
        .collect();
    json!({
        "data": [
            trace("effect", "changes it", "#d9480f"),
            trace("no_effect", "no effect, within the margin", "#495057"),
            trace("open", "not determined yet", "#868e96"),
        ],
        "layout": {
            "xaxis": { "title": { "text": format!("{} against the baseline{unit}", view.label) },
                       "zeroline": true },
            "yaxis": { "type": "category", "automargin": true },
            "shapes": shapes,
            // Above the plot: below, it would sit on the axis's title.
            "legend": { "orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom" },
            "margin": { "l": 120, "r": 20, "t": 40, "b": 50 },
            "height": 140 + 32 * view.rows.len().max(1),
            "uirevision": "keep",
        },
    })
}
