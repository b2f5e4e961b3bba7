//! Webhook endpoints, their secrets and the attempts log as typed values, and the validation of
//! their admin bodies. No sled, no HTTP.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fields::{names, Body, Field, Kind, Mode, NameSet, Text, OBJECT_ID};
use crate::ids::{self, Timestamp};
use crate::storage::changes::{self, Change};
use crate::validation::FieldError;

pub const MAX_URL_CHARS: usize = 2048;
pub const MAX_DESCRIPTION_CHARS: usize = 500;
pub const MAX_FILTER_ITEMS: usize = 50;
/// The longest overlap of a rotated secret (7 days), and the default one (1 day).
pub const MAX_OVERLAP_SECS: i64 = 604_800;
pub const DEFAULT_OVERLAP_SECS: i64 = 86_400;
/// An endpoint that takes every event type.
pub const ALL_TYPES: &str = "*";
/// How much of an answer the attempts log keeps.
pub const LOGGED_ANSWER_BYTES: usize = 1024;

names! {
    /// Whether an endpoint gets events: `active`, `paused` (by its owner) or `disabled` (by
    /// Tributary, after a delivery failed for the whole retry schedule).
    pub EndpointStatus { Active = "active", Paused = "paused", Disabled = "disabled" }
}

names! {
    /// What made an attempt: the event's first send, a retry, a redeliver, or a test.
    pub AttemptTrigger { Event = "event", Retry = "retry", Redeliver = "redeliver", Test = "test" }
}

/// Which events an endpoint takes beyond their type. Each filter narrows only the events that
/// carry its facet: `boardIds` the idea, vote and comment events, `surveyIds` the survey
/// responses, `contactStatuses` the contact events; an empty or absent filter takes all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookEndpointFilters)]
pub struct Filters {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub board_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survey_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contact_statuses: Vec<String>,
}

fn passes(filter: &[String], facet: Option<&String>) -> bool {
    match facet {
        Some(f) if !filter.is_empty() => filter.contains(f),
        _ => true,
    }
}

/// A webhook endpoint as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookEndpoint)]
pub struct Endpoint {
    pub id: String,
    pub url: String,
    pub description: Option<String>,
    /// Event types (README, "Webhooks"), or `["*"]` for all.
    pub event_types: Vec<String>,
    pub filters: Filters,
    /// Whether internal comments (`comment.created` of an internal note) reach it.
    pub include_internal_comments: bool,
    pub status: EndpointStatus,
    /// Why Tributary disabled it (status `disabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<Timestamp>,
    /// Deliveries waiting (to be sent or retried).
    #[serde(default)]
    pub pending: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A signing secret: `whsec_<base64 of 32 random bytes>`, and when it stops signing (a
/// rotated-out secret during its overlap).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SigningSecret {
    pub secret: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl SigningSecret {
    /// A new secret from the system's random source.
    pub fn generate() -> SigningSecret {
        use base64::Engine;
        let bytes = ids::random_bytes::<32>();
        SigningSecret {
            secret: format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode(bytes)
            ),
            expires_at: None,
        }
    }

    pub fn live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// An endpoint as stored: the endpoint and its secrets (newest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointRecord {
    pub endpoint: Endpoint,
    pub secrets: Vec<SigningSecret>,
}

impl EndpointRecord {
    /// The secrets that sign at `now`, newest first.
    pub fn live_secrets(&self, now: Timestamp) -> Vec<&str> {
        self.secrets
            .iter()
            .filter(|s| s.live(now))
            .map(|s| s.secret.as_str())
            .collect()
    }

