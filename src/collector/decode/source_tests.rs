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

#[test]
fn any_byte_changed_in_a_body_is_decoded_or_refused_never_a_panic() {
    let body = format!(
        r#"{{"batch":[{{"type":"track","event":"e","properties":{{"a":"x\"y","b":{{"c":[1]}}}},"anonymousId":"{ANON}","traits":{{"t":1}},"userId":"u"}}]}}"#
    );
    for at in 0..body.len() {
        for b in [b'"', b'{', b'}', b',', b' ', b'\\', b':', b'['] {
            let mut bytes = body.clone().into_bytes();
            bytes[at] = b;
            let _ = super::decode_owned(&bytes, &super::tests::enrich(), super::tests::LIMITS);
        }
        let _ = super::decode_owned(
            &body.as_bytes()[..at],
            &super::tests::enrich(),
            super::tests::LIMITS,
        );
    }
}
