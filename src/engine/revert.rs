//! `revert`: takes back exactly what one turn changed (or what it changed after one of its
//! steps), on top of the files as they are now, and nothing else.
//!
//! Top-down: find the turn's changes in the spans ([`Spans::by_turn`]'s rule, per path: the
//! spans it changed the path in); undo them newest first on today's content ([`undo_one`]: a
//! file still as the turn left it goes back whole, a text file that moved on since goes back
//! hunk by hunk, [`take_back`]); write the result as a tree; and apply it as a restore limited
//! to those paths (an undo point first, atomic writes, the result recorded as a `revert`).
//! What cannot be taken back is left as it is and named with the reason.

use std::collections::BTreeMap;

use gix::bstr::{BString, ByteSlice};
use gix::objs::tree::EntryKind;

use super::attribution::{Owner, Spans};
use super::merge3::take_back;
use super::restore::restore_to;
use super::{Error, Opened, Project, Result};
use crate::index::Trees;
use crate::model::{CheckpointId, Kind};
use crate::protocol::events::EventKind;
use crate::protocol::turns::{Refused, RevertParams, Reverted};
use crate::store::checkpoint::parse_id;
use crate::store::diff::is_binary;
use crate::store::tree::{within, FileState};
use crate::store::treediff::diff_trees;
use crate::store::{Checkpoint, StoreError};

/// A path's entry in a tree: None when the tree has no file there.
fn entry_at(repo: &gix::Repository, tree: gix::ObjectId, path: &str) -> Result<Option<FileState>> {
    let tree = repo
        .find_tree(tree)
        .map_err(|e| StoreError::git("reading a tree", e))?;
    let entry = tree
        .lookup_entry_by_path(std::path::Path::new(path))
        .map_err(|e| StoreError::git("reading a tree", e))?;
    Ok(entry
        .map(|e| FileState {
            kind: e.mode().kind(),
            id: e.object_id(),
        })
        .filter(|f| f.kind != EntryKind::Tree))
}

fn blob(repo: &gix::Repository, id: gix::ObjectId) -> Result<Vec<u8>> {
    Ok(repo
        .find_object(id)
        .map_err(|e| StoreError::git("reading a file", e))?
        .detach()
        .data)
}

/// One span's change of a path (`before` → `after`) undone from `now`: the new state, or why
/// it could not be, and how many hunks were left.
fn undo_one(
    repo: &gix::Repository,
    before: Option<&FileState>,
    after: Option<&FileState>,
    now: Option<&FileState>,
) -> Result<(Option<FileState>, Option<String>)> {
    if now == after || now == before {
        return Ok((before.cloned(), None));
    }
    let text = |f: &FileState| matches!(f.kind, EntryKind::Blob | EntryKind::BlobExecutable);
    let (Some(b), Some(a), Some(n)) = (before, after, now) else {
        let why = match (after, now) {
            (None, Some(_)) => "created again since the turn deleted it",
            (Some(_), None) => "deleted since the turn changed it",
            _ if before.is_none() => "the turn created it and it was changed since",
            _ => "changed since by someone else",
        };
        return Ok((now.cloned(), Some(why.into())));
    };
    if !(text(b) && text(a) && text(n)) {
        return Ok((
            now.cloned(),
            Some(
                "changed since by someone else (not a text file: reverted whole or not at all)"
                    .into(),
            ),
        ));
    }
    let (bd, ad, nd) = (blob(repo, b.id)?, blob(repo, a.id)?, blob(repo, n.id)?);
    if is_binary(&bd) || is_binary(&ad) || is_binary(&nd) {
        return Ok((
            now.cloned(),
            Some(
                "a binary file changed since by someone else: reverted whole or not at all".into(),
            ),
        ));
    }
    let t = take_back(&bd, &ad, &nd);
    let why = (t.refused > 0).then(|| {
        format!(
            "{} of {} of the turn's changes in it were left: their lines were changed since by \
             someone else",
            t.refused,
            t.refused + t.taken
        )
    });
    if t.taken == 0 {
        return Ok((now.cloned(), why));
    }
    let id = repo
        .write_blob(&t.data)
        .map_err(|e| StoreError::git("writing a file", e))?
        .detach();
    // The mode the turn set goes back only where nobody changed it since.
    let kind = if n.kind == a.kind { b.kind } else { n.kind };
    Ok((Some(FileState { kind, id }), why))
}

/// The turn `revert` takes back, and the step after which it does (none: the whole turn).
fn turn_of(target: &Checkpoint) -> Result<(CheckpointId, Option<CheckpointId>)> {
    if target.origin.is_some() || target.imported.is_some() {
        return Err(Error::invalid(format!(
            "checkpoint {} was brought in (from a bundle or a remote): this store does not know \
             the turn that made it; `ckpt restore` it instead; nothing was changed",
            target.id.short()
        )));
    }
    match (target.kind, &target.point) {
        (Kind::Message, _) => Ok((target.id, None)),
        (Kind::Step, Some(p)) => Ok((p.turn, Some(target.id))),
        (kind, _) => Err(Error::invalid(format!(
            "checkpoint {} is a `{kind}` checkpoint: revert takes a prompt's checkpoint (its \
             turn) or a step (what its turn did after it); nothing was changed",
            target.id.short()
        ))),
    }
}

