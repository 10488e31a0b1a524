//! Reports: notebooks of cells (markdown, plot, table, configuration) whose
//! first draft is written from a study's findings. The user edits, adds,
//! reorders and deletes cells; every save is a new version and the old ones
//! are kept; regenerating rewrites only the written cells the user has not
//! changed. A report is shown in the app, through a read-only link, and
//! exported as one self-contained HTML file or as markdown. Every cell
//! becomes HTML the same way, through [`crate::markdown::to_safe_html`]:
//! whatever a user typed is sanitized wherever it is shown.

mod context;
mod draft;
mod export;
mod sources;

use tunebook_views::types::{Cell, CellBody, Notebook, RenderedCell, ReportView};

use crate::db::reports::{self, ReportRow, SaveError};
use crate::db::studies::{self, StudyRow};
use crate::db::trials;
use crate::error::{Error, Result};
pub use context::Reports;
use draft::fresh_cells;
pub use draft::{MAX_CELL_CHARS, MAX_CELLS, draft, merge, reconcile, validate};
pub use export::export_html;
use sources::{source, sources};

async fn study_of(service: &Reports, id: i64) -> Result<StudyRow> {
    studies::get(&service.db, id).await?.ok_or(Error::NotFound)
}

/// Writes a new report of study `study_id` from its findings.
pub async fn create(service: &Reports, study_id: i64) -> Result<i64> {
    let row = study_of(service, study_id).await?;
    let src = source(service, &row).await?;
    let notebook = Notebook { cells: fresh_cells(service, &src).await, dismissed: vec![] };
    let title = format!("Findings: {}", row.name);
    Ok(reports::insert(&service.db, study_id, &title, &notebook).await?)
}

fn stale(e: SaveError) -> Error {
    match e {
        SaveError::Stale { base, latest } => Error::Conflict(format!(
            "the report changed since version {base} was opened (it is at version {latest} now): reload it and make the change again"
        )),
        SaveError::NotFound => Error::NotFound,
        SaveError::Db(e) => e.into(),
    }
}

/// Saves the user's notebook as a new version made from `base`.
pub async fn save(
    service: &Reports,
    id: i64,
    base: i64,
    title: &str,
    notebook: Notebook,
) -> Result<i64> {
    let current = reports::get::<Notebook>(&service.db, id, None).await?.ok_or(Error::NotFound)?;
    let row = study_of(service, current.study_id).await?;
    let src = source(service, &row).await?;
    let title = title.trim();
    if title.is_empty() || title.len() > 300 {
        return Err(Error::BadRequest("a report needs a title of 1 to 300 characters".into()));
    }
    validate(&notebook, &src.list, &src.varied)?;
    let notebook = reconcile(&current.notebook, notebook);
    reports::save(&service.db, id, base, title, &notebook, "edited").await.map_err(stale)
}

/// Rewrites the cells written from the findings with what the data says
/// now, leaving the user's changes; a new version.
pub async fn regenerate(service: &Reports, id: i64, base: i64) -> Result<i64> {
    let current = reports::get::<Notebook>(&service.db, id, None).await?.ok_or(Error::NotFound)?;
    let row = study_of(service, current.study_id).await?;
    let src = source(service, &row).await?;
    let notebook = merge(&current.notebook, fresh_cells(service, &src).await);
    reports::save(&service.db, id, base, &current.title, &notebook, "findings regenerated")
        .await
        .map_err(stale)
}

/// Makes version `version` the newest again (as a new version).
pub async fn restore(service: &Reports, id: i64, base: i64, version: i64) -> Result<i64> {
    let old =
        reports::get::<Notebook>(&service.db, id, Some(version)).await?.ok_or(Error::NotFound)?;
    reports::save(
        &service.db,
        id,
        base,
        &old.title,
        &old.notebook,
        &format!("restored version {version}"),
    )
    .await
    .map_err(stale)
}

/// `text` with a code block it left open closed: a model's prose cut off
/// inside one would swallow the rest of its cell, the facts included.
fn closed_fences(text: &str) -> String {
    let fences = text.lines().filter(|l| l.trim_start().starts_with("```")).count();
    if fences % 2 == 1 { format!("{text}\n```") } else { text.to_string() }
}

/// How many tokens the prose may take.
const PROSE_TOKENS: u32 = 700;

