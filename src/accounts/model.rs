//! Team accounts and their sessions as values: roles and what they may do, passwords (argon2id),
//! session expiry and the CSRF check. No sled, no HTTP.
//!
//! A session id is 256 random bits, given to the browser once (in its cookie); the store keeps
//! only its SHA-256, so a copy of the database signs nobody in. Each session carries its own
//! CSRF token, which every form posts back and which is compared in constant time.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use unicode_normalization::UnicodeNormalization;

use crate::fields::names;
use crate::fields::Text;
use crate::ids::{self, Timestamp};
use crate::validation::{normalize_email, FieldError};

/// Shortest password accepted.
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longest password accepted (argon2 hashes any length; this bounds the work per request).
pub const MAX_PASSWORD_CHARS: usize = 200;
/// A session ends after this long without a request...
pub const IDLE_SECS: i64 = 12 * 3600;
/// ...and in any case this long after sign-in.
pub const ABSOLUTE_SECS: i64 = 7 * 24 * 3600;
/// `last_seen` is written back at most this often (a page view is not a store write).
pub const TOUCH_EVERY_SECS: i64 = 60;

names! {
    /// What a team member may do. Owners do everything; members work with apps' data (contacts,
    /// imports) but manage no keys, plans or accounts.
    pub Role {
        Owner = "owner",
        Member = "member",
    }
}

impl Role {
    /// Create, edit and revoke API keys; rotate integration keys.
    pub fn manages_keys(self) -> bool {
        self == Role::Owner
    }

    /// Create apps and change their plans.
    pub fn manages_plans(self) -> bool {
        self == Role::Owner
    }

    /// Create team accounts.
    pub fn manages_team(self) -> bool {
        self == Role::Owner
    }
}

/// A team account as stored: the password only as its argon2id PHC string.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: String,
    pub email: String,
    pub name: String,
    pub role: Role,
    pub password_hash: String,
    pub created_at: Timestamp,
}

/// A new account's fields, checked together so a form shows every error at once.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub email: String,
    pub name: String,
    pub role: Role,
    pub password: String,
}

impl NewUser {
    /// Checks e-mail, name (1..100 characters) and password (10..200 characters).
    pub fn parse(
        email: &str,
        name: &str,
        password: &str,
        role: Role,
    ) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let email = normalize_email(email)
            .map_err(|m| errors.push(FieldError::new("email", m)))
            .unwrap_or_default();
        let name = Text::line(1, 100)
            .check(name)
            .map_err(|m| errors.push(FieldError::new("name", m)))
            .unwrap_or_default();
        if let Err(m) = check_password(password) {
            errors.push(FieldError::new("password", m));
        }
        if errors.is_empty() {
            Ok(NewUser {
                email,
                name,
                role,
                password: password.to_owned(),
            })
        } else {
            Err(errors)
        }
    }

    /// The stored account, created at `now` (hashes the password: slow on purpose, run it off
    /// the async workers).
    pub fn into_user(self, now: Timestamp) -> Result<User, String> {
        Ok(User {
            id: ids::object_id(),
            password_hash: hash_password(&self.password)?,
            email: self.email,
            name: self.name,
            role: self.role,
            created_at: now,
        })
    }
}

/// The rules of passwords: 10 to 200 characters (counted in NFC), not only white space, no
/// control characters (NUL, tab, line breaks, ESC...).
pub fn check_password(password: &str) -> Result<(), String> {
    if password.chars().any(char::is_control) {
        return Err("must not contain control characters (tabs, line breaks, NUL...)".into());
    }
    if password.trim().is_empty() && !password.is_empty() {
        return Err("must not be only spaces".into());
    }
    match password.nfc().count() {
        n if n < MIN_PASSWORD_CHARS => {
            Err(format!("must be at least {MIN_PASSWORD_CHARS} characters"))
        }
        n if n > MAX_PASSWORD_CHARS => {
            Err(format!("must be at most {MAX_PASSWORD_CHARS} characters"))
        }
        _ => Ok(()),
    }
}

/// argon2id with the crate's default parameters and a random 128-bit salt, as a PHC string,
/// of the password in Unicode NFC (so "é" typed as one code point or as "e" and an accent is
/// the same password).
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&ids::random_bytes::<16>()).map_err(|e| e.to_string())?;
    let nfc: String = password.nfc().collect();
    Argon2::default()
        .hash_password(nfc.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// True when `password` matches the PHC string `hash` (false for a malformed hash). Tried in
/// NFC, as hashed since; a hash stored before that is of the text as typed, so when the typed
/// text is not already NFC it is tried as such too, and nobody is locked out.
pub fn verify_password(password: &str, hash: &str) -> bool {
    let Ok(h) = PasswordHash::new(hash) else {
        return false;
    };
    let verify = |p: &str| Argon2::default().verify_password(p.as_bytes(), &h).is_ok();
    let nfc: String = password.nfc().collect();
    verify(&nfc) || (nfc != password && verify(password))
}

/// A hash of a password nobody has, verified when the e-mail is unknown so that a wrong e-mail
/// costs as much as a wrong password.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password(&ids::secret()).unwrap_or_default())
}

/// A signed-in browser, as stored (under the SHA-256 of its id).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub user_id: String,
    /// The token every form of this session must post back.
    pub csrf: String,
    pub created_at: Timestamp,
    pub last_seen: Timestamp,
}

impl Session {
    /// A new session for `user_id`: the record and the id for the cookie (shown once).
    pub fn start(user_id: &str, now: Timestamp) -> (Session, String) {
        let session = Session {
            user_id: user_id.to_owned(),
            csrf: ids::secret(),
            created_at: now,
            last_seen: now,
        };
        (session, ids::secret())
    }

