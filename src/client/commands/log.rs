//! `ckpt log`: the prompts, newest first, as a person reads a conversation: when, which session,
//! what the agent's turn on each changed, whether its conversation can be forked, and the
//! prompts the hook could not record among them.

use std::collections::HashMap;

use serde::Serialize;

use super::{wire_all, Ctx};
use crate::client::agents::conversation::{self, Point, Recorded};
use crate::client::output::{self, one_line, relative_time};
use crate::client::unrecorded::{self, Unrecorded};
use crate::client::ClientError;
use crate::filter::git_common_dir;
use crate::protocol::methods::LogParams;
use crate::protocol::results::Turn;
use crate::protocol::rpc;

/// Whether a prompt's conversation can be forked (`ckpt rewind` takes it back too).
#[derive(Debug, Serialize)]
struct Conversation {
    agent: Option<String>,
    can_fork: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

/// A prompt as `ckpt log --json` shows it.
#[derive(Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    turn: &'a Turn,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation: Option<Conversation>,
    /// With `--all-worktrees`: the worktree (project root) it was recorded in.
    #[serde(skip_serializing_if = "Option::is_none")]
    worktree: Option<std::path::PathBuf>,
}

/// For each turn (newest first), whether its conversation can be forked; none for a prompt no
/// agent's hook recorded. Each session file is read once.
fn conversations(turns: &[Turn]) -> Vec<Option<Conversation>> {
    let mut sessions = HashMap::new();
    turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let c = &t.prompt;
            let meta = c.meta.as_ref()?;
            let agent = conversation::agent_of(meta).map(|a| a.name().to_string());
            let occurrence = turns[i + 1..]
                .iter()
                .filter(|o| o.prompt.dialog == c.dialog && o.prompt.label == c.label)
                .count();
            let point = Point::of(Recorded::of(c, occurrence));
            let checked = point.and_then(|p| p.check(&mut sessions));
            Some(Conversation {
                agent,
                can_fork: checked.is_ok(),
                why: checked.err().map(|e| e.0),
            })
        })
        .collect()
}

