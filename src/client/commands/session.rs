//! `ckpt session status|approve|reset`: the run of checkpoints since the last approval.

use super::restore::{confirmed, render, Confirm};
use super::{skipped_status, Ctx};
use crate::client::output::{plural, relative_time};
use crate::client::ClientError;
use crate::protocol::methods::{SessionApproveParams, SessionParams, SessionResetParams};
use crate::protocol::rpc;

pub fn status(ctx: &Ctx, dialog: Option<String>) -> Result<i32, ClientError> {
    let params = SessionParams {
        project: ctx.project(),
        dialog,
    };
    let s = ctx.connect()?.call::<rpc::SessionStatus>(&params)?;
    if ctx.out.json(&s) {
        return Ok(0);
    }
    let changes = if s.has_unapproved {
        "unapproved changes"
    } else {
        "no unapproved changes"
    };
    outln!(
        "dialog {}  session {}  {changes}",
        s.dialog,
        s.active_session
    );
    match &s.last_approved_at {
        Some(at) => outln!(
            "approved {} ({})",
            s.approved_commit.short(),
            relative_time(at)
        ),
        None => outln!(
            "never approved; the approved state is the first checkpoint {}",
            s.approved_commit.short()
        ),
    }
    Ok(0)
}

pub fn approve(
    ctx: &Ctx,
    dialog: Option<String>,
    message: Option<String>,
) -> Result<i32, ClientError> {
    let params = SessionApproveParams {
        project: ctx.project(),
        dialog,
        message,
    };
    let a = ctx.connect()?.call::<rpc::SessionApprove>(&params)?;
    if !ctx.out.json(&a) {
        outln!(
            "approved {} ({} in session {}); session {} started",
            a.approved_commit.short(),
            plural(a.commits_approved, "checkpoint", "checkpoints"),
            a.session,
            a.new_session
        );
    }
    Ok(0)
}

pub fn reset(ctx: &Ctx, dialog: Option<String>, confirm: Confirm) -> Result<i32, ClientError> {
    let Confirm { yes, dry_run } = confirm;
    let params = |dry_run: bool| SessionResetParams {
        project: ctx.project(),
        dialog: dialog.clone(),
        dry_run,
    };
    let Some(report) = confirmed::<rpc::SessionReset>(ctx, yes, dry_run, "reset", params)? else {
        return Ok(1);
    };
    render(ctx, &report);
    Ok(skipped_status(&report.restored.skipped))
}
