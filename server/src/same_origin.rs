//! Refuses requests that another web site makes through the user's
//! browser, before any handler runs:
//!
//! - **Host**: only an IP address, `localhost`, or a name the server was
//!   told to answer to (`--allowed-host`). A page on `evil.example` whose
//!   name is rebound to 127.0.0.1 (DNS rebinding) sends `Host:
//!   evil.example` and is refused, on every route.
//! - **Origin**: a request that changes something (anything but GET, HEAD
//!   and OPTIONS) from a browser must come from this server's own pages:
//!   its `Origin` must name the host it was sent to. Another port on
//!   127.0.0.1 is another origin. Browsers send `Origin` on every such
//!   request; programs (curl, workers, the CLI) send none and pass.
//!
//! Both answer 403 with what was wrong.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The names, besides IP addresses and `localhost`, this server answers to.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts(pub Arc<Vec<String>>);

/// The host part of a `Host` header or an origin's authority, lowercased,
/// without the port.
fn host_name(authority: &str) -> String {
    let authority = authority.trim().to_ascii_lowercase();
    if let Some(rest) = authority.strip_prefix('[') {
        // [::1]:3000
        return rest.split(']').next().unwrap_or_default().to_string();
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host.to_string(),
        _ => authority,
    }
}

/// Why a `Host` header is refused, if it is.
fn host_error(host: &str, allowed: &AllowedHosts) -> Option<String> {
    let name = host_name(host);
    let fine = name.parse::<IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || allowed.0.iter().any(|a| a.eq_ignore_ascii_case(&name));
    (!fine).then(|| {
        format!(
            "this Tunebook does not answer to the name `{}`; start it with --allowed-host {} to allow it",
            name.escape_debug(),
            name.escape_debug()
        )
    })
}

/// Why a state-changing request is refused, if it is.
fn origin_error(method: &Method, headers: &HeaderMap) -> Option<String> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST.as_str()).unwrap_or_default().trim().to_ascii_lowercase();
    match text(header::ORIGIN.as_str()) {
        Some(origin) => {
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .map(str::to_ascii_lowercase);
            (authority.as_deref() != Some(host.as_str())).then(|| {
                format!(
                    "a request from {} may not change anything on this Tunebook (only its own pages may)",
                    origin.escape_debug()
                )
            })
        }
        // No Origin: a program, or an old browser that says where it is.
        None => match text("sec-fetch-site") {
            Some("same-origin" | "none") | None => None,
            Some(other) => Some(format!(
                "a {} request may not change anything on this Tunebook",
                other.escape_debug()
            )),
        },
    }
}

/// The middleware: 403 for a foreign host or a cross-origin change.
pub async fn guard(State(allowed): State<AllowedHosts>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let refused = host
        .and_then(|h| host_error(h, &allowed))
        .or_else(|| origin_error(request.method(), headers));
    match refused {
        Some(why) => {
            tracing::warn!(path = %request.uri().path(), why, "refused a request from elsewhere");
            (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({ "error": why }))).into_response()
        }
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn hosts_by_address_localhost_or_allowed_name() {
        let allowed = AllowedHosts(Arc::new(vec!["tunebook.lab".into()]));
        for ok in ["127.0.0.1:3000", "[::1]:3000", "localhost:3000", "10.1.2.3", "TuneBook.lab:80"]
        {
            assert_eq!(host_error(ok, &allowed), None, "{ok}");
        }
        for bad in ["evil.example:3000", "127.0.0.1.evil.example", "localhost.evil.example:1"] {
            assert!(host_error(bad, &allowed).is_some(), "{bad}");
        }
    }

    #[test]
    fn changes_only_from_the_same_origin() {
        let post = Method::POST;
        let same = headers(&[("host", "127.0.0.1:3000"), ("origin", "http://127.0.0.1:3000")]);
        assert_eq!(origin_error(&post, &same), None);
        for origin in ["http://127.0.0.1:8080", "http://evil.example", "null", "file://"] {
            let h = headers(&[("host", "127.0.0.1:3000"), ("origin", origin)]);
            assert!(origin_error(&post, &h).is_some(), "{origin}");
        }
        let program = headers(&[("host", "127.0.0.1:3000")]);
        assert_eq!(origin_error(&post, &program), None);
        let site = headers(&[("host", "127.0.0.1:3000"), ("sec-fetch-site", "same-site")]);
        assert!(origin_error(&post, &site).is_some());
        let read = headers(&[("host", "127.0.0.1:3000"), ("origin", "http://evil.example")]);
        assert_eq!(origin_error(&Method::GET, &read), None);
    }
}
