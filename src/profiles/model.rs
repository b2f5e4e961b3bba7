//! The visitor profile and how one observed event changes it. No sled, no HTTP, no collector
//! types: the collector describes each event as a [`Touch`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Bounds that keep a profile small whatever a client sends.
const MAX_ANONYMOUS_IDS: usize = 100;
const MAX_GROUPS: usize = 100;
const MAX_TRAITS: usize = 200;
/// `last_seen` alone is written at most this often per user (µs), to keep page views cheap.
const LAST_SEEN_RESOLUTION: i64 = 60_000_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    pub group_id: String,
    #[schema(value_type = Object)]
    pub traits: Map<String, Value>,
}

/// A visitor profile, merged on the server. Stored as JSON in sled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub user_id: String,
    pub traits: Map<String, Value>,
    pub anonymous_ids: Vec<String>,
    pub groups: Vec<Group>,
    /// Microseconds since the epoch (shown as ISO 8601 by the API).
    pub first_seen: i64,
    pub last_seen: i64,
}

/// What an event says about a profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<'a> {
    /// `identify`: links the anonymousId to the user and merges traits (JSON object text).
    Identify { traits: Option<&'a str> },
    /// `group`: the user belongs to a group, with the group's traits.
    Group {
        group_id: &'a str,
        traits: Option<&'a str>,
    },
    /// Any other event of an identified user: only seen times and anonymousIds move.
    Seen,
}

/// One event of a known user, as the profile sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Touch<'a> {
    pub app_id: &'a str,
    pub user_id: &'a str,
    pub anonymous_id: Option<&'a str>,
    /// The event's time, µs.
    pub at: i64,
    pub change: Change<'a>,
}

/// The uplink item kind (`storage::queue`) of a profile touch.
pub const UPLINK_KIND: u8 = 2;

/// A [`Touch`] that owns its text: what an edge sends its control node (the uplink), as JSON
/// `{"appId", "userId", "anonymousId", "at", "change": {"type": "identify", "traits"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnedTouch {
    pub app_id: String,
    pub user_id: String,
    pub anonymous_id: Option<String>,
    pub at: i64,
    pub change: OwnedChange,
}

/// [`Change`], owned; traits stay the JSON object text the event carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum OwnedChange {
    Identify {
        traits: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Group {
        group_id: String,
        traits: Option<String>,
    },
    Seen,
}

impl OwnedTouch {
    pub fn of(t: &Touch<'_>) -> OwnedTouch {
        let owned = |s: Option<&str>| s.map(str::to_owned);
        OwnedTouch {
            app_id: t.app_id.to_owned(),
            user_id: t.user_id.to_owned(),
            anonymous_id: owned(t.anonymous_id),
            at: t.at,
            change: match &t.change {
                Change::Identify { traits } => OwnedChange::Identify {
                    traits: owned(*traits),
                },
                Change::Group { group_id, traits } => OwnedChange::Group {
                    group_id: (*group_id).to_owned(),
                    traits: owned(*traits),
                },
                Change::Seen => OwnedChange::Seen,
            },
        }
    }

    pub fn touch(&self) -> Touch<'_> {
        Touch {
            app_id: &self.app_id,
            user_id: &self.user_id,
            anonymous_id: self.anonymous_id.as_deref(),
            at: self.at,
            change: match &self.change {
                OwnedChange::Identify { traits } => Change::Identify {
                    traits: traits.as_deref(),
                },
                OwnedChange::Group { group_id, traits } => Change::Group {
                    group_id,
                    traits: traits.as_deref(),
                },
                OwnedChange::Seen => Change::Seen,
            },
        }
    }
}

fn traits_of(text: Option<&str>) -> Map<String, Value> {
    text.and_then(|t| serde_json::from_str::<Map<String, Value>>(t).ok())
        .unwrap_or_default()
}

fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        if into.len() < MAX_TRAITS || into.contains_key(&k) {
            into.insert(k, v);
        }
    }
}

impl Profile {
    fn new(user_id: &str, at: i64) -> Profile {
        Profile {
            user_id: user_id.to_owned(),
            traits: Map::new(),
            anonymous_ids: Vec::new(),
            groups: Vec::new(),
            first_seen: at,
            last_seen: at,
        }
    }
}

/// The profile with `t` folded in, or `None` when nothing worth a write changed. Idempotent:
/// folding the same touch twice changes nothing the second time.
pub fn merged(before: Option<&Profile>, t: &Touch<'_>) -> Option<Profile> {
    let mut p = before
        .cloned()
        .unwrap_or_else(|| Profile::new(t.user_id, t.at));
    p.first_seen = p.first_seen.min(t.at);
    p.last_seen = p.last_seen.max(t.at);
    if let Some(anon) = t.anonymous_id {
        if !p.anonymous_ids.iter().any(|a| a == anon) && p.anonymous_ids.len() < MAX_ANONYMOUS_IDS {
            p.anonymous_ids.push(anon.to_owned());
        }
    }
    match &t.change {
        Change::Identify { traits } => merge(&mut p.traits, traits_of(*traits)),
        Change::Group { group_id, traits } => {
            match p.groups.iter().position(|g| g.group_id == *group_id) {
                Some(i) => merge(&mut p.groups[i].traits, traits_of(*traits)),
                None if p.groups.len() < MAX_GROUPS => p.groups.push(Group {
                    group_id: (*group_id).to_owned(),
                    traits: traits_of(*traits),
                }),
                None => {}
            }
        }
        Change::Seen => {}
    }
    let Some(before) = before else { return Some(p) };
    let seen_moved = p.last_seen - before.last_seen > LAST_SEEN_RESOLUTION;
    let mut same = p.clone();
    same.last_seen = before.last_seen;
    (same != *before || seen_moved).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(change: Change<'static>, at: i64) -> Touch<'static> {
        Touch {
            app_id: "a",
            user_id: "u1",
            anonymous_id: Some("anon"),
            at,
            change,
        }
    }

    #[test]
    fn a_touch_travels_owned_and_comes_back_equal() {
        let group = Change::Group {
            group_id: "g1",
            traits: Some(r#"{"size":3}"#),
        };
        for change in [Change::Identify { traits: None }, group, Change::Seen] {
            let t = touch(change, 7);
            let json = serde_json::to_string(&OwnedTouch::of(&t)).unwrap();
            let back: OwnedTouch = serde_json::from_str(&json).unwrap();
            assert_eq!(back.touch(), t, "{json}");
        }
    }

    #[test]
    fn identify_and_group_merge_and_a_repeat_writes_nothing() {
        let id = touch(
            Change::Identify {
                traits: Some(r#"{"plan":"pro"}"#),
            },
            10,
        );
        let p = merged(None, &id).unwrap();
        assert_eq!(p.traits["plan"], "pro");
        assert_eq!(p.anonymous_ids, ["anon"]);
        assert_eq!(merged(Some(&p), &id), None);
        let g = touch(
            Change::Group {
                group_id: "g1",
                traits: Some(r#"{"size":3}"#),
            },
            5,
        );
        let p = merged(Some(&p), &g).unwrap();
        assert_eq!(p.groups[0].group_id, "g1");
        assert_eq!((p.first_seen, p.last_seen), (5, 10));
        // last_seen alone moves the record only once a minute.
        assert_eq!(merged(Some(&p), &touch(Change::Seen, 20)), None);
        let later = merged(
            Some(&p),
            &touch(Change::Seen, 10 + LAST_SEEN_RESOLUTION + 1),
        )
        .unwrap();
        assert_eq!(later.last_seen, 10 + LAST_SEEN_RESOLUTION + 1);
    }
}
