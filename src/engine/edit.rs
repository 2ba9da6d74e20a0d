//! Edit transactions for agent tools: `edit_begin` saves some paths' current state (content and
//! mode, a symlink's target, or absence), `edit_commit` drops the copy, `edit_abort` puts the
//! paths back exactly.
//!
//! What is saved, and how it is put back, is [`super::transactions`]'.

use super::{Error, Opened, Project, Result};
use crate::protocol::methods::{EditBeginParams, EditParams};
use crate::protocol::results as r;

/// Saves the paths' current state and returns the transaction's token.
pub fn edit_begin(p: &Project, _: &mut Opened, params: EditBeginParams) -> Result<r::EditBegun> {
    let paths = p.tree_paths(&params.paths)?;
    let token = p
        .edits
        .lock()
        .begin(&p.root, &paths)
        .map_err(Error::InvalidParams)?;
    Ok(r::EditBegun {
        token,
        expires_in_seconds: super::transactions::EDIT_TTL.as_secs(),
    })
}

pub fn edit_commit(p: &Project, _: &mut Opened, params: EditParams) -> Result<r::EditCommitted> {
    if !p.edits.lock().commit(&params.token) {
        return Err(Error::UnknownEdit(params.token));
    }
    Ok(r::EditCommitted {
        token: params.token,
        committed: true,
    })
}

/// Puts every saved path back, through the same writer and rules as a restore. The index
/// learns of the writes from the watcher (or the next stat verify), like any other edit.
pub fn edit_abort(p: &Project, _: &mut Opened, params: EditParams) -> Result<r::EditAborted> {
    let outcome = p.edits.lock().abort(&p.root, &params.token);
    let (restored, skipped) = outcome.ok_or_else(|| Error::UnknownEdit(params.token.clone()))?;
    Ok(r::EditAborted {
        token: params.token,
        restored: r::lossy(&restored),
        restored_bytes: r::non_utf8(&restored),
        skipped,
    })
}
