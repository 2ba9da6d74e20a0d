//! The daemon and its projects: `watch`, `unwatch`, `projects`, `status`, `shutdown`.

use std::path::PathBuf;

use super::{resolve, Ctx};
use crate::client::output::{human_bytes, one_line, plural, relative_time, table};
use crate::client::unrecorded::{self, Unrecorded};
use crate::client::ClientError;
use crate::protocol::methods::{ForgetParams, NoParams, PathParams, WatchParams};
use crate::protocol::rpc;

pub fn watch(ctx: &Ctx, dir: Option<PathBuf>, force: bool, nest: bool) -> Result<i32, ClientError> {
    let path = resolve(&ctx.base, dir);
    let params = WatchParams { path, force, nest };
    let w = ctx.connect()?.call::<rpc::Watch>(&params)?;
    if !ctx.out.json_or_quiet(&w) {
        outln!(
            "watching {}\n  store {}",
            w.root.display(),
            w.store.display()
        );
        for other in &w.nested {
            outln!(
                "  beside the watched project {} (each keeps its own history)",
                other.display()
            );
        }
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

/// Deletes a project's history after a confirmation (a person at a terminal) or `--yes`.
pub fn forget(
    ctx: &Ctx,
    dir: Option<PathBuf>,
    yes: bool,
    dry_run: bool,
) -> Result<i32, ClientError> {
    let path = resolve(&ctx.base, dir);
    let params = |dry_run| ForgetParams {
        path: path.clone(),
        dry_run,
    };
    let mut conn = ctx.connect()?;
    if !yes && !dry_run {
        if !ctx.should_confirm(false, false) {
            return Err(ClientError::Usage(
                "`ckpt forget` deletes every checkpoint of the project: pass --yes (there is \
                 no terminal to ask on)"
                    .into(),
            ));
        }
        let plan = conn.call::<rpc::Forget>(&params(true))?;
        eprint!(
            "Delete every checkpoint of {} ({} in {})? It cannot be undone; the project's \
             files are not touched. [y/N] ",
            plan.root.display(),
            human_bytes(plan.store_bytes),
            plan.store.display()
        );
        let _ = std::io::Write::flush(&mut std::io::stderr());
        let mut answer = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
            eprintln!("forget cancelled; nothing changed");
            return Ok(1);
        }
        conn = ctx.connect()?;
    }
    let f = conn.call::<rpc::Forget>(&params(dry_run))?;
    if !ctx.out.json_or_quiet(&f) {
        let verb = if f.dry_run { "would delete" } else { "deleted" };
        outln!(
            "{verb} the history of {} ({}, {}){}",
            f.root.display(),
            f.store.display(),
            human_bytes(f.store_bytes),
            if f.was_watched && !f.dry_run {
                "; no longer watched"
            } else {
                ""
            }
        );
        let hooks = crate::client::agents::install::installed_for(&f.root);
        if !hooks.is_empty() && !f.dry_run {
            outln!(
                "the hooks of {} are still installed: the next prompt records this project \
                 again (`ckpt hook uninstall AGENT` removes one)",
                hooks.join(", ")
            );
        }
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

/// How far back `status` lists prompts that were not recorded.
const UNRECORDED_DAYS: i64 = 7;

pub fn status(ctx: &Ctx, dismiss: bool) -> Result<i32, ClientError> {
    let shown = status_of(ctx);
    if dismiss {
        let n = unrecorded::clear(&ctx.paths.data_dir);
        if !ctx.out.json && !ctx.out.quiet {
            outln!(
                "dismissed {}",
                plural(n, "prompt not recorded", "prompts not recorded")
            );
        }
    }
    shown
}

fn status_of(ctx: &Ctx) -> Result<i32, ClientError> {
    // What the client knows without the daemon comes first: often why there is none.
    let since = jiff::Timestamp::now().as_second() - UNRECORDED_DAYS * 86_400;
    let unrecorded: Vec<Unrecorded> = unrecorded::read(&ctx.paths.data_dir)
        .into_iter()
        .filter(|u| {
            u.at.parse::<jiff::Timestamp>()
                .is_ok_and(|t| t.as_second() >= since)
        })
        .collect();
    let s = match ctx
        .connect()
        .and_then(|mut c| c.call::<rpc::Status>(&NoParams {}))
    {
        Ok(s) => s,
        Err(e) => {
            if !ctx.out.json {
                local_status(ctx, &unrecorded);
            }
            return Err(e);
        }
    };
    // The current project's remotes: what is not pushed yet (none outside a project).
    let remotes = ctx
        .connect()
        .and_then(|mut c| c.call::<rpc::RemoteList>(&ctx.project_params()))
        .unwrap_or_default();
    if ctx.out.json {
        let mut v = serde_json::to_value(&s).expect("a status serialises");
        v["config_problem"] = serde_json::json!(ctx.config_problem);
        v["unrecorded"] = serde_json::json!(unrecorded);
        v["remotes"] = serde_json::json!(remotes);
        ctx.out.json(&v);
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
    for r in &remotes {
        outln!(
            "remote   {}: {} not pushed yet (last push {})",
            r.name,
            plural(r.unpushed, "checkpoint", "checkpoints"),
            r.pushed_at.as_deref().map_or("never".into(), relative_time)
        );
    }
    local_status(ctx, &unrecorded);
    Ok(0)
}

/// The configuration's problem and the prompts not recorded lately, for people.
fn local_status(ctx: &Ctx, unrecorded: &[Unrecorded]) {
    if let Some(problem) = &ctx.config_problem {
        outln!("config   cannot be used: {problem}");
    }
    if unrecorded.is_empty() {
        return;
    }
    outln!(
        "{} not recorded in the last {UNRECORDED_DAYS} days (`ckpt log` in a project lists its own \
         with its prompts; `ckpt status --dismiss` clears them):",
        plural(unrecorded.len(), "prompt", "prompts")
    );
    for u in unrecorded.iter().rev().take(5) {
        outln!(
            "  {}  {}  {}: {}",
            relative_time(&u.at),
            u.agent,
            u.cwd.display(),
            one_line(&u.why, 160)
        );
    }
}
pub fn shutdown(ctx: &Ctx) -> Result<i32, ClientError> {
    let result = ctx.connect()?.call::<rpc::Shutdown>(&NoParams {})?;
    ctx.out.value_or(&result, "ckptd is shutting down");
    Ok(0)
}

pub fn reload(ctx: &Ctx) -> Result<i32, ClientError> {
    let r = ctx.connect()?.call::<rpc::Reload>(&NoParams {})?;
    if !ctx.out.json_or_quiet(&r) {
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
