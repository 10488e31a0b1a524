//! Figures as Plotly JSON: built here for the server and the pages alike,
//! drawn in the browser by plotly.js, which the app serves itself (two
//! builds, see [`plotly_for`], preloaded by the head of every page that
//! plots and run when the first figure arrives). The drawing side is the
//! app's `plot.rs` and `plot.js`.

use serde_json::{Value, json};

use crate::types::ParetoView;

/// One trial on a two-metric plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub trial_id: i64,
    pub x: f64,
    pub y: f64,
    pub on_front: bool,
    /// What hovering shows: the configuration.
    pub hover: String,
}

/// The Pareto plot: the front highlighted and joined, the dominated points
/// faded; each point carries its trial id for clicks.
pub fn pareto_figure(points: &[Point], x_title: &str, y_title: &str) -> Value {
    // WebGL only where SVG would be slow: it needs a GPU or its emulation.
    let kind = if points.len() > 1000 { "scattergl" } else { "scatter" };
    let trace = |on_front: bool| {
        let mut chosen: Vec<&Point> = points.iter().filter(|p| p.on_front == on_front).collect();
        if on_front {
            chosen.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        json!({
            "type": kind,
            "mode": if on_front { "lines+markers" } else { "markers" },
            "name": if on_front { "Pareto front" } else { "dominated" },
            "x": chosen.iter().map(|p| p.x).collect::<Vec<_>>(),
            "y": chosen.iter().map(|p| p.y).collect::<Vec<_>>(),
            "customdata": chosen.iter().map(|p| p.trial_id).collect::<Vec<_>>(),
            "text": chosen.iter().map(|p| p.hover.as_str()).collect::<Vec<_>>(),
            "hovertemplate": "trial %{customdata}<br>%{text}<br>%{x}, %{y}<extra></extra>",
            "marker": if on_front {
                json!({ "size": 10, "color": "#d9480f" })
            } else {
                json!({ "size": 7, "color": "#868e96", "opacity": 0.45 })
            },
            "line": { "color": "#d9480f", "shape": "hv" },
        })
    };
    json!({
        "data": [trace(false), trace(true)],
        "layout": {
            "xaxis": { "title": { "text": x_title } },
            "yaxis": { "title": { "text": y_title } },
            "hovermode": "closest",
            "margin": { "l": 70, "r": 20, "t": 20, "b": 60 },
            "legend": { "orientation": "h" },
            // Zoom and pan survive new points arriving.
            "uirevision": "keep",
        },
    })
}

/// A study's Pareto plot: two metrics as [`pareto_figure`], three as
/// [`pareto3_figure`], and one (a study of one objective, where the front
/// is the best trial) as each trial in the order it ran with the best so
/// far ([`best_so_far_figure`]); `label` names a metric. Returns the points
/// drawn and the figure.
pub fn pareto_plot(view: &ParetoView, label: &dyn Fn(&str) -> String) -> (usize, Value) {
    let p = view;
    if let [metric] = p.metrics.as_slice() {
        let mut points: Vec<(i64, f64)> =
            p.points.iter().filter_map(|pt| Some((pt.trial_id, *pt.values.first()?))).collect();
        points.sort_by_key(|(id, _)| *id);
        let maximize = p.goals.first().is_none_or(|g| g == "max");
        return (points.len(), best_so_far_figure(&points, maximize, &label(metric)));
    }
    if p.metrics.len() >= 3 {
        let points: Vec<(i64, [f64; 3], bool, String)> = p
            .points
            .iter()
            .filter(|pt| pt.values.len() >= 3)
            .map(|pt| {
                let v = [pt.values[0], pt.values[1], pt.values[2]];
                (pt.trial_id, v, pt.on_front, pt.differs.clone())
            })
            .collect();
        let titles = [label(&p.metrics[0]), label(&p.metrics[1]), label(&p.metrics[2])];
        return (points.len(), pareto3_figure(&points, [&titles[0], &titles[1], &titles[2]]));
    }
    let points: Vec<Point> = p
        .points
        .iter()
        .filter(|pt| pt.values.len() >= 2)
        .map(|pt| Point {
            trial_id: pt.trial_id,
            x: pt.values[0],
            y: pt.values[1],
            on_front: pt.on_front,
            hover: if pt.differs.is_empty() { "the baseline".into() } else { pt.differs.clone() },
        })
        .collect();
    let (x, y) = match p.metrics.as_slice() {
        [x, y, ..] => (label(x), label(y)),
        _ => Default::default(),
    };
    (points.len(), pareto_figure(&points, &x, &y))
}

/// Where study `id`'s Pareto figure is read from: on its objectives (the
/// address a study page's head preloads, see [`preload_for`]), or on
/// chosen `metrics` for one class of `machine` ("": the first).
pub fn figure_url(id: i64, metrics: Option<&[String]>, machine: &str) -> String {
    let base = format!("/api/studies/{id}/pareto/figure");
    let Some(metrics) = metrics else { return base };
    let metrics: Vec<&str> = metrics.iter().map(String::as_str).filter(|m| !m.is_empty()).collect();
    let query = serde_urlencoded::to_string([
        ("metrics", metrics.join(",").as_str()),
        ("machine", machine),
    ])
    .expect("text pairs encode");
    format!("{base}?{query}")
}

/// What the page at `path` should start fetching from its head: a study
/// page's Pareto figure, so that it arrives while the app hydrates.
pub fn preload_for(path: &str) -> Option<String> {
    let id = path.strip_prefix("/studies/")?.parse::<i64>().ok()?;
    Some(figure_url(id, None, ""))
}

/// The order to show a setting's values in: numerically when every value
/// is a number; cache and weight types by precision, the finest first
/// (f32, f16, bf16, q8_0, … q4_0); else as text; the engine's default
/// (`""`) first.
pub fn value_order(values: &[String]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    let given = || values.iter().filter(|v| !v.is_empty());
    let numbers: Option<Vec<f64>> = given().map(|v| v.parse().ok()).collect();
    let types: Option<Vec<f64>> = given().map(|v| precision(v)).collect();
    let key = |i: &usize| values[*i].parse::<f64>().unwrap_or(f64::NEG_INFINITY);
    let finest = |i: &usize| precision(&values[*i]).unwrap_or(f64::INFINITY);
    match (numbers, types) {
        (Some(_), _) => order.sort_by(|a, b| key(a).total_cmp(&key(b))),
        (None, Some(_)) => order.sort_by(|a, b| finest(b).total_cmp(&finest(a))),
        (None, None) => order.sort_by(|a, b| values[*a].cmp(&values[*b])),
    }
    order
}

/// About how many bits a number of a cache or weight type keeps (`q5_1`
/// a little more than `q5_0`, `bf16` a little less than `f16`); `None` for
/// anything else.
fn precision(value: &str) -> Option<f64> {
    match value {
        "f32" => return Some(32.0),
        "f16" => return Some(16.0),
        "bf16" => return Some(15.9),
        _ => {}
    }
    let (bits, rest) = if let Some(rest) = value.strip_prefix("iq") {
        let (bits, rest) = rest.split_once('_')?;
        (bits, if rest.is_empty() { None } else { Some(0.05) })
    } else {
        let rest = value.strip_prefix('q')?;
        let (bits, kind) = rest.split_once('_')?;
        (bits, Some(kind.parse::<f64>().ok()? / 10.0))
    };
    Some(bits.parse::<f64>().ok()? + rest?)
}

/// How a setting's value is labelled on a plot.
fn value_label(value: &str) -> &str {
    if value.is_empty() { "default" } else { value }
}

/// A setting's effect on a metric: one box per value (median, quartiles,
/// whiskers: the spread), with every trial as a point up to 2,000 trials
/// (beyond, only the outliers: SVG points by the ten thousand would stall
/// the page); `points` are (trial id, value index, metric).
pub fn effect_figure(
    values: &[String],
    points: &[(i64, u32, f64)],
    setting: &str,
    metric: &str,
) -> Value {
    let data: Vec<Value> = value_order(values)
        .into_iter()
        .map(|v| {
            let chosen: Vec<&(i64, u32, f64)> =
                points.iter().filter(|p| p.1 as usize == v).collect();
            let label = value_label(&values[v]);
            json!({
                "type": "box",
                "name": label,
                "x": chosen.iter().map(|_| label).collect::<Vec<_>>(),
                "y": chosen.iter().map(|p| p.2).collect::<Vec<_>>(),
                "customdata": chosen.iter().map(|p| p.0).collect::<Vec<_>>(),
                "boxpoints": if points.len() <= 2000 { "all" } else { "outliers" },
                "jitter": 0.4,
                "pointpos": 0,
                "marker": { "size": 5, "opacity": 0.6, "color": "#1c7ed6" },
                "line": { "color": "#495057" },
                "hovertemplate": "trial %{customdata}<br>%{y}<extra></extra>",
            })
        })
        .collect();
    json!({
        "data": data,
        "layout": {
            "xaxis": { "title": { "text": setting }, "type": "category" },
            "yaxis": { "title": { "text": metric } },
            "showlegend": false,
            "margin": { "l": 70, "r": 20, "t": 20, "b": 60 },
            "uirevision": "keep",
        },
    })
}

/// Every trial's value in the order they ran, and the best so far as a
/// step line; `points` are (trial id, metric) in trial order.
pub fn best_so_far_figure(points: &[(i64, f64)], maximize: bool, metric: &str) -> Value {
    let mut best: Option<f64> = None;
    let running: Vec<f64> = points
        .iter()
        .map(|(_, v)| {
            let b = match best {
                Some(b) if (maximize && b >= *v) || (!maximize && b <= *v) => b,
                _ => *v,
            };
            best = Some(b);
            b
        })
        .collect();
    let n: Vec<usize> = (1..=points.len()).collect();
    let kind = if points.len() > 1000 { "scattergl" } else { "scatter" };
    // Counts of trials: whole numbers, a tick each while they are few.
    let mut x_axis = json!({ "title": { "text": "trials finished" }, "tickformat": "d" });
    if points.len() <= 12 {
        x_axis["dtick"] = json!(1);
    }
    json!({
        "data": [
            {
                "type": kind,
                "mode": "markers",
                "name": "trial",
                "x": n,
                "y": points.iter().map(|p| p.1).collect::<Vec<_>>(),
                "customdata": points.iter().map(|p| p.0).collect::<Vec<_>>(),
                "marker": { "size": 6, "color": "#868e96", "opacity": 0.5 },
                "hovertemplate": "trial %{customdata}<br>%{y}<extra></extra>",
            },
            {
                "type": kind,
                "mode": "lines",
                "name": "best so far",
                "x": n,
                "y": running,
                "line": { "color": "#d9480f", "shape": "hv", "width": 2 },
                "hoverinfo": "skip",
            },
        ],
        "layout": {
            "xaxis": x_axis,
            "yaxis": { "title": { "text": metric } },
            "legend": { "orientation": "h" },
            "margin": { "l": 70, "r": 20, "t": 20, "b": 60 },
            "uirevision": "keep",
        },
    })
}

/// Parallel coordinates: one axis per varied setting (numbers on a number
/// axis, words as ticks) and one for the metric, each trial a line coloured
/// by the metric; `configs[i]` indexes each setting's values for
/// `metric[i]`.
pub fn parallel_figure(
    settings: &[(String, Vec<String>)],
    configs: &[Vec<u32>],
    metric: &[f64],
    metric_title: &str,
) -> Value {
    let mut dimensions: Vec<Value> = settings
        .iter()
        .enumerate()
        .map(|(s, (name, values))| {
            let numbers: Option<Vec<f64>> = values.iter().map(|v| v.parse().ok()).collect();
            match numbers {
                Some(numbers) => json!({
                    "label": name,
                    "values": configs.iter().map(|c| numbers[c[s] as usize]).collect::<Vec<_>>(),
                }),
                None => {
                    let order = value_order(values);
                    // Position on the axis of each value index.
                    let mut rank = vec![0usize; values.len()];
                    for (r, v) in order.iter().enumerate() {
                        rank[*v] = r;
                    }
                    json!({
                        "label": name,
                        "values": configs.iter().map(|c| rank[c[s] as usize]).collect::<Vec<_>>(),
                        "tickvals": (0..values.len()).collect::<Vec<_>>(),
                        "ticktext": order.iter().map(|v| value_label(&values[*v])).collect::<Vec<_>>(),
                    })
                }
            }
        })
        .collect();
    dimensions.push(json!({ "label": metric_title, "values": metric }));
    json!({
        "data": [{
            "type": "parcoords",
            "dimensions": dimensions,
            "line": { "color": metric, "colorscale": "Viridis", "showscale": true },
        }],
        "layout": { "margin": { "l": 80, "r": 80, "t": 50, "b": 30 }, "uirevision": "keep" },
    })
}

/// Speed against context depth from a measurement's `depth` points (as
/// stored: `[{depth, decode_tps: {median, p10, p90}, prefill_tps, …}]`):
/// the median with its 10th–90th percentile spread, decode and prefill on
/// their own axes. `None` when nothing was measured at depth.
pub fn depth_figure(depth: &Value) -> Option<Value> {
    let points: Vec<&Value> = depth.as_array()?.iter().filter(|p| p["skipped"].is_null()).collect();
    if points.is_empty() {
        return None;
    }
    let trace = |key: &str, name: &str, axis: &str, color: &str| {
        let stat = |s: &str| points.iter().map(|p| p[key][s].as_f64()).collect::<Vec<_>>();
        let (median, p10, p90) = (stat("median"), stat("p10"), stat("p90"));
        let plus: Vec<Option<f64>> =
            p90.iter().zip(&median).map(|(h, m)| Some(h.as_ref()? - m.as_ref()?)).collect();
        let minus: Vec<Option<f64>> =
            median.iter().zip(&p10).map(|(m, l)| Some(m.as_ref()? - l.as_ref()?)).collect();
        json!({
            "type": "scatter",
            "mode": "lines+markers",
            "name": name,
            "yaxis": axis,
            "x": points.iter().map(|p| p["depth"].as_u64()).collect::<Vec<_>>(),
            "y": median,
            "error_y": { "type": "data", "symmetric": false, "array": plus, "arrayminus": minus },
            "line": { "color": color },
        })
    };
    Some(json!({
        "data": [
            trace("decode_tps", "decode tok/s", "y", "#d9480f"),
            trace("prefill_tps", "prefill tok/s", "y2", "#1c7ed6"),
        ],
        "layout": {
            "xaxis": { "title": { "text": "context depth (tokens already in the context)" } },
            "yaxis": { "title": { "text": "decode tok/s" }, "rangemode": "tozero" },
            "yaxis2": {
                "title": { "text": "prefill tok/s" },
                "overlaying": "y", "side": "right", "rangemode": "tozero",
            },
            "legend": { "orientation": "h" },
            "margin": { "l": 70, "r": 70, "t": 20, "b": 60 },
        },
    }))
}

/// The three-objective view: points in 3D, the front highlighted, the
/// dominated faded; `points` are (trial id, [x, y, z], on the front, hover).
pub fn pareto3_figure(points: &[(i64, [f64; 3], bool, String)], titles: [&str; 3]) -> Value {
    let trace = |on_front: bool| {
        let chosen: Vec<&(i64, [f64; 3], bool, String)> =
            points.iter().filter(|p| p.2 == on_front).collect();
        let axis = |i: usize| chosen.iter().map(|p| p.1[i]).collect::<Vec<_>>();
        json!({
            "type": "scatter3d",
            "mode": "markers",
            "name": if on_front { "Pareto front" } else { "dominated" },
            "x": axis(0),
            "y": axis(1),
            "z": axis(2),
            "customdata": chosen.iter().map(|p| p.0).collect::<Vec<_>>(),
            "text": chosen.iter().map(|p| p.3.as_str()).collect::<Vec<_>>(),
            "hovertemplate": "trial %{customdata}<br>%{text}<br>%{x}, %{y}, %{z}<extra></extra>",
            "marker": if on_front {
                json!({ "size": 5, "color": "#d9480f" })
            } else {
                json!({ "size": 3, "color": "#868e96", "opacity": 0.4 })
            },
        })
    };
    let title = |t: &str| json!({ "title": { "text": t } });
    json!({
        "data": [trace(false), trace(true)],
        "layout": {
            "scene": { "xaxis": title(titles[0]), "yaxis": title(titles[1]), "zaxis": title(titles[2]) },
            "margin": { "l": 0, "r": 0, "t": 20, "b": 0 },
            "legend": { "orientation": "h" },
            "uirevision": "keep",
        },
    })
}

/// plotly.js's whole library, as the app serves it.
pub const PLOTLY_WHOLE: &str = "/pkg/plotly.min.js";
/// plotly.js's partial bundle of 2D traces (`scatter`, `scattergl`,
/// `splom`, `parcoords`): a third the size of the whole, and as much
/// quicker to start on a first visit. Figures of other traces (box plots,
/// 3D) are drawn by the whole library, fetched when the first is drawn.
pub const PLOTLY_PARTIAL: &str = "/pkg/plotly-gl2d.min.js";

/// Which build of plotly.js the page at `path` draws with, if it plots:
/// its head then preloads it, so the browser has it by the time the first
/// figure arrives. It runs only then (it takes the browser's main thread
/// for a while on a first visit): the page hydrates first. Study and trial
/// pages start with 2D plots; reports may hold any.
pub fn plotly_for(path: &str) -> Option<&'static str> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let under = |prefix: &str| path.strip_prefix(prefix).is_some_and(|rest| !rest.is_empty());
    if (under("/studies/") && path != "/studies/new") || under("/trials/") {
        Some(PLOTLY_PARTIAL)
    } else if under("/reports/") || under("/share/") {
        Some(PLOTLY_WHOLE)
    } else {
        None
    }
}
