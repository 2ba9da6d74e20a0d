//! Dialogs and sessions (one timeline per conversation, approvals and resets), retention, the
//! store's disk budget, and gc.

use crate::protocol::events::EventKind;

use super::record::{active_session, record, record_initial};
use super::restore::restore_to;
use super::{Error, Opened, Project, Result};
use crate::model::{Kind, Retention};
use crate::protocol::methods::{
    DialogKeepParams, DialogNewParams, DialogParams, ForkParams, ProjectParams, PruneParams,
    SessionApproveParams, SessionParams, SessionResetParams,
};
use crate::protocol::results as r;
use crate::store::checkpoint::{parse_id, validate_dialog};
use crate::store::{CheckpointError, NewCheckpoint, DEFAULT_DIALOG};

pub fn session_status(
    p: &Project,
    o: &mut Opened,
    params: SessionParams,
) -> Result<r::SessionStatus> {
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    let (head, approved) = {
        let repo = o.store.repo();
        let head = o.store.list(&repo, Some(&dialog))?.into_iter().next();
        let head = head.ok_or_else(|| CheckpointError::UnknownDialog(dialog.clone()))?;
        let approved = o.store.approved(&repo, &dialog)?;
        (head, approved.expect("the dialog has checkpoints"))
    };
    let now = o.current_tree(p)?;
    Ok(r::SessionStatus {
        active_session: active_session(&head),
        has_unapproved: Some(now) != parse_id(&approved.tree).ok(),
        approved_commit: approved.id,
        last_approved_at: (approved.kind == Kind::Approved).then_some(approved.created_at),
        dialog,
    })
}

pub fn session_approve(
    p: &Project,
    o: &mut Opened,
    params: SessionApproveParams,
) -> Result<r::SessionApproved> {
    let named = params.dialog.is_some();
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    validate_dialog(&dialog)?;
    let tree = o.current_tree(p)?;
    if named && !o.store.dialog_exists(&o.store.repo(), &dialog)? {
        record_initial(p, o, tree, &dialog, "")?;
    }
    let label = params.message.unwrap_or_default();
    let approved = record(
        p,
        o,
        tree,
        NewCheckpoint::new(dialog.clone(), Kind::Approved, label),
    )?;
    let repo = o.store.repo();
    o.store.set_approved(&repo, &approved)?;
    let commits_approved = o
        .store
        .list(&repo, Some(&dialog))?
        .iter()
        .filter(|c| c.session == approved.session && c.id != approved.id)
        .count();
    let result = r::SessionApproved {
        approved_commit: approved.id,
        session: approved.session,
        new_session: approved.session + 1,
        commits_approved,
    };
    p.events.emit(EventKind::SessionApproved {
        dialog,
        approved_commit: result.approved_commit,
        session: result.session,
        new_session: result.new_session,
        commits_approved: result.commits_approved,
    });
    Ok(result)
}

pub fn session_reset(p: &Project, o: &mut Opened, params: SessionResetParams) -> Result<r::Reset> {
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    validate_dialog(&dialog)?;
    let target = o
        .store
        .approved(&o.store.repo(), &dialog)?
        .ok_or_else(|| CheckpointError::UnknownDialog(dialog.clone()))?;
    let restored = restore_to(p, o, &target, Vec::new(), params.dry_run, Kind::Reset, None)?;
    let mut new_session = None;
    if let Some(id) = restored.restore_checkpoint {
        let ended = o.store.checkpoint(&o.store.repo(), id.object_id())?;
        new_session = Some(ended.session + 1);
        p.events.emit(EventKind::SessionReset {
            dialog,
            reset_to: target.id,
            abandoned_session: ended.session,
            new_session: ended.session + 1,
            skipped: restored.skipped.clone(),
        });
    }
    Ok(r::Reset {
        restored,
        reset_to: target.id,
        new_session,
    })
}

