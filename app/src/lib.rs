//! Tunebook's user interface: server-rendered Leptos pages, hydrated in the
//! browser, with live updates pushed from the server.

#![recursion_limit = "256"]

pub mod design;
mod live;
mod pages;
pub mod plot;
pub mod presets;
#[cfg(feature = "ssr")]
pub mod status;
pub use tunebook_views::types;

/// The server function that creates a study: a door from the browser that
/// the server's tests try from other origins.
pub use pages::designer::CreateStudy;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

/// The name of the compiled browser bundle (`/pkg/{OUTPUT_NAME}.js`, `_bg.wasm`, `.css`).
pub const OUTPUT_NAME: &str = "tunebook";

/// Said by the server (in the context of every page it renders) when it
/// asks for a login: the page then offers to log out.
#[derive(Debug, Clone, Copy)]
pub struct LoginRequired;

/// The HTML document around the app.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    // The page's path, to name in its head what it will need.
    #[cfg(feature = "ssr")]
    let path = use_context::<leptos_router::location::RequestUrl>()
        .and_then(|url| url.parse().ok())
        .map(|url| url.path().to_string())
        .unwrap_or_default();
    #[cfg(not(feature = "ssr"))]
    let path = String::new();
    // Marked on the body, which the browser does not hydrate, so the app
    // renders the same header either way and the style shows "Log out"
    // only where there is a session to close.
    let login = use_context::<LoginRequired>().map(|_| "required");
    // Where the live feed stands before the page reads its data: the page
    // watches from here, so that what happens while it loads reaches it.
    #[cfg(feature = "ssr")]
    let feed = pages::service().ok().map(|s| s.events.position());
    #[cfg(not(feature = "ssr"))]
    let feed = None::<String>;
    let plotly = plot::plotly_for(&path);
    let preload = plot::preload_for(&path);
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                {feed.map(|at| view! { <meta name=live::FEED_META content=at /> })}
                <link rel="icon" href="data:," />
                {plotly.map(|href| view! { <link rel="preload" href=href r#as="script" /> })}
                {preload.map(|href| view! { <link rel="preload" href=href r#as="fetch" crossorigin="anonymous" /> })}
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body data-login=login>
                <App />
            </body>
        </html>
    }
}

/// The application: routes and page chrome.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="tunebook" href=format!("/pkg/{OUTPUT_NAME}.css") />
        <Title text="Tunebook" />
        <Router>
            <header class="top">
                <a href="/" class="brand">"Tunebook"</a>
                <nav>
                    <a href="/">"Trials"</a>
                    <a href="/studies">"Studies"</a>
                    <a href="/studies/new">"New study"</a>
                    <a href="/workers">"Workers"</a>
                </nav>
                <span class="tagline">"tuning local LLM inference, measured"</span>
                <form class="logout" method="post" action="/logout">
                    <button type="submit">"Log out"</button>
                </form>
            </header>
            <Routes fallback=|| view! { <p class="empty">"Page not found."</p> }>
                <Route path=path!("/") view=pages::home::HomePage />
                <Route path=path!("/studies") view=pages::studies::StudiesPage />
                <Route path=path!("/studies/new") view=pages::designer::DesignerPage />
                <Route path=path!("/studies/:id") view=pages::study::StudyPage />
                <Route path=path!("/trials/:id") view=pages::trial::TrialPage />
                <Route path=path!("/compare") view=pages::compare::ComparePage />
                <Route path=path!("/workers") view=pages::workers::WorkersPage />
                <Route path=path!("/reports/:id") view=pages::report::ReportPage />
                <Route path=path!("/share/:token") view=pages::report::SharedPage />
            </Routes>
        </Router>
    }
}

/// Browser entry point: attaches the app to the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
}
