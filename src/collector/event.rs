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

/// Version byte of the WAL encoding below.
const WAL_FORMAT: u8 = 1;

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_opt_str(out: &mut Vec<u8>, s: &Option<String>) {
    match s {
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
        None => out.push(0),
    }
}

fn put_opt_i64(out: &mut Vec<u8>, v: Option<i64>) {
    match v {
        Some(v) => {
            out.push(1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        None => out.push(0),
    }
}

fn put_opt_i32(out: &mut Vec<u8>, v: Option<i32>) {
    match v {
        Some(v) => {
            out.push(1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        None => out.push(0),
    }
}

/// Reads what the `put_*` functions wrote; `None` on anything short or malformed.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn string(&mut self) -> Option<String> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
    fn opt_string(&mut self) -> Option<Option<String>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.string()?)),
            _ => None,
        }
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn opt_i64(&mut self) -> Option<Option<i64>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.i64()?)),
            _ => None,
        }
    }
    fn opt_i32(&mut self) -> Option<Option<i32>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(i32::from_le_bytes(self.take(4)?.try_into().ok()?))),
            _ => None,
        }
    }
}

impl Event {
    /// The compact binary form kept in the write-ahead log (no JSON escaping on the hot path).
    pub fn encode_wal(&self, out: &mut Vec<u8>) {
        out.push(WAL_FORMAT);
        put_str(out, &self.message_id);
        put_str(out, &self.app_id);
        put_str(out, &self.kind);
        for s in [
            &self.event,
            &self.anonymous_id,
            &self.user_id,
            &self.group_id,
            &self.session_id,
        ] {
            put_opt_str(out, s);
        }
        out.extend_from_slice(&self.timestamp.to_le_bytes());
        put_opt_i64(out, self.original_timestamp);
        put_opt_i64(out, self.sent_at);
        out.extend_from_slice(&self.received_at.to_le_bytes());
        for s in [
            &self.page_url,
            &self.page_path,
            &self.page_title,
            &self.page_referrer,
            &self.device_type,
            &self.locale,
            &self.timezone,
        ] {
            put_opt_str(out, s);
        }
        put_opt_i32(out, self.screen_width);
        put_opt_i32(out, self.screen_height);
        for s in [
            &self.ip,
            &self.user_agent,
            &self.properties,
            &self.traits,
            &self.context,
        ] {
            put_opt_str(out, s);
        }
    }

    /// Reads [`Event::encode_wal`]'s form; `None` when the bytes are not one whole event.
    pub fn decode_wal(bytes: &[u8]) -> Option<Event> {
        let mut r = Reader(bytes);
        if r.byte()? != WAL_FORMAT {
            return None;
        }
        let e = Event {
            message_id: r.string()?,
            app_id: r.string()?,
            kind: r.string()?,
            event: r.opt_string()?,
            anonymous_id: r.opt_string()?,
            user_id: r.opt_string()?,
            group_id: r.opt_string()?,
            session_id: r.opt_string()?,
            timestamp: r.i64()?,
            original_timestamp: r.opt_i64()?,
            sent_at: r.opt_i64()?,
            received_at: r.i64()?,
            page_url: r.opt_string()?,
            page_path: r.opt_string()?,
            page_title: r.opt_string()?,
            page_referrer: r.opt_string()?,
            device_type: r.opt_string()?,
            locale: r.opt_string()?,
            timezone: r.opt_string()?,
            screen_width: r.opt_i32()?,
            screen_height: r.opt_i32()?,
            ip: r.opt_string()?,
            user_agent: r.opt_string()?,
            properties: r.opt_string()?,
            traits: r.opt_string()?,
            context: r.opt_string()?,
        };
        r.0.is_empty().then_some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wal_form_round_trips_and_refuses_truncation() {
        let e = Event {
            message_id: "msg_1".into(),
            app_id: "app".into(),
            kind: "track".into(),
            event: Some("Bought \"it\"".into()),
            anonymous_id: Some("a".into()),
            user_id: None,
            group_id: None,
            session_id: Some("ses_1".into()),
            timestamp: -5,
            original_timestamp: Some(1),
            sent_at: None,
            received_at: 2,
            page_url: Some("https://x.io".into()),
            page_path: None,
            page_title: Some("é".into()),
            page_referrer: Some(String::new()),
            device_type: None,
            locale: None,
            timezone: None,
            screen_width: Some(-1),
            screen_height: None,
            ip: None,
            user_agent: None,
            properties: Some("{\"a\":1}".into()),
            traits: None,
            context: None,
        };
        let mut buf = Vec::new();
        e.encode_wal(&mut buf);
        assert_eq!(Event::decode_wal(&buf), Some(e));
        for cut in 0..buf.len() {
            assert_eq!(Event::decode_wal(&buf[..cut]), None, "cut at {cut}");
        }
    }
}
