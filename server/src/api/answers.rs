//! What the API's description says of an answer beyond what its
//! handler's type carries: every failure's statuses and bodies, a thing
//! created, nothing, a file.

use aide::OperationOutput;
use aide::generate::GenContext;
use aide::openapi::{MediaType, Operation, ReferenceOr, Response, SchemaObject, StatusCode};
use aide::transform::TransformOperation;
use axum::Json;
use schemars::JsonSchema;

use crate::api_error::{ApiError, ErrorBody};

/// The statuses a failure answers with, what each means, and whether axum
/// itself may give it for a request it cannot read (a path, a query or a
/// body not of the route's shape), as plain text. Every other failure's
/// body is an [`ErrorBody`], the login's, the same-origin guard's and the
/// disk guard's included. Not every route gives every one.
const FAILURES: [(u16, &str, bool); 11] = [
    (400, "The request is wrong: what, in words", true),
    (401, "A login is wanted (for the worker protocol, a worker's token)", false),
    (403, "Sent from another site, or to a host this server does not answer to", false),
    (404, "No such thing", false),
    (409, "In conflict with what is there: a newer version, a lost lease, a study's state", false),
    (410, "Gone: a revoked link", false),
    (413, "The body is too large", true),
    (415, "The body is not JSON", true),
    (422, "The body is JSON, not of the shape the route takes", true),
    (
        503,
        "What the answer needs is not there (the browser bundle, a writer, room for more work)",
        false,
    ),
    (507, "The disk is too full to write", false),
];

fn string() -> SchemaObject {
    SchemaObject {
        json_schema: schemars::json_schema!({ "type": "string" }),
        example: None,
        external_docs: None,
    }
}

impl OperationOutput for ApiError {
    type Inner = ErrorBody;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        Json::<ErrorBody>::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        let Some(json) = Self::operation_response(ctx, operation) else { return Vec::new() };
        FAILURES
            .iter()
            .map(|&(code, what, plain)| {
                let mut response = json.clone();
                response.description = what.to_string();
                if plain {
                    let text = MediaType { schema: Some(string()), ..MediaType::default() };
                    response.content.insert("text/plain".into(), text);
                }
                (Some(StatusCode::Code(code)), response)
            })
            .collect()
    }
}

/// A `201 Created` with a `T`, where the handler answers a status and a
/// body as a tuple (which its type does not describe).
pub fn created<T: JsonSchema>(op: TransformOperation<'_>) -> TransformOperation<'_> {
    op.response::<201, Json<T>>()
}

/// A `204 No Content`.
pub fn no_content(op: TransformOperation<'_>) -> TransformOperation<'_> {
    op.response_with::<204, (), _>(|r| r.description("Done"))
}

/// A `200` whose body is a file of one of these media types.
pub fn file<'t>(
    mut op: TransformOperation<'t>,
    media: &[&str],
    what: &str,
) -> TransformOperation<'t> {
    let content = media
        .iter()
        .map(|m| (m.to_string(), MediaType { schema: Some(string()), ..MediaType::default() }))
        .collect();
    let response = Response { description: what.to_string(), content, ..Response::default() };
    let responses = op.inner_mut().responses.get_or_insert_with(Default::default);
    responses.responses.insert(StatusCode::Code(200), ReferenceOr::Item(response));
    op
}
