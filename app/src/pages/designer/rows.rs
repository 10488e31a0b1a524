//! The designer's rows: a setting to vary, a setting to fix, an objective
//! or bound, each with its own controls.

use leptos::prelude::*;

use crate::design::{FixedRow, Form, ObjectiveRow, VaryRow};
use crate::types::{MetricView, ParamView};

/// The domain of a setting, in words, under its row.
fn domain_hint(p: &ParamView) -> String {
    let range = match (p.min, p.max) {
        (Some(lo), Some(hi)) => format!(" {lo}..{hi}"),
        _ => String::new(),
    };
    let choices =
        if p.choices.is_empty() { String::new() } else { format!(": {}", p.choices.join(", ")) };
    format!("{} ({}{range}{choices}; default {}) — {}", p.flag, p.kind, p.default, p.help)
}

fn setting_select(
    params: Memo<Vec<ParamView>>,
    selected: String,
    on_change: impl Fn(String) + 'static,
) -> impl IntoView {
    view! {
        <select class="setting" on:change=move |ev| on_change(event_target_value(&ev))>
            <option value="" selected=selected.is_empty()>"choose…"</option>
            {move || params.get().into_iter().map(|p| {
                let is = p.name == selected;
                view! { <option value=p.name.clone() selected=is>{p.name.clone()}</option> }
            }).collect_view()}
        </select>
    }
}

#[component]
pub(super) fn VaryRowView(
    form: RwSignal<Form>,
    params: Memo<Vec<ParamView>>,
    row: VaryRow,
) -> impl IntoView {
    let k = row.key;
    let edit = move |f: fn(&mut VaryRow, String), v: String| {
        form.update(|form| {
            if let Some(r) = form.vary.iter_mut().find(|r| r.key == k) {
                f(r, v);
            }
        });
    };
    let hint = move || {
        let name = form.with(|f| f.vary.iter().find(|r| r.key == k).map(|r| r.name.clone()));
        params.with(|ps| ps.iter().find(|p| Some(&p.name) == name.as_ref()).map(domain_hint))
    };
    view! {
        <tr data-key=k>
            <td>{setting_select(params, row.name.clone(), move |v| edit(|r, v| r.name = v, v))}</td>
            <td><input class="values" prop:value=row.values.clone() on:input=move |ev| edit(|r, v| r.values = v, event_target_value(&ev)) /></td>
            <td><input class="baseline" prop:value=row.baseline.clone() on:input=move |ev| edit(|r, v| r.baseline = v, event_target_value(&ev)) /></td>
            <td><button type="button" class="remove" aria-label="remove" on:click=move |_| form.update(|f| f.vary.retain(|r| r.key != k))>"×"</button></td>
        </tr>
        <tr class="hint"><td colspan="4" class="muted">{hint}</td></tr>
    }
}

#[component]
pub(super) fn FixedRowView(
    form: RwSignal<Form>,
    params: Memo<Vec<ParamView>>,
    row: FixedRow,
) -> impl IntoView {
    let k = row.key;
    let edit = move |f: fn(&mut FixedRow, String), v: String| {
        form.update(|form| {
            if let Some(r) = form.fixed.iter_mut().find(|r| r.key == k) {
                f(r, v);
            }
        });
    };
    view! {
        <tr data-key=k>
            <td>
                <input class="setting-name" list="setting-names" prop:value=row.name.clone()
                    on:input=move |ev| edit(|r, v| r.name = v, event_target_value(&ev)) />
                <datalist id="setting-names">
                    {move || params.get().into_iter().map(|p| view! { <option value=p.name.clone() /> }).collect_view()}
                </datalist>
            </td>
            <td><input class="value" prop:value=row.value.clone() on:input=move |ev| edit(|r, v| r.value = v, event_target_value(&ev)) /></td>
            <td><button type="button" class="remove" aria-label="remove" on:click=move |_| form.update(|f| f.fixed.retain(|r| r.key != k))>"×"</button></td>
        </tr>
    }
}

#[component]
pub(super) fn ObjectiveRowView(
    form: RwSignal<Form>,
    metrics: Vec<MetricView>,
    row: ObjectiveRow,
) -> impl IntoView {
    let k = row.key;
    let edit = move |f: fn(&mut ObjectiveRow, String), v: String| {
        form.update(|form| {
            if let Some(r) = form.objectives.iter_mut().find(|r| r.key == k) {
                f(r, v);
            }
        });
    };
    let goal = row.goal.clone();
    // The metrics, then the settings the form varies or fixes, as they
    // stand when the list is drawn.
    // A memo: the options are drawn again only when the list changes, not
    // on every keystroke elsewhere in the form.
    let choices = Memo::new(move |_| {
        let mut all = metrics.clone();
        all.extend(form.with(|f| f.setting_measures()));
        all
    });
    let current = move || {
        form.with_untracked(|f| f.objectives.iter().find(|r| r.key == k).map(|r| r.metric.clone()))
    };
    view! {
        <tr data-key=k>
            <td>
                <select class="metric" on:change=move |ev| {
                    let m = event_target_value(&ev);
                    let g = choices.with_untracked(|all| all.iter().find(|x| x.name == m).map(|x| x.goal.clone())).unwrap_or_default();
                    edit(|r, v| r.metric = v, m);
                    edit(|r, v| r.goal = v, g);
                }>
                    {move || choices.get().into_iter().map(|m| {
                        let is = current().is_some_and(|c| c == m.name);
                        view! { <option value=m.name.clone() selected=is>{m.label.clone()}</option> }
                    }).collect_view()}
                </select>
            </td>
            <td>
                <select class="goal" prop:value=move || form.with(|f| f.objectives.iter().find(|r| r.key == k).map(|r| r.goal.clone()).unwrap_or(goal.clone()))
                    on:change=move |ev| edit(|r, v| r.goal = v, event_target_value(&ev))>
                    <option value="max">"higher"</option>
                    <option value="min">"lower"</option>
                </select>
            </td>
            <td><input class="min" prop:value=row.min.clone() on:input=move |ev| edit(|r, v| r.min = v, event_target_value(&ev)) /></td>
            <td><input class="max" prop:value=row.max.clone() on:input=move |ev| edit(|r, v| r.max = v, event_target_value(&ev)) /></td>
            <td><button type="button" class="remove" aria-label="remove" on:click=move |_| form.update(|f| f.objectives.retain(|r| r.key != k))>"×"</button></td>
        </tr>
    }
}
