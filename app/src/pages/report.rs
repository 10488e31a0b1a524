//! Reports: a notebook of cells written from a study's findings, which its
//! owner edits, reorders, extends and publishes (`/reports/:id`), and what
//! a read-only link shows (`/share/:token`). Every change is saved as a new
//! version at once; the server renders each cell (markdown sanitized) and
//! builds each plot's figure, so the page, the link and the exports show
//! the same thing.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use super::error_text;
#[cfg(feature = "ssr")]
use super::{answer, ops, service};
use crate::types::{Cell, CellBody, Chart, Notebook, RenderedCell, ReportView};

#[server]
pub async fn create_report(study_id: i64) -> Result<i64, ServerFnError> {
    answer(ops::reports::create(&service()?.reports(), study_id).await.map(|view| view.id))
}

#[server]
pub async fn study_reports(
    study_id: i64,
) -> Result<Vec<crate::types::ReportSummary>, ServerFnError> {
    answer(ops::reports::list(&service()?.reports(), study_id).await)
}

#[server]
pub async fn get_report(id: i64, version: Option<i64>) -> Result<ReportView, ServerFnError> {
    answer(ops::reports::open(&service()?.reports(), id, version).await)
}

#[server(input = leptos::server_fn::codec::Json)]
pub async fn save_report(
    id: i64,
    base: i64,
    title: String,
    notebook: Notebook,
) -> Result<ReportView, ServerFnError> {
    answer(ops::reports::save(&service()?.reports(), id, base, &title, notebook).await)
}

#[server]
pub async fn regenerate_report(id: i64, base: i64) -> Result<ReportView, ServerFnError> {
    answer(ops::reports::regenerate(&service()?.reports(), id, base).await)
}

#[server]
pub async fn restore_report(id: i64, base: i64, version: i64) -> Result<ReportView, ServerFnError> {
    answer(ops::reports::restore(&service()?.reports(), id, base, version).await)
}

#[server]
pub async fn publish_report(id: i64) -> Result<ReportView, ServerFnError> {
    answer(ops::reports::publish(&service()?.reports(), id).await.map(|(_, view)| view))
}

#[server]
pub async fn revoke_link(id: i64, token: String) -> Result<ReportView, ServerFnError> {
    let ctx = service()?.reports();
    answer(ops::reports::revoke_link(&ctx, &token).await)?;
    answer(ops::reports::open(&ctx, id, None).await)
}

#[server]
pub async fn write_prose(id: i64, base: i64) -> Result<ReportView, ServerFnError> {
    answer(ops::reports::prose(&service()?.reports(), id, base).await)
}

/// At a fixed path: report links work without a login.
#[server(endpoint = "shared_report")]
pub async fn get_shared(token: String) -> Result<ReportView, ServerFnError> {
    answer(ops::reports::shared(&service()?.reports(), &token).await)
}

/// A plot, table or configuration cell's parameters as one line of text,
/// which is how they are edited.
fn params_text(body: &CellBody) -> String {
    match body {
        CellBody::Markdown { text } => text.clone(),
        CellBody::Plot { chart: Chart::Pareto { x, y } } => format!("{x} {y}"),
        CellBody::Plot { chart: Chart::Effect { setting, metric } } => {
            format!("{setting} {metric}")
        }
        CellBody::Plot { chart: Chart::BestSoFar { metric } } => metric.clone(),
        CellBody::Table { metric, limit } => format!("{metric} {limit}"),
        CellBody::Config { trial } => trial.to_string(),
    }
}

/// What the edit box of a cell expects.
fn params_hint(body: &CellBody) -> &'static str {
    match body {
        CellBody::Markdown { .. } => "Markdown",
        CellBody::Plot { chart: Chart::Pareto { .. } } => {
            "two metrics: x y (decode_tps peak_rss_bytes)"
        }
        CellBody::Plot { chart: Chart::Effect { .. } } => {
            "a setting and a metric (threads decode_tps)"
        }
        CellBody::Plot { chart: Chart::BestSoFar { .. } } => "a metric (decode_tps)",
        CellBody::Table { .. } => "a metric and how many trials (decode_tps 10)",
        CellBody::Config { .. } => "a trial number",
    }
}

