//! Dialogs and sessions: one timeline per conversation, approvals and resets.

use super::*;

pub(super) async fn session_status(daemon: &Arc<Daemon>, params: SessionParams) -> Reply {
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

pub(super) async fn session_approve(daemon: &Arc<Daemon>, params: SessionApproveParams) -> Reply {
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
                record_initial(project, opened, tree, &dialog, "")?;
            }
            let new = NewCheckpoint::new(
                dialog.clone(),
                "approved",
                params.message.unwrap_or_default(),
            );
            let approved = record(project, opened, tree, new)?;
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
            let value = json!({
                "approved_commit": approved.id,
                "session": approved.session,
                "new_session": approved.session + 1,
                "commits_approved": approved_count,
            });
            let mut event = value.clone();
            event["dialog"] = json!(dialog);
            project.events.emit("session_approved", event);
            Ok(value)
        })
        .await
}

pub(super) async fn session_reset(daemon: &Arc<Daemon>, params: SessionResetParams) -> Reply {
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
                project.events.emit(
                    "session_reset",
                    json!({
                        "dialog": dialog, "reset_to": target.id, "abandoned_session": ended.session,
                        "new_session": ended.session + 1, "skipped": value["skipped"],
                    }),
                );
            }
            Ok(value)
        })
        .await
}

/// Starts a dialog whose approved state is checkpoint `id`; the files are not touched.
pub(super) async fn dialog_fork(daemon: &Arc<Daemon>, params: ForkParams) -> Reply {
    let dialog = params.dialog.unwrap_or_else(made_up_dialog_name);
    validate_dialog(&dialog).map_err(checkpoint_error)?;
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
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
            let initial = record_initial(project, opened, tree, &dialog, &label)?;
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

pub(super) fn made_up_dialog_name() -> String {
    let now = jiff::Timestamp::now();
    format!(
        "d-{}-{:04x}",
        now.strftime("%Y%m%d-%H%M%S"),
        (now.subsec_nanosecond() as u32 ^ std::process::id()) & 0xffff
    )
}

/// Records the `initial` checkpoint that starts `dialog`.
pub(super) fn record_initial(
    project: &Project,
    opened: &mut crate::daemon::project::Opened,
    tree: gix::ObjectId,
    dialog: &str,
    title: &str,
) -> Reply {
    let new = NewCheckpoint::new(dialog, "initial", title);
    let c = record(project, opened, tree, new)?;
    Ok(to_value(&c))
}

pub(super) async fn dialog_new(daemon: &Arc<Daemon>, params: DialogNewParams) -> Reply {
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
            let initial = record_initial(
                project,
                opened,
                tree,
                &dialog,
                params.title.as_deref().unwrap_or(""),
            )?;
            Ok(json!({ "dialog": dialog, "initial": initial }))
        })
        .await
}

pub(super) async fn dialog_list(daemon: &Arc<Daemon>, params: ProjectParams) -> Reply {
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

pub(super) async fn dialog_rm(daemon: &Arc<Daemon>, params: DialogParams) -> Reply {
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

pub(super) async fn dialog_keep(daemon: &Arc<Daemon>, params: DialogKeepParams) -> Reply {
    if params.keep == Some(0) {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            "keep must be at least 1",
        ));
    }
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            if !opened
                .store
                .dialog_exists(&repo, &params.dialog)
                .map_err(checkpoint_error)?
            {
                return Err(checkpoint_error(CheckpointError::UnknownDialog(
                    params.dialog.clone(),
                )));
            }
            opened
                .store
                .set_dialog_keep(&params.dialog, params.keep)
                .map_err(store_error)?;
            let retention = project.retention(&opened.store, &params.dialog);
            Ok(json!({ "dialog": params.dialog, "keep": retention.keep, "auto_keep": retention.auto_keep }))
        })
        .await
}

