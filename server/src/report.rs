//! Reports: notebooks of cells (markdown, plot, table, configuration) whose
//! first draft is written from a study's findings. The user edits, adds,
//! reorders and deletes cells; every save is a new version and the old ones
//! are kept; regenerating rewrites only the written cells the user has not
//! changed. A report is shown in the app, through a read-only link, and
//! exported as one self-contained HTML file or as markdown. Every cell
//! becomes HTML the same way, through [`crate::markdown::to_safe_html`]:
//! whatever a user typed is sanitized wherever it is shown.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use tunebook_app::plot::{self, Point};
use tunebook_app::types::{
    Cell, CellBody, Chart, Notebook, ParetoView, RenderedCell, ReportView, TrialState, TrialView,
};
use tunebook_study::findings::{self, Finding};
use tunebook_study::{Goal, Measure, Metric};

use crate::db::reports::{self, ReportRow, SaveError};
use crate::db::studies::{self, StudyRow};
use crate::db::trials;
use crate::error::{Error, Result};
use crate::markdown::{code, fenced};
use crate::service::Service;

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
    list: &[TrialView],
    found: &[Finding],
    provenance: &crate::provenance::Provenance,
) -> Vec<Cell> {
    let def = &row.definition;
    let objectives = crate::study_views::objectives_of(def);
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
pub fn validate(notebook: &Notebook, list: &[TrialView], varied: &[String]) -> Result<()> {
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

/// A study and what its cells are drawn from.
struct Source<'a> {
    service: &'a Service,
    row: &'a StudyRow,
    list: Vec<TrialView>,
    baseline: BTreeMap<String, String>,
    varied: Vec<String>,
    /// The classes of machine its trials ran on, where more than one.
    machines: Vec<String>,
}

impl Source<'_> {
    fn goal(&self, m: Metric) -> Goal {
        crate::study_views::objectives_of(&self.row.definition)
            .into_iter()
            .find(|(o, _)| *o == m)
            .map_or(m.natural_goal(), |(_, g)| g)
    }

    /// Done trials on `metrics` (of one class of machine, where given).
    async fn pareto(&self, metrics: &[Metric], machine: Option<&str>) -> Result<ParetoView> {
        let chosen: Vec<(Measure, Goal)> =
            metrics.iter().map(|m| (Measure::Metric(*m), self.goal(*m))).collect();
        let measures: Vec<Measure> = chosen.iter().map(|(m, _)| m.clone()).collect();
        let done = trials::points(&self.service.db, self.row.id, &measures, machine).await?;
        Ok(crate::study_views::pareto_view(done, &chosen, &self.baseline, &self.varied))
    }
}

