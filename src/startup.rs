//! Building and running the server: open the store, load the registry, bind the listener
//! (port 0 works and the real port is exposed, so tests can run many servers), wire the routes.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::http::KeepAlive;
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpResponse, HttpServer};
use utoipa::OpenApi;
use utoipa_actix_web::{scope, AppExt};

use crate::api::{self, ratelimit::RateLimits};
use crate::clock::Clock;
use crate::collector::Collector;
use crate::config::{
    CollectorSettings, Secret, ServerSettings, Settings, DEFAULT_COLLECT_PATH, DEFAULT_SCRIPT_PATH,
};
use crate::jobs::{JobKind, Jobs, Kinds};
use crate::state::AppState;
use crate::storage::{Store, StoreThreads};
use crate::tenants::auth::AdminTokens;
use crate::tenants::{Access, Registry};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data directory {path}: {cause}")]
    DataDir { path: String, cause: std::io::Error },
    #[error("store: {0}")]
    Store(#[from] crate::storage::StoreError),
    #[error("cannot listen on {addr}: {cause}")]
    Bind { addr: String, cause: std::io::Error },
    #[error("collector: {0}")]
    Collector(#[from] crate::collector::CollectorError),
    #[error("server: {0}")]
    Server(std::io::Error),
    #[error(
        "the admin token is {0} characters: at least {MIN_ADMIN_TOKEN_CHARS} are required \
         ({GOOD_ADMIN_TOKEN_CHARS} or more advised); set a longer TRIBUTARY_ADMIN_TOKEN, or unset \
         it to have one generated"
    )]
    AdminTokenTooShort(usize),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
}

/// A built, bound, not yet running server.
pub struct Application {
    port: u16,
    server: Server,
    collector: web::Data<Collector>,
    store: Store,
    threads: StoreThreads,
    sweeper: tokio::task::JoinHandle<()>,
    retention: tokio::task::JoinHandle<()>,
    jobs: tokio::task::JoinHandle<()>,
    key_uses: tokio::task::JoinHandle<()>,
    access: web::Data<Access>,
    /// The webhooks' engine (fan-out and deliveries, `webhooks/engine.rs`).
    webhooks: crate::webhooks::engine::Running,
    /// An edge's sync loops (`fleet/edge.rs`); none on the all-in-one server.
    fleet: Vec<tokio::task::JoinHandle<()>>,
}

const ADMIN_TOKEN_FILE: &str = "admin_token";
/// An admin token shorter than this refuses to start the server...
pub const MIN_ADMIN_TOKEN_CHARS: usize = 16;
/// ...and one shorter than this starts it with a warning (a generated token has 68).
pub const GOOD_ADMIN_TOKEN_CHARS: usize = 32;

/// The admin token (see `admin_token_source`), refused under `MIN_ADMIN_TOKEN_CHARS` characters
/// and warned about under `GOOD_ADMIN_TOKEN_CHARS`.
fn admin_token(configured: Option<&Secret>, data_dir: &Path) -> Result<Secret, StartError> {
    let token = admin_token_source(configured, data_dir)?;
    match token.expose().chars().count() {
        n if n < MIN_ADMIN_TOKEN_CHARS => Err(StartError::AdminTokenTooShort(n)),
        n if n < GOOD_ADMIN_TOKEN_CHARS => {
            tracing::warn!(
                chars = n,
                advised = GOOD_ADMIN_TOKEN_CHARS,
                "the admin token is short: anyone who guesses it owns every app; use a longer one"
            );
            Ok(token)
        }
        _ => Ok(token),
    }
}

