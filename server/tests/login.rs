//! With a password set, every page and API route wants a login, except
//! read-only report links (pages, data and exports), the worker API (its
//! own tokens) and the browser bundle.

use crate::common;

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

#[tokio::test]
async fn everything_but_links_and_workers_wants_a_login() {
    let (server, study) =
        common::planted_server(|s| s.password = Some("correct horse".into())).await;
    let client = engine_bridge::http::client()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // Not logged in: pages go to the login page, the API says why.
    let r = client.get(server.url("/studies")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/login?next=%2Fstudies");
    let r = client.get(server.url("/api/trials")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("log in first"));
    let r = client.get(server.url("/login?next=/studies")).send().await.unwrap();
    assert!(r.text().await.unwrap().contains("id=\"password\""));

    // A wrong password, then the right one.
    let r = client
        .post(server.url("/login"))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string([("password", "wrong"), ("next", "/studies")]).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let text = r.text().await.unwrap();
    assert!(text.contains("not the password"), "{text}");
    let r = client
        .post(server.url("/login"))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(
            serde_urlencoded::to_string([
                ("password", "correct horse"),
                ("next", "https://elsewhere.example/"),
            ])
            .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/", "never sent elsewhere");
    let cookie = r.headers()[SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string();
    assert!(cookie.starts_with("tunebook_session=") && cookie.len() > 60, "{cookie}");
    let r = client.get(server.url("/api/trials")).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = client.get(server.url("/studies")).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Every page offers to log out (its style shows the button where the
    // body says a login is required).
    let page = r.text().await.unwrap();
    assert!(page.contains("<body data-login=\"required\">"), "{page}");
    assert!(page.contains("<form class=\"logout\" method=\"post\" action=\"/logout\">"));

    // Logged in: write a report and publish a link.
    let r = client
        .post(server.url(&format!("/api/studies/{study}/reports")))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let r = client
        .post(server.url(&format!("/api/reports/{id}/shares")))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    let token = r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_string();

    // The link needs no login: its page, its data, its exports.
    for path in [
        format!("/share/{token}"),
        format!("/api/shared/{token}"),
        format!("/api/shared/{token}/export.md"),
    ] {
        let r = client.get(server.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert!(r.text().await.unwrap().contains("Free win"), "{path}");
    }
    let r = client
        .post(server.url("/api/shared_report"))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string([("token", token.as_str())]).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the link's page asks the server without a login");
    // The owner's report is not open to all.
    let r = client.get(server.url(&format!("/api/reports/{id}"))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Workers use their tokens, not a login (adding one takes a login).
    let r = client
        .post(server.url("/api/workers"))
        .header(COOKIE, &cookie)
        .json(&json!({ "name": "gpu-a" }))
        .send()
        .await
        .unwrap();
    let worker_token = r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_string();
    let r = client
        .post(server.url("/api/worker/claim"))
        .bearer_auth(&worker_token)
        .json(&json!({ "profiles": ["demo"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    // Logged out: the session no longer opens anything.
    let r = client.post(server.url("/logout")).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = client.get(server.url("/api/trials")).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    server.stop().await;
}
