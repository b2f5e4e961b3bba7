//! The id of the request being served: set once per request by the request-context middleware
//! (`context.rs`), read by every envelope and error.

tokio::task_local! {
    pub(super) static REQUEST_ID: String;
}

/// The id of the request being served (a fresh one outside a request).
pub fn current() -> String {
    REQUEST_ID
        .try_with(|id| id.clone())
        .unwrap_or_else(|_| crate::ids::request_id())
}
