//! A report exported: as markdown, or as one HTML file that needs no
//! network (the stylesheet and plotly.js inlined, each plot drawn from its
//! figure, nothing in a figure able to end its script).

use serde_json::Value;
use tunebook_views::types::ReportView;

/// JSON to put inside a `<script>`: nothing in it can end the element.
fn script_json(v: &Value) -> String {
    serde_json::to_string(v)
        .expect("serializes")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The report as one HTML file that needs no network: the stylesheet and
/// plotly.js inlined, each plot drawn from its figure.
pub fn export_html(view: &ReportView, plotly_js: &str) -> String {
    let escape = |s: &str| ammonia::clean_text(s);
    let mut body = String::new();
    let mut figures = serde_json::Map::new();
    for (i, c) in view.cells.iter().enumerate() {
        body.push_str("<section class=\"cell\">\n");
        if let Some(f) = &c.figure {
            let id = format!("plot-{i}");
            body.push_str(&format!("<div id=\"{id}\" class=\"plot\"></div>\n"));
            figures.insert(id, f.clone());
        }
        body.push_str(&c.html);
        body.push_str("</section>\n");
    }
    // plotly.js's own source may hold "</script" in a string: split it.
    let plotly = plotly_js.replace("</script", "<\\/script");
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<style>\n{css}\n</style>\n<script>{plotly}</script>\n</head>\n<body>\n<main class=\"report\">\n<p class=\"muted\">{title} · version {version} · study {study}</p>\n{body}</main>\n<script>\nconst figures = {figures};\nfor (const [id, f] of Object.entries(figures)) {{\n  Plotly.newPlot(id, f.data, f.layout, {{ responsive: true, displaylogo: false }});\n}}\n</script>\n</body>\n</html>\n",
        title = escape(&view.title),
        css = include_str!("../../../style/main.css"),
        version = view.version,
        study = escape(&view.study_name),
        figures = script_json(&Value::Object(figures)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunebook_views::types::{Notebook, RenderedCell};

    use super::super::draft::tests::md;

    #[test]
    fn nothing_in_a_figure_can_end_its_script() {
        let figure = serde_json::json!({ "text": "</script><script>alert(1)</script> & \u{2028}" });
        let text = script_json(&figure);
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, figure, "still the same JSON");
    }

    #[test]
    fn an_export_carries_its_plots_and_no_injected_script() {
        let cell = |i: usize, html: &str, figure: Option<Value>| RenderedCell {
            cell: md(&format!("c{i}"), None, ""),
            html: html.into(),
            figure,
        };
        let view = ReportView {
            id: 1,
            study_id: 1,
            study_name: "<script>alert('study')</script>".into(),
            title: "</title><script>alert('title')</script>".into(),
            version: 3,
            latest: 3,
            notebook: Notebook::default(),
            cells: vec![
                cell(
                    0,
                    &crate::markdown::to_safe_html("<script>alert('cell')</script>\n\n**kept**"),
                    None,
                ),
                cell(
                    1,
                    "<p>fig</p>",
                    Some(
                        serde_json::json!({ "data": [{ "text": ["</script><img src=x onerror=alert(1)>"] }], "layout": {} }),
                    ),
                ),
            ],
            versions: vec![],
            shares: vec![],
            writer: false,
        };
        let html = export_html(&view, "window.Plotly = {}; /* </script> */");
        assert!(html.contains("<strong>kept</strong>"));
        assert!(html.contains("id=\"plot-1\""), "the plot has its place");
        assert!(!html.contains("alert('"), "{html}");
        // Two script elements: plotly.js and the one drawing the plots.
        assert_eq!(html.matches("<script>").count(), 2, "{html}");
        assert_eq!(html.matches("</script>").count(), 2, "{html}");
    }
}
