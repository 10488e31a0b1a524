//! The pages, and what they share: the server's application layer (on the
//! server), error wording and number formatting.

pub mod answers;
pub mod changes;
pub mod compare;
pub mod designer;
pub mod home;
pub mod report;
pub mod studies;
pub mod study;
pub mod trial;
pub mod workers;

use leptos::prelude::*;

/// The application layer, which the server functions call directly.
#[cfg(feature = "ssr")]
pub(crate) use tunebook_core::ops;

/// The server's shared context, which the server provides to every page.
#[cfg(feature = "ssr")]
pub(crate) fn service() -> Result<std::sync::Arc<tunebook_core::service::Service>, ServerFnError> {
    use_context::<std::sync::Arc<tunebook_core::service::Service>>()
        .ok_or_else(|| ServerFnError::new("the server provided no application context"))
}

/// An operation's answer as a server function's: an error worded for the
/// user ([`tunebook_core::Error::for_user`]). Called by the browser, it
/// answers with the status the API gives it (a refused input is a 400,
/// not a server fault); while a page renders, one part failing (the
/// designer's preview of a draft) does not set the whole page's status.
#[cfg(feature = "ssr")]
pub(crate) fn answer<T>(result: tunebook_core::Result<T>) -> Result<T, ServerFnError> {
    use leptos::server_fn::http_export::request::Parts;
    result.map_err(|e| {
        let called = use_context::<Parts>().is_some_and(|p| p.uri.path().starts_with("/api/"));
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>().filter(|_| called) {
            response.set_status(crate::status::of(e.kind()));
        }
        ServerFnError::new(e.for_user())
    })
}

/// The `:id` of the page's route (0 when it is not a number: the server
/// then answers "not found").
pub(crate) fn id_param() -> impl Fn() -> i64 + Copy + Send + Sync + 'static {
    let params = leptos_router::hooks::use_params_map();
    move || params.with(|p| p.get("id").and_then(|s| s.parse::<i64>().ok()).unwrap_or(0))
}

/// The message of a server function error, without the framework's prefix.
pub(crate) fn error_text(e: &ServerFnError) -> String {
    match e {
        ServerFnError::ServerError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// A number with `digits` decimals; blank when unknown.
pub(crate) fn fmt(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite()).map(|x| format!("{x:.digits$}")).unwrap_or_default()
}

/// Metrics the pages offer besides a study's objectives, with their
/// labels.
pub(crate) fn more_metrics() -> Vec<(&'static str, &'static str)> {
    use crate::types::Metric;
    Metric::ALL.into_iter().filter(|m| m.explored()).map(|m| (m.name(), m.short_label())).collect()
}

/// (name, label) of the study's objectives, then of `more` not among them.
pub(crate) fn metric_choices(
    objectives: &[crate::types::ObjectiveView],
    more: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> =
        objectives.iter().map(|o| (o.metric.clone(), o.label.clone())).collect();
    for (name, label) in more {
        if !all.iter().any(|(n, _)| n == name) {
            all.push((name.to_string(), label.to_string()));
        }
    }
    all
}

/// Adds `id` to the picked trials or studies, or takes it out.
pub(crate) fn toggle_pick(picked: &mut Vec<i64>, id: i64) {
    match picked.iter().position(|i| *i == id) {
        Some(at) => {
            picked.remove(at);
        }
        None => picked.push(id),
    }
}

/// A metric's value as people read it: bytes in MiB, scores in percent.
pub(crate) fn fmt_metric(metric: &str, v: Option<f64>) -> String {
    match metric {
        m if m.ends_with("_bytes") => {
            fmt(v.map(|b| b / 1048576.0), 0) + if v.is_some() { " MiB" } else { "" }
        }
        m if changes::scale(m) == changes::Scale::Points => {
            fmt(v.map(|q| q * 100.0), 0) + if v.is_some() { " %" } else { "" }
        }
        "context_tokens" => fmt(v, 0),
        m if changes::scale(m) == changes::Scale::Nats => {
            v.map(|x| format!("{x:.5}")).unwrap_or_default()
        }
        m if m.starts_with("setting.") => v.map(|x| x.to_string()).unwrap_or_default(),
        _ => fmt(v, 1),
    }
}

/// Seconds as `1 h 05 min`, `3 min 20 s` or `12.5 s`.
pub(crate) fn fmt_duration(secs: f64) -> String {
    let s = secs.max(0.0);
    if s >= 3600.0 {
        format!("{} h {:02} min", (s / 3600.0) as u64, ((s % 3600.0) / 60.0) as u64)
    } else if s >= 60.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!("{s:.1} s")
    }
}

/// Keeps a signal filled with what a server function answers for the
/// current `args`, asking again whenever a signal `args` reads changes.
/// An answer that comes back after a newer question is dropped, so answers
/// arriving out of order never show stale data. `skip_first`: the page
/// already has the first answer from the server's render. In the browser
/// only; the server renders what it was given.
#[cfg(feature = "hydrate")]
pub(crate) fn keep_fetched<A, T, Fut>(
    args: impl Fn() -> A + 'static,
    fetch: impl Fn(A) -> Fut + 'static,
    into: RwSignal<T>,
    skip_first: bool,
) where
    A: 'static,
    T: Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<T, ServerFnError>> + 'static,
{
    let latest = StoredValue::new(0u64);
    Effect::new(move |ran: Option<()>| {
        let question = args();
        if skip_first && ran.is_none() {
            return;
        }
        latest.update_value(|n| *n += 1);
        let mine = latest.get_value();
        let answer = fetch(question);
        leptos::task::spawn_local(async move {
            if let Ok(v) = answer.await
                && latest.get_value() == mine
            {
                into.set(v);
            }
        });
    });
}

/// The class of machine a plot shows, in a study run on several (speeds
/// compare only within one); nothing for a study on one. `choices`: the
/// classes there are and the one shown.
#[component]
pub(crate) fn MachinePicker(
    id: &'static str,
    choices: Signal<Option<(Vec<String>, Option<String>)>>,
    machine: RwSignal<String>,
) -> impl IntoView {
    move || {
        choices.with(|c| {
            let (machines, shown) = c.as_ref().filter(|(m, _)| m.len() > 1)?;
            let shown = shown.clone().unwrap_or_default();
            let options = machines
                .iter()
                .map(|m| {
                    let selected = *m == shown;
                    view! { <option value=m.clone() selected=selected>{m.clone()}</option> }
                })
                .collect_view();
            Some(view! {
                <label title="speeds compare only within one class of machine">
                    "machine "
                    <select id=id on:change=move |ev| machine.set(event_target_value(&ev))>{options}</select>
                </label>
            })
        })
    }
}

/// Marks a moment in the browser's performance timeline (`tunebook:NAME`),
/// for measuring how soon a page is usable.
pub(crate) fn mark(name: &str) {
    #[cfg(feature = "hydrate")]
    if let Some(p) = web_sys::window().and_then(|w| w.performance()) {
        let _ = p.mark(&format!("tunebook:{name}"));
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = name;
}
