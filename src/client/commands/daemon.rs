//! The daemon and its projects: `watch`, `unwatch`, `projects`, `status`, `shutdown`.

use std::path::PathBuf;

use super::{resolve, Ctx};
use crate::client::output::{human_bytes, table};
use crate::client::ClientError;
use crate::protocol::methods::{rpc, NoParams, PathParams, WatchParams};

pub fn watch(ctx: &Ctx, dir: Option<PathBuf>, force: bool) -> Result<i32, ClientError> {
    let path = resolve(&ctx.base, dir);
    let w = ctx
        .connect()?
        .call::<rpc::Watch>(&WatchParams { path, force })?;
    if !ctx.out.json_or_quiet(&w) {
        outln!(
            "watching {}\n  store {}",
            w.root.display(),
            w.store.display()
        );
    }
    Ok(0)
}

pub fn unwatch(ctx: &Ctx, dir: Option<PathBuf>) -> Result<i32, ClientError> {
    let path = resolve(&ctx.base, dir);
    let u = ctx.connect()?.call::<rpc::Unwatch>(&PathParams { path })?;
    if !ctx.out.json_or_quiet(&u) {
        outln!(
            "no longer watching {} (its store stays at {})",
            u.root.display(),
            u.store.display()
        );
    }
    Ok(0)
}

pub fn projects(ctx: &Ctx) -> Result<i32, ClientError> {
    let list = ctx.connect()?.call::<rpc::Projects>(&NoParams {})?;
    if ctx.out.json(&list) {
        return Ok(0);
    }
    if list.is_empty() {
        outln!("no projects are watched (use `ckpt watch DIR`)");
        return Ok(0);
    }
    let mut rows = vec![vec!["ROOT".into(), "STATE".into(), "STORE".into()]];
    for p in list {
        let state = if p.available { "ok" } else { "unavailable" };
        rows.push(vec![
            p.root.display().to_string(),
            state.into(),
            p.store.display().to_string(),
        ]);
    }
    table(&rows);
    Ok(0)
}

pub fn status(ctx: &Ctx) -> Result<i32, ClientError> {
    let s = ctx.connect()?.call::<rpc::Status>(&NoParams {})?;
    if ctx.out.json(&s) {
        return Ok(0);
    }
    outln!(
        "{} (pid {}, protocol {}), up {}s",
        s.daemon,
        s.pid,
        s.protocol,
        s.uptime_seconds
    );
    outln!("socket   {}", s.socket.display());
    outln!("data     {}", s.data_dir.display());
    outln!("projects {}", s.projects.len());
    for p in &s.projects {
        let state = match (p.project.available, p.busy) {
            (false, _) => "unavailable",
            (_, true) => "busy",
            _ => "ok",
        };
        outln!(
            "  {}  {state}  {}  store {}",
            p.project.root.display(),
            p.mode,
            human_bytes(p.store_bytes)
        );
    }
    Ok(0)
}

pub fn shutdown(ctx: &Ctx) -> Result<i32, ClientError> {
    let result = ctx.connect()?.call::<rpc::Shutdown>(&NoParams {})?;
    ctx.out.value_or(&result, "ckptd is shutting down");
    Ok(0)
}

pub fn reload(ctx: &Ctx) -> Result<i32, ClientError> {
    let r = ctx.connect()?.call::<rpc::Reload>(&NoParams {})?;
    if !ctx.out.json(&r) {
        outln!("configuration reloaded");
        if !r.restart_needed.is_empty() {
            outln!(
                "changed, applies when ckptd starts again: {}",
                r.restart_needed.join(", ")
            );
        }
    }
    Ok(0)
}
