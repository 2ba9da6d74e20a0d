//! Who changed what: each change of a span (see [`super::turns`]) belongs to a turn, to the
//! user, or, when only the clock could tell, to several turns at once (ambiguous).
//!
//! A change in a span belongs to the turns running during it, less those whose next step says
//! its tool changed other paths only (an edit or a read tool names every path it can change):
//! a turn whose next step names the path wrote it; with no turn left, the user did. Restores
//! and reverts are the user's (asked for by them). Read from the checkpoints' headers, this
//! survives restarts, gc and bundles, and a later step can still settle an earlier change.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gix::bstr::ByteSlice;

use super::{Opened, Result};
use crate::model::{CheckpointId, Kind};
use crate::protocol::turns::{By, ChangedBy, TurnPath, TurnPaths};
use crate::store::checkpoint::parse_id;
use crate::store::span::Change;
use crate::store::treediff::diff_trees;
use crate::store::Checkpoint;

/// Who changed a path in a span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The turn of this prompt's checkpoint.
    Turn(CheckpointId),
    /// Nobody's turn was running: the user (or a restore they asked for).
    User,
    /// Several turns were running and nothing tells which one.
    Ambiguous(Vec<CheckpointId>),
}

impl Owner {
    /// Whether `turn` may have made the change.
    pub fn involves(&self, turn: CheckpointId) -> bool {
        match self {
            Owner::Turn(t) => *t == turn,
            Owner::User => false,
            Owner::Ambiguous(ts) => ts.contains(&turn),
        }
    }
}

/// The project's checkpoints since a moment, oldest first, as their spans chain them; and,
/// after the newest, what changed since it (not checkpointed yet).
pub struct Spans {
    pub cps: Vec<Checkpoint>,
    /// Each turn's steps and end: places in `cps`.
    events: HashMap<CheckpointId, Vec<usize>>,
    /// What changed since the newest checkpoint: a last span at place `cps.len()`.
    pending: Option<Pending>,
}

/// The changes no checkpoint holds yet: from the newest checkpoint's tree to the files now,
/// while `running` ran.
struct Pending {
    before: gix::ObjectId,
    now: gix::ObjectId,
    running: Vec<CheckpointId>,
    changes: Vec<(Change, String)>,
}

/// How a change appears in a tree diff.
fn how(ch: &crate::store::treediff::TreeChange) -> Change {
    match (&ch.old, &ch.new) {
        (None, _) => Change::Added,
        (_, None) => Change::Deleted,
        _ => Change::Modified,
    }
}

/// What one turn changed: each path with how (composed over its spans), the ambiguous ones,
/// and the places of the spans it changed something in.
#[derive(Debug, Default, Clone)]
pub struct TurnWork {
    pub paths: BTreeMap<String, Option<Change>>,
    pub ambiguous: BTreeSet<String>,
    pub spans: Vec<usize>,
}

impl TurnWork {
    /// Adds a change of `path` (in the span at `at`, or not checkpointed yet: None).
    pub fn add(&mut self, how: Change, path: String, at: Option<usize>) {
        if let Some(at) = at.filter(|at| self.spans.last() != Some(at)) {
            self.spans.push(at);
        }
        let composed = match self.paths.get(&path) {
            None => Some(how),
            Some(None) => Some(match how {
                Change::Deleted => Change::Deleted,
                _ => Change::Added,
            }),
            Some(Some(first)) => first.then(how),
        };
        self.paths.insert(path, composed);
    }

    /// Added, modified and deleted, as the turn left them, of the paths within `only` (all
    /// when empty).
    pub fn counts(&self, only: &[gix::bstr::BString]) -> (u64, u64, u64) {
        let mut n = (0, 0, 0);
        let within = |p: &str| only.is_empty() || crate::store::tree::within(p.as_bytes(), only);
        for how in self
            .paths
            .iter()
            .filter(|(p, _)| within(p))
            .filter_map(|(_, how)| *how)
        {
            match how {
                Change::Added => n.0 += 1,
                Change::Modified => n.1 += 1,
                Change::Deleted => n.2 += 1,
            }
        }
        n
    }
}

