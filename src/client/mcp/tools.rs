//! The tools `ckpt mcp` offers, each a plain call of the daemon for the project the server was
//! started in, its answer bounded (paged by `cursor`/`offset`): an agent's context is small, and
//! a tool result that floods it is worse than none.
//!
//! Files ckpt never captures (ignored, excluded, the secrets it keeps out by name) cannot appear:
//! every answer is read from checkpoints, or from the working tree as a checkpoint would take it.

use serde_json::{json, Map, Value};

use super::params::{self as p, decode, schema};
use crate::client::commands::Ctx;
use crate::client::ClientError;
use crate::model::Kind;
use crate::protocol::methods::{
    BlameParams, DiffParams, FileAtParams, ListParams, RestoreParams, ShowParams,
};
use crate::protocol::rpc;
use crate::protocol::turns::RevertParams;

/// Who the restore checkpoint names as having asked for a restore through this server.
pub const AGENT: &str = "the agent (ckpt mcp)";

/// The most entries of a list a result holds.
const MAX_ENTRIES: usize = 200;
/// The most bytes of text (a diff, a file) a result holds by default, and at most.
const DEFAULT_BYTES: usize = 20_000;
const MAX_BYTES: usize = p::MAX_BYTES as usize;

/// The tools, as `tools/list` describes them: (name, description, input schema).
pub fn list(allow_restore: bool) -> Vec<(&'static str, &'static str, Map<String, Value>)> {
    let mut tools = vec![
        (
            "list_checkpoints",
            "The project's checkpoints, newest first: each user prompt (kind `message`, label = the prompt) with what its turn changed (`turn`: files added, modified, deleted; `finished: false` for the turn under way), and the other checkpoints (restores, manual ones) with what each changed against the one before. Paged: pass `next_cursor` back as `cursor`.",
            schema::<p::ListCheckpoints>(),
        ),
        (
            "show_checkpoint",
            "One checkpoint: its prompt or label, time, dialog, counts, and the files it changed against the checkpoint before it.",
            schema::<p::ShowCheckpoint>(),
        ),
        (
            "diff",
            "What changed, as a unified diff. With no `from`: what your last finished turn changed (from the user's previous prompt to their latest one), which is what the user means by \"what did you change?\". With `from`: from that checkpoint to `to`, or to the files as they are now (`to` absent); `from: \"@\"` is the checkpoint of the user's latest prompt, so it shows what changed during this turn so far. Optionally only some paths. Paged by `offset` into the diff's text.",
            schema::<p::Diff>(),
        ),
        (
            "blame",
            "For each line of a file as it is now, the user prompt whose turn wrote it (lines not in any checkpoint yet belong to the newest prompt's turn). Paged by `offset` (a line number from 1) and `limit`.",
            schema::<p::Blame>(),
        ),
        (
            "file_at",
            "A file's content as a checkpoint holds it (e.g. before your edit: `@`). Paged by `offset` (bytes).",
            schema::<p::FileAt>(),
        ),
    ];
    if allow_restore {
        tools.push((
            "restore",
            "Brings the project's files back to a checkpoint (all, or some paths). Without `confirm: true` it only returns the plan (what would be written, deleted, skipped) and changes nothing; show the plan to the user and restore only when they agree. A restore can be undone (`ckpt undo`). Only one restore per user prompt.",
            schema::<p::Restore>(),
        ));
        tools.push((
            "revert",
            "Takes back exactly what one turn changed (`id`: that prompt's checkpoint from list_checkpoints), or what it changed after one of its steps, line by line on the files as they are now; every other session's files and the user's edits are left as they are. Without `confirm: true` it only returns the plan (what would be taken back, what would be left and why) and changes nothing; show it to the user and revert only when they agree. Undoable with `ckpt undo`.",
            schema::<p::Revert>(),
        ));
    }
    tools
}

