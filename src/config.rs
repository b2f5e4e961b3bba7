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

impl CollectorSettings {
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
                    .with_list_parse_key("collector.allowed_origins"),
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

    fn check(&self) -> Result<(), ConfigError> {
        for &plan in Plan::ALL {
            if self.plans.get(plan).requests_per_minute == 0 {
                return Err(ConfigError::ZeroRate(plan.name()));
            }
        }
        Ok(())
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
}
