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
fn an_object_last_in_its_event_is_kept_as_sent_wherever_the_event_is() {
    // Encoded from the tape, these would read `1.5` and `"é"`: only a cut keeps them.
    let props = r#"{ "n": 1.50, "s": "\u00e9" }"#;
    let ev = |props: &str| {
        format!(r#"{{"type":"track","event":"e","anonymousId":"{ANON}","properties": {props} }}"#)
    };
    let other = format!(r#"{{"type":"track","event":"f","anonymousId":"{ANON}"}}"#);
    let sent = r#""sentAt": "2026-03-02T10:15:31.000Z""#;
    let cases = [
        // One event, the body.
        (format!("{}\n", ev(props)), 0),
        // The first of two events, then the last, with `batch` before another member.
        (
            format!(r#"{{"batch": [ {} , {other} ], {sent}}}"#, ev(props)),
            0,
        ),
        (format!(r#"{{"batch":[{other},{}] ,{sent}}}"#, ev(props)), 1),
        // `batch` the body's last member.
        (format!("{{{sent}, \"batch\": [{}]\t}}\r\n", ev(props)), 0),
    ];
    for (body, at) in &cases {
        let (events, rejected) = run(body).unwrap();
        assert!(rejected.is_empty(), "{rejected:?}");
        let p = events[*at].properties.as_ref().map(|t| t.to_string());
        assert_eq!(p.as_deref(), Some(props), "{body}");
    }
    // Traits the same way.
    let body =
        format!(r#"{{"type":"identify","userId":"u","anonymousId":"{ANON}","traits":{props}}}"#);
    assert_eq!(kept(&body).1.as_deref(), Some(props));
}

#[test]
fn a_last_object_whose_end_cannot_be_found_and_an_empty_or_repeated_one_keep_their_values() {
    let cases = [
        // The next "event" is no object with members: the end is not followed back from it,
        // and the last member is encoded from the tape.
        (
            format!(
                r#"{{"batch":[{{"type":"track","event":"e","anonymousId":"{ANON}","properties":{{"a":"\u00e9","b":[1,2]}}}},{{}}]}}"#
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
        let (events, _) = run(&body).unwrap();
        let p = events[0].properties.as_ref().map(|t| t.to_string());
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
    // The objects followed by other members; then each the last of its event, the event first
    // and last of its batch, and `batch` the body's last member.
    let first = format!(
        r#"{{"batch":[{{"type":"track","event":"e","properties":{{"a":"x\"y","b":{{"c":[1]}}}},"context":{{"library":{{"n":[1]}},"locale":"en-US","x":"y"}},"anonymousId":"{ANON}","traits":{{"t":1}},"userId":"u"}}]}}"#
    );
    let last = |props: &str| {
        format!(
            r#"{{"type":"identify","userId":"u","anonymousId":"{ANON}","traits":{{"t":{{"u":[1]}}}},"properties":{props}}}"#
        )
    };
    let second = format!(
        r#"{{"sentAt":"2026-03-02T10:15:31Z","batch":[{},{}]}}"#,
        last(r#"{"a":"}"}"#),
        last(r#"{"b":{"c":"{"}}"#)
    );
    for body in [first, second] {
        for at in 0..body.len() {
            for b in [b'"', b'{', b'}', b',', b' ', b'\\', b':', b'[', b']'] {
                let mut bytes = body.clone().into_bytes();
                bytes[at] = b;
                json_texts_are_valid(&bytes);
            }
            json_texts_are_valid(&body.as_bytes()[..at]);
        }
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
    // The context last in its event: its last member cut out too, bounded by the event's end.
    let last = format!(r#"{{"type":"track","event":"e","anonymousId":"{ANON}","context": {ctx}}}"#);
    assert_eq!(rest(&last), rest(&body));
    // A batch's context merged in (encoded): the same values.
    let merged = format!(
        r#"{{"batch":[{{"type":"track","event":"e","context": {ctx},"anonymousId":"{ANON}"}}],
            "context": {{"library": {{"name": "batch"}}, "os": {{"name": "linux"}}}}}}"#
    );
    let mut want = value(
        r#"{"library": {"name": "t\"s", "v": [1, 2]}, "campaign": {"name": "}{"}, "app": 1}"#,
    );
    want["os"] = serde_json::json!({"name": "linux"});
    assert_eq!(value(&rest(&merged).unwrap()), want);
    // A key with a column last: left out.
    let last_known = r#"{"type":"track","event":"e","context":{"library":{"n":1},"locale":"en-US"},"userId":"u"}"#;
    assert_eq!(rest(last_known).as_deref(), Some(r#"{"library":{"n":1}}"#));
}

#[test]
fn a_context_rest_of_more_members_than_one_pass_cuts_keeps_them_all_in_order() {
    // Up to 8 members are cut in the pass that reads the columns; more are written member by
    // member (as a batch's merge is): the same text either way.
    for n in [1, 7, 8, 9, 20] {
        let members: Vec<String> = (0..n)
            .map(|i| format!(r#""k{i}": {{"v": [{i}]}}"#))
            .collect();
        let ctx = format!(r#"{{"locale": "en-US", {}}}"#, members.join(" , "));
        let body = format!(r#"{{"type":"track","event":"e","context": {ctx},"userId":"u"}}"#);
        let want = format!("{{{}}}", members.join(","));
        assert_eq!(rest(&body), Some(want), "{n} members");
    }
}

#[test]
fn an_events_size_is_its_compact_json_whatever_its_text_in_the_body() {
    let max = super::tests::LIMITS.max_event_bytes;
    // An event whose compact JSON is `len` bytes: its properties padded by a string.
    let event = |len: usize| {
        let head = format!(
            r#"{{"type":"track","event":"e","anonymousId":"{ANON}","properties":{{"p":""}}}}"#
        );
        let pad = "x".repeat(len - head.len());
        head.replace(r#""p":"""#, &format!(r#""p":"{pad}""#))
    };
    let verdict = |body: String| {
        let (events, rejected) = run(&body).unwrap();
        match (events.len(), rejected.first()) {
            (1, None) => Ok(()),
            (0, Some(r)) => Err(r.message.clone()),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(verdict(event(max)), Ok(()));
    let refused = Err(format!("event larger than {max} bytes"));
    assert_eq!(verdict(event(max + 1)), refused);
    // Whitespace in the body does not count: the text sent is over the limit, its JSON not.
    let spaced = event(max).replace(',', &format!(",\n{}", " ".repeat(300)));
    assert!(spaced.len() > max + 900);
    assert_eq!(verdict(format!(r#"{{"batch": [{spaced}]}}"#)), Ok(()));
    // Numbers grow when written compact (`1e5` is 100000.0): 16 000 bytes in the body, under
    // half the limit, are more than the limit as JSON.
    let numbers = vec!["1e5"; 4000].join(",");
    let body = format!(
        r#"{{"type":"track","event":"e","anonymousId":"{ANON}","properties":{{"n":[{numbers}]}}}}"#
    );
    assert!(body.len() < max / 2);
    assert_eq!(verdict(body), refused);
}
