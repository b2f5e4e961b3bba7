//! The browser tracker, `GET /sdk/v1/analytics.js` (and the operator's `collector.script_path`):
//! `sdk/analytics.js` embedded in the binary, its paths set to the configured ones once at
//! start ([`Tracker`]), with a strong `ETag` (SHA-256 of the content), `304` on a matching
//! `If-None-Match`, a short `Cache-Control` (the URL is unversioned) and gzip when the client
//! accepts it (compressed once, at start).

use std::io::Write;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{get, web, HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::config::{CollectorSettings, DEFAULT_COLLECT_PATH, DEFAULT_SCRIPT_PATH};

/// The tracker's source, as served.
pub const ANALYTICS_JS: &str = include_str!("../sdk/analytics.js");

const CONTENT_TYPE: &str = "application/javascript; charset=utf-8";
const CACHE_CONTROL: &str = "public, max-age=300";

/// The tracker as this server serves it: its bytes, its ETag and its gzip form.
pub struct Tracker {
    raw: web::Bytes,
    etag: String,
    gzip: web::Bytes,
}

impl Tracker {
    /// The tracker with the paths of `cfg` (where it is served, where it sends its events).
    pub fn new(cfg: &CollectorSettings) -> Tracker {
        let raw = web::Bytes::from(source(cfg.script_path(), cfg.collect_path()));
        let hash = Sha256::digest(&raw);
        Tracker {
            etag: format!("\"{}\"", hex::encode(&hash[..16])),
            gzip: gzip(&raw).into(),
            raw,
        }
    }

    /// The tracker's text, as served.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.raw).expect("the tracker is UTF-8")
    }
}

/// The line of `sdk/analytics.js` that names its paths, with the defaults.
fn paths_line(script: &str, collect: &str) -> String {
    format!("var SCRIPT_PATH = '{script}', COLLECT_PATH = '{collect}';")
}

/// The tracker's source with `script` and `collect` as its paths (the configuration's, checked:
/// plain path characters, nothing to escape).
fn source(script: &str, collect: &str) -> String {
    ANALYTICS_JS.replacen(
        &paths_line(DEFAULT_SCRIPT_PATH, DEFAULT_COLLECT_PATH),
        &paths_line(script, collect),
        1,
    )
}

/// The gzip form of `raw` (best compression: it is done once).
pub fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(raw).expect("writing to a Vec cannot fail");
    enc.finish().expect("writing to a Vec cannot fail")
}

/// Whether an `If-None-Match` header names `etag` (or is `*`). Weak forms match too (a proxy
/// that gzips may weaken the tag), as RFC 9110's weak comparison for GET allows.
fn none_match(req: &HttpRequest, etag: &str) -> bool {
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim())
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
}

/// Whether the client accepts gzip (`Accept-Encoding` names it without `q=0`).
fn accepts_gzip(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT_ENCODING)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip")) && !zero
        })
}

fn serve(req: &HttpRequest, asset: &Tracker) -> HttpResponse {
    let common = |res: &mut actix_web::HttpResponseBuilder| {
        res.insert_header((header::ETAG, asset.etag.as_str()))
            .insert_header((header::CACHE_CONTROL, CACHE_CONTROL))
            .insert_header((header::VARY, HeaderValue::from_static("Accept-Encoding")))
            .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"));
    };
    if none_match(req, &asset.etag) {
        let mut res = HttpResponse::NotModified();
        common(&mut res);
        return res.finish();
    }
    let mut res = HttpResponse::Ok();
    common(&mut res);
    res.insert_header((header::CONTENT_TYPE, CONTENT_TYPE));
    if accepts_gzip(req) {
        res.insert_header((header::CONTENT_ENCODING, "gzip"))
            .body(asset.gzip.clone())
    } else {
        res.body(asset.raw.clone())
    }
}

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(analytics_js);
}

/// The tracker at an operator's path (`collector.script_path`), answered as the default path.
pub fn alias(path: &str) -> actix_web::Resource {
    web::resource(path)
        .route(web::get().to(tracker))
        .default_service(web::to(crate::api::not_found))
}

async fn tracker(req: HttpRequest, asset: web::Data<Tracker>) -> HttpResponse {
    serve(&req, &asset)
}

/// The browser tracker (`window.Service.analytics`), plain JavaScript.
///
/// Load it with `<script async src=".../sdk/v1/analytics.js" data-app-key="ik_..."
/// data-host="https://...">`. Cached for 5 minutes; revalidate with `If-None-Match`.
#[utoipa::path(
    tag = "service",
    responses(
        (status = 200, description = "The tracker (application/javascript), gzip when accepted",
         content_type = "application/javascript"),
        (status = 304, description = "Not modified (If-None-Match matched the ETag)")
    )
)]
#[get("/sdk/v1/analytics.js")]
async fn analytics_js(req: HttpRequest, asset: web::Data<Tracker>) -> HttpResponse {
    serve(&req, &asset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn gzip_is_understood_unless_refused() {
        let r = |v: &str| TestRequest::default().insert_header(("accept-encoding", v));
        assert!(accepts_gzip(&r("gzip, deflate, br").to_http_request()));
        assert!(accepts_gzip(&r("br;q=1.0, GZIP;q=0.5").to_http_request()));
        assert!(!accepts_gzip(&r("gzip;q=0, br").to_http_request()));
        assert!(!accepts_gzip(&r("identity").to_http_request()));
        assert!(!accepts_gzip(&TestRequest::default().to_http_request()));
    }

    #[test]
    fn if_none_match_compares_the_tag_weakly() {
        let etag = "\"abc\"";
        let r = |v: &str| {
            TestRequest::default()
                .insert_header(("if-none-match", v))
                .to_http_request()
        };
        assert!(none_match(&r("\"abc\""), etag));
        assert!(none_match(&r("\"x\", W/\"abc\""), etag));
        assert!(none_match(&r("*"), etag));
        assert!(!none_match(&r("\"abcd\""), etag));
    }

    #[test]
    fn the_tracker_names_its_paths_once_and_the_server_writes_its_own_there() {
        let line = paths_line(DEFAULT_SCRIPT_PATH, DEFAULT_COLLECT_PATH);
        assert_eq!(ANALYTICS_JS.matches(&line).count(), 1);
        for default in [DEFAULT_SCRIPT_PATH, DEFAULT_COLLECT_PATH] {
            assert_eq!(ANALYTICS_JS.matches(default).count(), 1, "{default}");
        }
        let mut cfg = crate::config::Settings::load(None).unwrap().collector;
        let default = Tracker::new(&cfg);
        assert_eq!(default.text(), ANALYTICS_JS);
        cfg.script_path = "/lib/site.js".into();
        cfg.collect_path = "/t/e".into();
        let custom = Tracker::new(&cfg);
        assert_eq!(
            custom.text(),
            ANALYTICS_JS.replace(
                &line,
                "var SCRIPT_PATH = '/lib/site.js', COLLECT_PATH = '/t/e';"
            )
        );
        assert_ne!(custom.etag, default.etag);
    }

    #[test]
    fn the_tracker_is_small() {
        assert!(gzip(ANALYTICS_JS.as_bytes()).len() < 10 * 1024);
    }
}