/// `body` with its parameters read from `text`, or what is wrong with it.
fn with_params(body: &CellBody, text: &str) -> Result<CellBody, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let wrong = || format!("expected {}", params_hint(body));
    Ok(match (body, words.as_slice()) {
        (CellBody::Markdown { .. }, _) => CellBody::Markdown { text: text.to_string() },
        (CellBody::Plot { chart: Chart::Pareto { .. } }, [x, y]) => {
            CellBody::Plot { chart: Chart::Pareto { x: x.to_string(), y: y.to_string() } }
        }
        (CellBody::Plot { chart: Chart::Effect { .. } }, [s, m]) => CellBody::Plot {
            chart: Chart::Effect { setting: s.to_string(), metric: m.to_string() },
        },
        (CellBody::Plot { chart: Chart::BestSoFar { .. } }, [m]) => {
            CellBody::Plot { chart: Chart::BestSoFar { metric: m.to_string() } }
        }
        (CellBody::Table { .. }, [m, n]) => {
            CellBody::Table { metric: m.to_string(), limit: n.parse().map_err(|_| wrong())? }
        }
        (CellBody::Config { .. }, [t]) => {
            CellBody::Config { trial: t.parse().map_err(|_| wrong())? }
        }
        _ => return Err(wrong()),
    })
}

/// A name for a new cell, unique within its report.
fn new_cell_id(cells: &[Cell]) -> String {
    let n = (1..).find(|n| !cells.iter().any(|c| c.id == format!("user-{n}"))).unwrap_or(0);
    format!("user-{n}")
}

/// A new cell of the kind the "add" menu names.
fn new_cell(kind: &str, cells: &[Cell], view: &ReportView) -> Cell {
    let metric = || {
        view.notebook
            .cells
            .iter()
            .find_map(|c| match &c.body {
                CellBody::Table { metric, .. } => Some(metric.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "decode_tps".into())
    };
    let body = match kind {
        "pareto" => {
            CellBody::Plot { chart: Chart::Pareto { x: metric(), y: "peak_rss_bytes".into() } }
        }
        "best_so_far" => CellBody::Plot { chart: Chart::BestSoFar { metric: metric() } },
        "table" => CellBody::Table { metric: metric(), limit: 10 },
        _ => CellBody::Markdown { text: "New text: *edit me*.".into() },
    };
    Cell { id: new_cell_id(cells), body, origin: None, edited: true, machine: None }
}

fn kind_of(body: &CellBody) -> &'static str {
    match body {
        CellBody::Markdown { .. } => "markdown",
        CellBody::Plot { .. } => "plot",
        CellBody::Table { .. } => "table",
        CellBody::Config { .. } => "config",
    }
}

/// Draws every plot cell's figure into its place.
#[cfg_attr(not(feature = "hydrate"), allow(unused_variables))]
fn draw_plots(cells: Signal<Vec<RenderedCell>>) {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        cells.with(|cells| {
            for (i, c) in cells.iter().enumerate() {
                if let Some(f) = &c.figure {
                    crate::plot::draw(&format!("cell-plot-{i}"), f, None);
                }
            }
        })
    });
}

/// One cell as shown (no controls).
#[component]
fn CellView(i: usize, cell: RenderedCell) -> impl IntoView {
    let plot = cell
        .figure
        .is_some()
        .then(|| view! { <div id=format!("cell-plot-{i}") class="plot"></div> });
    // Sanitized on the server (pulldown-cmark, then ammonia).
    view! {
        {plot}
        <div class="cell-body" inner_html=cell.html></div>
    }
}

#[component]
pub fn ReportPage() -> impl IntoView {
    let id = super::id_param();
    let report = Resource::new(id, |id| get_report(id, None));
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    view! {
        <main class="report" data-hydrated=move || hydrated.get().to_string()>
            <Transition fallback=|| view! { <p class="muted">"Loading the report…"</p> }>
                {move || Suspend::new(async move {
                    match report.await {
                        Ok(r) => view! { <Editor initial=r /> }.into_any(),
                        Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                    }
                })}
            </Transition>
        </main>
    }
}

