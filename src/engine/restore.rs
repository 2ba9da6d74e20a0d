//! Changing the files back: restore, undo, and (from [`timeline`](super::timeline)) reset.
//!
//! A restore, top-down ([`restore_to`]): bring the index up to date; refuse paths that match
//! nothing; plan (the tree diff from now to the target); record the current state as a
//! `pre-restore` checkpoint (the undo) while the plan is applied up to the gate
//! ([`worktree::apply`], which decides per path what must be left alone, reads and writes
//! under temporary names, and changes nothing in the project before the undo point is
//! durable); check the result against the target and report every path that still differs
//! (`report_leftovers`); record a checkpoint of the result that names both, while the device
//! flushes what was written (waited for before the reply).

use gix::bstr::BString;
use serde_json::Value;

use crate::protocol::events::EventKind;

use super::record::{record, take_recorded};
use super::worktree::{self, Applied};
use super::{Error, Opened, Project, Result};
use crate::filter::rel_to_abs;
use crate::index::Trees;
use crate::model::{CheckpointId, Kind, SkipReason, SkippedFile};
use crate::protocol::methods::{RestoreParams, UndoParams};
use crate::protocol::results::Restored;
use crate::protocol::results::{lossy, non_utf8};
use crate::store::checkpoint::{parse_id, KnownChanges};
use crate::store::treediff::{count_changes, diff_trees, TreeChange};
use crate::store::{Checkpoint, CheckpointError, NewCheckpoint, RestoreLink, StoreError};

pub fn restore(p: &Project, o: &mut Opened, params: RestoreParams) -> Result<Restored> {
    let paths = p.tree_paths(&params.paths)?;
    if let Some(by) = &params.by {
        if by.is_empty() || by.len() > 100 || by.chars().any(char::is_control) {
            return Err(Error::invalid(
                "`by` names who asked for the restore: 1 to 100 characters, one line",
            ));
        }
    }
    let mut target = {
        let repo = o.store.repo();
        o.store
            .resolve_in(&repo, &params.id, params.dialog.as_deref())?
    };
    if target.origin.is_some() {
        // Another person's checkpoint: the restore and its undo are recorded in one of this
        // store's own dialogs.
        target.dialog = params
            .dialog
            .clone()
            .unwrap_or_else(|| crate::store::DEFAULT_DIALOG.to_string());
    }
    restore_to(
        p,
        o,
        &target,
        paths,
        params.dry_run,
        Kind::Restore,
        params.by,
    )
}

/// Restores the last restore's undo checkpoint (of `dialog`, or of any dialog).
pub fn undo(p: &Project, o: &mut Opened, params: UndoParams) -> Result<Restored> {
    let target = {
        let repo = o.store.repo();
        let last = o
            .store
            .list(&repo, params.dialog.as_deref())?
            .into_iter()
            .find_map(|c| c.restore)
            .ok_or(Error::NothingToUndo)?;
        o.store.checkpoint(&repo, last.undo.object_id())?
    };
    restore_to(
        p,
        o,
        &target,
        Vec::new(),
        params.dry_run,
        Kind::Restore,
        None,
    )
}

