//! `ckpt dialog new|list|fork|rm|keep`: one timeline per agent conversation.

use super::Ctx;
use crate::client::output::{one_line, plural, relative_time, table};
use crate::client::ClientError;
use crate::protocol::methods::{DialogKeepParams, DialogNewParams, DialogParams, ForkParams};
use crate::protocol::results::DialogStarted;
use crate::protocol::rpc;

pub fn new(ctx: &Ctx, name: Option<String>, title: Option<String>) -> Result<i32, ClientError> {
    let params = DialogNewParams {
        project: ctx.project(),
        dialog: name,
        title,
    };
    started(ctx, &ctx.connect()?.call::<rpc::DialogNew>(&params)?);
    Ok(0)
}

pub fn fork(ctx: &Ctx, id: String, name: Option<String>) -> Result<i32, ClientError> {
    let params = ForkParams {
        project: ctx.project(),
        id,
        dialog: name,
    };
    started(ctx, &ctx.connect()?.call::<rpc::DialogFork>(&params)?);
    Ok(0)
}

fn started(ctx: &Ctx, d: &DialogStarted) {
    if !ctx.out.json(d) {
        outln!(
            "dialog {}  initial checkpoint {}",
            d.dialog,
            d.initial.id.short()
        );
    }
}

pub fn list(ctx: &Ctx) -> Result<i32, ClientError> {
    let list = ctx
        .connect()?
        .call::<rpc::DialogList>(&ctx.project_params())?;
    if ctx.out.json(&list) {
        return Ok(0);
    }
    if list.is_empty() {
        outln!("no dialogs yet");
        return Ok(0);
    }
    let header = ["DIALOG", "CHECKPOINTS", "LAST", "TITLE"];
    let mut rows = vec![header.map(String::from).to_vec()];
    for d in list {
        rows.push(vec![
            d.dialog,
            d.checkpoints.to_string(),
            relative_time(&d.last_activity),
            one_line(&d.title, 60),
        ]);
    }
    table(&rows);
    Ok(0)
}

pub fn rm(ctx: &Ctx, name: String) -> Result<i32, ClientError> {
    let params = DialogParams {
        project: ctx.project(),
        dialog: name.clone(),
    };
    let result = ctx.connect()?.call::<rpc::DialogRm>(&params)?;
    let text = format!("dialog {name} removed (its content stays until gc)");
    ctx.out.value_or(&result, &text);
    Ok(0)
}

pub fn keep(ctx: &Ctx, name: String, count: Option<usize>) -> Result<i32, ClientError> {
    let params = DialogKeepParams {
        project: ctx.project(),
        dialog: name.clone(),
        keep: count,
    };
    let k = ctx.connect()?.call::<rpc::DialogKeep>(&params)?;
    let text = format!(
        "dialog {name} keeps {}",
        plural(k.keep, "checkpoint", "checkpoints")
    );
    ctx.out.value_or(&k, &text);
    Ok(0)
}
