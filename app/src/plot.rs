//! Plots: figures built here as Plotly JSON, drawn in the browser by
//! plotly.js, which the app serves itself (`/pkg/plotly.min.js`, loaded the
//! first time a page draws a plot).

use serde_json::{Value, json};

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

/// Draws `figure` into the element with id `div`; a click on a point calls
/// `on_click` with its trial id. Does nothing on the server.
#[cfg(feature = "hydrate")]
pub fn draw(div: &str, figure: &Value, on_click: &wasm_bindgen::closure::Closure<dyn FnMut(f64)>) {
    let _ = js::draw(div, &figure.to_string(), on_click);
}

/// Starts fetching plotly.js, so it is ready by the time the data is.
#[cfg(feature = "hydrate")]
pub fn preload() {
    js::preload();
}

#[cfg(feature = "hydrate")]
mod js {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(inline_js = r#"
        let loading = null;
        function plotly() {
            if (!loading) {
                loading = new Promise((resolve, reject) => {
                    const s = document.createElement("script");
                    s.src = "/pkg/plotly.min.js";
                    s.onload = () => resolve(window.Plotly);
                    s.onerror = () => reject(new Error("plotly.js could not be loaded"));
                    document.head.appendChild(s);
                });
            }
            return loading;
        }
        export function preload() {
            plotly().catch(() => {});
        }
        export function draw(id, figure, onClick) {
            const fig = JSON.parse(figure);
            return plotly().then((Plotly) => {
                const div = document.getElementById(id);
                if (!div) return;
                return Plotly.react(div, fig.data, fig.layout, { responsive: true, displaylogo: false })
                    .then((gd) => {
                        gd.dataset.drawn = String(fig.data.reduce((n, t) => n + t.x.length, 0));
                        performance.mark("tunebook:plot-drawn");
                        if (gd.dataset.clicks) return;
                        gd.dataset.clicks = "1";
                        gd.on("plotly_click", (ev) => {
                            const p = ev.points && ev.points[0];
                            if (p && p.customdata != null) onClick(Number(p.customdata));
                        });
                    });
            });
        }
    "#)]
    extern "C" {
        pub fn draw(id: &str, figure: &str, on_click: &Closure<dyn FnMut(f64)>) -> js_sys::Promise;
        pub fn preload();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_is_its_own_trace_in_order() {
        let p =
            |id, x, y, on_front| Point { trial_id: id, x, y, on_front, hover: format!("t{id}") };
        let fig = pareto_figure(
            &[p(1, 3.0, 1.0, true), p(2, 1.0, 0.5, true), p(3, 2.0, 2.0, false)],
            "decode tok/s",
            "peak RSS",
        );
        let front = &fig["data"][1];
        assert_eq!(front["name"], "Pareto front");
        assert_eq!(front["x"], json!([1.0, 3.0]), "sorted along x");
        assert_eq!(front["customdata"], json!([2, 1]));
        assert_eq!(fig["data"][0]["customdata"], json!([3]));
        assert_eq!(fig["layout"]["xaxis"]["title"]["text"], "decode tok/s");
    }
}
