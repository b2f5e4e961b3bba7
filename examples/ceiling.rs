//! The HTTP ceiling for `benches/load.sh`: a bare actix-web server, the same workers as
//! Tributary, whose one handler reads the whole body and answers 200 with a small JSON.
//!
//! `ceiling 127.0.0.1:PORT`

use actix_web::{web, App, HttpResponse, HttpServer};

async fn collect(body: web::Bytes) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(format!(
            r#"{{"data":{{"accepted":0,"bytes":{}}}}}"#,
            body.len()
        ))
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into());
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(|| {
            App::new()
                .app_data(web::PayloadConfig::new(512_000))
                .route("/api/w/analytics/collect", web::post().to(collect))
        })
        .bind(addr)?
        .run()
        .await
    })
}