/// The admin token: `TRIBUTARY_ADMIN_TOKEN`, else the one kept in the data dir, else a new one
/// that is written there (mode 0600) and printed once.
fn admin_token_source(configured: Option<&Secret>, data_dir: &Path) -> Result<Secret, StartError> {
    if let Some(t) = configured {
        return Ok(t.clone());
    }
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    let io = |cause| StartError::DataDir {
        path: path.display().to_string(),
        cause,
    };
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok(Secret::new(t.trim().to_owned())),
        _ => {
            let token = format!("adm_{}", crate::ids::secret());
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            use std::io::Write;
            let mut f = opts.open(&path).map_err(io)?;
            f.write_all(token.as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(io)?;
            eprintln!(
                "\n  admin token (shown once; kept in {}):\n\n    {token}\n\n  use it as: Authorization: Bearer <token>\n",
                path.display()
            );
            Ok(Secret::new(token))
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tributary",
        description = "Feedback, acquisition and analytics service. Errors use the envelope \
            {success: false, error: {code, message, details?}, meta: {requestId}}; successes \
            {success: true, data, pagination?, meta}."
    ),
    modifiers(&SecuritySchemes),
    tags((name = "contacts", description = "Acquisition CRM (X-API-Key)"),
         (name = "collector", description = "Analytics collection (X-App-Key)"),
         (name = "profiles", description = "Merged visitor profiles (X-API-Key)"),
         (name = "analytics", description = "Traffic rollups: events, visitors, top pages and events (X-API-Key)"),
         (name = "ideas", description = "Feedback boards, ideas, votes, comments (X-API-Key)"),
         (name = "boards", description = "Boards and their statuses, topics, tags (Authorization: Bearer <admin token>)"),
         (name = "surveys", description = "Surveys: public reads (X-API-Key) and the admin API (Authorization: Bearer <admin token>)"),
         (name = "privacy", description = "Erasure of a person: a durable job, and their ids refused at ingest (X-API-Key, privacy:erase)"),
         (name = "admin", description = "Apps and keys (Authorization: Bearer <admin token>)"),
         (name = "webhooks", description = "Webhook endpoints of an app, their secrets, test events and attempts log (Authorization: Bearer <admin token>)"),
         (name = "fleet", description = "The fleet: tokens for edge collectors and what they report (Authorization: Bearer <admin token>)"),
         (name = "service", description = "Health and API description"))
)]
struct ApiDoc;

struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityScheme,
        };
        let c = api.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))),
        );
        c.add_security_scheme(
            "app_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-App-Key"))),
        );
        c.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// Every route, on an app being built: the running server and the OpenAPI document use this
/// one list, so the document cannot miss a route.
fn services<T>(app: utoipa_actix_web::UtoipaApp<T>) -> utoipa_actix_web::UtoipaApp<T>
where
    T: actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Error = actix_web::Error,
        InitError = (),
    >,
{
    app.service(crate::collector::http::healthz)
        .service(crate::collector::http::readyz)
        .service(crate::collector::http::metrics)
        .configure(crate::sdk::configure)
        .service(scope::scope("/acq/v1").configure(crate::contacts::configure))
        .service(
            scope::scope("/api/v1")
                .configure(crate::profiles::configure)
                .configure(crate::analytics::configure)
                .configure(crate::boards::configure_public)
                .configure(crate::ideas::configure)
                .configure(crate::surveys::configure_public)
                .configure(crate::privacy::configure),
        )
        .service(
            scope::scope("/api/w")
                .wrap(from_fn(crate::collector::http::cors))
                .configure(crate::collector::http::configure)
                .configure(crate::surveys::configure_widget),
        )
        .service(
            scope::scope("/v1")
                .wrap(from_fn(crate::collector::http::cors))
                .configure(crate::collector::segment::configure),
        )
        .service(
            scope::scope("/admin/v1")
                .configure(crate::tenants::configure)
                .configure(crate::deletion::http::configure)
                .configure(crate::fleet::control::configure_admin)
                .configure(crate::webhooks::configure)
                .configure(crate::boards::configure_admin)
                .configure(crate::surveys::configure_admin),
        )
}

/// The OpenAPI document of every route, completed by `api::openapi::complete` (envelopes, the
/// error schema, the auth and overload answers).
pub fn openapi() -> serde_json::Value {
    let (_, doc) =
        services(App::new().into_utoipa_app().openapi(ApiDoc::openapi())).split_for_parts();
    let mut doc = serde_json::to_value(&doc).expect("the OpenAPI document serializes");
    describe_unannotated(&mut doc);
    crate::contacts::document_rules(&mut doc);
    api::openapi::complete(&mut doc);
    doc
}

