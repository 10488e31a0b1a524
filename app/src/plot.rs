//! Drawing figures in the browser: plotly.js through `plot.js`, beside
//! this file. The figures themselves are built by
//! [`tunebook_views::figures`], re-exported here.

#[cfg(feature = "hydrate")]
use serde_json::Value;
pub use tunebook_views::figures::*;

/// What a click on a point does: called with its trial id.
#[cfg(feature = "hydrate")]
pub type OnClick = send_wrapper::SendWrapper<wasm_bindgen::closure::Closure<dyn FnMut(f64)>>;

/// A click that opens the point's trial page.
#[cfg(feature = "hydrate")]
pub fn open_trial_on_click() -> OnClick {
    let navigate = leptos_router::hooks::use_navigate();
    send_wrapper::SendWrapper::new(wasm_bindgen::closure::Closure::new(move |trial: f64| {
        navigate(&format!("/trials/{}", trial as i64), Default::default());
    }))
}

/// Draws `figure` into the element with id `div`; a click on a point calls
/// `on_click`, if given, with its trial id. Does nothing on the server.
#[cfg(feature = "hydrate")]
pub fn draw(div: &str, figure: &Value, on_click: Option<&OnClick>) {
    let _ = js::draw(div, &figure.to_string(), on_click.map(|c| &**c));
}

/// Draws the [`tunebook_views::types::ParetoFigure`] read from `url` into the element
/// with id `div`, the figure going from the answer straight to plotly.js
/// (it never passes through the app). The first draw of a page began before
/// the app started (its element names its address in `data-figure-src`):
/// unless `fresh`, a draw of the same address as the one under way joins
/// it. Until plotly.js has drawn it, the first figure of an element shows
/// on a canvas with each point's hover text and click (plotly.js takes over
/// a second to start on a slow machine's first visit). Returns what was
/// drawn, without the figure; `None` if the server refused or a later draw
/// took over.
#[cfg(feature = "hydrate")]
pub fn draw_from(
    div: &str,
    url: &str,
    on_click: Option<&OnClick>,
    fresh: bool,
) -> impl std::future::Future<Output = Option<tunebook_views::types::ParetoFigure>> + 'static {
    let drawn = js::draw_from(div, url, on_click.map(|c| &**c), fresh);
    async move {
        let meta = wasm_bindgen_futures::JsFuture::from(drawn).await.ok()?.as_string()?;
        serde_json::from_str(&meta).ok()
    }
}

#[cfg(feature = "hydrate")]
mod js {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(module = "/src/plot.js")]
    extern "C" {
        pub fn draw(
            id: &str,
            figure: &str,
            on_click: Option<&Closure<dyn FnMut(f64)>>,
        ) -> js_sys::Promise;
        pub fn draw_from(
            id: &str,
            url: &str,
            on_click: Option<&Closure<dyn FnMut(f64)>>,
            fresh: bool,
        ) -> js_sys::Promise;
    }
}
