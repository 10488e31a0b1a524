//! How the JSON API answers a failure: the status of its kind
//! (`tunebook_app::status`) and `{"error": …}` with what the client is told
//! ([`Error::for_client`]). Handlers return [`Result`] and use `?` on the
//! application's errors.

use axum::Json;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;

use crate::Error;

/// What every failure answers, with the status of its kind (the API's
/// description says so from this type: `crate::api`).
#[derive(Serialize, JsonSchema)]
pub struct ErrorBody {
    /// What was wrong, in words for the client.
    pub error: String,
}

/// An application error on its way out as an HTTP answer.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl<E: Into<Error>> From<E> for ApiError {
    fn from(e: E) -> Self {
        ApiError(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = tunebook_app::status::of(self.0.kind());
        (status, Json(ErrorBody { error: self.0.for_client() })).into_response()
    }
}

/// A handler's result.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;
