//! `ckpt diff`: from a checkpoint to another, or to the working tree.

use std::path::PathBuf;

use super::{wire_all, Ctx};
use crate::client::output::{self, one_path, plural};
use crate::client::ClientError;
use crate::protocol::methods::DiffParams;
use crate::protocol::results::FileChange;
use crate::protocol::rpc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An id or unique prefix, a tag, `@`/`latest`, `@~N` or `#SEQ` (default: your latest
    /// prompt, so `ckpt diff` is what the agent changed during this turn).
    pub id: Option<String>,
    /// Diff to this checkpoint instead of the working tree.
    pub id2: Option<String>,
    /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// Only a summary per file, with bars (like `git diff --stat`).
    #[arg(long)]
    pub stat: bool,
    /// Only the names of the changed files.
    #[arg(long)]
    pub name_only: bool,
    /// Only these paths (files or folders), after `--`.
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    // No checkpoint named: the latest prompt's (what its turn changed so far), whatever was
    // recorded after it (a manual checkpoint, a restore).
    let (from, named) = match &args.id {
        Some(id) => (id.clone(), true),
        None => match super::prompts::prompts(ctx, args.dialog.clone())?.first() {
            Some(p) => {
                if !ctx.out.json && !ctx.out.quiet {
                    eprintln!(
                        "since your latest prompt ({}): {}",
                        p.id.short(),
                        output::one_line(&p.label, 80)
                    );
                }
                (p.id.to_string(), false)
            }
            None => ("@".to_string(), true),
        },
    };
    let params = DiffParams {
        project: ctx.project(),
        from: from.clone(),
        to: args.id2.clone(),
        paths: wire_all(&ctx.base, &args.paths),
        patch: !args.stat && !args.name_only,
        counts: !args.name_only,
        dialog: args.dialog,
        max_files: None,
        offset: 0,
        max_bytes: None,
    };
    let d = ctx.connect()?.call::<rpc::Diff>(&params)?;
    if named {
        ctx.say_resolved(&from, &d.from);
    }
    if let (Some(name), Some(to)) = (&args.id2, &d.to) {
        ctx.say_resolved(name, to);
    }
    if ctx.out.json(&d) {
        return Ok(0);
    }
    let files = &d.diff.files;
    if args.name_only {
        for f in files {
            outln!("{}", one_path(&f.path));
        }
    } else if args.stat {
        stat(files);
    } else {
        let patch = d.diff.patch.as_deref().unwrap_or("");
        if !patch.is_empty() {
            output::page(&ctx.out);
        }
        match output::colour(&ctx.out) {
            true => out!("{}", output::coloured_patch(patch)),
            false => out!("{patch}"),
        }
    }
    Ok(0)
}

/// `git diff --stat`: bars scale to the largest change, within 40 columns.
fn stat(files: &[FileChange]) {
    let width = files
        .iter()
        .map(|f| one_path(&f.path).chars().count())
        .max()
        .unwrap_or(0);
    let largest = files
        .iter()
        .map(|f| f.lines_added + f.lines_removed)
        .max()
        .unwrap_or(0)
        .max(1);
    let scale = |x: u64| -> usize {
        if largest <= 40 {
            x as usize
        } else {
            ((x * 40).div_ceil(largest)) as usize
        }
    };
    let (mut plus, mut minus) = (0, 0);
    for f in files {
        let (a, r) = (f.lines_added, f.lines_removed);
        plus += a;
        minus += r;
        let bar = if f.binary {
            "Bin".to_string()
        } else {
            format!(
                "{:>5} {}{}",
                a + r,
                "+".repeat(scale(a)),
                "-".repeat(scale(r))
            )
        };
        outln!(" {:<width$} | {bar}", one_path(&f.path));
    }
    outln!(
        " {} changed, {}(+), {}(-)",
        plural(files.len(), "file", "files"),
        plural(plus, "insertion", "insertions"),
        plural(minus, "deletion", "deletions")
    );
}
