//! `ckpt checkpoint`: record the project now.

use serde_json::Value;

use super::Ctx;
use crate::client::output::{counts, print_skipped};
use crate::client::ClientError;
use crate::model::Kind;
use crate::protocol::methods::CheckpointParams;
use crate::protocol::rpc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The label, usually the user's message.
    #[arg(short = 'm', long = "message", value_name = "TEXT")]
    pub message: Option<String>,
    /// The dialog (agent session) to record on (default: `default`).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// The message's id: a checkpoint with the same id in the dialog is not recorded twice.
    #[arg(long, value_name = "M")]
    pub message_id: Option<String>,
    /// JSON to keep with the checkpoint: a file, or - for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub meta: Option<String>,
    /// Record it as a user's prompt (kind `message`, what `ckpt rewind` and `ckpt log`
    /// count), as a hook does; implied by --message-id. Without it the checkpoint is `manual`.
    #[arg(long)]
    pub prompt: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let params = CheckpointParams {
        project: ctx.project(),
        label: args.message,
        dialog: args.dialog,
        kind: Some(match args.prompt || args.message_id.is_some() {
            true => Kind::Message.to_string(),
            false => Kind::Manual.to_string(),
        }),
        message_id: args.message_id,
        meta: args.meta.map(|m| read_meta(&m)).transpose()?,
    };
    let mut conn = ctx.connect_for_checkpoint()?;
    let c = ctx.with_progress(|| conn.call::<rpc::Checkpoint>(&params))?;
    if !ctx.out.json_or_quiet(&c) {
        outln!(
            "checkpoint {}  #{} {}  {} files ({})",
            c.id.short(),
            c.seq,
            c.dialog,
            c.files,
            counts(&c)
        );
        print_skipped(&c.skipped);
    }
    Ok(0)
}

/// The JSON kept with a checkpoint: a file, or `-` for stdin.
fn read_meta(source: &str) -> Result<Value, ClientError> {
    let text = if source == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| ClientError::Usage(format!("cannot read metadata from stdin: {e}")))?;
        s
    } else {
        std::fs::read_to_string(source)
            .map_err(|e| ClientError::Usage(format!("cannot read metadata file {source}: {e}")))?
    };
    serde_json::from_str(&text)
        .map_err(|e| ClientError::Usage(format!("metadata is not valid JSON: {e}")))
}
