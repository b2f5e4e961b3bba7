//! Load generator for `benches/load.sh`: HTTP/1.1 keep-alive connections on one thread (like
//! `wrk -t1`), each sending collect batches (10 events unless `--events`) with a fresh
//! anonymousId and fresh messageIds on every request, as fast as answers come or at a fixed
//! rate.
//!
//! ```text
//! loadgen --addr 127.0.0.1:PORT --key KEY [--conns 32] [--secs 10] [--rate REQ_PER_S]
//!         [--events 10] [--pages] [--save-at SECS --save FILE]
//! ```
//!
//! `--pages` sends page views instead of track events: each request's path is new
//! (`/products/CONN-N`), as on a site with a long tail of pages. `--key @FILE` reads one
//! integration key per line: the requests go to those apps in turn (an edge serving many
//! apps), request N of connection C to key `(N x conns + C) mod keys`.
//!
//! Prints one line of `name=value` pairs: requests (sent), events (in requests answered 200: a
//! batch refused with 503 is not served), accepted and duplicates (from the answers), errors
//! (non-200), rates (requests sent, events served), p50/p99 latency in µs (of every request).
//! `--save-at` writes the body of the first request sent after that many seconds to FILE, to retry
//! it later.

use std::io::Write as _;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    addr: String,
    /// The integration keys, taken in turn (one unless `--key @FILE`).
    keys: Vec<String>,
    conns: usize,
    secs: f64,
    rate: Option<f64>,
    /// Events per batch (1 to 1000).
    events: usize,
    /// Page views (a new path per request) instead of track events.
    pages: bool,
    save_at: Option<f64>,
    save: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:8080".into(),
        keys: vec![String::new()],
        conns: 32,
        secs: 10.0,
        rate: None,
        events: 10,
        pages: false,
        save_at: None,
        save: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--pages" {
            a.pages = true;
            continue;
        }
        let v = it.next().unwrap_or_default();
        match flag.as_str() {
            "--addr" => a.addr = v,
            "--key" => {
                a.keys = match v.strip_prefix('@') {
                    Some(path) => std::fs::read_to_string(path)
                        .expect("--key @FILE")
                        .lines()
                        .map(|l| l.trim().to_owned())
                        .filter(|l| !l.is_empty())
                        .collect(),
                    None => vec![v],
                };
                assert!(!a.keys.is_empty(), "--key @FILE: no keys in the file");
            }
            "--conns" => a.conns = v.parse().expect("--conns"),
            "--secs" => a.secs = v.parse().expect("--secs"),
            "--rate" => a.rate = Some(v.parse().expect("--rate")),
            "--events" => {
                a.events = v.parse().expect("--events");
                assert!((1..=1000).contains(&a.events), "--events: 1 to 1000");
            }
            "--save-at" => a.save_at = Some(v.parse().expect("--save-at")),
            "--save" => a.save = Some(v),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// The body of request `n` of connection `conn`: `events` events, about 750 bytes each, with the
/// context our tracker sends (page, device, locale, timezone, screen, library) and an SDK's
/// forwarded `userAgent`, so `library` is merged into the context's JSON. What the events
/// share is formatted once per request; each event adds its index (a cheap generator, so the
/// ceiling run measures the server, not this).
fn body(buf: &mut Vec<u8>, run: u64, conn: usize, n: u64, events: usize, pages: bool) {
    buf.clear();
    let anon = format!("{run:08x}-{conn:04x}-4000-8000-{n:012x}");
    let kind = match pages {
        true => r#""type":"page","name":"Product""#,
        false => r#""type":"track","event":"Load Test""#,
    };
    let head = format!(r#"{{{kind},"anonymousId":"{anon}","messageId":"msg_{run:x}_{conn}_{n}_"#);
    let middle = format!(
        r#"","sessionId":"ses_{conn}_{n}","timestamp":"2026-11-22T10:00:00Z","properties":{{"plan":"pro","price":19.99,"currency":"EUR","sku":"sku-{n}","category":"shoes","tags":["new","sale"],"i":"#
    );
    // Page views: a path of its own per request (the connection's number and the request's).
    let product = match pages {
        true => format!("{conn}-{n}"),
        false => n.to_string(),
    };
    let tail = format!(
        r#"}},"context":{{"page":{{"url":"https://shop.example/products/{product}?ref=home","path":"/products/{product}","title":"Product {product} - Shop","referrer":"https://www.google.com/"}},"device":{{"type":"desktop"}},"locale":"en-US","timezone":"Europe/Paris","screen":{{"width":1440,"height":900}},"library":{{"name":"tributary.js","version":"1.4.0"}},"userAgent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"}}}}"#
    );
    buf.extend_from_slice(b"{\"sentAt\":\"2026-11-22T10:00:01Z\",\"batch\":[");
    for i in 0..events {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(head.as_bytes());
        let _ = write!(buf, "{i}");
        buf.extend_from_slice(middle.as_bytes());
        let _ = write!(buf, "{i}");
        buf.extend_from_slice(tail.as_bytes());
    }
    buf.extend_from_slice(b"]}");
}

#[derive(Default)]
struct Tally {
    requests: u64,
    accepted: u64,
    duplicates: u64,
    errors: u64,
    latencies: Vec<u32>,
}

/// The number after `"name":` in a JSON answer.
fn field(body: &[u8], name: &str) -> u64 {
    let pat = format!("\"{name}\":");
    let text = String::from_utf8_lossy(body);
    text.find(&pat)
        .map(|i| &text[i + pat.len()..])
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Reads one HTTP/1.1 answer (headers and a Content-Length body); returns status and body.
async fn read_answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<(u16, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                read_more(s, buf).await?;
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Ok((status, body));
        }
        read_more(s, buf).await?;
    }
}

async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = s.read(&mut chunk).await?;
    if n == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

async fn connection(a: std::sync::Arc<Args>, run: u64, conn: usize, start: Instant) -> Tally {
    let mut t = Tally::default();
    let Ok(mut s) = TcpStream::connect(&a.addr).await else {
        t.errors += 1;
        return t;
    };
    let _ = s.set_nodelay(true);
    let (mut body_buf, mut req, mut rbuf) = (Vec::new(), Vec::new(), Vec::new());
    let end = start + Duration::from_secs_f64(a.secs);
    let interval = a.rate.map(|r| Duration::from_secs_f64(a.conns as f64 / r));
    let mut saved = a.save_at.is_none();
    let mut n = 0u64;
    loop {
        let due = match interval {
            Some(i) => start + i.mul_f64(n as f64 + conn as f64 / a.conns as f64),
            None => Instant::now(),
        };
        if due >= end {
            break;
        }
        // Only a paced connection that is early waits: a timer costs a tick (about 1 ms).
        if due > Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
        body(&mut body_buf, run, conn, n, a.events, a.pages);
        if !saved && start.elapsed().as_secs_f64() >= a.save_at.unwrap_or(0.0) {
            if let Some(path) = &a.save {
                std::fs::write(path, &body_buf).expect("--save");
            }
            saved = true;
        }
        req.clear();
        let _ = write!(
            req,
            "POST /api/w/analytics/collect HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nX-App-Key: {}\r\nContent-Length: {}\r\n\r\n",
            a.addr,
            a.keys[(n as usize * a.conns + conn) % a.keys.len()],
            body_buf.len()
        );
        req.extend_from_slice(&body_buf);
        let sent = Instant::now();
        let answer = match s.write_all(&req).await {
            Ok(()) => read_answer(&mut s, &mut rbuf).await,
            Err(e) => Err(e),
        };
        n += 1;
        t.requests += 1;
        t.latencies
            .push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
        match answer {
            Ok((200, b)) => {
                t.accepted += field(&b, "accepted");
                t.duplicates += field(&b, "duplicates");
            }
            Ok(_) => t.errors += 1,
            Err(_) => {
                t.errors += 1;
                break;
            }
        }
    }
    t
}

fn main() {
    let a = std::sync::Arc::new(args());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64 & 0xffff_ffff);
    let start = Instant::now();
    let tallies = rt.block_on(async {
        let tasks: Vec<_> = (0..a.conns)
            .map(|c| tokio::spawn(connection(a.clone(), run, c, start)))
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap_or_default());
        }
        all
    });
    let secs = start.elapsed().as_secs_f64();
    let mut total = Tally::default();
    for t in tallies {
        total.requests += t.requests;
        total.accepted += t.accepted;
        total.duplicates += t.duplicates;
        total.errors += t.errors;
        total.latencies.extend(t.latencies);
    }
    total.latencies.sort_unstable();
    let pct = |p: f64| {
        let l = &total.latencies;
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let served = total.requests.saturating_sub(total.errors) * a.events as u64;
    println!(
        "requests={} events={} accepted={} duplicates={} errors={} secs={:.2} req_per_s={:.0} events_per_s={:.0} p50_us={} p99_us={}",
        total.requests,
        served,
        total.accepted,
        total.duplicates,
        total.errors,
        secs,
        total.requests as f64 / secs,
        served as f64 / secs,
        pct(0.50),
        pct(0.99)
    );
}
