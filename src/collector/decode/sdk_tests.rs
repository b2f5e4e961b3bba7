//! The decoder's leniency towards Segment's and RudderStack's SDKs: their ids, types, times,
//! batch-level context and page properties.

use serde_json::json;

use super::tests::{enrich, run, ANON, LIMITS};
use super::*;

fn one(body: serde_json::Value) -> Result<Event<'static>, Vec<(String, String)>> {
    let (mut events, rejected) = run(&body.to_string()).unwrap();
    match events.pop() {
        Some(e) if rejected.is_empty() => Ok(e),
        _ => Err(rejected.into_iter().map(|r| (r.field, r.message)).collect()),
    }
}

#[test]
fn sdk_message_ids_and_anonymous_ids_are_kept_as_sent() {
    let id = "node-next-1764151234567-6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f";
    let e = one(json!({"type": "track", "event": "x", "messageId": id,
        "anonymousId": "anon-cookie-123"}))
    .unwrap();
    assert_eq!(e.message_id, id);
    assert_eq!(e.anonymous_id.as_deref(), Some("anon-cookie-123"));
    // A UUID in another form is still put in canonical form; a plain UUID messageId kept.
    let e = one(json!({"type": "page", "messageId": ANON, "anonymousId": ANON.to_uppercase()}))
        .unwrap();
    assert_eq!(
        (&*e.message_id, e.anonymous_id.as_deref()),
        (ANON, Some(ANON))
    );
    // userId alone is a visitor.
    let e = one(json!({"type": "track", "event": "x", "userId": "u1"})).unwrap();
    assert_eq!((e.anonymous_id, e.user_id.as_deref()), (None, Some("u1")));
    let long = "m".repeat(201);
    for (body, field) in [
        (
            json!({"type": "page", "userId": "u", "messageId": long}),
            "messageId",
        ),
        (
            json!({"type": "page", "userId": "u", "messageId": ""}),
            "messageId",
        ),
        (
            json!({"type": "page", "anonymousId": "a".repeat(201)}),
            "anonymousId",
        ),
        (
            json!({"type": "page", "anonymousId": "a\nb"}),
            "anonymousId",
        ),
        (json!({"type": "page", "anonymousId": ""}), "anonymousId"),
    ] {
        let errors = one(body.clone()).unwrap_err();
        assert_eq!(errors[0].0, field, "{body}");
    }
    let e = one(json!({"type": "page", "userId": "u", "messageId": "m".repeat(200)})).unwrap();
    assert_eq!(e.message_id.len(), 200);
}

#[test]
fn screen_alias_and_page_names_have_their_columns() {
    let e = one(json!({"type": "screen", "userId": "u", "name": "Home",
        "properties": {"variant": "dark"}}))
    .unwrap();
    assert_eq!(
        (e.kind, e.name.as_deref()),
        (EventType::Screen, Some("Home"))
    );
    let e =
        one(json!({"type": "page", "userId": "u", "name": "Pricing", "category": "Docs"})).unwrap();
    assert_eq!(
        (e.name.as_deref(), e.category.as_deref()),
        (Some("Pricing"), Some("Docs"))
    );
    let e = one(json!({"type": "alias", "userId": "new", "previousId": "old"})).unwrap();
    assert_eq!(
        (e.kind, e.previous_id.as_deref()),
        (EventType::Alias, Some("old"))
    );
    // What other types never had is not read (nor refused) on them.
    let e = one(
        json!({"type": "track", "event": "x", "userId": "u", "name": 5,
        "category": 5, "previousId": 5}),
    )
    .unwrap();
    assert_eq!((e.name, e.category, e.previous_id), (None, None, None));
    for (body, field) in [
        (json!({"type": "alias", "userId": "new"}), "previousId"),
        (
            json!({"type": "alias", "anonymousId": ANON, "previousId": "old"}),
            "userId",
        ),
        (
            json!({"type": "screen", "userId": "u", "name": "a\u{0}"}),
            "name",
        ),
        (
            json!({"type": "page", "userId": "u", "category": 3}),
            "category",
        ),
    ] {
        assert_eq!(one(body.clone()).unwrap_err()[0].0, field, "{body}");
    }
}

