//! `tributary apps ...` and `tributary keys ...`: the admin API from the command line.

use clap::Subcommand;
use serde_json::{json, Value};

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

/// Where the admin API is and how to authenticate to it.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// Base URL of a running tributary.
    #[arg(long, env = "TRIBUTARY_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The admin token (defaults to TRIBUTARY_ADMIN_TOKEN, then ./data/admin_token).
    #[arg(long, env = "TRIBUTARY_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

async fn call(
    target: &Target,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let token = match &target.token {
        Some(t) => t.clone(),
        None => std::fs::read_to_string("data/admin_token")
            .map(|t| t.trim().to_owned())
            .map_err(|_| "no admin token: pass --token, set TRIBUTARY_ADMIN_TOKEN, or run from the directory holding data/admin_token".to_owned())?,
    };
    let url = format!("{}/admin/v1{path}", target.url.trim_end_matches('/'));
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
    };
    print(&out);
    Ok(())
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
            call(target, Method::GET, &format!("/apps/{app}/keys"), None).await?
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
