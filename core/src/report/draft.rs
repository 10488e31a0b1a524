//! A report's written cells: the first draft from a study's findings (per
//! class of machine where it ran on several), how a fresh draft merges with
//! what the user changed, and the checks on a notebook the user sends.

use std::collections::{BTreeMap, BTreeSet};

use tunebook_domain::TrialState;
use tunebook_study::findings::{self, Finding};
use tunebook_study::{Goal, Metric};
use tunebook_views::types::{Cell, CellBody, Chart, Notebook};

use super::context::Reports;
use super::sources::Source;
use crate::db::studies::StudyRow;
use crate::db::trials;
use crate::error::{Error, Result};
use crate::trial::Trial;

/// Most cells a report may hold, and most characters in one cell.
pub const MAX_CELLS: usize = 500;
pub const MAX_CELL_CHARS: usize = 200_000;

/// Trials a written table lists.
const TABLE_ROWS: u32 = 10;

fn markdown_cell(origin: &str, text: String) -> Cell {
    Cell {
        id: origin.to_string(),
        body: CellBody::Markdown { text },
        origin: Some(origin.into()),
        edited: false,
        machine: None,
    }
}

fn cell(origin: &str, body: CellBody) -> Cell {
    Cell { id: origin.to_string(), body, origin: Some(origin.into()), edited: false, machine: None }
}

/// The first draft of a report: the study summarized, then its findings
/// section by section with plots, tables and the best configurations, then
/// what it was measured on. Each cell's origin names what it was written
/// from, so regenerating can find it again.
pub fn draft(
    row: &StudyRow,
    list: &[Trial],
    found: &[Finding],
    provenance: &crate::provenance::Provenance,
) -> Vec<Cell> {
    let def = &row.definition;
    let objectives = crate::study_facts::objectives_of(def);
    let count = |s: TrialState| list.iter().filter(|t| t.state == s).count();
    let varied: Vec<String> = def.space.keys().map(|k| format!("`{k}`")).collect();
    let goals: Vec<String> = objectives
        .iter()
        .map(|(m, g)| {
            format!("{} ({})", m.label(), if *g == Goal::Max { "highest" } else { "lowest" })
        })
        .collect();
    let mut cells = vec![markdown_cell(
        "summary",
        format!(
            "# {}\n\nStudy {} of `{}` with `{}`: {} trials ran, {} failed, {} were pruned as unable to fit. It varied {}, after {}.\n\nEvery finding below cites the trials it rests on; an effect is claimed only where it stands out of the trials' own spread.",
            row.name,
            row.id,
            def.profile,
            def.model,
            count(TrialState::Done),
            count(TrialState::Failed),
            count(TrialState::Pruned),
            if varied.is_empty() { "nothing".into() } else { varied.join(", ") },
            if goals.is_empty() { "no objective".into() } else { goals.join(", ") },
        ),
    )];
    let section = |key: &str| {
        let (_, title, pick) = findings::SECTIONS.iter().find(|(k, _, _)| *k == key)?;
        let text = findings::section_markdown(found, *pick)?;
        Some(markdown_cell(&format!("section:{key}"), format!("## {title}\n\n{text}")))
    };
    cells.extend(section("noise"));
    cells.extend(section("best"));
    if let [(x, _), (y, _), ..] = objectives[..] {
        cells.push(cell(
            "plot:pareto",
            CellBody::Plot { chart: Chart::Pareto { x: x.name().into(), y: y.name().into() } },
        ));
    }
    let mut shown = BTreeSet::new();
    for f in found {
        let (origin, trial) = match f {
            Finding::Best { measure, trial, .. } => {
                (format!("config:best:{}", measure.name()), *trial)
            }
            Finding::Balanced { trial, .. } => ("config:balanced".to_string(), *trial),
            Finding::Boundary { setting, held: Some((trial, _)), .. } => {
                (format!("config:boundary:{setting}"), *trial)
            }
            Finding::Confirmed { trials, held: true, balanced, .. } if !trials.is_empty() => {
                let what = if *balanced { "confirmed_balanced" } else { "confirmed" };
                (format!("config:{what}"), trials[0])
            }
            _ => continue,
        };
        if shown.insert(trial) {
            cells.push(cell(&origin, CellBody::Config { trial }));
        }
    }
    cells.extend(section("free_wins"));
    cells.extend(section("effects"));
    for f in found {
        if let Finding::Effect { setting, metric, .. } = f
            && objectives.iter().any(|(m, _)| m == metric)
        {
            cells.push(cell(
                &format!("plot:{}", f.key()),
                CellBody::Plot {
                    chart: Chart::Effect { setting: setting.clone(), metric: metric.name().into() },
                },
            ));
        }
    }
    cells.extend(section("interactions"));
    for key in ["no_effect", "not_determined", "anomalies", "failures", "ceiling", "drift"] {
        cells.extend(section(key));
    }
    if let Some((first, _)) = objectives.first() {
        cells.push(cell(
            "table:best",
            CellBody::Table { metric: first.name().into(), limit: TABLE_ROWS },
        ));
        cells.push(cell(
            "plot:best_so_far",
            CellBody::Plot { chart: Chart::BestSoFar { metric: first.name().into() } },
        ));
    }
    cells.push(markdown_cell("provenance", provenance.markdown()));
    cells
}

