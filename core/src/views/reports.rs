//! A report's versions and links as its page shows them.

use tunebook_views::types::{ShareView, VersionInfo};

use crate::db::reports::{ShareRow, VersionRow};

impl From<VersionRow> for VersionInfo {
    fn from(v: VersionRow) -> Self {
        VersionInfo { version: v.version, note: v.note, created_ms: v.created_ms }
    }
}

impl From<ShareRow> for ShareView {
    fn from(s: ShareRow) -> Self {
        ShareView {
            token: s.token,
            version: s.version,
            created_ms: s.created_ms,
            revoked: s.revoked,
        }
    }
}