/// The owner's view: cells with their controls, versions, links, exports.
#[component]
fn Editor(initial: ReportView) -> impl IntoView {
    let state = RwSignal::new(initial);
    let error: RwSignal<Option<String>> = RwSignal::new(None);
    let editing: RwSignal<Option<String>> = RwSignal::new(None);
    let text = RwSignal::new(String::new());
    let title = RwSignal::new(state.get_untracked().title);
    let add_kind = RwSignal::new("markdown".to_string());

    // Runs a change against the server; the answer replaces the page's report.
    let apply = move |change: std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<ReportView, ServerFnError>>>,
    >| {
        leptos::task::spawn_local(async move {
            match change.await {
                Ok(v) => {
                    title.set(v.title.clone());
                    state.set(v);
                    error.set(None);
                    editing.set(None);
                }
                Err(e) => error.set(Some(error_text(&e))),
            }
        });
    };
    // Saves `cells` as the next version.
    let save = move |cells: Vec<Cell>| {
        let v = state.get_untracked();
        let notebook = Notebook { cells, dismissed: v.notebook.dismissed.clone() };
        apply(Box::pin(save_report(v.id, v.latest, title.get_untracked(), notebook)));
    };
    let cells_now = move || state.with_untracked(|v| v.notebook.cells.clone());
    let rendered = Signal::derive(move || state.with(|v| v.cells.clone()));
    draw_plots(rendered);
    let old = move || state.with(|v| v.version < v.latest);

    let cell_views = move || {
        let past = old();
        state.with(|v| {
            let n = v.cells.len();
            v.cells
                .iter()
                .enumerate()
                .map(|(i, rc)| {
                    let id = rc.cell.id.clone();
                    let body = rc.cell.body.clone();
                    let kind = kind_of(&body);
                    let hint = params_hint(&body);
                    let is_editing = { let id = id.clone(); move || editing.get().as_deref() == Some(id.as_str()) };
                    let start_edit = { let (id, body) = (id.clone(), body.clone()); move |_| { text.set(params_text(&body)); editing.set(Some(id.clone())); } };
                    let finish_edit = {
                        let body = body.clone();
                        move |_| match with_params(&body, &text.get_untracked()) {
                            Ok(new_body) => {
                                let mut cells = cells_now();
                                cells[i].body = new_body;
                                save(cells);
                            }
                            Err(e) => error.set(Some(format!("cell {}: {e}", i + 1))),
                        }
                    };
                    let shift = move |by: isize| {
                        let mut cells = cells_now();
                        let to = i as isize + by;
                        if to >= 0 && (to as usize) < cells.len() {
                            cells.swap(i, to as usize);
                            save(cells);
                        }
                    };
                    let delete = move |_| {
                        let mut cells = cells_now();
                        cells.remove(i);
                        save(cells);
                    };
                    let add_below = move |_| {
                        let mut cells = cells_now();
                        let cell = state.with_untracked(|v| new_cell("markdown", &cells, v));
                        cells.insert(i + 1, cell);
                        save(cells);
                    };
                    let textarea = kind == "markdown";
                    view! {
                        <section class="cell" data-cell-id=id.clone() data-kind=kind data-edited=rc.cell.edited.to_string() data-origin=rc.cell.origin.clone().unwrap_or_default()>
                            <div class="cell-tools" hidden=past>
                                <button class="cell-edit" on:click=start_edit>"Edit"</button>
                                <button class="cell-up" disabled=i == 0 on:click=move |_| shift(-1)>"↑"</button>
                                <button class="cell-down" disabled=i + 1 == n on:click=move |_| shift(1)>"↓"</button>
                                <button class="cell-delete" on:click=delete>"Delete"</button>
                                <button class="cell-add" on:click=add_below>"+ text below"</button>
                                {rc.cell.edited.then(|| view! { <span class="muted">" edited: regenerating leaves it"</span> })}
                            </div>
                            <Show when=is_editing.clone() fallback={ let rc = rc.clone(); move || view! { <CellView i cell=rc.clone() /> } }>
                                <div class="cell-editor">
                                    {if textarea {
                                        view! { <textarea class="cell-text" rows="10" prop:value=move || text.get() on:input=move |ev| text.set(event_target_value(&ev))></textarea> }.into_any()
                                    } else {
                                        view! { <input class="cell-text" type="text" placeholder=hint prop:value=move || text.get() on:input=move |ev| text.set(event_target_value(&ev)) /> }.into_any()
                                    }}
                                    <p class="muted">{hint}</p>
                                    <button class="cell-save" on:click=finish_edit.clone()>"Save"</button>
                                    <button class="cell-cancel" on:click=move |_| editing.set(None)>"Cancel"</button>
                                </div>
                            </Show>
                        </section>
                    }
                })
                .collect_view()
        })
    };

    let versions = move || {
        state.with(|v| {
            v.versions
                .iter()
                .map(|x| {
                    let selected = x.version == v.version;
                    view! { <option value=x.version selected=selected>{format!("version {} — {}", x.version, x.note)}</option> }
                })
                .collect_view()
        })
    };
    let view_version = move |ev| {
        let Ok(version) = event_target_value(&ev).parse::<i64>() else { return };
        let id = state.with_untracked(|v| v.id);
        apply(Box::pin(get_report(id, Some(version))));
    };
    let restore = move |_| {
        let v = state.get_untracked();
        apply(Box::pin(restore_report(v.id, v.latest, v.version)));
    };
    let regenerate = move |_| {
        let v = state.get_untracked();
        apply(Box::pin(regenerate_report(v.id, v.latest)));
    };
    let prose = move |_| {
        let v = state.get_untracked();
        apply(Box::pin(write_prose(v.id, v.latest)));
    };
    let publish = move |_| {
        let id = state.with_untracked(|v| v.id);
        apply(Box::pin(publish_report(id)));
    };
    let save_title = move |_| save(cells_now());
    let add = move |_| {
        let mut cells = cells_now();
        let cell = state.with_untracked(|v| new_cell(&add_kind.get_untracked(), &cells, v));
        cells.push(cell);
        save(cells);
    };
    let links = move || {
        state.with(|v| {
            v.shares
                .iter()
                .map(|s| {
                    let token = s.token.clone();
                    let href = format!("/share/{}", s.token);
                    let revoke = move |_| {
                        let id = state.with_untracked(|v| v.id);
                        apply(Box::pin(revoke_link(id, token.clone())));
                    };
                    view! {
                        <li class="share" data-revoked=s.revoked.to_string()>
                            {if s.revoked {
                                view! { <span class="muted">{format!("{href} (revoked)")}</span> }.into_any()
                            } else {
                                view! { <a class="share-link" href=href.clone()>{href.clone()}</a> }.into_any()
                            }}
                            {format!(" — version {}", s.version)}
                            {(!s.revoked).then(|| view! { " " <button class="revoke" on:click=revoke>"Revoke"</button> })}
                        </li>
                    }
                })
                .collect_view()
        })
    };
    let id = state.with_untracked(|v| v.id);
    let study_id = state.with_untracked(|v| v.study_id);
    view! {
        <header class="report-head">
            <p class="muted"><a href=format!("/studies/{study_id}")>{move || state.with(|v| format!("Study: {}", v.study_name))}</a></p>
            <div class="report-title">
                <input id="report-title" type="text" prop:value=move || title.get() on:input=move |ev| title.set(event_target_value(&ev)) disabled=old />
                <button id="report-save-title" on:click=save_title disabled=old>"Rename"</button>
            </div>
            <div class="report-tools">
                <label>"Version " <select id="report-versions" on:change=view_version>{versions}</select></label>
                <span id="report-version" data-version=move || state.with(|v| v.version) data-latest=move || state.with(|v| v.latest)>
                    {move || state.with(|v| format!("showing version {} of {}", v.version, v.latest))}
                </span>
                <Show when=old>
                    <button id="report-restore" on:click=restore>"Restore this version"</button>
                </Show>
                <button id="report-regenerate" on:click=regenerate disabled=old title="Rewrites the cells written from the findings with what the data says now; cells you changed stay as they are">"Regenerate findings"</button>
                // Offered only where the server has a writer model to ask.
                <Show when=move || state.with(|v| v.writer)>
                    <button id="report-prose" on:click=prose disabled=old title="A language model rewrites the findings as prose, given only the findings; they stay in the report">"Rewrite as prose"</button>
                </Show>
                <button id="report-publish" on:click=publish disabled=old>"Publish a read-only link"</button>
                <a id="export-html" href=format!("/api/reports/{id}/export.html") download>"Export HTML"</a>
                <a id="export-md" href=format!("/api/reports/{id}/export.md") download>"Export markdown"</a>
            </div>
            {move || error.get().map(|e| view! { <p class="error" id="report-error">{e}</p> })}
            <ul id="report-links">{links}</ul>
        </header>
        <div id="cells">{cell_views}</div>
        <footer class="report-add" hidden=old>
            <label>"Add a cell " <select id="add-kind" on:change=move |ev| add_kind.set(event_target_value(&ev))>
                <option value="markdown">"text (markdown)"</option>
                <option value="pareto">"Pareto plot"</option>
                <option value="best_so_far">"best so far plot"</option>
                <option value="table">"table of the best trials"</option>
            </select></label>
            <button id="add-cell" on:click=add>"Add"</button>
        </footer>
    }
}

