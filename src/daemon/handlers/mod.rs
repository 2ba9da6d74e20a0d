//! One function per method: parse the params, find the project, run the store work behind the
//! project's lock, and turn every failure into an error with a stable code.
//!
//! This file holds the dispatch, the shared helpers and the daemon and project methods;
//! `checkpoints` records and inspects checkpoints, `restores` changes files (restore, undo,
//! edit transactions), `timeline` handles dialogs and sessions.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use gix::bstr::BString;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::project::{save_registry, Project};
use super::Daemon;
use crate::protocol::methods::*;
use crate::protocol::{
    decode_request, error_line, notification_line, response_line, ErrorCode, RpcError,
    PROTOCOL_VERSION,
};
use crate::store::checkpoint::parse_id;
use crate::store::checkpoint::validate_dialog;
use crate::store::diff::diff;
use crate::store::import::ImportError;
use crate::store::snapshot::{Snapshot, SnapshotOptions};
use crate::store::treediff::diff_trees;
use crate::store::{
    CheckpointError, NewCheckpoint, RestoreError, RestoreOptions, SnapshotError, DEFAULT_DIALOG,
};

type Reply = Result<Value, RpcError>;

mod checkpoints;
pub(crate) use checkpoints::record_auto;
mod restores;
mod timeline;

use checkpoints::*;
use restores::*;
use timeline::*;

/// What a request knows of the connection it came on.
pub struct Conn {
    /// Lines to send to the client.
    pub tx: tokio::sync::mpsc::Sender<Vec<u8>>,
    /// Becomes true when the connection is closing (daemon shutdown, framing error).
    pub closed: tokio::sync::watch::Receiver<bool>,
    /// Set once the connection streams events: it is never idle from then on.
    pub subscribed: std::sync::atomic::AtomicBool,
}

/// Handles one request line; returns the reply line (none for notifications) and whether the
/// daemon should shut down.
pub async fn handle_line(
    daemon: &Arc<Daemon>,
    line: &[u8],
    conn: &Conn,
) -> (Option<Vec<u8>>, bool) {
    let request = match decode_request(line) {
        Ok(r) => r,
        Err((id, err)) => return (Some(error_line(&id, &err)), false),
    };
    let id = request.id.clone().unwrap_or(Value::Null);
    let shutdown = request.method == "shutdown";
    tracing::debug!(method = %request.method, "request");
    if request.method == "subscribe" {
        // The subscription sends its own reply, before any event.
        let result = match parse(request.params) {
            Ok(params) => {
                subscribe(
                    daemon,
                    params,
                    request.id.clone().unwrap_or(Value::Null),
                    conn,
                )
                .await
            }
            Err(e) => Err(e),
        };
        return match result {
            Ok(()) => (None, false),
            Err(e) => (Some(error_line(&id, &e)), false),
        };
    }
    let result = dispatch(daemon, &request.method, request.params).await;
    if let Err(e) = &result {
        tracing::info!(method = %request.method, code = e.code, error = %e.message, "request failed");
    }
    let reply = match (&request.id, result) {
        (None, _) => None,
        (Some(id), Ok(value)) => Some(response_line(id, &value)),
        (Some(id), Err(err)) => Some(error_line(id, &err)),
    };
    (reply, shutdown)
}

