//! Turns as they run. A dialog's turn starts at its prompt's checkpoint and ends at its
//! agent's turn-end hook (a `turn-end` checkpoint), at the dialog's next prompt, or after
//! [`TURN_IDLE`] without a word from it; each after-tool hook in between records a `step`.
//!
//! Every checkpoint recorded in a project carries a [`Span`]: what changed since the checkpoint
//! recorded before it (in any dialog) and which turns were running meanwhile. Who changed
//! what is read from the spans ([`super::attribution`]); the running turns are kept here, in
//! memory, and read back from the dialogs' newest checkpoints when the project is opened.

use std::collections::HashMap;

use gix::bstr::ByteSlice;

use super::record::record;
use super::{Error, Opened, Project, Result};
use crate::model::{CheckpointId, Kind};
use crate::protocol::events::EventKind;
use crate::protocol::turns::{StepParams, Stepped};
use crate::store::checkpoint::{parse_id, validate_dialog};
use crate::store::span::{Span, TurnPoint};
use crate::store::treediff::diff_trees;
use crate::store::{Checkpoint, NewCheckpoint};

/// A changed path, as a span lists it.
type Listed = (crate::store::span::Change, String);

/// A turn with no prompt, step or end for this long is taken as over (its agent died, or was
/// installed without turn-end hooks): what happens later is nobody's turn.
pub const TURN_IDLE: jiff::SignedDuration = jiff::SignedDuration::from_secs(3600);
/// Longest tool name and tool-use id kept with a step.
const MAX_NAME: usize = 200;
/// Most paths kept of one tool call.
const MAX_PATHS: usize = 1_000;

/// A turn running now.
#[derive(Debug, Clone)]
struct Open {
    prompt: CheckpointId,
    steps: u64,
    last: jiff::Timestamp,
}

/// The turns running in a project, and the checkpoint it recorded last.
#[derive(Debug, Default)]
pub struct Running {
    loaded: bool,
    open: HashMap<String, Open>,
    /// The checkpoint recorded last, and its tree: where the next span starts.
    previous: Option<(CheckpointId, gix::ObjectId, jiff::Timestamp)>,
}

