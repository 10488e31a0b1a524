//! How `tunebook mcp` reaches Tunebook: the JSON API of a running server,
//! over HTTP. Every tool call is an API request, so an agent passes the same
//! checks (the allowlists, the bounds, the login) as any other client, and
//! the studies it starts are the ones the browser shows.

use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

/// The longest answer read from the API (a large study's trials fit).
const MAX_ANSWER: usize = 64 * 1024 * 1024;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A running Tunebook server, and the session it gave this process.
pub struct Api {
    client: reqwest::Client,
    /// The server's address, ending in `/`: the API's paths are joined to
    /// it, so a server behind a proxy under a sub-path is reached there.
    base: Url,
    password: Option<String>,
    /// `tunebook_session=…`, where the server wants a password; opened
    /// again when it ends (a restart, a day unused).
    cookie: Mutex<Option<String>>,
}

/// What the API answered.
#[derive(Debug)]
pub enum Answer {
    /// A 2xx, and its body as JSON (`null` where it had none).
    Ok(Value),
    /// Anything else: the status and what the server said was wrong.
    Refused(StatusCode, String),
}

impl Api {
    /// Connects to the server at `server` (`http://127.0.0.1:3000`), logs in
    /// with `password` where it wants one, and checks that it answers.
    pub async fn connect(server: &str, password: Option<&str>) -> anyhow::Result<Api> {
        let mut base = Url::parse(server).with_context(|| format!("`{server}` is not a URL"))?;
        if !matches!(base.scheme(), "http" | "https") || base.host().is_none() {
            bail!("`{server}`: the server's address is an http:// or https:// URL");
        }
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let host = base.host_str().unwrap_or_default().trim_matches(['[', ']']);
        let local = host == "localhost"
            || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if password.is_some() && base.scheme() == "http" && !local {
            tracing::warn!("the password goes to {server} unencrypted (http, not https)");
        }
        let client = engine_bridge::http::client()
            .no_proxy()
            // The login answers with a redirect and the cookie: kept here.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()?;
        let api =
            Api { client, base, password: password.map(str::to_string), cookie: Mutex::new(None) };
        api.log_in().await?;
        match api.call(Method::GET, "/api/profiles", None).await {
            Ok(Answer::Ok(_)) => Ok(api),
            Ok(Answer::Refused(status, why)) => bail!("{server} refused: {status} {why}"),
            Err(e) => Err(e.context(format!(
                "Tunebook is not answering at {server} (start it with `tunebook serve`)"
            ))),
        }
    }

    /// Opens a session with the password, where one is given. A server
    /// without a password answers the login with a redirect and no cookie:
    /// nothing to keep.
    async fn log_in(&self) -> anyhow::Result<()> {
        let Some(password) = &self.password else { return Ok(()) };
        let url = self.base.join("login")?;
        let form = serde_urlencoded::to_string([("password", password)])?;
        let response = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await?;
        let cookie = response
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.split(';').next().filter(|pair| pair.starts_with("tunebook_session=")))
            .map(str::to_string);
        if cookie.is_none() && !response.status().is_redirection() {
            bail!("the server did not take the password ({})", response.status());
        }
        *self.cookie.lock().expect("the cookie's lock") = cookie;
        Ok(())
    }

    /// `method path`, with `body` as JSON; once more after logging in
    /// again, where the session had ended.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        let mut response = self.send(method.clone(), path, body).await?;
        if response.status() == StatusCode::UNAUTHORIZED && self.password.is_some() {
            self.log_in().await?;
            response = self.send(method, path, body).await?;
        }
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if bytes.len() + chunk.len() > MAX_ANSWER {
                bail!("the answer to {path} is over {} MB", MAX_ANSWER / (1024 * 1024));
            }
            bytes.extend_from_slice(&chunk);
        }
        let json = || serde_json::from_slice::<Value>(&bytes);
        if status.is_success() {
            return Ok(Answer::Ok(if bytes.is_empty() { Value::Null } else { json()? }));
        }
        let why = json()
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(2000).collect());
        Ok(Answer::Refused(status, why))
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<reqwest::Response> {
        let url = self.base.join(path.trim_start_matches('/'))?;
        let mut request = self.client.request(method, url);
        let cookie = self.cookie.lock().expect("the cookie's lock").clone();
        if let Some(cookie) = cookie {
            request = request.header(reqwest::header::COOKIE, cookie);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        Ok(request.send().await?)
    }
}