async fn dispatch(daemon: &Arc<Daemon>, method: &str, params: Option<Value>) -> Reply {
    match method {
        "hello" => hello(parse(params)?),
        "status" => status(daemon, parse::<NoParams>(params)?).await,
        "watch" => watch(daemon, parse(params)?).await,
        "unwatch" => unwatch(daemon, parse(params)?).await,
        "projects" => projects(daemon, parse::<NoParams>(params)?).await,
        "checkpoint" => checkpoint(daemon, parse(params)?).await,
        "list" => list(daemon, parse(params)?).await,
        "show" => show(daemon, parse(params)?).await,
        "diff" => diff_method(daemon, parse(params)?).await,
        "restore" => restore(daemon, parse(params)?).await,
        "undo" => undo(daemon, parse(params)?).await,
        "tag" => tag(daemon, parse(params)?).await,
        "export_patch" => export_patch(daemon, parse(params)?).await,
        "export_bundle" => export_bundle(daemon, parse(params)?).await,
        "import_bundle" => import_bundle(daemon, parse(params)?).await,
        "note" => note(daemon, parse(params)?).await,
        "dialog_fork" => dialog_fork(daemon, parse(params)?).await,
        "edit_begin" => edit_begin(daemon, parse(params)?).await,
        "edit_commit" => edit_commit(daemon, parse(params)?).await,
        "edit_abort" => edit_abort(daemon, parse(params)?).await,
        "session_status" => session_status(daemon, parse(params)?).await,
        "session_approve" => session_approve(daemon, parse(params)?).await,
        "session_reset" => session_reset(daemon, parse(params)?).await,
        "dialog_new" => dialog_new(daemon, parse(params)?).await,
        "dialog_list" => dialog_list(daemon, parse(params)?).await,
        "dialog_rm" => dialog_rm(daemon, parse(params)?).await,
        "dialog_keep" => dialog_keep(daemon, parse(params)?).await,
        "prune" => prune(daemon, parse(params)?).await,
        "gc" => gc(daemon, parse(params)?).await,
        "verify" => verify(daemon, parse(params)?).await,
        "fsck" => fsck(daemon, parse(params)?).await,
        "rescan" => rescan(daemon, parse(params)?).await,
        "shutdown" => {
            parse::<NoParams>(params)?;
            Ok(json!({ "stopping": true }))
        }
        other => Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!("unknown method `{other}`"),
        )),
    }
}

/// Records a checkpoint and tells the project's subscribers.
fn record(
    project: &Project,
    opened: &mut super::project::Opened,
    tree: gix::ObjectId,
    new: NewCheckpoint,
) -> Result<crate::store::Checkpoint, RpcError> {
    let c = opened
        .store
        .record_checkpoint(tree, opened.index.skipped(), new)
        .map_err(checkpoint_error)?;
    *project
        .last_recorded
        .lock()
        .expect("last-recorded lock poisoned") = Some(tree);
    emit_created(project, &c);
    Ok(c)
}

/// Tells the project's subscribers about a new checkpoint.
fn emit_created(project: &Project, c: &crate::store::Checkpoint) {
    project.events.emit(
        "checkpoint_created",
        json!({
            "id": c.id, "dialog": c.dialog, "seq": c.seq, "session": c.session, "kind": c.kind,
            "label": c.label, "files": c.files, "added": c.added, "modified": c.modified,
            "deleted": c.deleted, "skipped": c.skipped.len(),
        }),
    );
}

/// Decodes `params` as `method`'s parameters, as the dispatch does: what the request fuzz
/// target drives with arbitrary input.
pub fn check_params(method: &str, params: Option<Value>) -> Result<(), RpcError> {
    fn p<T: DeserializeOwned>(params: Option<Value>) -> Result<(), RpcError> {
        parse::<T>(params).map(drop)
    }
    match method {
        "hello" => p::<HelloParams>(params),
        "status" | "projects" | "shutdown" => p::<NoParams>(params),
        "watch" => p::<WatchParams>(params),
        "unwatch" => p::<PathParams>(params),
        "checkpoint" => p::<CheckpointParams>(params),
        "list" => p::<ListParams>(params),
        "show" => p::<ShowParams>(params),
        "diff" => p::<DiffParams>(params),
        "restore" => p::<RestoreParams>(params),
        "undo" => p::<UndoParams>(params),
        "tag" => p::<TagParams>(params),
        "note" => p::<NoteParams>(params),
        "export_patch" => p::<ExportPatchParams>(params),
        "export_bundle" => p::<ExportBundleParams>(params),
        "import_bundle" => p::<ImportBundleParams>(params),
        "dialog_fork" => p::<ForkParams>(params),
        "edit_begin" => p::<EditBeginParams>(params),
        "edit_commit" | "edit_abort" => p::<EditParams>(params),
        "session_status" => p::<SessionParams>(params),
        "session_approve" => p::<SessionApproveParams>(params),
        "session_reset" => p::<SessionResetParams>(params),
        "dialog_new" => p::<DialogNewParams>(params),
        "dialog_list" | "verify" | "rescan" | "gc" => p::<ProjectParams>(params),
        "dialog_rm" => p::<DialogParams>(params),
        "dialog_keep" => p::<DialogKeepParams>(params),
        "prune" => p::<PruneParams>(params),
        "fsck" => p::<FsckParams>(params),
        "subscribe" => p::<SubscribeParams>(params),
        other => Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!("unknown method `{other}`"),
        )),
    }
}

fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let params = match params {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "params must be an object",
            ))
        }
    };
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(ErrorCode::InvalidParams, format!("invalid params: {e}")))
}

fn hello(params: HelloParams) -> Reply {
    if let Some(client) = &params.client {
        tracing::debug!(client = %client, protocol = ?params.protocol, "hello");
    }
    Ok(json!({
        "protocol": PROTOCOL_VERSION,
        "daemon": format!("ckptd {}", env!("CARGO_PKG_VERSION")),
        "pid": std::process::id(),
    }))
}

/// Streams the project's events to this connection as `event` notifications, after the reply.
/// The stream ends when the connection does, or with a final `error` event when the client
/// reads too slowly (the daemon never waits for it).
async fn subscribe(
    daemon: &Arc<Daemon>,
    params: SubscribeParams,
    id: Value,
    conn: &Conn,
) -> Result<(), RpcError> {
    let project = find_project(daemon, &params.project).await?;
    // Opening the project starts its watcher and event pump; watches are placed by a walk,
    // so bring the index up to date now rather than at the next checkpoint.
    project
        .run(|project, opened| opened.prepare(project).map(drop))
        .await?;
    let mut sub = project.events.subscribe(params.diffs);
    conn.subscribed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let reply = response_line(
        &id,
        &json!({ "subscribed": project.root, "diffs": params.diffs }),
    );
    let (tx, mut closed) = (conn.tx.clone(), conn.closed.clone());
    tokio::spawn(async move {
        let closed_for_send = closed.clone();
        let send = |line: Vec<u8>| {
            let tx = tx.clone();
            let mut closed = closed_for_send.clone();
            async move {
                tokio::select! {
                    _ = closed.wait_for(|c| *c) => false,
                    sent = tx.send(line) => sent.is_ok(),
                }
            }
        };
        if !send(reply).await {
            return;
        }
        loop {
            let event = tokio::select! {
                _ = closed.wait_for(|c| *c) => break,
                event = sub.rx.recv() => event,
            };
            match event {
                Ok(event) => {
                    let mut params = (*event).clone();
                    if !sub.diffs {
                        if let Value::Object(map) = &mut params {
                            map.remove("diff");
                        }
                    }
                    if !send(notification_line("event", &params)).await {
                        break;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "dropping a subscriber that reads too slowly");
                    let params = json!({
                        "event": "error",
                        "reason": format!("subscriber too slow: {missed} events were dropped; subscribe again"),
                    });
                    let _ = send(notification_line("event", &params)).await;
                    break;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    Ok(())
}

async fn status(daemon: &Arc<Daemon>, _: NoParams) -> Reply {
    let listed: Vec<Arc<Project>> = daemon.projects.read().await.values().cloned().collect();
    let mut projects = project_list(&listed).await?;
    let stores: Vec<PathBuf> = listed.iter().map(|p| p.store_dir.clone()).collect();
    let sizes = blocking(move || {
        stores
            .iter()
            .map(|s| crate::store::gc::dir_size(&s.join("objects")))
            .collect::<Vec<u64>>()
    })
    .await?;
    for (value, size) in projects.iter_mut().zip(sizes) {
        value["store_bytes"] = json!(size);
    }
    for (value, p) in projects.iter_mut().zip(&listed) {
        value["busy"] = json!(p.is_busy());
        value["mode"] = json!(*p.mode.lock().expect("mode lock poisoned"));
        value["progress"] = json!(p
            .progress
            .get()
            .map(|(phase, done, total)| json!({ "phase": phase, "done": done, "total": total })));
    }
    Ok(json!({
        "daemon": format!("ckptd {}", env!("CARGO_PKG_VERSION")),
        "protocol": PROTOCOL_VERSION,
        "pid": std::process::id(),
        "uptime_seconds": daemon.started.elapsed().as_secs(),
        "socket": daemon.paths.socket,
        "data_dir": daemon.paths.data_dir,
        "projects": projects,
    }))
}

/// `{root, store, available}` for each project; the directory checks run off the async runtime.
async fn project_list(projects: &[Arc<Project>]) -> Result<Vec<Value>, RpcError> {
    let listed: Vec<(PathBuf, PathBuf)> = projects
        .iter()
        .map(|p| (p.root.clone(), p.store_dir.clone()))
        .collect();
    blocking(move || {
        listed
            .into_iter()
            .map(
                |(root, store)| json!({ "root": root, "store": store, "available": root.is_dir() }),
            )
            .collect()
    })
    .await
}

async fn watch(daemon: &Arc<Daemon>, params: WatchParams) -> Reply {
    let root = absolute(&params.path)?;
    let root = blocking(move || std::fs::canonicalize(&root).map_err(|e| (root, e)))
        .await?
        .map_err(|(root, e)| {
            RpcError::new(
                ErrorCode::InvalidParams,
                format!("cannot watch {}: {e}", root.display()),
            )
        })?;
    let (is_dir, data_dir, danger) = {
        let (root, data_dir) = (root.clone(), daemon.paths.data_dir.clone());
        blocking(move || {
            (
                root.is_dir(),
                std::fs::canonicalize(&data_dir).unwrap_or(data_dir),
                dangerous_root(&root),
            )
        })
        .await?
    };
    if !is_dir {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            format!("{} is not a directory", root.display()),
        ));
    }
    if root.starts_with(&data_dir) {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            "cannot watch ckpt's own data directory",
        ));
    }
    let danger = danger.filter(|_| !params.force);
    let _registry = daemon.registry_lock.lock().await;
    let project = {
        let mut projects = daemon.projects.write().await;
        if let Some(existing) = projects.get(&root) {
            existing.clone()
        } else {
            if let Some(other) = projects
                .keys()
                .find(|r| root.starts_with(r) || r.starts_with(&root))
            {
                return Err(RpcError::new(
                    ErrorCode::ProjectOverlap,
                    format!(
                        "{} overlaps the watched project {}",
                        root.display(),
                        other.display()
                    ),
                ));
            }
            if let Some(why) = danger {
                return Err(RpcError::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "{} is {why}: its checkpoints would copy SSH keys, other projects and \
                         everything else there into the store; pass --force (`force`) if you mean it",
                        root.display()
                    ),
                ));
            }
            let project = Arc::new(Project::new(root.clone(), &daemon.config, &daemon.paths));
            projects.insert(root.clone(), project.clone());
            let roots: Vec<PathBuf> = projects.keys().cloned().collect();
            let file = daemon.paths.registry_file();
            if let Err(e) = blocking(move || save_registry(&file, &roots)).await? {
                projects.remove(&root);
                return Err(RpcError::new(
                    ErrorCode::StoreError,
                    format!("cannot save the project registry: {e}"),
                ));
            }
            tracing::info!(root = %root.display(), "watching a new project");
            project
        }
    };
    let dialogs = project
        .run(|_, opened| {
            let repo = opened.store.repo();
            opened.store.dialogs(&repo).map_err(checkpoint_error)
        })
        .await?;
    Ok(json!({ "root": project.root, "store": project.store_dir, "dialogs": dialogs.len() }))
}

