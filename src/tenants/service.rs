//! The admin operations on apps and keys, called by both the `/admin/v1` handlers (`http.rs`)
//! and the dashboard, so the two cannot drift apart. Each one writes sled and then, on the same
//! store thread, sets the registry to what sled holds (`Registry::reload_*`): of two racing
//! writes the last reload sees both, and a revocation holds from the very next request.
//!
//! `Tenants` (the store and the registry, taken from the request) carries the operations;
//! `AdminApp` is the app of an admin route's `{appId}` (401 without the admin token, 404 when
//! there is no such app), for every admin route under `/apps/{appId}/...`.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};

use super::auth::{Access, Admin};
use super::model::{new_key, App, KeyKind, KeyRecord, Permission, Plan};
use super::store;
use crate::api::ApiError;
use crate::ids;
use crate::state::AppState;

/// The store and the registry: what every admin operation writes.
#[derive(Clone)]
pub struct Tenants {
    pub state: web::Data<AppState>,
    pub access: web::Data<Access>,
}

/// What a PATCH of an app changes (`None`: kept).
#[derive(Debug, Default, Clone)]
pub struct AppChange {
    pub name: Option<String>,
    pub plan: Option<Plan>,
}

impl Tenants {
    /// The state and the registry registered on the app.
    pub fn of(req: &HttpRequest) -> Result<Tenants, ApiError> {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let access = req.app_data::<web::Data<Access>>().cloned();
        match (state, access) {
            (Some(state), Some(access)) => Ok(Tenants { state, access }),
            _ => Err(ApiError::internal("app state missing")),
        }
    }

    /// The app `id`; 404 when there is none, also from the moment its deletion began (the
    /// job that deletes it is followed at `GET /admin/v1/jobs/{jobId}`).
    pub async fn app(&self, id: &str) -> Result<App, ApiError> {
        let id = id.to_owned();
        self.state
            .store
            .run(move |db| store::get_app(db, &id))
            .await?
            .filter(|app| !app.deleting())
            .ok_or_else(|| ApiError::not_found("app"))
    }

    /// Creates an app and its integration key; answers the app and the key's secret (shown
    /// once).
    pub async fn create_app(&self, name: String, plan: Plan) -> Result<(App, String), ApiError> {
        let id = ids::object_id();
        let now = self.state.now();
        let (key, secret) = new_key(&id, KeyKind::Integration, "integration", Vec::new(), now);
        let app = App {
            id,
            name,
            plan,
            integration_key_id: key.id.clone(),
            deletion_job_id: None,
            created_at: now,
            updated_at: now,
        };
        let (a, access) = (app.clone(), self.access.clone());
        self.state
            .store
            .run(move |db| {
                store::create_app(db, &a, &key)?;
                access.registry.reload_key(db, &key.id)?;
                access.registry.reload_app(db, &a.id)
            })
            .await?;
        tracing::info!(app_id = %app.id, plan = app.plan.name(), "app created");
        Ok((app, secret))
    }

    /// Renames the app or changes its plan (a downgrade never deletes data); 404 when there is
    /// no such app or it is being deleted.
    pub async fn update_app(&self, id: &str, change: AppChange) -> Result<App, ApiError> {
        let (id, access, now) = (id.to_owned(), self.access.clone(), self.state.now());
        let (_, app) = self
            .state
            .store
            .run(move |db| {
                let changed = store::modify_app(
                    db,
                    &id,
                    |app| {
                        if let Some(n) = &change.name {
                            app.name.clone_from(n);
                        }
                        app.plan = change.plan.unwrap_or(app.plan);
                    },
                    now,
                )?;
                access.registry.reload_app(db, &id)?;
                Ok(changed)
            })
            .await?
            .ok_or_else(|| ApiError::not_found("app"))?;
        tracing::info!(app_id = %app.id, plan = app.plan.name(), "app updated");
        Ok(app)
    }

