//! `ckpt rewind`: undo the agent's last turns. The files go back to the checkpoint taken when the
//! prompt arrived (a restore, undoable), or, where other sessions or the user changed files
//! since, this session's turns since it are taken back and everything else is kept (see
//! `super::revert`; `--all` asks for the whole tree). The conversation is forked to just before
//! that prompt where the agent's session can be read (see `client::conversation`): a new
//! session the agent resumes, the original left as it was.

use super::restore::{confirmed, render, Confirm};
use super::{skipped_status, Ctx};
use crate::client::agents::conversation::{self, CannotFork, Fork, Forked, Place, Point, Recorded};
use crate::client::output::one_line;
use crate::client::ClientError;
use crate::model::Kind;
use crate::protocol::methods::{NoteParams, RestoreParams, ShowParams};
use crate::protocol::results::{Checkpoint, Restored, TurnField};
use crate::protocol::rpc;
use crate::protocol::turns::{RevertParams, Reverted};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many prompts back (1: undo the last turn; a number of up to 3 digits), or the
    /// checkpoint to rewind to (an id or prefix, a tag, `@~N`, `#SEQ`; a step: to just after
    /// its tool call).
    #[arg(default_value = "1", value_name = "N|CHECKPOINT")]
    pub target: String,
    /// A step to rewind to: the files as they were just after its tool call, and the
    /// conversation forked to just after the tool's result (Claude Code).
    #[arg(long, value_name = "STEP", conflicts_with = "target")]
    pub to: Option<String>,
    /// The dialog (agent session) to rewind; default: the one with the newest prompt.
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// Rewind the files only.
    #[arg(long, conflicts_with_all = ["conversation", "both"])]
    pub code: bool,
    /// Fork the conversation only; the files stay as they are.
    #[arg(long, conflicts_with = "both")]
    pub conversation: bool,
    /// The files and the conversation (the default when the conversation can be forked; the
    /// files alone otherwise, said on stderr).
    #[arg(long)]
    pub both: bool,
    /// Put the whole tree back as it was at that prompt, even where other sessions or you
    /// changed files since (the default takes back only this session's turns then).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub confirm: Confirm,
}

/// The checkpoint `target` names (N prompts back, or a checkpoint's name), with its metadata,
/// and the prompts of its dialog (newest first).
pub fn select(
    ctx: &Ctx,
    target: &str,
    dialog: Option<String>,
) -> Result<(Checkpoint, Vec<Checkpoint>), ClientError> {
    let n = target
        .parse::<usize>()
        .ok()
        .filter(|_| target.len() <= 3 && target.bytes().all(|b| b.is_ascii_digit()));
    let chosen = match n {
        Some(0) => return Err(ClientError::Usage("rewind 0 prompts: nothing to do".into())),
        Some(n) => {
            let mut list = super::prompts::prompts(ctx, dialog.clone())?;
            let Some(dialog) = list.first().map(|c| c.dialog.clone()) else {
                return Err(ClientError::Usage(match &dialog {
                    Some(d) => format!("dialog {d} has no prompts to rewind"),
                    None => "no prompts recorded yet: nothing to rewind (see `ckpt hook install`)"
                        .into(),
                }));
            };
            list.retain(|c| c.dialog == dialog);
            match list.get(n - 1) {
                Some(c) => c.id.to_string(),
                None => {
                    return Err(ClientError::Usage(format!(
                        "dialog {dialog} has {} prompt{}; cannot rewind {n}",
                        list.len(),
                        if list.len() == 1 { "" } else { "s" }
                    )))
                }
            }
        }
        None => target.to_string(),
    };
    let params = ShowParams {
        project: ctx.project(),
        id: chosen,
        files: false,
        dialog,
        max_entries: Some(0),
        counts: false,
    };
    let shown = ctx.connect()?.call::<rpc::Show>(&params)?.checkpoint;
    if n.is_none() {
        ctx.say_resolved(target, &shown.id);
    }
    let mut list = super::prompts::prompts(ctx, Some(shown.dialog.clone()))?;
    list.retain(|c| c.dialog == shown.dialog);
    Ok((shown, list))
}

/// Where `c` (a prompt of `prompts`, newest first, or a step of one of their turns: just after
/// its tool's result) is in its agent's session.
fn fork_point_of(ctx: &Ctx, c: &Checkpoint, prompts: &[Checkpoint]) -> Result<Point, CannotFork> {
    let (Kind::Step, Some(TurnField::Of(turn))) = (c.kind, &c.turn) else {
        return point_of(c, prompts);
    };
    let tool = c
        .tool_use_id
        .clone()
        .ok_or_else(|| CannotFork("the agent sent no id for that step's tool call".into()))?;
    let params = ShowParams {
        project: ctx.project(),
        id: turn.to_string(),
        files: false,
        dialog: None,
        max_entries: Some(0),
        counts: false,
    };
    let prompt = ctx
        .connect()
        .and_then(|mut conn| conn.call::<rpc::Show>(&params))
        .map_err(|e| CannotFork(format!("the step's prompt cannot be read: {e}")))?
        .checkpoint;
    let mut point = point_of(&prompt, prompts)?;
    point.after_tool = Some(tool);
    Ok(point)
}

