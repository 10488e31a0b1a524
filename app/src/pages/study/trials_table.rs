//! A study's trials a page at a time, sorted and filtered by the server.

use std::collections::BTreeMap;

use leptos::prelude::*;

#[cfg(feature = "hydrate")]
use super::api::study_trials;
use super::live::{Live, overlaid};
use crate::pages::{fmt_metric, metric_choices, more_metrics, toggle_pick};
use crate::types::differences;
use crate::types::{ObjectiveView, TrialPage, TrialQuery, TrialState};

/// The study's trials a page at a time, sorted and filtered by the server
/// and asked again as trials appear and finish; rows in flight are shown
/// as the live feed last saw them.
#[cfg_attr(not(feature = "hydrate"), allow(unused_variables))]
#[component]
pub(super) fn TrialsTable(
    id: i64,
    first: TrialPage,
    live: Live,
    objectives: Vec<ObjectiveView>,
    baseline: BTreeMap<String, String>,
) -> impl IntoView {
    let query = RwSignal::new(TrialQuery::default());
    let page = RwSignal::new(first);
    // Trials picked to compare, kept across pages.
    let picked: RwSignal<Vec<i64>> = RwSignal::new(Vec::new());
    let compare_href = move || {
        picked.with(|p| {
            let ids: Vec<String> = p.iter().map(|i| i.to_string()).collect();
            format!("/compare?trials={}", ids.join(","))
        })
    };
    #[cfg(feature = "hydrate")]
    crate::pages::keep_fetched(
        move || {
            live.changes.track();
            query.get()
        },
        move |q| study_trials(id, q),
        page,
        true,
    );
    let metrics = metric_choices(&objectives, &more_metrics());
    let metrics = StoredValue::new(metrics);
    let baseline = StoredValue::new(baseline);
    let rows = Memo::new(move |_| {
        page.with(|p| {
            live.trials.with(|l| p.rows.iter().map(|t| overlaid(t, l)).collect::<Vec<_>>())
        })
    });
    let header = move |column: String, label: String| {
        let c = column.clone();
        let arrow = move || {
            query.with(|q| match (q.sort == c, q.descending) {
                (true, true) => " ▼",
                (true, false) => " ▲",
                _ => "",
            })
        };
        let c2 = column.clone();
        view! {
            <th class="num sortable" data-column=column.clone()>
                <button type="button" on:click=move |_| query.update(|q| {
                    q.descending = q.sort != c2 || !q.descending;
                    q.sort = c2.clone();
                    q.offset = 0;
                })>{label}{arrow}</button>
            </th>
        }
    };
    let limit = TrialQuery::default().limit;
    let shown = move || {
        let (offset, matching, n) = page.with(|p| (p.offset, p.matching, p.rows.len() as u64));
        match n {
            0 => format!("none of {matching} shown"),
            _ => format!("{}–{} of {matching}", offset + 1, offset + n),
        }
    };
    view! {
        <label class="filter">"Filter " <input id="trial-filter" placeholder="state, role or setting=value" prop:value=move || query.with(|q| q.filter.clone()) on:input=move |ev| query.update(|q| { q.filter = event_target_value(&ev); q.offset = 0; }) /></label>
        <Show
            when=move || page.with(|p| p.matching > 0) || query.with(|q| !q.filter.trim().is_empty())
            fallback=|| view! { <p class="muted" id="no-trials">"No trials yet."</p> }
        >
            <table class="trials" id="study-trials">
                <thead>
                    <tr>
                        <th title="pick to compare">"⇄"</th>
                        {header("id".into(), "#".into())}
                        <th>"role"</th>
                        <th>"state"</th>
                        <th>"differs from the baseline"</th>
                        {metrics.get_value().into_iter().map(|(m, l)| header(m, l)).collect_view()}
                        <th>"note"</th>
                    </tr>
                </thead>
                <tbody>
                    <For each=move || rows.get() key=|t| (t.id, t.state) let:t>
                        {
                            let diff = baseline.with_value(|b| differences(&t.settings, b)).join(" ");
                            let cause = match t.state {
                                TrialState::Failed | TrialState::Pruned => format!("{}: {}", t.failure_kind.clone().unwrap_or_default(), t.error.clone().unwrap_or_default()),
                                _ => String::new(),
                            };
                            let drift = t.drift_pct.map(|d| format!(" drift {d:+.1} %")).unwrap_or_default();
                            view! {
                                <tr data-trial-id=t.id data-state=t.state.as_str()>
                                    <td>
                                        <input type="checkbox" class="pick" aria-label=format!("compare trial {}", t.id)
                                            prop:checked=move || picked.with(|p| p.contains(&t.id))
                                            on:change=move |_| picked.update(|p| toggle_pick(p, t.id)) />
                                    </td>
                                    <td><a href=format!("/trials/{}", t.id)>{t.id}</a></td>
                                    <td>
                                        {t.role.map(|r| r.as_str()).unwrap_or_default()}
                                        {t.machine.clone().map(|m| view! {
                                            <span class="muted machine">
                                                {format!(" on {m}{}", t.worker.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())}
                                            </span>
                                        })}
                                    </td>
                                    <td><span class=format!("state state-{}", t.state.as_str())>{t.state.as_str()}</span></td>
                                    <td class="settings">{if diff.is_empty() { "(the baseline)".to_string() } else { diff }}</td>
                                    {metrics.get_value().into_iter().map(|(m, _)| view! { <td class="num">{fmt_metric(&m, t.metric(&m))}</td> }).collect_view()}
                                    <td class="muted note">{format!("{}{}{}", t.note.clone().unwrap_or_default(), drift, if cause.is_empty() { String::new() } else { format!(" — {cause}") })}</td>
                                </tr>
                            }
                        }
                    </For>
                </tbody>
            </table>
            <nav class="pager">
                <button type="button" id="page-prev" disabled=move || query.with(|q| q.offset == 0) on:click=move |_| query.update(|q| q.offset = q.offset.saturating_sub(limit))>"← previous"</button>
                <span class="muted" id="trials-shown">{shown}</span>
                <Show when=move || picked.with(|p| p.len() >= 2)>
                    <a id="compare-link" href=compare_href>{move || format!("compare {} trials", picked.with(Vec::len))}</a>
                </Show>
                <button type="button" id="page-next" disabled=move || query.with(|q| q.offset + limit >= page.with(|p| p.matching)) on:click=move |_| query.update(|q| q.offset += limit)>"next →"</button>
            </nav>
        </Show>
    }
}