fn time_of(c: &Checkpoint) -> jiff::Timestamp {
    c.created_at.parse().unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

impl Running {
    /// Reads the running turns and the newest checkpoint from the dialogs' heads, once.
    fn load(&mut self, o: &crate::store::Store) -> Result<()> {
        if self.loaded {
            return Ok(());
        }
        let repo = o.repo();
        for (dialog, head) in o.dialogs(&repo)? {
            let Ok(c) = o.checkpoint(&repo, head) else {
                continue;
            };
            if c.imported.is_some() {
                continue;
            }
            let at = time_of(&c);
            if self.previous.is_none_or(|(_, _, t)| t < at) {
                self.previous = Some((c.id, parse_id(&c.tree)?, at));
            }
            let open = match (&c.kind, &c.point) {
                (Kind::Message, _) => Some((c.id, 0)),
                (Kind::Step, Some(p)) => Some((p.turn, p.seq.unwrap_or(0))),
                _ => None,
            };
            if let Some((prompt, steps)) = open {
                let turn = Open {
                    prompt,
                    steps,
                    last: at,
                };
                self.open.insert(dialog, turn);
            }
        }
        self.loaded = true;
        Ok(())
    }

    /// The turns running now (their prompts' checkpoints), oldest first.
    fn running(&self, now: jiff::Timestamp) -> Vec<CheckpointId> {
        let mut open: Vec<&Open> = self
            .open
            .values()
            .filter(|t| now.duration_since(t.last) < TURN_IDLE)
            .collect();
        open.sort_by_key(|t| t.last);
        open.iter().map(|t| t.prompt).collect()
    }

    /// The running turn of `dialog`.
    fn of(&self, dialog: &str, now: jiff::Timestamp) -> Option<&Open> {
        self.open
            .get(dialog)
            .filter(|t| now.duration_since(t.last) < TURN_IDLE)
    }

    /// Follows a checkpoint just recorded (of `tree`).
    pub(crate) fn note(&mut self, c: &Checkpoint, tree: gix::ObjectId) {
        if c.imported.is_some() {
            return;
        }
        let at = time_of(c);
        self.previous = Some((c.id, tree, at));
        match (c.kind, &c.point) {
            (Kind::Message, _) => {
                let turn = Open {
                    prompt: c.id,
                    steps: 0,
                    last: at,
                };
                self.open.insert(c.dialog.clone(), turn);
            }
            (Kind::Step, Some(p)) => {
                if let Some(t) = self.open.get_mut(&c.dialog) {
                    t.steps = p.seq.unwrap_or(t.steps);
                    t.last = at;
                }
            }
            (Kind::TurnEnd, _) => {
                self.open.remove(&c.dialog);
            }
            _ => {}
        }
    }
}

impl Opened {
    /// The checkpoint this project recorded last (where the chain of spans starts).
    pub(crate) fn newest_recorded(&mut self) -> Result<Option<CheckpointId>> {
        self.turns.load(&self.store)?;
        Ok(self.turns.previous.map(|(id, _, _)| id))
    }

    /// The turns running now, and what changed since the checkpoint recorded last (to `now`):
    /// what no span holds yet.
    pub(crate) fn pending(
        &mut self,
        now: gix::ObjectId,
    ) -> Result<(Vec<CheckpointId>, Vec<Listed>)> {
        let running = self.turns.running(jiff::Timestamp::now());
        let Some(span) = self.span_to(now)? else {
            return Ok((running, Vec::new()));
        };
        let changes = span
            .listed()
            .map(|(how, path)| (how, path.to_string()))
            .collect();
        Ok((running, changes))
    }

    /// The span a checkpoint of `tree` recorded now would carry: what changed since the
    /// checkpoint recorded last, and the turns running meanwhile. None for a project's first
    /// checkpoint.
    pub(crate) fn span_to(&mut self, tree: gix::ObjectId) -> Result<Option<Span>> {
        self.turns.load(&self.store)?;
        let Some((after, before, _)) = self.turns.previous else {
            return Ok(None);
        };
        let changes = self
            .store
            .begin()
            .objects(|repo| diff_trees(repo, Some(before), Some(tree), &[]));
        let changes = match changes {
            Ok(changes) => changes,
            // The tree before is gone (a gc after a prune): the span starts nowhere.
            Err(e) => {
                tracing::debug!(error = %e, "no span: the previous checkpoint's tree is unreadable");
                return Ok(None);
            }
        };
        let (changes, more) = Span::list_changes(&changes);
        Ok(Some(Span {
            after,
            before: before.to_string(),
            running: self.turns.running(jiff::Timestamp::now()),
            changes,
            more,
        }))
    }
}

/// `step`: an agent's after-tool hook (a step of the dialog's running turn, recorded when a
/// file changed or the tool is a point to come back to) or turn-end hook (the turn's end,
/// always recorded).
pub fn step(p: &Project, o: &mut Opened, params: StepParams) -> Result<Stepped> {
    validate_dialog(&params.dialog)?;
    let name = |what: &str, s: &Option<String>| match s {
        Some(s) if s.len() > MAX_NAME || s.contains('\n') => Err(Error::invalid(format!(
            "{what} must be one line of at most {MAX_NAME} bytes"
        ))),
        _ => Ok(()),
    };
    name("tool", &params.tool)?;
    name("tool_use_id", &params.tool_use_id)?;
    if params.paths.len() > MAX_PATHS {
        return Err(Error::invalid(format!(
            "a step names at most {MAX_PATHS} paths"
        )));
    }
    // A path outside the project is no change of it: dropped, not refused (a tool may write
    // anywhere).
    let paths: Vec<String> = params
        .paths
        .iter()
        .filter_map(|path| p.tree_paths(std::slice::from_ref(path)).ok())
        .flatten()
        .filter(|rel| !rel.is_empty())
        .map(|rel| rel.to_str_lossy().into_owned())
        .collect();
    o.turns.load(&o.store)?;
    let now = jiff::Timestamp::now();
    let Some(turn) = o.turns.of(&params.dialog, now).cloned() else {
        // No prompt of this dialog was recorded (the prompt hook is missing or failed): its
        // changes are left to the next checkpoint's span.
        return Ok(Stepped {
            recorded: None,
            turn: None,
        });
    };
    let tree = o.tree_to_record(p)?;
    let unchanged = o.turns.previous.is_some_and(|(_, t, _)| t == tree);
    if unchanged && !params.end && !params.point {
        // Nothing to come back to: nothing written.
        return Ok(Stepped {
            recorded: None,
            turn: Some(turn.prompt),
        });
    }
    let seq = (!params.end).then_some(turn.steps + 1);
    let label = match (&params.tool, params.end) {
        (_, true) => "turn ended".to_string(),
        (Some(tool), false) if paths.is_empty() => tool.clone(),
        (Some(tool), false) => format!("{tool} {}", paths.join(" ")),
        (None, false) => "tool call".to_string(),
    };
    let kind = if params.end {
        Kind::TurnEnd
    } else {
        Kind::Step
    };
    let new = NewCheckpoint {
        point: Some(TurnPoint {
            turn: turn.prompt,
            seq,
            tool: params.tool,
            paths,
            declared: params.declared,
            tool_use_id: params.tool_use_id,
        }),
        ..NewCheckpoint::new(params.dialog.clone(), kind, label)
    };
    let c = record(p, o, tree, new)?;
    o.save_index(false);
    p.events.emit(match seq {
        Some(step) => EventKind::Step {
            id: c.id,
            dialog: c.dialog.clone(),
            turn: turn.prompt,
            step,
            tool: c.point.as_ref().and_then(|t| t.tool.clone()),
        },
        None => EventKind::TurnEnded {
            id: c.id,
            dialog: c.dialog.clone(),
            turn: turn.prompt,
        },
    });
    Ok(Stepped {
        recorded: Some(c.into()),
        turn: Some(turn.prompt),
    })
}
