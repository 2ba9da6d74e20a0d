//! One function per method: parse the params, find the project, run the store work behind the
//! project's lock, and turn every failure into an error with a stable code.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use gix::bstr::BString;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::project::{save_registry, Project};
use super::Daemon;
use crate::protocol::methods::*;
use crate::protocol::{error_line, response_line, ErrorCode, Request, RpcError, PROTOCOL_VERSION};
use crate::store::checkpoint::parse_id;
use crate::store::checkpoint::validate_dialog;
use crate::store::diff::diff;
use crate::store::snapshot::{Snapshot, SnapshotOptions};
use crate::store::treediff::diff_trees;
use crate::store::{
    CheckpointError, NewCheckpoint, RestoreError, RestoreOptions, SnapshotError, DEFAULT_DIALOG,
};

type Reply = Result<Value, RpcError>;

/// Handles one request line; returns the reply line (none for notifications) and whether the
/// daemon should shut down.
pub async fn handle_line(daemon: &Arc<Daemon>, line: &[u8]) -> (Option<Vec<u8>>, bool) {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            let err = RpcError::new(ErrorCode::ParseError, format!("not valid JSON: {e}"));
            return (Some(error_line(&Value::Null, &err)), false);
        }
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let request: Request = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            let err = RpcError::new(
                ErrorCode::InvalidRequest,
                format!("not a JSON-RPC 2.0 request: {e}"),
            );
            return (Some(error_line(&id, &err)), false);
        }
    };
    if request.jsonrpc != "2.0" {
        let err = RpcError::new(ErrorCode::InvalidRequest, "`jsonrpc` must be \"2.0\"");
        return (Some(error_line(&id, &err)), false);
    }
    let shutdown = request.method == "shutdown";
    tracing::debug!(method = %request.method, "request");
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
        "verify" => verify(daemon, parse(params)?).await,
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

async fn status(daemon: &Arc<Daemon>, _: NoParams) -> Reply {
    let listed: Vec<Arc<Project>> = daemon.projects.read().await.values().cloned().collect();
    let mut projects = project_list(&listed).await?;
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

async fn watch(daemon: &Arc<Daemon>, params: PathParams) -> Reply {
    let root = absolute(&params.path)?;
    let root = blocking(move || std::fs::canonicalize(&root).map_err(|e| (root, e)))
        .await?
        .map_err(|(root, e)| {
            RpcError::new(
                ErrorCode::InvalidParams,
                format!("cannot watch {}: {e}", root.display()),
            )
        })?;
    let (is_dir, data_dir) = {
        let (root, data_dir) = (root.clone(), daemon.paths.data_dir.clone());
        blocking(move || {
            (
                root.is_dir(),
                std::fs::canonicalize(&data_dir).unwrap_or(data_dir),
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

async fn checkpoint(daemon: &Arc<Daemon>, params: CheckpointParams) -> Reply {
    let kind = params.kind.unwrap_or_else(|| "message".into());
    if !matches!(kind.as_str(), "message" | "manual") {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            format!("kind `{kind}` cannot be requested; use `message` or `manual`"),
        ));
    }
    // A dialog named by the client starts with an `initial` checkpoint; `default` needs none.
    let named = params.dialog.is_some();
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    validate_dialog(&dialog).map_err(checkpoint_error)?;
    if params
        .message_id
        .as_ref()
        .is_some_and(|m| m.len() > 256 || m.contains('\n'))
    {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            "message_id must be one line of at most 256 bytes",
        ));
    }
    let project = find_project(daemon, &params.project).await?;
    let new = NewCheckpoint {
        restore: None,
        dialog,
        kind,
        label: params.label.unwrap_or_default(),
        message_id: params.message_id,
        meta: params.meta,
    };
    project
        .run(move |project, opened| {
            let tree = opened.current_tree(project)?;
            let repo = opened.store.repo();
            if named
                && !opened
                    .store
                    .dialog_exists(&repo, &new.dialog)
                    .map_err(checkpoint_error)?
            {
                record_initial(opened, tree, &new.dialog, "")?;
            }
            let c = opened
                .store
                .record_checkpoint(tree, opened.index.skipped(), new)
                .map_err(checkpoint_error)?;
            opened.save_index(false);
            Ok(to_value(&c))
        })
        .await
}

async fn list(daemon: &Arc<Daemon>, params: ListParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let repo = opened.store.repo();
            let mut all = opened
                .store
                .list(&repo, params.dialog.as_deref())
                .map_err(checkpoint_error)?;
            if !params.all_sessions {
                // Each dialog's active session, and its latest checkpoint (which shows the
                // approved or reset state a fresh session starts from).
                let mut active = std::collections::HashMap::new();
                for c in &all {
                    active
                        .entry(c.dialog.clone())
                        .or_insert_with(|| (c.id.clone(), active_session(c)));
                }
                all.retain(|c| {
                    let (head, session) = &active[&c.dialog];
                    c.session == *session || &c.id == head
                });
            }
            opened
                .store
                .annotate(&repo, &mut all)
                .map_err(checkpoint_error)?;
            if let Some(pattern) = params.grep.as_deref().map(str::to_lowercase) {
                all.retain(|c| {
                    let mut text = format!(
                        "{}\n{}\n{}",
                        c.label,
                        c.notes.as_deref().unwrap_or(""),
                        c.tags.join("\n")
                    );
                    text.push_str(c.message_id.as_deref().unwrap_or(""));
                    text.to_lowercase().contains(&pattern)
                });
            }
            if let Some(limit) = params.limit {
                all.truncate(limit);
            }
            Ok(to_value(&all))
        })
        .await
}