/// The restore itself; `end_kind` is the kind of the checkpoint that records the result
/// (`restore`, or `reset` for a session reset), whose label says `by` whom it was asked for
/// when not the user.
pub fn restore_to(
    p: &Project,
    o: &mut Opened,
    target: &Checkpoint,
    paths: Vec<BString>,
    dry_run: bool,
    end_kind: Kind,
    by: Option<String>,
) -> Result<Restored> {
    let started = coarse_now_ns();
    o.prepare(p)?;
    refuse_unmatched_paths(o, target, &paths)?;
    // The undo point: the project as it moved on since its last checkpoint.
    let current = o.write_tree(Trees::New)?;
    // What the undo point cannot hold: reported as left alone (see `report_uncaptured`).
    let uncaptured = o.index.skipped();
    let target_tree = parse_id(&target.tree)?;
    // The plan: what differs from the target (read where the current tree may still be
    // pending).
    let plan = o
        .store
        .begin()
        .objects(|repo| diff_trees(repo, Some(current), Some(target_tree), &paths))?;
    // The whole difference from the undo point to the target: the result's counts when the
    // result is the target (see `counts_against`).
    let known = paths.is_empty().then(|| {
        let (added, modified, deleted) = count_changes(&plan);
        KnownChanges {
            old: current,
            new: target_tree,
            added,
            modified,
            deleted,
        }
    });
    let new_files: std::collections::HashSet<&BString> = plan
        .iter()
        .filter(|c| c.old.is_none())
        .map(|c| &c.path)
        .collect();
    let (mut applied, undo) = match dry_run {
        true => (look_at_plan(o, target_tree, &plan), None),
        false => {
            let (applied, recorded) = apply_recording_undo(o, target, current, target_tree, &plan);
            (applied, Some(take_recorded(p, o, current, recorded)?))
        }
    };
    report_uncaptured(o, uncaptured, &paths, &mut applied);
    log_applied(target, &applied, dry_run);
    // The device flushes what was written while the result is checked and recorded; the
    // flush is waited for before the reply (also when recording fails: `Flushing` waits
    // when dropped). Nothing recorded depends on the flush: the undo point was durable before
    // the first write, and a result lost in a power cut loses only that checkpoint.
    let flushing = (!dry_run).then(|| {
        let data = std::mem::take(&mut applied.flushing);
        super::flush::Flushing::folders(data, o.filter.root(), &applied.written, &applied.deleted)
    });
    let mut recorded = None;
    if let Some(undo) = &undo {
        let scope = Scope {
            paths,
            known,
            started,
            end_kind,
            by,
        };
        recorded = Some(check_and_record(p, o, target, undo, scope, &mut applied)?);
    }
    if let Some(flushing) = flushing {
        flushing.wait();
    }
    // The client's metadata of the target (e.g. the agent's conversation), to roll back with.
    let mut with_meta = target.clone();
    o.store.load_meta(&o.store.repo(), &mut with_meta)?;
    let created: Vec<BString> = applied
        .written
        .iter()
        .filter(|p| new_files.contains(p))
        .cloned()
        .collect();
    Ok(Restored {
        restored_to: target.id,
        undo_checkpoint: undo.map(|c| c.id),
        dry_run,
        written: lossy(&applied.written),
        written_bytes: non_utf8(&applied.written),
        deleted: lossy(&applied.deleted),
        deleted_bytes: non_utf8(&applied.deleted),
        created: lossy(&created),
        skipped: applied.skipped,
        restore_checkpoint: recorded,
        meta: with_meta.meta.unwrap_or(Value::Null),
    })
}

/// What applying `plan` would do, changing nothing (a dry run).
fn look_at_plan(o: &mut Opened, target_tree: gix::ObjectId, plan: &[TreeChange]) -> Applied {
    let repo = o.store.repo();
    let gate = worktree::Gate::open();
    worktree::apply(
        &repo,
        &o.store,
        &o.filter,
        &mut o.index,
        target_tree,
        plan,
        true,
        &gate,
    )
}

/// After the files were written: reports what still differs from the target (see
/// [`report_leftovers`]), records the result as a checkpoint that names the target and the
/// undo point, and tells the subscribers; returns the result's id.
fn check_and_record(
    p: &Project,
    o: &mut Opened,
    target: &Checkpoint,
    undo: &Checkpoint,
    scope: Scope,
    applied: &mut Applied,
) -> Result<CheckpointId> {
    let now = report_leftovers(p, o, target, &scope.paths, scope.started, applied);
    // Written just now: as racy as a file just read (the result records what was written),
    // whether or not the rest of the restore succeeds.
    o.index.mark_written(&applied.written);
    let now = now?;
    let end_kind = scope.end_kind;
    let id = record_result(p, o, target, undo, now, scope)?;
    p.events.emit(EventKind::Restored {
        kind: end_kind,
        restored_to: target.id,
        dialog: target.dialog.clone(),
        undo_checkpoint: undo.id,
        restore_checkpoint: Some(id),
        written: applied.written.len(),
        deleted: applied.deleted.len(),
        skipped: applied.skipped.clone(),
    });
    Ok(id)
}

/// Now, by the kernel's coarse clock: file timestamps come from it, and it lags the precise
/// one, so a write just after this moment could otherwise look older.
fn coarse_now_ns() -> i64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    crate::fs::nanos(now.tv_sec, now.tv_nsec)
}

