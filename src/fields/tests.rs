use serde_json::json;

use super::schema::text_pattern;
use super::*;

names! {
    /// A test set.
    pub Colour { Red = "red", DarkBlue = "dark_blue" }
}

static PERSON: Body = Body::new(
    "TestPerson",
    "",
    &[
        Field::text("id", Text::line(1, 8)).required(),
        Field::new("email", Kind::Shape(&EMAIL)).required(),
    ],
);

static THING: Body = Body::new(
    "Thing",
    "A test body.",
    &[
        Field::text("name", Text::line(3, 10)).required(),
        Field::text("note", Text::lines(0, 20)).nullable(),
        Field::new("size", Kind::Integer { min: 0, max: 9 }),
        Field::new("colour", Kind::Names(NameSet::of::<Colour>())),
        Field::new("on", Kind::Bool).nullable(),
        Field::new(
            "ids",
            Kind::List {
                item: &Kind::Shape(&OBJECT_ID),
                max: 2,
                noun: "ids",
            },
        ),
        Field::new("who", Kind::Object(&PERSON)),
    ],
);

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn fields(e: Vec<FieldError>) -> Vec<String> {
    let mut f: Vec<String> = e.into_iter().map(|f| f.field).collect();
    f.sort();
    f
}

#[test]
fn every_bad_field_is_reported_by_name() {
    let e = THING
        .parse(
            &map(json!({
                "note": "a\u{0}b", "size": 9.5, "colour": "green", "on": "yes",
                "ids": ["x", "0123456789abcdef01234567"], "who": {"id": "", "x": 1}, "more": 1
            })),
            Mode::Create,
        )
        .unwrap_err();
    assert_eq!(
        fields(e),
        [
            "colour",
            "ids[0]",
            "more",
            "name",
            "note",
            "on",
            "size",
            "who.email",
            "who.id",
            "who.x"
        ]
    );
}

#[test]
fn values_come_back_normalised() {
    let p = THING
        .parse(
            &map(json!({
                "name": "  Abc ", "note": "   ", "size": 7.0, "colour": "dark_blue",
                "ids": ["0123456789abcdef01234567", "0123456789abcdef01234567"],
                "who": {"id": "u1", "email": " A@B.co "}
            })),
            Mode::Create,
        )
        .unwrap();
    assert_eq!(p.string("name").as_deref(), Some("Abc"));
    assert_eq!(p.text("note"), Some(None));
    assert_eq!(p.integer("size"), Some(Some(7)));
    assert_eq!(p.name::<Colour>("colour"), Some(Colour::DarkBlue));
    assert_eq!(p.strings("ids").unwrap().unwrap().len(), 1);
    assert_eq!(p.object("who").unwrap().string("email").unwrap(), "a@b.co");
}

#[test]
fn a_patch_cannot_clear_what_cannot_be_null() {
    let e = THING
        .parse(&map(json!({"name": null, "on": null})), Mode::Patch)
        .unwrap_err();
    assert_eq!(e, [FieldError::new("name", "cannot be cleared")]);
    let e = THING
        .parse(&map(json!({"name": null})), Mode::Create)
        .unwrap_err();
    assert_eq!(e, [FieldError::new("name", "must be a string, not null")]);
}

#[test]
fn text_patterns_say_what_the_check_does() {
    let ws = r"[\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";
    let edge = r"[^\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";
    assert_eq!(
        text_pattern(&Text::line(1, 60)),
        format!(
            r"^{ws}*{edge}\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]{{0,59}}{ws}*$"
        )
    );
    assert_eq!(
        text_pattern(&Text::lines(0, 1000)),
        format!(
            r"^{ws}*({edge}\u0000-\u0008\u000b-\u001f\u007f-\u009f][^\u0000-\u0008\u000b-\u001f\u007f-\u009f]{{0,999}})?{ws}*$"
        )
    );
    assert!(text_pattern(&Text::line(3, 150)).contains("]{1,148}[^"));
}

#[test]
fn names_travel_as_strings() {
    assert_eq!(json!(Colour::DarkBlue), json!("dark_blue"));
    assert_eq!(
        serde_json::from_value::<Colour>(json!("red")).unwrap(),
        Colour::Red
    );
    assert!(serde_json::from_value::<Colour>(json!("blue")).is_err());
    assert_eq!(Colour::names(), "red, dark_blue");
    let schema = serde_json::to_value(<Colour as utoipa::PartialSchema>::schema()).unwrap();
    assert_eq!(schema["enum"], json!(["red", "dark_blue"]));
    assert_eq!(schema["description"], "A test set.");
}

#[test]
fn the_schema_lists_required_fields_on_create_only() {
    let create = serde_json::to_value(schema(&THING, Mode::Create, "")).unwrap();
    assert_eq!(create["required"], json!(["name"]));
    assert_eq!(create["properties"]["name"]["minLength"], 3);
    assert_eq!(
        create["properties"]["note"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(
        create["properties"]["who"]["$ref"],
        "#/components/schemas/TestPerson"
    );
    let patch = serde_json::to_value(schema(&THING, Mode::Patch, "")).unwrap();
    assert!(patch.get("required").is_none());
    let mut out = Vec::new();
    components(&THING, &mut out);
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"Colour") && names.contains(&"TestPerson"));
}
