//! Trials side by side (`/compare?trials=3,7,12`): every setting any of
//! them set, the rows where they differ marked, and every metric with the
//! best value marked and each one's change from the first trial.
//!
//! Two studies side by side (`/compare?studies=1,2&metric=decode_tps`):
//! the configurations both ran (two engines or two builds on the same
//! space, say), one metric each, and the change from the first study.

use std::collections::{BTreeMap, BTreeSet};

use leptos::prelude::*;

#[cfg(feature = "ssr")]
use super::{answer, ops, service};
use super::{changes, error_text, fmt_metric};
use crate::types::{Goal, Metric, MetricPoint, TrialView};

/// The most trials one comparison shows.
#[cfg_attr(feature = "hydrate", allow(dead_code))]
pub const MOST: usize = 12;

/// Metrics compared, their labels, and whether more is better: all but
/// the drop in available memory, which tells of the rest of the machine
/// as much as of the trial.
fn metrics() -> Vec<(&'static str, &'static str, bool)> {
    Metric::ALL
        .into_iter()
        .filter(|m| *m != Metric::MemAvailableDropBytes)
        .map(|m| (m.name(), m.short_label(), m.natural_goal() == Goal::Max))
        .collect()
}

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
    let service = service()?;
    let mut out = Vec::new();
    for id in answer(parse_ids(&ids).map_err(tunebook_core::Error::BadRequest))? {
        out.push(answer(ops::trials::detail(&service, id).await)?.trial);
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
/// the first trial on the metric's scale (see [`super::changes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    pub metric: &'static str,
    pub label: &'static str,
    pub values: Vec<Option<f64>>,
    pub best: Option<usize>,
    pub change: Vec<Option<f64>>,
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
    let metrics = metrics()
        .into_iter()
        .filter_map(|(metric, label, more_is_better)| {
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
            let change =
                values.iter().map(|v| changes::change(metric, values[0]?, (*v)?)).collect();
            Some(MetricRow { metric, label, values, best, change })
        })
        .collect();
    (settings, metrics)
}

/// A configuration both studies ran, one metric each (means where a
/// study ran it more than once), and the change from the first.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SharedRow {
    pub settings: BTreeMap<String, String>,
    pub trials: [i64; 2],
    pub values: [f64; 2],
    /// On the metric's scale (see [`super::changes`]).
    pub change: Option<f64>,
}

/// Two studies joined on their configurations.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StudyComparison {
    pub studies: [i64; 2],
    pub names: [String; 2],
    pub metric: String,
    pub rows: Vec<SharedRow>,
    /// Configurations only one of them ran.
    pub only: [usize; 2],
    /// Settings each study held at one value, a different one in each (the
    /// difference between the studies): name, first value, second value
    /// (`None`: left to the engine).
    pub held: Vec<(String, Option<String>, Option<String>)>,
}

/// Joins two studies' points on their configurations, leaving out the
/// settings each study held at its own value (`threads` 2 in one, 1 in the
/// other): those are what is being compared, and are returned.
#[allow(clippy::type_complexity)]
#[cfg_attr(feature = "hydrate", allow(dead_code))]
pub fn join_studies(
    metric: &str,
    a: &[MetricPoint],
    b: &[MetricPoint],
) -> (Vec<SharedRow>, [usize; 2], Vec<(String, Option<String>, Option<String>)>) {
    let names: BTreeSet<&String> = a.iter().chain(b).flat_map(|p| p.settings.keys()).collect();
    // The one value a side gives a setting, if it gives only one.
    let held = |points: &[MetricPoint], name: &str| -> Option<Option<String>> {
        let first = points.first()?.settings.get(name);
        points.iter().all(|p| p.settings.get(name) == first).then(|| first.cloned())
    };
    let differ: Vec<(String, Option<String>, Option<String>)> = names
        .into_iter()
        .filter_map(|n| match (held(a, n), held(b, n)) {
            (Some(x), Some(y)) if x != y => Some((n.clone(), x, y)),
            _ => None,
        })
        .collect();
    type Side = BTreeMap<BTreeMap<String, String>, (i64, f64, usize)>;
    let side = |points: &[MetricPoint]| {
        let mut by: Side = BTreeMap::new();
        for p in points {
            let mut key = p.settings.clone();
            key.retain(|k, _| !differ.iter().any(|d| d.0 == *k));
            let e = by.entry(key).or_insert((p.trial_id, 0.0, 0));
            e.1 += p.value;
            e.2 += 1;
        }
        by
    };
    let (a, b) = (side(a), side(b));
    let rows: Vec<SharedRow> = a
        .iter()
        .filter_map(|(settings, (ta, sa, na))| {
            let (tb, sb, nb) = b.get(settings)?;
            let values = [sa / *na as f64, sb / *nb as f64];
            let change = changes::change(metric, values[0], values[1]);
            Some(SharedRow { settings: settings.clone(), trials: [*ta, *tb], values, change })
        })
        .collect();
    let only = [a.len() - rows.len(), b.len() - rows.len()];
    (rows, only, differ)
}

