//! What the prompts did: the log of prompts with what each turn changed (of the whole project or
//! of some paths), and blame, the prompt whose turn wrote each line of a file.
//!
//! Checkpoints are taken as prompts arrive, before the agent acts, so what changed between a
//! prompt's checkpoint and the next one was written during that prompt's turn, and what the
//! working tree holds beyond a dialog's newest checkpoint belongs to its newest prompt's turn.

use std::collections::HashMap;

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;

use super::attribution::{Owner, Spans};
use super::{Error, Opened, Project, Result};
use crate::model::{CheckpointId, Kind};
use crate::protocol::methods::{BlameParams, LogParams};
use crate::protocol::results as r;
use crate::store::checkpoint::parse_id;
use crate::store::diff::is_binary;
use crate::store::treediff::{count_changes, count_tree_changes, diff_trees};
use crate::store::Checkpoint;

/// The prompts (`message` checkpoints), newest first, each with what its turn changed: the
/// difference from it to the next prompt of its dialog, or, for a dialog's newest, to the
/// files now. With paths, only the prompts whose turns changed them, counted on them alone.
pub fn log(p: &Project, o: &mut Opened, params: LogParams) -> Result<Vec<r::Turn>> {
    let paths = p.tree_paths(&params.paths)?;
    let repo = o.store.repo();
    let listed = o.store.list(&repo, params.dialog.as_deref())?;
    // Each turn's steps and end, oldest first, when asked for.
    let mut steps: HashMap<CheckpointId, Vec<Checkpoint>> = HashMap::new();
    if params.steps {
        for c in listed.iter().rev() {
            if let Some(point) = &c.point {
                steps.entry(point.turn).or_default().push(c.clone());
            }
        }
    }
    let mut prompts: Vec<Checkpoint> = listed
        .into_iter()
        .filter(|c| c.kind == Kind::Message)
        .collect();
    if let (Some(limit), true) = (params.limit, paths.is_empty()) {
        prompts.truncate(limit);
    }
    drop(repo);
    let now = match prompts.is_empty() {
        true => None,
        false => Some(o.current_tree(p)?),
    };
    let exact = exact_turns(o, &prompts.iter().collect::<Vec<_>>(), now, &paths)?;
    let repo = o.store.repo();
    // The tree and id of the prompt after each dialog's (newer ones come first).
    let mut next: HashMap<String, (gix::ObjectId, CheckpointId)> = HashMap::new();
    let mut turns = Vec::with_capacity(prompts.len());
    for mut prompt in prompts {
        let tree = parse_id(&prompt.tree)?;
        let (until_tree, until) = match next.get(&prompt.dialog) {
            Some((tree, id)) => (*tree, Some(*id)),
            None => (now.expect("there are prompts"), None),
        };
        next.insert(prompt.dialog.clone(), (tree, prompt.id));
        let (added, modified, deleted, until) = match exact.get(&prompt.id) {
            Some(t) => (t.added, t.modified, t.deleted, t.until),
            None => {
                let changes = diff_trees(&repo, Some(tree), Some(until_tree), &paths)?;
                let (added, modified, deleted) = count_changes(&changes);
                (added, modified, deleted, until)
            }
        };
        if !paths.is_empty() && added + modified + deleted == 0 {
            continue;
        }
        if params.limit.is_some_and(|limit| turns.len() >= limit) {
            break;
        }
        o.store.annotate(&repo, std::slice::from_mut(&mut prompt))?;
        if params.meta {
            o.store.load_meta(&repo, &mut prompt)?;
        }
        let steps = steps.remove(&prompt.id).unwrap_or_default();
        turns.push(r::Turn {
            steps: super::wire::checkpoints(steps),
            prompt: prompt.into(),
            turn: r::TurnChanges {
                added,
                modified,
                deleted,
                until,
            },
        });
    }
    Ok(turns)
}

/// What each prompt of `list` (this store's own, newest first) changed in its turn, as [`log`]
/// counts it: from it to the next prompt of its dialog, or to the files now for a dialog's
/// newest. A turn whose next prompt was recorded right on it (nearly all) is that prompt's own
/// counts; others are counted from the two trees.
pub fn turns(
    p: &Project,
    o: &mut Opened,
    list: &[Checkpoint],
) -> Result<HashMap<CheckpointId, r::TurnChanges>> {
    let prompts: Vec<&Checkpoint> = list
        .iter()
        .filter(|c| c.kind == Kind::Message && c.origin.is_none())
        .collect();
    let mut out = HashMap::with_capacity(prompts.len());
    if prompts.is_empty() {
        return Ok(out);
    }
    let now = o.current_tree(p)?;
    let exact = exact_turns(o, &prompts, Some(now), &[])?;
    let repo = o.store.repo();
    let mut next: HashMap<&str, &Checkpoint> = HashMap::new();
    for prompt in prompts {
        if let Some(t) = exact.get(&prompt.id) {
            next.insert(&prompt.dialog, prompt);
            out.insert(prompt.id, t.clone());
            continue;
        }
        let tree = parse_id(&prompt.tree)?;
        let after = next.insert(&prompt.dialog, prompt);
        let ((added, modified, deleted), until) = match after {
            Some(n) if n.parent == Some(prompt.id) => {
                ((n.added, n.modified, n.deleted), Some(n.id))
            }
            Some(n) => (
                count_tree_changes(&repo, Some(tree), Some(parse_id(&n.tree)?))?,
                Some(n.id),
            ),
            None => (count_tree_changes(&repo, Some(tree), Some(now))?, None),
        };
        out.insert(
            prompt.id,
            r::TurnChanges {
                added,
                modified,
                deleted,
                until,
            },
        );
    }
    Ok(out)
}