/// Runs tool `name`; its answer as JSON, or why it could not.
/// A checkpoint as `list_checkpoints` lists it, with its own turn for a prompt.
fn list_entry(c: &crate::protocol::results::Checkpoint) -> Value {
    let mut entry = json!({"id": c.id, "kind": c.kind, "label": c.label,
        "dialog": c.dialog, "seq": c.seq, "created_at": c.created_at,
        "added": c.added, "modified": c.modified, "deleted": c.deleted});
    if let Some(t) = c.turn_changes() {
        entry["turn"] = json!({"added": t.added, "modified": t.modified,
            "deleted": t.deleted, "finished": t.until.is_some()});
    }
    entry
}

/// A file change as `show_checkpoint` lists it.
fn change_entry(f: &crate::protocol::results::FileChange) -> Value {
    json!({"path": f.path, "status": f.status,
        "lines_added": f.lines_added, "lines_removed": f.lines_removed})
}

pub fn call(
    ctx: &Ctx,
    allow_restore: bool,
    name: &str,
    args: &Map<String, Value>,
) -> Result<Value, String> {
    let clamp = |n: Option<u64>, default: usize, max: usize| {
        n.map_or(default, |n| (n.min(max as u64)) as usize)
    };
    let paths = |paths: Vec<String>| -> Vec<std::path::PathBuf> {
        paths.iter().map(|p| ctx.base.join(p)).collect()
    };
    let failed = |e: ClientError| e.to_string();
    let mut conn = ctx.connect().map_err(failed)?;
    match name {
        "list_checkpoints" => {
            let a: p::ListCheckpoints = decode(name, args)?;
            let limit = clamp(a.limit, 20, 100).max(1);
            let skip: usize = a.cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
            let params = ListParams {
                project: ctx.project(),
                dialog: a.dialog,
                limit: None,
                all_sessions: true,
                grep: None,
                remote: None,
                all: false,
                turns: true,
                steps: false,
            };
            let mut all = conn.call::<rpc::List>(&params).map_err(failed)?;
            if a.prompts_only == Some(true) {
                all.retain(|c| c.kind == Kind::Message);
            }
            let total = all.len();
            let page: Vec<Value> = all
                .into_iter()
                .skip(skip)
                .take(limit)
                .map(|c| list_entry(&c))
                .collect();
            let next = (skip + page.len() < total).then(|| (skip + page.len()).to_string());
            Ok(json!({"checkpoints": page, "total": total, "next_cursor": next}))
        }
        "show_checkpoint" => {
            let a: p::ShowCheckpoint = decode(name, args)?;
            show_checkpoint(ctx, &mut conn, a.id)
        }
        "diff" => {
            let a: p::Diff = decode(name, args)?;
            let (from, to, turn) = match a.from {
                Some(from) => (from, a.to, None),
                None => last_turn(ctx, &mut conn)?,
            };
            // The daemon makes just this page (it stops once the page is full).
            let params = DiffParams {
                project: ctx.project(),
                from,
                to,
                paths: paths(a.paths),
                patch: true,
                counts: false,
                dialog: None,
                max_files: Some(0),
                offset: a.offset.unwrap_or(0),
                max_bytes: Some(clamp(a.max_bytes, DEFAULT_BYTES, MAX_BYTES).max(1) as u64),
            };
            let d = conn.call::<rpc::Diff>(&params).map_err(failed)?;
            let part = d.diff.patch.unwrap_or_default();
            let next = d.diff.next_offset;
            let mut answer = json!({"from": d.from, "to": d.to, "diff": part,
                "next_offset": next, "truncated": next.is_some()});
            if let Some(turn) = turn {
                answer["turn"] = turn;
            }
            Ok(answer)
        }
        "blame" => {
            let a: p::Blame = decode(name, args)?;
            let params = BlameParams {
                project: ctx.project(),
                path: ctx.base.join(&a.path),
                dialog: None,
                at: None,
            };
            let b = conn.call::<rpc::Blame>(&params).map_err(failed)?;
            let first = clamp(a.offset, 1, usize::MAX).max(1);
            let limit = clamp(a.limit, 200, 2000).max(1);
            let lines: Vec<Value> = b
                .lines
                .iter()
                .skip(first - 1)
                .take(limit)
                .map(|l| {
                    let text: String = l.text.chars().take(500).collect();
                    let p = l.prompt.and_then(|i| b.prompts.get(i));
                    let label = p.map(|p| p.label.chars().take(500).collect::<String>());
                    json!({"line": l.line, "text": text, "origin": l.origin, "prompt": label,
                        "checkpoint": p.map(|p| p.checkpoint),
                        "created_at": p.map(|p| &p.created_at)})
                })
                .collect();
            let next = (first - 1 + lines.len() < b.lines.len()).then(|| first + lines.len());
            Ok(
                json!({"path": b.path, "lines": lines, "next_offset": next, "total_lines": b.lines.len()}),
            )
        }
        "file_at" => {
            let a: p::FileAt = decode(name, args)?;
            let params = FileAtParams {
                project: ctx.project(),
                id: a.id,
                path: ctx.base.join(&a.path),
                dialog: None,
                offset: a.offset.unwrap_or(0),
                max_bytes: Some(clamp(a.max_bytes, DEFAULT_BYTES, MAX_BYTES) as u64),
            };
            let f = conn.call::<rpc::FileAt>(&params).map_err(failed)?;
            let next = f.truncated.then(|| f.offset + f.content.len() as u64);
            Ok(
                json!({"path": f.path, "checkpoint": f.checkpoint, "size": f.size,
                "binary": f.binary, "content": f.content, "next_offset": next}),
            )
        }
        "restore" if allow_restore => {
            let a: p::Restore = decode(name, args)?;
            let confirm = a.confirm == Some(true);
            restore(ctx, &mut conn, &a.id, paths(a.paths), confirm)
        }
        "revert" if allow_restore => {
            let a: p::Revert = decode(name, args)?;
            revert(
                ctx,
                &mut conn,
                a.id,
                paths(a.paths),
                a.force == Some(true),
                a.confirm == Some(true),
            )
        }
        _ => Err(format!("no tool {name}")),
    }
}

