//! What each checkpoint records of the turns: its span (see [`super::running`] for the turns
//! themselves): what changed since the checkpoint recorded last, and who was running.

use super::{Opened, Result};
use crate::model::CheckpointId;
use crate::store::span::Span;
use crate::store::treediff::diff_trees;

/// A changed path, as a span lists it.
type Listed = (crate::store::span::Change, String);

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