/// Text for a markdown table cell.
fn table_text(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// One cell as markdown (what the page, the link and the exports all show,
/// sanitized on the way to HTML), and for a plot its figure.
async fn cell_source(src: &Source<'_>, cell: &Cell) -> Result<(String, Option<Value>)> {
    let parse = |name: &str| {
        Metric::parse(name).ok_or_else(|| Error::BadRequest(format!("unknown metric `{name}`")))
    };
    // A plot or table never mixes classes of machine: a cell naming none
    // in a study run on several shows the first.
    let machine = cell.machine.as_deref().or(src.machines.first().map(String::as_str));
    let on = machine.map(|m| format!(" On {m}.")).unwrap_or_default();
    Ok(match &cell.body {
        CellBody::Markdown { text } => (text.clone(), None),
        CellBody::Plot { chart } => {
            let (caption, figure) = match chart {
                Chart::Pareto { x, y } => {
                    let (mx, my) = (parse(x)?, parse(y)?);
                    let v = src.pareto(&[mx, my], machine).await?;
                    let points: Vec<Point> = v
                        .points
                        .iter()
                        .map(|p| Point {
                            trial_id: p.trial_id,
                            x: p.values[0],
                            y: p.values[1],
                            on_front: p.on_front,
                            hover: if p.differs.is_empty() {
                                "the baseline".into()
                            } else {
                                p.differs.clone()
                            },
                        })
                        .collect();
                    let front = v.points.iter().filter(|p| p.on_front).count();
                    (
                        format!(
                            "{} against {}: {} trials, {front} on the Pareto front.",
                            my.label(),
                            mx.label(),
                            points.len()
                        ),
                        (!points.is_empty())
                            .then(|| plot::pareto_figure(&points, mx.label(), my.label())),
                    )
                }
                Chart::Effect { setting, metric } => {
                    let m = parse(metric)?;
                    let v = src.pareto(&[m], machine).await?;
                    let s = v.settings.iter().position(|s| s.name == *setting);
                    let figure = s.filter(|_| !v.points.is_empty()).map(|s| {
                        let points: Vec<(i64, u32, f64)> = v
                            .points
                            .iter()
                            .map(|p| (p.trial_id, p.config[s], p.values[0]))
                            .collect();
                        plot::effect_figure(&v.settings[s].values, &points, setting, m.label())
                    });
                    (format!("{} by `{setting}`: every trial, a box per value.", m.label()), figure)
                }
                Chart::BestSoFar { metric } => {
                    let m = parse(metric)?;
                    let v = src.pareto(&[m], machine).await?;
                    let trail: Vec<(i64, f64)> =
                        v.points.iter().map(|p| (p.trial_id, p.values[0])).collect();
                    (
                        format!(
                            "{} of each trial in the order they ran, and the best so far.",
                            m.label()
                        ),
                        (!trail.is_empty()).then(|| {
                            plot::best_so_far_figure(&trail, src.goal(m) == Goal::Max, m.label())
                        }),
                    )
                }
            };
            let caption = if figure.is_some() {
                format!("*Figure: {caption}{on}*")
            } else {
                format!("*Figure: {caption}{on} No finished trial has these numbers yet.*")
            };
            (caption, figure)
        }
        CellBody::Table { metric, limit } => {
            let m = parse(metric)?;
            let goal = src.goal(m);
            let mut rows: Vec<(&TrialView, f64)> = src
                .list
                .iter()
                .filter(|t| t.state == TrialState::Done)
                .filter(|t| machine.is_none() || t.machine.as_deref() == machine)
                .filter_map(|t| Some((t, *crate::study_views::metrics(t).get(&m)?)))
                .collect();
            rows.sort_by(|a, b| goal.oriented(b.1).total_cmp(&goal.oriented(a.1)));
            rows.truncate(*limit as usize);
            let objectives: Vec<Metric> = crate::study_views::objectives_of(&src.row.definition)
                .into_iter()
                .map(|(o, _)| o)
                .filter(|o| *o != m)
                .collect();
            let mut head = vec!["trial".to_string()];
            head.extend(src.varied.iter().map(|s| format!("`{}`", table_text(s))));
            head.push(m.label().into());
            head.extend(objectives.iter().map(|o| o.label().to_string()));
            let mut text = format!(
                "**The {} best trials on {}{}** ({}):\n\n| {} |\n|{}\n",
                rows.len(),
                m.label(),
                machine.map(|m| format!(" on {m}")).unwrap_or_default(),
                if goal == Goal::Max { "highest first" } else { "lowest first" },
                head.join(" | "),
                "---|".repeat(head.len())
            );
            for (t, v) in &rows {
                let all = crate::study_views::metrics(t);
                let mut cells = vec![t.id.to_string()];
                cells.extend(
                    src.varied
                        .iter()
                        .map(|s| table_text(t.settings.get(s).map_or("default", |v| v.as_str()))),
                );
                cells.push(findings::value_text(m, *v));
                cells.extend(
                    objectives
                        .iter()
                        .map(|o| all.get(o).map_or("–".into(), |x| findings::value_text(*o, *x))),
                );
                text.push_str(&format!("| {} |\n", cells.join(" | ")));
            }
            if rows.is_empty() {
                text = format!("*No finished trial has {} yet.*", m.label());
            }
            (text, None)
        }
        CellBody::Config { trial } => {
            let Some(t) = src.list.iter().find(|t| t.id == *trial) else {
                return Ok((format!("*Trial {trial} is not a trial of this study.*"), None));
            };
            let config: Vec<String> = t.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let measured: Vec<String> = crate::study_views::metrics(t)
                .iter()
                .filter(|(m, _)| {
                    matches!(
                        m,
                        Metric::DecodeTps
                            | Metric::PrefillTps
                            | Metric::PeakRssBytes
                            | Metric::LoadMs
                            | Metric::QualityScore
                    )
                })
                .map(|(m, v)| format!("{} {}", m.label(), findings::value_text(*m, *v)))
                .collect();
            let mut text = format!(
                "### Trial {trial}\n\n{} on {} with {}{}.\n\n",
                code(&if config.is_empty() {
                    "the engine's defaults".into()
                } else {
                    config.join(" ")
                }),
                code(&t.profile),
                code(&t.model),
                if measured.is_empty() {
                    String::new()
                } else {
                    format!(": {}", measured.join(", "))
                }
            );
            match crate::recipe::of_trial(&src.service.db, src.row.id, t).await? {
                Some(r) => text.push_str(&format!(
                    "Run it (port {}; the unit's start timeout is three times the measured load time):\n\n{}\n{}",
                    crate::recipe::PORT,
                    fenced("sh", &r.shell),
                    fenced("ini", &r.unit)
                )),
                None => text.push_str("An endpoint Tunebook does not launch: nothing to run.\n"),
            }
            (text, None)
        }
    })
}

/// Reads a study for rendering its reports.
async fn source<'a>(service: &'a Service, row: &'a StudyRow) -> Result<Source<'a>> {
    Ok(Source {
        service,
        row,
        list: trials::of_study(&service.db, row.id).await?,
        baseline: crate::study_checks::check(&service.profiles, &row.definition)
            .map(|s| s.baseline)
            .unwrap_or_default(),
        varied: row.definition.space.keys().cloned().collect(),
        machines: Some(trials::machines(&service.db, row.id).await?)
            .filter(|m| m.len() > 1)
            .unwrap_or_default(),
    })
}

/// Every cell as markdown and figure.
async fn sources(src: &Source<'_>, notebook: &Notebook) -> Result<Vec<(String, Option<Value>)>> {
    let mut out = Vec::with_capacity(notebook.cells.len());
    for c in &notebook.cells {
        out.push(cell_source(src, c).await?);
    }
    Ok(out)
}

/// What the study's data says now, as a notebook's written cells: per
/// class of machine, where it ran on several (the classes side by side
/// first, then each one's findings, its plots and tables drawn from its
/// own trials only).
async fn fresh_cells(service: &Service, src: &Source<'_>) -> Vec<Cell> {
    let groups = crate::study_views::by_machine(&src.list);
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
        let found = crate::study_views::findings_of(def, list);
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
async fn fresh_cells_of(service: &Service, src: &Source<'_>) -> Vec<Cell> {
    let found = crate::study_views::findings_of(&src.row.definition, &src.list);
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

async fn study_of(service: &Service, id: i64) -> Result<StudyRow> {
    studies::get(&service.db, id).await?.ok_or(Error::NotFound)
}

/// Writes a new report of study `study_id` from its findings.
pub async fn create(service: &Service, study_id: i64) -> Result<i64> {
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
    service: &Service,
    id: i64,
    base: i64,
    title: &str,
    notebook: Notebook,
) -> Result<i64> {
    let current = reports::get(&service.db, id, None).await?.ok_or(Error::NotFound)?;
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
pub async fn regenerate(service: &Service, id: i64, base: i64) -> Result<i64> {
    let current = reports::get(&service.db, id, None).await?.ok_or(Error::NotFound)?;
    let row = study_of(service, current.study_id).await?;
    let src = source(service, &row).await?;
    let notebook = merge(&current.notebook, fresh_cells(service, &src).await);
    reports::save(&service.db, id, base, &current.title, &notebook, "findings regenerated")
        .await
        .map_err(stale)
}

/// Makes version `version` the newest again (as a new version).
pub async fn restore(service: &Service, id: i64, base: i64, version: i64) -> Result<i64> {
    let old = reports::get(&service.db, id, Some(version)).await?.ok_or(Error::NotFound)?;
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

/// How many tokens the prose may take.
const PROSE_TOKENS: u32 = 700;

/// The findings rewritten as prose by the server's writer model, given only
/// the findings as computed, added after the summary as a cell of the
/// user's (regenerating leaves it), with the facts it was given attached.
pub async fn prose(service: &Service, id: i64, base: i64) -> Result<i64> {
    let Some(writer) = &service.writer else {
        return Err(Error::BadRequest(
            "no writer model is configured: start Tunebook with --writer-url (an OpenAI-compatible endpoint) to have findings rewritten as prose".into(),
        ));
    };
    let current = reports::get(&service.db, id, None).await?.ok_or(Error::NotFound)?;
    let row = study_of(service, current.study_id).await?;
    let list = trials::of_study(&service.db, row.id).await?;
    let (_, facts) = crate::write_up::findings_markdown(&row.definition, &list);
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
                text.trim()
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
pub async fn publish(service: &Service, id: i64) -> Result<String> {
    let current = reports::get(&service.db, id, None).await?.ok_or(Error::NotFound)?;
    let token = crate::new_token();
    reports::share(&service.db, id, current.version, &token).await?;
    Ok(token)
}

/// A report at `version` (the newest when `None`), rendered; `owner`: with
/// its versions and links.
pub async fn view(
    service: &Service,
    id: i64,
    version: Option<i64>,
    owner: bool,
) -> Result<ReportView> {
    let report = reports::get(&service.db, id, version).await?.ok_or(Error::NotFound)?;
    let (view, _) = rendered(service, report, owner).await?;
    Ok(view)
}

/// A report row rendered, with each cell's markdown (what the exports use).
pub async fn rendered(
    service: &Service,
    report: ReportRow,
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
        versions: if owner { reports::versions(&service.db, report.id).await? } else { vec![] },
        shares: if owner { reports::shares(&service.db, report.id).await? } else { vec![] },
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
pub async fn link(service: &Service, token: &str) -> Result<(i64, i64)> {
    match reports::shared(&service.db, token).await? {
        Ok(found) => Ok(found),
        Err(true) => Err(Error::Gone("this link was revoked by the report's owner".into())),
        Err(false) => Err(Error::NotFound),
    }
}

/// What a link shows: the version it was made for, read-only.
pub async fn shared(service: &Service, token: &str) -> Result<ReportView> {
    let (id, version) = link(service, token).await?;
    view(service, id, Some(version), false).await
}

/// The report as markdown: each cell's text, plots as their captions.
pub async fn export_markdown(service: &Service, report: ReportRow) -> Result<String> {
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

/// JSON to put inside a `<script>`: nothing in it can end the element.
fn script_json(v: &Value) -> String {
    serde_json::to_string(v)
        .expect("serializes")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The report as one HTML file that needs no network: the stylesheet and
/// plotly.js inlined, each plot drawn from its figure.
pub fn export_html(view: &ReportView, plotly_js: &str) -> String {
    let escape = |s: &str| ammonia::clean_text(s);
    let mut body = String::new();
    let mut figures = serde_json::Map::new();
    for (i, c) in view.cells.iter().enumerate() {
        body.push_str("<section class=\"cell\">\n");
        if let Some(f) = &c.figure {
            let id = format!("plot-{i}");
            body.push_str(&format!("<div id=\"{id}\" class=\"plot\"></div>\n"));
            figures.insert(id, f.clone());
        }
        body.push_str(&c.html);
        body.push_str("</section>\n");
    }
    // plotly.js's own source may hold "</script" in a string: split it.
    let plotly = plotly_js.replace("</script", "<\\/script");
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<style>\n{css}\n</style>\n<script>{plotly}</script>\n</head>\n<body>\n<main class=\"report\">\n<p class=\"muted\">{title} · version {version} · study {study}</p>\n{body}</main>\n<script>\nconst figures = {figures};\nfor (const [id, f] of Object.entries(figures)) {{\n  Plotly.newPlot(id, f.data, f.layout, {{ responsive: true, displaylogo: false }});\n}}\n</script>\n</body>\n</html>\n",
        title = escape(&view.title),
        css = include_str!("../../style/main.css"),
        version = view.version,
        study = escape(&view.study_name),
        figures = script_json(&Value::Object(figures)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(id: &str, origin: Option<&str>, text: &str) -> Cell {
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

    #[test]
    fn nothing_in_a_figure_can_end_its_script() {
        let figure = serde_json::json!({ "text": "</script><script>alert(1)</script> & \u{2028}" });
        let text = script_json(&figure);
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, figure, "still the same JSON");
    }

    #[test]
    fn an_export_carries_its_plots_and_no_injected_script() {
        let cell = |i: usize, html: &str, figure: Option<Value>| RenderedCell {
            cell: md(&format!("c{i}"), None, ""),
            html: html.into(),
            figure,
        };
        let view = ReportView {
            id: 1,
            study_id: 1,
            study_name: "<script>alert('study')</script>".into(),
            title: "</title><script>alert('title')</script>".into(),
            version: 3,
            latest: 3,
            notebook: Notebook::default(),
            cells: vec![
                cell(
                    0,
                    &crate::markdown::to_safe_html("<script>alert('cell')</script>\n\n**kept**"),
                    None,
                ),
                cell(
                    1,
                    "<p>fig</p>",
                    Some(
                        serde_json::json!({ "data": [{ "text": ["</script><img src=x onerror=alert(1)>"] }], "layout": {} }),
                    ),
                ),
            ],
            versions: vec![],
            shares: vec![],
        };
        let html = export_html(&view, "window.Plotly = {}; /* </script> */");
        assert!(html.contains("<strong>kept</strong>"));
        assert!(html.contains("id=\"plot-1\""), "the plot has its place");
        assert!(!html.contains("alert('"), "{html}");
        // Two script elements: plotly.js and the one drawing the plots.
        assert_eq!(html.matches("<script>").count(), 2, "{html}");
        assert_eq!(html.matches("</script>").count(), 2, "{html}");
    }
}