/// The session a dialog whose latest checkpoint is `head` is in now.
fn active_session(head: &crate::store::Checkpoint) -> u64 {
    head.session + u64::from(crate::store::checkpoint::SESSION_ENDS.contains(&head.kind.as_str()))
}

async fn session_status(daemon: &Arc<Daemon>, params: SessionParams) -> Reply {
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            let head = opened
                .store
                .list(&repo, Some(&dialog))
                .map_err(checkpoint_error)?
                .into_iter()
                .next();
            let Some(head) = head else {
                return Err(RpcError::new(
                    ErrorCode::UnknownDialog,
                    format!("no dialog named `{dialog}`"),
                ));
            };
            let approved = opened
                .store
                .approved(&repo, &dialog)
                .map_err(checkpoint_error)?
                .expect("the dialog has checkpoints");
            let now = opened.current_tree(project)?;
            let was_approved = approved.kind == "approved";
            Ok(json!({
                "dialog": dialog,
                "active_session": active_session(&head),
                "has_unapproved": Some(now) != parse_id(&approved.tree).ok(),
                "approved_commit": approved.id,
                "last_approved_at": was_approved.then_some(approved.created_at),
            }))
        })
        .await
}

async fn session_approve(daemon: &Arc<Daemon>, params: SessionApproveParams) -> Reply {
    let named = params.dialog.is_some();
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    validate_dialog(&dialog).map_err(checkpoint_error)?;
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let tree = opened.current_tree(project)?;
            let repo = opened.store.repo();
            if named
                && !opened
                    .store
                    .dialog_exists(&repo, &dialog)
                    .map_err(checkpoint_error)?
            {
                record_initial(opened, tree, &dialog, "")?;
            }
            let new = NewCheckpoint {
                dialog: dialog.clone(),
                kind: "approved".into(),
                label: params.message.unwrap_or_default(),
                message_id: None,
                meta: None,
                restore: None,
            };
            let approved = opened
                .store
                .record_checkpoint(tree, opened.index.skipped(), new)
                .map_err(checkpoint_error)?;
            opened
                .store
                .set_approved(&repo, &approved)
                .map_err(checkpoint_error)?;
            let approved_count = opened
                .store
                .list(&repo, Some(&dialog))
                .map_err(checkpoint_error)?
                .iter()
                .filter(|c| c.session == approved.session && c.id != approved.id)
                .count();
            Ok(json!({
                "approved_commit": approved.id,
                "session": approved.session,
                "new_session": approved.session + 1,
                "commits_approved": approved_count,
            }))
        })
        .await
}

async fn session_reset(daemon: &Arc<Daemon>, params: SessionResetParams) -> Reply {
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    validate_dialog(&dialog).map_err(checkpoint_error)?;
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            let target = opened
                .store
                .approved(&repo, &dialog)
                .map_err(checkpoint_error)?
                .ok_or_else(|| {
                    RpcError::new(
                        ErrorCode::UnknownDialog,
                        format!("no dialog named `{dialog}`"),
                    )
                })?;
            let mut value = restore_to(
                project,
                opened,
                &target,
                Vec::new(),
                params.dry_run,
                "reset",
            )?;
            value["reset_to"] = json!(target.id);
            if let Some(id) = value["restore_checkpoint"].as_str() {
                let ended = opened.store.resolve(&repo, id).map_err(checkpoint_error)?;
                value["new_session"] = json!(ended.session + 1);
            }
            Ok(value)
        })
        .await
}

