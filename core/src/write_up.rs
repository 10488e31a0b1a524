//! A study's findings written up in markdown: the findings themselves (per
//! class of machine, side by side, where it ran on several), then how to
//! run each named configuration outside Tunebook.

use std::collections::BTreeSet;
use std::sync::Arc;

use tunebook_domain::{Metric, Role, TrialState};
use tunebook_study::findings::{self, Finding};
use tunebook_study::{Goal, StudyDef};

use crate::checked::Checked;
use crate::db::{studies, trials};
use crate::study_facts::{by_machine, findings_of, objectives_of};
use crate::trial::Trial;

/// The classes of machine side by side, as a markdown table: the workers
/// that ran each, trials run, and per objective the baseline's value and
/// the best found, each against its own class's baseline.
pub fn side_by_side(def: &StudyDef, groups: &[(Option<String>, Vec<Trial>)]) -> String {
    let cell = |s: String| s.replace('|', "\\|");
    // Names a worker gave are shown as they are, never read as markdown.
    let names: Vec<String> = groups
        .iter()
        .map(|(m, _)| cell(m.as_deref().map_or("this server".into(), crate::markdown::code)))
        .collect();
    let mut rows = vec![
        format!("| | {} |", names.join(" | ")),
        format!("|---|{}", "---|".repeat(groups.len())),
    ];
    let row = |label: &str, f: &dyn Fn(&[Trial]) -> String| {
        let cells: Vec<String> = groups.iter().map(|(_, list)| cell(f(list))).collect();
        format!("| {label} | {} |", cells.join(" | "))
    };
    rows.push(row("Workers", &|list| {
        let names: BTreeSet<&str> = list.iter().filter_map(|t| t.worker.as_deref()).collect();
        names.into_iter().map(crate::markdown::code).collect::<Vec<_>>().join(", ")
    }));
    rows.push(row("Trials done / failed", &|list| {
        let n = |s: TrialState| list.iter().filter(|t| t.state == s).count();
        format!("{} / {}", n(TrialState::Done), n(TrialState::Failed))
    }));
    for (metric, goal) in objectives_of(def) {
        let base = |list: &[Trial]| {
            list.iter()
                .find(|t| t.role == Some(Role::Baseline) && t.state == TrialState::Done)
                .and_then(|t| Some((t.id, t.value(metric)?)))
        };
        rows.push(row(&format!("Baseline {}", metric.label()), &|list| match base(list) {
            Some((id, v)) => format!("{} (trial {id})", findings::value_text(metric, v)),
            None => "—".into(),
        }));
        rows.push(row(&format!("Best {}", metric.label()), &|list| {
            // The reference's own divergence (exactly 0) is no best.
            let yardstick =
                |t: &Trial| metric.against_reference() && t.value(Metric::KldMean) == Some(0.0);
            let best = list
                .iter()
                .filter(|t| t.state == TrialState::Done)
                .filter(|t| !yardstick(t))
                .filter_map(|t| Some((t, t.value(metric)?)))
                .max_by(|a, b| goal.oriented(a.1).total_cmp(&goal.oriented(b.1)));
            let Some((t, v)) = best else { return "—".into() };
            let against = base(list)
                .filter(|_| metric.scale() == tunebook_study::Scale::Ratio)
                .filter(|(_, b)| *b != 0.0)
                .map(|(_, b)| format!(", {:+.1} % on its baseline", (v - b) / b.abs() * 100.0))
                .unwrap_or_default();
            let settings: Vec<String> =
                t.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(
                "{} (trial {}{against}): `{}`",
                findings::value_text(metric, v),
                t.id,
                settings.join(" ")
            )
        }));
    }
    format!(
        "{}\n\nEach class of machine was searched on its own, from its own baseline: numbers compare down a column, not across.\n",
        rows.join("\n")
    )
}