/// What each of `prompts` changed in its turn, exactly (see [`super::attribution`]), for
/// those the spans reach; the changes not checkpointed yet (to `now`) belong to the turn
/// running alone, if one is. A turn runs until its end (`until`), or the next prompt of its
/// dialog; none while it runs.
fn exact_turns(
    o: &mut Opened,
    prompts: &[&Checkpoint],
    now: Option<gix::ObjectId>,
    paths: &[gix::bstr::BString],
) -> Result<HashMap<CheckpointId, r::TurnChanges>> {
    let mut out = HashMap::new();
    let Some(oldest) = prompts.iter().map(|c| c.created_at.clone()).min() else {
        return Ok(out);
    };
    let spans = Spans::since(o, &oldest)?;
    let mut work = spans.by_turn(o, 0)?;
    if let Some(now) = now {
        let (running, pending) = o.pending(now)?;
        if let [only] = running.as_slice() {
            for (how, path) in pending {
                work.entry(*only).or_default().add(how, path, None);
            }
        }
    }
    let mut until: HashMap<CheckpointId, CheckpointId> = HashMap::new();
    let mut open: HashMap<&str, CheckpointId> = HashMap::new();
    for c in &spans.cps {
        match (c.kind, &c.point) {
            (Kind::TurnEnd, Some(p)) => {
                until.entry(p.turn).or_insert(c.id);
            }
            (Kind::Message, _) => {
                if let Some(before) = open.insert(&c.dialog, c.id) {
                    until.entry(before).or_insert(c.id);
                }
            }
            _ => {}
        }
    }
    for prompt in prompts {
        if spans.place(prompt.id).is_none() {
            continue;
        }
        let (added, modified, deleted) =
            work.get(&prompt.id).map_or((0, 0, 0), |w| w.counts(paths));
        let turn = r::TurnChanges {
            added,
            modified,
            deleted,
            until: until.get(&prompt.id).copied(),
        };
        out.insert(prompt.id, turn);
    }
    Ok(out)
}

/// For each line of a file as it is now, the prompt whose turn wrote it (see the module's doc),
/// over the checkpoints before the dialog's newest.
pub fn blame(p: &Project, o: &mut Opened, params: BlameParams) -> Result<r::Blamed> {
    let [path] = <[_; 1]>::try_from(p.tree_paths(std::slice::from_ref(&params.path))?)
        .expect("one path in, one out");
    o.read_widely();
    let now = o.current_tree(p)?;
    let repo = o.store.repo();
    let not_captured = || {
        Error::invalid(format!(
            "{} is not a file ckpt captures now (missing, a folder, ignored, excluded or larger \
             than max_file_size)",
            params.path.display()
        ))
    };
    let current = diff_trees(&repo, None, Some(now), std::slice::from_ref(&path))?
        .into_iter()
        .find(|c| c.path == path)
        .and_then(|c| c.new)
        .filter(|f| matches!(f.kind, EntryKind::Blob | EntryKind::BlobExecutable))
        .ok_or_else(not_captured)?;
    let data = repo
        .find_object(current.id)
        .map_err(|e| crate::store::StoreError::git("reading a file", e))?
        .detach()
        .data;
    if is_binary(&data) {
        return Err(Error::invalid(format!(
            "{} is a binary file: blame reads text files",
            params.path.display()
        )));
    }
    let from = params.at.as_deref().unwrap_or("@");
    let head = o.store.resolve_in(&repo, from, params.dialog.as_deref())?;
    drop(repo);
    // What finding the checkpoints mapped (every commit of the timeline) goes before the walk.
    o.read_widely();
    let blamed = o.store.blame(head, path.as_bstr(), &data)?;
    let walk = &blamed.walk;
    // For each checkpoint of the walk, the prompt whose turn was under way when it was taken:
    // the newest prompt at or before it.
    let mut turn_at: Vec<Option<usize>> = vec![None; walk.len() + 1];
    for j in (0..walk.len()).rev() {
        turn_at[j] = match walk[j].kind {
            Kind::Message => Some(j),
            _ => turn_at[j + 1],
        };
    }
    let text = String::from_utf8_lossy(&data);
    let mut lines = Vec::with_capacity(blamed.lines.len());
    let said = spans_say(o, now, walk, &blamed.lines, &path)?;
    // Each prompt once.
    let mut prompts: Vec<r::BlamePrompt> = Vec::new();
    let mut listed: HashMap<CheckpointId, usize> = HashMap::new();
    for (n, (line, first)) in text.lines().zip(&blamed.lines).enumerate() {
        // Seen first in walk[i]: written after walk[i + 1] was taken; never checkpointed:
        // written after walk[0].
        let by_walk = match first {
            None => (r::LineOrigin::Prompt, turn_at[0].map(|t| walk[t].clone())),
            Some(i) if i + 1 >= walk.len() => (r::LineOrigin::BeforeFirstCheckpoint, None),
            Some(i) => (
                r::LineOrigin::Prompt,
                turn_at[i + 1].map(|t| walk[t].clone()),
            ),
        };
        let (origin, turn) = match said.get(first) {
            Some(Said::User) => (r::LineOrigin::User, None),
            Some(Said::Turn(c)) => (r::LineOrigin::Prompt, Some((**c).clone())),
            None => by_walk,
        };
        let prompt = turn.map(|c| {
            *listed.entry(c.id).or_insert_with(|| {
                prompts.push(r::BlamePrompt {
                    checkpoint: c.id,
                    label: c.label.clone(),
                    dialog: c.dialog.clone(),
                    created_at: c.created_at.clone(),
                });
                prompts.len() - 1
            })
        });
        lines.push(r::BlameLine {
            line: n as u64 + 1,
            text: line.to_string(),
            origin: match (origin, prompt) {
                (r::LineOrigin::Prompt, None) => r::LineOrigin::BeforeFirstPrompt,
                (origin, _) => origin,
            },
            prompt,
            first_seen: first.map(|i| walk[i].id),
        });
    }
    Ok(r::Blamed {
        path: path.to_str_lossy().into_owned(),
        head: walk[0].id,
        dialog: walk[0].dialog.clone(),
        prompts,
        lines,
    })
}

