//! `ckpt show`: one checkpoint, its changes against its parent, and its skipped files.

use super::Ctx;
use crate::client::output::{
    self, counts, one_line, one_path, printable, printable_lines, relative_time, short,
};
use crate::client::ClientError;
use crate::protocol::methods::ShowParams;
use crate::protocol::results::ChangeStatus;
use crate::protocol::rpc;
use crate::protocol::turns::By;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An id or unique prefix, a tag, `@`/`latest`, `@~N` or `#SEQ`.
    pub id: String,
    /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// Also list every file in the checkpoint.
    #[arg(long)]
    pub files: bool,
    /// At most N changed files (and N files with --files); 0: every one.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub limit: usize,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let params = ShowParams {
        project: ctx.project(),
        id: args.id.clone(),
        files: args.files,
        dialog: args.dialog,
        max_entries: Some(match args.limit {
            0 => usize::MAX,
            n => n,
        }),
        counts: true,
    };
    let shown = ctx.connect()?.call::<rpc::Show>(&params)?;
    ctx.say_resolved(&args.id, &shown.checkpoint.id);
    if ctx.out.json(&shown) {
        return Ok(0);
    }
    output::page(&ctx.out);
    let c = &shown.checkpoint;
    outln!("checkpoint {}", c.id);
    outln!("dialog     {}  #{}  {}", c.dialog, c.seq, c.kind);
    if let Some(o) = &c.origin {
        outln!(
            "from       {} (fetched from remote {})",
            printable(&o.who),
            o.remote
        );
    }
    outln!(
        "created    {} ({})",
        c.created_at,
        relative_time(&c.created_at)
    );
    if let Some(m) = &c.message_id {
        outln!("message    {}", printable(m));
    }
    if let Some(i) = &c.imported {
        let origin = match &i.dialog {
            Some(d) => format!("{} checkpoint of dialog {d}", i.kind),
            None => i.kind.clone(),
        };
        outln!(
            "imported   from {} ({origin}, {}, made {})",
            short(&i.from),
            printable(i.ref_name.as_deref().unwrap_or("")),
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
        for line in printable_lines(&c.label) {
            outln!("    {line}");
        }
    }
    if shown.parent_pruned {
        outln!(
            "changes    not listed: retention pruned the checkpoint before it (counts as recorded)"
        );
    }
    if !shown.changes.is_empty() {
        outln!("changes");
        for ch in &shown.changes {
            let lines = match ch.binary {
                true => "binary".to_string(),
                false => format!("+{} -{}", ch.lines_added, ch.lines_removed),
            };
            outln!(
                "  {}  {}  {lines}",
                status_letter(ch.status),
                one_path(&ch.path)
            );
        }
        let left = shown
            .changes_total
            .saturating_sub(shown.changes.len() as u64);
        if left > 0 {
            let parent = c.parent.map(|p| p.short().to_string()).unwrap_or_default();
            outln!(
                "  … and {left} more (--limit 0 shows them all; or `ckpt diff {parent} {} --name-only`)",
                c.id.short()
            );
        }
    }
    if let Some(turn) = &shown.turn_changes {
        outln!("its turn changed (exactly: not what other sessions or you did meanwhile)");
        if turn.files.is_empty() && turn.ambiguous.is_empty() {
            outln!("  nothing");
        }
        for f in &turn.files {
            outln!("  {}  {}", f.change, one_path(&f.path));
        }
        for path in &turn.ambiguous {
            outln!(
                "  ?  {}  (ambiguous: another turn ran at the same time)",
                one_path(path)
            );
        }
    }
    if shown.changed_by.iter().any(|ch| ch.by != By::User) {
        outln!("who changed what since the checkpoint before it");
        for ch in &shown.changed_by {
            let turns: Vec<String> = ch.turns.iter().map(|t| t.short()).collect();
            let who = match ch.by {
                By::User => "you (no agent's turn was running)".to_string(),
                By::Turn => format!("the turn of {}", turns.join("")),
                By::Ambiguous => format!("one of the turns of {} (ambiguous)", turns.join(", ")),
            };
            outln!("  {}  {}  {who}", ch.change, one_path(&ch.path));
        }
    }
    if !c.skipped.is_empty() {
        outln!("skipped");
        for skip in &c.skipped {
            outln!("  {}: {}", one_path(&skip.path), skip.reason);
        }
    }
    if !c.tags.is_empty() {
        outln!("tags       {}", printable(&c.tags.join(", ")));
    }
    if let Some(notes) = &c.notes {
        outln!("notes");
        for line in printable_lines(notes) {
            outln!("    {line}");
        }
    }
    if let Some(meta) = &c.meta {
        outln!("meta       {}", one_line(&meta.to_string(), 100));
    }
    for f in shown.file_list.iter().flatten() {
        outln!("  {} {} {}", f.mode, short(&f.blob), one_path(&f.path));
    }
    if let (Some(listed), Some(total)) = (&shown.file_list, shown.file_list_total) {
        if total > listed.len() as u64 {
            outln!(
                "  … and {} more files (--limit 0 lists them all)",
                total - listed.len() as u64
            );
        }
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