/// Records the files as they are (`current`) as the `pre-restore` checkpoint, the undo, on a
/// thread of the pool while this thread applies `plan` up to the gate: the restore's checks,
/// reads and temporary files overlap with making the undo point durable, and nothing in the
/// project changes before it is (see [`worktree::Gate`]). Where the undo point fails, nothing
/// changed; where the pool cannot start, it is recorded first.
fn apply_recording_undo(
    o: &mut Opened,
    target: &Checkpoint,
    current: gix::ObjectId,
    target_tree: gix::ObjectId,
    plan: &[TreeChange],
) -> (Applied, std::result::Result<Checkpoint, CheckpointError>) {
    let label = format!(
        "before restoring to {} (#{} {})",
        target.id.short(),
        target.seq,
        target.kind
    );
    // What changed since the checkpoint before, and who was running: kept with the undo point
    // like with every checkpoint (none where it cannot be read: the undo point matters more).
    let span = o.span_to(current).unwrap_or_default();
    let new = NewCheckpoint {
        span,
        // What the index knows of how `current` differs from the tree it wrote before.
        known_changes: o.index.last_changes().filter(|k| k.new == current),
        ..NewCheckpoint::new(target.dialog.clone(), Kind::PreRestore, label)
    };
    let (store, filter, index) = (&o.store, &o.filter, &mut o.index);
    let skipped = index.skipped();
    let Some(pool) = super::workers::pool() else {
        // No pool: the undo point first, then the writes.
        let recorded = store.record_checkpoint(current, skipped, new);
        let applied = match recorded {
            Ok(_) => {
                let repo = store.repo();
                let gate = worktree::Gate::open();
                worktree::apply(&repo, store, filter, index, target_tree, plan, false, &gate)
            }
            Err(_) => Applied::default(),
        };
        return (applied, recorded);
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // Shut (nothing changes) should the recording end without an answer, e.g. by a panic.
    let gate = worktree::Gate::after(move || rx.recv().unwrap_or(false));
    let mut recorded = None;
    let applied = pool.in_place_scope(|scope| {
        scope.spawn(|_| {
            let result = store.record_checkpoint(current, skipped, new);
            // The gate opens (or, on failure, stays shut) for the writes waiting behind it.
            let _ = tx.send(result.is_ok());
            recorded = Some(result);
        });
        let repo = store.repo();
        worktree::apply(&repo, store, filter, index, target_tree, plan, false, &gate)
    });
    // The scope returns once the recording is done (and raises its panic, if any).
    let recorded = recorded.expect("the undo point's recording ended with the scope");
    (applied, recorded)
}

/// Reports each file (among `paths`, or anywhere) that the undo point could not capture (too
/// large, unreadable) and that is still there: the restore can neither bring it back nor
/// delete it, so it is left as it is, and says so like every file it leaves alone.
fn report_uncaptured(
    o: &Opened,
    uncaptured: Vec<SkippedFile>,
    paths: &[BString],
    applied: &mut Applied,
) {
    for skip in uncaptured {
        let path = skip
            .path_bytes
            .clone()
            .unwrap_or_else(|| skip.path.clone().into_bytes());
        let in_scope = crate::store::tree::within(&path, paths);
        let reported = applied
            .skipped
            .iter()
            .any(|s| s.path == skip.path && s.path_bytes == skip.path_bytes);
        let there = std::fs::symlink_metadata(rel_to_abs(o.filter.root(), &path)).is_ok();
        if in_scope && !reported && there {
            let why = format!(
                "left as it is: the undo checkpoint could not capture it ({}), so the restore \
                 neither brings it back nor deletes it",
                skip.reason
            );
            applied
                .skipped
                .push(SkippedFile::new(&path, skip.reason_code, why));
        }
    }
}

/// Logs what the restore did.
fn log_applied(target: &Checkpoint, applied: &Applied, dry_run: bool) {
    for skip in &applied.skipped {
        tracing::warn!(path = %skip.path, reason = %skip.reason, "skipped while restoring");
    }
    tracing::info!(
        target = %target.id,
        dry_run,
        written = applied.written.len(),
        deleted = applied.deleted.len(),
        skipped = applied.skipped.len(),
        "restore finished"
    );
}

/// What a restore covered: the paths it was limited to (none: all of them) and, for a whole
/// restore, how the target differs from the undo point (its plan); when it started, and the
/// kind of checkpoint that records its result.
struct Scope {
    paths: Vec<BString>,
    known: Option<KnownChanges>,
    started: i64,
    end_kind: Kind,
    by: Option<String>,
}

/// Records the state the restore left (`now`) as a checkpoint of `end_kind` that names the
/// target and the undo point.
fn record_result(
    p: &Project,
    o: &mut Opened,
    target: &Checkpoint,
    undo: &Checkpoint,
    now: gix::ObjectId,
    scope: Scope,
) -> Result<CheckpointId> {
    let Scope {
        paths,
        known,
        end_kind,
        by,
        ..
    } = scope;
    let scope = match paths.len() {
        0 => String::new(),
        n => format!(" ({n} paths)"),
    };
    let by = by.map(|by| format!(", asked by {by}")).unwrap_or_default();
    let done = match end_kind {
        Kind::Revert => "took back the turn of",
        _ => "restored to",
    };
    let label = format!(
        "{done} {} (#{} {}){scope}{by}",
        target.id.short(),
        target.seq,
        target.kind
    );
    let link = RestoreLink {
        restored_to: target.id,
        undo: undo.id,
    };
    let new = NewCheckpoint {
        restore: Some(link),
        known_changes: known,
        ..NewCheckpoint::new(target.dialog.clone(), end_kind, label)
    };
    Ok(record(p, o, now, new)?.id)
}

/// A restore of paths that name nothing, in the checkpoint or in the working tree, is a
/// mistake (a typo, the wrong folder): it is refused, naming them, before anything is
/// recorded or touched.
fn refuse_unmatched_paths(o: &Opened, target: &Checkpoint, paths: &[BString]) -> Result<()> {
    if paths.is_empty() || paths.iter().any(|p| p.is_empty()) {
        return Ok(());
    }
    let repo = o.store.repo();
    let tree = repo
        .find_tree(parse_id(&target.tree)?)
        .map_err(|e| StoreError::git("reading a tree", e))?;
    let unmatched: Vec<String> = paths
        .iter()
        .filter(|p| {
            // Cheapest first: the index in memory, then the target's trees, then the disk.
            let in_tree = o.index.holds(gix::bstr::ByteSlice::as_bstr(p.as_slice()));
            let in_target = || {
                tree.lookup_entry_by_path(gix::bstr::ByteSlice::to_path_lossy(p.as_slice()))
                    .ok()
                    .flatten()
                    .is_some()
            };
            let on_disk = || std::fs::symlink_metadata(rel_to_abs(o.filter.root(), p)).is_ok();
            !(in_tree || in_target() || on_disk())
        })
        .map(|p| p.to_string())
        .collect();
    if unmatched.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{} matches nothing in checkpoint {} or in the working tree; nothing was restored",
        unmatched.join(", "),
        target.id.short()
    )))
}

