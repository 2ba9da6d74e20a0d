//! The user's prompts (the `message` checkpoints) as the commands ask for them: rewind, fork,
//! diff and undo each start from one.

use super::Ctx;
use crate::client::ClientError;
use crate::model::Kind;
use crate::protocol::methods::ListParams;
use crate::protocol::results::Checkpoint;
use crate::protocol::rpc;

/// The prompts (message checkpoints) of `dialog`, or of every dialog, newest first.
pub fn prompts(ctx: &Ctx, dialog: Option<String>) -> Result<Vec<Checkpoint>, ClientError> {
    let params = ListParams {
        project: ctx.project(),
        dialog,
        limit: None,
        all_sessions: true,
        grep: None,
        remote: None,
        all: false,
        turns: false,
        steps: false,
    };
    let mut list = ctx.connect()?.call::<rpc::List>(&params)?;
    list.retain(|c| c.kind == Kind::Message);
    Ok(list)
}