/// Applies retention (`keep` overrides the configured number) and optionally collects garbage.
pub(super) async fn prune(daemon: &Arc<Daemon>, params: PruneParams) -> Reply {
    if params.keep == Some(0) {
        return Err(RpcError::new(
            ErrorCode::InvalidParams,
            "keep must be at least 1",
        ));
    }
    if let Some(d) = &params.dialog {
        validate_dialog(d).map_err(checkpoint_error)?;
    }
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| {
            let repo = opened.store.repo();
            if let Some(d) = &params.dialog {
                if !opened
                    .store
                    .dialog_exists(&repo, d)
                    .map_err(checkpoint_error)?
                {
                    return Err(checkpoint_error(CheckpointError::UnknownDialog(d.clone())));
                }
            }
            let retention = |dialog: &str| {
                let mut r = project.retention(&opened.store, dialog);
                if let Some(keep) = params.keep {
                    r.keep = keep;
                }
                r
            };
            let report = opened
                .store
                .prune(&repo, params.dialog.as_deref(), &retention, params.dry_run)
                .map_err(checkpoint_error)?;
            drop(repo);
            let mut value = to_value(&report);
            if params.gc && !params.dry_run {
                value["gc"] = to_value(&collect_garbage(project, opened)?);
            }
            if !params.dry_run {
                if let Some(budget) = enforce_budget(project, opened)? {
                    value["budget"] = budget;
                }
            }
            Ok(value)
        })
        .await
}

pub(super) async fn gc(daemon: &Arc<Daemon>, params: ProjectParams) -> Reply {
    let project = find_project(daemon, &params.project).await?;
    project
        .run(move |project, opened| Ok(to_value(&collect_garbage(project, opened)?)))
        .await
}

/// Runs gc keeping the project's current tree (which the index's cached ids point into).
fn collect_garbage(
    project: &crate::daemon::project::Project,
    opened: &mut crate::daemon::project::Opened,
) -> Result<crate::store::gc::GcReport, RpcError> {
    let tree = opened.current_tree(project)?;
    let report = opened.store.gc(&[tree]).map_err(store_error)?;
    opened.save_index(true);
    Ok(report)
}

/// Prunes `dialog` with its configured retention after a checkpoint, then holds the store to
/// its disk budget; failures are logged only.
pub(super) fn auto_prune(
    project: &crate::daemon::project::Project,
    opened: &mut crate::daemon::project::Opened,
    dialog: &str,
) {
    let repo = opened.store.repo();
    let retention = |d: &str| project.retention(&opened.store, d);
    if let Err(e) = opened.store.prune(&repo, Some(dialog), &retention, false) {
        tracing::warn!(dialog, error = %e, "automatic prune failed");
    }
    drop(repo);
    if let Err(e) = enforce_budget(project, opened) {
        tracing::warn!(error = %e.message, "holding the store to its disk budget failed");
    }
}

/// When the store is larger than `max_store_bytes`, prunes the oldest checkpoints of every
/// dialog (halving how many each keeps, round by round) and collects garbage until it fits or
/// only what retention always keeps is left. Returns what it did, or None when within budget.
fn enforce_budget(
    project: &crate::daemon::project::Project,
    opened: &mut crate::daemon::project::Opened,
) -> Result<Option<Value>, RpcError> {
    let Some(budget) = project.max_store_bytes() else {
        return Ok(None);
    };
    let before = opened.store.objects_size();
    if before <= budget {
        return Ok(None);
    }
    let longest = {
        let repo = opened.store.repo();
        let chains = opened.store.chains(&repo, None).map_err(checkpoint_error)?;
        chains.iter().map(|(_, c)| c.len()).max().unwrap_or(1)
    };
    let mut keep = (longest / 2).max(1);
    let mut pruned = Vec::new();
    loop {
        let repo = opened.store.repo();
        let retention = |d: &str| {
            let r = project.retention(&opened.store, d);
            crate::store::retention::Retention {
                keep: r.keep.min(keep),
                auto_keep: r.auto_keep.min(keep),
            }
        };
        let report = opened
            .store
            .prune(&repo, None, &retention, false)
            .map_err(checkpoint_error)?;
        drop(repo);
        pruned.extend(report.pruned_checkpoints);
        collect_garbage(project, opened)?;
        if opened.store.objects_size() <= budget || keep == 1 {
            break;
        }
        keep = (keep / 2).max(1);
    }
    let after = opened.store.objects_size();
    tracing::warn!(
        budget,
        before,
        after,
        pruned = pruned.len(),
        "the store was over its disk budget: pruned the oldest checkpoints"
    );
    if after > budget {
        tracing::warn!(
            budget,
            after,
            "the store is still over budget: what is left is always kept"
        );
    }
    Ok(Some(json!({
        "max_store_bytes": budget, "bytes_before": before, "bytes_after": after,
        "pruned": pruned,
    })))
}
