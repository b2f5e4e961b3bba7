//! An edge collector's side of the fleet: the sync loops (the registry pulled, the heartbeat
//! with the edge's usage sent and the other nodes' usage set on the quotas, the uplink sent),
//! the paths an edge serves, and the survey widget's read forwarded to the control node.
//!
//! Nothing on a request's path waits for the control node but the survey widget's calls (the
//! list and a response), which the control node answers first (it knows every node's profiles
//! and answers), bounded by `WIDGET_WAIT`; when it is away, slow or failing, the edge answers
//! from its own data (its replica of the surveys, the profiles it saw) and a response it stores
//! goes up through the uplink.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};

use super::control::HeartbeatAnswer;
use super::nodes::{self, Heartbeat, Usage};
use super::{settle, snapshot};
use crate::collector::health::Check;
use crate::collector::Collector;
use crate::config::Settings;
use crate::storage::Store;
use crate::tenants::Access;

/// The longest the widget's read waits for the control node before answering from the edge.
pub const WIDGET_WAIT: Duration = Duration::from_millis(800);

/// Removes every record of an app from an edge's sled, once the app is gone from the
/// registry (`deletion::sled::remove_all`, given by startup: deletion sits above the fleet).
pub type ForgetApp =
    Arc<dyn Fn(&sled::Db, &str) -> Result<u64, crate::storage::StoreError> + Send + Sync>;

/// What an edge knows of its link to the control node (for `/metrics` and logs).
#[derive(Debug, Default)]
pub struct LinkState {
    /// The registry version held.
    pub registry_version: Mutex<Option<String>>,
    /// The last answer of the control node, µs since the epoch (0: none since start).
    pub last_contact: AtomicI64,
    /// Whether the last call reached the control node.
    pub reachable: AtomicBool,
    /// Registry versions applied since start.
    pub registry_changes: AtomicU64,
    /// Calls to the control node that failed since start.
    pub failures: AtomicU64,
    /// The uplink's items not sent yet, and the oldest one's wait in ms (at the last heartbeat).
    uplink_items: AtomicU64,
    uplink_lag_ms: AtomicU64,
}

impl LinkState {
    /// Records what the uplink holds (each heartbeat; `/metrics` reads it).
    pub fn set_uplink(&self, items: u64, lag_seconds: f64) {
        self.uplink_items.store(items, Ordering::Relaxed);
        let ms = (lag_seconds.max(0.0) * 1000.0) as u64;
        self.uplink_lag_ms.store(ms, Ordering::Relaxed);
    }

    /// What the uplink held at the last heartbeat: `(items, seconds the oldest waited)`.
    pub fn uplink(&self) -> (u64, f64) {
        let ms = self.uplink_lag_ms.load(Ordering::Relaxed);
        (
            self.uplink_items.load(Ordering::Relaxed),
            ms as f64 / 1000.0,
        )
    }
}

/// Everything the edge's loops need.
#[derive(Clone)]
pub struct Edge {
    http: reqwest::Client,
    base: String,
    token: String,
    node: String,
    every: Duration,
    store: Store,
    access: web::Data<Access>,
    collector: web::Data<Collector>,
    /// The operator's paths of the tracker and the collector (served beside the defaults).
    aliases: Arc<Vec<String>>,
    /// What removes an app's records once it is gone from the registry.
    forget_app: ForgetApp,
    /// Apps being settled for the control node now (`settle.rs`).
    settling: Arc<Mutex<std::collections::HashSet<String>>>,
    pub link: Arc<LinkState>,
}