pub fn revert(p: &Project, o: &mut Opened, params: RevertParams) -> Result<Reverted> {
    let only = p.tree_paths(&params.paths)?;
    let target = {
        let repo = o.store.repo();
        o.store
            .resolve_in(&repo, &params.id, params.dialog.as_deref())?
    };
    let (turn, from_step) = turn_of(&target)?;
    let prompt = match from_step {
        None => target.clone(),
        Some(_) => {
            let repo = o.store.repo();
            o.store.checkpoint(&repo, turn.object_id()).map_err(|_| {
                Error::invalid(format!(
                    "the turn of step {} ({}) is no longer in the store (pruned); nothing was \
                     changed",
                    target.id.short(),
                    turn.short()
                ))
            })?
        }
    };
    o.prepare(p)?;
    let current = o.write_tree(Trees::New)?;
    // Today's files are read below: what the index just wrote becomes readable.
    o.store.flush_objects()?;
    let spans = Spans::since(o, &prompt.created_at)?.with_pending(o, current)?;
    let start = spans.place(from_step.unwrap_or(turn)).ok_or_else(|| {
        Error::invalid(format!(
            "checkpoint {} is not among the turns this store kept exactly (recorded before \
                 ckpt kept turns, or its history was pruned): `ckpt diff` and `ckpt restore` \
                 work on it; nothing was changed",
            target.id.short()
        ))
    })?;
    // The turns taken back: this one, and with `later` every later one of its dialog.
    let mut ours: Vec<CheckpointId> = vec![turn];
    if params.later {
        ours.extend(
            spans.cps[start + 1..]
                .iter()
                .filter(|c| c.kind == Kind::Message && c.dialog == prompt.dialog)
                .map(|c| c.id),
        );
    }
    let (todo, mut refused, others) = plan(o, &spans, start, &ours, &only, params.force)?;
    // Undo each path's changes newest first, on the file as it is now.
    let mut result: Vec<(String, Option<FileState>)> = Vec::new();
    {
        let txn = o.store.begin();
        txn.objects(|repo| -> Result<()> {
            for (path, places) in &todo {
                let mut state = entry_at(repo, current, path)?;
                let start = state;
                let mut why = None;
                for &at in places.iter().rev() {
                    let (before, after) = spans.trees(at)?;
                    let before = entry_at(repo, before, path)?;
                    let after = entry_at(repo, after, path)?;
                    let (next, w) =
                        undo_one(repo, before.as_ref(), after.as_ref(), state.as_ref())?;
                    state = next;
                    why = why.or(w);
                }
                if let Some(why) = why {
                    refused.entry(path.clone()).or_insert(why);
                }
                if state != start {
                    result.push((path.clone(), state));
                }
            }
            Ok(())
        })?;
        drop(txn);
    }
    let reverted: Vec<String> = result.iter().map(|(p, _)| p.clone()).collect();
    // The files now with the turn's changes taken back: the restore's target.
    let merged = match result.is_empty() {
        true => current,
        false => edited(o, current, &result)?,
    };
    let left_alone = match params.later {
        true => left_alone(
            o,
            &spans,
            parse_id(&target.tree)?,
            merged,
            &only,
            &refused,
            &others,
        )?,
        false => Vec::new(),
    };
    let refused: Vec<Refused> = refused
        .into_iter()
        .map(|(path, reason)| Refused { path, reason })
        .collect();
    let turns = match params.later {
        true => ours,
        false => Vec::new(),
    };
    let mut answer = Reverted {
        turn,
        from_step,
        turns,
        dry_run: params.dry_run,
        reverted,
        refused,
        left_alone,
        skipped: Vec::new(),
        undo_checkpoint: None,
        revert_checkpoint: None,
    };
    if result.is_empty() {
        return Ok(answer);
    }
    let mut goal = prompt.clone();
    goal.tree = merged.to_string();
    let paths: Vec<BString> = answer
        .reverted
        .iter()
        .map(|p| BString::from(p.as_str()))
        .collect();
    let restored = restore_to(p, o, &goal, paths, params.dry_run, Kind::Revert, None)?;
    if let Some(undo) = restored.undo_checkpoint {
        p.events.emit(EventKind::Reverted {
            turn,
            undo_checkpoint: undo,
            revert_checkpoint: restored.restore_checkpoint,
            reverted: answer.reverted.len(),
            refused: answer.refused.len(),
        });
    }
    answer.skipped = restored.skipped;
    answer.undo_checkpoint = restored.undo_checkpoint;
    answer.revert_checkpoint = restored.restore_checkpoint;
    Ok(answer)
}

