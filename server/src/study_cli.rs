//! `tunebook run`, `export` and `import`: studies from the command line,
//! into the same database the web app uses.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use tunebook_study::{StudyDef, pareto};
use tunebook_views::types::{TrialState, TrialView};

use crate::db::studies::{self, StudyState};
use crate::db::trials;
use crate::events::{Payload, Update};
use crate::exit_status::{Stopped, Why};
use crate::import::Record;
use crate::study_facts::objectives_of;
use crate::study_runner::Studies;
use crate::trial::Trial;
use crate::trial_runner::Runner;
use crate::views::studies::points;
use crate::{Settings, prepare};

/// What `tunebook run` needs.
pub struct RunArgs {
    pub settings: Settings,
    /// A study file (TOML, or JSON by its extension), or none to resume.
    pub file: Option<PathBuf>,
    pub resume: Option<i64>,
}

/// Reads a study file: TOML, or JSON when it ends in `.json`. A file that
/// does not parse is an invalid study; one that cannot be read is not.
pub fn read_study(path: &Path) -> anyhow::Result<StudyDef> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let invalid = |e: String| Stopped::error(Why::Invalid, format!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))
    } else {
        StudyDef::from_toml(&text).map_err(|e| invalid(e.to_string()))
    }
}

/// Runs a study headless with a progress bar. Ctrl-C or SIGTERM pauses it
/// (the trial in flight is stopped and will run again on resume) and ends
/// the command as interrupted.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let token = CancellationToken::new();
    let ctx = prepare(&args.settings, token.clone()).await?;
    let mut events = ctx.events.subscribe();
    let db = ctx.db.clone();
    let (_runner, worker) = Runner::start(ctx.clone()).await?;
    let studies = Studies::new(ctx.clone());
    let id = match (&args.file, args.resume) {
        (Some(file), None) => {
            let def = read_study(file)?;
            if let Err(e) = ctx.checked.study(&def) {
                let message = format!("the study is not valid:\n  - {}", e.0.join("\n  - "));
                return Err(Stopped::error(Why::Invalid, message));
            }
            studies.create(&def).await.map_err(|e| anyhow::anyhow!("{e}"))?.0
        }
        (None, Some(id)) => {
            let row = studies::get(&db, id).await?.with_context(|| format!("no study {id}"))?;
            if row.state.is_final() {
                bail!(
                    "study {id} has ended ({}): {}",
                    row.state.as_str(),
                    row.stop_reason.unwrap_or_default()
                );
            }
            studies::set_state(&db, id, StudyState::Running, None).await?;
            studies.resume_all().await?;
            id
        }
        _ => bail!("give a study file, or --resume ID"),
    };
    let row = studies::get(&db, id).await?.context("the study vanished")?;
    let max = row.definition.budget.max_trials as u64;
    let bar = ProgressBar::new(max).with_style(
        ProgressStyle::with_template(
            "{spinner} study {prefix} [{bar:30}] {pos}/{len} trials, {elapsed} · {msg}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    bar.set_prefix(id.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    let counted = |list: &[Trial]| list.iter().filter(|t| t.counts_against_budget()).count() as u64;
    bar.set_position(counted(&crate::views::all::<_, Trial>(trials::of_study(&db, id).await?)));
    let interrupted = crate::shutdown::signal();
    tokio::pin!(interrupted);
    loop {
        let row = studies::get(&db, id).await?.context("the study vanished")?;
        if row.state.is_final() {
            break;
        }
        tokio::select! {
            _ = &mut interrupted => {
                studies.pause(id).await.ok();
                token.cancel();
                studies.wait().await;
                let _ = worker.await;
                bar.abandon_with_message("paused");
                let message = format!("study {id} paused; go on with: tunebook run --resume {id}");
                return Err(Stopped::error(Why::Interrupted, message));
            }
            event = events.recv() => {
                let trial = match event.as_deref() {
                    Ok(Update { payload: Payload::Trial(t), .. }) => Some(t.clone()),
                    _ => None,
                };
                if let Some(t) = trial.filter(|t| t.study_id == Some(id)) {
                    let phase = match t.state {
                        TrialState::Done => format!("trial {}: {:.1} tok/s decode", t.id, t.value(tunebook_views::types::Metric::DecodeTps).unwrap_or(f64::NAN)),
                        TrialState::Failed | TrialState::Pruned => format!("trial {} {}: {}", t.id, t.state.as_str(), t.error.clone().unwrap_or_default()),
                        s => format!("trial {} {}", t.id, s.as_str()),
                    };
                    bar.set_message(phase);
                    bar.set_position(counted(&crate::views::all::<_, Trial>(trials::of_study(&db, id).await?)));
                }
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    token.cancel();
    studies.wait().await;
    let _ = worker.await;
    bar.finish_and_clear();
    print_summary(&db, id, &ctx.checked).await
}

async fn print_summary(
    db: &crate::db::Db,
    id: i64,
    checked: &crate::checked::Checked,
) -> anyhow::Result<()> {
    let row = studies::get(db, id).await?.context("the study vanished")?;
    let list = crate::views::all::<_, Trial>(trials::of_study(db, id).await?);
    println!(
        "study {id} `{}`: {} — {}",
        row.name,
        row.state.as_str(),
        row.stop_reason.unwrap_or_default()
    );
    let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &list {
        *by_state.entry(t.state.as_str()).or_default() += 1;
    }
    println!("trials: {by_state:?}");
    let objectives = objectives_of(&row.definition);
    let done = points(&list, &objectives);
    let goals: Vec<_> = objectives.iter().map(|(_, g)| *g).collect();
    let points: Vec<Vec<f64>> = done.iter().map(|(_, v)| v.clone()).collect();
    println!(
        "Pareto front ({}):",
        objectives.iter().map(|(m, _)| m.name()).collect::<Vec<_>>().join(", ")
    );
    for i in pareto::front(&points, &goals) {
        let (t, v) = &done[i];
        let settings: Vec<String> = t.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // Each in its own unit: memory in MiB or GiB, a divergence to its
        // first digits (0.0041, not 0.00).
        let values: Vec<String> = v
            .iter()
            .zip(&objectives)
            .map(|(x, (m, _))| tunebook_study::findings::value_text(*m, *x))
            .collect();
        println!("  trial {:>5}  {}  {}", t.id, values.join("  "), settings.join(" "));
    }
    // What the trials show, as the study's page writes it.
    let (_, findings) = crate::write_up::findings_markdown(&row.definition, &list, checked);
    println!("\n{findings}");
    Ok(())
}

/// What `tunebook export` writes.
pub enum Export {
    /// A study's trials (or all trials) as JSONL or CSV.
    Trials { study: Option<i64>, csv: bool },
    /// A study as an Optuna journal.
    OptunaJournal(i64),
    /// A trial's configuration handed off.
    Trial(i64, crate::ops::handoff::Format),
}

/// Writes what `what` asks for.
pub async fn export(settings: &Settings, what: Export, out: &mut dyn Write) -> anyhow::Result<()> {
    let db = crate::db::Db::connect(&settings.database_url).await?;
    let (study, csv) = match what {
        Export::Trials { study, csv } => (study, csv),
        Export::OptunaJournal(id) => {
            let profiles = engine_bridge::Profile::load_dir(&settings.profiles_dir)?;
            let checked = crate::checked::Checked::new(std::sync::Arc::new(profiles));
            let text = crate::ops::handoff::optuna_journal(&db, &checked, id).await?;
            return Ok(out.write_all(text.as_bytes())?);
        }
        Export::Trial(id, format) => {
            let text = crate::ops::handoff::trial(&db, id, format).await?;
            return Ok(out.write_all(text.as_bytes())?);
        }
    };
    let mut list = match study {
        Some(id) => crate::views::all::<_, TrialView>(trials::of_study(&db, id).await?),
        None => crate::views::all(trials::list(&db).await?),
    };
    list.sort_by_key(|t| t.id);
    if csv {
        return Ok(crate::trials_csv::write(&list, out)?);
    }
    for t in list {
        let record = Record {
            samples: crate::views::all(trials::samples(&db, t.id).await?),
            measurement: trials::measurement(&db, t.id).await?,
            trial: t,
        };
        serde_json::to_writer(&mut *out, &record)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Reads trials from a Tunebook JSONL or CSV export, or from llama-bench's
/// JSON or JSONL output, and stores them (all or none). Returns the new ids.
pub async fn import(settings: &Settings, path: &Path, profile: &str) -> anyhow::Result<Vec<i64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let records =
        crate::import::parse_import(&text, path.extension().is_some_and(|e| e == "csv"), profile)
            .map_err(|e| anyhow::anyhow!("{}: {e}; nothing was imported", path.display()))?;
    let db = crate::db::Db::connect(&settings.database_url).await?;
    let rows: Vec<_> = records.iter().map(crate::views::trials::row_of).collect();
    Ok(trials::import(&db, &rows).await?)
}