/// Starts a dialog whose approved state is checkpoint `id`; the files are not touched.
pub fn dialog_fork(p: &Project, o: &mut Opened, params: ForkParams) -> Result<r::DialogStarted> {
    let dialog = params.dialog.unwrap_or_else(made_up_dialog_name);
    validate_dialog(&dialog)?;
    let from = o.store.resolve(&o.store.repo(), &params.id)?;
    refuse_existing(o, &dialog)?;
    let label = format!(
        "forked from {} (#{} in {})",
        from.id.short(),
        from.seq,
        from.dialog
    );
    let initial = record_initial(p, o, parse_id(&from.tree)?, &dialog, &label)?;
    o.store.set_approved(&o.store.repo(), &initial)?;
    Ok(r::DialogStarted {
        dialog,
        initial: initial.into(),
        forked_from: Some(from.id),
    })
}

pub fn dialog_new(
    p: &Project,
    o: &mut Opened,
    params: DialogNewParams,
) -> Result<r::DialogStarted> {
    let dialog = params.dialog.unwrap_or_else(made_up_dialog_name);
    validate_dialog(&dialog)?;
    refuse_existing(o, &dialog)?;
    let tree = o.current_tree(p)?;
    let title = params.title.as_deref().unwrap_or("");
    let initial = record_initial(p, o, tree, &dialog, title)?;
    Ok(r::DialogStarted {
        dialog,
        initial: initial.into(),
        forked_from: None,
    })
}

fn refuse_existing(o: &Opened, dialog: &str) -> Result<()> {
    if o.store.dialog_exists(&o.store.repo(), dialog)? {
        return Err(Error::DialogExists(dialog.to_string()));
    }
    Ok(())
}

fn made_up_dialog_name() -> String {
    let now = jiff::Timestamp::now();
    format!(
        "d-{}-{:04x}",
        now.strftime("%Y%m%d-%H%M%S"),
        (now.subsec_nanosecond() as u32 ^ std::process::id()) & 0xffff
    )
}

pub fn dialog_list(_: &Project, o: &mut Opened, _: ProjectParams) -> Result<Vec<r::DialogInfo>> {
    let store = &o.store;
    let repo = store.repo();
    let mut out = Vec::new();
    for (name, head) in store.dialogs(&repo)? {
        let chain = store.list(&repo, Some(&name))?;
        let head = store.checkpoint(&repo, head)?;
        let title = chain
            .last()
            .filter(|c| c.kind == Kind::Initial)
            .map(|c| c.label.clone())
            .unwrap_or_default();
        out.push(r::DialogInfo {
            dialog: name,
            checkpoints: chain.len(),
            last_activity: head.created_at,
            head: head.id,
            title,
        });
    }
    Ok(out)
}

pub fn dialog_rm(_: &Project, o: &mut Opened, params: DialogParams) -> Result<r::DialogRemoved> {
    let head = o.store.remove_dialog(&o.store.repo(), &params.dialog)?;
    Ok(r::DialogRemoved {
        dialog: params.dialog,
        head: head.into(),
    })
}

pub fn dialog_keep(p: &Project, o: &mut Opened, params: DialogKeepParams) -> Result<r::DialogKept> {
    if params.keep == Some(0) {
        return Err(Error::invalid("keep must be at least 1"));
    }
    refuse_unknown(o, &params.dialog)?;
    o.store.set_dialog_keep(&params.dialog, params.keep)?;
    let retention = p.retention(&o.store, &params.dialog);
    Ok(r::DialogKept {
        dialog: params.dialog,
        keep: retention.keep,
        auto_keep: retention.auto_keep,
    })
}

fn refuse_unknown(o: &Opened, dialog: &str) -> Result<()> {
    validate_dialog(dialog)?;
    if !o.store.dialog_exists(&o.store.repo(), dialog)? {
        return Err(CheckpointError::UnknownDialog(dialog.to_string()).into());
    }
    Ok(())
}

