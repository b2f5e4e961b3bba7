//! Arbitrary bytes through the collector's decoder: it must never panic, and every event it
//! accepts must be well formed.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The two light modules of the collector, included by path (see ../Cargo.toml). The path is on
// the outer module: a `../` through the inline module's directory (fuzz_targets/collector/, which
// does not exist) would not resolve.
#[allow(dead_code)]
#[path = "../../src/collector"]
mod collector {
    pub mod decode;
    pub mod event;
}

// The anonymousId rule the decoder imports as `crate::ids::visitor_id`.
// (`canonical_anonymous_id`, the survey widget's rule, is not used here.)
#[allow(dead_code)]
#[path = "../../src/ids/visitor.rs"]
mod visitor;
mod ids {
    pub use super::visitor::visitor_id;
}

use collector::decode::{self, Enrichment};
use collector::event::{Event, EventType};

const MAX_EVENT_BYTES: usize = 32 * 1024;

fuzz_target!(|data: &[u8]| {
    let enrich = Enrichment {
        app_id: "65f0c0ffee0000000000beef".into(),
        received_at: 1_772_446_531_000_000,
        ip: Some("203.0.113.7".into()),
        user_agent: Some("fuzz".into()),
        kind: None,
    };
    let limits = decode::Limits {
        max_events: 2000,
        max_event_bytes: MAX_EVENT_BYTES,
        max_batch_bytes: 500 * 1024,
    };
    let mut scratch = decode::Scratch::default();
    let Ok(decode::Decoded {
        events, rejected, ..
    }) = decode::decode(data, &mut scratch, &enrich, limits)
    else {
        return;
    };
    for r in &rejected {
        assert!(!r.field.is_empty() && !r.message.is_empty(), "{r:?}");
    }
    for e in &events {
        assert!(
            !e.message_id.is_empty() && !e.message_id.chars().any(char::is_control),
            "messageId {:?}",
            e.message_id
        );
        assert!(e.anonymous_id.is_some() || e.user_id.is_some(), "no visitor id");
        if e.kind == EventType::Identify {
            assert!(e.user_id.is_some(), "identify without userId");
        }
        if e.kind == EventType::Alias {
            assert!(e.user_id.is_some() && e.previous_id.is_some(), "alias without ids");
        }
        if e.kind == EventType::Group {
            assert!(e.group_id.is_some(), "group without groupId");
        }
        if e.kind == EventType::Track {
            assert!(e.event.as_deref().is_some_and(|n| !n.trim().is_empty()), "track without event");
        }
        assert_eq!(&*e.app_id, &*enrich.app_id);
        assert_eq!(e.received_at, enrich.received_at);
        // The limit counts what the client sent, not the ip and userAgent the server adds.
        assert!(e.approx_bytes() <= MAX_EVENT_BYTES + 256 + "203.0.113.7fuzz".len());
        let mut wal = Vec::new();
        e.encode_wal(&mut wal);
        assert_eq!(Event::decode_wal(&wal).as_ref(), Some(e), "WAL round trip");
    }
});