/// The prompts as a person reads a conversation: newest first, with when, where and what the
/// agent's turn on each changed; the prompts the hook could not record among them.
pub fn log(
    ctx: &Ctx,
    dialog: Option<String>,
    limit: usize,
    paths: Vec<std::path::PathBuf>,
    all_worktrees: bool,
    steps: bool,
) -> Result<i32, ClientError> {
    let mut conn = ctx.connect()?;
    // Each project asked and the worktree it is, when there are several.
    let mut asked: Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)> =
        vec![(ctx.project(), wire_all(&ctx.base, &paths))];
    if all_worktrees {
        asked = worktrees(ctx, &mut conn, &paths)?;
    }
    let mut turns = Vec::new();
    let mut worktree_of = HashMap::new();
    for (project, paths) in &asked {
        let params = LogParams {
            project: project.clone(),
            dialog: dialog.clone(),
            limit: Some(limit),
            meta: true,
            paths: paths.clone(),
            steps,
        };
        for t in conn.call::<rpc::Log>(&params)? {
            if all_worktrees {
                worktree_of.insert(t.prompt.id, project.clone());
            }
            turns.push(t);
        }
    }
    if asked.len() > 1 {
        turns.sort_by(|a, b| b.prompt.created_at.cmp(&a.prompt.created_at));
        turns.truncate(limit);
    }
    let forks = conversations(&turns);
    for t in &mut turns {
        t.prompt.meta = None;
    }
    // Not recorded: only those of this folder's agents (and, with --dialog, of that session).
    let mut missed: Vec<Unrecorded> = unrecorded::read(&ctx.paths.data_dir)
        .into_iter()
        .filter(|u| u.concerns(&ctx.base))
        .filter(|u| dialog.is_none() || u.dialog.as_deref() == dialog.as_deref())
        .collect();
    missed.reverse();
    missed.truncate(limit);
    if ctx.out.json {
        let prompts: Vec<Shown> = turns
            .iter()
            .zip(forks)
            .map(|(turn, conversation)| Shown {
                worktree: worktree_of.get(&turn.prompt.id).cloned(),
                turn,
                conversation,
            })
            .collect();
        ctx.out
            .json(&serde_json::json!({ "prompts": prompts, "unrecorded": missed }));
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
    let mut turns = turns.iter().zip(&forks).peekable();
    let mut missed = missed.iter().peekable();
    loop {
        let take_missed = match (turns.peek(), missed.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some((t, _)), Some(u)) => at(&u.at) > at(&t.prompt.created_at),
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
        let (t, fork) = turns.next().expect("peeked");
        let c = &t.prompt;
        let so_far = if t.turn.until.is_none() {
            " so far"
        } else {
            ""
        };
        let conversation = match fork {
            Some(f) if f.can_fork => "  conversation: can be rewound".to_string(),
            Some(f) => format!(
                "  conversation: code only ({})",
                one_line(f.why.as_deref().unwrap_or(""), 120)
            ),
            None => String::new(),
        };
        let place = match worktree_of.get(&c.id).and_then(|w| w.file_name()) {
            Some(name) => format!("[{}] ", name.to_string_lossy()),
            None => String::new(),
        };
        outln!(
            "{}  {}  {place}{} #{}  its turn: +{} ~{} -{}{so_far}{conversation}",
            c.id.short(),
            relative_time(&c.created_at),
            c.dialog,
            c.seq,
            t.turn.added,
            t.turn.modified,
            t.turn.deleted
        );
        print_prompt(&c.label);
        for s in &t.steps {
            let what = match (&s.step, &s.tool) {
                (Some(n), Some(tool)) => format!("step {n}  {tool}"),
                (Some(n), None) => format!("step {n}"),
                (None, _) => "turn ended".to_string(),
            };
            let files = match s.touched.len() {
                0 => String::new(),
                _ => format!("  {}", one_line(&s.touched.join(" "), 120)),
            };
            outln!(
                "    {}  {}  {what}{files}  +{} ~{} -{}",
                s.id.short(),
                relative_time(&s.created_at),
                s.added,
                s.modified,
                s.deleted
            );
        }
    }
    Ok(0)
}

/// A prompt's first three lines, indented.
fn print_prompt(text: &str) {
    for line in crate::client::output::printable_lines(text).take(3) {
        outln!("    {line}");
    }
    if text.lines().count() > 3 {
        outln!("    …");
    }
}

/// The registered projects that are worktrees of the current project's git repository (the
/// current one first), each with the paths asked about made relative to it.
fn worktrees(
    ctx: &Ctx,
    conn: &mut crate::client::connection::Connection,
    paths: &[std::path::PathBuf],
) -> Result<Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)>, ClientError> {
    let projects = conn.call::<rpc::Projects>(&crate::protocol::methods::NoParams {})?;
    let current = projects
        .iter()
        .map(|p| p.root.clone())
        .filter(|r| ctx.base.starts_with(r))
        .max_by_key(|r| r.components().count())
        .ok_or_else(|| {
            ClientError::Usage(format!("{} is in no watched project", ctx.base.display()))
        })?;
    let common = git_common_dir(&current).ok_or_else(|| {
        ClientError::Usage(format!(
            "{} is not a git worktree (--all-worktrees joins the worktrees of one repository)",
            current.display()
        ))
    })?;
    // Paths are asked of each worktree relative to its root.
    let relative: Vec<std::path::PathBuf> = wire_all(&ctx.base, paths)
        .into_iter()
        .map(|p| {
            p.strip_prefix(&current)
                .map(|r| r.to_path_buf())
                .unwrap_or(p)
        })
        .collect();
    let mut out = vec![(current.clone(), relative.clone())];
    for p in projects {
        if p.root != current && p.available && git_common_dir(&p.root).as_ref() == Some(&common) {
            out.push((p.root, relative.clone()));
        }
    }
    Ok(out)
}
