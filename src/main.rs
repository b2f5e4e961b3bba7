use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tributary::cli;
use tributary::config::Settings;
use tributary::startup::Application;

/// Tributary: feedback, acquisition and analytics service.
///
/// Configuration comes from config/default.toml (built in), then --config FILE, then
/// environment variables TRIBUTARY__SECTION__KEY (e.g. TRIBUTARY__PLANS__FREE__CONTACTS=3),
/// then the flags below. The admin token comes from TRIBUTARY_ADMIN_TOKEN, or is generated at
/// first start, printed once and kept in <data-dir>/admin_token.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server (Ctrl-C or SIGTERM stops it gracefully).
    Serve {
        /// Address to listen on, e.g. 127.0.0.1:8080 (port 0 picks a free port).
        #[arg(long)]
        bind: Option<String>,
        /// Directory for the database, the admin token and the event lake.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// A TOML file layered over the defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// `all` (default): the all-in-one server, also the control node of any edges.
        /// `edge`: an edge collector (collect, the tracker, the survey widget, health and
        /// metrics) that syncs with the control node at --control-url, with the fleet token
        /// in TRIBUTARY__FLEET__TOKEN (create one with `tributary fleet token create`).
        #[arg(long, value_parser = ["all", "edge"])]
        role: Option<String>,
        /// The control node's base URL (an edge), e.g. http://10.0.0.1:8080.
        #[arg(long)]
        control_url: Option<String>,
        /// This node's name in lake file names and on the Fleet page (collector.node_id);
        /// each node of a fleet needs its own.
        #[arg(long)]
        node_id: Option<String>,
    },
    /// The fleet's tokens, on a running control node (an edge presents one).
    Fleet {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::FleetCommand,
    },
    /// Manage apps (tenants) through a running server's admin API.
    Apps {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::AppsCommand,
    },
    /// Manage API keys through a running server's admin API.
    Keys {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::KeysCommand,
    },
    /// Dashboard accounts, made on a stopped server's data directory.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Print the OpenAPI document of every endpoint.
    Openapi,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create a dashboard owner (the first one replaces the setup page). The password comes
    /// from TRIBUTARY_ADMIN_PASSWORD or standard input.
    Create(cli::AdminCreate),
}

fn run_client(f: impl std::future::Future<Output = Result<(), String>>) -> std::process::ExitCode {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(f) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// mimalloc: under collector load it takes about 9% of the CPU samples where glibc's malloc
/// took 16% (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tributary::memory::configure_allocator();
    tributary::telemetry::init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            bind,
            data_dir,
            config,
            role,
            control_url,
            node_id,
        } => {
            let mut settings = match Settings::load(config.as_deref()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return std::process::ExitCode::from(2);
                }
            };
            if let Some(b) = bind {
                settings.server.bind = b;
            }
            if let Some(d) = data_dir {
                settings.storage.data_dir = d;
            }
            if let Some(r) = role {
                settings.fleet.role = match r.as_str() {
                    "edge" => tributary::config::Role::Edge,
                    _ => tributary::config::Role::All,
                };
            }
            if let Some(u) = control_url {
                settings.fleet.control_url = u;
            }
            if let Some(n) = node_id {
                settings.collector.node_id = n;
            }
            if let Err(e) = settings.check() {
                eprintln!("error: {e}");
                return std::process::ExitCode::from(2);
            }
            let result = actix_web::rt::System::new().block_on(async move {
                let clock = std::sync::Arc::new(tributary::clock::SystemClock);
                let app = Application::build(settings, clock)?;
                app.run_until_stopped().await
            });
            match result {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "tributary stopped with an error");
                    eprintln!("error: {e}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Apps { target, command } => run_client(cli::apps(&target, command)),
        Command::Keys { target, command } => run_client(cli::keys(&target, command)),
        Command::Fleet { target, command } => run_client(cli::fleet(&target, command)),
        Command::Admin {
            command: AdminCommand::Create(args),
        } => match cli::admin_create(&args) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::FAILURE
            }
        },
        Command::Openapi => {
            println!(
                "{}",
                serde_json::to_string_pretty(&tributary::startup::openapi())
                    .expect("openapi serializes")
            );
            std::process::ExitCode::SUCCESS
        }
    }
}