    /// Whether the endpoint gets `change` now: active, subscribed to its type, its filters
    /// pass, and an internal comment only when it asks for them.
    pub fn wants(&self, change: &Change) -> bool {
        let e = &self.endpoint;
        let f = &change.facets;
        e.status == EndpointStatus::Active
            && e.event_types
                .iter()
                .any(|t| t == ALL_TYPES || *t == change.kind)
            && passes(&e.filters.board_ids, f.board_id.as_ref())
            && passes(&e.filters.survey_ids, f.survey_id.as_ref())
            && passes(&e.filters.contact_statuses, f.contact_status.as_ref())
            && (!f.internal || e.include_internal_comments)
    }
}

/// The answer of a create: the endpoint and its secret (shown only here and on rotation).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookEndpointWithSecret)]
pub struct EndpointWithSecret {
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// `whsec_...`: shown once.
    pub secret: String,
}

/// The answer of a rotation.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookSecretRotated)]
pub struct Rotated {
    /// The new secret (`whsec_...`): shown once; it signs from now on.
    pub secret: String,
    /// Until when the previous secret still signs too (`null`: no overlap).
    pub previous_secret_expires_at: Option<Timestamp>,
}

/// One attempt to deliver an event, as the log shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookAttempt)]
pub struct Attempt {
    pub id: String,
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// 1 for the first send of this delivery, then one more per retry.
    pub attempt: u32,
    pub at: Timestamp,
    /// The HTTP status answered, `null` when none came (connection refused, timeout, refused
    /// address).
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: u64,
    /// The first 1 KiB of the answer (lossy UTF-8).
    pub response: String,
    pub trigger: AttemptTrigger,
}

impl Attempt {
    /// 2xx.
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// A logged attempt as stored: what a redeliver sends again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub attempt: Attempt,
    pub subject: String,
    pub body: String,
}

/// The answer of a redeliver.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookRedelivery)]
pub struct Redelivery {
    pub webhook_id: String,
    pub event_id: String,
    /// Always true: the event waits in the endpoint's outbox.
    pub queued: bool,
}

/// The body of a delivered event (bytes fixed at fan-out, identical on every retry).
pub fn event_body(change: &Change, sequence: u64) -> String {
    let body = serde_json::json!({
        "id": change.id,
        "type": change.kind,
        "timestamp": change.at,
        "appId": change.app_id,
        "sequence": sequence,
        "actor": change.actor,
        "data": change.data,
    });
    body.to_string()
}

/// A validated create or merge-patch body of an endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointPatch {
    pub url: Option<String>,
    /// `Some(None)`: cleared.
    pub description: Option<Option<String>>,
    pub event_types: Option<Vec<String>>,
    pub filters: Option<Filters>,
    pub include_internal_comments: Option<bool>,
    /// `active` or `paused` (`active` re-enables a disabled endpoint).
    pub status: Option<EndpointStatus>,
}

/// A URL: http or https, a host, no credentials, at most 2048 characters. Whether its host
/// may be reached is the guard's (`guard.rs`).
fn parse_url(path: &str, v: &Value) -> Result<Value, Vec<FieldError>> {
    let bad = |m: &str| vec![FieldError::new(path, m)];
    let Some(raw) = v.as_str() else {
        return Err(bad("must be a string (an http or https URL)"));
    };
    let raw = raw.trim();
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(bad("must be at most 2048 characters"));
    }
    let Ok(url) = reqwest::Url::parse(raw) else {
        return Err(bad("must be an absolute http or https URL"));
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("must be an http or https URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not hold credentials (user:password@)"));
    }
    Ok(Value::String(url.to_string()))
}

fn url_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(utoipa::openapi::SchemaFormat::Custom("uri".into())))
        .max_length(Some(MAX_URL_CHARS))
        .into()
}

/// An event type of the catalogue, or `*`.
fn parse_type(path: &str, v: &Value) -> Result<Value, Vec<FieldError>> {
    match v.as_str() {
        Some(t) if t == ALL_TYPES || changes::types::ALL.contains(&t) => Ok(v.clone()),
        _ => Err(vec![FieldError::new(
            path,
            format!(
                "must be an event type ({}) or \"*\"",
                changes::types::ALL.join(", ")
            ),
        )]),
    }
}

