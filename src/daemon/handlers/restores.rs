//! Changing the files: restore, undo, and edit transactions.

use super::*;

pub(super) async fn restore(daemon: &Arc<Daemon>, params: RestoreParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    let paths = tree_paths(&project.root, &params.paths)?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            let target = opened
                .store
                .resolve_in(&repo, &params.id, params.dialog.as_deref())
                .map_err(checkpoint_error)?;
            restore_to(project, opened, &target, paths, params.dry_run, "restore")
        })
        .await
}

pub(super) async fn edit_begin(daemon: &Arc<Daemon>, params: EditBeginParams) -> Reply {
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
    Ok(json!({ "token": token, "expires_in_seconds": crate::daemon::edit::EDIT_TTL.as_secs() }))
}

pub(super) async fn edit_commit(daemon: &Arc<Daemon>, params: EditParams) -> Reply {
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

pub(super) async fn edit_abort(daemon: &Arc<Daemon>, params: EditParams) -> Reply {
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

pub(super) fn unknown_edit(token: &str) -> RpcError {
    RpcError::new(
        ErrorCode::UnknownEdit,
        format!("no open edit transaction `{token}` (committed, aborted or expired)"),
    )
}

/// Restores the last restore's undo checkpoint (of `dialog`, or of any dialog).
pub(super) async fn undo(daemon: &Arc<Daemon>, params: UndoParams) -> Reply {
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
                    RpcError::new(ErrorCode::NothingToUndo, "there is no restore to undo")
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
pub(super) fn restore_to(
    project: &Project,
    opened: &mut crate::daemon::project::Opened,
    target: &crate::store::Checkpoint,
    paths: Vec<BString>,
    dry_run: bool,
    end_kind: &str,
) -> Reply {
    // File timestamps come from the kernel's coarse clock, which lags the precise one: compare
    // them with that clock, or a write just after this moment could look older.
    let started = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    let started = started.tv_sec as i128 * 1_000_000_000 + started.tv_nsec as i128;
    opened.prepare(project)?;
    refuse_unmatched_paths(opened, target, &paths)?;
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
    if let (false, Some(undo)) = (dry_run, &report.undo_checkpoint) {
        project.events.emit(
            "checkpoint_created",
            json!({ "id": undo, "dialog": target.dialog, "kind": "pre-restore" }),
        );
    }
    if let (false, Some(undo)) = (dry_run, report.undo_checkpoint.clone()) {
        let now = report_leftovers(project, opened, target, &paths, started, &mut report)?;
        let scope = if paths.is_empty() {
            String::new()
        } else {
            format!(" ({} paths)", paths.len())
        };
        let label = format!(
            "restored to {} (#{} {}){scope}",
            &target.id[..12],
            target.seq,
            target.kind
        );
        let link = crate::store::RestoreLink {
            restored_to: target.id.clone(),
            undo,
        };
        let new = NewCheckpoint {
            restore: Some(link),
            ..NewCheckpoint::new(target.dialog.clone(), end_kind, label)
        };
        recorded = Some(record(project, opened, now, new)?.id);
    }
    if !dry_run {
        project.events.emit(
            "restored",
            json!({
                "kind": end_kind, "restored_to": target.id, "dialog": target.dialog,
                "undo_checkpoint": report.undo_checkpoint, "restore_checkpoint": recorded,
                "written": report.written.len(), "deleted": report.deleted.len(),
                "skipped": report.skipped,
            }),
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

/// A restore of paths that name nothing, in the checkpoint or in the working tree, is a
/// mistake (a typo, the wrong folder): it is refused, naming them, before anything is
/// recorded or touched.
fn refuse_unmatched_paths(
    opened: &crate::daemon::project::Opened,
    target: &crate::store::Checkpoint,
    paths: &[BString],
) -> Result<(), RpcError> {
    if paths.is_empty() || paths.iter().any(|p| p.is_empty()) {
        return Ok(());
    }
    let repo = opened.store.repo();
    let tree = repo
        .find_tree(parse_id(&target.tree).map_err(store_error)?)
        .map_err(|e| store_error(crate::store::StoreError::git("reading a tree", e)))?;
    let index = opened.index.files();
    let unmatched: Vec<String> = paths
        .iter()
        .filter(|p| {
            let in_target = tree
                .lookup_entry_by_path(gix::bstr::ByteSlice::to_path_lossy(p.as_slice()))
                .ok()
                .flatten()
                .is_some();
            let in_tree = index.contains_key(*p)
                || index
                    .range::<BString, _>((*p).clone()..)
                    .next()
                    .is_some_and(|(k, _)| k.starts_with(p) && k.get(p.len()) == Some(&b'/'));
            let on_disk =
                std::fs::symlink_metadata(crate::filter::rel_to_abs(opened.filter.root(), p))
                    .is_ok();
            !(in_target || in_tree || on_disk)
        })
        .map(|p| p.to_string())
        .collect();
    if unmatched.is_empty() {
        return Ok(());
    }
    Err(RpcError::new(
        ErrorCode::InvalidParams,
        format!(
            "{} matches nothing in checkpoint {} or in the working tree; nothing was restored",
            unmatched.join(", "),
            &target.id[..12]
        ),
    ))
}

/// Checks the project against the checkpoint after a restore and reports every path that still
/// differs and is not reported yet: typically a file that was ignored before the restore (so it
/// was left alone) and is not ignored under the restored `.gitignore`.
pub(super) fn report_leftovers(
    project: &Project,
    opened: &mut crate::daemon::project::Opened,
    target: &crate::store::Checkpoint,
    paths: &[BString],
    started_ns: i128,
    report: &mut crate::store::RestoreReport,
) -> Result<gix::ObjectId, RpcError> {
    use std::os::unix::fs::MetadataExt;
    // The restore's own writes match the target; a later status change is someone else's.
    let changed_since_start = |rel: &[u8]| {
        std::fs::symlink_metadata(crate::filter::rel_to_abs(&project.root, rel))
            .is_ok_and(|m| m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128 >= started_ns)
    };
    let now = opened.current_tree(project)?;
    let repo = opened.store.repo();
    let wanted = parse_id(&target.tree).map_err(store_error)?;
    for change in diff_trees(&repo, Some(now), Some(wanted), paths).map_err(store_error)? {
        let path = change.path.to_string();
        if report.skipped.iter().any(|s| s.path == path) {
            continue;
        }
        let touched = report.written.contains(&path) || report.deleted.contains(&path);
        let reason = if touched || changed_since_start(&change.path) {
            "written by another process while the restore ran; left as it is"
        } else if change.old.is_some() && change.new.is_none() {
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