async fn show(daemon: &Arc<Daemon>, params: ShowParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let store = &opened.store;
            let repo = store.repo();
            let mut c = store.resolve(&repo, &params.id).map_err(checkpoint_error)?;
            store.load_meta(&repo, &mut c).map_err(checkpoint_error)?;
            store.annotate(&repo, std::slice::from_mut(&mut c)).map_err(checkpoint_error)?;
            let parent_tree = match &c.parent {
                Some(parent) => Some(store.resolve(&repo, parent).map_err(checkpoint_error)?.tree),
                None => None,
            };
            let tree = parse_id(&c.tree).map_err(store_error)?;
            let parent_tree = parent_tree.map(|t| parse_id(&t)).transpose().map_err(store_error)?;
            let changed = diff_trees(&repo, parent_tree, Some(tree), &[]).map_err(store_error)?;
            let changes = diff(&repo, &changed, false, false).map_err(store_error)?;
            let mut value = to_value(&c);
            value["changes"] = to_value(&changes.files);
            if params.files {
                let files = store.files_of(&repo, &c).map_err(checkpoint_error)?;
                value["file_list"] = files
                    .iter()
                    .map(|(path, s)| json!({ "path": path.to_string(), "mode": format!("{:06o}", s.kind as u16), "blob": s.id.to_string() }))
                    .collect();
            }
            Ok(value)
        })
        .await
}

async fn diff_method(daemon: &Arc<Daemon>, params: DiffParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    let paths = tree_paths(&project.root, &params.paths)?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            let from = opened
                .store
                .resolve(&repo, &params.from)
                .map_err(checkpoint_error)?;
            let (to_id, new_tree) = match &params.to {
                Some(to) => {
                    let to = opened.store.resolve(&repo, to).map_err(checkpoint_error)?;
                    let tree = parse_id(&to.tree).map_err(store_error)?;
                    (Some(to.id), tree)
                }
                None => (None, opened.current_tree(project)?),
            };
            let old_tree = parse_id(&from.tree).map_err(store_error)?;
            let changed =
                diff_trees(&repo, Some(old_tree), Some(new_tree), &paths).map_err(store_error)?;
            let result = diff(&repo, &changed, params.patch, params.counts).map_err(store_error)?;
            let mut value = to_value(&result);
            value["from"] = json!(from.id);
            value["to"] = json!(to_id);
            Ok(value)
        })
        .await
}

async fn restore(daemon: &Arc<Daemon>, params: RestoreParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    let paths = tree_paths(&project.root, &params.paths)?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            let target = opened
                .store
                .resolve(&repo, &params.id)
                .map_err(checkpoint_error)?;
            restore_to(project, opened, &target, paths, params.dry_run, "restore")
        })
        .await
}

/// The changes of checkpoint `id` against its parent (or `against`) as a patch `git apply` takes.
async fn export_patch(daemon: &Arc<Daemon>, params: ExportPatchParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let store = &opened.store;
            let repo = store.repo();
            let to = store.resolve(&repo, &params.id).map_err(checkpoint_error)?;
            let from = match (&params.against, &to.parent) {
                (Some(other), _) => Some(store.resolve(&repo, other).map_err(checkpoint_error)?),
                (None, Some(parent)) => Some(store.resolve(&repo, parent).map_err(checkpoint_error)?),
                (None, None) => None,
            };
            let old = from.as_ref().map(|c| parse_id(&c.tree)).transpose().map_err(store_error)?;
            let new = parse_id(&to.tree).map_err(store_error)?;
            let changes = diff_trees(&repo, old, Some(new), &[]).map_err(store_error)?;
            let result = diff(&repo, &changes, true, false).map_err(store_error)?;
            Ok(json!({ "id": to.id, "against": from.map(|c| c.id), "patch": result.patch.unwrap_or_default() }))
        })
        .await
}