/// Why watching `root` is most likely a slip: `/`, the home folder, or a folder holding it.
fn dangerous_root(root: &Path) -> Option<&'static str> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .map(|h| std::fs::canonicalize(&h).unwrap_or(h));
    if root == Path::new("/") {
        Some("the root of the filesystem")
    } else if home.as_deref() == Some(root) {
        Some("your home folder")
    } else if home.as_deref().is_some_and(|h| h.starts_with(root)) {
        Some("a folder that holds your home folder")
    } else {
        None
    }
}

async fn unwatch(daemon: &Arc<Daemon>, params: PathParams) -> Reply {
    let path = absolute(&params.path)?;
    let path = blocking(move || std::fs::canonicalize(&path).unwrap_or(path)).await?;
    let _registry = daemon.registry_lock.lock().await;
    let mut projects = daemon.projects.write().await;
    let root = projects
        .keys()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .cloned()
        .ok_or_else(|| not_a_project(&path))?;
    let project = projects.remove(&root).expect("found just above");
    let roots: Vec<PathBuf> = projects.keys().cloned().collect();
    let file = daemon.paths.registry_file();
    if let Err(e) = blocking(move || save_registry(&file, &roots)).await? {
        projects.insert(root, project);
        return Err(RpcError::new(
            ErrorCode::StoreError,
            format!("cannot save the project registry: {e}"),
        ));
    }
    tracing::info!(root = %root.display(), "no longer watching");
    Ok(json!({ "root": root, "store": project.store_dir }))
}

