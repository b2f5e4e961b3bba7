//! Reading the lake with DuckDB and Spark (Python, from `.venv`, set up by `tests/run`) and
//! running the `moto` S3 server for the object-store path.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value};

pub use crate::lake::LakeView;

pub fn venv_bin(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".venv/bin")
        .join(name);
    if !p.exists() {
        // One line, and stop: every test of this binary needs the same set-up. Written to the
        // stderr handle itself, which the test harness does not capture.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "interop tests need DuckDB, Spark and moto in .venv: run tests/run once (it installs them)"
        );
        std::process::exit(2);
    }
    p
}

/// Runs `tests/support/lake.py` with `args` and parses the JSON it prints.
fn lake_py<T: serde::de::DeserializeOwned>(args: &[&std::ffi::OsStr]) -> T {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/lake.py");
    let out = Command::new(venv_bin("python"))
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "lake.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("lake.py prints JSON")
}

fn run_reader(args: &[&str]) -> LakeView {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    lake_py(&args)
}

/// DuckDB's probe of the first file's Bloom filter on `anonymous_id`: whether it rules out an
/// id the file holds, and how many of 20 ids it does not hold it rules out.
#[derive(Debug, serde::Deserialize)]
pub struct BloomProbe {
    pub held_excluded: bool,
    pub absent_excluded_of_20: usize,
}

pub fn bloom_probe(lake_dir: &Path) -> BloomProbe {
    #[derive(serde::Deserialize)]
    struct Probed {
        anonymous_id_bloom: BloomProbe,
    }
    let probed: Probed = lake_py(&["local".as_ref(), lake_dir.as_os_str()]);
    probed.anonymous_id_bloom
}

pub fn read_local(lake_dir: &Path) -> LakeView {
    run_reader(&["local", lake_dir.to_str().unwrap()])
}

/// What DuckDB computes over the lake for one app: the figures the traffic rollups must show
/// (`byType`, `events`, exact `visitors` and `identifiedVisitors`, `topPages` and `topEvents`
/// as `[name, count]` pairs).
pub fn rollup_by_sql(lake_dir: &Path, app_id: &str) -> Value {
    lake_py(&["rollup".as_ref(), lake_dir.as_os_str(), app_id.as_ref()])
}

/// `rollup_by_sql` of each of `apps` over an S3 lake (fetched once), by app id.
pub fn rollup_by_sql_s3(endpoint: &str, bucket: &str, apps: &[&str]) -> Map<String, Value> {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["rollup-s3".as_ref(), endpoint.as_ref(), bucket.as_ref()];
    args.extend(apps.iter().map(std::ffi::OsStr::new));
    lake_py(&args)
}

pub fn read_s3(endpoint: &str, bucket: &str) -> LakeView {
    run_reader(&["s3", endpoint, bucket])
}

/// What an S3 lake holds, read with DuckDB: its number of files and every row's messageId
/// (duplicates kept), without the other columns, for lakes of millions of rows.
#[derive(Debug, Deserialize)]
pub struct S3Ids {
    pub files: usize,
    pub ids: Vec<String>,
}

pub fn read_s3_ids(endpoint: &str, bucket: &str) -> S3Ids {
    lake_py(&["s3-ids".as_ref(), endpoint.as_ref(), bucket.as_ref()])
}

/// What Spark sees in a local lake: column types, and each row's timestamp (µs) by messageId.
#[derive(Debug, Deserialize)]
pub struct SparkView {
    pub types: Map<String, Value>,
    pub count: usize,
    pub timestamps: Map<String, Value>,
}

pub fn read_with_spark(lake_dir: &Path) -> SparkView {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/spark_read.py");
    let out = Command::new(venv_bin("python"))
        .arg(script)
        .arg(lake_dir)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "spark_read.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("spark_read.py prints JSON");
    serde_json::from_str(json).expect("spark_read.py prints JSON")
}

/// Points `lake` at `bucket` of the S3 server at `endpoint` (moto, or a proxy in front of it).
pub fn on_s3(lake: &mut tributary::config::LakeSettings, endpoint: &str, bucket: &str) {
    lake.kind = tributary::config::LakeKind::S3;
    lake.s3_bucket = bucket.into();
    lake.s3_endpoint = endpoint.into();
    lake.s3_allow_http = true;
    lake.s3_access_key_id = "test".into();
    lake.s3_secret_access_key = "test".into();
}

/// `on_s3` as the binary's `TRIBUTARY__LAKE__...` variables.
pub fn s3_env<'a>(endpoint: &'a str, bucket: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("TRIBUTARY__LAKE__KIND", "s3"),
        ("TRIBUTARY__LAKE__S3_BUCKET", bucket),
        ("TRIBUTARY__LAKE__S3_ENDPOINT", endpoint),
        ("TRIBUTARY__LAKE__S3_ALLOW_HTTP", "true"),
        ("TRIBUTARY__LAKE__S3_ACCESS_KEY_ID", "test"),
        ("TRIBUTARY__LAKE__S3_SECRET_ACCESS_KEY", "test"),
    ]
}

/// A moto S3 server on 127.0.0.1, stopped on drop.
pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Moto {
    pub async fn start(bucket: &str) -> Moto {
        let deadline = Instant::now() + Duration::from_secs(60);
        // A port free when picked may be taken before moto binds it (another test's
        // connection): then moto exits, and it starts again on another.
        let mut moto = Moto::spawn();
        let client = crate::helpers::test_client();
        loop {
            // moto creates a bucket on an unsigned PUT.
            if let Ok(r) = client
                .put(format!("{}/{bucket}", moto.endpoint))
                .send()
                .await
            {
                if r.status().is_success() {
                    return moto;
                }
            }
            assert!(Instant::now() < deadline, "moto did not start within 60 s");
            if moto.child.try_wait().is_ok_and(|exited| exited.is_some()) {
                moto = Moto::spawn();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `moto_server` on a port free right now.
    fn spawn() -> Moto {
        let port = crate::binary::free_port();
        let child = Command::new(venv_bin("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lake.py watch`: a reader counting a local lake in a loop until `finish`.
pub struct Watcher {
    /// Taken by `finish`; a watcher dropped without it (a failed test) is killed.
    child: Option<Child>,
    stop: PathBuf,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What the reader saw: each distinct "files rows-of-others" with its number of reads.
#[derive(Debug, Deserialize)]
pub struct Watched {
    pub seen: std::collections::BTreeMap<String, usize>,
    pub reads: usize,
    pub errors: Vec<String>,
}

impl Watcher {
    pub fn start(lake_dir: &Path, stop: &Path, user: &str, anons: &[&str]) -> Watcher {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/lake.py");
        let child = Command::new(venv_bin("python"))
            .arg(script)
            .arg("watch")
            .arg(lake_dir)
            .arg(stop)
            .arg(user)
            .args(anons)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python runs");
        Watcher {
            child: Some(child),
            stop: stop.to_path_buf(),
        }
    }

    pub fn finish(mut self) -> Watched {
        std::fs::write(&self.stop, b"stop").unwrap();
        let child = self.child.take().expect("a watcher finishes once");
        let out = child.wait_with_output().expect("the watcher ends");
        assert!(out.status.success(), "lake.py watch failed");
        serde_json::from_slice(&out.stdout).expect("lake.py watch prints JSON")
    }
}