/// The findings rewritten as prose by the server's writer model, given only
/// the findings as computed, added after the summary as a cell of the
/// user's (regenerating leaves it), with the facts it was given attached.
///
/// The findings it starts from are worked out off the request threads.
pub async fn prose(service: &Reports, id: i64, base: i64) -> Result<i64> {
    let Some(writer) = &service.writer else {
        return Err(Error::BadRequest(
            "no writer model is configured: start Tunebook with --writer-url (an OpenAI-compatible endpoint) to have findings rewritten as prose".into(),
        ));
    };
    let current = reports::get::<Notebook>(&service.db, id, None).await?.ok_or(Error::NotFound)?;
    let row = study_of(service, current.study_id).await?;
    let list = crate::views::all(trials::of_study(&service.db, row.id).await?);
    let (def, checked) = (row.definition.clone(), service.checked.clone());
    let bound = crate::write_up::FINDINGS_FOR;
    let (_, facts) = service
        .heavy
        .run("working out the findings", bound, move || {
            crate::write_up::findings_markdown(&def, &list, &checked)
        })
        .await?;
    if facts.trim().is_empty() {
        return Err(Error::BadRequest("the study has no findings yet: nothing to rewrite".into()));
    }
    let prompt = format!(
        "Below are findings computed from measurements of an LLM inference server under different settings. Rewrite them as a short report in plain prose for the person tuning it: what to run, what matters, what does not, what failed. Use only these facts; keep every number and trial number as given; add no claim of your own.\n\n{facts}"
    );
    let extra = serde_json::json!({ "temperature": 0.2, "max_tokens": PROSE_TOKENS });
    let (model, text) =
        tunebook_study::strategy::chat(writer, &prompt, extra).await.map_err(|e| {
            Error::BadRequest(format!("the writer at {} did not answer: {e}", writer.url))
        })?;
    let cell = Cell {
        id: format!("prose-{}", current.latest + 1),
        body: CellBody::Markdown {
            text: format!(
                "## In plain words\n\n{}\n\n*Written by the language model `{model}` from the findings below, which stay in this report: where the two differ, the findings are right.*\n\n<details><summary>The facts it was given</summary>\n\n{facts}\n</details>\n",
                closed_fences(text.trim())
            ),
        },
        origin: None,
        edited: true,
        machine: None,
    };
    let mut notebook = current.notebook.clone();
    let at = notebook
        .cells
        .iter()
        .position(|c| c.origin.as_deref() == Some("summary"))
        .map_or(0, |i| i + 1);
    notebook.cells.insert(at, cell);
    reports::save(&service.db, id, base, &current.title, &notebook, &format!("prose by {model}"))
        .await
        .map_err(stale)
}

/// A new read-only link to the newest version: a 256-bit random token.
pub async fn publish(service: &Reports, id: i64) -> Result<String> {
    let current = reports::get::<Notebook>(&service.db, id, None).await?.ok_or(Error::NotFound)?;
    let token = crate::new_token();
    reports::share(&service.db, id, current.version, &token).await?;
    Ok(token)
}

/// A report at `version` (the newest when `None`), rendered; `owner`: with
/// its versions and links.
pub async fn view(
    service: &Reports,
    id: i64,
    version: Option<i64>,
    owner: bool,
) -> Result<ReportView> {
    let report =
        reports::get::<Notebook>(&service.db, id, version).await?.ok_or(Error::NotFound)?;
    let (view, _) = rendered(service, report, owner).await?;
    Ok(view)
}

/// A report row rendered, with each cell's markdown (what the exports use).
pub async fn rendered(
    service: &Reports,
    report: ReportRow<Notebook>,
    owner: bool,
) -> Result<(ReportView, Vec<String>)> {
    let row = study_of(service, report.study_id).await?;
    let src = source(service, &row).await?;
    let parts = sources(&src, &report.notebook).await?;
    let cells = report
        .notebook
        .cells
        .iter()
        .zip(&parts)
        .map(|(cell, (markdown, figure))| RenderedCell {
            // A reader gets what the cell shows, not what its owner typed.
            cell: if owner { cell.clone() } else { without_source(cell) },
            html: crate::markdown::to_safe_html(markdown),
            figure: figure.clone(),
        })
        .collect();
    let view = ReportView {
        id: report.id,
        study_id: report.study_id,
        study_name: row.name.clone(),
        title: report.title,
        version: report.version,
        latest: report.latest,
        notebook: if owner { report.notebook } else { Notebook::default() },
        cells,
        versions: if owner {
            crate::views::all(reports::versions(&service.db, report.id).await?)
        } else {
            vec![]
        },
        shares: if owner {
            crate::views::all(reports::shares(&service.db, report.id).await?)
        } else {
            vec![]
        },
        writer: owner && service.writer.is_some(),
    };
    Ok((view, parts.into_iter().map(|(m, _)| m).collect()))
}

/// A cell as a reader gets it: its kind, without the text typed into it.
fn without_source(cell: &Cell) -> Cell {
    let body = match &cell.body {
        CellBody::Markdown { .. } => CellBody::Markdown { text: String::new() },
        other => other.clone(),
    };
    Cell { id: cell.id.clone(), body, origin: None, edited: false, machine: cell.machine.clone() }
}

/// The report and version a link shows; 410 once revoked.
pub async fn link(service: &Reports, token: &str) -> Result<(i64, i64)> {
    match reports::shared(&service.db, token).await? {
        Ok(found) => Ok(found),
        Err(true) => Err(Error::Gone("this link was revoked by the report's owner".into())),
        Err(false) => Err(Error::NotFound),
    }
}

/// What a link shows: the version it was made for, read-only.
pub async fn shared(service: &Reports, token: &str) -> Result<ReportView> {
    let (id, version) = link(service, token).await?;
    view(service, id, Some(version), false).await
}

/// The report as markdown: each cell's text, plots as their captions.
pub async fn export_markdown(service: &Reports, report: ReportRow<Notebook>) -> Result<String> {
    let (view, parts) = rendered(service, report, false).await?;
    let mut out = format!(
        "<!-- {} · version {} · study {} -->\n\n",
        view.title, view.version, view.study_name
    );
    for part in parts {
        out.push_str(part.trim_end());
        out.push_str("\n\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_block_the_prose_left_open_is_closed() {
        assert_eq!(
            closed_fences("Run:\n```sh\nllama-server -fa on"),
            "Run:\n```sh\nllama-server -fa on\n```"
        );
        assert_eq!(closed_fences("Run:\n```\nx\n```\nDone."), "Run:\n```\nx\n```\nDone.");
    }
}