/// What "what did you change?" asks about: the last finished turn, from the user's previous
/// prompt to their latest (or, when the latest is the first, this turn so far); and what the
/// answer says it is.
fn last_turn(
    ctx: &Ctx,
    conn: &mut crate::client::connection::Connection,
) -> Result<(String, Option<String>, Option<Value>), String> {
    let params = ListParams {
        project: ctx.project(),
        dialog: None,
        limit: None,
        all_sessions: true,
        grep: None,
        remote: None,
        all: false,
        turns: false,
        steps: false,
    };
    let list = conn.call::<rpc::List>(&params).map_err(|e| e.to_string())?;
    let newest = list
        .iter()
        .find(|c| c.kind == Kind::Message)
        .ok_or("no prompt of the user's is recorded yet: nothing to compare")?;
    let mut prompts = list
        .iter()
        .filter(|c| c.kind == Kind::Message && c.dialog == newest.dialog);
    let (latest, previous) = (prompts.next(), prompts.next());
    Ok(match (latest, previous) {
        (Some(latest), Some(previous)) => (
            previous.id.to_string(),
            Some(latest.id.to_string()),
            Some(
                json!({"what": "your last finished turn", "prompt": previous.label,
                "until_prompt": latest.label}),
            ),
        ),
        (Some(latest), None) => (
            latest.id.to_string(),
            None,
            Some(
                json!({"what": "this turn so far (no turn of this session has finished yet)",
                "prompt": latest.label}),
            ),
        ),
        _ => return Err("no prompt of the user's is recorded yet".into()),
    })
}

