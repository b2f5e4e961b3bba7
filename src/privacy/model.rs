//! An erasure as values: the request body (`ERASURE`), the person it names (`Person`: the ids
//! the job looks for, never stored past the job), what the audit keeps of them (`Hashes`), and
//! the names of what each store removed. No sled, no HTTP.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fields::{Body, Field, Kind, Mode, Text, EMAIL};
use crate::tenants::suppression::{fingerprint, IdKind};
use crate::validation::FieldError;

/// At most this many anonymousIds in one request (a profile links at most 100).
pub const MAX_ANONYMOUS_IDS: usize = 100;
/// The longest userId or anonymousId (the collector's ids are shorter).
const MAX_ID_CHARS: usize = 256;

static ANONYMOUS_ID: Kind = Kind::Text(Text::line(1, MAX_ID_CHARS));

/// The body of `POST /api/v1/erasures`.
pub static ERASURE: Body = Body {
    any_of: Some((
        &["userId", "anonymousIds", "email"],
        "needs a userId, anonymousIds or an email",
    )),
    ..Body::new(
        "ErasureInput",
        "Whom to erase: a userId, anonymousIds and/or an e-mail (at least one).",
        &[
            Field::text("userId", Text::line(1, MAX_ID_CHARS))
                .nullable()
                .doc("The userId given to identify; the anonymousIds linked to it are erased too."),
            Field::new(
                "anonymousIds",
                Kind::List {
                    item: &ANONYMOUS_ID,
                    max: MAX_ANONYMOUS_IDS,
                    noun: "anonymousIds",
                },
            )
            .doc("Up to 100 anonymousIds (a UUID in any form counts as its canonical form)."),
            Field::new("email", Kind::Shape(&EMAIL))
                .nullable()
                .doc("The contacts with this address (normalised as a contact's) are erased."),
        ],
    )
};

/// Whom an erasure looks for: the ids given, and those the job finds linked to them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    pub user_id: Option<String>,
    pub anonymous_ids: BTreeSet<String>,
    pub email: Option<String>,
}

impl Person {
    /// The person of a request body: every bad field reported (interface §7).
    pub fn parse(body: &Map<String, Value>) -> Result<Person, Vec<FieldError>> {
        let p = ERASURE.parse(body, Mode::Create)?;
        let mut errors = Vec::new();
        let mut anonymous_ids = BTreeSet::new();
        for (i, raw) in p
            .strings("anonymousIds")
            .flatten()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            match crate::ids::visitor_id(raw) {
                Ok(id) => {
                    anonymous_ids.insert(id.into_owned());
                }
                Err(m) => errors.push(FieldError::new(format!("anonymousIds[{i}]"), m)),
            }
        }
        let person = Person {
            user_id: p.string("userId"),
            anonymous_ids,
            email: p.string("email"),
        };
        if errors.is_empty() && person.is_empty() {
            errors.push(FieldError::new(
                "body",
                "needs a userId, anonymousIds or an email",
            ));
        }
        if errors.is_empty() {
            Ok(person)
        } else {
            Err(errors)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.user_id.is_none() && self.anonymous_ids.is_empty() && self.email.is_none()
    }

    /// The ids the collector refuses from now on (the suppression list).
    pub fn ids(&self) -> Vec<(IdKind, &str)> {
        let user = self.user_id.iter().map(|u| (IdKind::User, u.as_str()));
        let anon = self
            .anonymous_ids
            .iter()
            .map(|a| (IdKind::Anonymous, a.as_str()));
        user.chain(anon).collect()
    }

    /// What the audit keeps of the person: hashes, never the ids.
    pub fn hashes(&self, app: &str) -> Hashes {
        let hex = |kind, id: &str| hex::encode(fingerprint(app, kind, id));
        Hashes {
            user_id: self.user_id.as_deref().map(|u| hex(IdKind::User, u)),
            anonymous_ids: self
                .anonymous_ids
                .iter()
                .map(|a| hex(IdKind::Anonymous, a))
                .collect(),
            email: self.email.as_deref().map(|e| {
                use sha2::{Digest, Sha256};
                hex::encode(Sha256::digest(
                    [app.as_bytes(), &[0, b'e', 0], e.as_bytes()].concat(),
                ))
            }),
        }
    }
}

/// The SHA-256 of each id of an erased person (of `app \0 kind \0 id`, as the suppression
/// list's; `e` for the e-mail): what the audit keeps, so an operator can tell whether an id was
/// erased without the record holding it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hashes {
    pub user_id: Option<String>,
    pub anonymous_ids: Vec<String>,
    pub email: Option<String>,
}

crate::fields::names! {
    /// What an erasure counts, per store (the job's report).
    pub Counted {
        Contacts = "contacts",
        Profiles = "profiles",
        IdentityLinks = "identityLinks",
        SurveyResponses = "surveyResponses",
        Votes = "votes",
        Comments = "comments",
        IdeasAnonymised = "ideasAnonymised",
        IdempotencyAnswers = "idempotencyAnswers",
        RefusedEvents = "refusedEvents",
        WebhookEvents = "webhookEvents",
        LakeRows = "lakeRows",
        LakeFilesRewritten = "lakeFilesRewritten",
        LakeFilesSkipped = "lakeFilesSkipped",
        LakeFilesUnreadable = "lakeFilesUnreadable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Person, Vec<FieldError>> {
        Person::parse(v.as_object().unwrap())
    }

    fn fields(e: Vec<FieldError>) -> Vec<String> {
        e.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_person_needs_one_id_and_every_bad_field_is_named() {
        let p = parse(json!({
            "userId": " u1 ",
            "anonymousIds": ["A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "cookie-1"],
            "email": "Ann@Example.COM"
        }))
        .unwrap();
        assert_eq!(p.user_id.as_deref(), Some("u1"));
        assert!(p
            .anonymous_ids
            .contains("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
        assert!(p.anonymous_ids.contains("cookie-1"));
        assert_eq!(p.email.as_deref(), Some("ann@example.com"));
        assert_eq!(fields(parse(json!({})).unwrap_err()), ["body"]);
        assert_eq!(
            fields(parse(json!({"anonymousIds": []})).unwrap_err()),
            ["body"]
        );
        let bad = parse(json!({
            "userId": "",
            "anonymousIds": ["00000000-0000-0000-0000-000000000000"],
            "email": "nope",
            "extra": 1
        }))
        .unwrap_err();
        let mut names = fields(bad);
        names.sort();
        assert_eq!(names, ["email", "extra", "userId"]);
        assert_eq!(
            fields(
                parse(json!({"anonymousIds": ["00000000-0000-0000-0000-000000000000"]}))
                    .unwrap_err()
            ),
            ["anonymousIds[0]"]
        );
    }

    #[test]
    fn the_audit_keeps_hashes_of_the_app_and_id_never_the_id() {
        let p = parse(json!({"userId": "u1", "anonymousIds": ["a1"], "email": "a@b.co"})).unwrap();
        let h = p.hashes("app1");
        let text = serde_json::to_string(&h).unwrap();
        assert!(!text.contains("u1") && !text.contains("a@b.co"), "{text}");
        assert_eq!(h.user_id.as_ref().unwrap().len(), 64);
        assert_ne!(p.hashes("app2").user_id, h.user_id, "apps apart");
        assert_eq!(p.ids().len(), 2);
    }
}
