//! An optional login: with a password set (`TUNEBOOK_PASSWORD`), every page
//! and API route wants a session cookie, except what must work without one —
//! read-only report links and their exports, the worker API (which has its
//! own tokens), the browser bundle, and the login page itself. Sessions are
//! random 256-bit tokens kept (as SHA-256) in memory: a restart logs
//! everyone out. A session ends after [`IDLE`] unused or [`LIFETIME`] in
//! all; an address that gives a wrong password [`MAX_FAILURES`] times
//! waits out the rest of [`FAILURE_WINDOW`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Form;
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "tunebook_session";

/// A session unused this long has ended.
pub const IDLE: Duration = Duration::from_secs(12 * 3600);
/// No session lasts longer than this.
pub const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// Wrong passwords an address may give within [`FAILURE_WINDOW`].
pub const MAX_FAILURES: u32 = 5;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Most addresses whose failures are remembered at once.
const MAX_TRACKED: usize = 10_000;

/// Where the wrong guesses of addresses past [`MAX_TRACKED`] are counted,
/// together (no client has this address).
const OVERFLOW: IpAddr = IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED);

/// When a session was opened and last used.
struct Session {
    opened: Instant,
    used: Instant,
}

/// The password, the sessions it opened, and recent wrong guesses.
pub struct Login {
    password_sha256: [u8; 32],
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    /// Per address: wrong passwords since the window opened.
    failures: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

/// Why a login was not opened.
#[derive(Debug, PartialEq)]
enum Refusal {
    WrongPassword,
    /// Too many wrong passwords lately: try again after this long.
    TooMany(Duration),
}

fn alive(s: &Session, now: Instant) -> bool {
    now.duration_since(s.used) < IDLE && now.duration_since(s.opened) < LIFETIME
}

fn sha256(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

impl Login {
    pub fn new(password: &str) -> Self {
        Login {
            password_sha256: sha256(password),
            sessions: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    /// A new session for the right password, unless `from` has guessed
    /// wrong too often lately.
    fn open(&self, password: &str, from: IpAddr, now: Instant) -> Result<String, Refusal> {
        let mut failures = self.failures.lock().expect("failures");
        failures.retain(|_, (since, _)| now.duration_since(*since) < FAILURE_WINDOW);
        // Past the addresses tracked one by one, the rest share one count:
        // a new address is never a fresh set of guesses.
        let from = if failures.len() < MAX_TRACKED || failures.contains_key(&from) {
            from
        } else {
            OVERFLOW
        };
        if let Some((since, n)) = failures.get(&from)
            && *n >= MAX_FAILURES
        {
            return Err(Refusal::TooMany(
                FAILURE_WINDOW.saturating_sub(now.duration_since(*since)),
            ));
        }
        // Digests compared, not the password: the time taken tells nothing
        // about how much of it was right.
        if sha256(password) != self.password_sha256 {
            failures.entry(from).or_insert((now, 0)).1 += 1;
            return Err(Refusal::WrongPassword);
        }
        failures.remove(&from);
        let token = crate::new_token();
        let mut sessions = self.sessions.lock().expect("sessions");
        sessions.retain(|_, s| alive(s, now));
        sessions.insert(sha256(&token), Session { opened: now, used: now });
        Ok(token)
    }

    fn valid(&self, token: &str, now: Instant) -> bool {
        let mut sessions = self.sessions.lock().expect("sessions");
        match sessions.get_mut(&sha256(token)) {
            Some(s) if alive(s, now) => {
                s.used = now;
                true
            }
            Some(_) => {
                sessions.remove(&sha256(token));
                false
            }
            None => false,
        }
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
    let now = Instant::now();
    if open_to_all(&path) || session(request.headers()).is_some_and(|s| login.valid(&s, now)) {
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

/// Where to go after logging in: a plain path on this server, never
/// elsewhere. Browsers drop tabs and newlines from addresses and read `\`
/// as `/`, so `/\t/evil.example` would lead off-site: only printable ASCII
/// without `\` is taken, and never `//` at the start.
fn local(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.len() <= 2000
                && n.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') =>
        {
            n.to_string()
        }
        _ => "/".into(),
    }
}

/// `Secure` where the browser reached Tunebook over TLS (through a proxy
/// that says so), so the cookie never travels in clear.
fn cookie_attributes(headers: &HeaderMap) -> &'static str {
    let tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    if tls { "; Secure" } else { "" }
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

pub async fn submit(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(c): Form<Credentials>,
) -> Response {
    let next = local(c.next.as_deref());
    let Some(login) = &state.login else { return Redirect::to(&next).into_response() };
    match login.open(&c.password, peer.ip(), Instant::now()) {
        Ok(token) => {
            let cookie = format!(
                "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{}",
                LIFETIME.as_secs(),
                cookie_attributes(&headers)
            );
            ([(header::SET_COOKIE, cookie)], Redirect::to(&next)).into_response()
        }
        Err(Refusal::WrongPassword) => {
            (StatusCode::UNAUTHORIZED, page(&next, Some("That is not the password.")))
                .into_response()
        }
        Err(Refusal::TooMany(wait)) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, wait.as_secs().max(1).to_string())],
            page(&next, Some("Too many wrong passwords: wait a minute and try again.")),
        )
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
        for outside in [
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "studies",
            "/\t/evil.example",
            "/\n/evil.example",
            "/ /evil.example",
        ] {
            assert_eq!(local(Some(outside)), "/", "{outside}");
        }
        assert_eq!(local(None), "/");
    }

    const ME: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn a_session_opens_with_the_password_only_and_closes() {
        let login = Login::new("s3cret");
        let now = Instant::now();
        assert_eq!(login.open("s3cre", ME, now), Err(Refusal::WrongPassword));
        assert_eq!(login.open("", ME, now), Err(Refusal::WrongPassword));
        let token = login.open("s3cret", ME, now).unwrap();
        assert!(login.valid(&token, now) && !login.valid("other", now));
        login.close(&token);
        assert!(!login.valid(&token, now));
    }

    #[test]
    fn sessions_end_when_idle_or_old() {
        let login = Login::new("pw");
        let t0 = Instant::now();
        let token = login.open("pw", ME, t0).unwrap();
        assert!(!login.valid(&token, t0 + IDLE), "idle too long");
        let token = login.open("pw", ME, t0).unwrap();
        let mut now = t0;
        while now < t0 + LIFETIME - IDLE {
            now += IDLE / 2;
            assert!(login.valid(&token, now), "kept alive by use");
        }
        assert!(!login.valid(&token, t0 + LIFETIME), "never past its lifetime");
    }

    #[test]
    fn wrong_guesses_are_limited_per_address() {
        let login = Login::new("pw");
        let now = Instant::now();
        for _ in 0..MAX_FAILURES {
            assert_eq!(login.open("guess", ME, now), Err(Refusal::WrongPassword));
        }
        assert!(
            matches!(login.open("pw", ME, now), Err(Refusal::TooMany(_))),
            "even the right one"
        );
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(login.open("pw", other, now).is_ok(), "another address is not held up");
        assert!(login.open("pw", ME, now + FAILURE_WINDOW).is_ok(), "after the window");
    }

    #[test]
    fn addresses_past_those_tracked_share_one_count() {
        let login = Login::new("pw");
        let now = Instant::now();
        for i in 0..MAX_TRACKED as u32 {
            let at = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            assert_eq!(login.open("guess", at, now), Err(Refusal::WrongPassword));
        }
        // Every new address after that draws on the same few guesses.
        let fresh = |i: u32| IpAddr::V4(std::net::Ipv4Addr::from(0xc000_0000 + i));
        for i in 0..MAX_FAILURES {
            assert_eq!(login.open("guess", fresh(i), now), Err(Refusal::WrongPassword));
        }
        assert!(matches!(login.open("guess", fresh(999), now), Err(Refusal::TooMany(_))));
        assert!(login.open("pw", fresh(1000), now + FAILURE_WINDOW).is_ok(), "after the window");
    }

    #[test]
    fn the_session_is_read_from_the_cookie_header() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("a=1; {COOKIE}=abc; b=2").parse().unwrap());
        assert_eq!(session(&h).as_deref(), Some("abc"));
        assert_eq!(session(&HeaderMap::new()), None);
    }
}
