//! Recording checkpoints and looking at them: checkpoint, list, show, diff, verify, rescan,
//! export, tags and notes.

use super::*;

/// Retention runs after every this many checkpoints of a dialog (walking a timeline costs a
/// few milliseconds, so not after each one).
const AUTO_PRUNE_EVERY: u64 = 10;

pub(super) async fn checkpoint(daemon: &Arc<Daemon>, params: CheckpointParams) -> Reply {
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
        imported: None,
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
                record_initial(project, opened, tree, &new.dialog, "")?;
            }
            let c = record(project, opened, tree, new)?;
            if c.seq % AUTO_PRUNE_EVERY == 0 {
                auto_prune(project, opened, &c.dialog);
            }
            opened.save_index(false);
            Ok(to_value(&c))
        })
        .await
}

/// Records an `auto` checkpoint in the default dialog if the files differ from the checkpoint
/// recorded last; returns it, or None when nothing changed.
pub(crate) fn record_auto(
    project: &Project,
    opened: &mut crate::daemon::project::Opened,
) -> Result<Option<crate::store::Checkpoint>, RpcError> {
    let tree = opened.current_tree(project)?;
    let known = *project
        .last_recorded
        .lock()
        .expect("last-recorded lock poisoned");
    let last = match known {
        Some(t) => Some(t),
        None => {
            let repo = opened.store.repo();
            let newest = opened.store.list(&repo, None).map_err(checkpoint_error)?;
            newest
                .first()
                .map(|c| parse_id(&c.tree))
                .transpose()
                .map_err(store_error)?
        }
    };
    if last == Some(tree) {
        return Ok(None);
    }
    let new = NewCheckpoint::new(DEFAULT_DIALOG, "auto", "automatic checkpoint");
    let c = record(project, opened, tree, new)?;
    auto_prune(project, opened, DEFAULT_DIALOG);
    opened.save_index(false);
    Ok(Some(c))
}