/// What the route annotations cannot say: `/openapi.json` itself (served outside the
/// documented services).
fn describe_unannotated(doc: &mut serde_json::Value) {
    use serde_json::json;
    doc["paths"]["/openapi.json"] = json!({ "get": {
        "tags": ["service"],
        "summary": "This document (OpenAPI 3.1)",
        "operationId": "openapi",
        "responses": { "200": { "description": "The OpenAPI document, not enveloped",
            "content": { "application/json": { "schema": { "type": "object" } } } } }
    }});
}

/// The methods every path answers: the document's, and the operator's paths
/// (`collector.script_path`, `collect_path`) those of the paths they stand for.
fn allowed_methods(doc: &serde_json::Value, paths: &CollectorSettings) -> api::allow::Allowed {
    let mut allowed = api::allow::Allowed::from_openapi(doc);
    if let Some(p) = paths.script_alias() {
        allowed.alias(p, DEFAULT_SCRIPT_PATH);
    }
    if let Some(p) = paths.collect_alias() {
        allowed.alias(p, DEFAULT_COLLECT_PATH);
    }
    allowed
}

/// The operator's paths: the tracker and the collector under paths of their choosing, beside
/// the defaults and outside the documented services (`/openapi.json` names the defaults).
fn operator_paths(cfg: &mut web::ServiceConfig, paths: &CollectorSettings) {
    if let Some(p) = paths.script_alias() {
        cfg.service(crate::sdk::alias(p));
    }
    if let Some(p) = paths.collect_alias() {
        cfg.service(crate::collector::http::alias(p));
    }
}

/// Removes expired idempotency records now and starts the timer that sweeps them from then on.
fn idempotency_sweeps(
    store: &Store,
    settings: &Settings,
    clock: &Arc<dyn Clock>,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    let ttl = settings.api.idempotency_ttl_secs as i64;
    let now = clock.now();
    let swept = store.db().with(|db| {
        crate::storage::idempotency::index_once(db, ttl, now)?;
        crate::storage::idempotency::sweep(db, ttl, now)
    })?;
    if swept > 0 {
        tracing::info!(swept, "expired idempotency records removed");
    }
    let every = Duration::from_secs(settings.api.idempotency_sweep_secs.max(1));
    Ok(crate::storage::idempotency::spawn_sweeper(
        store.clone(),
        ttl,
        every,
        clock.clone(),
    ))
}

/// Starts the retention sweep (`retention/`): now, then every `retention.sweep_interval_secs`.
fn spawn_retention(
    settings: &Settings,
    store: &Store,
    lake: Arc<dyn object_store::ObjectStore>,
    clock: &Arc<dyn Clock>,
    collector: &Collector,
) -> tokio::task::JoinHandle<()> {
    crate::retention::spawn(
        crate::retention::Sweeper {
            store: store.clone(),
            lake,
            prefix: settings.lake.prefix.clone(),
            plans: settings.plans.clone(),
            clock: clock.clone(),
            counters: collector.metrics.retention.clone(),
        },
        Duration::from_secs(settings.retention.sweep_interval_secs),
    )
}

/// The job handle (registered for the handlers that submit and show jobs) and the runner of
/// every job kind, which resumes the unfinished jobs now (`jobs/`).
fn start_jobs(
    settings: &Settings,
    store: &Store,
    clock: &Arc<dyn Clock>,
    lake: Arc<dyn object_store::ObjectStore>,
    collector: &web::Data<Collector>,
    access: &web::Data<Access>,
    erasure: crate::privacy::job::Erasure,
) -> (web::Data<Jobs>, tokio::task::JoinHandle<()>) {
    let jobs = Jobs::new(store.clone(), clock.clone());
    let deletion = crate::deletion::AppDeletion {
        store: store.clone(),
        access: access.clone(),
        collector: collector.clone(),
        lake,
        prefix: settings.lake.prefix.clone(),
    };
    let kinds = Kinds::default()
        .with(JobKind::Erasure, Arc::new(erasure))
        .with(JobKind::AppDeletion, Arc::new(deletion));
    let runner = jobs.start(kinds, crate::backoff::Backoff::default());
    (web::Data::new(jobs), runner)
}