fn type_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let names = changes::types::ALL.iter().copied().chain([ALL_TYPES]);
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .into()
}

static EVENT_TYPE: Kind = Kind::Custom {
    parse: parse_type,
    schema: type_schema,
    hint: "an event type or \"*\"",
};
static BOARD_ID: Kind = Kind::Shape(&OBJECT_ID);
static SURVEY_ID: Kind = Kind::Text(Text::line(1, 100));
static CONTACT_STATUS: Kind = Kind::Names(NameSet::of::<crate::contacts::model::Status>());

/// The filters of an endpoint.
pub static FILTERS: Body = Body::new(
    "WebhookFilters",
    "Which events of its types an endpoint takes; each filter narrows only the events that \
     carry its facet (empty or absent: all).",
    &[
        Field::new(
            "boardIds",
            Kind::List {
                item: &BOARD_ID,
                max: MAX_FILTER_ITEMS,
                noun: "board ids",
            },
        )
        .doc("Idea, vote and comment events of these boards only."),
        Field::new(
            "surveyIds",
            Kind::List {
                item: &SURVEY_ID,
                max: MAX_FILTER_ITEMS,
                noun: "survey ids",
            },
        )
        .doc("Survey response events of these surveys only."),
        Field::new(
            "contactStatuses",
            Kind::List {
                item: &CONTACT_STATUS,
                max: MAX_FILTER_ITEMS,
                noun: "contact statuses",
            },
        )
        .doc("Contact events of contacts in these statuses only."),
    ],
);

names! {
    /// What an owner may set an endpoint's status to.
    pub SettableStatus { Active = "active", Paused = "paused" }
}

/// The body of an endpoint.
pub static ENDPOINT: Body = Body::new(
    "Webhook",
    "",
    &[
        Field::new(
            "url",
            Kind::Custom {
                parse: parse_url,
                schema: url_schema,
                hint: "an http or https URL",
            },
        )
        .required()
        .doc(
            "http or https, at most 2048 characters, no credentials; its host must not be \
              (or resolve to) a loopback, private, link-local, CGNAT, ULA, multicast or \
              unspecified address unless `webhooks.allow_private`.",
        ),
        Field::text("description", Text::lines(0, MAX_DESCRIPTION_CHARS))
            .nullable()
            .doc("Up to 500 characters; empty or `null`: none."),
        Field::new(
            "eventTypes",
            Kind::List {
                item: &EVENT_TYPE,
                max: changes::types::ALL.len() + 1,
                noun: "event types",
            },
        )
        .required()
        .doc("Non-empty: event types of the catalogue (README, \"Webhooks\"), or `[\"*\"]`."),
        Field::new("filters", Kind::Object(&FILTERS))
            .nullable()
            .doc("`null`: none."),
        Field::new("includeInternalComments", Kind::Bool)
            .doc("Whether internal comments reach it (default false)."),
        Field::new("status", Kind::Names(NameSet::of::<SettableStatus>()))
            .doc("`active` (default) or `paused`; `active` re-enables a disabled endpoint."),
    ],
);

/// The body of a rotation.
pub static ROTATION: Body = Body::new(
    "WebhookSecretRotation",
    "",
    &[Field::new(
        "overlapSeconds",
        Kind::Integer {
            min: 0,
            max: MAX_OVERLAP_SECS,
        },
    )
    .doc("How long the previous secret still signs (0..604800, default 86400).")],
);

