//! `ckpt list`: the timeline as a table, or every dialog and session as a tree (`--graph`).

use super::Ctx;
use crate::client::output::{self, one_line, relative_time, table, what_it_did};
use crate::client::ClientError;
use crate::model::Kind;
use crate::protocol::methods::ListParams;
use crate::protocol::results::Checkpoint;
use crate::protocol::rpc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this dialog.
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// Show at most N checkpoints.
    #[arg(short = 'n', long, value_name = "N")]
    pub limit: Option<usize>,
    /// Also show approved and abandoned sessions.
    #[arg(long)]
    pub all_sessions: bool,
    /// Only checkpoints whose label, notes, tags or message id contain TEXT.
    #[arg(long, value_name = "TEXT")]
    pub grep: Option<String>,
    /// Draw every dialog and session (approved, abandoned, active) as a tree.
    #[arg(long)]
    pub graph: bool,
    /// Others' checkpoints fetched from remote NAME (`ckpt fetch`) instead of your own.
    #[arg(long, value_name = "NAME", conflicts_with = "graph")]
    pub remote: Option<String>,
    /// Your checkpoints and everyone's fetched ones, newest first, with who made each.
    #[arg(long, conflicts_with_all = ["graph", "remote"])]
    pub all: bool,
    /// Also each turn's steps (after each tool call: the tool and the files it named) and ends.
    #[arg(long)]
    pub steps: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let own = args.remote.is_none();
    let params = ListParams {
        project: ctx.project(),
        dialog: args.dialog,
        limit: args.limit,
        all_sessions: args.all_sessions || args.graph,
        grep: args.grep,
        remote: args.remote,
        all: args.all,
        // A prompt's row shows what its turn did, as `ckpt log` counts it.
        turns: own,
        steps: args.steps,
    };
    let list = ctx.connect()?.call::<rpc::List>(&params)?;
    if ctx.out.json(&list) {
        return Ok(0);
    }
    output::page(&ctx.out);
    if args.graph {
        graph(&list);
    } else {
        rows(&list);
    }
    Ok(0)
}

fn labelled(c: &Checkpoint, max: usize) -> String {
    let label = one_line(&c.label, max);
    if c.tags.is_empty() {
        label
    } else {
        format!("[{}] {label}", c.tags.join(","))
    }
}

fn rows(list: &[Checkpoint]) {
    if list.is_empty() {
        outln!("no checkpoints yet (record one with `ckpt checkpoint -m TEXT`)");
        return;
    }
    // Others' checkpoints (fetched from a remote) say whose they are.
    let whose = list.iter().any(|c| c.origin.is_some());
    let mut header = vec!["ID"];
    if whose {
        header.push("WHO");
    }
    header.extend([
        "SEQ", "DIALOG", "SESSION", "KIND", "WHEN", "CHANGES", "LABEL",
    ]);
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for c in list {
        let mut changes = what_it_did(c);
        if !c.skipped.is_empty() {
            changes.push_str(&format!(" !{}", c.skipped.len()));
        }
        let mut row = vec![c.id.short()];
        if whose {
            row.push(match &c.origin {
                Some(o) => format!(
                    "{} ({})",
                    crate::client::output::printable(&o.who),
                    o.remote
                ),
                None => "you".into(),
            });
        }
        rows.push(row);
        rows.last_mut().expect("just pushed").extend([
            format!("#{}", c.seq),
            c.dialog.clone(),
            c.session.to_string(),
            c.kind.to_string(),
            relative_time(&c.created_at),
            changes,
            labelled(c, 60),
        ]);
    }
    table(&rows);
}

/// Draws the timeline of every dialog, newest first, with its sessions:
///
/// ```text
/// default  session 2 active
/// | o 3f2a9c1b7d4e  #5 message   2m ago  +1 ~0 -0  Add a CLI
/// |-- session 1: approved
/// | A 9a1b2c3d4e5f  #4 approved  5m ago  +0 ~0 -0  Feature complete
/// ```
fn graph(checkpoints: &[Checkpoint]) {
    if checkpoints.is_empty() {
        outln!("no checkpoints yet");
        return;
    }
    let mut dialogs: Vec<&str> = Vec::new();
    for c in checkpoints {
        if !dialogs.contains(&c.dialog.as_str()) {
            dialogs.push(&c.dialog);
        }
    }
    for (i, dialog) in dialogs.iter().enumerate() {
        let chain: Vec<&Checkpoint> = checkpoints.iter().filter(|c| c.dialog == *dialog).collect();
        let head = chain[0];
        let active = head.session + u64::from(head.kind.ends_session());
        if i > 0 {
            outln!("|");
        }
        let origin = chain
            .last()
            .filter(|c| c.label.starts_with("forked from "))
            .map(|c| format!("  ({})", crate::client::output::one_line(&c.label, 100)))
            .or_else(|| conversation_fork_of(checkpoints, dialog))
            .unwrap_or_default();
        outln!("{dialog}  session {active} active{origin}");
        let mut session = active;
        for c in chain {
            if c.session != session {
                let fate = match c.kind {
                    Kind::Approved => "approved",
                    Kind::Reset => "abandoned (reset)",
                    _ => "ended",
                };
                outln!("|-- session {}: {fate}", c.session);
                session = c.session;
            }
            let mark = match c.kind {
                Kind::Initial => "I",
                Kind::Approved => "A",
                Kind::Reset => "X",
                Kind::Restore => "R",
                Kind::PreRestore => "U",
                _ => "o",
            };
            let tags = if c.tags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", c.tags.join(","))
            };
            outln!(
                "| {mark} {}  #{:<3} {:<11} {:>7}  {:<11}  {}{tags}",
                c.id.short(),
                c.seq,
                c.kind.as_str(),
                relative_time(&c.created_at),
                what_it_did(c),
                one_line(&c.label, 50)
            );
        }
    }
    outln!("\n(o message, I initial, A approved, X reset, R restore, U undo point)");
}

/// `  (a fork of DIALOG's conversation, rewound past "PROMPT")` when dialog `dialog` is the
/// session a rewind forked (its restore checkpoint's note says so).
fn conversation_fork_of(checkpoints: &[Checkpoint], dialog: &str) -> Option<String> {
    checkpoints.iter().find_map(|c| {
        let notes = c.notes.as_deref()?;
        let (_, from) = notes
            .lines()
            .filter_map(crate::client::agents::conversation::parse_fork_note)
            .find(|(new, _)| *new == dialog)?;
        let past = c
            .restore
            .as_ref()
            .and_then(|r| checkpoints.iter().find(|p| p.id == r.restored_to))
            .map(|p| format!(", rewound past \"{}\"", one_line(&p.label, 60)))
            .unwrap_or_default();
        Some(format!("  (a fork of {from}'s conversation{past})"))
    })
}