/// The erasure jobs' work (`privacy/`): the lake, a scratch directory for the file being
/// rewritten (`<data-dir>/erasure`), the collector to settle, the suppression list. First the
/// ids of erasures that failed or vanished in a crash are forgotten.
fn erasure_work(
    settings: &Settings,
    store: &Store,
    lake: Arc<dyn object_store::ObjectStore>,
    collector: &web::Data<Collector>,
    access: &Access,
    clock: &Arc<dyn Clock>,
) -> crate::privacy::job::Erasure {
    match store.db().with(crate::privacy::store::sweep_subjects) {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            subjects = n,
            "erasure: ids of finished or missing jobs forgotten"
        ),
        Err(e) => tracing::warn!(error = %e, "erasure: the subjects could not be swept"),
    }
    let rewriter = crate::privacy::lake::Rewriter {
        lake,
        scratch: settings.storage.data_dir.join("erasure"),
        part_bytes: 8 << 20,
    };
    crate::privacy::job::Erasure::new(
        store.clone(),
        collector.clone().into_inner(),
        rewriter,
        settings.lake.prefix.clone(),
        access.suppressions.clone(),
        clock.clone(),
        settings.privacy.suppress_days,
    )
}

/// Fills in what a store written by an earlier version lacks (each step a no-op once done):
/// the per-app index of API keys, the counts of waiting webhook deliveries, the index of the
/// unfinished jobs, the lengths of the queues.
fn complete_store(store: &Store) -> Result<(), StartError> {
    store.db().with(crate::tenants::store::index_api_keys)?;
    let counted = store
        .db()
        .with(crate::webhooks::store::count_pending_once)?;
    if counted > 0 {
        tracing::info!(
            deliveries = counted,
            "webhooks: waiting deliveries counted once"
        );
    }
    let jobs = store.db().with(crate::jobs::store::index_once)?;
    if jobs > 0 {
        tracing::info!(jobs, "unfinished jobs indexed once");
    }
    for queue in [
        crate::storage::queue::UPLINK,
        crate::storage::changes::CHANGES,
    ] {
        let items = store.db().with(|db| {
            queue
                .count_once(db)
                .map_err(crate::storage::StoreError::from)
        })?;
        if items > 0 {
            tracing::info!(queue = queue.tree(), items, "queue length counted once");
        }
    }
    Ok(())
}

/// The webhooks' handle (for the handlers and the dashboard) and its running engine, its
/// counters in `/metrics`. Every node runs it: an edge has no endpoints, its changes are dropped.
fn start_webhooks(
    state: &web::Data<AppState>,
    collector: &web::Data<Collector>,
) -> (
    web::Data<crate::webhooks::Webhooks>,
    crate::webhooks::engine::Running,
) {
    let hooks = crate::webhooks::Webhooks::new(
        &state.settings.webhooks,
        state.store.clone(),
        state.clock.clone(),
    );
    let section = crate::webhooks::metrics::WebhookSection(hooks.counters());
    collector.metrics.add_section(Box::new(section));
    let running = hooks.spawn();
    (web::Data::new(hooks), running)
}

/// How often keys' last use goes from the registry's memory to sled.
const KEY_USE_EVERY: Duration = Duration::from_secs(30);

/// Writes the keys used since the previous call to sled; returns the time it covered up to.
async fn record_key_uses(store: &Store, access: &Access, since: i64) -> i64 {
    let now = access.registry.clock().now_micros();
    let uses = access.registry.used_since(since);
    if uses.is_empty() {
        return now;
    }
    match store
        .run(move |db| crate::tenants::store::record_last_used(db, &uses))
        .await
    {
        Ok(()) => now,
        Err(e) => {
            tracing::warn!(error = %e, "keys' last use not recorded, retrying later");
            since
        }
    }
}

