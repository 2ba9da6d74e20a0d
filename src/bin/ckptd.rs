//! `ckptd`: the checkpoint daemon. Runs in the foreground; logs to stderr.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use ckpt::config::{Config, Paths};
use ckpt::daemon::{self, Daemon};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "ckptd",
    version,
    about = "The ckpt daemon: records and restores project checkpoints"
)]
struct Args {
    /// Configuration file (default: $XDG_CONFIG_HOME/ckpt/config.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Socket to listen on (overrides the config file).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// More logging (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Stores hold copies of the user's files: nothing ckptd writes is readable by others.
    ckpt::safe_io::private_umask();
    let config = Config::load(args.config.as_deref()).context("loading configuration")?;
    init_logging(&config, args.verbose);
    let paths = Paths::resolve(&config, args.socket.as_deref()).context("resolving paths")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ckptd")
        .build()
        .context("starting the runtime")?;
    let result = runtime.block_on(async {
        let _data_lock = daemon::lock_data_dir(&paths.data_dir, &paths.socket)
            .context("locking the data directory")?;
        let (listener, _guard) = daemon::bind(&paths.socket).context("binding the socket")?;
        tracing::info!(socket = %paths.socket.display(), data = %paths.data_dir.display(), pid = std::process::id(), "ckptd ready");
        let daemon = Arc::new(Daemon::new(config, paths));
        daemon::run(daemon, listener, shutdown_signal()).await;
        Ok(())
    });
    // A blocking thread stuck in the kernel (a dead network mount) must not keep the process.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

fn init_logging(config: &Config, verbose: u8) {
    let default = match verbose {
        0 => config.log_level.clone().unwrap_or_else(|| "info".into()),
        1 => "debug".into(),
        _ => "trace".into(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}