/// Applies retention (`keep` overrides the configured number) and optionally collects garbage.
pub fn prune(p: &Project, o: &mut Opened, params: PruneParams) -> Result<r::Pruned> {
    if params.keep == Some(0) {
        return Err(Error::invalid("keep must be at least 1"));
    }
    if let Some(d) = &params.dialog {
        refuse_unknown(o, d)?;
    }
    let retention = |dialog: &str| {
        let mut r = p.retention(&o.store, dialog);
        if let Some(keep) = params.keep {
            r.keep = keep;
        }
        r
    };
    let repo = o.store.repo();
    let report = o
        .store
        .prune(&repo, params.dialog.as_deref(), &retention, params.dry_run)?;
    drop(repo);
    let mut pruned = r::Pruned {
        report: report.into(),
        gc: None,
        budget: None,
    };
    if !params.dry_run {
        if params.gc {
            pruned.gc = Some(collect_garbage(p, o)?);
        }
        pruned.budget = enforce_budget(p, o)?;
    }
    Ok(pruned)
}

pub fn gc(p: &Project, o: &mut Opened, _: ProjectParams) -> Result<r::GcReport> {
    collect_garbage(p, o)
}

/// Runs gc keeping the project's current tree (which the index's cached ids point into).
fn collect_garbage(p: &Project, o: &mut Opened) -> Result<r::GcReport> {
    // A worktree whose sibling was registered since the store was opened joins the pool now.
    if let Some(joined) = p.join_pool(&o.store)? {
        o.store = joined;
    }
    let tree = o.current_tree(p)?;
    let report = o.store.gc(&[tree])?;
    o.save_index(true);
    Ok(report.into())
}

/// Prunes `dialog` with its configured retention after a checkpoint, then holds the store to
/// its disk budget; failures are logged only.
pub(crate) fn auto_prune(p: &Project, o: &mut Opened, dialog: &str) {
    // Retention reads the dialog's whole chain, a commit from each pack.
    o.read_widely();
    let repo = o.store.repo();
    let retention = |d: &str| p.retention(&o.store, d);
    if let Err(e) = o.store.prune(&repo, Some(dialog), &retention, false) {
        tracing::warn!(dialog, error = %e, "automatic prune failed");
    }
    drop(repo);
    if let Err(e) = enforce_budget(p, o) {
        tracing::warn!(error = %e, "holding the store to its disk budget failed");
    }
}

/// When the store is larger than `max_store_bytes`, prunes the oldest checkpoints of every
/// dialog (halving how many each keeps, round by round) and collects garbage until it fits or
/// only what retention always keeps is left. Returns what it did, or None when within budget.
fn enforce_budget(p: &Project, o: &mut Opened) -> Result<Option<r::Budget>> {
    let Some(budget) = p.max_store_bytes() else {
        return Ok(None);
    };
    let before = o.store.objects_size();
    if before <= budget {
        return Ok(None);
    }
    let longest = {
        let chains = o.store.chains(&o.store.repo(), None)?;
        chains.iter().map(|(_, c)| c.len()).max().unwrap_or(1)
    };
    let mut keep = (longest / 2).max(1);
    let mut pruned = Vec::new();
    loop {
        let repo = o.store.repo();
        let retention = |d: &str| {
            let r = p.retention(&o.store, d);
            Retention {
                keep: r.keep.min(keep),
                auto_keep: r.auto_keep.min(keep),
            }
        };
        let report = o.store.prune(&repo, None, &retention, false)?;
        drop(repo);
        pruned.extend(report.pruned_checkpoints);
        collect_garbage(p, o)?;
        if o.store.objects_size() <= budget || keep == 1 {
            break;
        }
        keep = (keep / 2).max(1);
    }
    let after = o.store.objects_size();
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
    Ok(Some(r::Budget {
        max_store_bytes: budget,
        bytes_before: before,
        bytes_after: after,
        pruned: pruned.into_iter().map(Into::into).collect(),
    }))
}
