//! `ckptd`: the checkpoint daemon. Runs in the foreground; logs to stderr.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use ckpt::config::{Config, Paths};
use ckpt::daemon::{self, service, Daemon};
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
    daemon::allocator::settle();
    let args = Args::parse();
    // Stores hold copies of the user's files: nothing ckptd writes is readable by others.
    ckpt::fs::private_umask();
    let config = Config::load(args.config.as_deref()).context("loading configuration")?;
    init_logging(&config, args.verbose);
    let open_files = daemon::raise_open_files_limit();
    tracing::debug!(?open_files, "limit on open files");
    let paths = Paths::resolve(&config, args.socket.as_deref()).context("resolving paths")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ckptd")
        // The index and the trees are walked recursively, and folders may nest as deep as git
        // allows (2,048, what an import or a fetch accepts): 8 MiB holds that walk with room
        // to spare (a stack is only address space until it is used).
        .thread_stack_size(8 << 20)
        .build()
        .context("starting the runtime")?;
    let result = runtime.block_on(async {
        let _data_lock = daemon::lock_data_dir(&paths.data_dir, &paths.socket)
            .context("locking the data directory")?;
        // Under systemd socket activation the socket is systemd's: take it, never bind or
        // remove it.
        let activated = service::activated_listener().context("taking the activated socket")?;
        let (listener, _guard) = match activated {
            Some(listener) => (listener, None),
            None => {
                let (listener, guard) =
                    daemon::bind(&paths.socket).context("binding the socket")?;
                (listener, Some(guard))
            }
        };
        tracing::info!(socket = %paths.socket.display(), data = %paths.data_dir.display(),
            pid = std::process::id(), activated = _guard.is_none(), "ckptd ready");
        let daemon = Arc::new(Daemon::new(config, paths).with_config_file(args.config.clone()));
        reload_on_sighup(&daemon);
        service::start_watchdog();
        service::ready();
        let shutdown = async {
            shutdown_signal().await;
            service::stopping();
        };
        daemon::run(daemon, listener, shutdown).await;
        Ok(())
    });
    // A blocking thread stuck in the kernel (a dead network mount) must not keep the process.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

/// Logs to journald (structured, with priorities) when systemd connected stderr to the journal;
/// else to stderr, with colours only on a terminal and never with `NO_COLOR`.
fn init_logging(config: &Config, verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let default = match verbose {
        0 => config.log_level.clone().unwrap_or_else(|| "info".into()),
        1 => "debug".into(),
        _ => "trace".into(),
    };
    // notify warns when it cannot remove the watch of a folder that was deleted: expected,
    // and handled (the parent's event reports the deletion), so not worth a warning.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(default)
            .add_directive("notify::inotify=error".parse().expect("a valid directive"))
    });
    let registry = tracing_subscriber::registry().with(filter);
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        match tracing_journald::layer() {
            Ok(journald) => {
                return registry
                    .with(journald.with_syslog_identifier("ckptd".into()))
                    .init()
            }
            Err(e) => eprintln!("ckptd: cannot reach journald ({e}); logging to stderr"),
        }
    }
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    registry.with(stderr).init();
}

/// SIGHUP re-reads the configuration; an invalid file is logged and the old one kept.
fn reload_on_sighup(daemon: &Arc<Daemon>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup()).expect("installing a SIGHUP handler");
    let daemon = daemon.clone();
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP received: reloading the configuration");
            if let Err(e) = daemon.reload().await {
                tracing::error!(error = %e, "the configuration was not reloaded; the old one stays in effect");
            }
        }
    });
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
