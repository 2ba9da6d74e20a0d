//! `ckpt edit begin|commit|abort`: edit transactions for agent tools.

use std::path::PathBuf;

use super::{skipped_status, wire_all, Ctx};
use crate::client::output::{one_path, print_skipped};
use crate::client::ClientError;
use crate::protocol::methods::{EditBeginParams, EditParams};
use crate::protocol::rpc;

pub fn begin(ctx: &Ctx, paths: Vec<PathBuf>) -> Result<i32, ClientError> {
    let params = EditBeginParams {
        project: ctx.project(),
        paths: wire_all(&ctx.base, &paths),
    };
    let b = ctx.connect()?.call::<rpc::EditBegin>(&params)?;
    ctx.out.value_or(&b, &b.token);
    Ok(0)
}

fn params(ctx: &Ctx, token: String) -> Result<EditParams, ClientError> {
    Ok(EditParams {
        project: ctx.project(),
        token,
    })
}

pub fn commit(ctx: &Ctx, token: String) -> Result<i32, ClientError> {
    let c = ctx
        .connect()?
        .call::<rpc::EditCommit>(&params(ctx, token)?)?;
    ctx.out.value_or(&c, "committed");
    Ok(0)
}

pub fn abort(ctx: &Ctx, token: String) -> Result<i32, ClientError> {
    let a = ctx
        .connect()?
        .call::<rpc::EditAbort>(&params(ctx, token)?)?;
    if !ctx.out.json(&a) {
        for p in &a.restored {
            outln!("put back  {}", one_path(p));
        }
        print_skipped(&a.skipped);
    }
    Ok(skipped_status(&a.skipped))
}
