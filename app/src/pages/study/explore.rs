//! A study's results seen from other sides than the Pareto front: the effect
//! of each varied setting on a metric (every trial, grouped by value), the
//! best so far as trials finished, two settings at once (a grid of cells,
//! each its trials' median), and parallel coordinates over every setting.
//! All four come from one answer of the server: the done trials' values of
//! one metric and their settings.

use leptos::prelude::*;

#[cfg(feature = "hydrate")]
use super::api::study_pareto;
use crate::pages::MachinePicker;
use crate::plot::{best_so_far_figure, effect_figure, parallel_figure};
use crate::types::{ObjectiveView, ParetoView};

#[cfg_attr(not(feature = "hydrate"), allow(unused_variables))]
#[component]
pub fn Explore(id: i64, objectives: Vec<ObjectiveView>, finished: Signal<u64>) -> impl IntoView {
    let metrics = crate::pages::metric_choices(&objectives, &crate::pages::more_metrics());
    let metric = RwSignal::new(metrics[0].0.clone());
    let setting = RwSignal::new(String::new());
    // The second setting of the two-at-once grid ("": the next one).
    let setting2 = RwSignal::new(String::new());
    // Asked for only while the panel is open: the page of a large study
    // stays quick, and what is not looked at costs nothing.
    let open = RwSignal::new(false);
    let view_: RwSignal<Option<ParetoView>> = RwSignal::new(None);
    // The class of machine shown, in a study run on several ("": the first).
    let machine = RwSignal::new(String::new());
    #[cfg(feature = "hydrate")]
    crate::pages::keep_fetched(
        move || {
            finished.track();
            (open.get(), metric.get(), machine.get())
        },
        move |(open, m, on)| async move {
            if open { study_pareto(id, m, true, on).await.map(Some) } else { Ok(None) }
        },
        view_,
        false,
    );
    let metrics = StoredValue::new(metrics);
    let label = move |m: &str| {
        metrics.with_value(|all| {
            all.iter().find(|(n, _)| n == m).map_or(m.to_string(), |(_, l)| l.clone())
        })
    };
    // The setting shown in the effect plot: the one chosen, else the first.
    let shown = Memo::new(move |_| {
        let chosen = setting.get();
        view_.with(|v| {
            let names: Vec<&String> = v.as_ref()?.settings.iter().map(|s| &s.name).collect();
            names.iter().find(|n| ***n == chosen).or(names.first()).map(|n| n.to_string())
        })
    });
    // The second setting: the one chosen, else the first that is not the first.
    let shown2 = Memo::new(move |_| {
        let (chosen, first) = (setting2.get(), shown.get());
        view_.with(|v| {
            let names: Vec<&String> = v.as_ref()?.settings.iter().map(|s| &s.name).collect();
            let other = |n: &&&String| Some(**n) != first.as_ref();
            names
                .iter()
                .find(|n| ***n == chosen && other(n))
                .or(names.iter().find(other))
                .map(|n| n.to_string())
        })
    });
    let figures = Memo::new(move |_| {
        let shown = shown.get();
        let shown2 = shown2.get();
        view_.with(|v| {
            let v = v.as_ref()?;
            let title = label(&v.metrics[0]);
            let maximize = v.goals.first().is_none_or(|g| g == "max");
            let trail: Vec<(i64, f64)> =
                v.points.iter().map(|p| (p.trial_id, p.values[0])).collect();
            let best = best_so_far_figure(&trail, maximize, &title);
            let effect = shown.clone().and_then(|name| {
                let s = v.settings.iter().position(|s| s.name == name)?;
                let points: Vec<(i64, u32, f64)> =
                    v.points.iter().map(|p| (p.trial_id, p.config[s], p.values[0])).collect();
                Some(effect_figure(&v.settings[s].values, &points, &name, &title))
            });
            let pair = shown.as_ref().zip(shown2).and_then(|(a, b)| {
                let i = v.settings.iter().position(|s| &s.name == a)?;
                let j = v.settings.iter().position(|s| s.name == b)?;
                let points: Vec<(u32, u32, f64)> =
                    v.points.iter().map(|p| (p.config[i], p.config[j], p.values[0])).collect();
                let (sa, sb) = (&v.settings[i], &v.settings[j]);
                Some(tunebook_views::pair::figure(
                    (a, &sa.values),
                    (&b, &sb.values),
                    &points,
                    &title,
                ))
            });
            let settings: Vec<(String, Vec<String>)> =
                v.settings.iter().map(|s| (s.name.clone(), s.values.clone())).collect();
            let configs: Vec<Vec<u32>> = v.points.iter().map(|p| p.config.clone()).collect();
            let values: Vec<f64> = v.points.iter().map(|p| p.values[0]).collect();
            let parallel = (!settings.is_empty())
                .then(|| parallel_figure(&settings, &configs, &values, &title));
            Some((v.points.len(), effect, best, parallel, pair))
        })
    });
    #[cfg(feature = "hydrate")]
    {
        let click = crate::plot::open_trial_on_click();
        Effect::new(move |_| {
            figures.with(|f| {
                let Some((_, effect, best, parallel, pair)) = f.as_ref().filter(|f| f.0 > 0) else {
                    return;
                };
                if let Some(fig) = effect {
                    crate::plot::draw("effect-plot", fig, Some(&click));
                }
                crate::plot::draw("best-plot", best, Some(&click));
                if let Some(fig) = parallel {
                    crate::plot::draw("parallel-plot", fig, Some(&click));
                }
                if let Some(fig) = pair {
                    crate::plot::draw("pair-plot", fig, None);
                }
            })
        });
    }
    let metric_options = move || {
        metrics.with_value(|all| {
            all.iter()
                .map(|(name, l)| {
                    let is = *name == metric.get_untracked();
                    view! { <option value=name.clone() selected=is>{l.clone()}</option> }
                })
                .collect_view()
        })
    };
    let setting_options = move || {
        view_.with(|v| {
            v.as_ref().map(|v| {
                v.settings
                    .iter()
                    .map(|s| {
                        let is = Some(&s.name) == shown.get_untracked().as_ref();
                        view! { <option value=s.name.clone() selected=is>{s.name.clone()}</option> }
                    })
                    .collect_view()
            })
        })
    };
    let setting2_options = move || {
        view_.with(|v| {
            v.as_ref().map(|v| {
                v.settings
                    .iter()
                    .map(|s| {
                        let is = Some(&s.name) == shown2.get_untracked().as_ref();
                        view! { <option value=s.name.clone() selected=is>{s.name.clone()}</option> }
                    })
                    .collect_view()
            })
        })
    };
    let has_points = move || figures.with(|f| f.as_ref().is_some_and(|f| f.0 > 0));
    view! {
        <details id="explore">
        // A click (or Enter, or Space) on the summary toggles the panel.
        <summary on:click=move |_| open.update(|o| *o = !*o)>
            "The effect of each setting, the best so far, two settings and every setting at once"
        </summary>
        <div class="plot-axes">
            <label>"metric " <select id="explore-metric" on:change=move |ev| metric.set(event_target_value(&ev))>{metric_options}</select></label>
            <label>"setting " <select id="explore-setting" on:change=move |ev| setting.set(event_target_value(&ev))>{setting_options}</select></label>
            <label>"with " <select id="explore-setting2" on:change=move |ev| setting2.set(event_target_value(&ev))>{setting2_options}</select></label>
            <MachinePicker
                id="explore-machine"
                choices=Signal::derive(move || view_.with(|v| v.as_ref().map(|v| (v.machines.clone(), v.machine.clone()))))
                machine
            />
        </div>
        <Show when=move || open.get() && !has_points()>
            <p class="muted" id="explore-empty">"No finished trial with this metric yet."</p>
        </Show>
        <div class="explore">
            <figure>
                <figcaption>"Effect of the setting (every trial, by value)"</figcaption>
                <div id="effect-plot" class="plot"></div>
            </figure>
            <figure>
                <figcaption>"Best so far"</figcaption>
                <div id="best-plot" class="plot"></div>
            </figure>
        </div>
        <figure>
            <figcaption>"Two settings at once (each cell the median of its trials)"</figcaption>
            <div id="pair-plot" class="plot"></div>
        </figure>
        <figure>
            <figcaption>"Every setting at once (drag along an axis to filter)"</figcaption>
            <div id="parallel-plot" class="plot"></div>
        </figure>
        </details>
    }
}