    /// Gives the app a new integration key and revokes the old one; answers the app, the new
    /// key and its secret (shown once). 404 when there is no such app.
    pub async fn rotate_integration_key(
        &self,
        id: &str,
    ) -> Result<(App, KeyRecord, String), ApiError> {
        let now = self.state.now();
        let (key, secret) = new_key(id, KeyKind::Integration, "integration", Vec::new(), now);
        let (id, k, access) = (id.to_owned(), key.clone(), self.access.clone());
        let (app, _) = self
            .state
            .store
            .run(move |db| {
                let rotated = store::rotate_integration_key(db, &id, &k)?;
                if let Some((app, revoked)) = &rotated {
                    access.registry.reload_key(db, &k.id)?;
                    if let Some(r) = revoked {
                        access.registry.reload_key(db, &r.id)?;
                    }
                    access.registry.reload_app(db, &app.id)?;
                }
                Ok(rotated)
            })
            .await?
            .ok_or_else(|| ApiError::not_found("app"))?;
        tracing::info!(app_id = %app.id, key_id = %key.id, "integration key rotated");
        Ok((app, key, secret))
    }

    /// Creates an API key of `app`; answers it and its secret (shown once).
    pub async fn create_key(
        &self,
        app: &App,
        name: &str,
        permissions: Vec<Permission>,
    ) -> Result<(KeyRecord, String), ApiError> {
        let (key, secret) = new_key(&app.id, KeyKind::Api, name, permissions, self.state.now());
        let (k, access) = (key.clone(), self.access.clone());
        self.state
            .store
            .run(move |db| {
                store::insert_key(db, &k)?;
                access.registry.reload_key(db, &k.id)
            })
            .await?;
        tracing::info!(app_id = %app.id, key_id = %key.id, "api key created");
        Ok((key, secret))
    }

    /// Changes a live API key of the app; 404 when it has none such.
    async fn change_key(
        &self,
        app_id: &str,
        key_id: &str,
        change: impl Fn(&mut KeyRecord) + Send + 'static,
    ) -> Result<KeyRecord, ApiError> {
        let (app_id, key_id) = (app_id.to_owned(), key_id.to_owned());
        let access = self.access.clone();
        self.state
            .store
            .run(move |db| {
                let updated = store::modify_api_key(db, &app_id, &key_id, change)?;
                if updated.is_some() {
                    access.registry.reload_key(db, &key_id)?;
                }
                Ok(updated)
            })
            .await?
            .ok_or_else(|| ApiError::not_found("key"))
    }

    /// Replaces a key's permissions; they hold from the next request.
    pub async fn set_permissions(
        &self,
        app_id: &str,
        key_id: &str,
        permissions: Vec<Permission>,
    ) -> Result<KeyRecord, ApiError> {
        let key = self
            .change_key(app_id, key_id, move |k| {
                k.permissions.clone_from(&permissions)
            })
            .await?;
        tracing::info!(app_id = %app_id, key_id = %key.id, "api key permissions changed");
        Ok(key)
    }

    /// Revokes a key; it stops working on its next request.
    pub async fn revoke_key(&self, app_id: &str, key_id: &str) -> Result<KeyRecord, ApiError> {
        let now = self.state.now();
        let key = self
            .change_key(app_id, key_id, move |k| {
                k.revoked_at.get_or_insert(now);
            })
            .await?;
        self.access.rate_limits.forget(&key.id);
        tracing::info!(app_id = %app_id, key_id = %key.id, "api key revoked");
        Ok(key)
    }
}

impl FromRequest for Tenants {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Tenants, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(Tenants::of(req))
    }
}

/// The app of an admin route's `{appId}`, checked: the admin token first (401), then the app
/// (404, also while it is being deleted: nothing more is written to it). Derefs to the `App`
/// (its id and plan).
#[derive(Debug, Clone)]
pub struct AdminApp(pub App);

impl std::ops::Deref for AdminApp {
    type Target = App;

    fn deref(&self) -> &App {
        &self.0
    }
}

impl FromRequest for AdminApp {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<AdminApp, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let admin = Admin::from_request(req, payload).into_inner();
        let tenants = Tenants::of(req);
        let id = req.match_info().get("appId").unwrap_or_default().to_owned();
        Box::pin(async move {
            admin?;
            Ok(AdminApp(tenants?.app(&id).await?))
        })
    }
}
