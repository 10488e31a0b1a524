//! The home page: run one configuration, and the trials table, kept current
//! by events pushed from the server.

use std::collections::BTreeMap;

use leptos::prelude::*;

#[cfg(feature = "ssr")]
use super::{answer, ops, service};
use super::{error_text, fmt};
use crate::types::{Metric, ProfileView, RunRequest, TrialState, TrialView};

/// The engine profiles this server may run.
#[server]
pub async fn list_profiles() -> Result<Vec<ProfileView>, ServerFnError> {
    Ok(ops::catalog::profiles(&service()?.profiles).await)
}

/// Every trial, newest first.
#[server]
pub async fn list_trials() -> Result<Vec<TrialView>, ServerFnError> {
    answer(ops::trials::list(&service()?.db).await)
}

/// Checks and queues one configuration.
#[server]
pub async fn run_trial(request: RunRequest) -> Result<TrialView, ServerFnError> {
    answer(ops::trials::submit(&*service()?, request).await)
}

/// Trials as the server last reported them, by id.
type LiveTrials = RwSignal<BTreeMap<i64, TrialView>>;

#[component]
pub fn HomePage() -> impl IntoView {
    let profiles = Resource::new(|| (), |_| list_profiles());
    let trials = Resource::new(|| (), |_| list_trials());
    let live: LiveTrials = RwSignal::new(BTreeMap::new());
    // Effects run only in the browser: this marks the page as interactive.
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| {
        hydrated.set(true);
        crate::live::subscribe(crate::live::Handlers {
            trial: Box::new(move |t| {
                live.update(|m| {
                    m.insert(t.id, t);
                });
            }),
            study: Box::new(|_| {}),
            // What happened while we were not listening is in the database.
            reset: Box::new(move || trials.refetch()),
        });
    });

    view! {
        <main class="home" data-hydrated=move || hydrated.get().to_string()>
            <section class="panel">
                <h2>"Run one configuration"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading profiles…"</p> }>
                    {move || Suspend::new(async move {
                        match profiles.await {
                            Ok(list) if !list.is_empty() => {
                                view! { <RunForm profiles=list live /> }.into_any()
                            }
                            Ok(_) => {
                                view! {
                                    <p class="error">
                                        "No engine profiles. Add a TOML file to the profiles folder."
                                    </p>
                                }
                                    .into_any()
                            }
                            Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                        }
                    })}
                </Suspense>
            </section>
            <section class="panel">
                <h2>"Trials"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading trials…"</p> }>
                    {move || Suspend::new(async move {
                        match trials.await {
                            Ok(stored) => view! { <TrialTable stored live /> }.into_any(),
                            Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                        }
                    })}
                </Suspense>
            </section>
        </main>
    }
}

