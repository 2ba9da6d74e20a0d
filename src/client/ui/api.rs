//! The JSON the page reads and the requests that change files (restore, rewind, revert,
//! undo), each one daemon call made the way the commands make it (blocking, off the runtime),
//! its error passed on as the daemon's JSON error with a status: 400 for what the daemon
//! refused, 502 when it is gone.
//! `/api/events` streams the project's events as server-sent events.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::client::commands::Ctx;
use crate::client::connection::Connection;
use crate::client::ClientError;
use crate::protocol::methods::{
    DiffParams, ListParams, NoParams, RestoreParams, ShowParams, SubscribeParams, UndoParams,
};
use crate::protocol::results as r;
use crate::protocol::rpc;
use crate::protocol::turns::RevertParams;

/// The most files of one change the page is sent at once, and the bytes of its diff a page.
const PAGE_FILES: usize = 1000;
const PAGE_PATCH_BYTES: u64 = 512 << 10;

/// What the handlers are served with.
pub struct Ui {
    pub ctx: Ctx,
    /// The folder `ckpt ui` was started in: the page opens the project holding it.
    pub start: PathBuf,
}

#[derive(Deserialize)]
pub struct ListQuery {
    project: PathBuf,
    limit: Option<usize>,
}

#[derive(Deserialize)]
pub struct ShowQuery {
    project: PathBuf,
    id: String,
}

#[derive(Deserialize)]
pub struct DiffQuery {
    project: PathBuf,
    from: String,
    /// Another checkpoint; the files as they are now when absent.
    to: Option<String>,
    /// The patch's text from this byte on (a page of it, no file list); absent: the file list
    /// with line counts, no patch.
    offset: Option<u64>,
    /// `from` is a prompt: only the paths its own turn changed (as `ckpt log` counts it), not
    /// what other sessions or the user changed meanwhile.
    #[serde(default)]
    turn: bool,
}

#[derive(Deserialize)]
pub struct ProjectQuery {
    project: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreBody {
    project: PathBuf,
    id: String,
    /// Only the plan: what would be written, deleted and skipped.
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndoBody {
    project: PathBuf,
    #[serde(default)]
    dry_run: bool,
}

/// The watched projects, and the folder `ckpt ui` was started in (the page opens its project).
pub async fn projects(State(ui): State<Arc<Ui>>) -> Response {
    let start = ui.start.clone();
    daemon(ui, move |conn| {
        let projects = conn.call::<rpc::Projects>(&NoParams {})?;
        Ok(json!({ "projects": projects, "start": start }))
    })
    .await
}

/// Every checkpoint of every session (restores and pre-restore points included), newest first.
pub async fn list(State(ui): State<Arc<Ui>>, Query(q): Query<ListQuery>) -> Response {
    daemon(ui, move |conn| {
        conn.call::<rpc::List>(&ListParams {
            project: q.project,
            dialog: None,
            limit: q.limit,
            all_sessions: true,
            grep: None,
            remote: None,
            all: false,
            turns: true,
            steps: true,
        })
    })
    .await
}

/// A checkpoint with its metadata and its changes from its parent.
pub async fn show(State(ui): State<Arc<Ui>>, Query(q): Query<ShowQuery>) -> Response {
    daemon(ui, move |conn| {
        conn.call::<rpc::Show>(&ShowParams {
            project: q.project,
            id: q.id,
            files: false,
            dialog: None,
            max_entries: Some(PAGE_FILES),
            counts: true,
        })
    })
    .await
}

/// Two checkpoints (or one and the files now) compared: the changed files with their line
/// counts (the first [`PAGE_FILES`]), or, with `offset`, a page of the unified diff from there.
/// A change of 100,000 files shows its first screen at once; its text comes page by page.
pub async fn diff(State(ui): State<Arc<Ui>>, Query(q): Query<DiffQuery>) -> Response {
    let page = q.offset;
    daemon(ui, move |conn| {
        let mut paths = Vec::new();
        if q.turn {
            let shown = conn.call::<rpc::Show>(&ShowParams {
                project: q.project.clone(),
                id: q.from.clone(),
                files: false,
                dialog: None,
                max_entries: Some(10_000),
                counts: false,
            })?;
            // A prompt from before ckpt kept turns: the whole difference, as before.
            let turn = shown.turn_changes;
            let known = turn.is_some();
            let turn = turn.unwrap_or_default();
            let own = turn.files.into_iter().map(|f| f.path).chain(turn.ambiguous);
            paths = own.map(|p| q.project.join(p)).collect();
            if known && paths.is_empty() {
                // The turn changed nothing: nothing to compare (an empty list means every path).
                return Ok(serde_json::to_value(r::Diffed {
                    diff: r::DiffResult {
                        files: Vec::new(),
                        patch: page.map(|_| String::new()),
                        files_total: Some(0),
                        next_offset: None,
                        truncated: false,
                    },
                    from: shown.checkpoint.id,
                    to: None,
                })
                .unwrap_or_default());
            }
        }
        let diffed = conn.call::<rpc::Diff>(&DiffParams {
            project: q.project,
            from: q.from,
            to: q.to,
            paths,
            patch: page.is_some(),
            counts: page.is_none(),
            dialog: None,
            max_files: Some(if page.is_some() { 0 } else { PAGE_FILES }),
            offset: page.unwrap_or(0),
            max_bytes: Some(PAGE_PATCH_BYTES),
        })?;
        Ok(serde_json::to_value(diffed).unwrap_or_default())
    })
    .await
}

/// A restore, or its plan with `dry_run`.
pub async fn restore(State(ui): State<Arc<Ui>>, body: Json<RestoreBody>) -> Response {
    let Json(body) = body;
    daemon(ui, move |conn| {
        conn.call::<rpc::Restore>(&RestoreParams {
            project: body.project,
            id: body.id,
            paths: Vec::new(),
            dry_run: body.dry_run,
            dialog: None,
            by: None,
        })
    })
    .await
}

/// Takes back one turn's changes (or, with `dry_run`, plans it): a prompt's checkpoint or a
/// step, as `ckpt revert` does.
pub async fn revert(State(ui): State<Arc<Ui>>, body: Json<RestoreBody>) -> Response {
    let Json(body) = body;
    daemon(ui, move |conn| {
        conn.call::<rpc::Revert>(&RevertParams {
            project: body.project,
            id: body.id,
            paths: Vec::new(),
            dry_run: body.dry_run,
            force: false,
            dialog: None,
            later: false,
        })
    })
    .await
}

/// Rewinds a prompt: the files and, where the agent's session can be read, the conversation
/// forked to just before it (or the plan, with `dry_run`). It is `ckpt rewind ID --both --yes
/// --json` run as a process of this binary in this environment, so that it finds the agent's
/// sessions exactly where the command does.
pub async fn rewind(State(ui): State<Arc<Ui>>, body: Json<RestoreBody>) -> Response {
    let Json(body) = body;
    let answer = tokio::task::spawn_blocking(move || rewind_process(&ui, &body)).await;
    match answer {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(e)) => failure(e),
        Err(e) => failure(ClientError::Other(e.to_string())),
    }
}

fn rewind_process(ui: &Ui, body: &RestoreBody) -> Result<serde_json::Value, ClientError> {
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("--socket")
        .arg(&ui.ctx.paths.socket)
        .args(["--no-spawn", "--json", "-C"])
        .arg(&body.project)
        .args(["rewind", "--both", "--yes"]);
    if body.dry_run {
        cmd.arg("--dry-run");
    }
    // The checkpoint after `--`, so that no id is ever read as an option.
    let out = cmd
        .arg("--")
        .arg(&body.id)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()?;
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| ClientError::Other(format!("ckpt rewind answered no JSON ({e})")))?;
    if let Some(error) = value.get("error") {
        return Err(crate::client::connection::rpc_error(error));
    }
    Ok(value)
}

