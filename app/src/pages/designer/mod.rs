//! The study designer: a form (or a study file pasted in), checked by the
//! server as you type, with the planner's preview before launch.

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

mod rows;

use super::home::list_profiles;
#[cfg(feature = "ssr")]
use super::{answer, ops, service};
use super::{error_text, fmt_duration};
use crate::design::{FixedRow, Form, ObjectiveRow, VaryRow};
use crate::presets::PRESETS;
use crate::types::{CheckView, MetricView, ProfileView};
use rows::{FixedRowView, ObjectiveRowView, VaryRowView};

/// The metrics a study can optimize or bound.
#[server]
pub async fn list_metrics() -> Result<Vec<MetricView>, ServerFnError> {
    Ok(ops::catalog::metrics())
}

/// Checks a study (JSON or TOML): every problem, one a line, or the preview.
#[server]
pub async fn check_study(text: String) -> Result<CheckView, ServerFnError> {
    let def = answer(ops::studies::parse(&text))?;
    answer(ops::studies::check(&*service()?, &def).await)
}

/// Checks and starts a study; returns its id.
#[server]
pub async fn create_study(text: String) -> Result<i64, ServerFnError> {
    let def = answer(ops::studies::parse(&text))?;
    answer(ops::studies::create(&*service()?, &def).await)
}