#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("control node: {0}")]
    Http(#[from] reqwest::Error),
    #[error("control node answered {0}")]
    Status(reqwest::StatusCode),
    #[error("{0}")]
    Apply(#[from] snapshot::ApplyError),
    #[error("store: {0}")]
    Store(#[from] crate::storage::StoreError),
}

impl Edge {
    pub fn new(
        settings: &Settings,
        store: Store,
        access: web::Data<Access>,
        collector: web::Data<Collector>,
        forget_app: ForgetApp,
    ) -> Edge {
        let timeout = Duration::from_millis(settings.fleet.control_timeout_ms.max(100));
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .expect("an HTTP client builds");
        let link = Arc::new(LinkState::default());
        if let Ok(v) = store.db().with(snapshot::held_version) {
            *link
                .registry_version
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = v;
        }
        Edge {
            http,
            base: settings.fleet.control_url.trim_end_matches('/').to_owned(),
            token: settings.fleet.token.expose().to_owned(),
            node: settings.collector.node_id.clone(),
            every: Duration::from_millis(settings.fleet.sync_interval_ms.max(50)),
            store,
            access,
            collector,
            aliases: Arc::new(
                [
                    settings.collector.script_alias(),
                    settings.collector.collect_alias(),
                ]
                .into_iter()
                .flatten()
                .map(str::to_owned)
                .collect(),
            ),
            forget_app,
            settling: Arc::default(),
            link,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn contact(&self, ok: bool) {
        self.link.reachable.store(ok, Ordering::Relaxed);
        if ok {
            let now = self.collector.clock.now_micros();
            self.link.last_contact.store(now, Ordering::Relaxed);
        } else {
            self.link.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Pulls the registry; writes it and reloads the keys and the erased ids when it changed.
    async fn pull_registry(&self) -> Result<bool, SyncError> {
        let held = self
            .link
            .registry_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut req = self
            .http
            .get(self.url("/fleet/v1/registry"))
            .bearer_auth(&self.token);
        if let Some(v) = &held {
            req = req.header(header::IF_NONE_MATCH.as_str(), format!("\"{v}\""));
        }
        let res = req.send().await?;
        match res.status() {
            reqwest::StatusCode::NOT_MODIFIED => return Ok(false),
            s if s.is_success() => {}
            s => return Err(SyncError::Status(s)),
        }
        let version = res
            .headers()
            .get(header::ETAG.as_str())
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim_matches('"').to_owned())
            .unwrap_or_default();
        let body = res.bytes().await?;
        let access = self.access.clone();
        let now = self.collector.clock.now();
        let v = version.clone();
        let forget_app = self.forget_app.clone();
        let (changed, gone) = self
            .store
            .run(move |db| {
                let apps_before = crate::tenants::store::all_apps(db)?;
                let changed = snapshot::apply(db, &body, &v).map_err(|e| match e {
                    snapshot::ApplyError::Store(e) => e,
                    snapshot::ApplyError::Malformed(cause) => crate::storage::StoreError::Corrupt {
                        key: "the fleet registry".into(),
                        cause,
                    },
                })?;
                access.registry.reload_all(db)?;
                let before = access.suppressions.version();
                access.suppressions.reload(db, now)?;
                if access.suppressions.version() != before {
                    for (app, list) in access.suppressions.all() {
                        let gone = super::forget::suppressed(db, &app, &list, now.micros())?;
                        if gone != (0, 0, 0, 0) {
                            tracing::info!(app = %app, ?gone, "fleet: this edge's copies of erased persons forgotten (links, profiles, responses, refused events)");
                        }
                    }
                }
                let mut gone = Vec::new();
                for app in apps_before {
                    if crate::tenants::store::get_app(db, &app.id)?.is_none() {
                        let keys = forget_app(db, &app.id)?;
                        tracing::info!(app = %app.id, keys, "fleet: a deleted app's records removed from this edge");
                        gone.push(app.id);
                    }
                }
                Ok((changed, gone))
            })
            .await?;
        for app in gone {
            self.collector.quotas.forget(&app);
        }
        tracing::info!(version = %version, changed, "fleet: registry from the control node applied");
        *self
            .link
            .registry_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(version);
        self.link.registry_changes.fetch_add(1, Ordering::Relaxed);
        self.collector
            .health
            .recovered(Check::Registry, "registry", 0);
        Ok(true)
    }

    /// This edge's state and usage, as a heartbeat says them.
    async fn heartbeat_body(&self, previous: &mut (u64, i64)) -> Result<Heartbeat, SyncError> {
        let now = self.collector.clock.now();
        let months = nodes::months(now);
        let reports = self
            .store
            .run(move |db| {
                let mut out = Vec::new();
                for (app, month, events) in crate::collector::usage::all_of(db, &months)? {
                    out.push(Usage {
                        app_id: app,
                        month,
                        events,
                    });
                }
                let uplink = super::uplink::backlog(db, now.micros())?;
                Ok((out, settle::reported(db)?, uplink))
            })
            .await?;
        let (usage, settled, (uplink_items, uplink_lag_seconds)) = reports;
        let accepted: u64 = self
            .collector
            .metrics
            .shards
            .iter()
            .map(|s| s.accepted.get())
            .sum();
        let secs = (now.micros() - previous.1) as f64 / 1e6;
        let rate = if previous.1 > 0 && secs > 0.0 {
            accepted.saturating_sub(previous.0) as f64 / secs
        } else {
            0.0
        };
        *previous = (accepted, now.micros());
        let health = &self.collector.health;
        self.link.set_uplink(uplink_items, uplink_lag_seconds);
        Ok(Heartbeat {
            node_id: self.node.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            accepted_total: accepted,
            events_per_second: (rate * 10.0).round() / 10.0,
            backlog_bytes: health.backlog_bytes(),
            outbox_files: health.gauges.outbox_files.get().max(0) as u64,
            uplink_items,
            uplink_lag_seconds,
            registry_version: self
                .link
                .registry_version
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            usage,
            settled,
        })
    }

    /// Waits until every uplink item queued now has reached the control node (at most
    /// `settle::WAIT`).
    async fn uplink_drained(&self) -> Result<(), String> {
        let queued = |db: &sled::Db| -> Result<(u64, Option<u64>), crate::storage::StoreError> {
            let uplink = crate::storage::queue::UPLINK;
            let oldest = uplink.stats(db)?.oldest.map(|(s, _)| s);
            Ok((uplink.newest(db)?.unwrap_or(0), oldest))
        };
        let (mark, _) = self.store.run(queued).await.map_err(|e| e.to_string())?;
        let deadline = tokio::time::Instant::now() + settle::WAIT;
        loop {
            let (_, oldest) = self.store.run(queued).await.map_err(|e| e.to_string())?;
            if oldest.is_none_or(|seq| seq > mark) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err("the uplink has not reached the control node yet".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Settles each app the control node asked for and this edge has not settled yet, each in
    /// its own task (`settle.rs`); the heartbeat reports it once done.
    async fn settle_requests(&self) -> Result<(), SyncError> {
        for (app, seq) in self.store.run(settle::pending).await? {
            let mut settling = self.settling.lock().unwrap_or_else(|e| e.into_inner());
            if !settling.insert(app.clone()) {
                continue;
            }
            drop(settling);
            let edge = self.clone();
            tokio::spawn(async move {
                let settled = match edge.collector.settle(&app).await {
                    // Its rollups too: what the flushes queued must reach the control node.
                    Ok(()) => edge.uplink_drained().await,
                    Err(e) => Err(e.to_string()),
                };
                match settled {
                    Ok(()) => {
                        let a = app.clone();
                        match edge.store.run(move |db| settle::done(db, &a, seq)).await {
                            Ok(()) => {
                                tracing::info!(app = %app, seq, "fleet: app settled for the control node")
                            }
                            Err(e) => {
                                tracing::warn!(app = %app, error = %e, "fleet: settle not recorded")
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(app = %app, error = %e, "fleet: app not settled yet; retried at the next sync")
                    }
                }
                let mut settling = edge.settling.lock().unwrap_or_else(|e| e.into_inner());
                settling.remove(&app);
            });
        }
        Ok(())
    }

    /// Sends the heartbeat; sets the other nodes' usage on the quotas.
    async fn heartbeat(&self, previous: &mut (u64, i64)) -> Result<(), SyncError> {
        let beat = self.heartbeat_body(previous).await?;
        let res = self
            .http
            .post(self.url("/fleet/v1/heartbeat"))
            .bearer_auth(&self.token)
            .json(&beat)
            .send()
            .await?;
        if !res.status().is_success() {
            return Err(SyncError::Status(res.status()));
        }
        let answer: HeartbeatAnswer = res.json().await?;
        for u in answer.usage {
            self.collector
                .quotas
                .set_others(&u.app_id, &u.month, u.events);
        }
        Ok(())
    }

    /// Starts the loops: the registry, the heartbeat, the uplink; each every sync interval.
    pub fn spawn(self) -> Vec<tokio::task::JoinHandle<()>> {
        let registry = self.clone();
        let beat = self.clone();
        let up = self;
        vec![
            tokio::spawn(async move {
                loop {
                    let ok = registry.pull_registry().await;
                    registry.report("registry", ok.map(|_| ()));
                    if let Err(e) = registry.settle_requests().await {
                        tracing::warn!(error = %e, "fleet: settle requests not read");
                    }
                    tokio::time::sleep(registry.every).await;
                }
            }),
            tokio::spawn(async move {
                let mut previous = (0, 0);
                loop {
                    let ok = beat.heartbeat(&mut previous).await;
                    beat.report("heartbeat", ok);
                    tokio::time::sleep(beat.every).await;
                }
            }),
            tokio::spawn(async move {
                loop {
                    let sent = super::uplink::send_once(
                        &up.http, &up.base, &up.token, &up.node, &up.store,
                    )
                    .await;
                    let more = matches!(sent, Ok(n) if n > 0);
                    up.report("uplink", sent.map(|_| ()));
                    if !more {
                        tokio::time::sleep(up.every).await;
                    }
                }
            }),
        ]
    }

    /// Logs a sync's failure once per change of state (not at every interval).
    fn report<E: std::fmt::Display>(&self, what: &'static str, result: Result<(), E>) {
        let was = self.link.reachable.load(Ordering::Relaxed);
        match result {
            Ok(()) => {
                if !was {
                    tracing::info!(what, "fleet: the control node answers");
                }
                self.contact(true);
            }
            Err(e) => {
                if was || self.link.failures.load(Ordering::Relaxed) == 0 {
                    tracing::warn!(what, error = %e, "fleet: the control node is unreachable; serving from this edge's own data");
                }
                self.contact(false);
            }
        }
    }
}

/// The paths an edge serves: what browsers and SDKs call.
pub fn serves(path: &str, aliases: &[&str]) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
        || path.starts_with("/api/w/")
        || path.starts_with("/v1/")
        || path.starts_with("/sdk/")
        || aliases.contains(&path)
}

/// An edge's middleware: a path it does not serve is 404 (the control node serves it); the
/// widget's read goes to the control node first (it knows every node's profiles and answers).
pub async fn filter(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    // Registered as an `Option` (`None` on the all-in-one server, which skips this filter).
    let Some(edge) = req.app_data::<Option<web::Data<Edge>>>().cloned().flatten() else {
        return next.call(req).await.map(|r| r.map_into_boxed_body());
    };
    let aliases: Vec<&str> = edge.aliases.iter().map(String::as_str).collect();
    if !serves(req.path(), &aliases) {
        let err = crate::api::ApiError::not_found("route").with_message(format!(
            "{} is not served by an edge collector: call the control node",
            req.path()
        ));
        return Ok(req.error_response(err));
    }
    let mut req = req;
    if is_widget_call(&req) {
        // A response's body is read here (the widget's are small: the payload limit of the
        // server applies) and given back to the edge's own handler when it answers instead.
        let body = match req.method() == actix_web::http::Method::POST {
            true => Some(req.extract::<web::Bytes>().await?),
            false => None,
        };
        if let Some(res) = forward(&edge, &req, body.clone()).await {
            return Ok(req.into_response(res));
        }
        if let Some(body) = body {
            req.set_payload(actix_web::dev::Payload::from(body));
        }
    }
    next.call(req).await.map(|r| r.map_into_boxed_body())
}

/// The survey widget's calls, which the control node answers first: the list of surveys
/// (targeting needs every node's profiles and answers) and a response (checked against the
/// same targeting, stored where the API reads it).
fn is_widget_call(req: &ServiceRequest) -> bool {
    use actix_web::http::Method;
    let path = req.path();
    (req.method() == Method::GET && path == "/api/w/surveys")
        || (req.method() == Method::POST
            && path.starts_with("/api/w/surveys/")
            && path.ends_with("/responses"))
}

/// The widget's call as the control node answers it, or `None` (then the edge answers: the
/// control node is away, slow, or failing).
async fn forward(
    edge: &Edge,
    req: &ServiceRequest,
    body: Option<web::Bytes>,
) -> Option<HttpResponse> {
    if !edge.link.reachable.load(Ordering::Relaxed) {
        return None;
    }
    let mut url = edge.url(req.path());
    if !req.query_string().is_empty() {
        url = format!("{url}?{}", req.query_string());
    }
    let mut out = match body {
        Some(b) => edge.http.post(url).body(b),
        None => edge.http.get(url),
    }
    .timeout(WIDGET_WAIT);
    for name in [
        "content-type",
        "content-encoding",
        "x-app-key",
        "origin",
        "user-agent",
        "accept-language",
        "x-request-id",
    ] {
        if let Some(v) = req.headers().get(name).and_then(|v| v.to_str().ok()) {
            out = out.header(name, v);
        }
    }
    let client = req
        .connection_info()
        .realip_remote_addr()
        .unwrap_or_default()
        .to_owned();
    out = out.header("x-forwarded-for", client);
    let res = out.send().await.ok()?;
    if res.status().is_server_error() {
        return None;
    }
    let mut answer =
        HttpResponse::build(actix_web::http::StatusCode::from_u16(res.status().as_u16()).ok()?);
    for (name, value) in res.headers() {
        let n = name.as_str();
        if n == "content-type"
            || n == "cache-control"
            || n == "vary"
            || n.starts_with("access-control-")
        {
            if let Ok(v) = value.to_str() {
                answer.insert_header((n, v));
            }
        }
    }
    let body = res.bytes().await.ok()?;
    Some(answer.body(body))
}
