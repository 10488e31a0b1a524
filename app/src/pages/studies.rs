//! The list of studies, newest first, kept current by the live feed.

use leptos::prelude::*;

use super::error_text;
#[cfg(feature = "ssr")]
use super::{answer, ops, service};
use crate::types::StudySummary;

/// Every study, newest first.
#[server]
pub async fn list_studies() -> Result<Vec<StudySummary>, ServerFnError> {
    answer(ops::studies::list(&service()?.db).await)
}

#[component]
pub fn StudiesPage() -> impl IntoView {
    let studies = Resource::new(|| (), |_| list_studies());
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| {
        hydrated.set(true);
        // A study's state or trial counts changed: read the list again.
        crate::live::subscribe(crate::live::Handlers {
            trial: Box::new(move |t| {
                if t.study_id.is_some() && t.state.is_final() {
                    studies.refetch();
                }
            }),
            study: Box::new(move |_| studies.refetch()),
            reset: Box::new(move || studies.refetch()),
        });
    });
    view! {
        <main class="studies" data-hydrated=move || hydrated.get().to_string()>
            <section class="panel">
                <h1>"Studies"</h1>
                <p><a class="button" href="/studies/new" id="new-study">"Design a new study"</a></p>
                <Transition fallback=|| view! { <p class="muted">"Loading studies…"</p> }>
                    {move || Suspend::new(async move {
                        match studies.await {
                            Ok(list) if list.is_empty() => view! {
                                <p class="muted" id="no-studies">
                                    "No studies yet. Design one: say what to vary and what better means, and Tunebook runs it."
                                </p>
                            }.into_any(),
                            Ok(list) => view! { <StudyTable list /> }.into_any(),
                            Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                        }
                    })}
                </Transition>
            </section>
        </main>
    }
}

#[component]
fn StudyTable(list: Vec<StudySummary>) -> impl IntoView {
    // Two studies picked to compare.
    let picked: RwSignal<Vec<i64>> = RwSignal::new(Vec::new());
    let toggle = move |id: i64| picked.update(|p| super::toggle_pick(p, id));
    let href = move || {
        // The older study first: changes read as from it to the newer.
        let mut ids = picked.get();
        ids.sort();
        let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        format!("/compare?studies={}", ids.join(","))
    };
    view! {
        <p class="muted">
            {move || match picked.with(Vec::len) {
                2 => view! { <a id="compare-studies-link" href=href>"compare the two studies picked"</a> }.into_any(),
                _ => view! { <span>"Pick two studies (⇄) to compare them side by side."</span> }.into_any(),
            }}
        </p>
        <table class="trials" id="studies">
            <thead>
                <tr>
                    <th title="pick to compare">"⇄"</th>
                    <th>"#"</th>
                    <th>"name"</th>
                    <th>"engine profile · model"</th>
                    <th>"state"</th>
                    <th class="num">"trials done"</th>
                    <th class="num">"failed"</th>
                    <th class="num">"pruned"</th>
                    <th>"why it ended"</th>
                </tr>
            </thead>
            <tbody>
                {list
                    .into_iter()
                    .map(|s| {
                        let count = |k: &str| s.trials.get(k).copied().unwrap_or(0);
                        let id = s.id;
                        view! {
                            <tr data-study-id=s.id>
                                <td><input type="checkbox" class="pick" aria-label=format!("compare study {}", s.id)
                                    prop:checked=move || picked.with(|p| p.contains(&id))
                                    on:change=move |_| toggle(id) /></td>
                                <td>{s.id}</td>
                                <td><a href=format!("/studies/{}", s.id)>{s.name.clone()}</a></td>
                                <td>{format!("{} · {}", s.profile, s.model)}</td>
                                <td><span class=format!("state state-{}", s.state)>{s.state.clone()}</span></td>
                                <td class="num">{count("done")}</td>
                                <td class="num">{count("failed")}</td>
                                <td class="num">{count("pruned")}</td>
                                <td class="muted">{s.stop_reason.clone().unwrap_or_default()}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}
