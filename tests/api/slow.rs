//! Slow clients: heads and bodies that trickle in, or stop half-way, are timed out and their
//! connections freed, while other clients are answered at once.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::*;

/// How a slow connection misbehaves.
#[derive(Clone, Copy, Debug)]
enum Slow {
    /// Sends its head one byte at a time, forever.
    TrickleHead,
    /// Sends a full head announcing 100 body bytes, then one byte at a time.
    TrickleBody,
    /// Sends a full head announcing 100 body bytes, 20 of them, then nothing.
    StallBody,
}

/// The head of a POST of 100 JSON bytes to `path`, with `auth` (a header line).
fn head(path: &str, auth: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
}

/// Opens a misbehaving connection sending `head`; returns when the server closed it, and what
/// it answered (all of it).
async fn slow_client(addr: String, head: String, how: Slow) -> (Duration, String) {
    let started = Instant::now();
    let stream = TcpStream::connect(addr.trim_start_matches("http://"))
        .await
        .unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        let (first, rest): (Vec<u8>, Vec<u8>) = match how {
            Slow::TrickleHead => (Vec::new(), head.into_bytes()),
            Slow::TrickleBody => (head.into_bytes(), vec![b' '; 100]),
            Slow::StallBody => ([head.as_bytes(), &[b' '; 20]].concat(), Vec::new()),
        };
        wr.write_all(&first).await.ok()?;
        for b in rest {
            tokio::time::sleep(Duration::from_millis(150)).await;
            wr.write_all(&[b]).await.ok()?;
        }
        std::future::pending::<Option<()>>().await
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    writer.abort();
    (
        started.elapsed(),
        String::from_utf8_lossy(&answer).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_timed_out_and_freed_while_others_are_answered_quickly() {
    let app = spawn_app_with(|s| {
        s.server.client_request_timeout_ms = 1000;
        s.server.body_timeout_ms = 1000;
        s.server.client_disconnect_timeout_ms = 500;
    });
    let key = app.contacts_key("enterprise").await;
    let mut slow = Vec::new();
    for i in 0..90 {
        let how = [Slow::TrickleHead, Slow::TrickleBody, Slow::StallBody][i % 3];
        let head = head("/acq/v1/contacts", &format!("X-API-Key: {key}"));
        let task = tokio::spawn(slow_client(app.base.clone(), head, how));
        slow.push((how, task));
    }
    // Meanwhile, everyone else is served at once: held workers would make each check wait for
    // a slow client's timeout (1 s). The median, since one check may meet a stall of a loaded
    // machine.
    let mut took = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let a = app.send(reqwest::Method::GET, "/healthz", &[], None).await;
        assert_eq!(a.status, 200);
        took.push(t.elapsed());
    }
    took.sort();
    assert!(
        took[took.len() / 2] < Duration::from_millis(500)
            && took[took.len() - 1] < Duration::from_secs(5),
        "health checks took {took:?}"
    );
    // Every slow connection is closed by the server soon after its timeout.
    for (how, task) in slow {
        let (held, answer) = tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .unwrap_or_else(|_| panic!("a {how:?} connection was held for over 20 s"))
            .unwrap();
        let status = answer.lines().next().unwrap_or("");
        assert!(held < Duration::from_secs(5), "{how:?} held for {held:?}");
        match how {
            Slow::TrickleHead => {
                assert!(
                    status.is_empty() || status.contains("408"),
                    "{how:?}: {status}"
                )
            }
            _ => assert!(status.contains("408"), "{how:?}: {status:?}"),
        }
    }
}

#[tokio::test]
async fn a_body_missing_its_deadline_on_the_collector_is_408_as_on_the_api() {
    let app = spawn_app_with(|s| s.server.body_timeout_ms = 300);
    let (_, ik) = app.create_app("free").await;
    let key = app.contacts_key("free").await;
    let heads = [
        head("/api/w/analytics/collect", &format!("X-App-Key: {ik}")),
        head("/acq/v1/contacts", &format!("X-API-Key: {key}")),
    ];
    for head in heads {
        let (held, answer) = tokio::time::timeout(
            Duration::from_secs(20),
            slow_client(app.base.clone(), head.clone(), Slow::StallBody),
        )
        .await
        .expect("the server closes a stalled body");
        let status = answer.lines().next().unwrap_or("");
        assert!(status.contains("408"), "{head}: {answer}");
        assert!(
            answer.contains(r#""code":"REQUEST_TIMEOUT""#),
            "{head}: {answer}"
        );
        assert!(held < Duration::from_secs(5), "held for {held:?}");
    }
}
