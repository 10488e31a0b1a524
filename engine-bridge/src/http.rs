//! The HTTP client every part of Tunebook builds its requests with:
//! reqwest over rustls, with *ring* for the cryptography.
//!
//! reqwest's own TLS choice brings aws-lc, several hundred C files that
//! every build from nothing compiles; ring serves a client as well for a
//! fraction of that. reqwest without a provider of its own takes the one
//! installed for the process, so it is installed here, once, before the
//! first client is built (a client built without one panics).

use std::sync::Once;

/// A client builder, with the process's TLS provider in place.
pub fn client() -> reqwest::ClientBuilder {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means another provider came first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}
