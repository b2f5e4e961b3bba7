//! A TCP proxy the fault tests can cut: it forwards every connection to an upstream address
//! (moto), `cut()` stops listening (a connect is refused) and closes the connections in flight,
//! `restore()` listens again on the same port. The upstream keeps its state across a cut (moto's
//! bucket is in its memory), so the lake "comes back" with what it held.
//!
//! It runs on its own runtime (one worker thread), so a test that blocks its own runtime for a
//! while (a Python reader, a process start) does not stall the traffic through it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

pub struct Proxy {
    /// The port it listens on (the same after every `restore`).
    pub port: u16,
    upstream: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    /// The accept loop while listening; it owns the connections in flight.
    listening: Option<JoinHandle<()>>,
    /// Connections open through the proxy now.
    open: Arc<AtomicUsize>,
}

/// A port below the kernel's ephemeral range, so that no outgoing connection or port-0 bind of
/// another test can take it while the proxy is cut.
fn fixed_port_listener() -> std::net::TcpListener {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap_or_else(|_| "32768 60999".into());
    let low: u16 = range
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(32768);
    let (from, span) = (low.saturating_sub(12_000).max(1024), 10_000u32);
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
    for i in 0..span {
        let port = from + ((seed.wrapping_add(i * 7919)) % span) as u16;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return l;
        }
    }
    panic!("no free port in {from}..{}", u32::from(from) + span);
}

/// Counts a connection as open until dropped (whether it ended or was cut).
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    upstream: SocketAddr,
    open: Arc<AtomicUsize>,
) {
    listener.set_nonblocking(true).unwrap();
    let listener = TcpListener::from_std(listener).expect("a tokio listener");
    // Dropping this set (when the loop is aborted by `cut`) aborts every connection's task,
    // which closes both of its sockets.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut client, _)) = accepted else { continue };
                open.fetch_add(1, Ordering::SeqCst);
                let guard = OpenGuard(open.clone());
                connections.spawn(async move {
                    let _guard = guard;
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
            // Reap finished connections so the set does not grow over a long test.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

impl Proxy {
    /// Listens on 127.0.0.1 and forwards to `upstream` (e.g. `127.0.0.1:5000`).
    pub fn start(upstream: SocketAddr) -> Proxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("test-proxy")
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        let listener = fixed_port_listener();
        let port = listener.local_addr().unwrap().port();
        let mut proxy = Proxy {
            port,
            upstream,
            runtime: Some(runtime),
            listening: None,
            open: Arc::default(),
        };
        proxy.listen(listener);
        proxy
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Connections open through the proxy now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    fn listen(&mut self, listener: std::net::TcpListener) {
        let task = accept_loop(listener, self.upstream, self.open.clone());
        self.listening = Some(self.runtime.as_ref().unwrap().spawn(task));
    }

    /// Stops listening (connects are refused from the moment this returns) and closes every
    /// connection in flight. Cutting a cut proxy does nothing.
    pub async fn cut(&mut self) {
        let Some(task) = self.listening.take() else {
            return;
        };
        task.abort();
        // Once the aborted task is gone, its listener and its connections are dropped.
        let _ = task.await;
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.open_connections() > 0 {
            assert!(
                Instant::now() < deadline,
                "{} proxied connections still open 5 s after the cut",
                self.open_connections()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Listens again on the same port. Restoring a listening proxy does nothing.
    pub async fn restore(&mut self) {
        if self.listening.is_some() {
            return;
        }
        // std sets SO_REUSEADDR, so the cut connections' TIME_WAIT does not hold the port; retry
        // a little anyway in case the kernel is slow to release it.
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match std::net::TcpListener::bind(("127.0.0.1", self.port)) {
                Ok(l) => break l,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "the proxy cannot listen again on {}: {e}",
                        self.port
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        self.listen(listener);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Tests drop the proxy inside their own runtime, where a runtime may not be dropped
        // (that would block); shut it down in the background instead.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The proxy's own check, with an echo server as the upstream.
#[tokio::test]
async fn the_proxy_forwards_refuses_when_cut_and_listens_again_on_its_port() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = echo.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = echo.accept().await.unwrap();
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    async fn ping(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await?;
        Ok(buf.to_vec())
    }

    let mut proxy = Proxy::start(upstream);
    let addr = SocketAddr::from(([127, 0, 0, 1], proxy.port));
    let mut in_flight = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ping(&mut in_flight).await.unwrap(), b"ping");
    assert_eq!(proxy.open_connections(), 1);

    proxy.cut().await;
    let refused = TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let mut rest = Vec::new();
    let closed = in_flight.read_to_end(&mut rest).await;
    assert!(
        closed.is_err() || rest.is_empty(),
        "the connection in flight was closed: {closed:?} {rest:?}"
    );

    proxy.restore().await;
    let mut again = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ping(&mut again).await.unwrap(), b"ping");
    assert_eq!(proxy.port, addr.port(), "the same port");
}
