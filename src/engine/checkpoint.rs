//! Recording checkpoints and looking at them: checkpoint, list, show, diff, a file's content,
//! tags and notes, verify, rescan and fsck. Patches and bundles in and out are [`super::transfer`].
//!
//! A checkpoint, top-down: [`checkpoint`] validates the request, [`Opened::current_tree`]
//! syncs with the watcher and re-reads only what changed (or verifies everything by stat when
//! the watcher cannot vouch), writes the tree, and `record` commits it and moves the dialog's
//! ref (objects durable first), then tells subscribers.

use std::collections::{HashMap, HashSet};

use super::record::{active_session, recent_with_message, record, record_initial};
use super::{Error, Opened, Project, Result};
use crate::model::{path_bytes, Kind};
use crate::protocol::methods::{
    CheckpointParams, DiffParams, FileAtParams, FsckParams, ListParams, NoteParams, ProjectParams,
    ShowParams, TagParams,
};
use crate::protocol::results as r;
use crate::store::checkpoint::{parse_id, validate_dialog};
use crate::store::diff::{diff, diff_page, Page};
use crate::store::treediff::{count_changes_within, diff_trees};
use crate::store::{NewCheckpoint, Snapshot, SnapshotOptions, DEFAULT_DIALOG};

/// Retention runs after every this many checkpoints of a dialog (walking a timeline costs a
/// few milliseconds, so not after each one).
const AUTO_PRUNE_EVERY: u64 = 10;

pub fn checkpoint(p: &Project, o: &mut Opened, params: CheckpointParams) -> Result<r::Checkpoint> {
    let kind = match params.kind.as_deref() {
        None => Kind::Message,
        Some(k) => k
            .parse::<Kind>()
            .ok()
            .filter(|k| Kind::REQUESTABLE.contains(k))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "kind `{k}` cannot be requested; use `message` or `manual`"
                ))
            })?,
    };
    // A dialog named by the client starts with an `initial` checkpoint; `default` needs none.
    let named = params.dialog.is_some();
    let dialog = params.dialog.unwrap_or_else(|| DEFAULT_DIALOG.into());
    validate_dialog(&dialog)?;
    if params
        .message_id
        .as_ref()
        .is_some_and(|m| m.len() > 256 || m.contains('\n'))
    {
        return Err(Error::invalid(
            "message_id must be one line of at most 256 bytes",
        ));
    }
    let new = NewCheckpoint {
        message_id: params.message_id,
        meta: params.meta,
        ..NewCheckpoint::new(dialog, kind, params.label.unwrap_or_default())
    };
    let exists = o.store.dialog_exists(&o.store.repo(), &new.dialog)?;
    if let (true, Some(message_id)) = (exists, &new.message_id) {
        // One prompt can arrive twice (an editor running two agents' hooks, a client retrying
        // after a timeout): the checkpoint of that message is the one already recorded.
        if let Some(c) = recent_with_message(o, &new.dialog, message_id)? {
            tracing::info!(id = %c.id, message_id, "message already checkpointed");
            return Ok(c.into());
        }
    }
    // The tree's new objects and the commit become one pack, flushed once.
    let tree = o.tree_to_record(p)?;
    if named && !exists {
        record_initial(p, o, tree, &new.dialog, "")?;
    }
    let c = record(p, o, tree, new)?;
    if c.seq % AUTO_PRUNE_EVERY == 0 {
        o.prune_after_reply(&c.dialog);
    }
    o.save_index(false);
    Ok(c.into())
}

pub fn list(p: &Project, o: &mut Opened, params: ListParams) -> Result<Vec<r::Checkpoint>> {
    let repo = o.store.repo();
    let mut all = match &params.remote {
        Some(_) => Vec::new(),
        None => o.store.list(&repo, params.dialog.as_deref())?,
    };
    if !params.steps {
        all.retain(|c| !c.kind.in_turn());
    }
    // Turns are counted on the whole timeline: a prompt's next one may be left out below.
    let whole = params.turns.then(|| all.clone());
    if !params.all_sessions {
        // Each dialog's active session, and its latest checkpoint (which shows the approved or
        // reset state a fresh session starts from).
        let mut active = HashMap::new();
        for c in &all {
            active
                .entry(c.dialog.clone())
                .or_insert_with(|| (c.id, active_session(c)));
        }
        all.retain(|c| {
            let (head, session) = &active[&c.dialog];
            c.session == *session || c.id == *head
        });
    }
    o.store.annotate(&repo, &mut all)?;
    if params.remote.is_some() || params.all {
        // Others' checkpoints, fetched: every session of theirs.
        let mut theirs = o.store.remote_list(&repo, params.remote.as_deref())?;
        if let Some(d) = &params.dialog {
            theirs.retain(|c| &c.dialog == d);
        }
        // A checkpoint of this store's own that came back from a remote is listed once.
        let own: HashSet<_> = all.iter().map(|c| c.id).collect();
        theirs.retain(|c| !own.contains(&c.id));
        all.extend(theirs);
        all.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    }
    if let Some(pattern) = params.grep.as_deref().map(str::to_lowercase) {
        all.retain(|c| {
            let text = format!(
                "{}\n{}\n{}\n{}",
                c.label,
                c.notes.as_deref().unwrap_or(""),
                c.tags.join("\n"),
                c.message_id.as_deref().unwrap_or("")
            );
            text.to_lowercase().contains(&pattern)
        });
    }
    if let Some(limit) = params.limit {
        all.truncate(limit);
    }
    drop(repo);
    let turns = match whole {
        Some(whole) => super::history::turns(p, o, &whole)?,
        None => HashMap::new(),
    };
    let mut listed = super::wire::checkpoints(all);
    for c in &mut listed {
        if let Some(t) = turns.get(&c.id) {
            c.turn = Some(r::TurnField::Changes(t.clone()));
        }
    }
    Ok(listed)
}