/// Writes checkpoints (and all they reach) as a git bundle.
async fn export_bundle(daemon: &Arc<Daemon>, params: ExportBundleParams) -> Reply {
    if params.ids.is_empty() {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            "export_bundle needs at least one checkpoint id",
        ));
    }
    let path = absolute(&params.path)?;
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let store = &opened.store;
            let repo = store.repo();
            let mut ids = Vec::new();
            for id in &params.ids {
                ids.push(parse_id(&store.resolve(&repo, id).map_err(checkpoint_error)?.id).map_err(store_error)?);
            }
            let objects = store
                .export_bundle(&ids, &path)
                .map_err(|e| RpcError::new(ErrorCode::InvalidParams, format!("cannot write the bundle: {e}")))?;
            Ok(json!({ "path": path, "checkpoints": ids.iter().map(|i| i.to_string()).collect::<Vec<_>>(), "objects": objects }))
        })
        .await
}

async fn tag(daemon: &Arc<Daemon>, params: TagParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let repo = opened.store.repo();
            let c = opened
                .store
                .resolve(&repo, &params.id)
                .map_err(checkpoint_error)?;
            opened
                .store
                .add_tag(&repo, &c, &params.name)
                .map_err(checkpoint_error)?;
            Ok(json!({ "id": c.id, "tag": params.name }))
        })
        .await
}

async fn note(daemon: &Arc<Daemon>, params: NoteParams) -> Reply {
    if params.text.trim().is_empty() || params.text.len() > 64 * 1024 {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            "a note is 1 to 65536 bytes of text",
        ));
    }
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let repo = opened.store.repo();
            let mut c = opened
                .store
                .resolve(&repo, &params.id)
                .map_err(checkpoint_error)?;
            opened
                .store
                .add_note(&repo, &c, &params.text)
                .map_err(checkpoint_error)?;
            opened
                .store
                .annotate(&repo, std::slice::from_mut(&mut c))
                .map_err(checkpoint_error)?;
            Ok(json!({ "id": c.id, "notes": c.notes }))
        })
        .await
}

/// Starts a dialog whose approved state is checkpoint `id`; the files are not touched.
async fn dialog_fork(daemon: &Arc<Daemon>, params: ForkParams) -> Reply {
    let dialog = params.dialog.unwrap_or_else(made_up_dialog_name);
    validate_dialog(&dialog).map_err(checkpoint_error)?;
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let repo = opened.store.repo();
            let from = opened
                .store
                .resolve(&repo, &params.id)
                .map_err(checkpoint_error)?;
            if opened
                .store
                .dialog_exists(&repo, &dialog)
                .map_err(checkpoint_error)?
            {
                return Err(RpcError::new(
                    ErrorCode::DialogExists,
                    format!("dialog `{dialog}` exists already"),
                ));
            }
            let tree = parse_id(&from.tree).map_err(store_error)?;
            let label = format!(
                "forked from {} (#{} in {})",
                &from.id[..12],
                from.seq,
                from.dialog
            );
            let initial = record_initial(opened, tree, &dialog, &label)?;
            let initial = opened
                .store
                .resolve(&repo, initial["id"].as_str().unwrap_or(""))
                .map_err(checkpoint_error)?;
            opened
                .store
                .set_approved(&repo, &initial)
                .map_err(checkpoint_error)?;
            Ok(json!({ "dialog": dialog, "initial": initial, "forked_from": from.id }))
        })
        .await
}

fn made_up_dialog_name() -> String {
    let now = jiff::Timestamp::now();
    format!(
        "d-{}-{:04x}",
        now.strftime("%Y%m%d-%H%M%S"),
        (now.subsec_nanosecond() as u32 ^ std::process::id()) & 0xffff
    )
}

/// Records the `initial` checkpoint that starts `dialog`.
fn record_initial(
    opened: &mut super::project::Opened,
    tree: gix::ObjectId,
    dialog: &str,
    title: &str,
) -> Reply {
    let new = NewCheckpoint {
        dialog: dialog.to_string(),
        kind: "initial".into(),
        label: title.to_string(),
        message_id: None,
        meta: None,
        restore: None,
    };
    let c = opened
        .store
        .record_checkpoint(tree, opened.index.skipped(), new)
        .map_err(checkpoint_error)?;
    Ok(to_value(&c))
}

