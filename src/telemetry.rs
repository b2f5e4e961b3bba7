//! Logging: `tracing` to stderr; `RUST_LOG` filters (default `info`). Colours only on a terminal.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sled=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
