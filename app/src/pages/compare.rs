//! Trials side by side (`/compare?trials=3,7,12`): every setting any of
//! them set, the rows where they differ marked, and every metric with the
//! best value marked and each one's change from the first trial.

use std::collections::BTreeSet;

use leptos::prelude::*;

use super::{error_text, fmt_metric};
use crate::types::TrialView;

/// The most trials one comparison shows.
#[cfg_attr(feature = "hydrate", allow(dead_code))]
pub const MOST: usize = 12;

/// Metrics compared, their labels, and whether more is better.
const METRICS: &[(&str, &str, bool)] = &[
    ("decode_tps", "decode tok/s", true),
    ("prefill_tps", "prefill tok/s", true),
    ("ttft_ms", "time to first token (ms)", false),
    ("load_ms", "load time (ms)", false),
    ("peak_rss_bytes", "peak RSS", false),
    ("peak_gpu_bytes", "peak GPU memory", false),
    ("quality_score", "quality", true),
    ("context_pass_rate", "context recall", true),
    ("pct_of_ceiling", "% of the bandwidth ceiling", true),
    ("perplexity", "perplexity", false),
];

/// The trials' ids in `text` (`3,7,12`), at most [`MOST`].
#[cfg_attr(feature = "hydrate", allow(dead_code))]
pub fn parse_ids(text: &str) -> Result<Vec<i64>, String> {
    let ids: Vec<i64> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| format!("`{s}` is not a trial number")))
        .collect::<Result<_, _>>()?;
    match ids.len() {
        0 => Err("no trials to compare: pick some in a study's table".into()),
        n if n > MOST => Err(format!("{n} trials: at most {MOST} can be compared at once")),
        _ => Ok(ids),
    }
}

#[server]
pub async fn compare_trials(ids: String) -> Result<Vec<TrialView>, ServerFnError> {
    let backend = super::backend()?;
    let mut out = Vec::new();
    for id in parse_ids(&ids).map_err(ServerFnError::new)? {
        out.push(backend.trial_detail(id).await.map_err(ServerFnError::new)?.trial);
    }
    Ok(out)
}

/// One setting across the trials (`None`: left to the engine).
#[derive(Debug, Clone, PartialEq)]
pub struct SettingRow {
    pub name: String,
    pub values: Vec<Option<String>>,
    pub differs: bool,
}

/// One metric across the trials, the best marked, each one's change from
/// the first trial in percent.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    pub metric: &'static str,
    pub label: &'static str,
    pub values: Vec<Option<f64>>,
    pub best: Option<usize>,
    pub change_pct: Vec<Option<f64>>,
}

/// The rows of a comparison: settings (those that differ first), then the
/// metrics any of the trials measured.
pub fn comparison(trials: &[TrialView]) -> (Vec<SettingRow>, Vec<MetricRow>) {
    let names: BTreeSet<&String> = trials.iter().flat_map(|t| t.settings.keys()).collect();
    let mut settings: Vec<SettingRow> = names
        .into_iter()
        .map(|name| {
            let values: Vec<Option<String>> =
                trials.iter().map(|t| t.settings.get(name).cloned()).collect();
            let differs = values.iter().any(|v| *v != values[0]);
            SettingRow { name: name.clone(), values, differs }
        })
        .collect();
    settings.sort_by_key(|r| !r.differs);
    let metrics = METRICS
        .iter()
        .filter_map(|&(metric, label, more_is_better)| {
            let values: Vec<Option<f64>> = trials.iter().map(|t| t.metric(metric)).collect();
            if values.iter().all(Option::is_none) {
                return None;
            }
            let oriented = |v: f64| if more_is_better { v } else { -v };
            let best = (values.iter().flatten().count() > 1)
                .then(|| {
                    values
                        .iter()
                        .enumerate()
                        .filter_map(|(i, v)| Some((i, oriented((*v)?))))
                        .max_by(|a, b| a.1.total_cmp(&b.1))
                        .map(|(i, _)| i)
                })
                .flatten();
            let change_pct = values
                .iter()
                .map(|v| match (values[0], *v) {
                    (Some(first), Some(v)) if first != 0.0 => Some((v / first - 1.0) * 100.0),
                    _ => None,
                })
                .collect();
            Some(MetricRow { metric, label, values, best, change_pct })
        })
        .collect();
    (settings, metrics)
}

