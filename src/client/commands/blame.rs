//! `ckpt blame PATH`: for each line of a file as it is now, the prompt whose turn wrote it (as
//! `git blame` names commits): the prompt's checkpoint, when it arrived, and its text.

use std::path::PathBuf;

use super::Ctx;
use crate::client::output::{self, one_line, relative_time};
use crate::client::ClientError;
use crate::protocol::methods::BlameParams;
use crate::protocol::results::{Blamed, LineOrigin};
use crate::protocol::rpc;
use serde_json::{json, Value};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file (relative to the current folder).
    pub path: PathBuf,
    /// The dialog whose checkpoints are walked (default: the newest checkpoint's).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// Walk back from checkpoint ID instead (any name; also a teammate's, after `ckpt fetch`).
    #[arg(long, value_name = "ID")]
    pub at: Option<String>,
}

/// The width of the column naming who wrote a line: an id, a time and a prompt cut short.
const WHO: usize = 12 + 2 + 8 + 2 + 33;

pub fn blame(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let params = BlameParams {
        project: ctx.project(),
        path: ctx.base.join(&args.path),
        dialog: args.dialog,
        at: args.at,
    };
    let b = ctx.connect()?.call::<rpc::Blame>(&params)?;
    if ctx.out.json {
        ctx.out.json(&expanded(&b));
        return Ok(0);
    }
    output::page(&ctx.out);
    let width = b.lines.len().to_string().len();
    for l in &b.lines {
        let who = match (l.origin, l.prompt.and_then(|i| b.prompts.get(i))) {
            (LineOrigin::Prompt, Some(p)) => format!(
                "{}  {:>8}  {}",
                p.checkpoint.short(),
                relative_time(&p.created_at),
                one_line(&p.label, 32)
            ),
            (LineOrigin::BeforeFirstPrompt, _) => "(before the first prompt)".into(),
            (LineOrigin::User, _) => "(yours: written between agents' turns)".into(),
            _ => "(before the first checkpoint)".into(),
        };
        // One column for who, whatever the prompt's length (it is cut to 32 characters).
        outln!("{who:<WHO$}  {:>width$}) {}", l.line, l.text);
    }
    Ok(0)
}

/// `ckpt blame --json`: each line with its prompt's text, checkpoint, dialog and time.
pub fn expanded(b: &Blamed) -> Value {
    let lines: Vec<Value> = b
        .lines
        .iter()
        .map(|l| {
            let p = l.prompt.and_then(|i| b.prompts.get(i));
            json!({"line": l.line, "text": l.text, "origin": l.origin,
                "prompt": p.map(|p| &p.label), "checkpoint": p.map(|p| p.checkpoint),
                "dialog": p.map(|p| &p.dialog), "created_at": p.map(|p| &p.created_at),
                "first_seen": l.first_seen})
        })
        .collect();
    json!({"path": b.path, "head": b.head, "dialog": b.dialog, "lines": lines})
}
