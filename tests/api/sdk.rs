//! `GET /sdk/v1/analytics.js`: the embedded tracker, its caching headers and gzip.

use std::io::Read;

use crate::helpers::*;

#[tokio::test]
async fn the_tracker_is_served_with_an_etag_a_short_cache_and_gzip_on_demand() {
    let app = spawn_app();
    let url = format!("{}/sdk/v1/analytics.js", app.base);
    let plain = app.client.get(&url).send().await.unwrap();
    assert_eq!(plain.status(), 200);
    let h = plain.headers().clone();
    assert_eq!(h["content-type"], "application/javascript; charset=utf-8");
    assert_eq!(h["cache-control"], "public, max-age=300");
    assert!(h.get("content-encoding").is_none());
    let etag = h["etag"].to_str().unwrap().to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() > 20,
        "{etag}"
    );
    let body = plain.bytes().await.unwrap();
    assert_eq!(&body[..], tributary::sdk::ANALYTICS_JS.as_bytes());

    let zipped = app
        .client
        .get(&url)
        .header("accept-encoding", "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(zipped.status(), 200);
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    assert_eq!(zipped.headers()["etag"].to_str().unwrap(), etag);
    assert_eq!(zipped.headers()["vary"], "Accept-Encoding");
    let gz = zipped.bytes().await.unwrap();
    // The budget (issue 10): the tracker with its survey popover stays within 10 KiB gzipped.
    assert!(
        gz.len() <= 10 * 1024,
        "gzip size {} over the 10 240 byte budget",
        gz.len()
    );
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, body);

    for inm in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
    ] {
        let again = app
            .client
            .get(&url)
            .header("if-none-match", inm)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304);
        assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
        assert!(again.bytes().await.unwrap().is_empty());
    }
    let stale = app
        .client
        .get(&url)
        .header("if-none-match", "\"stale\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 200);

    let doc: serde_json::Value = app
        .client
        .get(format!("{}/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["paths"]["/sdk/v1/analytics.js"]["get"].is_object());
}
