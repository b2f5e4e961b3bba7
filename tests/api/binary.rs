//! The real binary for the tests that kill it: `tributary serve` on a free port, `kill -9`,
//! SIGTERM, and a small seeded generator. Shared by the `api` and `interop` test binaries.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::helpers::ADMIN_TOKEN;

/// A running `tributary serve`, killed (SIGKILL) on drop if still running; when a test fails,
/// the drop shows the server's last log lines.
pub struct Server {
    pub child: Child,
    pub base: String,
    /// The last lines it logged (stderr), to show when a test fails.
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "the last lines of {} (pid {}):\n{}",
                self.base,
                self.child.id(),
                self.log_tail(40)
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Lines of the server's log kept for `Server::log_tail`.
const LOG_LINES: usize = 200;

/// Starts `tributary serve` on a free port, with small files (60 rows, 150 ms, merged into the
/// lake at once) and 2 shards,
/// and waits until it listens.
pub fn start(data_dir: &Path) -> Server {
    start_with(data_dir, &[])
}

/// `start` with more `TRIBUTARY__...` variables (later ones win).
pub fn start_with(data_dir: &Path, env: &[(&str, &str)]) -> Server {
    start_bound(data_dir, "127.0.0.1:0", &[], env)
}

/// `start_with` listening on `bind` (a fixed port, to restart a node where others call it),
/// with more arguments of `serve` (e.g. `--role edge`).
pub fn start_bound(data_dir: &Path, bind: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args([
            "serve",
            "--bind",
            bind,
            "--data-dir",
            data_dir.to_str().unwrap(),
        ])
        .args(args)
        .env("TRIBUTARY_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "60")
        .env("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "150")
        .env("TRIBUTARY__COLLECTOR__LAKE_FILE_MAX_WAIT_MS", "1")
        .env("TRIBUTARY__COLLECTOR__SHARDS", "2")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tributary starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let log: Arc<Mutex<VecDeque<String>>> = Arc::default();
    let kept = log.clone();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            {
                let mut kept = kept.lock().unwrap();
                if kept.len() == LOG_LINES {
                    kept.pop_front();
                }
                kept.push_back(line.clone());
            }
            if !sent && line.contains("tributary listening") {
                let addr = line
                    .split("addr=")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .map(str::to_owned);
                let _ = tx.send(addr);
                sent = true;
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("server listens")
        .expect("address logged");
    Server {
        child,
        base: format!("http://{addr}"),
        log,
    }
}

/// A port of 127.0.0.1 free right now (another process may take it before it is bound: where
/// a process can, it binds port 0 instead and reports its port, as `start` does).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A small deterministic generator, seeded per run (the seed is printed to reproduce a failure).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

impl Server {
    /// Creates an app on the enterprise plan through the admin API; returns its integration key.
    pub async fn create_app(&self, client: &reqwest::Client, name: &str) -> String {
        let created: serde_json::Value = client
            .post(format!("{}/admin/v1/apps", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .json(&serde_json::json!({"name": name, "plan": "enterprise"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        created["data"]["integrationKey"]
            .as_str()
            .expect("an integration key")
            .to_owned()
    }

    /// The last lines the server logged, oldest first.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log.lock().unwrap();
        let skip = log.len().saturating_sub(lines);
        log.iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// SIGKILL, and waits for the process to be gone.
    pub fn kill_9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }

    /// SIGTERM once the server serves (its signal handlers are installed by then), then waits
    /// (at most 60 s) for a clean exit.
    pub async fn terminate(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let health = format!("{}/healthz", self.base);
        while !reqwest::get(&health).await.is_ok_and(|r| r.status() == 200) {
            assert!(Instant::now() < deadline, "the server never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.unwrap().success());
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "exit status {status}; the server's last lines:\n{}",
                    self.log_tail(30)
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no clean exit within 60 s of SIGTERM; the server's last lines:\n{}",
                self.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
