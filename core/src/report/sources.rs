//! What each cell of a report shows, as markdown (and, for a plot, its
//! figure), drawn from the study's trials when it is rendered.

use std::collections::BTreeMap;

use serde_json::Value;
use tunebook_domain::TrialState;
use tunebook_study::findings::{self};
use tunebook_study::{Goal, Measure, Metric};
use tunebook_views::figures::{self as plot, Point};
use tunebook_views::types::{Cell, CellBody, Chart, Notebook, ParetoView};

use super::context::Reports;
use crate::db::studies::StudyRow;
use crate::db::trials;
use crate::error::{Error, Result};
use crate::markdown::{code, fenced};
use crate::trial::Trial;

/// A study and what its cells are drawn from.
pub(super) struct Source<'a> {
    pub(super) service: &'a Reports,
    pub(super) row: &'a StudyRow,
    pub(super) list: Vec<Trial>,
    pub(super) baseline: BTreeMap<String, String>,
    pub(super) varied: Vec<String>,
    /// The classes of machine its trials ran on, where more than one.
    pub(super) machines: Vec<String>,
}

impl Source<'_> {
    fn goal(&self, m: Metric) -> Goal {
        crate::study_facts::objectives_of(&self.row.definition)
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
        Ok(crate::views::studies::pareto_view(done, &chosen, &self.baseline, &self.varied))
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
            let mut rows: Vec<(&Trial, f64)> = src
                .list
                .iter()
                .filter(|t| t.state == TrialState::Done)
                .filter(|t| machine.is_none() || t.machine.as_deref() == machine)
                .filter_map(|t| Some((t, t.value(m)?)))
                .collect();
            rows.sort_by(|a, b| goal.oriented(b.1).total_cmp(&goal.oriented(a.1)));
            rows.truncate(*limit as usize);
            let objectives: Vec<Metric> = crate::study_facts::objectives_of(&src.row.definition)
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
                let all = t.measured();
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
            let measured: Vec<String> = t
                .measured()
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
            match crate::recipe::of_trial(&src.service.db, t).await? {
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
pub(super) async fn source<'a>(service: &'a Reports, row: &'a StudyRow) -> Result<Source<'a>> {
    Ok(Source {
        service,
        row,
        list: crate::views::all(trials::of_study(&service.db, row.id).await?),
        baseline: service
            .checked
            .study(&row.definition)
            .map(|s| s.baseline.clone())
            .unwrap_or_default(),
        varied: row.definition.space.keys().cloned().collect(),
        machines: Some(trials::machines(&service.db, row.id).await?)
            .filter(|m| m.len() > 1)
            .unwrap_or_default(),
    })
}

/// Every cell as markdown and figure.
pub(super) async fn sources(
    src: &Source<'_>,
    notebook: &Notebook,
) -> Result<Vec<(String, Option<Value>)>> {
    let mut out = Vec::with_capacity(notebook.cells.len());
    for c in &notebook.cells {
        out.push(cell_source(src, c).await?);
    }
    Ok(out)
}