/// What the spans say of who wrote the lines first seen in a checkpoint of a blame's walk.
enum Said {
    /// Nobody's turn ran while the file changed there.
    User,
    /// One turn alone changed the file there (its prompt's checkpoint, of any dialog).
    Turn(Box<Checkpoint>),
}

/// For each place a line was first seen (`Some(i)`: in `walk[i]`, so written after
/// `walk[i + 1]`; None: after `walk[0]`, to the files now), who changed `path` there, where
/// the spans tell it without doubt: every change of the path between the two checkpoints made
/// by nobody's turn, or by one turn. Elsewhere the walk's rule stands (the prompt before).
fn spans_say(
    o: &mut Opened,
    now: gix::ObjectId,
    walk: &[Checkpoint],
    firsts: &[Option<usize>],
    path: &gix::bstr::BString,
) -> Result<HashMap<Option<usize>, Said>> {
    let mut out = HashMap::new();
    let mut places: Vec<Option<usize>> = firsts
        .iter()
        .copied()
        .filter(|f| f.is_none_or(|i| i + 1 < walk.len()))
        .collect();
    places.sort_unstable();
    places.dedup();
    let Some(oldest) = places.iter().map(|f| f.map_or(0, |i| i + 1)).max() else {
        return Ok(out);
    };
    let spans = Spans::since(o, &walk[oldest].created_at)?;
    let wanted = path.to_str_lossy();
    let mut pending_owner = None;
    if places.contains(&None) {
        let (running, pending) = o.pending(now)?;
        if pending.iter().any(|(_, p)| *p == wanted) {
            pending_owner = Some(match running.as_slice() {
                [] => Owner::User,
                [one] => Owner::Turn(*one),
                _ => Owner::Ambiguous(running.clone()),
            });
        }
    }
    // The spans that changed the path (one look at each).
    let mut touched = Vec::new();
    for at in 0..spans.cps.len() {
        if spans.changes(o, at)?.iter().any(|(_, p)| *p == wanted) {
            touched.push(at);
        }
    }
    for place in places {
        // The spans after the checkpoint the line was not in, up to the one it was in.
        let (after, until) = match place {
            Some(i) => (spans.place(walk[i + 1].id), spans.place(walk[i].id)),
            None => (spans.place(walk[0].id), Some(spans.cps.len())),
        };
        let (Some(after), Some(until)) = (after, until) else {
            continue;
        };
        let mut owners: Vec<Owner> = touched
            .iter()
            .filter(|&&at| at > after && at <= until)
            .map(|&at| spans.owner(at, &wanted))
            .collect();
        if place.is_none() {
            owners.extend(pending_owner.clone());
        }
        let said = match owners.split_first() {
            Some((first, rest)) if rest.iter().all(|o| o == first) => match first {
                Owner::User => Some(Said::User),
                Owner::Turn(t) => {
                    let repo = o.store.repo();
                    o.store
                        .checkpoint(&repo, t.object_id())
                        .ok()
                        .map(|c| Said::Turn(Box::new(c)))
                }
                Owner::Ambiguous(_) => None,
            },
            _ => None,
        };
        if let Some(said) = said {
            out.insert(place, said);
        }
    }
    Ok(out)
}
