//! `ckpt restore` and `ckpt undo`: change the files (after a confirmation on a terminal), and
//! the report of what a restore did, shared with `session reset`.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use super::{skipped_status, wire_all, Ctx};
use crate::client::output::{one_path, plural, short};
use crate::client::ClientError;
use crate::protocol::methods::{RestoreParams, UndoParams};
use crate::protocol::results::Restored;
use crate::protocol::rpc;
use crate::protocol::rpc::Method;

/// How a change of the files is confirmed: `--dry-run` only looks, `--yes` does not ask.
#[derive(Debug, clap::Args)]
pub struct Confirm {
    /// Only report what would be written and deleted.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation on a terminal.
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An id or unique prefix, a tag, `@`/`latest`, `@~N` or `#SEQ`.
    pub id: String,
    /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    #[command(flatten)]
    pub confirm: Confirm,
    /// Only these paths (files or folders), after `--`.
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

pub fn restore(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let params = |dry_run: bool| RestoreParams {
        project: ctx.project(),
        id: args.id.clone(),
        paths: wire_all(&ctx.base, &args.paths),
        dry_run,
        dialog: args.dialog.clone(),
        by: None,
    };
    let Confirm { yes, dry_run } = args.confirm;
    let report = confirmed::<rpc::Restore>(ctx, yes, dry_run, "restore", params)?;
    let Some(report) = report else { return Ok(1) };
    ctx.say_resolved(&args.id, &report.restored_to);
    render(ctx, &report);
    Ok(skipped_status(&report.skipped))
}

pub fn undo(ctx: &Ctx, dialog: Option<String>, confirm: Confirm) -> Result<i32, ClientError> {
    let Confirm { yes, dry_run } = confirm;
    let params = |dry_run: bool| UndoParams {
        project: ctx.project(),
        dialog: dialog.clone(),
        dry_run,
    };
    let Some(report) = confirmed::<rpc::Undo>(ctx, yes, dry_run, "undo", params)? else {
        return Ok(1);
    };
    let session = (!dry_run)
        .then(|| session_before(ctx, &report.restored_to))
        .flatten();
    if ctx.out.json {
        let mut value =
            serde_json::to_value(&report).map_err(|e| ClientError::Other(e.to_string()))?;
        value["conversation"] = serde_json::to_value(&session).unwrap_or_default();
        ctx.out.json(&value);
        return Ok(skipped_status(&report.skipped));
    }
    render(ctx, &report);
    if let Some(s) = &session {
        outln!(
            "the files are as the {} session {} left them: continue it with  {}",
            s.agent,
            s.session_id.as_deref().unwrap_or(""),
            s.resume.join(" ")
        );
    }
    Ok(skipped_status(&report.skipped))
}

/// The agent's session whose turn left the files as checkpoint `at` holds them: that of the
/// newest prompt recorded before it (after an undo of a rewind, the session rewound from, not
/// the fork).
fn session_before(
    ctx: &Ctx,
    at: &crate::model::CheckpointId,
) -> Option<crate::client::agents::conversation::Forked> {
    let mut conn = ctx.connect().ok()?;
    let shown = conn
        .call::<rpc::Show>(&crate::protocol::methods::ShowParams {
            project: ctx.project(),
            id: at.to_string(),
            files: false,
            dialog: None,
            max_entries: Some(0),
            counts: false,
        })
        .ok()?;
    let prompts = super::prompts::prompts(ctx, None).ok()?;
    let prompt = prompts
        .iter()
        .find(|p| p.created_at <= shown.checkpoint.created_at)?;
    let meta = conn
        .call::<rpc::Show>(&crate::protocol::methods::ShowParams {
            project: ctx.project(),
            id: prompt.id.to_string(),
            files: false,
            dialog: None,
            max_entries: Some(0),
            counts: false,
        })
        .ok()?
        .checkpoint
        .meta?;
    crate::client::agents::conversation::session_of(&meta)
}

/// Calls `M` (a restore-like method whose params `params(dry_run)` builds); on a terminal, a
/// dry run is shown first and the person asked. None: they said no, and nothing changed.
pub fn confirmed<M: Method>(
    ctx: &Ctx,
    yes: bool,
    dry_run: bool,
    what: &str,
    params: impl Fn(bool) -> M::Params,
) -> Result<Option<M::Result>, ClientError>
where
    M::Result: AsRef<Restored>,
{
    let mut conn = ctx.connect()?;
    if ctx.should_confirm(yes, dry_run) {
        let plan = conn.call::<M>(&params(true))?;
        if !confirm(plan.as_ref()) {
            eprintln!("{what} cancelled; nothing changed");
            return Ok(None);
        }
        // The daemon closes connections left idle while a person reads the plan.
        conn = ctx.connect()?;
    }
    let params = params(dry_run);
    Ok(Some(ctx.with_progress(|| conn.call::<M>(&params))?))
}

/// What a restore did (or would do): a summary, then the paths; on a terminal at most the first
/// lines unless --verbose.
pub fn render<T: serde::Serialize + AsRef<Restored>>(ctx: &Ctx, result: &T) {
    // A quiet restore still says what it had to leave alone.
    if ctx.out.json(result) || (ctx.out.quiet && result.as_ref().skipped.is_empty()) {
        return;
    }
    let r = result.as_ref();
    let dry = r.dry_run;
    let (verb, wrote, deleted, skipped) = match dry {
        true => ("would restore", "would write", "would delete", "would skip"),
        false => ("restored", "wrote", "deleted", "skipped"),
    };
    outln!(
        "{verb} to {}: {} {}, {} {}, {} {}",
        r.restored_to.short(),
        r.written.len(),
        if dry { "to write" } else { "written" },
        r.deleted.len(),
        if dry { "to delete" } else { "deleted" },
        r.skipped.len(),
        if dry { "to skip" } else { "skipped" },
    );
    let limit = ctx.out.line_limit();
    let mut shown = 0;
    // The old column: "wrote    x", "deleted  x"; a dry run's verbs are longer.
    let width = if dry { 12 } else { 7 };
    for (list, what) in [(&r.written, wrote), (&r.deleted, deleted)] {
        for p in list {
            if shown < limit {
                outln!("  {what:<width$}  {}", one_path(p));
            }
            shown += 1;
        }
    }
    for skip in &r.skipped {
        if shown < limit {
            outln!(
                "  {skipped:<width$}  {}: {}",
                one_path(&skip.path),
                skip.reason
            );
        }
        shown += 1;
    }
    if shown > limit {
        outln!(
            "  … and {} more (all of them with --verbose or --json)",
            shown - limit
        );
    }
    if let Some(undo) = &r.undo_checkpoint {
        outln!(
            "undo with: ckpt undo  (or: ckpt restore {})",
            short(&undo.to_string())
        );
    }
}

/// Shows a dry run's plan and asks on the terminal; true to go ahead.
fn confirm(plan: &Restored) -> bool {
    eprintln!("restoring to {} will:", plan.restored_to.short());
    for p in plan.written.iter().take(50) {
        eprintln!("  write   {}", one_path(p));
    }
    for p in plan.deleted.iter().take(50) {
        eprintln!("  delete  {}", one_path(p));
    }
    for skip in plan.skipped.iter().take(50) {
        eprintln!("  skip    {}: {}", one_path(&skip.path), skip.reason);
    }
    if plan.written.len() > 50 || plan.deleted.len() > 50 {
        eprintln!(
            "  … ({} and {} in all)",
            plural(plan.written.len(), "write", "writes"),
            plural(plan.deleted.len(), "deletion", "deletions")
        );
    }
    eprint!("The current state is saved first, so this can be undone. Restore? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
}