    /// True while neither the idle nor the absolute lifetime has passed.
    pub fn is_live(&self, now: Timestamp) -> bool {
        let secs = |from: Timestamp| (now.micros() - from.micros()) / 1_000_000;
        secs(self.last_seen) < IDLE_SECS && secs(self.created_at) < ABSOLUTE_SECS
    }

    /// True when `last_seen` is old enough to be written back.
    pub fn needs_touch(&self, now: Timestamp) -> bool {
        (now.micros() - self.last_seen.micros()) / 1_000_000 >= TOUCH_EVERY_SECS
    }

    /// Compares a posted CSRF token with the session's in constant time.
    pub fn csrf_matches(&self, given: &str) -> bool {
        tokens_match(&self.csrf, given)
    }
}

/// Constant-time equality of two tokens (their SHA-256, so lengths leak nothing either).
pub fn tokens_match(expected: &str, given: &str) -> bool {
    let (a, b) = (ids::hash_secret(expected), ids::hash_secret(given));
    !expected.is_empty() && bool::from(a.ct_eq(&b))
}

/// The key a session is stored under: SHA-256 of its id, in hex.
pub fn session_key(id: &str) -> String {
    hex::encode(ids::hash_secret(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_argon2id_hash_and_nothing_else() {
        let hash = hash_password("correct horse battery").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse batterx", &hash));
        assert!(!verify_password("correct horse battery", "not a hash"));
        assert_ne!(
            hash,
            hash_password("correct horse battery").unwrap(),
            "salted"
        );
    }

    #[test]
    fn passwords_are_refused_blank_or_with_control_characters_and_match_across_normal_forms() {
        for bad in [
            "          ",
            "\t".repeat(10).as_str(),
            "long enough\0pw",
            "\u{3000}".repeat(10).as_str(),
        ] {
            assert!(check_password(bad).is_err(), "{bad:?}");
        }
        assert!(
            check_password("a b c d e f").is_ok(),
            "inner spaces are fine"
        );
        let (nfd, nfc) = (
            "A\u{30a}sa-a\u{30a}ngstro\u{308}m",
            "\u{c5}sa-\u{e5}ngstr\u{f6}m",
        );
        let hash = hash_password(nfd).unwrap();
        assert!(verify_password(nfc, &hash) && verify_password(nfd, &hash));
        // A hash made before passwords were normalised: of the text as typed.
        let salt = SaltString::encode_b64(&[7u8; 16]).unwrap();
        let old = Argon2::default()
            .hash_password(nfd.as_bytes(), &salt)
            .unwrap()
            .to_string();
        assert!(verify_password(nfd, &old), "the old user still gets in");
    }

    #[test]
    fn new_accounts_report_every_bad_field() {
        let bad = [
            ("not-an-email", "Ann", "long enough pw", "email"),
            ("a@b.io", "", "long enough pw", "name"),
            ("a@b.io", "Ann", "short", "password"),
            ("a@b.io", "Ann\u{7}", "long enough pw", "name"),
        ];
        for (email, name, pw, field) in bad {
            let errors = NewUser::parse(email, name, pw, Role::Member).unwrap_err();
            assert_eq!(errors.len(), 1, "{field}: {errors:?}");
            assert_eq!(errors[0].field, field);
        }
        let all = NewUser::parse("x", "", "", Role::Member).unwrap_err();
        assert_eq!(all.len(), 3);
        let ok = NewUser::parse(" Ann@Example.COM ", " Ann ", "0123456789", Role::Owner).unwrap();
        assert_eq!(
            (ok.email.as_str(), ok.name.as_str()),
            ("ann@example.com", "Ann")
        );
    }

    #[test]
    fn a_session_expires_when_idle_or_old_and_is_touched_at_most_once_a_minute() {
        let t0 = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        let at = |secs: i64| Timestamp::from_micros(t0.micros() + secs * 1_000_000);
        let (mut s, id) = Session::start("u1", t0);
        assert_eq!(id.len(), 64, "256 bits");
        assert!(s.is_live(at(IDLE_SECS - 1)));
        assert!(!s.is_live(at(IDLE_SECS)));
        assert!(!s.needs_touch(at(30)) && s.needs_touch(at(60)));
        // Sliding: a request every hour keeps it alive, until the absolute limit.
        for h in 1..(ABSOLUTE_SECS / 3600) {
            s.last_seen = at(h * 3600);
            assert!(s.is_live(at(h * 3600 + 60)));
        }
        s.last_seen = at(ABSOLUTE_SECS - 10);
        assert!(!s.is_live(at(ABSOLUTE_SECS)));
    }

    #[test]
    fn the_csrf_token_must_match_exactly() {
        let (s, _) = Session::start("u1", Timestamp::from_micros(1_750_000_000_000_000));
        assert!(s.csrf_matches(&s.csrf.clone()));
        assert!(!s.csrf_matches(""));
        assert!(!s.csrf_matches(&s.csrf[..63]));
        assert!(!s.csrf_matches(&format!("{}0", s.csrf)));
        assert!(
            !tokens_match("", ""),
            "an empty expected token matches nothing"
        );
        assert_ne!(session_key("a"), session_key("b"));
    }

    #[test]
    fn only_owners_manage_keys_plans_and_the_team() {
        assert!(
            Role::Owner.manages_keys() && Role::Owner.manages_plans() && Role::Owner.manages_team()
        );
        assert!(!Role::Member.manages_keys());
        assert!(!Role::Member.manages_plans());
        assert!(!Role::Member.manages_team());
        assert_eq!(Role::parse("member"), Some(Role::Member));
        assert_eq!(Role::parse("admin"), None);
    }
}
