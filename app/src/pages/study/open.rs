//! What the findings leave open, under them: each setting whose effect on
//! a metric the trials could not tell yet, why, and a "settle this"
//! button that queues the runs that would tell it (or why runs cannot).

use leptos::prelude::*;

use super::SettleFinding;
use crate::pages::error_text;
use crate::types::OpenQuestion;

/// The open findings of study `id`, each with its button, which
/// dispatches `settle` (kept by the findings, so that what it said
/// outlives the list it was clicked in: the list is written anew as the
/// queued runs arrive).
#[component]
pub fn OpenFindings(
    id: i64,
    open: Vec<OpenQuestion>,
    settle: ServerAction<SettleFinding>,
) -> impl IntoView {
    if open.is_empty() {
        return ().into_any();
    }
    let items = open
        .into_iter()
        .map(|q| {
            let action = match (q.queued, q.runs, &q.cannot) {
                (n, _, _) if n > 0 => {
                    view! { <span class="muted queued">{format!("{n} runs queued")}</span> }
                        .into_any()
                }
                (_, Some(n), _) => {
                    let (setting, metric, at_pick) = (q.setting.clone(), q.metric.clone(), q.at_pick);
                    let click = move |_| {
                        settle.dispatch(SettleFinding {
                            id,
                            setting: setting.clone(),
                            metric: metric.clone(),
                            at_pick,
                        });
                    };
                    let title = if at_pick {
                        "Runs the pick interleaved with the pick changed in this setting alone, then works the findings out again"
                    } else {
                        "Runs the baseline interleaved with the baseline changed in this setting alone, then works the findings out again"
                    };
                    // Honest about a plan that only goes toward it.
                    let label = match q.needed {
                        Some(about) => format!("Run {n} toward it (about {about} needed)"),
                        None => format!("Settle this ({n} runs)"),
                    };
                    view! {
                        <button type="button" class="settle" title=title disabled=move || settle.pending().get() on:click=click>
                            {label}
                        </button>
                    }
                    .into_any()
                }
                (_, None, Some(why)) => {
                    let mut said = why.clone();
                    if let Some(first) = said.get(..1) {
                        said.replace_range(..1, &first.to_uppercase());
                    }
                    view! { <span class="muted cannot">{format!("{said}.")}</span> }.into_any()
                }
                _ => ().into_any(),
            };
            view! {
                <li class="open-finding" data-setting=q.setting.clone() data-metric=q.metric.clone() data-at-pick=q.at_pick.to_string()>
                    <code>{q.setting.clone()}</code>
                    {format!(" on {}{}: {}. ", q.label, if q.at_pick { " at the pick" } else { "" }, q.why)}
                    {action}
                </li>
            }
        })
        .collect_view();
    view! {
        <section id="open-findings">
            <h3>"What the trials have not settled"</h3>
            <ul>{items}</ul>
        </section>
    }
    .into_any()
}

/// What the last "settle this" did: the trials it queued, or why not.
#[component]
pub fn SettleSaid(settle: ServerAction<SettleFinding>) -> impl IntoView {
    move || {
        settle.value().get().map(|r| match r {
            Ok(s) => {
                let said = format!(
                    "Queued trials {} to settle `{}` on {}{}.",
                    ids(&s.trials),
                    s.setting,
                    s.metric,
                    if s.at_pick { " at the pick" } else { "" }
                );
                view! { <p class="queued-now" id="settle-queued">{said}</p> }.into_any()
            }
            Err(e) => {
                view! { <p class="error" role="alert" id="settle-error">{error_text(&e)}</p> }
                    .into_any()
            }
        })
    }
}

/// Trial ids as a short range where they follow each other.
fn ids(list: &[i64]) -> String {
    match (list.first(), list.last()) {
        (Some(a), Some(b)) if list.len() > 1 && b - a + 1 == list.len() as i64 => {
            format!("{a}–{b}")
        }
        _ => list.iter().map(i64::to_string).collect::<Vec<_>>().join(", "),
    }
}