/// What the turns `ours` changed from the span after `start` on, per path (the places of the
/// spans they changed it in); the paths refused (ambiguous); and who else changed a path last
/// (with the kind of checkpoint whose span holds it).
#[allow(clippy::type_complexity)]
fn plan(
    o: &Opened,
    spans: &Spans,
    start: usize,
    ours: &[CheckpointId],
    only: &[BString],
    force: bool,
) -> Result<(
    BTreeMap<String, Vec<usize>>,
    BTreeMap<String, String>,
    BTreeMap<String, (Owner, Option<Kind>)>,
)> {
    let mut todo: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut refused: BTreeMap<String, String> = BTreeMap::new();
    let mut others: BTreeMap<String, (Owner, Option<Kind>)> = BTreeMap::new();
    for at in start + 1..spans.count() {
        for (_, path) in spans.changes(o, at)? {
            if !only.is_empty() && !within(path.as_bytes(), only) {
                continue;
            }
            match spans.owner(at, &path) {
                Owner::Turn(t) if ours.contains(&t) => todo.entry(path).or_default().push(at),
                Owner::Ambiguous(ts) if ts.iter().all(|t| ours.contains(t)) => {
                    todo.entry(path).or_default().push(at)
                }
                Owner::Ambiguous(ts) if force && ts.iter().any(|t| ours.contains(t)) => {
                    todo.entry(path).or_default().push(at)
                }
                Owner::Ambiguous(ts) if ts.iter().any(|t| ours.contains(t)) => {
                    let others: Vec<String> = ts
                        .iter()
                        .filter(|t| !ours.contains(t))
                        .map(|t| t.short().to_string())
                        .collect();
                    let silent = ts.iter().any(|t| !ours.contains(t) && !spans.reports(*t));
                    let hint = match silent {
                        true => {
                            " (a session that reported no step or turn end counts as \
                                 running until its next prompt, at most an hour: `ckpt hook \
                                 status` tells whether its agent's hooks record turn ends)"
                        }
                        false => "",
                    };
                    refused.entry(path).or_insert_with(|| {
                        format!(
                            "ambiguous: changed while the turn of {} was running too, and \
                             nothing tells which turn did it; left as it is (`--force` takes \
                             it back){hint}",
                            others.join(", ")
                        )
                    });
                }
                owner => {
                    let kind = spans.cps.get(at).map(|c| c.kind);
                    others.insert(path, (owner, kind));
                }
            }
        }
    }
    // A path with an ambiguous change keeps that change (it is in no `todo` place); the turns'
    // own changes of it still go back, hunk by hunk.
    Ok((todo, refused, others))
}

/// `tree` with `edits` made (None: the path removed).
fn edited(
    o: &Opened,
    tree: gix::ObjectId,
    edits: &[(String, Option<FileState>)],
) -> Result<gix::ObjectId> {
    let merged = o.store.begin().objects(|repo| -> Result<gix::ObjectId> {
        let mut editor = repo
            .edit_tree(tree)
            .map_err(|e| StoreError::git("editing a tree", e))?;
        for (path, state) in edits {
            let edited = match state {
                Some(f) => editor.upsert(path.as_str(), f.kind, f.id).map(drop),
                None => editor.remove(path.as_str()).map(drop),
            };
            edited.map_err(|e| StoreError::git("editing a tree", e))?;
        }
        Ok(editor
            .write()
            .map_err(|e| StoreError::git("writing a tree", e))?
            .detach())
    })?;
    o.store.flush_objects()?;
    Ok(merged)
}

/// What a whole-tree rewind to `target` would change beyond the revert's result `merged`:
/// each path with who changed it since (another session, the user, a restore), or why the
/// revert left it. A rewind that finds none resets the whole tree, as it always did.
fn left_alone(
    o: &Opened,
    spans: &Spans,
    target: gix::ObjectId,
    merged: gix::ObjectId,
    only: &[BString],
    refused: &BTreeMap<String, String>,
    others: &BTreeMap<String, (Owner, Option<Kind>)>,
) -> Result<Vec<Refused>> {
    let repo = o.store.repo();
    let mut out = Vec::new();
    for ch in diff_trees(&repo, Some(target), Some(merged), only)? {
        let path = ch.path.to_str_lossy().into_owned();
        if refused.contains_key(&path) {
            continue;
        }
        let reason = match others.get(&path) {
            Some((_, Some(kind @ (Kind::Restore | Kind::Revert | Kind::Reset)))) => {
                format!("put back by a {kind} since")
            }
            Some((Owner::Turn(t), _)) => match spans.dialog_of(*t) {
                Some(d) => format!("changed by the turn of {} (dialog {d})", t.short()),
                None => format!("changed by the turn of {}", t.short()),
            },
            Some((Owner::Ambiguous(ts), _)) => {
                let ts: Vec<String> = ts.iter().map(|t| t.short().to_string()).collect();
                format!("changed while the turns of {} were running", ts.join(", "))
            }
            Some((Owner::User, _)) => "changed outside any agent's turn (by you)".to_string(),
            None => "changed since, by someone this store cannot name".to_string(),
        };
        out.push(Refused { path, reason });
    }
    Ok(out)
}