/// What a read-only link shows: the report as it was published.
#[component]
pub fn SharedPage() -> impl IntoView {
    let params = use_params_map();
    let token = move || params.with(|p| p.get("token").unwrap_or_default());
    let report = Resource::new(token, get_shared);
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    view! {
        <main class="report shared" data-hydrated=move || hydrated.get().to_string()>
            <Transition fallback=|| view! { <p class="muted">"Loading the report…"</p> }>
                {move || Suspend::new(async move {
                    match report.await {
                        Ok(r) => view! { <Shared r token=token() /> }.into_any(),
                        Err(e) => view! { <p class="error" id="shared-error">{error_text(&e)}</p> }.into_any(),
                    }
                })}
            </Transition>
        </main>
    }
}

#[component]
fn Shared(r: ReportView, token: String) -> impl IntoView {
    let cells = Signal::derive({
        let cells = r.cells.clone();
        move || cells.clone()
    });
    draw_plots(cells);
    view! {
        <header class="report-head">
            <h1 id="shared-title">{r.title.clone()}</h1>
            <p class="muted">{format!("Version {} of a report on study “{}”, shared read-only.", r.version, r.study_name)}
                " " <a id="export-html" href=format!("/api/shared/{token}/export.html") download>"Export HTML"</a>
                " " <a id="export-md" href=format!("/api/shared/{token}/export.md") download>"Export markdown"</a>
            </p>
        </header>
        <div id="cells">
            {r.cells.into_iter().enumerate().map(|(i, cell)| {
                let kind = kind_of(&cell.cell.body);
                view! { <section class="cell" data-kind=kind><CellView i cell /></section> }
            }).collect_view()}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_edited_as_a_line_and_read_back() {
        let bodies = [
            CellBody::Plot {
                chart: Chart::Pareto { x: "decode_tps".into(), y: "peak_rss_bytes".into() },
            },
            CellBody::Plot {
                chart: Chart::Effect { setting: "threads".into(), metric: "decode_tps".into() },
            },
            CellBody::Plot { chart: Chart::BestSoFar { metric: "decode_tps".into() } },
            CellBody::Table { metric: "decode_tps".into(), limit: 10 },
            CellBody::Config { trial: 7 },
        ];
        for body in bodies {
            assert_eq!(with_params(&body, &params_text(&body)), Ok(body.clone()));
        }
        let table = CellBody::Table { metric: "decode_tps".into(), limit: 10 };
        assert_eq!(
            with_params(&table, "decode_tps ten"),
            Err("expected a metric and how many trials (decode_tps 10)".into())
        );
        assert!(with_params(&CellBody::Config { trial: 1 }, "").is_err());
    }
}
