//! What the JSON API's handlers read from a path, and a body a handler
//! reads itself: named, with their JSON Schemas, so that the OpenAPI
//! description (`crate::api`) names every parameter and body it takes.

use std::marker::PhantomData;

use aide::OperationInput;
use aide::generate::GenContext;
use aide::openapi::Operation;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use schemars::JsonSchema;
use serde::Deserialize;

/// `{id}`: a trial's, a study's or a report's number.
#[derive(Deserialize, JsonSchema)]
pub struct Id {
    #[schemars(example = 1)]
    pub id: i64,
}

/// `{id}/…/{format}`: a trial and the form to hand it off in.
#[derive(Deserialize, JsonSchema)]
pub struct IdFormat {
    pub id: i64,
    /// The form: one of these (400 naming them for any other).
    #[schemars(extend("enum" = ["llama-swap", "compose", "systemd"]))]
    pub format: String,
}

/// `{id}/{action}`: a study and what to do with it.
#[derive(Deserialize, JsonSchema)]
pub struct IdAction {
    pub id: i64,
    /// What to do (400 for anything else).
    #[schemars(extend("enum" = ["pause", "resume", "stop"]))]
    pub action: String,
}

/// `{id}/{file}`: a report and which export of it.
#[derive(Deserialize, JsonSchema)]
pub struct IdFile {
    pub id: i64,
    /// Which export (404 for anything else).
    #[schemars(extend("enum" = ["export.md", "export.html"]))]
    pub file: String,
}

/// `{token}`: a share link's token.
#[derive(Deserialize, JsonSchema)]
pub struct Token {
    pub token: String,
}

/// `{token}/{file}`: a shared report and which export of it.
#[derive(Deserialize, JsonSchema)]
pub struct TokenFile {
    pub token: String,
    /// Which export (404 for anything else).
    #[schemars(extend("enum" = ["export.md", "export.html"]))]
    pub file: String,
}

/// `{name}`: a worker's name.
#[derive(Deserialize, JsonSchema)]
pub struct Name {
    pub name: String,
}

/// A JSON body the handler reads itself, to say in its own words what is
/// wrong with it (a study names the field it does not know), described as
/// a `T`.
pub struct JsonOf<T>(pub serde_json::Value, pub PhantomData<T>);

impl<S: Send + Sync, T> FromRequest<S> for JsonOf<T> {
    type Rejection = JsonRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<serde_json::Value>::from_request(req, state).await?;
        Ok(JsonOf(value, PhantomData))
    }
}

impl<T: JsonSchema> OperationInput for JsonOf<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        Json::<T>::operation_input(ctx, operation);
    }
}