/// Undoes the last restore (or plans it).
pub async fn undo(State(ui): State<Arc<Ui>>, body: Json<UndoBody>) -> Response {
    let Json(body) = body;
    daemon(ui, move |conn| {
        conn.call::<rpc::Undo>(&UndoParams {
            project: body.project,
            dialog: None,
            dry_run: body.dry_run,
        })
    })
    .await
}

/// The project's events as they happen (each `data:` one event as `ckpt events` prints it).
/// A thread holds the subscription's daemon connection; the stream holds the means to close
/// it, so a page that goes away (the stream is dropped) closes it at once, and the daemon's
/// slot with it.
pub async fn events(State(ui): State<Arc<Ui>>, Query(q): Query<ProjectQuery>) -> Response {
    let mut conn = match connect(&ui).await {
        Ok(conn) => conn,
        Err(e) => return failure(e),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(256);
    let subscribed = tokio::task::spawn_blocking(move || {
        conn.call::<rpc::Subscribe>(&SubscribeParams {
            project: q.project,
            diffs: false,
        })?;
        let closer = conn.closer()?;
        std::thread::spawn(move || {
            while let Ok(Some(event)) = conn.next_notification() {
                if tx.blocking_send(event.to_string()).is_err() {
                    break;
                }
            }
        });
        Ok::<_, ClientError>(closer)
    })
    .await;
    let closer = match subscribed {
        Ok(Ok(closer)) => closer,
        Ok(Err(e)) => return failure(e),
        Err(e) => return failure(ClientError::Other(e.to_string())),
    };
    let stream = futures_util::stream::unfold((rx, closer), |(mut rx, closer)| async move {
        let line = rx.recv().await?;
        Some((
            Ok::<_, Infallible>(Event::default().data(line)),
            (rx, closer),
        ))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

async fn connect(ui: &Arc<Ui>) -> Result<Connection, ClientError> {
    let ui = ui.clone();
    tokio::task::spawn_blocking(move || ui.ctx.connect())
        .await
        .map_err(|e| ClientError::Other(e.to_string()))?
}

/// Runs `call` on a fresh connection to the daemon, off the runtime; its result as JSON.
async fn daemon<T: Serialize + Send + 'static>(
    ui: Arc<Ui>,
    call: impl FnOnce(&mut Connection) -> Result<T, ClientError> + Send + 'static,
) -> Response {
    let answer = tokio::task::spawn_blocking(move || {
        let mut conn = ui.ctx.connect()?;
        call(&mut conn)
    })
    .await;
    match answer {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(e)) => failure(e),
        Err(e) => failure(ClientError::Other(e.to_string())),
    }
}

fn failure(e: ClientError) -> Response {
    let status = match e {
        ClientError::Rpc(_) | ClientError::Usage(_) => StatusCode::BAD_REQUEST,
        ClientError::NoDaemon { .. } | ClientError::Unresponsive { .. } | ClientError::Io(_) => {
            StatusCode::BAD_GATEWAY
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, Json(json!({ "error": e.to_json() }))).into_response()
}