/// `ids`: two study numbers (`1,2`).
#[server]
pub async fn compare_studies(
    ids: String,
    metric: String,
) -> Result<StudyComparison, ServerFnError> {
    let ids: Result<Vec<i64>, String> = ids
        .split(',')
        .map(|s| s.trim().parse().map_err(|_| format!("`{s}` is not a study number")))
        .collect();
    let ids: Vec<i64> = answer(ids.map_err(tunebook_core::Error::BadRequest))?;
    let [a, b] = ids[..] else {
        let refused =
            tunebook_core::Error::BadRequest("pick exactly two studies to compare".into());
        return answer(Err(refused));
    };
    let service = service()?;
    let name = async |id| answer(ops::studies::view(&service, id).await).map(|s| s.summary.name);
    let names = [name(a).await?, name(b).await?];
    let pa = answer(ops::studies::metric_points(&service.db, a, &metric).await)?;
    let pb = answer(ops::studies::metric_points(&service.db, b, &metric).await)?;
    let (rows, only, held) = join_studies(&metric, &pa, &pb);
    Ok(StudyComparison { studies: [a, b], names, metric, rows, only, held })
}

#[component]
pub fn ComparePage() -> impl IntoView {
    let query = leptos_router::hooks::use_query_map();
    let studies = move || query.with(|q| q.get("studies"));
    view! {
        <main class="compare">
            {move || match studies() {
                Some(ids) => view! { <StudiesCompared ids /> }.into_any(),
                None => view! { <TrialsCompared /> }.into_any(),
            }}
        </main>
    }
}

