//! Reports: notebooks of cells, rendered, versioned and shared.

use serde::{Deserialize, Serialize};

/// What a report cell shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CellBody {
    /// Markdown, shown sanitized.
    Markdown { text: String },
    /// A plot of the study's trials.
    Plot { chart: Chart },
    /// The study's best trials on a metric.
    Table { metric: String, limit: u32 },
    /// One trial's configuration and how to run it.
    Config { trial: i64 },
}

/// Which plot a plot cell draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "chart", rename_all = "snake_case")]
pub enum Chart {
    /// Two metrics against each other, the Pareto front marked.
    Pareto { x: String, y: String },
    /// A setting's effect on a metric: a box per value.
    Effect { setting: String, metric: String },
    /// A metric over the trials in the order they ran, and the best so far.
    BestSoFar { metric: String },
}

/// One cell of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Cell {
    /// Names the cell within its report, across versions.
    pub id: String,
    #[serde(flatten)]
    pub body: CellBody,
    /// The finding (or part of the write-up) it was written from; `None`
    /// for a cell the user added.
    #[serde(default)]
    pub origin: Option<String>,
    /// Changed by the user: regenerating the findings leaves it as it is.
    #[serde(default)]
    pub edited: bool,
    /// The class of machine whose trials a plot or table draws from, in a
    /// study run on several (speeds compare only within one); all trials
    /// when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

/// A report's content at one version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Notebook {
    pub cells: Vec<Cell>,
    /// Origins of written cells the user deleted: regenerating does not
    /// bring them back.
    #[serde(default)]
    pub dismissed: Vec<String>,
}

/// A cell as shown: its sanitized HTML, and for a plot the figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RenderedCell {
    pub cell: Cell,
    pub html: String,
    pub figure: Option<serde_json::Value>,
}

/// One saved version of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VersionInfo {
    pub version: i64,
    pub note: String,
    pub created_ms: i64,
}

/// A read-only link to a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ShareView {
    pub token: String,
    /// The version it shows.
    pub version: i64,
    pub created_ms: i64,
    pub revoked: bool,
}

/// A report as a page shows it: one version's cells rendered; the owner's
/// view also lists its versions and links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReportView {
    pub id: i64,
    pub study_id: i64,
    pub study_name: String,
    pub title: String,
    pub version: i64,
    /// The newest version (what an edit must start from).
    pub latest: i64,
    pub notebook: Notebook,
    pub cells: Vec<RenderedCell>,
    pub versions: Vec<VersionInfo>,
    pub shares: Vec<ShareView>,
    /// Whether the server has a writer model to rewrite the findings as
    /// prose: the page offers it only then.
    #[serde(default)]
    pub writer: bool,
}

/// A report in a study's list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReportSummary {
    pub id: i64,
    pub title: String,
    pub version: i64,
}