/// The entries of each list `show` gives when the client names no bound.
const SHOW_ENTRIES: usize = 10_000;

pub fn show(p: &Project, o: &mut Opened, params: ShowParams) -> Result<r::Shown> {
    let (mut shown, c) = show_stored(o, &params)?;
    if params.max_entries == Some(0) {
        return Ok(shown);
    }
    let now = match c.kind {
        Kind::Message => Some(o.current_tree(p)?),
        _ => None,
    };
    let limit = params.max_entries.unwrap_or(SHOW_ENTRIES);
    (shown.turn_changes, shown.changed_by) = super::attribution::of_checkpoint(o, &c, now, limit)?;
    Ok(shown)
}

/// What the store holds of one checkpoint, for `show`.
fn show_stored(
    o: &mut Opened,
    params: &ShowParams,
) -> Result<(r::Shown, crate::store::Checkpoint)> {
    let store = &o.store;
    let repo = store.repo();
    let mut c = store.resolve_in(&repo, &params.id, params.dialog.as_deref())?;
    store.load_meta(&repo, &mut c)?;
    store.annotate(&repo, std::slice::from_mut(&mut c))?;
    let tree = parse_id(&c.tree)?;
    let limit = params.max_entries.unwrap_or(SHOW_ENTRIES);
    let page = Page {
        max_files: Some(limit),
        ..Page::default()
    };
    let pruned = parent_tree(store, &repo, &c)?;
    // Its counts against its parent are how many changes there are (the same walk made them).
    let changes_total = c.added + c.modified + c.deleted;
    let (changes, mut truncated) = match pruned {
        Some(parent) => {
            let trees = (parent, Some(tree));
            let changed = diff_page(&repo, trees, &[], (false, params.counts), page)?;
            (changed.files, changed.files_cut)
        }
        // Retention pruned its parent: its changes are known by their counts only.
        None => (Vec::new(), false),
    };
    let parent_pruned = pruned.is_none();
    let (file_list, file_list_total) = match params.files {
        true => {
            let files = store.files_of(&repo, &c)?;
            truncated |= files.len() > limit;
            let listed = files.iter().take(limit).map(|(path, s)| r::TreeFile {
                path: path.to_string(),
                path_bytes: path_bytes(path),
                mode: format!("{:06o}", s.kind as u16),
                blob: s.id.to_string(),
            });
            (Some(listed.collect()), Some(files.len() as u64))
        }
        false => (None, None),
    };
    let shown = r::Shown {
        checkpoint: c.clone().into(),
        changes: changes.into_iter().map(Into::into).collect(),
        changes_total,
        parent_pruned,
        file_list,
        file_list_total,
        truncated,
        turn_changes: None,
        changed_by: Vec::new(),
    };
    Ok((shown, c))
}