/// Where `c` (a prompt of `prompts`, newest first) is in its agent's session.
pub fn point_of(c: &Checkpoint, prompts: &[Checkpoint]) -> Result<Point, CannotFork> {
    if c.kind != Kind::Message {
        return Err(CannotFork(format!(
            "{} is a {} checkpoint, not a prompt",
            c.id.short(),
            c.kind
        )));
    }
    let older = prompts
        .iter()
        .skip_while(|p| p.id != c.id)
        .skip(1)
        .filter(|p| p.label == c.label)
        .count();
    Point::of(Recorded::of(c, older))
}

/// What to take back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Code,
    Conversation,
    /// Both where the conversation can be forked, else the files.
    Both,
}

/// Restores the checkpoint taken when the N-th last prompt arrived (the files as they were
/// before the agent acted on it and on every later prompt), and forks the conversation to just
/// before it.
pub fn rewind(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let mode = match (args.code, args.conversation) {
        (true, _) => Mode::Code,
        (_, true) => Mode::Conversation,
        _ => Mode::Both,
    };
    let (target, prompts) = select(
        ctx,
        args.to.as_deref().unwrap_or(&args.target),
        args.dialog.clone(),
    )?;
    let fork_point = match mode {
        Mode::Code => None,
        _ => Some(fork_point_of(ctx, &target, &prompts)),
    };
    let planned = fork_point.as_ref().map(|p| {
        p.clone()
            .and_then(|p| conversation::plan(&p, &Place::Beside))
    });
    let fork_point = fork_point.and_then(Result::ok);
    let (fork, mut skipped_conversation) = match planned {
        None => (None, None),
        Some(Ok(fork)) => (Some(fork), None),
        Some(Err(why)) if mode == Mode::Conversation => return Err(ClientError::Other(why.0)),
        Some(Err(why)) => {
            if !ctx.out.json {
                eprintln!("the conversation is not rewound, only the files: {why}");
            }
            (None, Some(why.0))
        }
    };
    if !ctx.out.json {
        match target.kind {
            Kind::Step => eprintln!(
                "rewinding to just after step {} ({})",
                target.step.unwrap_or(0),
                one_line(&target.label, 100)
            ),
            _ => eprintln!("rewinding past: {}", one_line(&target.label, 100)),
        }
    }
    let Confirm { yes, dry_run } = args.confirm;
    let files = match mode {
        Mode::Conversation => None,
        _ => match rewind_files(ctx, &target, args.all, yes, dry_run)? {
            Some(files) => Some(files),
            None => return Ok(1),
        },
    };
    // The files are rewound by now: a fork that cannot be written is reported beside the
    // restore (and its undo), not instead of it.
    let forked = match fork {
        Some(fork) if dry_run => Some(would_fork(fork)),
        Some(fork) => match fork.write() {
            Ok(forked) => Some(forked),
            Err(why) if mode == Mode::Conversation => return Err(ClientError::Other(why.0)),
            Err(why) => {
                if !ctx.out.json {
                    eprintln!("the files were rewound, the conversation was not: {why}");
                }
                skipped_conversation = Some(why.0);
                None
            }
        },
        None => None,
    };
    // The restore's checkpoint names the fork, so its prompts are shown as a fork later.
    if let (Some(f), Some(r), Some(point)) = (&forked, &files, fork_point.as_ref()) {
        let noted = (!dry_run)
            .then(|| conversation::fork_note(f, &point.session))
            .flatten()
            .zip(r.checkpoint());
        if let Some((text, on)) = noted {
            let params = NoteParams {
                project: ctx.project(),
                id: on.to_string(),
                text,
            };
            if let Err(e) = ctx.connect().and_then(|mut c| c.call::<rpc::Note>(&params)) {
                tracing::debug!(error = %e, "the fork could not be noted");
            }
        }
    }
    let status = files.as_ref().map_or(0, Files::status);
    if ctx.out.json {
        let mut value = match &files {
            Some(Files::Restored(r)) => serde_json::to_value(r),
            Some(Files::Reverted(r)) => serde_json::to_value(r),
            None => Ok(serde_json::json!({})),
        }
        .map_err(|e| ClientError::Other(e.to_string()))?;
        if let Some(files) = &files {
            value["files"] = files.how().into();
        }
        value["conversation"] = serde_json::to_value(&forked).unwrap_or_default();
        if let Some(why) = skipped_conversation {
            value["conversation_skipped"] = why.into();
        }
        ctx.out.json(&value);
        return Ok(status);
    }
    match &files {
        Some(Files::Restored(r)) => render(ctx, r),
        Some(Files::Reverted(r)) => {
            super::revert::say(r);
            outln!("`ckpt rewind --all` puts the whole tree back as it was at that prompt");
        }
        None => {}
    }
    if let Some(f) = &forked {
        match target.kind {
            Kind::Step => say_forked_at_step(f, dry_run),
            _ => say_forked(f, dry_run),
        }
    }
    Ok(status)
}

