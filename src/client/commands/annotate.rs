//! `ckpt tag` and `ckpt note`: names and notes on checkpoints (both keep them from pruning).

use super::Ctx;
use crate::client::ClientError;
use crate::protocol::methods::{NoteParams, TagParams};
use crate::protocol::rpc;

pub fn tag(ctx: &Ctx, id: String, name: String) -> Result<i32, ClientError> {
    let params = TagParams {
        project: ctx.project(),
        id,
        name,
    };
    let t = ctx.connect()?.call::<rpc::Tag>(&params)?;
    ctx.out
        .value_or(&t, &format!("tagged {} as {}", t.id, t.tag));
    Ok(0)
}

pub fn note(ctx: &Ctx, id: String, text: String) -> Result<i32, ClientError> {
    let params = NoteParams {
        project: ctx.project(),
        id,
        text,
    };
    let n = ctx.connect()?.call::<rpc::Note>(&params)?;
    ctx.out.value_or(&n, n.notes.as_deref().unwrap_or(""));
    Ok(0)
}
