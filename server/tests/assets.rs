//! What the server sends browsers, compressed where they take it: the
//! browser bundle from the gzipped copies written beside it, pages and API
//! answers gzipped as they go, and the live feed never (it must arrive as
//! it happens).

use crate::common;

use common::{TestServer, http};
use reqwest::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE};

#[tokio::test]
async fn the_bundle_pages_and_answers_are_gzipped_and_the_live_feed_is_not() {
    let plotly = common::repo_root().join("target/site/pkg/plotly.min.js");
    let gzipped = common::repo_root().join("target/site/pkg/plotly.min.js.gz");
    assert!(gzipped.is_file(), "no gzipped bundle: run scripts/build-site.sh");
    let server = TestServer::start().await;

    // Asked for gzip: the precompressed copy, byte for byte.
    let r = http()
        .get(server.url("/pkg/plotly.min.js"))
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[CONTENT_ENCODING], "gzip");
    assert!(r.headers()[CONTENT_TYPE].to_str().unwrap().contains("javascript"));
    assert_eq!(r.bytes().await.unwrap(), std::fs::read(&gzipped).unwrap());
    // Not asked: the file as it is.
    let r = http().get(server.url("/pkg/plotly.min.js")).send().await.unwrap();
    assert!(r.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(r.bytes().await.unwrap().len() as u64, std::fs::metadata(&plotly).unwrap().len());

    // A page and an API answer, compressed on the way.
    for path in ["/", "/api/profiles"] {
        let r = http().get(server.url(path)).header(ACCEPT_ENCODING, "gzip").send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers().get(CONTENT_ENCODING).map(|v| v.to_str().unwrap()), Some("gzip"));
        let body = r.bytes().await.unwrap();
        assert_eq!(&body[..2], &[0x1f, 0x8b], "{path}: a gzip stream");
    }

    // The live feed: as it is, whatever the client takes.
    let r =
        http().get(server.url("/api/events")).header(ACCEPT_ENCODING, "gzip").send().await.unwrap();
    assert_eq!(r.headers()[CONTENT_TYPE], "text/event-stream");
    assert!(r.headers().get(CONTENT_ENCODING).is_none());
    drop(r);
    server.stop().await;
}