async fn projects(daemon: &Arc<Daemon>, _: NoParams) -> Reply {
    let listed: Vec<Arc<Project>> = daemon.projects.read().await.values().cloned().collect();
    Ok(Value::Array(project_list(&listed).await?))
}

async fn find_project(daemon: &Arc<Daemon>, path: &Path) -> Result<Arc<Project>, RpcError> {
    let path = absolute(path)?;
    let lookup = path.clone();
    match blocking(move || std::fs::canonicalize(&lookup)).await? {
        Ok(real) => daemon
            .project_for(&real)
            .await
            .ok_or_else(|| not_a_project(&real)),
        // The directory is gone: if it was (inside) a project, say so precisely.
        Err(e) => match daemon.project_for(&normalize(&path)).await {
            Some(p) => Err(RpcError::new(
                ErrorCode::ProjectUnavailable,
                format!(
                    "project directory {} is not accessible: {e}",
                    p.root.display()
                ),
            )),
            None => Err(not_a_project(&path)),
        },
    }
}

/// Runs filesystem work off the async runtime.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RpcError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RpcError::new(ErrorCode::Internal, format!("blocking task failed: {e}")))
}

fn not_a_project(path: &Path) -> RpcError {
    RpcError::new(
        ErrorCode::NotAProject,
        format!(
            "{} is not inside a watched project (run `ckpt watch` there first)",
            path.display()
        ),
    )
}

fn absolute(path: &Path) -> Result<PathBuf, RpcError> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Err(RpcError::new(
            ErrorCode::InvalidParams,
            format!("path `{}` must be absolute", path.display()),
        ))
    }
}

/// Removes `.` and resolves `..` without touching the filesystem.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Converts client paths (absolute, or relative to the root) into tree paths.
fn tree_paths(root: &Path, paths: &[PathBuf]) -> Result<Vec<BString>, RpcError> {
    use std::os::unix::ffi::OsStrExt;
    paths
        .iter()
        .map(|p| {
            let abs = normalize(&root.join(p));
            let rel = abs.strip_prefix(root).map_err(|_| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "path `{}` is outside the project {}",
                        p.display(),
                        root.display()
                    ),
                )
            })?;
            Ok(BString::from(rel.as_os_str().as_bytes()))
        })
        .collect()
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("result types always serialise")
}

fn checkpoint_error(e: CheckpointError) -> RpcError {
    let code = match &e {
        CheckpointError::Unknown(_) | CheckpointError::NotACheckpoint { .. } => {
            ErrorCode::UnknownCheckpoint
        }
        CheckpointError::Ambiguous { .. } => ErrorCode::AmbiguousCheckpoint,
        CheckpointError::UnknownDialog(_) => ErrorCode::UnknownDialog,
        CheckpointError::TagExists(_) => ErrorCode::TagExists,
        CheckpointError::BadId(_)
        | CheckpointError::BadTag(_)
        | CheckpointError::BadDialog(_)
        | CheckpointError::MetaTooLarge { .. } => ErrorCode::InvalidParams,
        CheckpointError::Store(_) => ErrorCode::StoreError,
    };
    RpcError::new(code, e.to_string())
}

fn snapshot_error(e: SnapshotError) -> RpcError {
    match e {
        SnapshotError::Root { .. } => RpcError::new(ErrorCode::ProjectUnavailable, e.to_string()),
        SnapshotError::Store(e) => store_error(e),
    }
}

fn store_error(e: crate::store::StoreError) -> RpcError {
    RpcError::new(ErrorCode::StoreError, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_paths_become_tree_paths() {
        let root = Path::new("/p");
        let ok = tree_paths(
            root,
            &[
                PathBuf::from("/p/src/a.rs"),
                PathBuf::from("docs"),
                PathBuf::from("/p"),
            ],
        )
        .unwrap();
        assert_eq!(
            ok,
            vec![
                BString::from("src/a.rs"),
                BString::from("docs"),
                BString::from("")
            ]
        );
        assert!(tree_paths(root, &[PathBuf::from("/etc/passwd")]).is_err());
        assert!(tree_paths(root, &[PathBuf::from("../x")]).is_err());
        assert!(tree_paths(root, &[PathBuf::from("/p/../q")]).is_err());
    }
}