#[test]
fn original_timestamp_stands_in_for_timestamp_and_sent_at_corrects_per_event() {
    let received = enrich().received_at; // 2001-09-09T01:46:40Z
    let e = one(json!({"type": "track", "event": "x", "userId": "u",
        "originalTimestamp": "2001-09-09T01:46:00Z", "sentAt": "2001-09-09T01:46:30Z"}))
    .unwrap();
    assert_eq!(e.original_timestamp, parse_time("2001-09-09T01:46:00Z"));
    assert_eq!(e.timestamp, received - 30_000_000, "30 s queued in the SDK");
    // timestamp wins over originalTimestamp; a bad originalTimestamp names its field.
    let e = one(json!({"type": "track", "event": "x", "userId": "u",
        "timestamp": "2001-09-09T01:00:00Z", "originalTimestamp": "2001-09-09T01:46:00Z"}))
    .unwrap();
    assert_eq!(e.original_timestamp, parse_time("2001-09-09T01:00:00Z"));
    let errors = one(json!({"type": "track", "event": "x", "userId": "u",
        "originalTimestamp": "yesterday"}))
    .unwrap_err();
    assert_eq!(errors[0].0, "originalTimestamp");
}

#[test]
fn the_batch_context_and_integrations_merge_into_each_event() {
    let body = json!({
        "context": {"library": {"name": "analytics-python"}, "locale": "en-US", "app": {"v": 1}},
        "integrations": {"All": false, "Mixpanel": true},
        "batch": [
            {"type": "track", "event": "x", "userId": "u", "context": {"locale": "fr-FR", "app": {"v": 2}},
             "integrations": {"All": true}},
            {"type": "track", "event": "y", "userId": "u"}
        ]
    });
    let (events, rejected) = run(&body.to_string()).unwrap();
    assert!(rejected.is_empty(), "{rejected:?}");
    let json = |s: &Option<Text<'_>>| {
        serde_json::from_str::<serde_json::Value>(s.as_deref().unwrap()).unwrap()
    };
    assert_eq!(events[0].locale.as_deref(), Some("fr-FR"));
    assert_eq!(
        json(&events[0].context),
        json!({"app": {"v": 2}, "library": {"name": "analytics-python"}})
    );
    assert_eq!(
        json(&events[0].integrations),
        json!({"All": true, "Mixpanel": true})
    );
    assert_eq!(events[1].locale.as_deref(), Some("en-US"));
    assert_eq!(
        json(&events[1].context),
        json!({"library": {"name": "analytics-python"}, "app": {"v": 1}})
    );
    assert_eq!(
        json(&events[1].integrations),
        json!({"All": false, "Mixpanel": true})
    );
    // A batch context that is not an object refuses the body; a bad field in it, each event.
    assert!(matches!(
        run(r#"{"context": 3, "batch": [{"type": "track", "event": "x", "userId": "u"}]}"#),
        Err(BodyError::Invalid {
            field: "context",
            ..
        })
    ));
    let (events, rejected) =
        run(r#"{"context": {"locale": "?"}, "batch": [{"type": "track", "event": "x", "userId": "u"}]}"#)
            .unwrap();
    assert_eq!(
        (events.len(), rejected[0].field.as_str()),
        (0, "context.locale")
    );
}

#[test]
fn page_columns_come_from_properties_when_context_page_lacks_them() {
    let e = one(
        json!({"type": "page", "userId": "u", "name": "Docs", "properties":
        {"url": "https://x.io/docs", "path": "/docs", "title": "Docs", "referrer": "https://g.co/"},
        "context": {"page": {"title": "From context"}}}),
    )
    .unwrap();
    assert_eq!(e.page_url.as_deref(), Some("https://x.io/docs"));
    assert_eq!(e.page_path.as_deref(), Some("/docs"));
    assert_eq!(e.page_title.as_deref(), Some("From context"));
    assert_eq!(e.page_referrer.as_deref(), Some("https://g.co/"));
    // Free properties are never refused: an unusable value leaves its column empty; other
    // types keep their properties out of the page columns.
    let e = one(json!({"type": "page", "userId": "u", "properties": {"path": "/a\nb", "url": 3}}))
        .unwrap();
    assert_eq!((e.page_path, e.page_url), (None, None));
    let e = one(json!({"type": "track", "event": "Download", "userId": "u",
        "properties": {"url": "https://x.io/file.zip"}}))
    .unwrap();
    assert_eq!(e.page_url, None);
}

#[test]
fn the_path_type_is_given_to_events_without_one() {
    let rich = Enrichment {
        kind: Some(EventType::Track),
        ..enrich()
    };
    let decode_one = |v: serde_json::Value| {
        let d = decode_owned(v.to_string().as_bytes(), &rich, LIMITS).unwrap();
        (d.events, d.rejected)
    };
    let (events, _) = decode_one(json!({"event": "x", "userId": "u"}));
    assert_eq!(events[0].kind, EventType::Track);
    let (events, _) = decode_one(json!({"type": "track", "event": "x", "userId": "u"}));
    assert_eq!(events.len(), 1);
    let (events, rejected) = decode_one(json!({"type": "page", "userId": "u"}));
    assert!(events.is_empty());
    assert_eq!(rejected[0].field, "type");
    // Without a path type, a missing type is refused.
    let errors = one(json!({"event": "x", "userId": "u"})).unwrap_err();
    assert_eq!(errors[0].0, "type");
}

#[test]
fn what_a_batch_merges_into_its_events_is_bounded_by_the_largest_body() {
    // A 40 KB batch context merged into 100 events would be 4 MB of text: the decoder writes
    // at most `max_batch_bytes` (500 KiB) for one body; the events that do not fit are refused
    // for their size, the others kept whole.
    let big = "x".repeat(40_000);
    let events: Vec<_> = (0..100)
        .map(|i| json!({"type": "track", "event": "e", "anonymousId": ANON, "messageId": format!("m{i}")}))
        .collect();
    let body = json!({"batch": events, "context": {"campaign": {"name": big}}});
    let (body, enrich, mut scratch) = (body.to_string(), enrich(), Scratch::default());
    let d = decode(body.as_bytes(), &mut scratch, &enrich, LIMITS).unwrap();
    let written: usize = d
        .events
        .iter()
        .filter_map(|e| e.context.as_ref())
        .map(|c| c.len())
        .sum();
    assert!(written <= LIMITS.max_batch_bytes, "{written} bytes written");
    assert!(
        (5..=12).contains(&d.events.len()),
        "{} kept",
        d.events.len()
    );
    assert!(d
        .events
        .iter()
        .all(|e| e.context.as_ref().is_some_and(|c| c.len() > 40_000)));
    assert_eq!(d.rejected.len(), 100 - d.events.len());
    let r = &d.rejected[0];
    assert!(r.too_large, "{r:?}");
    assert_eq!(r.field, "context");
    assert!(r.message.starts_with("too large"), "{}", r.message);
    // A batch context of ordinary size is merged into every event of a full batch.
    let small = json!({"batch": (0..2000).map(|i| json!({"type": "track", "event": "e",
        "anonymousId": ANON, "messageId": format!("m{i}")})).collect::<Vec<_>>(),
        "context": {"library": {"name": "analytics-node", "version": "2.0.0"}}});
    let (events, rejected) = run(&small.to_string()).unwrap();
    assert_eq!((events.len(), rejected.len()), (2000, 0));
}
