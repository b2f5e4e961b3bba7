//! The event row: what the decoder produces, the WAL stores and the Parquet files hold
//! (the columns of api.md §8). Plain data, so the decoder and its fuzzer stay light;
//! `columns.rs` turns rows into Arrow and Parquet.

use serde::{Deserialize, Serialize};

/// One accepted, enriched event. Timestamps are microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub message_id: String,
    pub app_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub event: Option<String>,
    pub anonymous_id: Option<String>,
    pub user_id: Option<String>,
    pub group_id: Option<String>,
    pub session_id: Option<String>,
    pub timestamp: i64,
    pub original_timestamp: Option<i64>,
    pub sent_at: Option<i64>,
    pub received_at: i64,
    pub page_url: Option<String>,
    pub page_path: Option<String>,
    pub page_title: Option<String>,
    pub page_referrer: Option<String>,
    pub device_type: Option<String>,
    pub locale: Option<String>,
    pub timezone: Option<String>,
    pub screen_width: Option<i32>,
    pub screen_height: Option<i32>,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// JSON text.
    pub properties: Option<String>,
    /// JSON text.
    pub traits: Option<String>,
    /// JSON text: the context fields that have no column of their own.
    pub context: Option<String>,
}

impl Event {
    /// The key that routes the event to a shard and identifies the visitor.
    pub fn visitor(&self) -> &str {
        self.anonymous_id
            .as_deref()
            .or(self.user_id.as_deref())
            .unwrap_or("")
    }

    /// Rough in-memory size, for the "close a file by bytes" rule.
    pub fn approx_bytes(&self) -> usize {
        let s = |o: &Option<String>| o.as_ref().map_or(0, String::len);
        96 + self.message_id.len()
            + self.app_id.len()
            + self.kind.len()
            + s(&self.event)
            + s(&self.anonymous_id)
            + s(&self.user_id)
            + s(&self.group_id)
            + s(&self.session_id)
            + s(&self.page_url)
            + s(&self.page_path)
            + s(&self.page_title)
            + s(&self.page_referrer)
            + s(&self.device_type)
            + s(&self.locale)
            + s(&self.timezone)
            + s(&self.ip)
            + s(&self.user_agent)
            + s(&self.properties)
            + s(&self.traits)
            + s(&self.context)
    }
}