impl Spans {
    /// The checkpoints recorded since `from` (RFC 3339, as `created_at`), walking back from the
    /// newest along the spans: one commit read each. The walk ends at a checkpoint without a
    /// span (the project's first, or recorded by a ckpt without spans) or one gone (pruned).
    pub fn since(o: &mut Opened, from: &str) -> Result<Spans> {
        let mut next = o.newest_recorded()?;
        let repo = o.store.repo();
        let mut cps = Vec::new();
        while let Some(id) = next {
            let Ok(c) = o.store.checkpoint(&repo, id.object_id()) else {
                break;
            };
            if c.created_at.as_str() < from {
                break;
            }
            next = c.span.as_ref().map(|s| s.after);
            cps.push(c);
        }
        cps.reverse();
        let mut events: HashMap<CheckpointId, Vec<usize>> = HashMap::new();
        for (i, c) in cps.iter().enumerate() {
            if let Some(p) = &c.point {
                events.entry(p.turn).or_default().push(i);
            }
        }
        Ok(Spans {
            cps,
            events,
            pending: None,
        })
    }

    /// Adds what changed from the newest checkpoint to the files now (the tree `now`), as one
    /// more span, at place `self.cps.len()`: the turns running now made it.
    pub fn with_pending(mut self, o: &mut Opened, now: gix::ObjectId) -> Result<Spans> {
        o.newest_recorded()?;
        let Some((id, before, _)) = o.turns.previous else {
            return Ok(self);
        };
        if self.cps.last().map(|c| c.id) != Some(id) || before == now {
            return Ok(self);
        }
        let repo = o.store.repo();
        let changes = diff_trees(&repo, Some(before), Some(now), &[])?
            .iter()
            .map(|ch| (how(ch), ch.path.to_str_lossy().into_owned()))
            .collect();
        self.pending = Some(Pending {
            before,
            now,
            running: o.turns.running(jiff::Timestamp::now()),
            changes,
        });
        Ok(self)
    }

    /// How many spans there are (the pending one included).
    pub fn count(&self) -> usize {
        self.cps.len() + usize::from(self.pending.is_some())
    }

    /// The trees before and after the span at `at`.
    pub fn trees(&self, at: usize) -> Result<(gix::ObjectId, gix::ObjectId)> {
        match self.cps.get(at) {
            Some(c) => {
                let span = c.span.as_ref().expect("a change comes from a span");
                Ok((parse_id(&span.before)?, parse_id(&c.tree)?))
            }
            None => {
                let p = self.pending.as_ref().expect("the pending span");
                Ok((p.before, p.now))
            }
        }
    }

    /// The dialog of the turn of `prompt`, when its checkpoint is here.
    pub fn dialog_of(&self, prompt: CheckpointId) -> Option<&str> {
        self.cps
            .iter()
            .find(|c| c.id == prompt)
            .map(|c| c.dialog.as_str())
    }

    /// Whether the turn of `prompt` reported a step or its end among these checkpoints: one that
    /// did not may come from an agent whose hooks record prompts only, and counts as running
    /// until its dialog's next prompt or [`super::running::TURN_IDLE`] without a word.
    pub fn reports(&self, prompt: CheckpointId) -> bool {
        self.events.contains_key(&prompt)
    }

    /// Who changed `path` in the span ending at `cps[at]`.
    pub fn owner(&self, at: usize, path: &str) -> Owner {
        let running = match (self.cps.get(at), &self.pending) {
            (Some(c), _) if matches!(c.kind, Kind::Restore | Kind::Revert | Kind::Reset) => {
                return Owner::User
            }
            (Some(c), _) => match &c.span {
                Some(span) => &span.running,
                None => return Owner::User,
            },
            (None, Some(p)) => &p.running,
            (None, None) => return Owner::User,
        };
        let (mut named, mut maybe) = (Vec::new(), Vec::new());
        for &turn in running {
            let next = self
                .events
                .get(&turn)
                .and_then(|places| places.iter().find(|&&j| j >= at))
                .and_then(|&j| self.cps[j].point.as_ref());
            match next {
                // A step of a tool that names what it changes.
                Some(p) if p.declared && p.seq.is_some() => {
                    if p.paths.iter().any(|p| p == path) {
                        named.push(turn);
                    }
                }
                _ => maybe.push(turn),
            }
        }
        let candidates = if named.is_empty() { maybe } else { named };
        match candidates.as_slice() {
            [] => Owner::User,
            [one] => Owner::Turn(*one),
            _ => Owner::Ambiguous(candidates),
        }
    }

