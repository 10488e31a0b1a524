//! Studies as the browser sees them: their state, progress, best so far,
//! Pareto front, findings and the designer's check.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::trials::{TrialPage, TrialView};

/// Something that happened to a study, pushed to its watchers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StudyUpdate {
    pub study_id: i64,
    /// The study's state after it: running, paused, done, stopped or failed.
    pub state: String,
    /// What happened: created, paused, resumed, drift, done, …
    pub kind: String,
    pub message: String,
    pub at_ms: i64,
}

/// A study in the list of studies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StudySummary {
    pub id: i64,
    pub name: String,
    pub profile: String,
    pub model: String,
    pub state: String,
    pub stop_reason: Option<String>,
    pub created_ms: i64,
    pub finished_ms: Option<i64>,
    /// Trials so far, by state.
    pub trials: BTreeMap<String, usize>,
}

/// An objective of a study: which metric, which way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ObjectiveView {
    pub metric: String,
    pub label: String,
    pub goal: String,
}

/// A study with what its page shows besides its trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StudyView {
    pub summary: StudySummary,
    pub objectives: Vec<ObjectiveView>,
    pub baseline: BTreeMap<String, String>,
    /// The study as a file (TOML), to run again from the command line.
    pub definition_toml: String,
    pub max_trials: u32,
    pub events: Vec<StudyUpdate>,
    pub progress: StudyProgress,
    /// The newest trials: the table's first page.
    pub first_page: TrialPage,
}

/// What the designer shows about a study before it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CheckView {
    /// Configurations in the whole grid.
    pub grid_size: u64,
    /// Of those, how many the constraints allow (unknown for huge grids).
    pub allowed: Option<u64>,
    /// Of the allowed ones, how many the planner says cannot fit, and why
    /// (a few examples).
    pub not_fit: u64,
    pub not_fit_examples: Vec<String>,
    /// Trials the budget allows: the lesser of the budget and the space.
    pub planned_trials: u64,
    /// Wall time estimated from earlier loads and probe times, if known.
    pub estimate_s: Option<f64>,
    /// How the estimate was made.
    pub estimate_basis: String,
    pub baseline: BTreeMap<String, String>,
    /// The study as a file (TOML).
    pub toml: String,
}

/// A study's done trials on chosen metrics, with its Pareto front marked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ParetoView {
    pub metrics: Vec<String>,
    /// `max` or `min`, one for each metric.
    pub goals: Vec<String>,
    pub points: Vec<ParetoPointView>,
    /// The settings the study varies, with the values its points took.
    pub settings: Vec<SettingValues>,
    /// The classes of machine the study ran on, where more than one: the
    /// points are one class's (`machine`), never a mix.
    #[serde(default)]
    pub machines: Vec<String>,
    #[serde(default)]
    pub machine: Option<String>,
}

/// A study's Pareto plot as the page draws it: the figure, built on the
/// server from a [`ParetoView`], and what the page shows around it. The
/// browser hands the figure to plotly.js as it comes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ParetoFigure {
    #[serde(default)]
    pub figure: serde_json::Value,
    /// Trials drawn.
    pub points: usize,
    /// As in [`ParetoView`]: the classes of machine, where more than one,
    /// and the one drawn.
    #[serde(default)]
    pub machines: Vec<String>,
    #[serde(default)]
    pub machine: Option<String>,
}

/// What a study's trials show, written out: the markdown, and the same as
/// sanitized HTML for the page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FindingsView {
    pub markdown: String,
    pub html: String,
    pub count: usize,
    /// The metrics whose noise, one trial's, is beyond the margin: the page
    /// warns that the machine was too noisy to tell on them.
    #[serde(default)]
    pub too_noisy: Vec<String>,
    /// What the findings leave open that the page offers to settle.
    #[serde(default)]
    pub open: Vec<OpenQuestion>,
    /// Each objective's settings by how much they move it, as the findings
    /// judged them: the page draws them (see `importance::figure`).
    #[serde(default)]
    pub importance: Vec<ImportanceView>,
}

/// How much each varied setting moves one metric, against the baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ImportanceView {
    /// The metric's name and its label.
    pub metric: String,
    pub label: String,
    /// What the numbers are in: `%` (a ratio's change), `points` (a
    /// share's), or the metric's own unit for a plain difference.
    pub unit: String,
    /// The equivalence margin in the same unit: within it is "no effect".
    pub margin: Option<f64>,
    pub rows: Vec<ImportanceRow>,
}

/// One setting's furthest change on a metric, with its interval: 95 % for
/// an effect, 90 % for a "no effect" (the equivalence test's own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ImportanceRow {
    pub setting: String,
    /// The value that changed the metric most (`""`: none measured).
    pub value: String,
    pub est: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// `effect`, `no_effect` (within the margin) or `open` (not determined).
    pub verdict: String,
}

/// A setting whose effect on a metric the findings could not tell yet,
/// and what would settle it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpenQuestion {
    pub setting: String,
    /// The metric's name, as a request names it.
    pub metric: String,
    pub label: String,
    /// Why it is open, in a few words.
    pub why: String,
    /// The runs that would settle it (the baseline interleaved with the
    /// baseline changed in this setting alone), where runs can.
    pub runs: Option<usize>,
    /// About how many more trials the findings reckon would decide it,
    /// where that is more than `runs`: the runs only go toward it.
    #[serde(default)]
    pub needed: Option<usize>,
    /// Why runs cannot settle it, where they cannot.
    pub cannot: Option<String>,
    /// Runs already queued for it.
    pub queued: usize,
    /// Open at the pick (the pick changed in this setting alone), not at
    /// the baseline.
    #[serde(default)]
    pub at_pick: bool,
}

/// What "settle this" queued.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Settling {
    pub study_id: i64,
    pub setting: String,
    /// The metric's name.
    pub metric: String,
    /// Settled at the pick.
    #[serde(default)]
    pub at_pick: bool,
    pub trials: Vec<i64>,
}

/// One done trial of a study on one metric: what two studies are joined on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MetricPoint {
    pub trial_id: i64,
    pub settings: BTreeMap<String, String>,
    pub value: f64,
}

/// One varied setting and the values trials gave it (`""`: left to the
/// engine), which points refer to by index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SettingValues {
    pub name: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ParetoPointView {
    pub trial_id: i64,
    /// One value for each metric.
    pub values: Vec<f64>,
    pub on_front: bool,
    /// What differs from the study's baseline, for the hover label.
    pub differs: String,
    /// For each of the view's `settings`, the index of this trial's value.
    pub config: Vec<u32>,
}

/// Where a study stands, read again as trials finish.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StudyProgress {
    /// Trials that count against the budget.
    pub counted: u64,
    /// Trials in a final state, of any kind.
    pub finished: u64,
    /// The trials running now (one, or one per worker), oldest first.
    pub in_flight: Vec<TrialView>,
    /// The best done trial on each objective, in the objectives' order
    /// (none, in a study on several classes of machine: see below).
    pub best: Vec<Option<BestView>>,
    /// In a study on several classes of machine, each class's best.
    #[serde(default)]
    pub best_by_machine: Vec<MachineBest>,
}

/// One class of machine's best done trial on each objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MachineBest {
    pub machine: String,
    pub best: Vec<Option<BestView>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BestView {
    pub trial_id: i64,
    pub value: f64,
}
