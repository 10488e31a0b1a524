//! How `tunebook mcp` reaches Tunebook: the JSON API of a running server,
//! over HTTP. Every tool call is an API request, so an agent passes the same
//! checks (the allowlists, the bounds, the login) as any other client, and
//! the studies it starts are the ones the browser shows.

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
    base: Url,
    /// `tunebook_session=…`, where the server wants a password.
    cookie: Option<String>,
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
        let base = Url::parse(server).with_context(|| format!("`{server}` is not a URL"))?;
        if !matches!(base.scheme(), "http" | "https") || base.host().is_none() {
            bail!("`{server}`: the server's address is an http:// or https:// URL");
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            // The login answers with a redirect and the cookie: kept here.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()?;
        let mut api = Api { client, base, cookie: None };
        if let Some(password) = password {
            api.cookie = Some(api.log_in(password).await?);
        }
        match api.call(Method::GET, "/api/profiles", None).await {
            Ok(Answer::Ok(_)) => Ok(api),
            Ok(Answer::Refused(status, why)) => bail!("{server} refused: {status} {why}"),
            Err(e) => Err(e.context(format!(
                "Tunebook is not answering at {server} (start it with `tunebook serve`)"
            ))),
        }
    }

    async fn log_in(&self, password: &str) -> anyhow::Result<String> {
        let url = self.base.join("/login")?;
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
            .find_map(|v| v.split(';').next().filter(|pair| pair.starts_with("tunebook_session=")));
        match cookie {
            Some(pair) => Ok(pair.to_string()),
            None => bail!("the server did not take the password ({})", response.status()),
        }
    }

    /// `method path`, with `body` as JSON.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        let mut request = self.client.request(method, self.base.join(path)?);
        if let Some(cookie) = &self.cookie {
            request = request.header(reqwest::header::COOKIE, cookie);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await?;
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
}
