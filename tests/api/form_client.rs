//! A browser without script over HTTP: a cookie jar, forms with their CSRF token, redirects not
//! followed; and the first owner set up and signed in. Shared by the `api` and `interop` test
//! binaries (the dashboard's tests, and the webhooks' events caused from the dashboard).

use std::collections::HashMap;

use reqwest::header::HeaderMap;
use reqwest::StatusCode;

use crate::helpers::*;

pub const OWNER_EMAIL: &str = "owner@example.com";
pub const PASSWORD: &str = "correct horse battery";

/// A cookie jar and a client that does not follow redirects.
pub struct Browser<'a> {
    app: &'a TestApp,
    client: reqwest::Client,
    pub cookies: HashMap<String, String>,
}

pub struct Page {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    /// The value of the first `name="csrf"` input.
    pub fn csrf(&self) -> String {
        let at = self
            .body
            .find("name=\"csrf\" value=\"")
            .expect("a csrf field")
            + 19;
        self.body[at..].split('"').next().unwrap().to_owned()
    }

    pub fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

impl<'a> Browser<'a> {
    pub fn new(app: &'a TestApp) -> Self {
        Browser {
            app,
            client: reqwest::Client::builder()
                .pool_idle_timeout(crate::helpers::IDLE_CONNECTION)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: HashMap::new(),
        }
    }

    async fn finish(&mut self, req: reqwest::RequestBuilder) -> Page {
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let res = req.header("cookie", cookie).send().await.expect("request");
        for c in res.headers().get_all("set-cookie") {
            let c = c.to_str().unwrap();
            let (pair, attrs) = c.split_once(';').unwrap_or((c, ""));
            let (k, v) = pair.split_once('=').unwrap();
            if attrs.contains("Max-Age=0") {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_owned(), v.to_owned());
            }
        }
        Page {
            status: res.status(),
            headers: res.headers().clone(),
            body: res.text().await.unwrap(),
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let req = self.client.get(format!("{}{path}", self.app.base));
        self.finish(req).await
    }

    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let body = serde_urlencoded::to_string(form).unwrap();
        let req = self
            .client
            .post(format!("{}{path}", self.app.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.finish(req).await
    }

    /// GETs `form_page`, then posts `fields` and its CSRF token to `action`.
    pub async fn submit(&mut self, form_page: &str, action: &str, fields: &[(&str, &str)]) -> Page {
        let csrf = self.get(form_page).await.csrf();
        let mut all = fields.to_vec();
        all.push(("csrf", &csrf));
        self.post(action, &all).await
    }

    pub async fn sign_in(&mut self, email: &str, password: &str) -> Page {
        self.submit(
            "/dashboard/sign-in",
            "/dashboard/sign-in",
            &[("email", email), ("password", password)],
        )
        .await
    }
}

/// A server whose first owner is set up and signed in.
pub async fn owner(app: &TestApp) -> Browser<'_> {
    let mut b = Browser::new(app);
    let done = b
        .submit(
            "/dashboard/setup",
            "/dashboard/setup",
            &[
                ("token", ADMIN_TOKEN),
                ("name", "Olive Owner"),
                ("email", OWNER_EMAIL),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.location(), "/dashboard/apps");
    b
}
