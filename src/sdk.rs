//! The browser tracker, `GET /sdk/v1/analytics.js`: `sdk/analytics.js` embedded in the binary,
//! with a strong `ETag` (SHA-256 of the content), `304` on a matching `If-None-Match`, a short
//! `Cache-Control` (the URL is unversioned) and gzip when the client accepts it (compressed
//! once, on first use).

use std::io::Write;
use std::sync::OnceLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{get, HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};
use utoipa_actix_web::service_config::ServiceConfig;

/// The tracker's source, as served.
pub const ANALYTICS_JS: &str = include_str!("../sdk/analytics.js");

const CONTENT_TYPE: &str = "application/javascript; charset=utf-8";
const CACHE_CONTROL: &str = "public, max-age=300";

/// One embedded asset: its bytes, its ETag and, once asked for, its gzip form.
struct Asset {
    raw: &'static [u8],
    etag: String,
    gzip: OnceLock<Vec<u8>>,
}

impl Asset {
    fn new(raw: &'static [u8]) -> Asset {
        let hash = Sha256::digest(raw);
        Asset {
            raw,
            etag: format!("\"{}\"", hex::encode(&hash[..16])),
            gzip: OnceLock::new(),
        }
    }

    fn gzip(&'static self) -> &'static [u8] {
        self.gzip.get_or_init(|| gzip(self.raw))
    }
}

/// The gzip form of `raw` (best compression: it is done once).
pub fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(raw).expect("writing to a Vec cannot fail");
    enc.finish().expect("writing to a Vec cannot fail")
}

fn analytics() -> &'static Asset {
    static ASSET: OnceLock<Asset> = OnceLock::new();
    ASSET.get_or_init(|| Asset::new(ANALYTICS_JS.as_bytes()))
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

fn serve(req: &HttpRequest, asset: &'static Asset) -> HttpResponse {
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
            .body(asset.gzip())
    } else {
        res.body(asset.raw)
    }
}

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(analytics_js);
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
async fn analytics_js(req: HttpRequest) -> HttpResponse {
    serve(&req, analytics())
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
    fn the_tracker_is_small() {
        assert!(gzip(ANALYTICS_JS.as_bytes()).len() < 10 * 1024);
    }
}
