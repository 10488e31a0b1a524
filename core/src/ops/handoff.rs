//! A configuration handed to the tools that serve it after a study: a
//! trial as a llama-swap entry, a docker compose service or a systemd unit
//! ([`crate::recipe`]); and a study as an Optuna journal
//! ([`crate::optuna_journal`]).

use std::collections::BTreeMap;

use crate::checked::Checked;
use crate::db::{Db, studies, trials};
use crate::error::{Error, Result};
use crate::recipe;
use crate::trial::Trial;

/// What a trial is handed off as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    LlamaSwap,
    Compose,
    Systemd,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::LlamaSwap, Format::Compose, Format::Systemd];

    /// As a request and the command line name it.
    pub fn name(self) -> &'static str {
        match self {
            Format::LlamaSwap => "llama-swap",
            Format::Compose => "compose",
            Format::Systemd => "systemd",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// Trial `id` as `format`.
pub async fn trial(db: &Db, id: i64, format: Format) -> Result<String> {
    let t = Trial::from(trials::get(db, id).await?.ok_or(Error::NotFound)?);
    let r = recipe::of_trial(db, &t).await?.ok_or_else(|| {
        Error::BadRequest(format!(
            "trial {id} has no command to run (never launched, or an external endpoint)"
        ))
    })?;
    match format {
        Format::Systemd => Ok(r.unit),
        Format::LlamaSwap => r.llama_swap(&t.model).map_err(Error::BadRequest),
        Format::Compose => r.compose(&t.model).map_err(Error::BadRequest),
    }
}

/// Study `id` as an Optuna journal.
pub async fn optuna_journal(db: &Db, checked: &Checked, id: i64) -> Result<String> {
    let row = studies::get(db, id).await?.ok_or(Error::NotFound)?;
    let study = checked.study(&row.definition).map_err(|e| Error::BadRequest(e.to_string()))?;
    let list: Vec<Trial> = crate::views::all(trials::of_study(db, id).await?);
    let finished: BTreeMap<i64, i64> = trials::finished_times(db, id).await?.into_iter().collect();
    Ok(crate::optuna_journal::journal(&row.name, &study, &list, &finished))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_is_read_back_from_its_name() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
        }
    }
}