impl EndpointPatch {
    /// Parses a create (`Mode::Create`) or merge-patch body.
    pub fn parse(body: &Map<String, Value>, mode: Mode) -> Result<EndpointPatch, Vec<FieldError>> {
        let p = ENDPOINT.parse(body, mode)?;
        let event_types = p.strings("eventTypes").flatten();
        if event_types.as_ref().is_some_and(Vec::is_empty) {
            let m = "must hold at least one event type (or \"*\")";
            return Err(vec![FieldError::new("eventTypes", m)]);
        }
        let filters = p.get("filters").map(|_| {
            let f = p.object("filters").unwrap_or_default();
            let list = |n: &str| f.strings(n).flatten().unwrap_or_default();
            Filters {
                board_ids: list("boardIds"),
                survey_ids: list("surveyIds"),
                contact_statuses: list("contactStatuses"),
            }
        });
        Ok(EndpointPatch {
            url: p.string("url"),
            description: p.text("description"),
            event_types,
            filters,
            include_internal_comments: p.bool("includeInternalComments").flatten(),
            status: p.name::<SettableStatus>("status").map(|s| match s {
                SettableStatus::Active => EndpointStatus::Active,
                SettableStatus::Paused => EndpointStatus::Paused,
            }),
        })
    }

    /// A new endpoint record made at `now` from a create body, with a new secret.
    pub fn create(&self, now: Timestamp) -> EndpointRecord {
        let mut endpoint = Endpoint {
            id: ids::object_id(),
            url: String::new(),
            description: None,
            event_types: Vec::new(),
            filters: Filters::default(),
            include_internal_comments: false,
            status: EndpointStatus::Active,
            disabled_reason: None,
            disabled_at: None,
            pending: 0,
            created_at: now,
            updated_at: now,
        };
        self.apply(&mut endpoint, now);
        EndpointRecord {
            endpoint,
            secrets: vec![SigningSecret::generate()],
        }
    }

    /// Applies the body to `e` (a status `active` clears why it was disabled).
    pub fn apply(&self, e: &mut Endpoint, now: Timestamp) {
        if let Some(u) = &self.url {
            e.url = u.clone();
        }
        if let Some(d) = &self.description {
            e.description = d.clone();
        }
        if let Some(t) = &self.event_types {
            e.event_types = t.clone();
        }
        if let Some(f) = &self.filters {
            e.filters = f.clone();
        }
        if let Some(i) = self.include_internal_comments {
            e.include_internal_comments = i;
        }
        if let Some(s) = self.status {
            e.status = s;
            if s == EndpointStatus::Active {
                (e.disabled_reason, e.disabled_at) = (None, None);
            }
        }
        e.updated_at = now;
    }
}