/// Regenerating: the cells written from the findings now (`fresh`) replace
/// the written cells the user has not changed; cells the user changed or
/// added stay as and where they are; a written cell whose finding is gone
/// goes; a new one is placed after the cell it follows in the draft; cells
/// the user deleted stay deleted.
pub fn merge(old: &Notebook, fresh: Vec<Cell>) -> Notebook {
    let by_origin: BTreeMap<&str, &Cell> =
        fresh.iter().filter_map(|c| Some((c.origin.as_deref()?, c))).collect();
    let mut cells: Vec<Cell> = old
        .cells
        .iter()
        .filter_map(|c| match c.origin.as_deref() {
            None => Some(c.clone()),
            Some(_) if c.edited => Some(c.clone()),
            Some(o) => by_origin.get(o).map(|f| Cell { id: c.id.clone(), ..(*f).clone() }),
        })
        .collect();
    for (i, f) in fresh.iter().enumerate() {
        let origin = f.origin.as_deref();
        let placed = cells.iter().any(|c| c.origin.as_deref() == origin);
        if placed || origin.is_some_and(|o| old.dismissed.iter().any(|d| d == o)) {
            continue;
        }
        let at = fresh[..i]
            .iter()
            .rev()
            .find_map(|p| cells.iter().position(|c| c.origin == p.origin && c.origin.is_some()))
            .map_or(0, |p| p + 1);
        let mut f = f.clone();
        while cells.iter().any(|c| c.id == f.id) {
            f.id.push('+');
        }
        cells.insert(at, f);
    }
    Notebook { cells, dismissed: old.dismissed.clone() }
}

/// What a save from `old` to `new` means: written cells whose content
/// changed are marked edited, written cells that went are dismissed.
pub fn reconcile(old: &Notebook, mut new: Notebook) -> Notebook {
    let before: BTreeMap<&str, &Cell> = old.cells.iter().map(|c| (c.id.as_str(), c)).collect();
    for c in &mut new.cells {
        if let Some(was) = before.get(c.id.as_str()) {
            c.origin = was.origin.clone();
            c.edited = was.edited || was.body != c.body;
        } else if c.origin.is_some() && !old.cells.iter().any(|o| o.origin == c.origin) {
            // A cell that claims an origin the report never had: the user's.
            c.origin = None;
        }
    }
    let kept: BTreeSet<&str> = new.cells.iter().filter_map(|c| c.origin.as_deref()).collect();
    let mut dismissed: Vec<String> = old.dismissed.clone();
    for c in &old.cells {
        if let Some(o) = c.origin.as_deref()
            && !kept.contains(o)
            && !dismissed.iter().any(|d| d == o)
        {
            dismissed.push(o.to_string());
        }
    }
    new.dismissed = dismissed;
    new
}