/// Findings in markdown, one level down (under a machine's heading).
fn nested(markdown: &str) -> String {
    markdown
        .lines()
        .map(|l| if l.starts_with('#') { format!("#{l}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The findings of a study's trials in markdown: as they are, or, where
/// the trials ran on more than one class of machine, the classes side by
/// side and then each class's own findings. Returns the findings too.
pub fn findings_markdown(
    def: &StudyDef,
    list: &[Trial],
    checked: &Checked,
) -> (Vec<Finding>, String) {
    let (found, text) = by_class(def, list, checked);
    (found, format!("{text}{}", left_out(list)))
}

/// Trials the engine did not run as asked, said once: they are left out of
/// every finding.
fn left_out(list: &[Trial]) -> String {
    let said: Vec<String> = list
        .iter()
        .filter(|t| !t.mismatched.is_empty())
        .map(|t| {
            let ran: Vec<String> = t
                .mismatched
                .iter()
                .map(|(k, v)| {
                    let asked = t.settings.get(k).map_or("?", String::as_str);
                    format!("{k} ran as {v}, not {asked}")
                })
                .collect();
            format!("trial {} ({})", t.id, ran.join("; "))
        })
        .collect();
    if said.is_empty() {
        return String::new();
    }
    format!(
        "\n\n**Left out**: the engine did not run {} as asked, so what {} measured is not counted for any setting: {}.\n",
        if said.len() == 1 { "one trial" } else { "some trials" },
        if said.len() == 1 { "it" } else { "they" },
        said.join(", ")
    )
}

/// How long the findings may be waited on.
pub const FINDINGS_FOR: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether `list` ran on one class of machine (or on this server alone).
pub fn one_class(list: &[Trial]) -> bool {
    by_machine(list).len() <= 1
}

fn by_class(def: &StudyDef, list: &[Trial], checked: &Checked) -> (Vec<Finding>, String) {
    let groups = by_machine(list);
    if groups.len() <= 1 {
        let found = findings_of(def, list, checked);
        let text = findings::markdown(&found);
        return (found, text);
    }
    let mut all = Vec::new();
    let mut text = format!("## Per machine, side by side\n\n{}\n", side_by_side(def, &groups));
    for (machine, trials) in &groups {
        let found = findings_of(def, trials, checked);
        let name = machine.as_deref().map_or("this server".into(), crate::markdown::code);
        text.push_str(&format!("## On {name}\n\n{}\n\n", nested(&findings::markdown(&found))));
        all.extend(found);
    }
    (all, text)
}

/// How the trial with the most goodput fared at each load, and what bound
/// it where it missed the objective (see `engine_bridge::probes::load_watch`);
/// empty where no trial ran the load probe.
async fn serving_load(db: &crate::db::Db, list: &[Trial]) -> Result<String, sqlx::Error> {
    let best = list
        .iter()
        .filter(|t| t.value(Metric::GoodputRps).is_some() && t.mismatched.is_empty())
        .max_by(|a, b| {
            a.value(Metric::GoodputRps)
                .unwrap_or(0.0)
                .total_cmp(&b.value(Metric::GoodputRps).unwrap_or(0.0))
        });
    let Some(t) = best else { return Ok(String::new()) };
    let Some(m) = trials::measurement(db, t.id).await? else { return Ok(String::new()) };
    let Ok(load) = serde_json::from_value::<engine_bridge::probes::LoadResult>(m["load"].clone())
    else {
        return Ok(String::new());
    };
    let mut out = format!(
        "\n## Serving load\n\nTrial {} serves the most within the objective: {:.2} requests a second ({} workload{}).\n\n",
        t.id,
        load.goodput_rps,
        load.workload,
        load.best_rate
            .map_or(", at no rate tried".into(), |r| format!(", at {r:.2} arriving a second")),
    );
    for s in &load.steps {
        let p99 = s.ttft_ms.map_or("—".into(), |p| format!("{:.0} ms", p.p99));
        let verdict = if s.meets_slo { "holds" } else { "misses" };
        let why = s.binding.as_deref().map_or(String::new(), |b| format!("; {b}"));
        out.push_str(&format!(
            "- {:.2}/s: {:.2} answered a second, p99 time to first token {p99}: {verdict}{why}.\n",
            s.rate, s.throughput_rps
        ));
    }
    Ok(out)
}

/// Study `id`'s findings and the write-up of them in markdown: the
/// findings (per class of machine, where it ran on several), then how to
/// run each best configuration outside Tunebook (command line and systemd
/// unit). `list`: the study's trials, as its caller read them.
pub async fn write_up(
    db: &crate::db::Db,
    row: &studies::StudyRow,
    list: &[Trial],
    checked: &Arc<Checked>,
    heavy: &crate::heavy::Turns,
) -> crate::Result<(Vec<Finding>, String)> {
    // CPU work: off the request threads, and waited on only so long.
    let (def, owned, checked) = (row.definition.clone(), list.to_vec(), checked.clone());
    let (found, mut text) = heavy
        .run("working out the findings", FINDINGS_FOR, move || {
            findings_markdown(&def, &owned, &checked)
        })
        .await?;
    text.push_str(&serving_load(db, list).await?);
    let mut shown = BTreeSet::new();
    let mut recipes = String::new();
    for f in &found {
        let (why, trial) = match f {
            Finding::Best { measure, trial, .. } => (format!("best {}", measure.label()), trial),
            Finding::Balanced { trial, .. } => ("balanced pick".to_string(), trial),
            Finding::Boundary { setting, held: Some((trial, _)), goal, .. } => {
                let most = if *goal == Goal::Max { "largest" } else { "smallest" };
                (format!("{most} {setting} that holds"), trial)
            }
            _ => continue,
        };
        let Some(t) = list.iter().find(|t| t.id == *trial) else { continue };
        if !shown.insert(*trial) {
            continue;
        }
        let Some(r) = crate::recipe::of_trial(db, t).await? else { continue };
        let why = match &t.machine {
            Some(m) => format!("{why}, on {}", crate::markdown::code(m)),
            None => why,
        };
        // The others folded: most readers want the command line.
        let folded = |summary: &str, lang: &str, text: Result<String, String>| match text {
            Ok(text) => format!(
                "<details><summary>{summary}</summary>\n\n{}\n</details>\n\n",
                crate::markdown::fenced(lang, &text)
            ),
            Err(why) => format!("*No {summary}: {}.*\n\n", crate::markdown::code(&why)),
        };
        recipes.push_str(&format!(
            "### Trial {trial} ({})\n\n{}\n{}{}{}",
            why,
            crate::markdown::fenced("sh", &r.shell),
            folded("systemd unit", "ini", Ok(r.unit.clone())),
            folded("llama-swap entry", "yaml", r.llama_swap(&t.model)),
            folded("docker compose service", "yaml", r.compose(&t.model)),
        ));
    }
    if !recipes.is_empty() {
        text.push_str(&format!(
            "## Run it

On port {}; the unit's start timeout is three times the measured load time.

{recipes}",
            crate::recipe::PORT
        ));
    }
    Ok((found, text))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use tunebook_domain::Metrics;

    #[test]
    fn a_trial_the_engine_did_not_run_as_asked_is_left_out_and_said() {
        let def = StudyDef::from_toml(
            "name = \"s\"\nprofile = \"p\"\nmodel = \"m\"\n[space]\nubatch_size = [128, 512]\n\
             [[objectives]]\nmetric = \"decode_tps\"\n",
        )
        .unwrap();
        let trial = |id: i64, ubatch: &str, decode: f64| Trial {
            id,
            metrics: Metrics::of([(Metric::DecodeTps, Some(decode))]),
            ..Trial::new(
                "p",
                "m",
                BTreeMap::from([("ubatch_size".into(), ubatch.into())]),
                TrialState::Done,
            )
        };
        let mut list: Vec<Trial> = (1..=6)
            .map(|i| trial(i, if i % 2 == 0 { "512" } else { "128" }, 10.0 + i as f64 * 0.1))
            .collect();
        // The fastest trial by far, but the engine ran it at another size.
        let mut wrong = trial(7, "512", 99.0);
        wrong.mismatched = BTreeMap::from([("ubatch_size".into(), "64".into())]);
        list.push(wrong);
        assert_eq!(crate::study_facts::facts_of(&def, &list).len(), 6);
        let none = Checked::new(Arc::new(vec![]));
        let (found, text) = findings_markdown(&def, &list, &none);
        let best = found.iter().find_map(|f| match f {
            Finding::Best { trial, .. } => Some(*trial),
            _ => None,
        });
        assert_eq!(best, Some(6), "the best is among the trials that ran as asked");
        assert!(
            text.contains("**Left out**")
                && text.contains("trial 7 (ubatch_size ran as 64, not 512)"),
            "{text}"
        );
        let (_, clean) = findings_markdown(&def, &list[..6], &none);
        assert!(!clean.contains("Left out"));
    }

    #[test]
    fn a_workers_names_are_shown_never_read_as_markdown() {
        let def = StudyDef::from_toml(
            "name = \"s\"\nprofile = \"p\"\nmodel = \"m\"\n[space]\nubatch_size = [128, 512]\n\
             [[objectives]]\nmetric = \"decode_tps\"\n",
        )
        .unwrap();
        let on = |machine: &str, worker: &str| Trial {
            metrics: Metrics::of([(Metric::DecodeTps, Some(10.0))]),
            machine: Some(machine.into()),
            worker: Some(worker.into()),
            ..Trial::new("p", "m", BTreeMap::new(), TrialState::Done)
        };
        let evil = "[click](http://evil.example) *x*";
        let groups = vec![(Some(evil.to_string()), vec![on(evil, "<img src=x>")])];
        let text = side_by_side(&def, &groups);
        let html = crate::markdown::to_safe_html(&text);
        assert!(
            !html.contains("<a ") && !html.contains("<em>") && !html.contains("<img"),
            "{html}"
        );
        assert!(html.contains("<code>[click](http://evil.example) *x*</code>"), "{html}");
    }
}