/// The overlap of a rotation body (default 1 day).
pub fn parse_overlap(body: &Map<String, Value>) -> Result<i64, Vec<FieldError>> {
    let p = ROTATION.parse(body, Mode::Create)?;
    Ok(p.integer("overlapSeconds")
        .flatten()
        .unwrap_or(DEFAULT_OVERLAP_SECS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::changes::{Actor, Facets};
    use serde_json::json;

    fn parse(body: Value, mode: Mode) -> Result<EndpointPatch, Vec<String>> {
        EndpointPatch::parse(body.as_object().unwrap(), mode)
            .map_err(|e| e.into_iter().map(|f| f.field).collect())
    }

    #[test]
    fn every_bad_field_of_an_endpoint_is_named() {
        let cases = [
            (json!({"eventTypes": ["*"]}), vec!["url"], "url missing"),
            (
                json!({"url": "ftp://x.example/", "eventTypes": ["*"]}),
                vec!["url"],
                "scheme",
            ),
            (
                json!({"url": "https://u:p@x.example/", "eventTypes": ["*"]}),
                vec!["url"],
                "creds",
            ),
            (
                json!({"url": "https:///", "eventTypes": ["*"]}),
                vec!["url"],
                "no host",
            ),
            (
                json!({"url": format!("https://x.example/{}", "a".repeat(2048)), "eventTypes": ["*"]}),
                vec!["url"],
                "long",
            ),
            (
                json!({"url": "https://x.example/", "eventTypes": []}),
                vec!["eventTypes"],
                "empty",
            ),
            (
                json!({"url": "https://x.example/", "eventTypes": ["idea.nope"]}),
                vec!["eventTypes[0]"],
                "unknown",
            ),
            (
                json!({"url": "https://x.example/"}),
                vec!["eventTypes"],
                "types missing",
            ),
            (
                json!({"url": "https://x.example/", "eventTypes": ["*"], "status": "disabled"}),
                vec!["status"],
                "status",
            ),
            (
                json!({"url": "https://x.example/", "eventTypes": ["*"], "filters": {"boardIds": ["x"], "contactStatuses": ["vip"]}}),
                vec!["filters.boardIds[0]", "filters.contactStatuses[0]"],
                "filters",
            ),
            (
                json!({"url": "https://x.example/", "eventTypes": ["*"], "secret": "x"}),
                vec!["secret"],
                "unknown field",
            ),
        ];
        for (body, fields, why) in cases {
            let mut got = parse(body, Mode::Create).expect_err(why);
            got.sort();
            assert_eq!(got, fields, "{why}");
        }
        let ok = parse(
            json!({"url": " https://hooks.example/in ", "eventTypes": ["idea.created", "idea.created"],
                   "filters": {"boardIds": ["0123456789abcdef01234567"]}, "status": "paused"}),
            Mode::Create,
        )
        .unwrap();
        assert_eq!(ok.url.as_deref(), Some("https://hooks.example/in"));
        assert_eq!(ok.event_types, Some(vec!["idea.created".to_owned()]));
        assert_eq!(ok.status, Some(EndpointStatus::Paused));
        assert!(parse(json!({"description": null}), Mode::Patch).is_ok());
        assert_eq!(
            parse(json!({"url": null}), Mode::Patch).unwrap_err(),
            ["url"]
        );
    }

    fn change(kind: &str, facets: Facets) -> Change {
        Change::new(kind, "app", "s", Timestamp::t0(), &Actor::Admin, json!({})).with(facets)
    }

    #[test]
    fn an_endpoint_wants_its_types_through_its_filters_and_internal_comments_only_if_asked() {
        let p = parse(
            json!({"url": "https://x.example/", "eventTypes": ["comment.created", "contact.updated"],
                   "filters": {"boardIds": ["0123456789abcdef01234567"], "contactStatuses": ["customer"]}}),
            Mode::Create,
        )
        .unwrap();
        let mut r = p.create(Timestamp::t0());
        let board = |b: &str, internal| Facets {
            board_id: Some(b.into()),
            internal,
            ..Facets::default()
        };
        let status = |s: &str| Facets {
            contact_status: Some(s.into()),
            ..Facets::default()
        };
        let b = "0123456789abcdef01234567";
        assert!(r.wants(&change("comment.created", board(b, false))));
        assert!(
            !r.wants(&change("comment.created", board(b, true))),
            "internal"
        );
        assert!(!r.wants(&change("comment.created", board("other", false))));
        assert!(!r.wants(&change("idea.created", board(b, false))), "type");
        assert!(r.wants(&change("contact.updated", status("customer"))));
        assert!(!r.wants(&change("contact.updated", status("lost"))));
        r.endpoint.include_internal_comments = true;
        assert!(r.wants(&change("comment.created", board(b, true))));
        r.endpoint.event_types = vec!["*".into()];
        assert!(r.wants(&change("vote.created", board(b, false))));
        for s in [EndpointStatus::Paused, EndpointStatus::Disabled] {
            r.endpoint.status = s;
            assert!(!r.wants(&change("vote.created", board(b, false))), "{s:?}");
        }
    }

    #[test]
    fn a_secret_is_whsec_and_32_random_bytes_and_expires() {
        use base64::Engine;
        let s = SigningSecret::generate();
        let raw = s.secret.strip_prefix("whsec_").unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(raw)
            .unwrap();
        assert_eq!(bytes.len(), 32);
        assert_ne!(s.secret, SigningSecret::generate().secret);
        let t = Timestamp::t0();
        let old = SigningSecret {
            expires_at: Some(t),
            ..s.clone()
        };
        assert!(s.live(t) && !old.live(t));
        assert!(old.live(Timestamp::from_micros(t.micros() - 1)));
    }
}