#[component]
pub fn ComparePage() -> impl IntoView {
    let query = leptos_router::hooks::use_query_map();
    let ids = move || query.with(|q| q.get("trials").unwrap_or_default());
    let trials = Resource::new(ids, compare_trials);
    view! {
        <main class="compare">
            <h1>"Trials side by side"</h1>
            <Transition fallback=|| view! { <p class="muted">"Loading the trials…"</p> }>
                {move || Suspend::new(async move {
                    match trials.await {
                        Ok(t) => view! { <CompareTable trials=t /> }.into_any(),
                        Err(e) => view! { <p class="error" id="compare-error">{error_text(&e)}</p> }.into_any(),
                    }
                })}
            </Transition>
        </main>
    }
}

#[component]
fn CompareTable(trials: Vec<TrialView>) -> impl IntoView {
    let (settings, metrics) = comparison(&trials);
    let header = trials
        .iter()
        .map(|t| {
            let study = t.study_id.map(|s| format!(" (study {s})")).unwrap_or_default();
            view! {
                <th><a href=format!("/trials/{}", t.id)>{format!("trial {}", t.id)}</a>
                    <span class="muted">{study}</span><br/>
                    <span class=format!("state state-{}", t.state.as_str())>{t.state.as_str()}</span>
                </th>
            }
        })
        .collect_view();
    let setting_rows = settings
        .into_iter()
        .map(|row| {
            view! {
                <tr class:differs=row.differs data-setting=row.name.clone()>
                    <th>{row.name.clone()}</th>
                    {row.values.into_iter().map(|v| match v {
                        Some(v) => view! { <td>{v}</td> }.into_any(),
                        None => view! { <td class="muted">"default"</td> }.into_any(),
                    }).collect_view()}
                </tr>
            }
        })
        .collect_view();
    let metric_rows = metrics
        .into_iter()
        .map(|row| {
            let cells = row
                .values
                .iter()
                .zip(&row.change_pct)
                .enumerate()
                .map(|(i, (v, change))| {
                    let change = match change {
                        Some(c) if i > 0 => format!(" ({c:+.1} %)"),
                        _ => String::new(),
                    };
                    view! {
                        <td class="num" class:best=row.best == Some(i)>
                            {fmt_metric(row.metric, *v)}<span class="muted">{change}</span>
                        </td>
                    }
                })
                .collect_view();
            view! { <tr data-metric=row.metric><th>{row.label}</th>{cells}</tr> }
        })
        .collect_view();
    view! {
        <table class="rows compare" id="compare">
            <thead><tr><th></th>{header}</tr></thead>
            <tbody>
                <tr class="group"><th colspan="99">"Settings (rows that differ first, marked)"</th></tr>
                {setting_rows}
                <tr class="group"><th colspan="99">"Measured (best marked; change from the first trial)"</th></tr>
                {metric_rows}
            </tbody>
        </table>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TrialState;

    fn trial(id: i64, pairs: &[(&str, &str)], decode: f64, rss: i64) -> TrialView {
        let settings = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TrialView {
            id,
            decode_tps: Some(decode),
            peak_rss_bytes: Some(rss),
            ..TrialView::new("p", "m", settings, TrialState::Done)
        }
    }

    #[test]
    fn differing_settings_first_and_the_best_marked_per_goal() {
        let a = trial(1, &[("threads", "2"), ("ctx_size", "4096")], 10.0, 200);
        let b = trial(2, &[("threads", "4"), ("ctx_size", "4096"), ("mlock", "true")], 12.5, 100);
        let (settings, metrics) = comparison(&[a, b]);
        let names: Vec<(&str, bool)> =
            settings.iter().map(|r| (r.name.as_str(), r.differs)).collect();
        assert_eq!(names, [("mlock", true), ("threads", true), ("ctx_size", false)]);
        assert_eq!(settings[0].values, [None, Some("true".to_string())]);
        let decode = metrics.iter().find(|m| m.metric == "decode_tps").unwrap();
        assert_eq!(decode.best, Some(1));
        assert_eq!(decode.change_pct[1], Some(25.0));
        let rss = metrics.iter().find(|m| m.metric == "peak_rss_bytes").unwrap();
        assert_eq!(rss.best, Some(1), "less memory is better");
        assert!(metrics.iter().all(|m| m.metric != "quality_score"), "nothing measured: no row");
    }

    #[test]
    fn ids_are_checked() {
        assert_eq!(parse_ids("3, 7,12").unwrap(), [3, 7, 12]);
        assert!(parse_ids("3,x").unwrap_err().contains("`x` is not a trial number"));
        assert!(parse_ids("").unwrap_err().contains("no trials"));
        let many = (1..=13).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        assert!(parse_ids(&many).unwrap_err().contains("at most 12"));
    }
}
