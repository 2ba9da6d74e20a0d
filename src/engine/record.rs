//! Recording a checkpoint of the project's tree, the one way every operation records one
//! (a prompt's, a manual one, a restore's undo point and result, a dialog's `initial`, an
//! automatic one): the store records it, and the project's caches and subscribers hear of it.
//! Checkpoint, restore and timeline operations call down to it.

use super::opened::RecentMessages;
use super::{Opened, Project, Result};
use crate::model::Kind;
use crate::protocol::events::EventKind;
use crate::store::checkpoint::parse_id;
use crate::store::{Checkpoint, CheckpointError, NewCheckpoint, DEFAULT_DIALOG};

/// A repeated prompt arrives right after the first, so only the newest checkpoints of its dialog
/// are searched for its message id: the whole history would cost every prompt more than the
/// last.
const REPEAT_WINDOW: usize = 64;

/// The checkpoint among the newest [`REPEAT_WINDOW`] of `dialog` that recorded `message_id`.
/// The window of message ids is read once per dialog ([`RecentMessages`]) instead of 64
/// commits per prompt. Commits never change, so a window is exact for its head; a recorded
/// checkpoint whose parent is the head extends it ([`note_recorded`]), any other move of the
/// ref (a restore elsewhere, a reset, a prune, `git`) makes it read again.
pub(crate) fn recent_with_message(
    o: &mut Opened,
    dialog: &str,
    message_id: &str,
) -> Result<Option<Checkpoint>> {
    let repo = o.store.repo();
    let head = o.store.ref_target(
        &repo,
        &format!("{}{dialog}", crate::store::checkpoint::DIALOG_REFS),
    )?;
    let Some(head) = head else {
        return Ok(None);
    };
    let window = o.recent_messages.entry(dialog.to_string()).or_default();
    let fresh = window.head != Some(head);
    if fresh {
        *window = RecentMessages {
            head: Some(head),
            newest: Default::default(),
        };
        let mut next = Some(head);
        while let Some(id) = next.filter(|_| window.newest.len() < REPEAT_WINDOW) {
            // Past a retention cut the parent is gone: the window ends there.
            let Ok(c) = o.store.checkpoint(&repo, id) else {
                break;
            };
            window.newest.push_back((c.message_id.clone(), id));
            next = c.parent.map(|p| p.object_id());
        }
    }
    let found = window
        .newest
        .iter()
        .find(|(m, _)| m.as_deref() == Some(message_id))
        .map(|(_, id)| *id);
    match found.map(|id| o.store.checkpoint(&repo, id)) {
        Some(Ok(c)) => Ok(Some(c)),
        // Removed since the window was read (a gc after a prune takes the oldest first, so
        // nothing newer is gone either): read the window again, once.
        Some(Err(_)) if !fresh => {
            o.recent_messages.remove(dialog);
            recent_with_message(o, dialog, message_id)
        }
        // Unreadable although just read: as the walk stopping there, not found.
        Some(Err(_)) | None => Ok(None),
    }
}

/// Extends `dialog`'s window of message ids with a checkpoint just recorded on its head.
fn note_recorded(o: &mut Opened, c: &Checkpoint) {
    let parent = c.parent.map(|p| p.object_id());
    if let Some(window) = o.recent_messages.get_mut(&c.dialog) {
        if parent.is_some() && window.head == parent {
            window.head = Some(c.id.object_id());
            window
                .newest
                .push_front((c.message_id.clone(), c.id.object_id()));
            window.newest.truncate(REPEAT_WINDOW);
        } else {
            o.recent_messages.remove(&c.dialog);
        }
    }
}

/// Records a checkpoint of `tree` and tells the project's subscribers.
pub(crate) fn record(
    p: &Project,
    o: &mut Opened,
    tree: gix::ObjectId,
    mut new: NewCheckpoint,
) -> Result<Checkpoint> {
    // The index knows what changed since the tree it wrote before this one (most often the
    // parent's): the counts then need no read of the parent's trees.
    if new.known_changes.is_none() {
        new.known_changes = o.index.last_changes().filter(|k| k.new == tree);
    }
    if new.span.is_none() && new.kind != Kind::Imported {
        new.span = o.span_to(tree)?;
    }
    let recorded = o.store.record_checkpoint(tree, o.index.skipped(), new);
    take_recorded(p, o, tree, recorded)
}

/// The rest of [`record`] once the store has recorded a checkpoint of `tree` (or failed to):
/// the project's caches and subscribers hear of it.
pub(crate) fn take_recorded(
    p: &Project,
    o: &mut Opened,
    tree: gix::ObjectId,
    recorded: std::result::Result<Checkpoint, CheckpointError>,
) -> Result<Checkpoint> {
    let c = recorded.inspect_err(|_| o.forget_if_lost())?;
    *p.last_recorded.lock() = Some(tree);
    o.turns.note(&c, tree);
    note_recorded(o, &c);
    emit_created(p, &c);
    Ok(c)
}

/// Tells the project's subscribers about a new checkpoint.
pub(crate) fn emit_created(p: &Project, c: &Checkpoint) {
    p.events.emit(EventKind::CheckpointCreated {
        id: c.id,
        dialog: c.dialog.clone(),
        seq: c.seq,
        session: c.session,
        kind: c.kind,
        label: c.label.clone(),
        files: c.files,
        added: c.added,
        modified: c.modified,
        deleted: c.deleted,
        skipped: c.skipped.len(),
    });
}

/// Records an `auto` checkpoint in the default dialog if the files differ from the checkpoint
/// recorded last; returns it, or None when nothing changed.
pub fn record_auto(p: &Project, o: &mut Opened) -> Result<Option<Checkpoint>> {
    let tree = o.tree_to_record(p)?;
    let known = *p.last_recorded.lock();
    let last = match known {
        Some(t) => Some(t),
        None => {
            let repo = o.store.repo();
            let newest = o.store.list(&repo, None)?;
            newest.first().map(|c| parse_id(&c.tree)).transpose()?
        }
    };
    if last == Some(tree) {
        return Ok(None);
    }
    let new = NewCheckpoint::new(DEFAULT_DIALOG, Kind::Auto, "automatic checkpoint");
    let c = record(p, o, tree, new)?;
    o.prune_after_reply(DEFAULT_DIALOG);
    o.save_index(false);
    Ok(Some(c))
}

/// Records the `initial` checkpoint that starts `dialog`.
pub(crate) fn record_initial(
    p: &Project,
    o: &mut Opened,
    tree: gix::ObjectId,
    dialog: &str,
    title: &str,
) -> Result<Checkpoint> {
    let mut new = NewCheckpoint::new(dialog, Kind::Initial, title);
    // A new dialog's first checkpoint counts every file as added: the index knows how many
    // its tree holds (reading every tree took 8.6 ms at 100,000 files, on the first prompt of
    // every agent session).
    new.known_files = o.index.files_in(tree).map(|n| (tree, n));
    record(p, o, tree, new)
}

/// The session a dialog whose latest checkpoint is `head` is in now.
pub fn active_session(head: &Checkpoint) -> u64 {
    head.session + u64::from(head.kind.ends_session())
}
