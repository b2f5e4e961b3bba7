//! Layered configuration: `config/default.toml` (built in), an optional file, then environment
//! variables `TRIBUTARY__SECTION__KEY`, then command-line flags (applied by the caller).

use std::path::{Path, PathBuf};

use serde::Deserialize;

const DEFAULTS: &str = include_str!("../config/default.toml");

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub server: ServerSettings,
    pub storage: StorageSettings,
    pub api: ApiSettings,
    pub collector: CollectorSettings,
    pub lake: LakeSettings,
    pub retention: RetentionSettings,
    pub privacy: PrivacySettings,
    pub fleet: FleetSettings,
    pub webhooks: WebhookSettings,
    pub plans: Plans,
    /// The admin API's bearer token: `TRIBUTARY_ADMIN_TOKEN`; when unset, one is generated at
    /// first start and kept in the data dir.
    #[serde(skip)]
    pub admin_token: Option<Secret>,
}

/// A secret (token, key) that never reaches a log: `Debug` prints `[redacted]`, and there is no
/// `Display`. Every secret of the configuration has this type, so `{:?}` of `Settings` is safe.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Secret {
        Secret(s)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// For client builders that take `impl Into<String>` (the S3 credentials): exposes the secret.
impl From<&Secret> for String {
    fn from(s: &Secret) -> String {
        s.0.clone()
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret(s.to_owned())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

crate::fields::names! {
    /// The plans an app can be on.
    pub Plan { Free = "free", Pro = "pro", Enterprise = "enterprise" }
}

/// The limits of every plan: `plans.free`, `plans.pro`, `plans.enterprise`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plans {
    pub free: PlanLimits,
    pub pro: PlanLimits,
    pub enterprise: PlanLimits,
}

impl Plans {
    pub fn get(&self, plan: Plan) -> &PlanLimits {
        match plan {
            Plan::Free => &self.free,
            Plan::Pro => &self.pro,
            Plan::Enterprise => &self.enterprise,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ServerSettings {
    pub bind: String,
    pub workers: usize,
    pub max_body_bytes: usize,
    pub shutdown_timeout_secs: u64,
    pub client_request_timeout_ms: u64,
    pub body_timeout_ms: u64,
    pub client_disconnect_timeout_ms: u64,
    pub keep_alive_secs: u64,
    pub max_connections: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StorageSettings {
    pub data_dir: PathBuf,
    pub store_threads: usize,
    pub store_queue: usize,
    pub cache_mb: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ApiSettings {
    pub idempotency_ttl_secs: u64,
    pub idempotency_sweep_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CollectorSettings {
    pub shards: usize,
    pub queue_batches: usize,
    pub max_event_bytes: usize,
    pub max_batch_bytes: usize,
    pub max_batch_events: usize,
    pub max_file_rows: usize,
    pub max_file_bytes: usize,
    pub max_file_age_ms: u64,
    /// An app-hour's parts are merged into a lake file once they reach this (`merge.rs`).
    pub lake_file_mb: u64,
    /// The longest a part waits to be merged; 0 = until its hour is over.
    pub lake_file_max_wait_ms: u64,
    pub trust_forwarded_for: bool,
    ip_policy: IpPolicy,
    /// Deprecated alias of `ip_policy` (see [`CollectorSettings::ip_policy`]).
    pub anonymize_ip: Option<bool>,
    /// Bots counted in the traffic rollups (the lake keeps them either way).
    pub count_bots: bool,
    /// A MaxMind-format database (`.mmdb`) for the lake's country, region and city; "" = none.
    pub geoip_database: String,
    pub node_id: String,
    pub allowed_origins: Vec<String>,
    /// The tracker served at this path too, beside [`DEFAULT_SCRIPT_PATH`]; "" = none.
    pub script_path: String,
    /// The collector answering at this path too, beside [`DEFAULT_COLLECT_PATH`]; "" = none.
    pub collect_path: String,
    pub shutdown_upload_timeout_ms: u64,
    pub max_backlog_mb: u64,
    pub answer_timeout_ms: u64,
    pub quarantine_per_app: usize,
    pub dedupe_memory_mb: usize,
    pub max_memory_mb: usize,
    pub release_memory_after_idle_secs: u64,
}

/// What the lake keeps of a client address (`collector.ip_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpPolicy {
    /// The full address.
    Keep,
    /// IPv4's last octet and IPv6's last 80 bits zeroed.
    Truncate,
    /// No address.
    Drop,
}

/// Where the tracker is served and where it sends its events, whatever the configuration.
pub const DEFAULT_SCRIPT_PATH: &str = "/sdk/v1/analytics.js";
pub const DEFAULT_COLLECT_PATH: &str = "/api/w/analytics/collect";

/// The first segments of the service's own routes (`startup.rs` checks this list against the
/// routes it wires): an operator's path may not start with one of them.
pub const RESERVED_PREFIXES: &[&str] = &[
    "acq",
    "admin",
    "api",
    "dashboard",
    "fleet",
    "healthz",
    "metrics",
    "openapi.json",
    "readyz",
    "sdk",
    "v1",
];

/// An operator's path's longest length.
const MAX_PATH_CHARS: usize = 200;

/// Why `path` cannot be an operator's path, if it cannot: one `/` before each non-empty segment
/// of plain characters (letters, digits, `-._~`), no `.` or `..` segment, no trailing slash, the
/// first segment not one of the service's own ([`RESERVED_PREFIXES`]).
fn path_problem(path: &str) -> Option<String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Some("must start with /".into());
    };
    if path.len() > MAX_PATH_CHARS {
        return Some(format!("must be at most {MAX_PATH_CHARS} characters"));
    }
    if let Some(c) = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~/".contains(*c)))
    {
        return Some(format!(
            "{c:?} is not allowed: letters, digits, - . _ ~ and / only"
        ));
    }
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Some("no empty segment (// or a trailing /)".into());
    }
    if segments.iter().any(|s| *s == "." || *s == "..") {
        return Some("no . or .. segment".into());
    }
    let first = segments[0].to_ascii_lowercase();
    if RESERVED_PREFIXES.contains(&first.as_str()) {
        return Some(format!(
            "/{first} is the service's own; choose a path outside {}",
            RESERVED_PREFIXES
                .iter()
                .map(|p| format!("/{p}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    None
}

impl CollectorSettings {
    /// The operator's path for the tracker (`script_path`), when set to another than the default.
    pub fn script_alias(&self) -> Option<&str> {
        alias(&self.script_path, DEFAULT_SCRIPT_PATH)
    }

    /// The operator's path for the collector (`collect_path`), when set to another than the
    /// default.
    pub fn collect_alias(&self) -> Option<&str> {
        alias(&self.collect_path, DEFAULT_COLLECT_PATH)
    }

    /// The path the dashboard's snippet loads the tracker from.
    pub fn script_path(&self) -> &str {
        self.script_alias().unwrap_or(DEFAULT_SCRIPT_PATH)
    }

    /// The path the tracker served by this server sends its events to.
    pub fn collect_path(&self) -> &str {
        self.collect_alias().unwrap_or(DEFAULT_COLLECT_PATH)
    }

    /// Checks `script_path` and `collect_path`: each a plain path outside the service's own
    /// routes, and not the same.
    pub fn check_paths(&self) -> Result<(), ConfigError> {
        for (key, path) in [
            ("script_path", self.script_alias()),
            ("collect_path", self.collect_alias()),
        ] {
            if let Some(why) = path.and_then(path_problem) {
                return Err(ConfigError::Path {
                    key,
                    path: path.unwrap_or_default().to_owned(),
                    why,
                });
            }
        }
        match (self.script_alias(), self.collect_alias()) {
            (Some(s), Some(c)) if s == c => Err(ConfigError::SamePaths(s.to_owned())),
            _ => Ok(()),
        }
    }

    /// `ip_policy`, unless the deprecated `anonymize_ip` is set (true: truncate, false: keep).
    pub fn ip_policy(&self) -> IpPolicy {
        match self.anonymize_ip {
            Some(true) => IpPolicy::Truncate,
            Some(false) => IpPolicy::Keep,
            None => self.ip_policy,
        }
    }

    pub fn set_ip_policy(&mut self, policy: IpPolicy) {
        self.ip_policy = policy;
        self.anonymize_ip = None;
    }
}

/// `path`, unless empty or the default.
fn alias<'a>(path: &'a str, default: &str) -> Option<&'a str> {
    Some(path).filter(|p| !p.is_empty() && *p != default)
}

/// Where the lake lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LakeKind {
    /// A local directory (`lake.path`, or `<data-dir>/lake`).
    Local,
    /// An S3 bucket (or any S3 API: MinIO, moto, R2).
    S3,
}

impl std::fmt::Display for LakeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LakeKind::Local => "local",
            LakeKind::S3 => "s3",
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct LakeSettings {
    pub kind: LakeKind,
    pub path: String,
    pub s3_bucket: String,
    pub s3_endpoint: String,
    pub s3_region: String,
    pub s3_allow_http: bool,
    pub s3_access_key_id: Secret,
    pub s3_secret_access_key: Secret,
    pub prefix: String,
}

/// The retention sweep (`retention/`): how often it runs.
#[derive(Debug, Clone, Deserialize)]
pub struct RetentionSettings {
    pub sweep_interval_secs: u64,
}

/// Erasure (`privacy/`): how long an erased person's ids stay refused at ingest.
#[derive(Debug, Clone, Deserialize)]
pub struct PrivacySettings {
    /// Days an erased userId or anonymousId is refused by the collector; 0 = for ever.
    pub suppress_days: u32,
}

/// What this process is in a fleet (`fleet/`): the all-in-one server (also the control node of
/// any edges), or an edge collector that syncs with a control node.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    All,
    Edge,
}

/// The fleet (`[fleet]`): an edge's control node and how often it syncs with it.
#[derive(Debug, Clone, Deserialize)]
pub struct FleetSettings {
    pub role: Role,
    /// The control node's base URL (an edge only), e.g. `http://10.0.0.1:8080`.
    pub control_url: String,
    /// The fleet token created on the control node (an edge only).
    pub token: Secret,
    /// How often an edge pulls the registry and sends its heartbeat and outbox.
    pub sync_interval_ms: u64,
    /// How long an edge waits for one answer of the control node.
    pub control_timeout_ms: u64,
}

/// Webhooks (`[webhooks]`, `webhooks/`): where deliveries may go, how long they may take, how
/// many at once, and how long a failing endpoint is retried before it is disabled.
#[derive(Debug, Clone, Deserialize)]
pub struct WebhookSettings {
    /// Deliveries to loopback, private, link-local, CGNAT, ULA, multicast or unspecified
    /// addresses (tests set true).
    pub allow_private: bool,
    /// How long one delivery may take, answer included.
    pub timeout_ms: u64,
    /// How much of an answer is read (the log keeps its first 1 KiB).
    pub max_answer_bytes: usize,
    /// Lanes per endpoint: events of one subject share a lane and arrive in order.
    pub lanes: u8,
    /// Deliveries in flight over every endpoint.
    pub max_in_flight: usize,
    /// Seconds before each retry (+-10 % jitter); after the last one the delivery is given up
    /// and the endpoint disabled.
    pub retry_schedule_secs: Vec<u64>,
    /// Attempts kept in each endpoint's log.
    pub log_per_endpoint: usize,
    pub max_endpoints_per_app: usize,
}

impl FleetSettings {
    pub fn is_edge(&self) -> bool {
        self.role == Role::Edge
    }
}

/// How long a plan keeps each kind of data, in days (`plans.<plan>.retention`); 0 or absent:
/// for ever.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Retention {
    /// The lake's `dt=` day partitions (whole days).
    pub lake_days: u32,
    /// The traffic rollups' hourly buckets.
    pub hourly_rollup_days: u32,
    /// The traffic rollups' daily buckets.
    pub daily_rollup_days: u32,
    /// Survey responses, by their last change.
    pub responses_days: u32,
    /// The records of the lake files put (the dashboard's recent files).
    pub lake_file_records_days: u32,
}

/// One plan's rate and quotas. A negative quota means unlimited.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct PlanLimits {
    pub requests_per_minute: u32,
    pub ideas: i64,
    pub boards: i64,
    pub contacts: i64,
    pub active_surveys: i64,
    pub responses_per_month: i64,
    pub events_per_month: i64,
    /// Comments on one idea (internal ones included; a merge may carry more in).
    pub comments_per_idea: i64,
    /// How deep replies nest: 1 = top-level comments only, 2 = replies to them, ...
    pub comment_depth: i64,
    /// Votes on one idea (one per voter, so this bounds the voters an idea counts).
    pub votes_per_idea: i64,
    /// How long the app's data is kept.
    #[serde(default)]
    pub retention: Retention,
}

crate::fields::names! {
    /// The quotas a plan limits, named as in configuration and in `PLAN_LIMIT_REACHED` details.
    pub Quota {
        Contacts = "contacts",
        Ideas = "ideas",
        Boards = "boards",
        ActiveSurveys = "active_surveys",
        ResponsesPerMonth = "responses_per_month",
        EventsPerMonth = "events_per_month",
        CommentsPerIdea = "comments_per_idea",
        CommentDepth = "comment_depth",
        VotesPerIdea = "votes_per_idea",
    }
}

impl PlanLimits {
    /// The limit for `quota`, `None` when unlimited.
    pub fn limit(&self, quota: Quota) -> Option<u64> {
        let v = match quota {
            Quota::Contacts => self.contacts,
            Quota::Ideas => self.ideas,
            Quota::Boards => self.boards,
            Quota::ActiveSurveys => self.active_surveys,
            Quota::ResponsesPerMonth => self.responses_per_month,
            Quota::EventsPerMonth => self.events_per_month,
            Quota::CommentsPerIdea => self.comments_per_idea,
            Quota::CommentDepth => self.comment_depth,
            Quota::VotesPerIdea => self.votes_per_idea,
        };
        u64::try_from(v).ok()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(#[from] config::ConfigError),
    #[error("configuration: plans.{0}.requests_per_minute must be at least 1")]
    ZeroRate(&'static str),
    #[error("configuration: collector.{key} = {path:?}: {why}")]
    Path {
        key: &'static str,
        path: String,
        why: String,
    },
    #[error(
        "configuration: collector.script_path and collector.collect_path are both {0:?}: they \
         must differ"
    )]
    SamePaths(String),
    #[error(
        "configuration: fleet.role = \"edge\" needs fleet.control_url and fleet.token (a fleet \
         token created on the control node: `tributary fleet token create`)"
    )]
    EdgeWithoutControl,
}

impl Settings {
    /// Loads the layers; `file` is the optional `--config FILE`.
    pub fn load(file: Option<&Path>) -> Result<Settings, ConfigError> {
        let mut builder = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml));
        if let Some(file) = file {
            builder = builder.add_source(config::File::from(file).required(true));
        }
        let mut settings: Settings = builder
            .add_source(
                config::Environment::with_prefix("TRIBUTARY")
                    .prefix_separator("__")
                    .separator("__")
                    .try_parsing(true)
                    .list_separator(",")
                    .with_list_parse_key("collector.allowed_origins")
                    .with_list_parse_key("webhooks.retry_schedule_secs"),
            )
            .build()?
            .try_deserialize()?;
        settings.admin_token = std::env::var("TRIBUTARY_ADMIN_TOKEN")
            .ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .map(Secret::new);
        settings.check()?;
        Ok(settings)
    }

    /// Checks what the types cannot (also after the command line's flags are applied).
    pub fn check(&self) -> Result<(), ConfigError> {
        for &plan in Plan::ALL {
            if self.plans.get(plan).requests_per_minute == 0 {
                return Err(ConfigError::ZeroRate(plan.name()));
            }
        }
        if self.fleet.is_edge()
            && (self.fleet.control_url.is_empty() || self.fleet.token.is_empty())
        {
            return Err(ConfigError::EdgeWithoutControl);
        }
        self.collector.check_paths()
    }

    /// The limits of `plan`.
    pub fn plan(&self, plan: Plan) -> PlanLimits {
        *self.plans.get(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_debug_prints_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secrets.toml");
        std::fs::write(
            &file,
            "[lake]\ns3_access_key_id = \"AKIAEXAMPLEKEYID0001\"\n\
             s3_secret_access_key = \"wJalrXUtnFEMI-secret-access-key\"\n",
        )
        .unwrap();
        let mut settings = Settings::load(Some(&file)).unwrap();
        settings.admin_token = Some(Secret::from("adm_the_admin_token_value"));
        assert_eq!(
            settings.lake.s3_secret_access_key.expose(),
            "wJalrXUtnFEMI-secret-access-key"
        );
        let printed = format!("{settings:?} {settings:#?}");
        for secret in [
            "AKIAEXAMPLEKEYID0001",
            "wJalrXUtnFEMI",
            "adm_the_admin_token_value",
        ] {
            assert!(!printed.contains(secret), "{secret} printed in {printed}");
        }
        assert!(printed.contains("s3_secret_access_key: Secret([redacted])"));
    }

    fn collector(script: &str, collect: &str) -> CollectorSettings {
        let mut c = Settings::load(None).unwrap().collector;
        (c.script_path, c.collect_path) = (script.into(), collect.into());
        c
    }

    #[test]
    fn the_default_paths_serve_the_tracker_and_collect_until_an_operator_sets_others() {
        let c = collector("", "");
        assert_eq!((c.script_alias(), c.collect_alias()), (None, None));
        assert_eq!(
            (c.script_path(), c.collect_path()),
            (DEFAULT_SCRIPT_PATH, DEFAULT_COLLECT_PATH)
        );
        // The defaults named as such are no alias, and no error.
        let c = collector(DEFAULT_SCRIPT_PATH, DEFAULT_COLLECT_PATH);
        assert!(c.check_paths().is_ok());
        assert_eq!((c.script_alias(), c.collect_alias()), (None, None));
        let c = collector("/lib/site.js", "/t/e");
        assert!(c.check_paths().is_ok());
        assert_eq!(
            (c.script_path(), c.collect_path()),
            ("/lib/site.js", "/t/e")
        );
        assert_eq!(c.script_alias(), Some("/lib/site.js"));
        assert!(collector("/A-b_c.d~/x.js", "").check_paths().is_ok());
    }

    #[test]
    fn an_operators_path_is_refused_at_load_with_the_key_and_the_reason() {
        let refused = |script: &str, collect: &str| {
            collector(script, collect)
                .check_paths()
                .expect_err(&format!("{script:?} {collect:?} refused"))
                .to_string()
        };
        let cases = [
            ("lib/t.js", "", "collector.script_path", "must start with /"),
            ("", "/t e", "collector.collect_path", "' ' is not allowed"),
            ("/t?x=1", "", "script_path", "'?' is not allowed"),
            ("/t%2e", "", "script_path", "'%' is not allowed"),
            ("/é", "", "script_path", "is not allowed"),
            ("/", "", "script_path", "no empty segment"),
            ("/t//e", "", "script_path", "no empty segment"),
            ("", "/t/e/", "collect_path", "no empty segment"),
            ("/a/../api", "", "script_path", "no . or .. segment"),
            ("/api/t.js", "", "script_path", "/api is the service's own"),
            ("", "/v1/batch2", "collect_path", "/v1 is the service's own"),
            ("/SDK/x.js", "", "script_path", "/sdk is the service's own"),
            ("/dashboard/t.js", "", "script_path", "/dashboard"),
            ("", "/metrics", "collect_path", "/metrics"),
            ("/openapi.json", "", "script_path", "/openapi.json"),
            ("/t/e", "/t/e", "both \"/t/e\": they must differ", ""),
        ];
        for (script, collect, key, why) in cases {
            let e = refused(script, collect);
            assert!(
                e.starts_with("configuration: ") && e.contains(key) && e.contains(why),
                "{script:?} {collect:?}: {e}"
            );
        }
        let long = format!("/{}", "a".repeat(MAX_PATH_CHARS));
        assert!(refused(&long, "").contains("at most 200 characters"));
    }

    #[test]
    fn an_operators_paths_are_read_from_a_config_file_and_checked_there() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("paths.toml");
        std::fs::write(
            &file,
            "[collector]\nscript_path = \"/lib/site.js\"\ncollect_path = \"/healthz/e\"\n",
        )
        .unwrap();
        let e = Settings::load(Some(&file)).unwrap_err().to_string();
        assert!(e.contains("collector.collect_path = \"/healthz/e\""), "{e}");
        std::fs::write(&file, "[collector]\nscript_path = \"/lib/site.js\"\n").unwrap();
        let s = Settings::load(Some(&file)).unwrap();
        assert_eq!(s.collector.script_path(), "/lib/site.js");
    }
}
