//! The HTTP status each kind of the application's failures answers with:
//! one table, for the pages' server functions and the server's JSON API.

use leptos::server_fn::http_export::StatusCode;
use tunebook_core::error::Kind;

/// The status a failure of this kind answers with.
pub fn of(kind: Kind) -> StatusCode {
    match kind {
        Kind::BadRequest => StatusCode::BAD_REQUEST,
        Kind::NotFound => StatusCode::NOT_FOUND,
        Kind::Conflict => StatusCode::CONFLICT,
        Kind::Gone => StatusCode::GONE,
        Kind::Unauthorized => StatusCode::UNAUTHORIZED,
        Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Kind::DiskFull => StatusCode::INSUFFICIENT_STORAGE,
        Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