#[component]
fn RunForm(profiles: Vec<ProfileView>, live: LiveTrials) -> impl IntoView {
    let profiles = StoredValue::new(profiles);
    let first = profiles.with_value(|p| p[0].clone());
    let profile = RwSignal::new(first.name.clone());
    let model = RwSignal::new(first.models.first().cloned().unwrap_or_default());
    let ctx_size = RwSignal::new("2048".to_string());
    let threads = RwSignal::new("2".to_string());
    let cache_type_k = RwSignal::new("f16".to_string());
    let cache_type_v = RwSignal::new("f16".to_string());
    let flash_attn = RwSignal::new("auto".to_string());

    let current =
        move || profiles.with_value(|all| all.iter().find(|p| p.name == profile.get()).cloned());
    // The engine's cache types for K or V (the finest first, then those
    // the profile names for that one): a list, not free text.
    let cache_options = move |name: &'static str, chosen: RwSignal<String>| {
        current()
            .map(|p| {
                let own = p.params.into_iter().find(|x| x.name == name).map(|x| x.choices);
                own.unwrap_or(p.cache_types)
            })
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                let is = t == chosen.get_untracked();
                view! { <option value=t.clone() selected=is>{t.clone()}</option> }
            })
            .collect_view()
    };
    let action = ServerAction::<RunTrial>::new();
    Effect::new(move |_| {
        if let Some(Ok(trial)) = action.value().get() {
            live.update(|m| {
                m.entry(trial.id).or_insert(trial);
            });
        }
    });
    let error = move || match action.value().get() {
        Some(Err(e)) => error_text(&e),
        _ => String::new(),
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let settings = [
            ("ctx_size", ctx_size),
            ("threads", threads),
            ("cache_type_k", cache_type_k),
            ("cache_type_v", cache_type_v),
            ("flash_attn", flash_attn),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.get_untracked()))
        .collect();
        action.dispatch(RunTrial {
            request: RunRequest {
                profile: profile.get_untracked(),
                model: model.get_untracked(),
                settings,
                target: None,
            },
        });
    };

    view! {
        <form class="run-form" on:submit=submit>
            <label>
                "Engine profile"
                <select
                    id="profile"
                    prop:value=move || profile.get()
                    on:change=move |ev| {
                        profile.set(event_target_value(&ev));
                        model.set(current().and_then(|p| p.models.first().cloned()).unwrap_or_default());
                    }
                >
                    {profiles
                        .get_value()
                        .into_iter()
                        .map(|p| view! { <option value=p.name.clone()>{format!("{} ({})", p.name, p.engine)}</option> })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Model"
                <select id="model" prop:value=move || model.get() on:change=move |ev| model.set(event_target_value(&ev))>
                    {move || {
                        current()
                            .map(|p| p.models)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|m| view! { <option value=m.clone()>{m.clone()}</option> })
                            .collect_view()
                    }}
                </select>
            </label>
            <label>
                "Context size (-c)"
                <input id="ctx_size" type="number" min="0" bind:value=ctx_size />
            </label>
            <label>
                "Threads (-t)"
                <input id="threads" type="number" min="1" bind:value=threads />
            </label>
            <label>
                "K cache type (-ctk)"
                <select id="cache_type_k" prop:value=move || cache_type_k.get() on:change=move |ev| cache_type_k.set(event_target_value(&ev))>
                    {move || cache_options("cache_type_k", cache_type_k)}
                </select>
            </label>
            <label>
                "V cache type (-ctv)"
                <select id="cache_type_v" prop:value=move || cache_type_v.get() on:change=move |ev| cache_type_v.set(event_target_value(&ev))>
                    {move || cache_options("cache_type_v", cache_type_v)}
                </select>
            </label>
            <label>
                "Flash attention (-fa)"
                <select id="flash_attn" prop:value=move || flash_attn.get() on:change=move |ev| flash_attn.set(event_target_value(&ev))>
                    <option value="auto">"auto"</option>
                    <option value="on">"on"</option>
                    <option value="off">"off"</option>
                </select>
            </label>
            <button id="run" type="submit" disabled=move || action.pending().get()>
                {move || if action.pending().get() { "Queuing…" } else { "Run" }}
            </button>
            <p id="run-error" class="error" role="alert">{error}</p>
        </form>
    }
}

/// The stored trials with the live updates laid over them.
fn merged(stored: &[TrialView], live: &BTreeMap<i64, TrialView>) -> Vec<TrialView> {
    let mut by_id: BTreeMap<i64, TrialView> = stored.iter().map(|t| (t.id, t.clone())).collect();
    for (id, t) in live {
        // States only move forward; keep whichever copy is further along.
        let newer = by_id.get(id).is_none_or(|old| rank(t.state) >= rank(old.state));
        if newer {
            by_id.insert(*id, t.clone());
        }
    }
    by_id.into_values().rev().collect()
}

fn rank(s: TrialState) -> usize {
    TrialState::ALL.iter().position(|x| *x == s).unwrap_or(0).min(4)
}

#[component]
fn TrialTable(stored: Vec<TrialView>, live: LiveTrials) -> impl IntoView {
    let rows = Memo::new(move |_| live.with(|l| merged(&stored, l)));
    view! {
        <Show
            when=move || !rows.with(Vec::is_empty)
            fallback=|| view! { <p class="muted" id="no-trials">"No trials yet: run one above."</p> }
        >
            <table class="trials">
                <thead>
                    <tr>
                        <th>"#"</th>
                        <th>"state"</th>
                        <th>"study"</th>
                        <th>"model"</th>
                        <th>"settings"</th>
                        <th class="num">"load s"</th>
                        <th class="num">"TTFT ms"</th>
                        <th class="num">"prefill tok/s"</th>
                        <th class="num">"decode tok/s"</th>
                        <th class="num">"client decode tok/s"</th>
                        <th class="num">"tokens"</th>
                        <th class="num">"peak RSS MiB"</th>
                        <th class="num">"quality %"</th>
                        <th class="num">"PPL"</th>
                        <th class="num" title="decode speed as a share of what memory bandwidth allows">"% of ceiling"</th>
                    </tr>
                </thead>
                <tbody>
                    <For each=move || rows.get() key=|t| (t.id, t.state) let:t>
                        <TrialRow t />
                    </For>
                </tbody>
            </table>
        </Show>
    }
}

