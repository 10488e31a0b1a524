//! Each objective's settings by how much they move it, drawn from the
//! findings: the page's answer to "which settings matter", each with its
//! interval, the "no effect" margin as a band, the undetermined marked.

use leptos::prelude::*;

use crate::types::ImportanceView;

#[component]
pub fn Importance(views: Vec<ImportanceView>) -> impl IntoView {
    let shown = !views.is_empty();
    let plots = views
        .into_iter()
        .map(|v| {
            let id = format!("importance-{}", v.metric);
            #[cfg(feature = "hydrate")]
            {
                let figure = tunebook_views::importance::figure(&v);
                let id = id.clone();
                Effect::new(move |_| crate::plot::draw(&id, &figure, None));
            }
            view! { <div id=id class="plot plot-importance" data-metric=v.metric.clone()></div> }
        })
        .collect_view();
    shown.then(|| {
        view! {
            <details class="section importance" open>
                <summary><h2>"Which settings matter, drawn"</h2></summary>
                <p class="muted">"Each setting's furthest change against the baseline, with its interval: 95 % for an effect, 90 % for a \"no effect\" (the equivalence test's); the grey band is the margin within which \"no effect\" is claimed; an open circle at zero is not determined yet."</p>
                {plots}
            </details>
        }
    })
}
