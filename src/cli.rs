//! `tributary apps ...`, `keys ...` and `fleet ...`: the admin API from the command line.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{json, Value};

use crate::config::Settings;

#[derive(Debug, Subcommand)]
pub enum AppsCommand {
    /// Create an app; prints its id and integration key (shown once).
    Create {
        #[arg(long)]
        name: String,
        /// free, pro or enterprise.
        #[arg(long, default_value = "free")]
        plan: String,
    },
    /// List apps.
    List,
    /// Change an app's plan.
    SetPlan {
        app_id: String,
        /// free, pro or enterprise.
        plan: String,
    },
    /// Delete an app and everything of it (its keys stop at once); prints the deletion's job.
    Delete {
        app_id: String,
        /// Wait until the job is finished and print it then.
        #[arg(long)]
        wait: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create an API key; prints the key (shown once).
    Create {
        #[arg(long)]
        app: String,
        #[arg(long)]
        name: String,
        /// Comma-separated permissions, e.g. contacts:read,contacts:write.
        #[arg(long, value_delimiter = ',')]
        permissions: Vec<String>,
    },
    /// List an app's API keys (never their secrets).
    List {
        #[arg(long)]
        app: String,
    },
    /// Revoke an API key; it stops working on the next request.
    Revoke {
        #[arg(long)]
        app: String,
        key_id: String,
    },
}

/// Where the admin API is and how to authenticate to it. Every option is global: it may come
/// before or after the subcommand (`tributary apps create --url ... --name x`).
#[derive(Debug, clap::Args)]
pub struct Target {
    /// Base URL of a running tributary [default: http://<server.bind of the configuration>].
    #[arg(long, env = "TRIBUTARY_URL", global = true)]
    pub url: Option<String>,
    /// The admin token [default: TRIBUTARY_ADMIN_TOKEN, then <data dir>/admin_token].
    #[arg(
        long,
        env = "TRIBUTARY_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,
    /// The server's data directory, where its admin_token is kept [default: storage.data_dir
    /// of the configuration].
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// The server's TOML configuration file, layered over the defaults as for `serve`.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
}

impl Target {
    /// The base URL and the admin token: flags and their variables first, then the same
    /// configuration layers `serve` reads (defaults, `--config`, `TRIBUTARY__...`).
    fn resolve(&self) -> Result<(String, String), String> {
        let settings = || Settings::load(self.config.as_deref()).map_err(|e| e.to_string());
        let url = match &self.url {
            Some(u) => u.clone(),
            None => local_url(&settings()?.server.bind),
        };
        let token = match &self.token {
            Some(t) => t.trim().to_owned(),
            None => {
                let settings = settings()?;
                let dir = self.data_dir.clone().unwrap_or(settings.storage.data_dir);
                let path = dir.join("admin_token");
                std::fs::read_to_string(&path)
                    .map(|t| t.trim().to_owned())
                    .map_err(|e| {
                        format!(
                            "no admin token: pass --token, set TRIBUTARY_ADMIN_TOKEN, or point \
                             --data-dir (or --config) at the server's data directory \
                             ({}: {e})",
                            path.display()
                        )
                    })?
            }
        };
        Ok((url, token))
    }
}

/// `http://` + a listen address, with an any-address host replaced by loopback.
fn local_url(bind: &str) -> String {
    let host = bind
        .replacen("0.0.0.0:", "127.0.0.1:", 1)
        .replacen("[::]:", "[::1]:", 1);
    format!("http://{host}")
}

async fn call(
    target: &Target,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let (base, token) = target.resolve()?;
    let url = format!("{}/admin/v1{path}", base.trim_end_matches('/'));
    let mut req = reqwest::Client::new()
        .request(method, &url)
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = res.status();
    let body: Value = res
        .json()
        .await
        .map_err(|e| format!("unreadable answer from {url}: {e}"))?;
    if status.is_success() {
        Ok(body["data"].clone())
    } else {
        Err(format!(
            "{status}: {}",
            serde_json::to_string_pretty(&body["error"]).unwrap_or_default()
        ))
    }
}

fn print(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub async fn apps(target: &Target, cmd: AppsCommand) -> Result<(), String> {
    use reqwest::Method;
    let out = match cmd {
        AppsCommand::Create { name, plan } => {
            call(
                target,
                Method::POST,
                "/apps",
                Some(json!({"name": name, "plan": plan})),
            )
            .await?
        }
        AppsCommand::List => call(target, Method::GET, "/apps?limit=100", None).await?,
        AppsCommand::SetPlan { app_id, plan } => {
            call(
                target,
                Method::PATCH,
                &format!("/apps/{app_id}"),
                Some(json!({"plan": plan})),
            )
            .await?
        }
        AppsCommand::Delete { app_id, wait } => {
            let job = call(target, Method::DELETE, &format!("/apps/{app_id}"), None).await?;
            if wait {
                finished(target, &job).await?
            } else {
                job
            }
        }
    };
    print(&out);
    Ok(())
}

/// Polls the job `job` (every half second) until it is done or failed; answers it then.
async fn finished(target: &Target, job: &Value) -> Result<Value, String> {
    let path = format!("/jobs/{}", job["id"].as_str().unwrap_or_default());
    loop {
        let now = call(target, reqwest::Method::GET, &path, None).await?;
        match now["state"].as_str() {
            Some("done") => return Ok(now),
            Some("failed") => return Err(format!("the job failed: {now}")),
            _ => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    }
}

pub async fn keys(target: &Target, cmd: KeysCommand) -> Result<(), String> {
    use reqwest::Method;
    let out = match cmd {
        KeysCommand::Create {
            app,
            name,
            permissions,
        } => {
            call(
                target,
                Method::POST,
                &format!("/apps/{app}/keys"),
                Some(json!({"name": name, "permissions": permissions})),
            )
            .await?
        }
        KeysCommand::List { app } => {
            call(
                target,
                Method::GET,
                &format!("/apps/{app}/keys?limit=100"),
                None,
            )
            .await?
        }
        KeysCommand::Revoke { app, key_id } => {
            call(
                target,
                Method::DELETE,
                &format!("/apps/{app}/keys/{key_id}"),
                None,
            )
            .await?
        }
    };
    print(&out);
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// The tokens edges present to this control node.
    #[command(subcommand)]
    Token(TokenCommand),
    /// The edges this control node has heard from, with their state.
    Nodes,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a fleet token; prints it (shown once). Give it to an edge as
    /// TRIBUTARY__FLEET__TOKEN.
    Create {
        /// A name to know it by (e.g. the edges' region).
        #[arg(long, default_value = "edge")]
        name: String,
    },
    /// List the fleet tokens (never their secrets).
    List,
    /// Revoke a fleet token: edges presenting it are refused from their next sync.
    Revoke { token_id: String },
}

pub async fn fleet(target: &Target, cmd: FleetCommand) -> Result<(), String> {
    use reqwest::Method;
    let out = match cmd {
        FleetCommand::Token(TokenCommand::Create { name }) => {
            let body = json!({ "name": name });
            call(target, Method::POST, "/fleet/tokens", Some(body)).await?
        }
        FleetCommand::Token(TokenCommand::List) => {
            call(target, Method::GET, "/fleet/tokens", None).await?
        }
        FleetCommand::Token(TokenCommand::Revoke { token_id }) => {
            let path = format!("/fleet/tokens/{token_id}");
            call(target, Method::DELETE, &path, None).await?
        }
        FleetCommand::Nodes => call(target, Method::GET, "/fleet/nodes", None).await?,
    };
    print(&out);
    Ok(())
}

/// `tributary admin create`: a dashboard owner account made on the server's data directory
/// (the server must be stopped: the store is opened directly, as holding the data directory is
/// as good as holding the admin token). The first one spends the setup page.
#[derive(Debug, clap::Args)]
pub struct AdminCreate {
    #[arg(long)]
    pub email: String,
    #[arg(long)]
    pub name: String,
    /// The server's data directory [default: storage.data_dir of the configuration].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The server's TOML configuration file, layered over the defaults as for `serve`.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Creates the owner; the password comes from `TRIBUTARY_ADMIN_PASSWORD` or the first line of
/// standard input.
pub fn admin_create(args: &AdminCreate) -> Result<(), String> {
    use crate::accounts::model::{NewUser, Role};
    use crate::accounts::store::{self, AccountError};
    let password = match std::env::var("TRIBUTARY_ADMIN_PASSWORD") {
        Ok(p) => p,
        Err(_) => {
            eprintln!("password (at least 10 characters), then Enter:");
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(|e| format!("cannot read the password: {e}"))?;
            line.trim_end_matches(['\r', '\n']).to_owned()
        }
    };
    let new =
        NewUser::parse(&args.email, &args.name, &password, Role::Owner).map_err(|errors| {
            errors
                .iter()
                .map(|e| format!("{} {}", e.field, e.message))
                .collect::<Vec<_>>()
                .join("; ")
        })?;
    let dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => {
            Settings::load(args.config.as_deref())
                .map_err(|e| e.to_string())?
                .storage
                .data_dir
        }
    };
    let db = sled::Config::new()
        .path(dir.join("db"))
        .mode(sled::Mode::HighThroughput)
        .open()
        .map_err(|e| {
            format!(
                "cannot open {} ({e}); stop the server first, or use the setup page at /dashboard/setup",
                dir.join("db").display()
            )
        })?;
    let user = new.into_user(crate::clock::Clock::now(&crate::clock::SystemClock))?;
    let first = !store::is_set_up(&db).map_err(|e| e.to_string())?;
    match store::create_user(&db, &user, first) {
        Ok(()) => {}
        Err(AccountError::EmailTaken) => {
            return Err(format!("{} already has an account", user.email))
        }
        Err(AccountError::AlreadySetUp) => {
            return Err("the first owner was made meanwhile; run again".into())
        }
        Err(AccountError::Store(e)) => return Err(e.to_string()),
        Err(AccountError::LastOwner | AccountError::NoSuchUser) => {
            return Err("unexpected answer to an account's creation".into())
        }
    }
    println!(
        "{}",
        json!({"id": user.id, "email": user.email, "name": user.name, "role": user.role.name()})
    );
    Ok(())
}