async fn dialog_new(daemon: &Arc<Daemon>, params: DialogNewParams) -> Reply {
    let dialog = params.dialog.unwrap_or_else(made_up_dialog_name);
    validate_dialog(&dialog).map_err(checkpoint_error)?;
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            if opened
                .store
                .dialog_exists(&repo, &dialog)
                .map_err(checkpoint_error)?
            {
                return Err(RpcError::new(
                    ErrorCode::DialogExists,
                    format!("dialog `{dialog}` exists already"),
                ));
            }
            let tree = opened.current_tree(project)?;
            let initial =
                record_initial(opened, tree, &dialog, params.title.as_deref().unwrap_or(""))?;
            Ok(json!({ "dialog": dialog, "initial": initial }))
        })
        .await
}

async fn dialog_list(daemon: &Arc<Daemon>, params: ProjectParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let store = &opened.store;
            let repo = store.repo();
            let mut out = Vec::new();
            for (name, head) in store.dialogs(&repo).map_err(checkpoint_error)? {
                let chain = store.list(&repo, Some(&name)).map_err(checkpoint_error)?;
                let head = store.checkpoint(&repo, head).map_err(checkpoint_error)?;
                let title = chain
                    .last()
                    .filter(|c| c.kind == "initial")
                    .map(|c| c.label.clone())
                    .unwrap_or_default();
                out.push(json!({
                    "dialog": name,
                    "checkpoints": chain.len(),
                    "last_activity": head.created_at,
                    "head": head.id,
                    "title": title,
                }));
            }
            Ok(Value::Array(out))
        })
        .await
}

async fn dialog_rm(daemon: &Arc<Daemon>, params: DialogParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let repo = opened.store.repo();
            let head = opened
                .store
                .remove_dialog(&repo, &params.dialog)
                .map_err(checkpoint_error)?;
            Ok(json!({ "dialog": params.dialog, "head": head.to_string() }))
        })
        .await
}

async fn edit_begin(daemon: &Arc<Daemon>, params: EditBeginParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    let paths = tree_paths(&project.root, &params.paths)?;
    let p = project.clone();
    let token = blocking(move || {
        p.edits
            .lock()
            .expect("edits lock poisoned")
            .begin(&p.root, &paths)
    })
    .await?
    .map_err(|e| RpcError::new(ErrorCode::InvalidParams, e))?;
    Ok(json!({ "token": token, "expires_in_seconds": super::edit::EDIT_TTL.as_secs() }))
}

async fn edit_commit(daemon: &Arc<Daemon>, params: EditParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    if !project
        .edits
        .lock()
        .expect("edits lock poisoned")
        .commit(&params.token)
    {
        return Err(unknown_edit(&params.token));
    }
    Ok(json!({ "token": params.token, "committed": true }))
}

async fn edit_abort(daemon: &Arc<Daemon>, params: EditParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    let p = project.clone();
    let token = params.token.clone();
    let outcome = blocking(move || {
        p.edits
            .lock()
            .expect("edits lock poisoned")
            .abort(&p.root, &token)
    })
    .await?;
    let (restored, skipped) = outcome.ok_or_else(|| unknown_edit(&params.token))?;
    Ok(json!({ "token": params.token, "restored": restored, "skipped": skipped }))
}

fn unknown_edit(token: &str) -> RpcError {
    RpcError::new(
        ErrorCode::UnknownEdit,
        format!("no open edit transaction `{token}` (committed, aborted or expired)"),
    )
}

/// Restores the last restore's undo checkpoint (of `dialog`, or of any dialog).
async fn undo(daemon: &Arc<Daemon>, params: UndoParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            let last = opened
                .store
                .list(&repo, params.dialog.as_deref())
                .map_err(checkpoint_error)?
                .into_iter()
                .find_map(|c| c.restore)
                .ok_or_else(|| {
                    RpcError::new(ErrorCode::UnknownCheckpoint, "there is no restore to undo")
                })?;
            let target = opened
                .store
                .resolve(&repo, &last.undo)
                .map_err(checkpoint_error)?;
            restore_to(
                project,
                opened,
                &target,
                Vec::new(),
                params.dry_run,
                "restore",
            )
        })
        .await
}

