//! The live feed in the browser: `/api/events` as server-sent events.
//! Trials arrive as plain messages, study updates as `study` events, and a
//! `reset` says the page must reload its data (the server restarted, or
//! this page fell behind). The browser reconnects on its own and sends the
//! last event's id, so the server replays what was missed.
//!
//! A page's first connection starts where the feed stood before its data
//! was read: the server writes that into the page's head ([`FEED_META`]),
//! and a page navigated to in the browser starts after the last event a
//! page before it saw (or that position, where none followed the feed). A
//! phase that passes while a page hydrates is then replayed, never missed;
//! what the page had already read may come again, and each page takes an
//! update it already holds as the same one.

use crate::types::{StudyUpdate, TrialView};

/// The `<meta>` whose content is the feed's position when the server
/// rendered the page.
pub const FEED_META: &str = "tunebook-feed";

#[cfg(feature = "hydrate")]
thread_local! {
    /// The id of the last event a page here saw (or the rendered page's
    /// position, before any): where the next subscription starts.
    static SEEN: std::cell::RefCell<Option<String>> = std::cell::RefCell::new(position_rendered());
}

/// The feed's position the server wrote into the page.
#[cfg(feature = "hydrate")]
fn position_rendered() -> Option<String> {
    let meta = web_sys::window()?
        .document()?
        .query_selector(&format!("meta[name='{FEED_META}']"))
        .ok()??;
    meta.get_attribute("content")
}

/// Where a subscription starts, as a query (the server checks its form).
#[cfg(feature = "hydrate")]
fn events_url() -> String {
    match SEEN.with_borrow(Clone::clone) {
        Some(id) => format!("/api/events?after={}", js_sys::encode_uri_component(&id)),
        None => "/api/events".into(),
    }
}

/// What a page does with each kind of update.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub struct Handlers {
    pub trial: Box<dyn Fn(TrialView)>,
    pub study: Box<dyn Fn(StudyUpdate)>,
    pub reset: Box<dyn Fn()>,
}

/// Subscribes for as long as the current reactive owner lives. Call it
/// from an effect: it does nothing on the server.
#[cfg(feature = "hydrate")]
pub fn subscribe(handlers: Handlers) {
    use leptos::prelude::on_cleanup;
    use send_wrapper::SendWrapper;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;

    let Ok(source) = web_sys::EventSource::new(&events_url()) else {
        return;
    };
    let Handlers { trial, study, reset } = handlers;
    let data = |ev: &web_sys::MessageEvent| {
        let id = ev.last_event_id();
        if !id.is_empty() {
            SEEN.set(Some(id));
        }
        ev.data().as_string().unwrap_or_default()
    };
    let on_trial =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            if let Ok(t) = serde_json::from_str::<TrialView>(&data(&ev)) {
                trial(t);
            }
        });
    let on_study =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            if let Ok(s) = serde_json::from_str::<StudyUpdate>(&data(&ev)) {
                study(s);
            }
        });
    let on_reset = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev| {
        // The reset carries the feed's position: the page reloads after it.
        let _ = data(&ev);
        reset()
    });
    source.set_onmessage(Some(on_trial.as_ref().unchecked_ref()));
    let _ = source.add_event_listener_with_callback("study", on_study.as_ref().unchecked_ref());
    let _ = source.add_event_listener_with_callback("reset", on_reset.as_ref().unchecked_ref());
    // Closed on cleanup; the closures live as long as the page.
    on_trial.forget();
    on_study.forget();
    on_reset.forget();
    let source = SendWrapper::new(source);
    on_cleanup(move || source.close());
}

#[cfg(not(feature = "hydrate"))]
pub fn subscribe(_: Handlers) {}

/// Follows a trial's engine output (`/api/trials/{id}/log`): `on_open`
/// says the stream (re)started and its last lines come next, whole;
/// `on_lines` gets each batch of new lines, `on_end` says the trial has
/// ended and nothing more will come. Stops with the current reactive
/// owner.
#[cfg(feature = "hydrate")]
pub fn follow_log(
    id: i64,
    on_open: impl Fn() + 'static,
    on_lines: impl Fn(String) + 'static,
    on_end: impl Fn() + 'static,
) {
    use leptos::prelude::on_cleanup;
    use send_wrapper::SendWrapper;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;

    let Ok(source) = web_sys::EventSource::new(&format!("/api/trials/{id}/log")) else {
        return;
    };
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            on_lines(ev.data().as_string().unwrap_or_default());
        });
    let on_opened = Closure::<dyn FnMut(wasm_bindgen::JsValue)>::new(move |_| on_open());
    let closer = source.clone();
    let on_ended = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_| {
        // Closed, or the browser would reconnect and start over.
        closer.close();
        on_end();
    });
    source.set_onopen(Some(on_opened.as_ref().unchecked_ref()));
    source.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    let _ = source.add_event_listener_with_callback("end", on_ended.as_ref().unchecked_ref());
    on_opened.forget();
    on_message.forget();
    on_ended.forget();
    let source = SendWrapper::new(source);
    on_cleanup(move || source.close());
}