pub(super) async fn list(daemon: &Arc<Daemon>, params: ListParams) -> Reply {
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
pub(super) fn active_session(head: &crate::store::Checkpoint) -> u64 {
    head.session + u64::from(crate::store::checkpoint::SESSION_ENDS.contains(&head.kind.as_str()))
}

pub(super) async fn show(daemon: &Arc<Daemon>, params: ShowParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            let store = &opened.store;
            let repo = store.repo();
            let mut c = store
                .resolve_in(&repo, &params.id, params.dialog.as_deref())
                .map_err(checkpoint_error)?;
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

pub(super) async fn diff_method(daemon: &Arc<Daemon>, params: DiffParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    let paths = tree_paths(&project.root, &params.paths)?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            let dialog = params.dialog.as_deref();
            let from = opened
                .store
                .resolve_in(&repo, &params.from, dialog)
                .map_err(checkpoint_error)?;
            let (to_id, new_tree) = match &params.to {
                Some(to) => {
                    let to = opened
                        .store
                        .resolve_in(&repo, to, dialog)
                        .map_err(checkpoint_error)?;
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

/// The changes of checkpoint `id` against its parent (or `against`) as a patch `git apply` takes.
pub(super) async fn export_patch(daemon: &Arc<Daemon>, params: ExportPatchParams) -> Reply {
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
pub(super) async fn export_bundle(daemon: &Arc<Daemon>, params: ExportBundleParams) -> Reply {
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
            if !params.force && std::fs::symlink_metadata(&path).is_ok() {
                return Err(RpcError::new(
                    ErrorCode::InvalidParams,
                    format!("{} exists; pass --force (`force`) to replace it", path.display()),
                ));
            }
            let objects = store
                .export_bundle(&ids, &path, params.force)
                .map_err(|e| RpcError::new(ErrorCode::IoError, format!("cannot write the bundle: {e}")))?;
            Ok(json!({ "path": path, "checkpoints": ids.iter().map(|i| i.to_string()).collect::<Vec<_>>(), "objects": objects }))
        })
        .await
}

/// Reads a git bundle's objects into the store and records a checkpoint (kind `imported`) for
/// each commit its refs name, oldest first, on one dialog.
pub(super) async fn import_bundle(daemon: &Arc<Daemon>, params: ImportBundleParams) -> Reply {
    let path = absolute(&params.path)?;
    if let Some(d) = &params.dialog {
        validate_dialog(d).map_err(checkpoint_error)?;
    }
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let store = &opened.store;
            let objects = store.import_bundle_objects(&path).map_err(|e| {
                let code = match &e {
                    ImportError::Store(_) => ErrorCode::StoreError,
                    ImportError::Read { .. } => ErrorCode::IoError,
                    _ => ErrorCode::InvalidParams,
                };
                RpcError::new(code, format!("cannot import {}: {e}", path.display()))
            })?;
            let repo = store.repo();
            let result = (|| {
                let (candidates, left) = store
                    .import_candidates(&repo, &objects.header)
                    .map_err(checkpoint_error)?;
                // A tree no restore could write is refused here, not found out later.
                let mut seen = std::collections::HashSet::new();
                for candidate in &candidates {
                    let bad = crate::store::import::unsafe_paths(&repo, candidate.tree, &mut seen, 10)
                        .map_err(store_error)?;
                    if !bad.is_empty() {
                        objects.discard();
                        return Err(RpcError::new(
                            ErrorCode::InvalidParams,
                            format!(
                                "cannot import {}: commit {} holds paths no checkout may write ({}); nothing was imported",
                                path.display(),
                                candidate.commit,
                                bad.join(", ")
                            ),
                        ));
                    }
                }
                let dialog = match &params.dialog {
                    Some(d) => d.clone(),
                    None => free_dialog_name(store, &repo, "imported")?,
                };
                let mut imported = Vec::new();
                for candidate in candidates {
                    let new = NewCheckpoint {
                        message_id: candidate.message_id,
                        meta: candidate.meta,
                        imported: Some(candidate.imported),
                        ..NewCheckpoint::new(dialog.clone(), "imported", candidate.label)
                    };
                    let c = store
                        .record_checkpoint(candidate.tree, candidate.skipped, new)
                        .map_err(checkpoint_error)?;
                    emit_created(project, &c);
                    imported.push(c);
                }
                Ok(json!({
                    "path": path,
                    "dialog": if imported.is_empty() { Value::Null } else { json!(dialog) },
                    "objects": objects.objects,
                    "imported": imported,
                    "not_imported": left,
                }))
            })();
            // The new checkpoints' refs reach what matters now; gc may drop the rest.
            if let Some(keep) = &objects.keep {
                let _ = std::fs::remove_file(keep);
            }
            result
        })
        .await
}

/// `base` if no dialog has that name, else the first free `base-2`, `base-3`, ...
fn free_dialog_name(
    store: &crate::store::Store,
    repo: &gix::Repository,
    base: &str,
) -> Result<String, RpcError> {
    for n in 1.. {
        let name = match n {
            1 => base.to_string(),
            n => format!("{base}-{n}"),
        };
        if !store.dialog_exists(repo, &name).map_err(checkpoint_error)? {
            return Ok(name);
        }
    }
    unreachable!("some dialog name is free")
}

pub(super) async fn tag(daemon: &Arc<Daemon>, params: TagParams) -> Reply {
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

pub(super) async fn note(daemon: &Arc<Daemon>, params: NoteParams) -> Reply {
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

/// Compares the index (after syncing with the watcher) with a fresh full scan, a separate
/// code path that uses no cache: they must always agree.
pub(super) async fn verify(daemon: &Arc<Daemon>, params: ProjectParams) -> Reply {
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
pub(super) async fn rescan(daemon: &Arc<Daemon>, params: ProjectParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |_, opened| {
            opened.force_rescan("requested by a client");
            Ok(json!({ "rescan": true }))
        })
        .await
}

/// Reads every object the store's refs reach and reports what is unreadable and which
/// checkpoints it affects; with `repair`, salvages damaged packs and sets the damage aside.
/// Files whose content the store lost are read again at the next checkpoint.
pub(super) async fn fsck(daemon: &Arc<Daemon>, params: FsckParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run_on_damaged(move |_, opened| {
            let report = opened.store.fsck(params.repair).map_err(store_error)?;
            if params.repair || report.unreadable_count > 0 {
                let repo = opened.store.repo();
                opened.index.forget_objects(&report.unreadable_ids, &repo);
            }
            Ok(to_value(&report))
        })
        .await
}
