//! Workers: Tunebook on other machines, running the trials this server
//! queues for them. Add one (its token is shown once, with the command to
//! start it), see which are up and what they run on, revoke a token.

use leptos::prelude::*;

use super::error_text;
#[cfg(feature = "ssr")]
use super::{answer, ops, service};
use crate::types::WorkerView;

#[server]
pub async fn list_workers() -> Result<Vec<WorkerView>, ServerFnError> {
    answer(ops::workers::list(&service()?.db).await)
}

/// Adds a worker; its token.
#[server]
pub async fn add_worker(name: String) -> Result<String, ServerFnError> {
    answer(ops::workers::add(&service()?.db, &name).await)
}

#[server]
pub async fn revoke_worker(name: String) -> Result<(), ServerFnError> {
    answer(ops::workers::revoke(&*service()?, &name).await)
}

/// Where the worker's command looks for its engine profiles: the folder
/// `tunebook worker` reads when run away from a checkout.
const WORKER_PROFILES: &str = "~/.config/tunebook/profiles";

#[component]
pub fn WorkersPage() -> impl IntoView {
    let add = ServerAction::<AddWorker>::new();
    let revoke = ServerAction::<RevokeWorker>::new();
    let workers =
        Resource::new(move || (add.version().get(), revoke.version().get()), |_| list_workers());
    let name = RwSignal::new(String::new());
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    // Where this server is reached, for the command a worker runs.
    let origin = move || {
        #[cfg(feature = "hydrate")]
        {
            web_sys::window().and_then(|w| w.location().origin().ok()).unwrap_or_default()
        }
        #[cfg(not(feature = "hydrate"))]
        {
            String::new()
        }
    };
    view! {
        <main class="workers" data-hydrated=move || hydrated.get().to_string()>
            <section class="panel">
                <h1>"Workers"</h1>
                <p class="muted">
                    "A worker is Tunebook on another machine: it runs the trials this server queues for it, with its own engines, and sends back what it measured. A study runs on workers when it names them (or any). Workers of one class of machine share a study's trials; each class is searched on its own."
                </p>
                <form
                    class="add-worker"
                    on:submit=move |ev| {
                        ev.prevent_default();
                        add.dispatch(AddWorker { name: name.get() });
                    }
                >
                    <label>
                        "Name "
                        <input
                            id="worker-name"
                            placeholder="gpu-box-1"
                            prop:value=move || name.get()
                            on:input=move |ev| name.set(event_target_value(&ev))
                        />
                    </label>
                    <button type="submit" id="add-worker">"Add a worker"</button>
                </form>
                {move || add.value().get().map(|result| match result {
                    Ok(token) => view! {
                        <div id="worker-token" class="notice">
                            <p>"Its token, shown only now. On the worker's machine, with its engine profiles in the folder the command names (change it to where they are), run:"</p>
                            <pre>{format!(
                                "TUNEBOOK_WORKER_TOKEN={token} tunebook worker --server {} --profiles {WORKER_PROFILES}",
                                origin()
                            )}</pre>
                        </div>
                    }.into_any(),
                    Err(e) => view! { <p class="error" id="worker-error">{error_text(&e)}</p> }.into_any(),
                })}
                {move || revoke.value().get().and_then(Result::err).map(|e| view! {
                    <p class="error">{error_text(&e)}</p>
                })}
                <Transition fallback=|| view! { <p class="muted">"Loading workers…"</p> }>
                    {move || Suspend::new(async move {
                        match workers.await {
                            Ok(list) if list.is_empty() => view! {
                                <p class="muted" id="no-workers">"No workers yet."</p>
                            }.into_any(),
                            Ok(list) => view! { <WorkerTable list revoke /> }.into_any(),
                            Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                        }
                    })}
                </Transition>
            </section>
        </main>
    }
}

#[component]
fn WorkerTable(list: Vec<WorkerView>, revoke: ServerAction<RevokeWorker>) -> impl IntoView {
    view! {
        <table class="trials" id="workers">
            <thead>
                <tr>
                    <th>"name"</th>
                    <th>"state"</th>
                    <th>"class of machine"</th>
                    <th>"hardware"</th>
                    <th>"profiles"</th>
                    <th></th>
                </tr>
            </thead>
            <tbody>
                {list.into_iter().map(|w| {
                    let state = if w.revoked {
                        "revoked"
                    } else if w.up {
                        "up"
                    } else if w.last_seen_ms.is_some() {
                        "not heard from"
                    } else {
                        "never connected"
                    };
                    let name = w.name.clone();
                    view! {
                        <tr data-worker=w.name.clone() data-state=state>
                            <td>{w.name.clone()}</td>
                            <td>{state}</td>
                            <td>{w.machine_class.clone().unwrap_or_default()}</td>
                            <td class="muted">{w.hardware.clone()}</td>
                            <td>{w.profiles.join(", ")}</td>
                            <td>
                                {(!w.revoked).then(|| view! {
                                    <button
                                        type="button"
                                        class="revoke"
                                        on:click=move |_| {
                                            revoke.dispatch(RevokeWorker { name: name.clone() });
                                        }
                                    >"Revoke"</button>
                                })}
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}
