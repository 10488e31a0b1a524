//! What reports need of the server, and nothing more: the database, the
//! engine profiles (a study's baseline, a draft's provenance), the data
//! folder and measured bandwidth (provenance), and the writer model (prose).

use std::path::PathBuf;
use std::sync::Arc;

use engine_bridge::Profile;

use crate::db::Db;

#[derive(Clone)]
pub struct Reports {
    pub db: Db,
    pub profiles: Arc<Vec<Profile>>,
    pub data_dir: PathBuf,
    /// Measured memory read bandwidth, bytes per second.
    pub bandwidth: Option<f64>,
    /// The model that may rewrite findings as prose.
    pub writer: Option<tunebook_study::study::Endpoint>,
    /// The server's turns at CPU work.
    pub heavy: crate::heavy::Turns,
    /// The studies checked against `profiles`, each once.
    pub checked: Arc<crate::checked::Checked>,
}