#[component]
fn TrialRow(t: TrialView) -> impl IntoView {
    let settings = t.settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
    let tokens = match (t.tokens_generated, t.tokens_requested) {
        (Some(g), Some(r)) => format!("{g}/{r}"),
        _ => String::new(),
    };
    let failed = matches!(t.state, TrialState::Failed | TrialState::Pruned);
    let expected = (t.state == TrialState::Loading).then(|| {
        let what = match t.load_state.as_deref() {
            Some("loading") => "loading the model",
            _ => "starting",
        };
        let eta =
            t.expected_load_ms.map_or(String::new(), |ms| format!(", ~{:.1} s expected", ms / 1e3));
        view! { <span class="muted load-state">{format!(" {what}{eta}")}</span> }
    });
    let cause = t.failure_kind.clone().unwrap_or_default();
    view! {
        <tr data-trial-id=t.id data-state=t.state.as_str() title=t.command.clone().unwrap_or_default()>
            <td><a href=format!("/trials/{}", t.id)>{t.id}</a></td>
            <td>
                <span class=format!("state state-{}", t.state.as_str())>{t.state.as_str()}</span>
                {expected}
            </td>
            <td class="study">{match t.study_id {
                Some(s) => view! { <a href=format!("/studies/{s}")>{format!("study {s}")}</a> }.into_any(),
                None => view! { <span class="muted" title="run on its own">"—"</span> }.into_any(),
            }}</td>
            <td>{t.model.clone()}</td>
            <td class="settings">{settings}</td>
            <td class="num">{fmt(t.value(Metric::LoadMs).map(|ms| ms / 1e3), 2)}</td>
            <td class="num">{fmt(t.value(Metric::TtftMs), 1)}</td>
            <td class="num">{fmt(t.value(Metric::PrefillTps), 1)}</td>
            <td class="num">{fmt(t.value(Metric::DecodeTps), 1)}</td>
            <td class="num">{fmt(t.client_decode_tps, 1)}</td>
            <td class="num">{tokens}</td>
            <td class="num">{fmt(t.value(Metric::PeakRssBytes).map(|b| b / 1048576.0), 0)}</td>
            <td class="num">{fmt(t.value(Metric::QualityScore).map(|q| q * 100.0), 0)}</td>
            <td class="num">{fmt(t.value(Metric::Perplexity), 2)}</td>
            <td class="num">{fmt(t.value(Metric::PctOfCeiling), 0)}</td>
        </tr>
        <Show when=move || failed>
            <tr class="failure" data-failure-for=t.id>
                <td></td>
                <td colspan="14">
                    <strong>{cause.clone()}</strong>
                    <pre class="engine-error">{t.error.clone().unwrap_or_default()}</pre>
                </td>
            </tr>
        </Show>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(id: i64, state: TrialState) -> TrialView {
        TrialView { id, ..TrialView::new("p", "m", BTreeMap::new(), state) }
    }

    #[test]
    fn live_updates_win_unless_older() {
        let stored = vec![trial(1, TrialState::Done), trial(2, TrialState::Queued)];
        let live: BTreeMap<_, _> = [
            (1, trial(1, TrialState::Probing)),
            (2, trial(2, TrialState::Loading)),
            (3, trial(3, TrialState::Queued)),
        ]
        .into();
        let rows = merged(&stored, &live);
        let states: Vec<_> = rows.iter().map(|t| (t.id, t.state)).collect();
        assert_eq!(
            states,
            [(3, TrialState::Queued), (2, TrialState::Loading), (1, TrialState::Done)]
        );
    }
}
