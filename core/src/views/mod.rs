//! The view types the pages, the API and reports show, built from what
//! storage returns: storage speaks its own rows ([`crate::db`]), and this is
//! the one place they become the app's types (a trial by way of the typed
//! [`crate::trial::Trial`]).

pub mod importance;
pub mod reports;
pub mod studies;
pub mod trials;

/// Rows as views (or as typed trials), in order.
pub fn all<R, V: From<R>>(rows: Vec<R>) -> Vec<V> {
    rows.into_iter().map(V::from).collect()
}