/// Starts the timer that records keys' last use every `KEY_USE_EVERY`.
fn spawn_key_uses(store: Store, access: web::Data<Access>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut since = 0;
        let mut every = tokio::time::interval(KEY_USE_EVERY);
        loop {
            every.tick().await;
            since = record_key_uses(&store, &access, since).await;
        }
    })
}

/// Lets the calling HTTP worker give its free memory back when the collector is idle (see
/// `memory`). Called from the app factory, which runs once on each worker's own thread.
fn release_memory_when_idle() {
    if let Some(worker) = actix_rt::Arbiter::try_current() {
        worker.spawn(async {
            let mut every = actix_web::rt::time::interval(crate::memory::poll());
            loop {
                every.tick().await;
                crate::memory::release_if_idle(crate::memory::Thread::Http);
            }
        });
    }
}

/// The HTTP server's workers, timeouts and connection limits (`[server]` of the settings).
struct ConnectionLimits {
    workers: usize,
    shutdown_timeout_secs: u64,
    request_timeout: Duration,
    disconnect_timeout: Duration,
    keep_alive: KeepAlive,
    max_connections: usize,
}

impl ConnectionLimits {
    fn of(s: &ServerSettings) -> ConnectionLimits {
        ConnectionLimits {
            workers: match s.workers {
                0 => std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(2),
                n => n,
            },
            shutdown_timeout_secs: s.shutdown_timeout_secs,
            request_timeout: Duration::from_millis(s.client_request_timeout_ms),
            disconnect_timeout: Duration::from_millis(s.client_disconnect_timeout_ms),
            keep_alive: match s.keep_alive_secs {
                0 => KeepAlive::Disabled,
                n => KeepAlive::Timeout(Duration::from_secs(n)),
            },
            max_connections: s.max_connections.max(1),
        }
    }
}

/// The dashboard's state, once the sessions that expired while the server was down are removed.
fn start_dashboard(
    store: &Store,
    now: crate::ids::Timestamp,
) -> Result<web::Data<crate::dashboard::Dashboard>, StartError> {
    let swept = store
        .db()
        .with(|db| crate::accounts::store::sweep_sessions(db, now))?;
    if swept > 0 {
        tracing::info!(swept, "expired dashboard sessions removed");
    }
    Ok(web::Data::new(crate::dashboard::Dashboard::default()))
}

/// The collector's writers check each event again at commit against who may still write:
/// an app being deleted (no longer in the registry's plans) or an erased person.
struct AccessGate(Arc<Access>);

impl crate::collector::Gatekeeper for AccessGate {
    fn gate(&self, app: &str) -> crate::collector::AppGate {
        use crate::collector::AppGate;
        if self.0.registry.plan_of(app).is_none() {
            return AppGate::Closed;
        }
        self.0
            .suppressions
            .of(app)
            .map_or(AppGate::Open, AppGate::Suppressing)
    }
}

/// Who may do what: the keys, their rate limits, the admin token, and the erased persons' ids
/// (loaded from sled).
fn access(
    store: &Store,
    settings: &Settings,
    clock: &Arc<dyn Clock>,
    registry: Registry,
    admin_token: Secret,
) -> Result<web::Data<Access>, StartError> {
    let suppressions = store
        .db()
        .with(|db| crate::tenants::Suppressions::load(db, clock.now()))?;
    Ok(web::Data::new(Access {
        registry,
        rate_limits: RateLimits::default(),
        plans: settings.plans.clone(),
        admin_token: AdminTokens::new(admin_token),
        suppressions: Arc::new(suppressions),
    }))
}

/// Creates the data directory if needed and opens sled in it (`<data-dir>/db`).
fn open_store(settings: &Settings) -> Result<(Store, StoreThreads), StartError> {
    let data_dir = &settings.storage.data_dir;
    std::fs::create_dir_all(data_dir).map_err(|cause| StartError::DataDir {
        path: data_dir.display().to_string(),
        cause,
    })?;
    Ok(Store::open(
        &data_dir.join("db"),
        settings.storage.store_threads,
        settings.storage.store_queue,
        settings.storage.cache_mb << 20,
    )?)
}