/// The tree of `c`'s parent (`Some(None)`: it has none), or None when retention pruned it.
pub(super) fn parent_tree(
    store: &crate::store::Store,
    repo: &gix::Repository,
    c: &crate::store::Checkpoint,
) -> Result<Option<Option<gix::ObjectId>>> {
    let Some(parent) = &c.parent else {
        return Ok(Some(None));
    };
    match store.checkpoint(repo, parent.object_id()) {
        Ok(p) => Ok(Some(Some(parse_id(&p.tree)?))),
        Err(_) if store.shallow()?.contains(&c.id.object_id()) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub fn diff_checkpoints(p: &Project, o: &mut Opened, params: DiffParams) -> Result<r::Diffed> {
    let paths = p.tree_paths(&params.paths)?;
    let dialog = params.dialog.as_deref();
    let from = {
        let repo = o.store.repo();
        o.store.resolve_in(&repo, &params.from, dialog)?
    };
    let (to, new_tree) = match &params.to {
        Some(to) => {
            let repo = o.store.repo();
            let to = o.store.resolve_in(&repo, to, dialog)?;
            (Some(to.id), parse_id(&to.tree)?)
        }
        None => (None, o.current_tree(p)?),
    };
    let repo = o.store.repo();
    let old_tree = parse_id(&from.tree)?;
    let page = Page {
        max_files: params.max_files,
        offset: params.offset,
        max_bytes: params.max_bytes,
    };
    let trees = (Some(old_tree), Some(new_tree));
    let (diff, files_total) = match page.is_whole() {
        true => {
            let changed = diff_trees(&repo, trees.0, trees.1, &paths)?;
            (diff(&repo, &changed, params.patch, params.counts)?, None)
        }
        false => {
            let d = diff_page(&repo, trees, &paths, (params.patch, params.counts), page)?;
            let total = match d.files_cut {
                true => Some(count_changes_within(&repo, trees.0, trees.1, &paths)?),
                false => None,
            };
            (d, total)
        }
    };
    let mut diff: r::DiffResult = diff.into();
    diff.files_total = files_total;
    Ok(r::Diffed {
        diff,
        from: from.id,
        to,
    })
}

/// The largest part of a file `file_at` returns.
const MAX_FILE_AT: u64 = 1 << 20;

/// A part of a file as checkpoint `id` holds it.
pub fn file_at(p: &Project, o: &mut Opened, params: FileAtParams) -> Result<r::FileContent> {
    let [path] = <[_; 1]>::try_from(p.tree_paths(std::slice::from_ref(&params.path))?)
        .expect("one path in, one out");
    let repo = o.store.repo();
    let c = o
        .store
        .resolve_in(&repo, &params.id, params.dialog.as_deref())?;
    let file = crate::store::tree::file_at(&repo, parse_id(&c.tree)?, path.as_ref())?.ok_or_else(
        || {
            Error::invalid(format!(
                "checkpoint {} holds no file {}",
                c.id.short(),
                params.path.display()
            ))
        },
    )?;
    let data = repo
        .find_object(file.id)
        .map_err(|e| crate::store::StoreError::git("reading a file", e))?
        .detach()
        .data;
    let size = data.len() as u64;
    let max = params.max_bytes.unwrap_or(MAX_FILE_AT).min(MAX_FILE_AT);
    let start = params.offset.min(size) as usize;
    let end = (params.offset.saturating_add(max)).min(size) as usize;
    Ok(r::FileContent {
        path: String::from_utf8_lossy(&path).into_owned(),
        checkpoint: c.id,
        size,
        binary: crate::store::diff::is_binary(&data),
        offset: start as u64,
        content: String::from_utf8_lossy(&data[start..end]).into_owned(),
        truncated: (end as u64) < size,
    })
}

pub fn tag(_: &Project, o: &mut Opened, params: TagParams) -> Result<r::Tagged> {
    let repo = o.store.repo();
    let c = o.store.resolve(&repo, &params.id)?;
    o.store.add_tag(&repo, &c, &params.name)?;
    Ok(r::Tagged {
        id: c.id,
        tag: params.name,
    })
}

pub fn note(_: &Project, o: &mut Opened, params: NoteParams) -> Result<r::Noted> {
    if params.text.trim().is_empty() || params.text.len() > 64 * 1024 {
        return Err(Error::invalid("a note is 1 to 65536 bytes of text"));
    }
    let repo = o.store.repo();
    let mut c = o.store.resolve(&repo, &params.id)?;
    o.store.add_note(&repo, &c, &params.text)?;
    o.store.annotate(&repo, std::slice::from_mut(&mut c))?;
    Ok(r::Noted {
        id: c.id,
        notes: c.notes,
    })
}

/// Compares the index (after syncing with the watcher) with a fresh full scan, a separate
/// code path that uses no cache: they must always agree.
pub fn verify(p: &Project, o: &mut Opened, _: ProjectParams) -> Result<r::Verified> {
    let index_tree = o.current_tree(p)?;
    let options = SnapshotOptions {
        write: false,
        max_file_size: p.max_file_size(),
    };
    let scan = Snapshot::take(&o.store, &o.filter, options)?;
    let scan_tree = Snapshot::tree_id(&scan.files)?;
    if index_tree != scan_tree {
        tracing::error!(root = %p.root.display(), %index_tree, %scan_tree, "index and full scan disagree");
        o.force_rescan("verify found a difference");
    }
    Ok(r::Verified {
        index_tree: index_tree.to_string(),
        scan_tree: scan_tree.to_string(),
        equal: index_tree == scan_tree,
        mode: p.mode(),
    })
}

/// Makes the next checkpoint verify everything by stat, as a watcher overflow does.
pub fn rescan(_: &Project, o: &mut Opened, _: ProjectParams) -> Result<r::Rescan> {
    o.force_rescan("requested by a client");
    Ok(r::Rescan { rescan: true })
}

/// Reads every object the store's refs reach and reports what is unreadable and which
/// checkpoints it affects; with `repair`, salvages damaged packs and sets the damage aside.
/// Files whose content the store lost are read again at the next checkpoint. Runs on a
/// damaged store ([`Project::run_on_damaged`]).
pub fn fsck(_: &Project, o: &mut Opened, params: FsckParams) -> Result<r::FsckReport> {
    let report = o.store.fsck(params.repair)?;
    if params.repair || report.unreadable_count > 0 {
        let repo = o.store.repo();
        o.index.forget_objects(&report.unreadable_ids, &repo);
    }
    Ok(report.into())
}