#[component]
fn TrialsCompared() -> impl IntoView {
    let query = leptos_router::hooks::use_query_map();
    let ids = move || query.with(|q| q.get("trials").unwrap_or_default());
    let trials = Resource::new(ids, compare_trials);
    view! {
        <h1>"Trials side by side"</h1>
        <Transition fallback=|| view! { <p class="muted">"Loading the trials…"</p> }>
            {move || Suspend::new(async move {
                match trials.await {
                    Ok(t) => view! { <CompareTable trials=t /> }.into_any(),
                    Err(e) => view! { <p class="error" id="compare-error">{error_text(&e)}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn StudiesCompared(ids: String) -> impl IntoView {
    let query = leptos_router::hooks::use_query_map();
    let metric = move || query.with(|q| q.get("metric").unwrap_or_else(|| "decode_tps".into()));
    let ids = StoredValue::new(ids);
    let comparison =
        Resource::new(move || (ids.get_value(), metric()), |(ids, m)| compare_studies(ids, m));
    let href = move |m: &str| format!("/compare?studies={}&metric={m}", ids.get_value());
    view! {
        <h1>"Two studies side by side"</h1>
        <nav class="plot-axes" id="compare-metrics">
            {metrics().into_iter().map(|(m, label, _)| view! {
                <a href=href(m) class:chosen=move || metric() == m>{label}</a>
            }).collect_view()}
        </nav>
        <Transition fallback=|| view! { <p class="muted">"Loading the studies…"</p> }>
            {move || Suspend::new(async move {
                match comparison.await {
                    Ok(c) => view! { <StudyTable c /> }.into_any(),
                    Err(e) => view! { <p class="error" id="compare-error">{error_text(&e)}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn StudyTable(c: StudyComparison) -> impl IntoView {
    let more_is_better = metrics().into_iter().find(|m| m.0 == c.metric).is_none_or(|m| m.2);
    let better = c
        .rows
        .iter()
        .filter(
            |r| if more_is_better { r.values[1] > r.values[0] } else { r.values[1] < r.values[0] },
        )
        .count();
    let moved: Vec<f64> = c.rows.iter().filter_map(|r| r.change).collect();
    let median = changes::median_text(&c.metric, more_is_better, moved)
        .map(|m| format!("; at the median the change is {m}"));
    // Show only the settings that vary among the shared configurations.
    let varying: Vec<String> = {
        let names: BTreeSet<&String> = c.rows.iter().flat_map(|r| r.settings.keys()).collect();
        names
            .into_iter()
            .filter(|n| c.rows.iter().any(|r| r.settings.get(*n) != c.rows[0].settings.get(*n)))
            .cloned()
            .collect()
    };
    let held: Vec<String> = c
        .held
        .iter()
        .map(|(n, x, y)| {
            let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "default".into());
            format!("{n} {} against {}", v(x), v(y))
        })
        .collect();
    let held = if held.is_empty() {
        String::new()
    } else {
        format!("The studies differ in {}. ", held.join(", "))
    };
    let summary = if c.rows.is_empty() {
        "The two studies ran no configuration in common.".to_string()
    } else {
        format!(
            "{} configurations in common: study {} is better in {better} of them{}; {} ran only in study {}, {} only in study {}.",
            c.rows.len(),
            c.studies[1],
            median.unwrap_or_default(),
            c.only[0],
            c.studies[0],
            c.only[1],
            c.studies[1],
        )
    };
    let metric = c.metric.clone();
    view! {
        <p id="compare-summary">{held}{summary}</p>
        <table class="rows compare" id="compare-studies">
            <thead><tr>
                <th>"configuration"</th>
                <th class="num"><a href=format!("/studies/{}", c.studies[0])>{c.names[0].clone()}</a></th>
                <th class="num"><a href=format!("/studies/{}", c.studies[1])>{c.names[1].clone()}</a></th>
                <th class="num">"change"</th>
            </tr></thead>
            <tbody>
                {c.rows.iter().map(|r| {
                    let config: Vec<String> = varying.iter().map(|n| format!("{n}={}", r.settings.get(n).map_or("default", String::as_str))).collect();
                    let better = if more_is_better { r.values[1] > r.values[0] } else { r.values[1] < r.values[0] };
                    view! {
                        <tr>
                            <td class="settings">{if config.is_empty() { "(the only one)".to_string() } else { config.join(" ") }}</td>
                            <td class="num"><a href=format!("/trials/{}", r.trials[0])>{fmt_metric(&metric, Some(r.values[0]))}</a></td>
                            <td class="num" class:best=better><a href=format!("/trials/{}", r.trials[1])>{fmt_metric(&metric, Some(r.values[1]))}</a></td>
                            <td class="num">{r.change.map(|x| changes::change_text(&metric, x)).unwrap_or_default()}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
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
                .zip(&row.change)
                .enumerate()
                .map(|(i, (v, change))| {
                    let change = match change {
                        Some(x) if i > 0 => format!(" ({})", changes::change_text(row.metric, *x)),
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
    use crate::types::{Metrics, TrialState};

    fn trial(id: i64, pairs: &[(&str, &str)], decode: f64, rss: i64) -> TrialView {
        let settings = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TrialView {
            id,
            metrics: Metrics::of([
                (Metric::DecodeTps, Some(decode)),
                (Metric::PeakRssBytes, Some(rss).map(|v| v as f64)),
            ]),
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
        assert_eq!(decode.change[1], Some(25.0));
        let rss = metrics.iter().find(|m| m.metric == "peak_rss_bytes").unwrap();
        assert_eq!(rss.best, Some(1), "less memory is better");
        assert!(metrics.iter().all(|m| m.metric != "quality_score"), "nothing measured: no row");
    }

    #[test]
    fn studies_join_on_the_whole_configuration() {
        let p = |id, t: &str, v| MetricPoint {
            trial_id: id,
            settings: [("threads".to_string(), t.to_string())].into(),
            value: v,
        };
        let a = [p(1, "2", 10.0), p(2, "4", 20.0), p(3, "2", 12.0), p(4, "8", 5.0)];
        let b = [p(11, "2", 22.0), p(12, "4", 10.0), p(13, "16", 1.0)];
        let (rows, only, held) = join_studies("decode_tps", &a, &b);
        assert!(held.is_empty());
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].values, [11.0, 22.0], "a's two runs of threads=2 averaged");
        assert_eq!(rows[0].trials, [1, 11]);
        assert_eq!(rows[0].change, Some(100.0));
        assert_eq!(rows[1].change, Some(-50.0));
        // A share changes by points, whatever its size.
        let (rows, ..) = join_studies("quality_score", &a[..1], &b[..1]);
        assert_eq!(rows[0].change, Some((22.0 - 10.0) * 100.0));
        assert_eq!(only, [1, 1]);
        // A setting each study held at its own value is what differs.
        let with = |p: &MetricPoint, k: &str, v: &str| {
            let mut p = p.clone();
            p.settings.insert(k.into(), v.into());
            p
        };
        let a2: Vec<MetricPoint> = a.iter().map(|p| with(p, "build", "b100")).collect();
        let b2: Vec<MetricPoint> = b.iter().map(|p| with(p, "build", "b200")).collect();
        let (rows, _, held) = join_studies("decode_tps", &a2, &b2);
        assert_eq!(
            held,
            [("build".to_string(), Some("b100".to_string()), Some("b200".to_string()))]
        );
        assert_eq!(rows.len(), 2);
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
