//! `ckpt revert ID`: takes back exactly what one turn changed (or what it changed after one of
//! its steps), leaving every other session's files and the user's edits as they are; shows the
//! plan and asks first on a terminal; exit 2 when something was left alone.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use super::restore::Confirm;
use super::{wire_all, Ctx, EXIT_SKIPPED};
use crate::client::output::one_path;
use crate::client::ClientError;
use crate::protocol::rpc;
use crate::protocol::turns::{RevertParams, Reverted};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A prompt's checkpoint (its turn) or a step (what its turn did after it): an id or
    /// unique prefix, a tag, `@~N` or `#SEQ`.
    pub id: String,
    /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// Also take back changes another turn running at the same time may have made (ambiguous).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub confirm: Confirm,
    /// Only these paths (files or folders), after `--`.
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

pub fn revert(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let params = |dry_run: bool| RevertParams {
        project: ctx.project(),
        id: args.id.clone(),
        paths: wire_all(&ctx.base, &args.paths),
        dry_run,
        force: args.force,
        dialog: args.dialog.clone(),
        later: false,
    };
    let Confirm { yes, dry_run } = args.confirm;
    match run(ctx, yes, dry_run, None, params)? {
        Some(report) => {
            render(ctx, &report);
            Ok(status(&report))
        }
        None => Ok(1),
    }
}

/// A revert, after its plan and a yes on a terminal (`plan`: the plan already asked for).
/// None when the person said no.
pub fn run(
    ctx: &Ctx,
    yes: bool,
    dry_run: bool,
    plan: Option<Reverted>,
    params: impl Fn(bool) -> RevertParams,
) -> Result<Option<Reverted>, ClientError> {
    if ctx.should_confirm(yes, dry_run) {
        let plan = match plan {
            Some(plan) => plan,
            None => ctx.connect()?.call::<rpc::Revert>(&params(true))?,
        };
        if plan.reverted.is_empty() {
            return Ok(Some(plan));
        }
        if !confirm(&plan) {
            eprintln!("revert cancelled; nothing changed");
            return Ok(None);
        }
    }
    let mut conn = ctx.connect()?;
    let report = ctx.with_progress(|| conn.call::<rpc::Revert>(&params(dry_run)))?;
    Ok(Some(report))
}

pub fn status(r: &Reverted) -> i32 {
    match r.refused.is_empty() && r.skipped.is_empty() {
        true => 0,
        false => EXIT_SKIPPED,
    }
}

fn render(ctx: &Ctx, r: &Reverted) {
    if !ctx.out.json(r) {
        say(r);
    }
}

/// What a revert did, for a person.
pub fn say(r: &Reverted) {
    let what = match &r.from_step {
        Some(step) => format!(
            "what the turn of {} did after step {}",
            r.turn.short(),
            step.short()
        ),
        None if r.turns.len() > 1 => format!(
            "the {} turns of this session from {} on",
            r.turns.len(),
            r.turn.short()
        ),
        None => format!("the turn of {}", r.turn.short()),
    };
    let verb = if r.dry_run {
        "would take back"
    } else {
        "took back"
    };
    if r.reverted.is_empty() {
        outln!("nothing to take back of {what}: the files hold none of its changes");
    } else {
        outln!("{verb} {what}: {} path(s)", r.reverted.len());
        for path in &r.reverted {
            outln!("  reverted  {}", one_path(path));
        }
    }
    for refused in &r.refused {
        outln!(
            "  left      {}: {}",
            one_path(&refused.path),
            refused.reason
        );
    }
    for kept in &r.left_alone {
        outln!("  kept      {}: {}", one_path(&kept.path), kept.reason);
    }
    for skip in &r.skipped {
        outln!("  skipped   {}: {}", one_path(&skip.path), skip.reason);
    }
    if let Some(undo) = &r.undo_checkpoint {
        outln!(
            "everything else is as it was; `ckpt undo` puts the files back as they were ({})",
            undo.short()
        );
    }
}

fn confirm(plan: &Reverted) -> bool {
    match plan.turns.len() {
        0 | 1 => eprintln!("reverting the turn of {} will:", plan.turn.short()),
        n => eprintln!(
            "reverting this session's {n} turns from {} on will:",
            plan.turn.short()
        ),
    }
    for p in plan.reverted.iter().take(50) {
        eprintln!("  take back  {}", one_path(p));
    }
    for r in plan.refused.iter().chain(&plan.left_alone).take(50) {
        eprintln!("  leave      {}: {}", one_path(&r.path), r.reason);
    }
    eprint!("The current state is saved first, so this can be undone. Revert? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
}
