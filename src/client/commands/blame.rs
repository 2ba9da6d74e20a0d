//! `ckpt blame PATH`: for each line of a file as it is now, the prompt whose turn wrote it (as
//! `git blame` names commits): the prompt's checkpoint, when it arrived, and its text.

use std::path::PathBuf;

use super::Ctx;
use crate::client::output::{self, one_line, relative_time};
use crate::client::ClientError;
use crate::protocol::methods::{rpc, BlameParams};
use crate::protocol::results::LineOrigin;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file (relative to the current folder).
    pub path: PathBuf,
    /// The dialog whose checkpoints are walked (default: the newest checkpoint's).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
}

pub fn blame(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let params = BlameParams {
        project: ctx.project(),
        path: ctx.base.join(&args.path),
        dialog: args.dialog,
    };
    let b = ctx.connect()?.call::<rpc::Blame>(&params)?;
    if ctx.out.json(&b) {
        return Ok(0);
    }
    output::page(&ctx.out);
    let width = b.lines.len().to_string().len();
    for l in &b.lines {
        let who = match (l.origin, &l.checkpoint, &l.prompt) {
            (LineOrigin::Prompt, Some(id), Some(prompt)) => format!(
                "{}  {:>8}  {:<32}",
                id.short(),
                l.created_at
                    .as_deref()
                    .map(relative_time)
                    .unwrap_or_default(),
                one_line(prompt, 32)
            ),
            (LineOrigin::BeforeFirstPrompt, ..) => format!("{:<54}", "(before the first prompt)"),
            _ => format!("{:<54}", "(before the first checkpoint)"),
        };
        outln!("{who}  {:>width$}) {}", l.line, l.text);
    }
    Ok(0)
}
