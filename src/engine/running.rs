//! Turns as they run. A dialog's turn starts at its prompt's checkpoint and ends at its
//! agent's turn-end hook (a `turn-end` checkpoint), at the dialog's next prompt, or after
//! [`TURN_IDLE`] without a word from it; each after-tool hook in between records a `step`.
//!
//! Every checkpoint recorded in a project carries a span (`store::span::Span`, written by
//! [`super::turns`]): what changed since the checkpoint
//! recorded before it (in any dialog) and which turns were running meanwhile. Who changed
//! what is read from the spans ([`super::attribution`]); the running turns are kept here, in
//! memory, and read back from the dialogs' newest checkpoints when the project is opened.

use std::collections::HashMap;

use super::Result;
use crate::model::{CheckpointId, Kind};
use crate::store::checkpoint::parse_id;
use crate::store::Checkpoint;

/// A turn with no prompt, step or end for this long is taken as over (its agent died, or was
/// installed without turn-end hooks): what happens later is nobody's turn.
pub const TURN_IDLE: jiff::SignedDuration = jiff::SignedDuration::from_secs(3600);

/// A turn running now.
#[derive(Debug, Clone)]
pub(crate) struct Open {
    pub(crate) prompt: CheckpointId,
    pub(crate) steps: u64,
    last: jiff::Timestamp,
}

/// The turns running in a project, and the checkpoint it recorded last.
#[derive(Debug, Default)]
pub struct Running {
    loaded: bool,
    open: HashMap<String, Open>,
    /// The checkpoint recorded last, and its tree: where the next span starts.
    pub(crate) previous: Option<(CheckpointId, gix::ObjectId, jiff::Timestamp)>,
}

fn time_of(c: &Checkpoint) -> jiff::Timestamp {
    c.created_at.parse().unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

impl Running {
    /// Reads the running turns and the newest checkpoint from the dialogs' heads, once.
    pub(crate) fn load(&mut self, o: &crate::store::Store) -> Result<()> {
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
    pub(crate) fn running(&self, now: jiff::Timestamp) -> Vec<CheckpointId> {
        let mut open: Vec<&Open> = self
            .open
            .values()
            .filter(|t| now.duration_since(t.last) < TURN_IDLE)
            .collect();
        open.sort_by_key(|t| t.last);
        open.iter().map(|t| t.prompt).collect()
    }

    /// The running turn of `dialog`.
    pub(crate) fn of(&self, dialog: &str, now: jiff::Timestamp) -> Option<&Open> {
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