/// The restore itself: the undo checkpoint first, the files, a check against the target, and a
/// `restore` checkpoint of the result that names both.
fn restore_to(
    project: &Project,
    opened: &mut super::project::Opened,
    target: &crate::store::Checkpoint,
    paths: Vec<BString>,
    dry_run: bool,
    end_kind: &str,
) -> Reply {
    opened.prepare(project)?;
    let options = RestoreOptions {
        paths: paths.clone(),
        dry_run,
    };
    let mut report = opened
        .store
        .restore(&opened.filter, &mut opened.index, target, &options)
        .map_err(|e| match e {
            RestoreError::Snapshot(e) => snapshot_error(e),
            RestoreError::Checkpoint(e) => checkpoint_error(e),
        })?;
    let mut recorded = None;
    if let (false, Some(undo)) = (dry_run, report.undo_checkpoint.clone()) {
        let now = report_leftovers(project, opened, target, &paths, &mut report)?;
        let scope = if paths.is_empty() {
            String::new()
        } else {
            format!(" ({} paths)", paths.len())
        };
        let new = NewCheckpoint {
            dialog: target.dialog.clone(),
            kind: end_kind.into(),
            label: format!(
                "restored to {} (#{} {}){scope}",
                &target.id[..12],
                target.seq,
                target.kind
            ),
            message_id: None,
            meta: None,
            restore: Some(crate::store::RestoreLink {
                restored_to: target.id.clone(),
                undo,
            }),
        };
        recorded = Some(
            opened
                .store
                .record_checkpoint(now, opened.index.skipped(), new)
                .map_err(checkpoint_error)?
                .id,
        );
    }
    let mut value = to_value(&report);
    value["restore_checkpoint"] = json!(recorded);
    // The client's metadata of the target (e.g. the agent's conversation), to roll back with.
    let mut with_meta = target.clone();
    opened
        .store
        .load_meta(&opened.store.repo(), &mut with_meta)
        .map_err(checkpoint_error)?;
    value["meta"] = with_meta.meta.unwrap_or(Value::Null);
    Ok(value)
}

/// Checks the project against the checkpoint after a restore and reports every path that still
/// differs and is not reported yet: typically a file that was ignored before the restore (so it
/// was left alone) and is not ignored under the restored `.gitignore`.
fn report_leftovers(
    project: &Project,
    opened: &mut super::project::Opened,
    target: &crate::store::Checkpoint,
    paths: &[BString],
    report: &mut crate::store::RestoreReport,
) -> Result<gix::ObjectId, RpcError> {
    let now = opened.current_tree(project)?;
    let repo = opened.store.repo();
    let wanted = parse_id(&target.tree).map_err(store_error)?;
    for change in diff_trees(&repo, Some(now), Some(wanted), paths).map_err(store_error)? {
        let path = change.path.to_string();
        if report.skipped.iter().any(|s| s.path == path) {
            continue;
        }
        let reason = if change.old.is_some() && change.new.is_none() {
            "left in place: it was not captured before the restore (ignored or excluded then), so it is not deleted"
        } else {
            "still differs from the checkpoint after the restore (it was not captured before: ignored or excluded then)"
        };
        tracing::warn!(path = %path, reason, "skipped while restoring");
        report
            .skipped
            .push(crate::store::SkippedFile::new(path, reason));
    }
    Ok(now)
}

/// Compares the index (after syncing with the watcher) with a fresh full scan, a separate
/// code path that uses no cache: they must always agree.
async fn verify(daemon: &Arc<Daemon>, params: ProjectParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let index_tree = opened.current_tree(project)?;
            let options = SnapshotOptions { write: false, max_file_size: project.max_file_size() };
            let scan = Snapshot::take(&opened.store, &opened.filter, options).map_err(snapshot_error)?;
            let scan_tree = Snapshot::tree_id(&scan.files).map_err(store_error)?;
            if index_tree != scan_tree {
                tracing::error!(root = %project.root.display(), %index_tree, %scan_tree, "index and full scan disagree");
                opened.force_rescan("verify found a difference");
            }
            let mode = project.mode.lock().expect("mode lock poisoned").clone();
            Ok(json!({ "index_tree": index_tree.to_string(), "scan_tree": scan_tree.to_string(),
                "equal": index_tree == scan_tree, "mode": mode }))
        })
        .await
}

/// Makes the next checkpoint verify everything by stat, as a watcher overflow does.
async fn rescan(daemon: &Arc<Daemon>, params: ProjectParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            opened.force_rescan("requested by a client");
            Ok(json!({ "rescan": true }))
        })
        .await
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