/// Checks the project against the checkpoint after a restore and reports every path that still
/// differs and is not reported yet: typically a file that was ignored before the restore (so it
/// was left alone) and is not ignored under the restored `.gitignore`. Returns the tree of the
/// project as the restore left it.
fn report_leftovers(
    p: &Project,
    o: &mut Opened,
    target: &Checkpoint,
    paths: &[BString],
    started_ns: i64,
    applied: &mut Applied,
) -> Result<gix::ObjectId> {
    use std::os::unix::fs::MetadataExt;
    // The restore's own writes match the target; a later status change is someone else's.
    let changed_since_start = |rel: &[u8]| {
        std::fs::symlink_metadata(rel_to_abs(&p.root, rel))
            .is_ok_and(|m| crate::fs::nanos(m.ctime(), m.ctime_nsec()) >= started_ns)
    };
    let now = o.current_tree(p)?;
    let repo = o.store.repo();
    let wanted = parse_id(&target.tree)?;
    for change in diff_trees(&repo, Some(now), Some(wanted), paths)? {
        let path = change.path.to_string();
        let reported = |s: &SkippedFile| match &s.path_bytes {
            Some(bytes) => *bytes == change.path,
            None => s.path == path,
        };
        if applied.skipped.iter().any(reported) {
            continue;
        }
        let touched =
            applied.written.contains(&change.path) || applied.deleted.contains(&change.path);
        let (code, reason) = if touched || changed_since_start(&change.path) {
            (
                SkipReason::ChangedDuringRestore,
                "written by another process while the restore ran; left as it is",
            )
        } else if change.old.is_some() && change.new.is_none() {
            (
                SkipReason::IgnoredThen,
                "left in place: it was not captured before the restore (ignored or excluded \
                 then), so it is not deleted",
            )
        } else {
            (
                SkipReason::IgnoredThen,
                "still differs from the checkpoint after the restore (it was not captured \
                 before: ignored or excluded then)",
            )
        };
        tracing::warn!(path = %path, reason, "skipped while restoring");
        applied
            .skipped
            .push(SkippedFile::new(&change.path, code, reason));
    }
    Ok(now)
}