/// Checks a notebook a user sent: sizes, metric names, trials of the study.
pub fn validate(notebook: &Notebook, list: &[Trial], varied: &[String]) -> Result<()> {
    if notebook.cells.len() > MAX_CELLS {
        return Err(Error::BadRequest(format!(
            "a report holds at most {MAX_CELLS} cells, this one has {}",
            notebook.cells.len()
        )));
    }
    let mut ids = BTreeSet::new();
    for (i, c) in notebook.cells.iter().enumerate() {
        let at = format!("cell {}", i + 1);
        if c.id.is_empty() || c.id.len() > 200 || !ids.insert(c.id.as_str()) {
            return Err(Error::BadRequest(format!(
                "{at}: its id is missing, too long or repeated"
            )));
        }
        if let Some(m) = &c.machine
            && !list.iter().any(|t| t.machine.as_ref() == Some(m))
        {
            return Err(Error::BadRequest(format!("{at}: no trial of this study ran on `{m}`")));
        }
        let metric = |name: &str| {
            Metric::parse(name)
                .map(|_| ())
                .ok_or_else(|| Error::BadRequest(format!("{at}: unknown metric `{name}`")))
        };
        match &c.body {
            CellBody::Markdown { text } if text.len() > MAX_CELL_CHARS => {
                return Err(Error::BadRequest(format!(
                    "{at}: {} characters, more than the {MAX_CELL_CHARS} a cell may hold",
                    text.len()
                )));
            }
            CellBody::Markdown { .. } => {}
            CellBody::Plot { chart: Chart::Pareto { x, y } } => {
                metric(x)?;
                metric(y)?;
            }
            CellBody::Plot { chart: Chart::Effect { setting, metric: m } } => {
                metric(m)?;
                if !varied.contains(setting) {
                    return Err(Error::BadRequest(format!(
                        "{at}: `{setting}` is not a setting this study varies ({})",
                        varied.join(", ")
                    )));
                }
            }
            CellBody::Plot { chart: Chart::BestSoFar { metric: m } } => metric(m)?,
            CellBody::Table { metric: m, limit } => {
                metric(m)?;
                if !(1..=1000).contains(limit) {
                    return Err(Error::BadRequest(format!("{at}: a table lists 1 to 1000 trials")));
                }
            }
            CellBody::Config { trial } => {
                if !list.iter().any(|t| t.id == *trial) {
                    return Err(Error::BadRequest(format!(
                        "{at}: trial {trial} is not a trial of this study"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// What the study's data says now, as a notebook's written cells: per
/// class of machine, where it ran on several (the classes side by side
/// first, then each one's findings, its plots and tables drawn from its
/// own trials only).
pub(super) async fn fresh_cells(service: &Reports, src: &Source<'_>) -> Vec<Cell> {
    let groups = crate::study_facts::by_machine(&src.list);
    if groups.len() <= 1 {
        return fresh_cells_of(service, src).await;
    }
    let def = &src.row.definition;
    let mut cells = vec![markdown_cell(
        "summary",
        format!(
            "# {}\n\nStudy {} of `{}` with `{}` ran on {} classes of machine, each searched on its own from its own baseline.\n\n## Per machine, side by side\n\n{}",
            src.row.name,
            src.row.id,
            def.profile,
            def.model,
            groups.len(),
            crate::write_up::side_by_side(def, &groups)
        ),
    )];
    for (i, (machine, list)) in groups.iter().enumerate() {
        let found = crate::study_facts::findings_of(def, list, &service.checked);
        let name = machine.as_deref().unwrap_or("this server");
        for mut c in draft(src.row, list, &found, &crate::provenance::Provenance::default()) {
            if c.origin.as_deref() == Some("provenance") {
                continue;
            }
            if let (Some("summary"), CellBody::Markdown { text }) =
                (c.origin.as_deref(), &mut c.body)
            {
                // The study's title is already up top: this part's is its machine.
                let rest = text.split_once("\n\n").map_or("", |(_, rest)| rest);
                *text = format!("# On {name}\n\n{rest}");
            }
            c.id = format!("m{i}-{}", c.id);
            c.origin = c.origin.map(|o| format!("m{i}-{o}"));
            c.machine = machine.clone();
            cells.push(c);
        }
    }
    cells
}

/// The written cells of a study whose trials all ran on one class of machine.
async fn fresh_cells_of(service: &Reports, src: &Source<'_>) -> Vec<Cell> {
    // CPU work: off the request threads.
    let (def, list, checked) =
        (src.row.definition.clone(), src.list.clone(), service.checked.clone());
    let found =
        tokio::task::spawn_blocking(move || crate::study_facts::findings_of(&def, &list, &checked))
            .await
            .expect("working out findings does not panic");
    let props: Vec<Option<String>> = {
        let mut out = Vec::new();
        for t in src.list.iter().filter(|t| t.state == TrialState::Done).take(50) {
            out.push(trials::extras(&service.db, t.id).await.ok().flatten().and_then(|e| e.props));
        }
        out
    };
    let def = &src.row.definition;
    let profile = service.profiles.iter().find(|p| p.name == def.profile);
    let provenance = crate::provenance::Provenance::gather(
        &service.data_dir,
        service.bandwidth,
        profile,
        &def.profile,
        &def.model,
        &props,
    )
    .await;
    draft(src.row, &src.list, &found, &provenance)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A markdown cell, for tests.
    pub(in crate::report) fn md(id: &str, origin: Option<&str>, text: &str) -> Cell {
        Cell {
            id: id.into(),
            body: CellBody::Markdown { text: text.into() },
            origin: origin.map(String::from),
            edited: false,
            machine: None,
        }
    }

    fn texts(n: &Notebook) -> Vec<String> {
        n.cells.iter().map(|c| params(&c.body)).collect()
    }

    fn params(b: &CellBody) -> String {
        match b {
            CellBody::Markdown { text } => text.clone(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn regenerating_keeps_what_the_user_changed_and_added() {
        let v1 = Notebook {
            cells: vec![
                md("summary", Some("summary"), "old summary"),
                md("section:best", Some("section:best"), "old best"),
                md("section:effects", Some("section:effects"), "old effects"),
                md("section:failures", Some("section:failures"), "old failures"),
            ],
            dismissed: vec![],
        };
        // The user rewrites the effects, adds a note after the best
        // configurations, and deletes the failures.
        let mut edited = v1.clone();
        edited.cells[2].body = CellBody::Markdown { text: "my reading of the effects".into() };
        edited.cells.insert(2, md("user-1", None, "my note"));
        edited.cells.pop();
        let v2 = reconcile(&v1, edited);
        assert!(v2.cells[3].edited, "a changed written cell is marked edited");
        assert!(!v2.cells[0].edited && !v2.cells[1].edited);
        assert_eq!(v2.dismissed, ["section:failures"]);

        // The data changed: every finding reads differently, there is a
        // new section on anomalies, and the failures are still there.
        let fresh = vec![
            md("summary", Some("summary"), "new summary"),
            md("section:best", Some("section:best"), "new best"),
            md("section:effects", Some("section:effects"), "new effects"),
            md("section:anomalies", Some("section:anomalies"), "new anomalies"),
            md("section:failures", Some("section:failures"), "new failures"),
        ];
        let v3 = merge(&v2, fresh);
        assert_eq!(
            texts(&v3),
            ["new summary", "new best", "my note", "my reading of the effects", "new anomalies"],
        );
        // A cell that was never there cannot claim a written origin.
        let mut forged = v3.clone();
        forged.cells.push(md("user-2", Some("section:drift"), "x"));
        let v4 = reconcile(&v3, forged);
        assert_eq!(v4.cells.last().unwrap().origin, None);
    }
}
