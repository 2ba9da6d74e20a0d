//! `ckpt show`: one checkpoint, its changes against its parent, and its skipped files.

use super::Ctx;
use crate::client::output::{self, counts, one_line, one_path, relative_time, short};
use crate::client::ClientError;
use crate::protocol::methods::{rpc, ShowParams};
use crate::protocol::results::ChangeStatus;

pub fn run(ctx: &Ctx, id: String, dialog: Option<String>, files: bool) -> Result<i32, ClientError> {
    let params = ShowParams {
        project: ctx.project(),
        id: id.clone(),
        files,
        dialog,
    };
    let shown = ctx.connect()?.call::<rpc::Show>(&params)?;
    ctx.say_resolved(&id, &shown.checkpoint.id);
    if ctx.out.json(&shown) {
        return Ok(0);
    }
    output::page(&ctx.out);
    let c = &shown.checkpoint;
    outln!("checkpoint {}", c.id);
    outln!("dialog     {}  #{}  {}", c.dialog, c.seq, c.kind);
    if let Some(o) = &c.origin {
        outln!("from       {} (fetched from remote {})", o.who, o.remote);
    }
    outln!(
        "created    {} ({})",
        c.created_at,
        relative_time(&c.created_at)
    );
    if let Some(m) = &c.message_id {
        outln!("message    {m}");
    }
    if let Some(i) = &c.imported {
        let origin = match &i.dialog {
            Some(d) => format!("{} checkpoint of dialog {d}", i.kind),
            None => i.kind.clone(),
        };
        outln!(
            "imported   from {} ({origin}, {}, made {})",
            short(&i.from),
            i.ref_name.as_deref().unwrap_or(""),
            i.created_at
        );
    }
    let parent = c
        .parent
        .map(|p| format!(" against {}", p.short()))
        .unwrap_or_default();
    outln!("files      {} ({}{parent})", c.files, counts(c));
    if !c.label.is_empty() {
        outln!("label");
        for line in c.label.lines() {
            outln!("    {line}");
        }
    }
    if !shown.changes.is_empty() {
        outln!("changes");
        for ch in &shown.changes {
            outln!("  {}  {}", status_letter(ch.status), one_path(&ch.path));
        }
    }
    if !c.skipped.is_empty() {
        outln!("skipped");
        for skip in &c.skipped {
            outln!("  {}: {}", one_path(&skip.path), skip.reason);
        }
    }
    if !c.tags.is_empty() {
        outln!("tags       {}", c.tags.join(", "));
    }
    if let Some(notes) = &c.notes {
        outln!("notes");
        for line in notes.lines() {
            outln!("    {line}");
        }
    }
    if let Some(meta) = &c.meta {
        outln!("meta       {}", one_line(&meta.to_string(), 100));
    }
    for f in shown.file_list.iter().flatten() {
        outln!("  {} {} {}", f.mode, short(&f.blob), one_path(&f.path));
    }
    Ok(0)
}

/// git's status letters.
pub fn status_letter(status: ChangeStatus) -> &'static str {
    match status {
        ChangeStatus::Added => "A",
        ChangeStatus::Deleted => "D",
        ChangeStatus::Modified => "M",
        ChangeStatus::ModeChanged => "X",
        ChangeStatus::TypeChanged => "T",
    }
}
