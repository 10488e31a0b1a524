//! A study's live page: its state and controls, the trial in flight, the
//! best so far, the Pareto plot, its trials a page at a time, and what
//! happened, all kept current by the live feed. Whatever grows with the
//! study (the table, the best so far, the plot) is asked of the server, so
//! a study of 10,000 trials loads about as fast as one of ten.

use std::collections::BTreeMap;

use leptos::prelude::*;

mod api;
mod explore;
mod importance;
mod live;
mod open;
mod trials_table;

use super::{MachinePicker, error_text, fmt_metric};
use crate::plot::figure_url;
use crate::types::{
    BestView, FindingsView, ObjectiveView, ParetoFigure, StudyView, TrialState, TrialView,
};
pub use api::*;
use live::{Live, in_flight, merged_events};
use open::{OpenFindings, SettleSaid};
use trials_table::TrialsTable;

#[component]
pub fn StudyPage() -> impl IntoView {
    let id = super::id_param();
    let study = Resource::new(id, get_study);
    let live = Live {
        trials: RwSignal::new(BTreeMap::new()),
        events: RwSignal::new(Vec::new()),
        state: RwSignal::new(None),
        changes: RwSignal::new(0),
    };
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| {
        hydrated.set(true);
        super::mark("hydrated");
        let me = id();
        crate::live::subscribe(crate::live::Handlers {
            trial: Box::new(move |t| {
                if t.study_id == Some(me) {
                    let new = !live.trials.with_untracked(|m| m.contains_key(&t.id));
                    if new || t.state.is_final() {
                        live.changes.update(|n| *n += 1);
                    }
                    live.trials.update(|m| {
                        m.insert(t.id, t);
                    });
                }
            }),
            study: Box::new(move |s| {
                if s.study_id == me {
                    live.state.set(Some(s.state.clone()));
                    live.events.update(|e| e.push(s));
                }
            }),
            reset: Box::new(move || {
                live.trials.update(BTreeMap::clear);
                live.events.update(Vec::clear);
                live.state.set(None);
                study.refetch();
            }),
        });
    });
    view! {
        <main class="study" data-hydrated=move || hydrated.get().to_string()>
            <Suspense fallback=|| view! { <p class="muted">"Loading the study…"</p> }>
                {move || Suspend::new(async move {
                    match study.await {
                        Ok(s) => view! { <StudyBody study=s live /> }.into_any(),
                        Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </main>
    }
}

#[component]
fn StudyBody(study: StudyView, live: Live) -> impl IntoView {
    let id = study.summary.id;
    let progress = RwSignal::new(study.progress.clone());
    #[cfg(feature = "hydrate")]
    super::keep_fetched(move || live.changes.track(), move |()| get_progress(id), progress, true);
    let state = {
        let initial = study.summary.state.clone();
        Memo::new(move |_| live.state.get().unwrap_or_else(|| initial.clone()))
    };
    let control = ServerAction::<ControlStudy>::new();
    let act = move |action: &'static str| {
        control.dispatch(ControlStudy { id, action: action.into() });
    };
    let objectives = StoredValue::new(study.objectives.clone());
    let baseline = StoredValue::new(study.baseline.clone());
    let stored_events = study.events.clone();
    let events = Memo::new(move |_| live.events.with(|l| merged_events(&stored_events, l)));
    let max_trials = study.max_trials;
    let now = Memo::new(move |_| progress.with(|p| live.trials.with(|l| in_flight(p, l))));

    view! {
        <header class="study-head">
            <h1>{study.summary.name.clone()}</h1>
            <span id="study-state" class=move || format!("state state-{}", state.get())>{move || state.get()}</span>
            <span class="muted">{format!(" {} · {} · study {id}", study.summary.profile, study.summary.model)}</span>
        </header>
        <section class="panel controls">
            <span id="progress">{move || progress.with(|p| match p.best_by_machine.len() {
                0 | 1 => format!("{} of at most {max_trials} trials", p.counted),
                n => format!("{} trials on {n} classes of machine, at most {max_trials} each", p.counted),
            })}</span>
            <button type="button" id="pause" disabled=move || state.get() != "running" on:click=move |_| act("pause")>"Pause"</button>
            <button type="button" id="resume" disabled=move || state.get() != "paused" on:click=move |_| act("resume")>"Resume"</button>
            <button type="button" id="stop" disabled=move || !matches!(state.get().as_str(), "running" | "paused") on:click=move |_| act("stop")>"Stop"</button>
            <span class="error" role="alert">{move || match control.value().get() { Some(Err(e)) => error_text(&e), _ => String::new() }}</span>
            <p class="muted" id="stop-reason">{study.summary.stop_reason.clone().unwrap_or_default()}</p>
        </section>
        <div class="study-grid">
            <section class="panel">
                <h2>"Now"</h2>
                {move || {
                    let running = now.get();
                    if running.is_empty() {
                        view! { <p class="muted" id="in-flight">"No trial running."</p> }.into_any()
                    } else {
                        running.into_iter().map(|t| view! { <InFlight t /> }).collect_view().into_any()
                    }
                }}
                <h2>"Best so far"</h2>
                {move || {
                    let p = progress.get();
                    // Each class of machine on its own: speeds compare only within one.
                    let groups: Vec<(Option<String>, Vec<Option<BestView>>)> = if p.best_by_machine.is_empty() {
                        vec![(None, p.best)]
                    } else {
                        p.best_by_machine.into_iter().map(|m| (Some(m.machine), m.best)).collect()
                    };
                    groups.into_iter().map(|(machine, best)| view! {
                        {machine.clone().map(|m| view! { <h3 class="machine">{format!("On {m}")}</h3> })}
                        <dl class="facts best" data-machine=machine.unwrap_or_default()>
                            {objectives.get_value().into_iter().zip(best).map(|(o, found)| {
                                view! {
                                    <dt>{format!("{} ({})", o.label, if o.goal == "max" { "higher is better" } else { "lower is better" })}</dt>
                                    <dd>{match found {
                                        Some(b) => view! { <a href=format!("/trials/{}", b.trial_id)>{format!("{} — trial {}", fmt_metric(&o.metric, Some(b.value)), b.trial_id)}</a> }.into_any(),
                                        None => view! { <span class="muted">"nothing done yet"</span> }.into_any(),
                                    }}</dd>
                                }
                            }).collect_view()}
                        </dl>
                    }).collect_view()
                }}
            </section>
            <section class="panel">
                <h2>{match study.objectives.as_slice() {
                    [one] => format!("Each trial's {}, and the best so far", one.label),
                    _ => "Pareto front".to_string(),
                }}</h2>
                <ParetoPlot id objectives=study.objectives.clone() finished=Signal::derive(move || progress.with(|p| p.finished)) />
            </section>
        </div>
        <section class="panel">
            <h2>"Findings"</h2>
            <Findings id finished=Signal::derive(move || progress.with(|p| p.finished)) />
            <Reports id />
        </section>
        <section class="panel">
            <h2>"Explore"</h2>
            <explore::Explore id objectives=study.objectives.clone() finished=Signal::derive(move || progress.with(|p| p.finished)) />
        </section>
        <section class="panel">
            <h2>"Trials" <a class="download" id="trials-csv" href=format!("/api/studies/{id}/trials.csv") download="">"Download CSV"</a> <a class="download" id="optuna-journal" href=format!("/api/studies/{id}/optuna-journal") download="" title="A journal Optuna's JournalStorage and optuna-dashboard open">"Optuna journal"</a></h2>
            <TrialsTable id first=study.first_page.clone() live objectives=study.objectives.clone() baseline=baseline.get_value() />
        </section>
        <section class="panel">
            <h2>"What happened"</h2>
            <ol class="events" id="events">
                {move || events.get().into_iter().map(|e| view! {
                    <li data-kind=e.kind.clone()><strong>{e.kind.clone()}</strong>" "{e.message.clone()}</li>
                }).collect_view()}
            </ol>
            <details>
                <summary>"The study as a file"</summary>
                <pre class="study-file">{study.definition_toml.clone()}</pre>
            </details>
        </section>
    }
}

/// The trial in flight: its phase, and while loading, elapsed against
/// expected time.
#[component]
fn InFlight(t: TrialView) -> impl IntoView {
    let now = RwSignal::new(t.started_ms.unwrap_or(t.created_ms));
    #[cfg(feature = "hydrate")]
    {
        let handle = set_interval_with_handle(
            move || now.set(js_sys::Date::now() as i64),
            std::time::Duration::from_millis(500),
        );
        if let Ok(h) = handle {
            on_cleanup(move || h.clear());
        }
    }
    let started = t.started_ms;
    let expected = t.expected_load_ms;
    let phase = match (t.state, t.load_state.as_deref()) {
        (TrialState::Loading, Some("loading")) => "loading the model",
        (TrialState::Loading, _) => "starting the engine",
        (s, _) => s.as_str(),
    };
    let settings = t.settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
    let loading = t.state == TrialState::Loading;
    view! {
        <div class="in-flight" data-trial-id=t.id data-state=t.state.as_str()>
            <p><a href=format!("/trials/{}", t.id)>{format!("trial {}", t.id)}</a>" — "<strong>{phase}</strong>
                {t.worker.clone().map(|w| format!(" on {w}"))}
                " · "<a class="muted" href=format!("/trials/{}", t.id)>"the engine's output, live"</a></p>
            <p class="settings">{settings}</p>
            <Show when=move || loading>
                {move || {
                    let elapsed = started.map(|s| (now.get() - s).max(0) as f64 / 1e3).unwrap_or(0.0);
                    let text = match expected {
                        Some(e) => format!("{elapsed:.1} s of ~{:.1} s expected", e / 1e3),
                        None => format!("{elapsed:.1} s (no earlier load to go by)"),
                    };
                    let max = expected.map(|e| e / 1e3).unwrap_or(elapsed.max(1.0));
                    view! {
                        <progress max=max value=elapsed.min(max)></progress>
                        <span class="muted">{text}</span>
                    }
                }}
            </Show>
            <p class="muted">{t.note.clone().unwrap_or_default()}</p>
        </div>
    }
}

#[cfg_attr(not(feature = "hydrate"), allow(unused_variables))]
#[component]
fn ParetoPlot(id: i64, objectives: Vec<ObjectiveView>, finished: Signal<u64>) -> impl IntoView {
    let names: Vec<String> = objectives.iter().map(|o| o.metric.clone()).collect();
    let x = RwSignal::new(names.first().cloned().unwrap_or_default());
    // One objective has no second axis: its trials are drawn in order.
    let y = RwSignal::new(names.get(1).cloned().unwrap_or_default());
    // A third objective, for the three-dimensional view ("": none).
    let z = RwSignal::new(names.get(2).cloned().unwrap_or_default());
    // The class of machine shown, in a study run on several ("": the first).
    let machine = RwSignal::new(String::new());
    // The figure is built on the server and drawn in the browser straight
    // from its answer: on the objectives, from an address the page's head
    // preloads and the browser starts drawing before the app has started;
    // on other axes or machines, from an address naming them.
    let objectives_chosen = [x.get_untracked(), y.get_untracked(), z.get_untracked()];
    let src = Memo::new(move |_| {
        let chosen = [x.get(), y.get(), z.get()];
        let on = machine.get();
        if chosen == objectives_chosen && on.is_empty() {
            figure_url(id, None, "")
        } else {
            figure_url(id, Some(&chosen), &on)
        }
    });
    let shown: RwSignal<Option<ParetoFigure>> = RwSignal::new(None);
    #[cfg(feature = "hydrate")]
    {
        let click = crate::plot::open_trial_on_click();
        let latest = StoredValue::new(0u64);
        // Drawn again on other axes, and whenever another trial finishes.
        Effect::new(move |ran: Option<()>| {
            let url = src.get();
            finished.track();
            latest.update_value(|n| *n += 1);
            let mine = latest.get_value();
            let drawn = crate::plot::draw_from("pareto-plot", &url, Some(&click), ran.is_some());
            leptos::task::spawn_local(async move {
                if let Some(answer) = drawn.await
                    && latest.get_value() == mine
                {
                    shown.set(Some(answer));
                }
            });
        });
    }
    // Any metric can be the third axis, the objectives first.
    let z_options = {
        let all = super::metric_choices(&objectives, &super::more_metrics());
        all.into_iter()
            .map(|(name, l)| {
                let is = name == z.get_untracked();
                view! { <option value=name selected=is>{l}</option> }
            })
            .collect_view()
    };
    let options = move |selected: RwSignal<String>| {
        objectives
            .clone()
            .into_iter()
            .map(move |o| {
                let is = o.metric == selected.get_untracked();
                view! { <option value=o.metric.clone() selected=is>{o.label.clone()}</option> }
            })
            .collect_view()
    };
    // One objective has no front to choose axes for: its trials in order.
    let axes = (names.len() > 1).then(|| {
        view! {
            <label>"x " <select id="pareto-x" on:change=move |ev| x.set(event_target_value(&ev))>{options(x)}</select></label>
            <label>"y " <select id="pareto-y" on:change=move |ev| y.set(event_target_value(&ev))>{options(y)}</select></label>
            <label>"z " <select id="pareto-z" on:change=move |ev| z.set(event_target_value(&ev))>
                <option value="" selected=move || z.get_untracked().is_empty()>"(none: two dimensions)"</option>
                {z_options}
            </select></label>
        }
    });
    view! {
        <div class="plot-axes">
            {axes}
            <MachinePicker
                id="pareto-machine"
                choices=Signal::derive(move || shown.with(|p| p.as_ref().map(|p| (p.machines.clone(), p.machine.clone()))))
                machine
            />
        </div>
        <Show when=move || shown.with(|f| f.as_ref().is_some_and(|f| f.points == 0))>
            <p class="muted" id="pareto-empty">"No finished trial to plot yet."</p>
        </Show>
        <div
            id="pareto-plot"
            class="plot"
            data-figure-src=move || src.get()
            // Where a click on a point leads before the app starts.
            data-point-href="/trials/"
            data-points=move || shown.with(|p| p.as_ref().map_or(-1, |p| p.points as i64))
            data-finished=move || finished.get()
        ></div>
    }
}

/// What the trials show, worked out by the server from the data (every
/// finding cites its trials) and asked again as trials finish.
#[cfg_attr(not(feature = "hydrate"), allow(unused_variables))]
#[component]
fn Findings(id: i64, finished: Signal<u64>) -> impl IntoView {
    let found: RwSignal<Option<FindingsView>> = RwSignal::new(None);
    let settle = ServerAction::<SettleFinding>::new();
    #[cfg(feature = "hydrate")]
    super::keep_fetched(
        move || finished.track(),
        move |()| async move { study_findings(id).await.map(Some) },
        found,
        false,
    );
    view! {
        {move || found.with(|f| match f {
            None => view! { <p class="muted">"Working out what the trials show…"</p> }.into_any(),
            Some(f) if f.count == 0 => view! { <p class="muted" id="no-findings">"Nothing to say yet: no trial has finished."</p> }.into_any(),
            // Sanitized on the server (pulldown-cmark, then ammonia).
            Some(f) => {
                let warning = (!f.too_noisy.is_empty()).then(|| {
                    let on = f.too_noisy.join(", ");
                    view! {
                        <p class="warning" id="too-noisy">
                            {format!("The machine was too noisy to tell differences within the margin on {on}: only effects several times that are claimed, and no \"no effect\". Close what else runs, or raise the repeats.")}
                        </p>
                    }
                });
                view! {
                    {warning}
                    <div class="findings" id="findings" inner_html=f.html.clone()></div>
                    <div class="findings"><importance::Importance views=f.importance.clone() /></div>
                    <OpenFindings id open=f.open.clone() settle />
                }
                .into_any()
            }
        })}
        <SettleSaid settle />
    }
}

/// The study's reports, and a button that writes a new one from the
/// findings and opens it.
#[component]
fn Reports(id: i64) -> impl IntoView {
    use super::report::{CreateReport, study_reports};
    let list = Resource::new(move || id, study_reports);
    let write = ServerAction::<CreateReport>::new();
    Effect::new(move |_| {
        if let Some(Ok(report)) = write.value().get() {
            leptos_router::hooks::use_navigate()(&format!("/reports/{report}"), Default::default());
        }
    });
    view! {
        <div class="reports">
            <button id="write-report" on:click=move |_| { write.dispatch(CreateReport { study_id: id }); }>
                "Write a report from these findings"
            </button>
            {move || write.value().get().and_then(|r| r.err()).map(|e| view! { <p class="error">{error_text(&e)}</p> })}
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let reports = list.await.unwrap_or_default();
                    (!reports.is_empty()).then(|| view! {
                        <ul id="report-list">
                            {reports.into_iter().map(|r| view! {
                                <li><a href=format!("/reports/{}", r.id)>{r.title}</a>{format!(" (version {})", r.version)}</li>
                            }).collect_view()}
                        </ul>
                    })
                })}
            </Transition>
        </div>
    }
}
