//! `ckpt ui`: a local page to look at the timeline — every watched project's checkpoints
//! labelled by their prompts, a checkpoint's changes as a diff, any two compared, a restore
//! planned before it is carried out and undone after — updated live from the daemon's events.
//!
//! The page is served by this process (axum, on a runtime of its own) on 127.0.0.1 only; it
//! talks to the daemon the way every command does, through [`Ctx::connect`]. Nothing is reached
//! without the random token the printed URL carries ([`guard`]); the page's files are compiled
//! in (it works offline) and run under a strict CSP ([`page`]); the JSON it reads and the
//! requests that change files are in [`api`].

mod api;
mod guard;
mod page;

use std::future::IntoFuture;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use super::Ctx;
use crate::client::ClientError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The port to listen on (default: any free one).
    #[arg(long, value_name = "N", default_value_t = 0)]
    port: u16,
    /// Print the URL without opening a browser.
    #[arg(long)]
    no_open: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    // The daemon is asked now, so that a missing one is said here rather than on the page.
    ctx.connect()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)))
                .await
                .map_err(|e| {
                    ClientError::Other(format!("cannot listen on 127.0.0.1:{}: {e}", args.port))
                })?;
        let port = listener.local_addr()?.port();
        let access = Arc::new(guard::Access::new(port)?);
        let url = access.url();
        let ui = Arc::new(api::Ui {
            ctx: ctx.clone(),
            start: ctx.project(),
        });
        // The URL is the first line on stdout (with --json, in one JSON document).
        let mut stdout = std::io::stdout().lock();
        match ctx.out.json {
            true => writeln!(
                stdout,
                "{}",
                serde_json::json!({ "url": url, "port": port })
            )?,
            false => writeln!(stdout, "{url}")?,
        }
        stdout.flush()?;
        drop(stdout);
        if !args.no_open {
            open_browser(&url);
        }
        if !ctx.out.quiet {
            eprintln!("ckpt: serving the timeline on 127.0.0.1:{port} until interrupted (Ctrl-C)");
        }
        let app = router(ui, access);
        let stop = Arc::new(tokio::sync::Notify::new());
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown({
                let stop = stop.clone();
                async move { stop.notified().await }
            })
            .into_future();
        tokio::pin!(serve);
        tokio::select! {
            served = &mut serve => served?,
            _ = tokio::signal::ctrl_c() => {
                stop.notify_one();
                // Pages' event streams never end by themselves: they get a second, no more.
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), serve).await;
            }
        }
        Ok(0)
    })
}

fn router(ui: Arc<api::Ui>, access: Arc<guard::Access>) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/app.css", get(page::style))
        .route("/api/projects", get(api::projects))
        .route("/api/list", get(api::list))
        .route("/api/show", get(api::show))
        .route("/api/diff", get(api::diff))
        .route("/api/events", get(api::events))
        .route("/api/restore", post(api::restore))
        .route("/api/rewind", post(api::rewind))
        .route("/api/undo", post(api::undo))
        .fallback(page::not_found)
        .layer(axum::middleware::from_fn_with_state(access, guard::check))
        .with_state(ui)
}

/// Opens `url` with the desktop's browser (`xdg-open`), without waiting for it; a failure is
/// only said (the URL is printed).
fn open_browser(url: &str) {
    let opened = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = opened {
        eprintln!("ckpt: could not open a browser (xdg-open: {e}); open the URL above");
    }
}