/// How a rewind put the files back.
enum Files {
    /// The whole tree, as it was at the prompt.
    Restored(Restored),
    /// Only this session's turns since the prompt: others changed files too.
    Reverted(Reverted),
}

impl Files {
    fn checkpoint(&self) -> Option<crate::model::CheckpointId> {
        match self {
            Files::Restored(r) => r.restore_checkpoint,
            Files::Reverted(r) => r.revert_checkpoint,
        }
    }

    fn status(&self) -> i32 {
        match self {
            Files::Restored(r) => skipped_status(&r.skipped),
            Files::Reverted(r) => super::revert::status(r),
        }
    }

    fn how(&self) -> &'static str {
        match self {
            Files::Restored(_) => "restored",
            Files::Reverted(_) => "reverted",
        }
    }
}

/// Puts the files back as they were at `target`. Where other sessions or the user changed
/// files since (and `all` is not asked for), that is this session's turns since `target`
/// taken back ([`super::revert`]), naming what it left alone; otherwise (one session, no edits
/// of anyone else, or a store that cannot tell) the whole tree, as a restore. None: the person
/// said no.
fn rewind_files(
    ctx: &Ctx,
    target: &Checkpoint,
    all: bool,
    yes: bool,
    dry_run: bool,
) -> Result<Option<Files>, ClientError> {
    let id = target.id.to_string();
    if !all {
        let params = |dry_run: bool| RevertParams {
            project: ctx.project(),
            id: id.clone(),
            paths: vec![],
            dry_run,
            force: false,
            dialog: None,
            later: true,
        };
        match ctx.connect()?.call::<rpc::Revert>(&params(true)) {
            Ok(plan) if plan.left_alone.is_empty() && plan.refused.is_empty() => {}
            Ok(plan) => {
                if !ctx.out.json {
                    eprintln!(
                        "files changed since that prompt by others (another session, you, a \
                         restore) are kept: only this session's turns are taken back"
                    );
                }
                let reverted = super::revert::run(ctx, yes, dry_run, Some(plan), params)?;
                return Ok(reverted.map(Files::Reverted));
            }
            Err(e) => {
                if !ctx.out.json {
                    eprintln!(
                        "rewinding the whole tree: who changed what since is not known ({e})"
                    );
                }
            }
        }
    }
    let params = |dry_run: bool| RestoreParams {
        project: ctx.project(),
        id: id.clone(),
        paths: vec![],
        dry_run,
        dialog: None,
        by: None,
    };
    let restored = confirmed::<rpc::Restore>(ctx, yes, dry_run, "rewind", params)?;
    Ok(restored.map(Files::Restored))
}

/// What a dry run reports of the fork it would write.
fn would_fork(fork: Fork) -> Forked {
    Forked {
        agent: fork.agent.name(),
        session_id: None,
        resume: vec![],
        prompt: fork.prompt,
        path: None,
    }
}

/// Tells a person where the conversation forked at a step is and how to go on with it.
fn say_forked_at_step(f: &Forked, dry_run: bool) {
    let place = "just after that tool's result";
    match (&f.session_id, dry_run) {
        (_, true) => outln!("would fork the {} conversation to {place}", f.agent),
        (Some(id), false) => {
            outln!("conversation forked to {place}: {} session {id}", f.agent);
            outln!("continue it with:  {}", f.resume.join(" "));
        }
        (None, false) => outln!("no conversation to fork"),
    }
}

/// Tells a person where the forked conversation is and how to go on with it.
pub fn say_forked(f: &Forked, dry_run: bool) {
    if dry_run {
        outln!(
            "would fork the {} conversation to just before that prompt",
            f.agent
        );
        return;
    }
    match &f.session_id {
        Some(id) => {
            outln!(
                "conversation forked to just before that prompt: {} session {id}",
                f.agent
            );
            outln!("continue it with:  {}", f.resume.join(" "));
        }
        None => outln!(
            "no conversation came before that prompt: start a new one with:  {}",
            f.resume.join(" ")
        ),
    }
    outln!("the prompt, to edit and send again:");
    for line in crate::client::output::printable_lines(&f.prompt) {
        outln!("    {line}");
    }
}
