//! Properties and traits kept as the client sent them (cut out of the body by offsets), and
//! encoded from the tape where that cannot be done: the same values either way.

use super::tests::{run, ANON};

/// The properties and traits of the one event of `body`.
fn kept(body: &str) -> (Option<String>, Option<String>) {
    let (mut events, rejected) = run(body).unwrap();
    assert!(rejected.is_empty(), "{rejected:?}");
    let e = events.pop().unwrap();
    (
        e.properties.map(|t| t.to_string()),
        e.traits.map(|t| t.to_string()),
    )
}

fn value(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn an_object_followed_by_another_member_is_kept_as_sent() {
    let props = r#"{ "a": "x\"}\\", "b" : [1, {"c": "}"}], "é": 1e3, "n": null }"#;
    let body = format!(
        r#"{{"type": "track", "event": "e", "properties" :	{props} ,
            "anonymousId": "{ANON}", "traits": {{"t":"\u00e9"}}, "userId": "u"}}"#
    );
    let (p, t) = kept(&body);
    assert_eq!(p.as_deref(), Some(props));
    assert_eq!(t.as_deref(), Some(r#"{"t":"\u00e9"}"#));
}

#[test]
fn a_last_empty_or_repeated_object_is_encoded_with_the_same_value() {
    let cases = [
        // The last member: encoded from the tape.
        (
            format!(
                r#"{{"type":"track","event":"e","anonymousId":"{ANON}","properties":{{"a":"\u00e9","b":[1,2]}}}}"#
            ),
            r#"{"a":"é","b":[1,2]}"#,
        ),
        // Empty: no key to find it by.
        (
            format!(r#"{{"type":"track","event":"e","properties":{{}},"anonymousId":"{ANON}"}}"#),
            "{}",
        ),
        // Repeated: the last one counts, kept as sent when a member follows it.
        (
            format!(
                r#"{{"type":"track","event":"e","properties":{{"x":1}},"properties":{{"y":2}},"anonymousId":"{ANON}"}}"#
            ),
            r#"{"y":2}"#,
        ),
        (
            format!(
                r#"{{"type":"track","event":"e","properties":{{"y":2}},"anonymousId":"{ANON}","properties":{{"x":1}}}}"#
            ),
            r#"{"x":1}"#,
        ),
    ];
    for (body, want) in cases {
        let (p, _) = kept(&body);
        assert_eq!(value(p.as_deref().unwrap()), value(want), "{body}");
    }
}

/// Every JSON text an accepted event of `bytes` holds is valid JSON (what is cut out of the
/// body as sent, as much as what is encoded).
fn json_texts_are_valid(bytes: &[u8]) {
    let Ok(d) = super::decode_owned(bytes, &super::tests::enrich(), super::tests::LIMITS) else {
        return;
    };
    for e in &d.events {
        let texts = [&e.properties, &e.traits, &e.context, &e.integrations];
        for t in texts.into_iter().flatten() {
            let parsed = serde_json::from_str::<serde_json::Value>(t);
            assert!(
                parsed.is_ok_and(|v| v.is_object()),
                "{t:?} from {}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

#[test]
fn any_byte_changed_in_a_body_is_decoded_or_refused_never_a_panic() {
    let body = format!(
        r#"{{"batch":[{{"type":"track","event":"e","properties":{{"a":"x\"y","b":{{"c":[1]}}}},"context":{{"library":{{"n":[1]}},"locale":"en-US","x":"y"}},"anonymousId":"{ANON}","traits":{{"t":1}},"userId":"u"}}]}}"#
    );
    for at in 0..body.len() {
        for b in [b'"', b'{', b'}', b',', b' ', b'\\', b':', b'['] {
            let mut bytes = body.clone().into_bytes();
            bytes[at] = b;
            json_texts_are_valid(&bytes);
        }
        json_texts_are_valid(&body.as_bytes()[..at]);
    }
}

/// The JSON of the context's rest of the one event of `body`.
fn rest(body: &str) -> Option<String> {
    let (mut events, rejected) = run(body).unwrap();
    assert!(rejected.is_empty(), "{rejected:?}");
    events.pop().unwrap().context.map(|t| t.to_string())
}

#[test]
fn the_context_rest_is_cut_out_of_the_body_member_by_member() {
    // The context followed by another member: every kept member as sent (spaces, escapes),
    // the keys with columns left out wherever they are.
    let ctx = r#"{ "library" : {"name": "t\"s", "v": [1, 2]}, "page": {"path": "/p"},
        "locale": "en-US", "campaign":{"name":"}{"} , "\u0061pp": 1 }"#;
    let body = format!(r#"{{"type":"track","event":"e","context": {ctx},"anonymousId":"{ANON}"}}"#);
    assert_eq!(
        rest(&body).as_deref(),
        Some(
            r#"{"library" : {"name": "t\"s", "v": [1, 2]},"campaign":{"name":"}{"},"\u0061pp": 1}"#
        )
    );
    // The context last in its event (its end unknown: its last member encoded), a batch's
    // context merged in (encoded), a known key last: the same values every way.
    let cases = [
        format!(r#"{{"type":"track","event":"e","anonymousId":"{ANON}","context": {ctx}}}"#),
        format!(
            r#"{{"batch":[{{"type":"track","event":"e","context": {ctx},"anonymousId":"{ANON}"}}],
                "context": {{"library": {{"name": "batch"}}, "os": {{"name": "linux"}}}}}}"#
        ),
    ];
    let want = value(
        r#"{"library": {"name": "t\"s", "v": [1, 2]}, "campaign": {"name": "}{"}, "app": 1}"#,
    );
    for body in &cases[..1] {
        assert_eq!(value(&rest(body).unwrap()), want, "{body}");
    }
    let mut merged = want.clone();
    merged["os"] = serde_json::json!({"name": "linux"});
    assert_eq!(value(&rest(&cases[1]).unwrap()), merged);
    let last_known = r#"{"type":"track","event":"e","context":{"library":{"n":1},"locale":"en-US"},"userId":"u"}"#;
    assert_eq!(rest(last_known).as_deref(), Some(r#"{"library":{"n":1}}"#));
}