/// The collector, its writers checking each event at commit against `access` (`AccessGate`).
fn start_collector(
    settings: &Settings,
    store: &Store,
    lake: &Arc<dyn object_store::ObjectStore>,
    clock: &Arc<dyn Clock>,
    access: &web::Data<Access>,
) -> Result<web::Data<Collector>, StartError> {
    let gate = Arc::new(AccessGate(access.clone().into_inner()));
    let collector = Collector::start(settings, store.db(), lake.clone(), clock.clone(), gate)?;
    Ok(web::Data::new(collector))
}

/// The listener on `server.bind` and the address it got (port 0: a free one).
fn bind(server: &ServerSettings) -> Result<(TcpListener, std::net::SocketAddr), StartError> {
    let listener = TcpListener::bind(&server.bind).map_err(|cause| StartError::Bind {
        addr: server.bind.clone(),
        cause,
    })?;
    let addr = listener.local_addr().map_err(StartError::Server)?;
    Ok((listener, addr))
}

impl Application {
    /// Opens the store and binds the listener; the server does not run until `run_until_stopped`.
    /// `clock` is every "now" of the server (the binary passes `SystemClock`).
    pub fn build(settings: Settings, clock: Arc<dyn Clock>) -> Result<Application, StartError> {
        settings.collector.check_paths()?;
        let data_dir = settings.storage.data_dir.clone();
        crate::memory::set_idle(Duration::from_secs(
            settings.collector.release_memory_after_idle_secs,
        ));
        let (store, threads) = open_store(&settings)?;
        let registry = store.db().with(|db| Registry::load(db, clock.clone()))?;
        complete_store(&store)?;
        let sweeper = idempotency_sweeps(&store, &settings, &clock)?;
        let admin_token = admin_token(settings.admin_token.as_ref(), &data_dir)?;
        let lake = crate::collector::lake::open(&settings.lake, &data_dir.join("lake"))
            .map_err(crate::collector::CollectorError::from)?;
        let access = access(&store, &settings, &clock, registry, admin_token)?;
        let collector = start_collector(&settings, &store, &lake, &clock, &access)?;
        let retention = spawn_retention(&settings, &store, lake.clone(), &clock, &collector);
        let erasure = erasure_work(&settings, &store, lake.clone(), &collector, &access, &clock);
        let (jobs, job_runner) = start_jobs(
            &settings, &store, &clock, lake, &collector, &access, erasure,
        );
        let (listener, addr) = bind(&settings.server)?;
        let limits = ConnectionLimits::of(&settings.server);
        tracing::info!(addr = %addr, data_dir = %data_dir.display(), workers = limits.workers, "tributary listening");
        let state = web::Data::new(AppState {
            settings,
            store: store.clone(),
            clock: clock.clone(),
        });
        let key_uses = spawn_key_uses(store.clone(), access.clone());
        let forget = Arc::new(crate::deletion::sled::remove_all);
        let parts = crate::fleet::start(&state.settings, &store, &access, &collector, forget)?;
        let (fleet_tokens, registry_cache, edge) = (parts.tokens, parts.cache, parts.edge);
        let (webhooks, webhook_engine) = start_webhooks(&state, &collector);
        let dashboard = start_dashboard(&store, clock.now())?;
        let doc = Arc::new(openapi());
        let allowed = web::Data::new(allowed_methods(&doc, &state.settings.collector));
        let tracker = web::Data::new(crate::sdk::Tracker::new(&state.settings.collector));
        let (running, kept_access) = (collector.clone(), access.clone());
        let server = HttpServer::new(move || {
            release_memory_when_idle();
            let doc = doc.clone();
            let app = App::new()
                .into_utoipa_app()
                .app_data(state.clone())
                .app_data(access.clone())
                .app_data(collector.clone())
                .app_data(jobs.clone())
                .app_data(webhooks.clone())
                .app_data(allowed.clone())
                .app_data(dashboard.clone())
                .app_data(tracker.clone())
                .app_data(fleet_tokens.clone())
                .app_data(registry_cache.clone())
                .app_data(web::QueryConfig::default().error_handler(api::query_error))
                .app_data(web::PathConfig::default().error_handler(api::path_error))
                .app_data(web::JsonConfig::default().error_handler(api::json_error))
                .app_data(web::PayloadConfig::new(16 * 1024 * 1024));
            let app = app.app_data(edge.clone());
            let (app, _) = services(app).split_for_parts();
            // The dashboard's HTML pages are not part of the API: outside `services`, so the
            // OpenAPI document (and schemathesis) never lists them.
            let paths = &state.settings.collector;
            app.configure(|cfg| operator_paths(cfg, paths))
                .configure(crate::dashboard::configure)
                .configure(crate::fleet::control::configure_internal)
                .wrap(actix_web::middleware::Condition::new(
                    edge.is_some(),
                    from_fn(crate::fleet::edge::filter),
                ))
                .wrap(from_fn(api::deadline::body_deadline))
                .wrap(from_fn(api::request_context))
                .route(
                    "/openapi.json",
                    web::get().to(move || {
                        let doc = doc.clone();
                        async move { HttpResponse::Ok().json(&*doc) }
                    }),
                )
                .default_service(web::to(api::not_found))
        })
        .workers(limits.workers)
        .shutdown_timeout(limits.shutdown_timeout_secs)
        .client_request_timeout(limits.request_timeout)
        .client_disconnect_timeout(limits.disconnect_timeout)
        .keep_alive(limits.keep_alive)
        .max_connections(limits.max_connections)
        .listen(listener)
        .map_err(StartError::Server)?
        .run();
        Ok(Application {
            port: addr.port(),
            server,
            collector: running,
            store,
            threads,
            sweeper,
            retention,
            jobs: job_runner,
            key_uses,
            webhooks: webhook_engine,
            access: kept_access,
            fleet: parts.tasks,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A handle to stop the server (`stop(true)` is graceful).
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Serves until SIGTERM / Ctrl-C (actix stops accepting and finishes in-flight requests
    /// within `shutdown_timeout_secs`) or a stop through `handle`; then drains the collector
    /// (every accepted event goes to the lake) and flushes sled.
    pub async fn run_until_stopped(self) -> Result<(), StartError> {
        let Application {
            server,
            collector,
            store,
            threads,
            sweeper,
            retention,
            jobs,
            key_uses,
            access,
            fleet,
            webhooks,
            ..
        } = self;
        let result = server.await.map_err(StartError::Server);
        for task in fleet {
            task.abort();
        }
        // A job stopped mid-step resumes from its saved cursor at the next start.
        // What changed and is not fanned out yet goes to its deliveries (or is dropped).
        webhooks.stop().await;
        for task in [sweeper, retention, jobs] {
            task.abort();
            let _ = task.await;
        }
        key_uses.abort();
        let _ = key_uses.await;
        record_key_uses(&store, &access, 0).await;
        tracing::info!("http server stopped; draining the collector");
        let drained = collector.clone();
        let _ = tokio::task::spawn_blocking(move || drained.shutdown()).await;
        drop(collector);
        tracing::info!("flushing the store");
        if let Err(e) = store.flush() {
            // Not fatal: every API write was flushed before its answer, and the collector's
            // events are in the lake or its WAL.
            tracing::error!(
                error = %e,
                "the store's final flush failed (disk full?); acknowledged writes were flushed \
                 when answered and collected events are safe in the WAL"
            );
        }
        drop(store);
        threads.join();
        tracing::info!("shutdown complete");
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operators_path_can_never_shadow_a_route_of_the_service() {
        // Every first segment the service routes is one config.rs refuses for an operator's
        // path (the dashboard is wired outside the document).
        let doc = openapi();
        let firsts = doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .map(|p| p.split('/').nth(1).unwrap().to_owned())
            .chain(["dashboard".to_owned()]);
        for first in firsts {
            assert!(
                crate::config::RESERVED_PREFIXES.contains(&first.as_str()),
                "/{first} is routed but not in config::RESERVED_PREFIXES"
            );
        }
    }
}
