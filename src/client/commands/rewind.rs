//! `ckpt rewind` (undo the agent's last turns) and `ckpt log` (the prompts, newest first).

use super::restore::{confirmed, render, Confirm};
use super::{skipped_status, Ctx};
use crate::client::output::{self, one_line, relative_time};
use crate::client::unrecorded::{self, Unrecorded};
use crate::client::ClientError;
use crate::model::Kind;
use crate::protocol::methods::{rpc, ListParams, LogParams, RestoreParams};
use crate::protocol::results::Checkpoint;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many prompts back (1: undo the last turn).
    #[arg(default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub n: u64,
    /// The dialog (agent session) to rewind; default: the one with the newest prompt.
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    #[command(flatten)]
    pub confirm: Confirm,
}

/// The prompts (message checkpoints) of `dialog`, or of every dialog, newest first.
fn prompts(ctx: &Ctx, dialog: Option<String>) -> Result<Vec<Checkpoint>, ClientError> {
    let params = ListParams {
        project: ctx.project(),
        dialog,
        limit: None,
        all_sessions: true,
        grep: None,
    };
    let mut list = ctx.connect()?.call::<rpc::List>(&params)?;
    list.retain(|c| c.kind == Kind::Message);
    Ok(list)
}

/// Restores the checkpoint taken when the N-th last prompt arrived: the files as they were
/// before the agent acted on it (and on every later prompt).
pub fn rewind(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let mut list = prompts(ctx, args.dialog.clone())?;
    let Some(dialog) = list.first().map(|c| c.dialog.clone()) else {
        return Err(ClientError::Usage(match &args.dialog {
            Some(d) => format!("dialog {d} has no prompts to rewind"),
            None => "no prompts recorded yet: nothing to rewind (see `ckpt hook install`)".into(),
        }));
    };
    list.retain(|c| c.dialog == dialog);
    let n = args.n as usize;
    let Some(target) = list.get(n - 1) else {
        return Err(ClientError::Usage(format!(
            "dialog {dialog} has {} prompt{}; cannot rewind {n}",
            list.len(),
            if list.len() == 1 { "" } else { "s" }
        )));
    };
    if !ctx.out.json {
        eprintln!(
            "rewinding past: {}{}",
            one_line(&target.label, 100),
            match n {
                1 => String::new(),
                n => format!(" (and the {} prompts after it)", n - 1),
            }
        );
    }
    let id = target.id.to_string();
    let params = |dry_run: bool| RestoreParams {
        project: ctx.project(),
        id: id.clone(),
        paths: vec![],
        dry_run,
        dialog: None,
    };
    let Confirm { yes, dry_run } = args.confirm;
    let Some(report) = confirmed::<rpc::Restore>(ctx, yes, dry_run, "rewind", params)? else {
        return Ok(1);
    };
    render(ctx, &report);
    Ok(skipped_status(&report.skipped))
}

/// The prompts as a person reads a conversation: newest first, with when, where and what the
/// agent's turn on each changed; the prompts the hook could not record among them.
pub fn log(ctx: &Ctx, dialog: Option<String>, limit: usize) -> Result<i32, ClientError> {
    let params = LogParams {
        project: ctx.project(),
        dialog: dialog.clone(),
        limit: Some(limit),
    };
    let turns = ctx.connect()?.call::<rpc::Log>(&params)?;
    // Not recorded: only those of this folder's agents (and, with --dialog, of that session).
    let mut missed: Vec<Unrecorded> = unrecorded::read(&ctx.paths.data_dir)
        .into_iter()
        .filter(|u| u.concerns(&ctx.base))
        .filter(|u| dialog.is_none() || u.dialog.as_deref() == dialog.as_deref())
        .collect();
    missed.reverse();
    missed.truncate(limit);
    if ctx.out.json {
        ctx.out
            .json(&serde_json::json!({ "prompts": turns, "unrecorded": missed }));
        return Ok(0);
    }
    if turns.is_empty() && missed.is_empty() {
        outln!("no prompts recorded yet (see `ckpt hook install`)");
        return Ok(0);
    }
    output::page(&ctx.out);
    // Newest first, the two lists merged by time.
    let at = |t: &str| {
        t.parse::<jiff::Timestamp>()
            .map_or(0, |t| t.as_nanosecond())
    };
    let (mut turns, mut missed) = (turns.iter().peekable(), missed.iter().peekable());
    loop {
        let take_missed = match (turns.peek(), missed.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(t), Some(u)) => at(&u.at) > at(&t.prompt.created_at),
        };
        if take_missed {
            let u = missed.next().expect("peeked");
            outln!(
                "NOT RECORDED  {}  {}  {}",
                relative_time(&u.at),
                u.agent,
                one_line(&u.why, 200)
            );
            print_prompt(&u.prompt);
            continue;
        }
        let t = turns.next().expect("peeked");
        let c = &t.prompt;
        let so_far = if t.turn.until.is_none() {
            " so far"
        } else {
            ""
        };
        outln!(
            "{}  {}  {} #{}  its turn: +{} ~{} -{}{so_far}",
            c.id.short(),
            relative_time(&c.created_at),
            c.dialog,
            c.seq,
            t.turn.added,
            t.turn.modified,
            t.turn.deleted
        );
        print_prompt(&c.label);
    }
    Ok(0)
}

/// A prompt's first three lines, indented.
fn print_prompt(text: &str) {
    for line in text.lines().take(3) {
        outln!("    {line}");
    }
    if text.lines().count() > 3 {
        outln!("    …");
    }
}
