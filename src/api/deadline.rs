//! A deadline on reading a request's body. actix-http times out a request's head
//! (`server.client_request_timeout_ms`) but not its body: a client that announces
//! `Content-Length: 100` and sends 20 bytes would hold a connection for as long as it likes.
//! This middleware gives every body `server.body_timeout_ms` in all, counted from the end of the
//! head; past it the body's stream fails with `TimedOut`, which `read_body` answers with
//! `408 REQUEST_TIMEOUT`, and the connection, whose body was not read, is closed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};
use bytes::Bytes;
use futures_util::Stream;

use crate::state::AppState;

/// The message of a body that missed its deadline (also how `read_body` recognises it).
pub const BODY_TIMEOUT: &str = "request body not received in time";

/// Middleware: puts the deadline on the body of every request that announces one.
pub async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let timeout = req
        .app_data::<web::Data<AppState>>()
        .map(|s| Duration::from_millis(s.settings.server.body_timeout_ms));
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    if let (Some(timeout), true) = (timeout, has_body) {
        let inner = req.take_payload();
        let timed = Deadline {
            inner,
            timer: Box::pin(tokio::time::sleep(timeout)),
            expired: false,
        };
        req.set_payload(Payload::Stream {
            payload: Box::pin(timed),
        });
    }
    next.call(req).await
}

struct Deadline {
    inner: Payload,
    timer: Pin<Box<tokio::time::Sleep>>,
    expired: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.expired {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Pending => {}
            ready => return ready,
        }
        match this.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.expired = true;
                let e = io::Error::new(io::ErrorKind::TimedOut, BODY_TIMEOUT);
                Poll::Ready(Some(Err(PayloadError::Io(e))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