#[component]
pub fn DesignerPage() -> impl IntoView {
    let info = Resource::new(
        || (),
        |_| async move { Ok::<_, ServerFnError>((list_profiles().await?, list_metrics().await?)) },
    );
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    view! {
        <main class="designer" data-hydrated=move || hydrated.get().to_string()>
            <h1>"Design a study"</h1>
            <Suspense fallback=|| view! { <p class="muted">"Loading engine profiles…"</p> }>
                {move || Suspend::new(async move {
                    match info.await {
                        Ok((profiles, _)) if profiles.is_empty() => view! {
                            <p class="error">"No engine profiles. Add a TOML file to the profiles folder."</p>
                        }.into_any(),
                        Ok((profiles, metrics)) => view! { <Designer profiles metrics /> }.into_any(),
                        Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </main>
    }
}

/// A text input bound to one field of the form.
fn text_input(
    form: RwSignal<Form>,
    id: &'static str,
    get: fn(&Form) -> &String,
    set: fn(&mut Form, String),
) -> impl IntoView {
    view! {
        <input
            id=id
            prop:value=move || form.with(|f| get(f).clone())
            on:input=move |ev| form.update(|f| set(f, event_target_value(&ev)))
        />
    }
}

/// A labelled checkbox bound to one switch of the form.
fn check_input(
    form: RwSignal<Form>,
    id: &'static str,
    get: fn(&Form) -> bool,
    set: fn(&mut Form, bool),
    label: &'static str,
) -> impl IntoView {
    probe_input(form, id, get, set, |_| false, label)
}

/// A probe's checkbox: ticked and held while an objective needs the probe
/// (`needed`), which then runs whatever the box said before.
fn probe_input(
    form: RwSignal<Form>,
    id: &'static str,
    get: fn(&Form) -> bool,
    set: fn(&mut Form, bool),
    needed: fn(&Form) -> bool,
    label: &'static str,
) -> impl IntoView {
    view! {
        <label class="check">
            <input
                type="checkbox"
                id=id
                prop:checked=move || form.with(|f| get(f) || needed(f))
                prop:disabled=move || form.with(needed)
                on:change=move |ev| form.update(|f| set(f, event_target_checked(&ev)))
            />
            {label}
            <Show when=move || form.with(needed)>
                <span class="muted needed">" (an objective needs it)"</span>
            </Show>
        </label>
    }
}

#[component]
fn Designer(profiles: Vec<ProfileView>, metrics: Vec<MetricView>) -> impl IntoView {
    let profiles = StoredValue::new(profiles);
    let metrics = StoredValue::new(metrics);
    let first = profiles.with_value(|p| p[0].clone());
    let form = RwSignal::new(Form {
        name: "my study".into(),
        profile: first.name.clone(),
        model: first.models.first().cloned().unwrap_or_default(),
        ..Form::default()
    });
    let next_key = StoredValue::new(100u32);
    let key = move || {
        next_key.update_value(|k| *k += 1);
        next_key.get_value()
    };
    // The form, or a study file pasted in (TOML or JSON).
    let file_mode = RwSignal::new(false);
    let file_text = RwSignal::new(String::new());
    let current = move || {
        profiles.with_value(|all| {
            all.iter().find(|p| p.name == form.with(|f| f.profile.clone())).cloned()
        })
    };
    let params = Memo::new(move |_| current().map(|p| p.params).unwrap_or_default());

    let draft = Memo::new(move |_| {
        if file_mode.get() {
            Ok(file_text.get())
        } else {
            form.with(Form::to_json).map(|v| v.to_string())
        }
    });
    let check = Resource::new(
        move || draft.get(),
        |draft| async move {
            match draft {
                Ok(text) => check_study(text)
                    .await
                    .map_err(|e| error_text(&e).lines().map(String::from).collect::<Vec<_>>()),
                Err(errors) => Err(errors),
            }
        },
    );

    let launch = ServerAction::<CreateStudy>::new();
    Effect::new(move |_| {
        if let Some(Ok(id)) = launch.value().get() {
            use_navigate()(&format!("/studies/{id}"), Default::default());
        }
    });
    let on_launch = move |_| {
        if let Ok(text) = draft.get_untracked() {
            launch.dispatch(CreateStudy { text });
        }
    };
    // The last study that checked, as a file: where the file view starts.
    let last_toml = StoredValue::new(String::new());
    let to_file = move |_| {
        if !file_mode.get_untracked() {
            file_text.set(last_toml.get_value());
        }
        file_mode.set(true);
    };

    view! {
        <div class="mode-switch" role="tablist">
            <button type="button" id="mode-form" class:active=move || !file_mode.get() on:click=move |_| file_mode.set(false)>
                "Form"
            </button>
            <button type="button" id="mode-file" class:active=move || file_mode.get() on:click=to_file>
                "Study file (TOML or JSON)"
            </button>
        </div>
        <div class="designer-grid">
            <form class="design-form" on:submit=|ev| ev.prevent_default()>
                <Show when=move || file_mode.get()>
                    <section class="panel">
                        <h2>"Study file"</h2>
                        <p class="muted">"The same format as " <code>"tunebook run study.toml"</code> "."</p>
                        <textarea
                            id="study-file"
                            rows="28"
                            prop:value=move || file_text.get()
                            on:input=move |ev| file_text.set(event_target_value(&ev))
                        ></textarea>
                    </section>
                </Show>
                <Show when=move || !file_mode.get()>
                <section class="panel">
                    <h2>"What and where"</h2>
                    <label>"Name" {text_input(form, "study-name", |f| &f.name, |f, v| f.name = v)}</label>
                    <label>
                        "Engine profile"
                        <select
                            id="study-profile"
                            prop:value=move || form.with(|f| f.profile.clone())
                            on:change=move |ev| {
                                let name = event_target_value(&ev);
                                let model = profiles.with_value(|all| {
                                    all.iter().find(|p| p.name == name).and_then(|p| p.models.first().cloned())
                                });
                                form.update(|f| {
                                    f.profile = name;
                                    f.model = model.unwrap_or_default();
                                });
                            }
                        >
                            {profiles.get_value().into_iter().map(|p| {
                                view! { <option value=p.name.clone()>{format!("{} ({})", p.name, p.engine)}</option> }
                            }).collect_view()}
                        </select>
                    </label>
                    <label>
                        "Model"
                        <select
                            id="study-model"
                            prop:value=move || form.with(|f| f.model.clone())
                            on:change=move |ev| form.update(|f| f.model = event_target_value(&ev))
                        >
                            {move || current().map(|p| p.models).unwrap_or_default().into_iter().map(|m| {
                                view! { <option value=m.clone()>{m.clone()}</option> }
                            }).collect_view()}
                        </select>
                    </label>
                </section>

                <section class="panel">
                    <h2>"Settings to vary"</h2>
                    <p class="muted">
                        "Values: a list (" <code>"f16, q8_0"</code> "), " <code>"bool"</code> ", or a range ("
                        <code>"4096..32768 log"</code> ", " <code>"1..8 step 1"</code> ", " <code>"0.8..0.95 points 4"</code>
                        "). The baseline is what every trial is compared with."
                    </p>
                    <div class="presets">
                        {move || {
                            let engine = current().map(|p| p.engine).unwrap_or_default();
                            PRESETS.iter().filter(|p| p.engines.contains(&engine.as_str())).map(|preset| {
                                let label = preset.label;
                                view! {
                                    <button type="button" class="preset" on:click=move |_| {
                                        let preset = PRESETS.iter().find(|p| p.label == label).expect("a preset");
                                        let mut k = next_key.get_value();
                                        // Layers to place where trials run on a GPU: here, or on workers.
                                        let gpu = current().is_some_and(|p| p.has_gpu)
                                            || !form.with_untracked(|f| f.machines.trim().is_empty());
                                        let rows = preset.rows_for(&params.get_untracked(), gpu, &mut k);
                                        form.update(|f| {
                                            f.vary = rows;
                                            f.constraints = preset.constraints.to_string();
                                            if !preset.objectives.is_empty() {
                                                f.objectives = preset.objectives.iter().map(|(metric, goal)| {
                                                    k += 1;
                                                    ObjectiveRow { key: k, metric: metric.to_string(), goal: goal.to_string(), ..Default::default() }
                                                }).collect();
                                            }
                                            if !preset.load_workload.is_empty() {
                                                f.load_workload = preset.load_workload.to_string();
                                            }
                                        });
                                        next_key.set_value(k);
                                    }>{format!("Preset: {label}")}</button>
                                }
                            }).collect_view()
                        }}
                    </div>
                    <table class="rows" id="vary-rows">
                        <thead><tr><th>"setting"</th><th>"values"</th><th>"baseline"</th><th></th></tr></thead>
                        <tbody>
                            <For each=move || form.with(|f| f.vary.clone()) key=|r| r.key let:row>
                                <VaryRowView form params row />
                            </For>
                        </tbody>
                    </table>
                    <button type="button" id="add-vary" on:click=move |_| {
                        let k = key();
                        form.update(|f| f.vary.push(VaryRow { key: k, ..Default::default() }));
                    }>"Add a setting to vary"</button>
                    {check_input(form, "fit-baseline", |f| f.fit_baseline, |f, v| f.fit_baseline = v,
                        "Baseline: what it leaves blank, llama.cpp's own fit chooses (llama-fit-params, for the memory free now)")}
                </section>

                <section class="panel">
                    <h2>"Fixed settings"</h2>
                    <table class="rows" id="fixed-rows">
                        <thead><tr><th>"setting"</th><th>"value"</th><th></th></tr></thead>
                        <tbody>
                            <For each=move || form.with(|f| f.fixed.clone()) key=|r| r.key let:row>
                                <FixedRowView form params row />
                            </For>
                        </tbody>
                    </table>
                    <button type="button" id="add-fixed" on:click=move |_| {
                        let k = key();
                        form.update(|f| f.fixed.push(FixedRow { key: k, ..Default::default() }));
                    }>"Add a fixed setting"</button>
                </section>

                <section class="panel">
                    <h2>"Constraints"</h2>
                    <p class="muted">
                        "One a line, e.g. " <code>"cache_type_k == cache_type_v"</code> " or "
                        <code>"flash_attn == \"on\" when cache_type_v != \"f16\""</code> "."
                    </p>
                    <textarea
                        id="constraints"
                        rows="3"
                        prop:value=move || form.with(|f| f.constraints.clone())
                        on:input=move |ev| form.update(|f| f.constraints = event_target_value(&ev))
                    ></textarea>
                </section>

                <section class="panel">
                    <h2>"Objectives"</h2>
                    <p class="muted">"Bounds are optional: " <code>"baseline - 1%"</code> ", " <code>"120 GiB"</code> ", " <code>"2s"</code> "."</p>
                    <table class="rows" id="objective-rows">
                        <thead><tr><th>"metric"</th><th>"better is"</th><th>"at least"</th><th>"at most"</th><th></th></tr></thead>
                        <tbody>
                            <For each=move || form.with(|f| f.objectives.clone()) key=|r| r.key let:row>
                                <ObjectiveRowView form metrics=metrics.get_value() row />
                            </For>
                        </tbody>
                    </table>
                    <button type="button" id="add-objective" on:click=move |_| {
                        let k = key();
                        form.update(|f| f.objectives.push(ObjectiveRow { key: k, metric: "decode_tps".into(), goal: "max".into(), ..Default::default() }));
                    }>"Add an objective"</button>
                </section>

                <section class="panel">
                    <h2>"Strategy and budget"</h2>
                    <label>
                        "Strategy"
                        <select
                            id="strategy"
                            prop:value=move || form.with(|f| f.strategy.clone())
                            on:change=move |ev| form.update(|f| f.strategy = event_target_value(&ev))
                        >
                            <option value="bayes">"model-based (Bayesian, all settings and pairs)"</option>
                            <option value="two_phase">"two-phase: each axis alone, then around the best"</option>
                            <option value="grid">"grid: every combination"</option>
                            <option value="random">"random"</option>
                            <option value="motpe">"model-based (multi-objective TPE)"</option>
                            <option value="bisect">"bisection: the largest (or smallest) setting that holds the bounds"</option>
                            <option value="llm">"proposed by an LLM"</option>
                        </select>
                    </label>
                    <Show when=move || form.with(|f| f.strategy == "llm")>
                        <label>"Endpoint (a name the server's --endpoints file gives)" {text_input(form, "endpoint", |f| &f.endpoint, |f, v| f.endpoint = v)}</label>
                    </Show>
                    <label>"Seed" {text_input(form, "seed", |f| &f.seed, |f, v| f.seed = v)}</label>
                    <label>"Maximum trials" {text_input(form, "max-trials", |f| &f.max_trials, |f, v| f.max_trials = v)}</label>
                    <label>"Maximum minutes" {text_input(form, "max-minutes", |f| &f.max_minutes, |f, v| f.max_minutes = v)}</label>
                    <label>"Stop after this many trials without gain" {text_input(form, "patience", |f| &f.patience, |f, v| f.patience = v)}</label>
                    <label>"Smallest gain that counts" {text_input(form, "min-gain", |f| &f.min_gain, |f, v| f.min_gain = v)}</label>
                    <label>"Re-run the baseline every N trials" {text_input(form, "rerun-every", |f| &f.rerun_every, |f, v| f.rerun_every = v)}</label>
                    <label>"Confirm the pick: pairs of re-runs against the baseline (0: name it as measured)" {text_input(form, "confirm-pairs", |f| &f.confirm_pairs, |f, v| f.confirm_pairs = v)}</label>
                    <label>"Settle what the findings leave open: trials (blank: a fifth of a budget of 30 or more; 0: none)" {text_input(form, "settle-trials", |f| &f.settle_trials, |f, v| f.settle_trials = v)}</label>
                    <p class="muted">"\"No effect\" is claimed only inside these margins; blank keeps ±3 % for speeds and memory, ±2 points for quality."</p>
                    <label>"Margin for speeds (%)" {text_input(form, "margin-speed", |f| &f.margin_speed, |f, v| f.margin_speed = v)}</label>
                    <label>"Margin for memory (%)" {text_input(form, "margin-memory", |f| &f.margin_memory, |f, v| f.margin_memory = v)}</label>
                    <label>"Margin for quality (points)" {text_input(form, "margin-quality", |f| &f.margin_quality, |f, v| f.margin_quality = v)}</label>
                    <label>
                        "Run on workers (blank: this server's engine; names separated by commas, or any)"
                        {text_input(form, "machines", |f| &f.machines, |f, v| f.machines = v)}
                    </label>
                    <p class="muted">"Workers of one class of machine share the trials, one each at a time; each class is searched on its own, from its own baseline."</p>
                </section>

                <section class="panel">
                    <h2>"Probes"</h2>
                    <label>"Prompt tokens" {text_input(form, "prompt-tokens", |f| &f.prompt_tokens, |f, v| f.prompt_tokens = v)}</label>
                    <label>"Tokens to generate" {text_input(form, "n-predict", |f| &f.n_predict, |f, v| f.n_predict = v)}</label>
                    <label>"Repeats" {text_input(form, "repeats", |f| &f.repeats, |f, v| f.repeats = v)}</label>
                    {probe_input(form, "quality", |f| f.quality, |f, v| f.quality = v,
                        |f| f.needs(&["quality_score"]), "Quality: the known-answer prompt suite")}
                    {probe_input(form, "kld", |f| f.kld, |f, v| f.kld = v,
                        |f| f.needs(&crate::design::divergence()),
                        "Quality: KL divergence from the baseline (llama-perplexity)")}
                    <label>"Context recall: sizes in tokens (blank: none)" {text_input(form, "context-sizes", |f| &f.context_sizes, |f, v| f.context_sizes = v)}</label>
                    <label>"Context recall: depths (0 to 1)" {text_input(form, "context-depths", |f| &f.context_depths, |f, v| f.context_depths = v)}</label>
                    <label>"Serving load: workload (chat, summary, code, agent, synthetic, or a file in the server's workloads folder; blank: none)" {text_input(form, "load-workload", |f| &f.load_workload, |f, v| f.load_workload = v)}</label>
                    <label>"Serving load: arrivals a second" {text_input(form, "load-rates", |f| &f.load_rates, |f, v| f.load_rates = v)}</label>
                    <label>"Serving load: p99 time to first token (ms; blank: not judged)" {text_input(form, "load-ttft", |f| &f.load_ttft_ms, |f, v| f.load_ttft_ms = v)}</label>
                    <label>"Serving load: p99 gap between tokens (ms; blank: not judged)" {text_input(form, "load-itl", |f| &f.load_itl_ms, |f, v| f.load_itl_ms = v)}</label>
                </section>
                </Show>
            </form>

            <aside class="panel preview" aria-live="polite">
                <h2>"Before it runs"</h2>
                // The check is read only in here: read outside, it would
                // suspend the whole page, and the form with it, as you type.
                <Transition fallback=|| view! { <p class="muted">"Checking…"</p> }>
                    {move || Suspend::new(async move {
                        let result = check.await;
                        let ok = result.is_ok();
                        let shown = match result {
                            Ok(c) => {
                                last_toml.set_value(c.toml.clone());
                                view! { <Preview check=c /> }.into_any()
                            }
                            Err(errors) => view! {
                                <ul id="study-errors" class="error">
                                    {errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
                                </ul>
                            }.into_any(),
                        };
                        view! {
                            {shown}
                            <button
                                type="button"
                                id="launch"
                                disabled=move || !ok || launch.pending().get()
                                on:click=on_launch
                            >
                                {move || if launch.pending().get() { "Starting…" } else { "Launch the study" }}
                            </button>
                        }
                    })}
                </Transition>
                <p id="launch-error" class="error" role="alert">
                    {move || match launch.value().get() {
                        Some(Err(e)) => error_text(&e),
                        _ => String::new(),
                    }}
                </p>
            </aside>
        </div>
    }
}

#[component]
fn Preview(check: CheckView) -> impl IntoView {
    let allowed =
        check.allowed.map_or("not counted (a very large space)".to_string(), |a| a.to_string());
    let estimate = check.estimate_s.map_or("unknown".to_string(), fmt_duration);
    view! {
        <dl id="study-preview" class="facts">
            <dt>"Configurations"</dt>
            <dd id="grid-size">{check.grid_size}</dd>
            <dt>"Allowed by the constraints"</dt>
            <dd id="allowed">{allowed}</dd>
            <dt>"Predicted not to fit"</dt>
            <dd id="not-fit">{check.not_fit}</dd>
            <dt>"Trials the budget runs"</dt>
            <dd id="planned">{check.planned_trials}</dd>
            <dt>"Estimated time"</dt>
            <dd id="estimate">{estimate} <span class="muted">{format!(" ({})", check.estimate_basis)}</span></dd>
        </dl>
        <ul class="muted">
            {check.not_fit_examples.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
        </ul>
        <p class="muted">
            "Baseline: "
            {check.baseline.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")}
        </p>
    }
}
