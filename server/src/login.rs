//! An optional login: with a password set (`TUNEBOOK_PASSWORD`), every page
//! and API route wants a session cookie, except what must work without one —
//! read-only report links and their exports, the worker API (which has its
//! own tokens), the browser bundle, and the login page itself. Sessions are
//! random 256-bit tokens kept (as SHA-256) in memory: a restart logs
//! everyone out.

use std::collections::HashSet;
use std::sync::Mutex;

use axum::Form;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "tunebook_session";

/// The password, and the sessions it opened.
pub struct Login {
    password_sha256: [u8; 32],
    sessions: Mutex<HashSet<[u8; 32]>>,
}

fn sha256(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

impl Login {
    pub fn new(password: &str) -> Self {
        Login { password_sha256: sha256(password), sessions: Mutex::default() }
    }

    /// A new session for the right password.
    fn open(&self, password: &str) -> Option<String> {
        // Digests compared, not the password: the time taken tells nothing
        // about how much of it was right.
        if sha256(password) != self.password_sha256 {
            return None;
        }
        let token = crate::new_token();
        self.sessions.lock().expect("sessions").insert(sha256(&token));
        Some(token)
    }

    fn valid(&self, token: &str) -> bool {
        self.sessions.lock().expect("sessions").contains(&sha256(token))
    }

    fn close(&self, token: &str) {
        self.sessions.lock().expect("sessions").remove(&sha256(token));
    }
}

/// Paths anyone may open: report links and their data, the worker API,
/// static files, the login page.
fn open_to_all(path: &str) -> bool {
    path == "/login"
        || path.starts_with("/share/")
        || path.starts_with("/api/shared/")
        || path.starts_with("/api/shared_report")
        || path.starts_with("/api/worker/")
        || path.starts_with("/pkg/")
        || path == "/favicon.ico"
}

fn session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Lets a request through when no password is set, when its path is open
/// to all, or when it carries a session; else 401 for the API and a
/// redirect to the login page for pages.
pub async fn require(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(login) = &state.login else { return next.run(request).await };
    let path = request.uri().path().to_string();
    if open_to_all(&path) || session(request.headers()).is_some_and(|s| login.valid(&s)) {
        return next.run(request).await;
    }
    if path.starts_with("/api/") {
        let body =
            serde_json::json!({ "error": "log in first: this Tunebook asks for a password" });
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    let back = request.uri().path_and_query().map_or("/".to_string(), |p| p.to_string());
    let query = serde_urlencoded::to_string([("next", back)]).unwrap_or_default();
    Redirect::to(&format!("/login?{query}")).into_response()
}

#[derive(Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

/// Where to go after logging in: a path on this server, never elsewhere.
fn local(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_string(),
        _ => "/".into(),
    }
}

fn page(next: &str, message: Option<&'static str>) -> Html<String> {
    let escape = |s: &str| ammonia::clean_text(s);
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tunebook: log in</title>\
         <link rel=\"stylesheet\" href=\"/pkg/tunebook.css\"></head><body><main class=\"login\">\
         <h1>Tunebook</h1>{}<form method=\"post\" action=\"/login\">\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\
         <label>Password <input id=\"password\" type=\"password\" name=\"password\" autofocus></label> \
         <button id=\"log-in\" type=\"submit\">Log in</button></form></main></body></html>",
        // The message is one of this file's own; `next` comes from the URL.
        message.map_or(String::new(), |m| format!("<p class=\"error\" id=\"login-error\">{m}</p>")),
        escape(next)
    ))
}

pub async fn form(Query(q): Query<LoginQuery>) -> Html<String> {
    page(&local(q.next.as_deref()), None)
}

#[derive(Deserialize)]
pub struct Credentials {
    password: String,
    next: Option<String>,
}

pub async fn submit(State(state): State<AppState>, Form(c): Form<Credentials>) -> Response {
    let next = local(c.next.as_deref());
    let Some(login) = &state.login else { return Redirect::to(&next).into_response() };
    match login.open(&c.password) {
        Some(token) => (
            [(header::SET_COOKIE, format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax"))],
            Redirect::to(&next),
        )
            .into_response(),
        None => (StatusCode::UNAUTHORIZED, page(&next, Some("That is not the password.")))
            .into_response(),
    }
}

pub async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let (Some(login), Some(token)) = (&state.login, session(&headers)) {
        login.close(&token);
    }
    (
        [(header::SET_COOKIE, format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"))],
        Redirect::to("/login"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_gone_back_to() {
        assert_eq!(local(Some("/studies/3?x=1")), "/studies/3?x=1");
        for outside in ["https://evil.example/", "//evil.example/", "/\\evil.example", "studies"] {
            assert_eq!(local(Some(outside)), "/", "{outside}");
        }
        assert_eq!(local(None), "/");
    }

    #[test]
    fn a_session_opens_with_the_password_only_and_closes() {
        let login = Login::new("s3cret");
        assert!(login.open("s3cre").is_none() && login.open("").is_none());
        let token = login.open("s3cret").unwrap();
        assert!(login.valid(&token) && !login.valid("other"));
        login.close(&token);
        assert!(!login.valid(&token));
    }

    #[test]
    fn the_session_is_read_from_the_cookie_header() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("a=1; {COOKIE}=abc; b=2").parse().unwrap());
        assert_eq!(session(&h).as_deref(), Some("abc"));
        assert_eq!(session(&HeaderMap::new()), None);
    }
}
