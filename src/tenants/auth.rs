//! Authentication of API requests (`X-API-Key`), their permission and rate limit, and of admin
//! requests (`Authorization: Bearer <admin token>`), whose wrong tokens are throttled per client
//! address (`AdminTokens`).

use std::collections::HashMap;
use std::future::{ready, Ready};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use subtle::ConstantTimeEq;

use super::model::{KeyKind, Permission, Plan};
use super::registry::Registry;
use crate::api::ratelimit::RateLimits;
use crate::api::{ApiError, ErrorCode, FieldError};
use crate::config::{PlanLimits, Plans, Secret};

/// Who may do what: the key registry, the per-key rate limits and the admin token. Registered
/// as its own `web::Data`; the authentication extractors below read it.
pub struct Access {
    pub registry: Registry,
    pub rate_limits: RateLimits,
    pub plans: Plans,
    pub admin_token: AdminTokens,
    /// The erased persons' ids, refused at ingest (`suppression.rs`).
    pub suppressions: std::sync::Arc<super::Suppressions>,
}

/// Wrong admin tokens allowed per client address per minute (a burst of this many, then one a
/// second); past them, every admin token from that address (the right one too, so guessing
/// learns nothing) waits for `Retry-After`. Generous enough for an operator's typos and a
/// fuzzer's one wrong-token probe per operation; a guesser gets one try a second.
pub const WRONG_ADMIN_TOKENS_PER_MINUTE: u32 = 60;

/// The admin token and the throttle of wrong ones: each wrong token takes one of the address's
/// `WRONG_ADMIN_TOKENS_PER_MINUTE` (governor buckets, refilled over the minute); one past the
/// last blocks the address until its bucket holds a token again.
pub struct AdminTokens {
    token: Secret,
    wrong: RateLimits,
    /// Address -> blocked until (bounded: expired entries go whenever one is added).
    blocked: Mutex<HashMap<String, Instant>>,
}

impl AdminTokens {
    pub fn new(token: Secret) -> AdminTokens {
        AdminTokens {
            token,
            wrong: RateLimits::default(),
            blocked: Mutex::default(),
        }
    }

    /// Checks a presented admin token from the client `addr`: `Ok(true)` when it is the token,
    /// `Ok(false)` when it is not (counted), `Err(seconds)` while the address is blocked.
    pub fn check(&self, given: &str, addr: &str) -> Result<bool, u64> {
        let now = Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(until) = blocked.get(addr).filter(|u| **u > now) {
            return Err(until.duration_since(now).as_secs_f64().ceil().max(1.0) as u64);
        }
        let expected = crate::ids::hash_secret(self.token.expose());
        if bool::from(expected.ct_eq(&crate::ids::hash_secret(given))) {
            return Ok(true);
        }
        match self
            .wrong
            .check(addr, WRONG_ADMIN_TOKENS_PER_MINUTE)
            .retry_after
        {
            None => Ok(false),
            Some(wait) => {
                tracing::warn!(addr, wait, "wrong admin tokens: address throttled");
                blocked.retain(|_, u| *u > now);
                blocked.insert(addr.to_owned(), now + Duration::from_secs(wait));
                Err(wait)
            }
        }
    }
}

/// The client address a throttle counts by.
pub fn client_addr(req: &HttpRequest) -> String {
    req.peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default()
}

/// 429 RATE_LIMITED with `Retry-After` for an address that sent too many wrong admin tokens.
pub fn too_many_wrong_tokens(wait: u64) -> ApiError {
    ApiError::new(
        ErrorCode::RateLimited,
        format!("too many wrong admin tokens from this address; try again in {wait} s"),
    )
    .with_header("retry-after", wait.to_string())
}

impl Access {
    pub fn limits(&self, plan: Plan) -> PlanLimits {
        *self.plans.get(plan)
    }
}

/// The app and key behind an authenticated, rate-limited API request.
#[derive(Debug, Clone)]
pub struct Principal {
    pub app_id: String,
    pub key_id: String,
    pub plan: Plan,
    permissions: Vec<Permission>,
}

impl Principal {
    /// Who a change made with this key is by (`actor` of its webhook events).
    pub fn actor(&self) -> crate::storage::changes::Actor {
        crate::storage::changes::Actor::ApiKey {
            id: self.key_id.clone(),
        }
    }

    /// 403 FORBIDDEN unless the key holds `p`.
    pub fn require(&self, p: Permission) -> Result<(), ApiError> {
        if self.permissions.contains(&p) {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("this API key lacks the {} permission", p.name()),
            )
            .with_details(vec![FieldError::new(
                "permission",
                format!("{} required", p.name()),
            )]))
        }
    }
}

fn access(req: &HttpRequest) -> Result<&web::Data<Access>, ApiError> {
    req.app_data::<web::Data<Access>>()
        .ok_or_else(|| ApiError::internal("access state missing"))
}

fn authenticate(req: &HttpRequest) -> Result<Principal, ApiError> {
    let access = access(req)?;
    let presented = req
        .headers()
        .get("x-api-key")
        .ok_or_else(|| ApiError::unauthorized("missing X-API-Key header"))?
        .to_str()
        .map_err(|_| ApiError::unauthorized("invalid API key"))?;
    let who = access
        .registry
        .authenticate(presented, KeyKind::Api)
        .ok_or_else(|| ApiError::unauthorized("invalid or revoked API key"))?;
    let rate = access
        .rate_limits
        .check(&who.key_id, access.limits(who.plan).requests_per_minute);
    req.extensions_mut().insert(rate);
    if let Some(wait) = rate.retry_after {
        return Err(ApiError::new(
            ErrorCode::RateLimited,
            format!("rate limit of {} requests per minute reached", rate.limit),
        )
        .with_header("retry-after", wait.to_string()));
    }
    Ok(Principal {
        app_id: who.app_id,
        key_id: who.key_id,
        plan: who.plan,
        permissions: who.permissions,
    })
}

impl FromRequest for Principal {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authenticate(req))
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is case-insensitive
/// (RFC 7235 §2.1: `bearer`, `BEARER` work too) and may be followed by several spaces.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// An authenticated operator (`Authorization: Bearer <admin token>`).
pub struct Admin;

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready((|| {
            let access = access(req)?;
            let token = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(bearer_token)
                .ok_or_else(|| {
                    ApiError::unauthorized("missing Authorization: Bearer <admin token>")
                })?;
            match access.admin_token.check(token, &client_addr(req)) {
                Ok(true) => Ok(Admin),
                Ok(false) => Err(ApiError::unauthorized("invalid admin token")),
                Err(wait) => Err(too_many_wrong_tokens(wait)),
            }
        })())
    }
}
