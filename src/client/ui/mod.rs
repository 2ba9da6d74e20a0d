//! `ckpt ui`: a local page to look at the timeline — every watched project's checkpoints
//! labelled by their prompts, a checkpoint's changes as a diff, any two compared, a restore
//! planned before it is carried out and undone after — updated live from the daemon's events.
//!
//! The page is served by this process (axum and hyper, on a runtime of its own) on 127.0.0.1
//! only, to connections of this user only ([`serve`], [`peer`]); it talks to the daemon the way
//! every command does, through [`Ctx::connect`]. No data is reached without the random token the
//! printed URL carries in its fragment ([`guard`]); the browser is handed a private file that
//! leads to that URL, never the token itself (another user reads a process's arguments in
//! `/proc`). The page's files are compiled in (it works offline) and run under a strict CSP
//! ([`page`]); the JSON it reads and the requests that change files are in [`api`].

mod api;
mod guard;
mod page;
mod peer;
mod serve;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use crate::client::commands::Ctx;
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
        let listener = tokio::net::TcpListener::bind(SocketAddr::from((peer::LOOPBACK, args.port)))
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
        // The browser is given a file only this user can read, which leads to the URL.
        let opener = match args.no_open {
            true => None,
            false => Some(Opener::write(&ctx.paths.socket, port, &url)?),
        };
        if let Some(opener) = &opener {
            open_browser(&opener.0);
        }
        if !ctx.out.quiet {
            eprintln!("ckpt: serving the timeline on 127.0.0.1:{port} until interrupted (Ctrl-C)");
        }
        let app = router(ui, access);
        serve::serve(listener, app, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
        drop(opener);
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
        .route("/api/revert", post(api::revert))
        .route("/api/undo", post(api::undo))
        .fallback(page::not_found)
        .layer(axum::middleware::from_fn_with_state(access, guard::check))
        .with_state(ui)
}

/// The file the browser opens: a page of this user's private runtime folder (0700, a 0600
/// file) that sends the browser on to the URL with the token. Removed when `ckpt ui` stops.
struct Opener(PathBuf);

impl Opener {
    fn write(socket: &Path, port: u16, url: &str) -> Result<Opener, ClientError> {
        use std::os::unix::fs::OpenOptionsExt;
        // The socket's folder is the private one of the runtime (or data) directory.
        let dir = socket
            .parent()
            .ok_or_else(|| ClientError::Other("the socket has no folder".into()))?;
        let path = dir.join(format!("ui-{port}.html"));
        let _ = std::fs::remove_file(&path);
        let page = format!(
            "<!DOCTYPE html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" \
             content=\"0;url={url}\">\n<title>ckpt ui</title>\n<p><a href=\"{url}\">Open the \
             ckpt timeline</a></p>\n"
        );
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| ClientError::Other(format!("cannot write {}: {e}", path.display())))?;
        file.write_all(page.as_bytes())?;
        Ok(Opener(path))
    }
}

impl Drop for Opener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Opens `page` (a file) with the desktop's browser (`xdg-open`), without waiting for it; a
/// failure is only said (the URL is printed).
fn open_browser(page: &Path) {
    let opened = std::process::Command::new("xdg-open")
        .arg(page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = opened {
        eprintln!("ckpt: could not open a browser (xdg-open: {e}); open the URL above");
    }
}