    /// The changes of the span ending at `cps[at]`, as (how, path): as its header lists them,
    /// or from its two trees when there were too many to list.
    pub fn changes(&self, o: &Opened, at: usize) -> Result<Vec<(Change, String)>> {
        let Some(c) = self.cps.get(at) else {
            return Ok(self
                .pending
                .as_ref()
                .map(|p| p.changes.clone())
                .unwrap_or_default());
        };
        let Some(span) = &c.span else {
            return Ok(Vec::new());
        };
        if !span.more {
            return Ok(span
                .listed()
                .map(|(how, path)| (how, path.to_string()))
                .collect());
        }
        let repo = o.store.repo();
        let diff = diff_trees(
            &repo,
            Some(parse_id(&span.before)?),
            Some(parse_id(&c.tree)?),
            &[],
        )?;
        Ok(diff
            .iter()
            .map(|ch| (how(ch), ch.path.to_str_lossy().into_owned()))
            .collect())
    }

    /// What each turn changed, over every span here (those from `cps[from]` on when given).
    pub fn by_turn(&self, o: &Opened, from: usize) -> Result<HashMap<CheckpointId, TurnWork>> {
        let mut out: HashMap<CheckpointId, TurnWork> = HashMap::new();
        for at in from..self.cps.len() {
            for (how, path) in self.changes(o, at)? {
                match self.owner(at, &path) {
                    Owner::User => {}
                    Owner::Turn(t) => out.entry(t).or_default().add(how, path, Some(at)),
                    Owner::Ambiguous(turns) => {
                        for t in turns {
                            let work = out.entry(t).or_default();
                            if work.spans.last() != Some(&at) {
                                work.spans.push(at);
                            }
                            work.ambiguous.insert(path.clone());
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The place of checkpoint `id` here.
    pub fn place(&self, id: CheckpointId) -> Option<usize> {
        self.cps.iter().position(|c| c.id == id)
    }
}

/// What `show` says of who changed what around checkpoint `c`: for a prompt, its turn path by
/// path (with the changes no checkpoint holds yet to `now`, when its turn runs alone); and who
/// made each change of its own span. At most `limit` of each.
pub fn of_checkpoint(
    o: &mut Opened,
    c: &Checkpoint,
    now: Option<gix::ObjectId>,
    limit: usize,
) -> Result<(Option<TurnPaths>, Vec<ChangedBy>)> {
    if c.origin.is_some() || c.imported.is_some() {
        return Ok((None, Vec::new()));
    }
    let spans = Spans::since(o, &c.created_at)?;
    let Some(at) = spans.place(c.id) else {
        return Ok((None, Vec::new()));
    };
    let mut changed_by = Vec::new();
    for (how, path) in spans.changes(o, at)?.into_iter().take(limit) {
        let (by, turns) = match spans.owner(at, &path) {
            Owner::User => (By::User, Vec::new()),
            Owner::Turn(t) => (By::Turn, vec![t]),
            Owner::Ambiguous(ts) => (By::Ambiguous, ts),
        };
        changed_by.push(ChangedBy {
            path,
            change: how.letter().to_string(),
            by,
            turns,
        });
    }
    if c.kind != Kind::Message {
        return Ok((None, changed_by));
    }
    let mut work = spans.by_turn(o, at + 1)?.remove(&c.id).unwrap_or_default();
    if let Some(now) = now {
        let (running, pending) = o.pending(now)?;
        if running.as_slice() == [c.id] {
            for (how, path) in pending {
                work.add(how, path, None);
            }
        }
    }
    let files = work
        .paths
        .iter()
        .filter_map(|(path, how)| {
            how.map(|how| TurnPath {
                path: path.clone(),
                change: how.letter().to_string(),
            })
        })
        .take(limit)
        .collect();
    let ambiguous = work.ambiguous.into_iter().take(limit).collect();
    Ok((Some(TurnPaths { files, ambiguous }), changed_by))
}