/// The `restore` tool: the plan, or with `confirm` the restore, at most once per user prompt.
fn restore(
    ctx: &Ctx,
    conn: &mut crate::client::connection::Connection,
    id: &str,
    paths: Vec<std::path::PathBuf>,
    confirm: bool,
) -> Result<Value, String> {
    if confirm {
        // Never a loop of rewinds: one restore by the agent since the user's last prompt.
        let params = ListParams {
            project: ctx.project(),
            dialog: None,
            limit: Some(100),
            all_sessions: true,
            grep: None,
            remote: None,
            all: false,
            turns: false,
            steps: false,
        };
        let recent = conn.call::<rpc::List>(&params).map_err(|e| e.to_string())?;
        for c in recent {
            if c.kind == Kind::Message {
                break;
            }
            if c.kind == Kind::Restore && c.label.ends_with(&format!("asked by {AGENT}")) {
                return Err(format!(
                    "the agent already restored the files once since the user's last prompt \
                     ({}): ask the user before restoring again (`ckpt undo` takes it back)",
                    c.id.short()
                ));
            }
        }
    }
    let params = RestoreParams {
        project: ctx.project(),
        id: id.to_string(),
        paths,
        dry_run: !confirm,
        dialog: None,
        by: confirm.then(|| AGENT.to_string()),
    };
    let r = conn
        .call::<rpc::Restore>(&params)
        .map_err(|e| e.to_string())?;
    let bounded = |list: &[String]| list.iter().take(MAX_ENTRIES).cloned().collect::<Vec<_>>();
    Ok(json!({
        "restored": confirm,
        "restored_to": r.restored_to,
        "written": bounded(&r.written), "written_total": r.written.len(),
        "deleted": bounded(&r.deleted), "deleted_total": r.deleted.len(),
        "skipped": r.skipped.iter().take(MAX_ENTRIES).collect::<Vec<_>>(),
        "skipped_total": r.skipped.len(),
        "undo_checkpoint": r.undo_checkpoint,
        "note": if confirm { "restored; `ckpt undo` takes it back" }
            else { "a plan only: nothing changed; call again with confirm: true once the user agrees" },
    }))
}

/// The `revert` tool: the plan, or with `confirm` one turn's changes taken back.
fn revert(
    ctx: &Ctx,
    conn: &mut crate::client::connection::Connection,
    id: String,
    paths: Vec<std::path::PathBuf>,
    force: bool,
    confirm: bool,
) -> Result<Value, String> {
    let params = RevertParams {
        project: ctx.project(),
        id,
        paths,
        dry_run: !confirm,
        force,
        dialog: None,
        later: false,
    };
    let r = conn
        .call::<rpc::Revert>(&params)
        .map_err(|e| e.to_string())?;
    let bounded = |list: &[String]| list.iter().take(MAX_ENTRIES).cloned().collect::<Vec<_>>();
    Ok(json!({
        "reverted": !r.dry_run && r.undo_checkpoint.is_some(),
        "turn": r.turn, "from_step": r.from_step,
        "paths": bounded(&r.reverted), "paths_total": r.reverted.len(),
        "refused": r.refused.iter().take(MAX_ENTRIES).collect::<Vec<_>>(),
        "refused_total": r.refused.len(),
        "skipped": r.skipped.iter().take(MAX_ENTRIES).collect::<Vec<_>>(),
        "undo_checkpoint": r.undo_checkpoint,
        "note": match (r.dry_run, r.reverted.is_empty()) {
            (_, true) => "nothing to take back: the files hold none of that turn's changes",
            (true, false) => "a plan only: nothing changed; call again with confirm: true once the user agrees",
            (false, false) => "taken back; everything else is as it was; `ckpt undo` puts it back",
        },
    }))
}

/// The `show_checkpoint` tool: one checkpoint and (the first of) the files it changed.
fn show_checkpoint(
    ctx: &Ctx,
    conn: &mut crate::client::connection::Connection,
    id: String,
) -> Result<Value, String> {
    let params = ShowParams {
        project: ctx.project(),
        id,
        files: false,
        dialog: None,
        max_entries: Some(MAX_ENTRIES),
        counts: true,
    };
    let s = conn.call::<rpc::Show>(&params).map_err(|e| e.to_string())?;
    let c = &s.checkpoint;
    let changes: Vec<Value> = s
        .changes
        .iter()
        .take(MAX_ENTRIES)
        .map(change_entry)
        .collect();
    Ok(
        json!({"id": c.id, "kind": c.kind, "label": c.label, "dialog": c.dialog,
        "seq": c.seq, "created_at": c.created_at, "added": c.added,
        "modified": c.modified, "deleted": c.deleted, "skipped": c.skipped,
        "changes": changes, "changes_total": s.changes_total}),
    )
}
