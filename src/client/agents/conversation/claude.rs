//! Claude Code's sessions: `<config>/projects/<folder as a name>/<session id>.jsonl`, one record
//! a line. Messages (`user`, `assistant`, `attachment`, `system`) carry a `uuid` and their
//! `parentUuid`: a conversation is the chain from its newest message back to its first. A prompt
//! is the `user` record whose `promptId` is the hook's `prompt_id` and whose content is text (the
//! turn's tool results carry the same `promptId`).
//!
//! The fork is what Claude Code's own `--fork-session` writes: the chain ending at the prompt's
//! parent, in file order, each record's `sessionId` the new id; bookkeeping records (`api-request`,
//! `cost-state`, queue operations) are left out.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::jsonl::{self, object, quote, replace_field};
use super::{uuid_v4, Agent, CannotFork, NewSession, Place, Point};

const AGENT: Agent = Agent::ClaudeCode;

/// The longest folder name Claude Code spells out in full (longer ones end in a hash of its own).
const MAX_FOLDER_NAME: usize = 200;

/// The prompt's record: its line's index among `lines` and the record.
pub fn locate(point: &Point, text: &str) -> Result<(usize, Value), CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    find(point, &lines)
}

fn find(point: &Point, lines: &[(usize, &str)]) -> Result<(usize, Value), CannotFork> {
    let mut seen = 0;
    for (i, (number, line)) in lines.iter().enumerate() {
        // Only lines that can be the prompt are decoded.
        let candidate = match &point.message_id {
            Some(id) => line.contains(id.as_str()),
            None => line.contains("\"user\""),
        };
        if !candidate {
            continue;
        }
        let record = object(AGENT, *number, line)?;
        let field = |key: &str| record.get(key).and_then(Value::as_str);
        if field("type") != Some("user") || record.get("toolUseResult").is_some() {
            continue;
        }
        let Some(text) = record
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(|c| jsonl::message_text(c, Some("text")))
        else {
            continue;
        };
        let matches = match &point.message_id {
            Some(id) => field("promptId") == Some(id.as_str()),
            None => record.get("isMeta").is_none() && jsonl::same_prompt(&text, &point.prompt),
        };
        if !matches {
            continue;
        }
        if point.message_id.is_none() && seen < point.occurrence {
            seen += 1;
            continue;
        }
        if field("sessionId") != Some(point.session.as_str()) || field("uuid").is_none() {
            return Err(CannotFork::format(
                AGENT,
                format!("the prompt's record on line {number} lacks its session or uuid"),
            ));
        }
        return Ok((i, record));
    }
    Err(CannotFork(format!(
        "the prompt is not in the Claude Code session {} (it may have been cleared or compacted \
         away)",
        point.transcript.display()
    )))
}

/// The record after the prompt (at `at`) that holds the result of tool call `id`: its index
/// among `lines` and its uuid.
fn tool_result(
    point: &Point,
    lines: &[(usize, &str)],
    at: usize,
    id: &str,
) -> Result<(usize, String), CannotFork> {
    for (i, (number, line)) in lines.iter().enumerate().skip(at + 1) {
        if !line.contains(id) {
            continue;
        }
        let record = object(AGENT, *number, line)?;
        let holds = record
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts.iter().any(|p| {
                    p.get("type").and_then(Value::as_str) == Some("tool_result")
                        && p.get("tool_use_id").and_then(Value::as_str) == Some(id)
                })
            });
        if holds && record.get("type").and_then(Value::as_str) == Some("user") {
            if let Some(uuid) = record.get("uuid").and_then(Value::as_str) {
                return Ok((i, uuid.to_string()));
            }
        }
    }
    Err(CannotFork(format!(
        "the result of tool call {} is not in the Claude Code session {}",
        quote(id),
        point.transcript.display()
    )))
}

/// The new session: the conversation before the prompt (or, for a step, up to just after its
/// tool's result), or none when the prompt was the first.
pub fn fork(point: &Point, text: &str, place: &Place) -> Result<Option<NewSession>, CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    let (at, prompt) = find(point, &lines)?;
    let (at, mut parent) = match &point.after_tool {
        Some(id) => {
            let (end, uuid) = tool_result(point, &lines, at, id)?;
            (end + 1, uuid)
        }
        None => match prompt.get("parentUuid").and_then(Value::as_str) {
            Some(parent) => (at, parent.to_string()),
            None => return Ok(None),
        },
    };
    // Every message before the prompt, by uuid.
    let mut records = Vec::with_capacity(at);
    let mut by_uuid: HashMap<String, usize> = HashMap::new();
    for (i, (number, line)) in lines[..at].iter().enumerate() {
        let record = object(AGENT, *number, line)?;
        if let Some(uuid) = record.get("uuid").and_then(Value::as_str) {
            by_uuid.insert(uuid.to_string(), i);
        }
        records.push(record);
    }
    let mut chain = Vec::new();
    loop {
        let Some(&i) = by_uuid.get(&parent) else {
            return Err(CannotFork::format(
                AGENT,
                format!("message {parent} is named as a parent but is not in the session"),
            ));
        };
        if chain.len() > records.len() {
            return Err(CannotFork::format(
                AGENT,
                "its messages' parents form a loop",
            ));
        }
        chain.push(i);
        match records[i].get("parentUuid") {
            Some(Value::String(p)) => parent = p.clone(),
            Some(Value::Null) | None => break,
            Some(_) => {
                return Err(CannotFork::format(
                    AGENT,
                    format!("line {}: parentUuid is not a string", lines[i].0),
                ))
            }
        }
    }
    chain.sort_unstable();
    let id = uuid_v4();
    let (folder, new_cwd) = match place {
        Place::Beside => (parent_of(&point.transcript)?.to_path_buf(), None),
        Place::Folder(dir) => {
            let projects = parent_of(parent_of(&point.transcript)?)?;
            (
                projects.join(folder_name(dir)?),
                Some(dir.to_string_lossy()),
            )
        }
    };
    let mut bytes = Vec::new();
    for i in chain {
        let (number, line) = lines[i];
        let (mut out, n) = replace_field(line, "sessionId", &point.session, &id);
        if n == 0 && records[i].get("sessionId").is_some() {
            return Err(CannotFork::format(
                AGENT,
                format!("line {number}: its sessionId is not the session's"),
            ));
        }
        if let (Some(dir), Some(cwd)) = (&new_cwd, records[i].get("cwd").and_then(Value::as_str)) {
            out = replace_field(&out, "cwd", cwd, dir).0;
        }
        bytes.extend_from_slice(out.as_bytes());
        bytes.push(b'\n');
    }
    Ok(Some(NewSession {
        file_name: format!("{id}.jsonl"),
        id,
        folder,
        bytes,
        beside: Vec::new(),
    }))
}

fn parent_of(path: &Path) -> Result<&Path, CannotFork> {
    path.parent()
        .ok_or_else(|| CannotFork::format(AGENT, format!("{} has no folder", path.display())))
}

/// The name of the folder under `projects/` where Claude Code keeps the sessions of `dir`: each
/// UTF-16 unit that is not an ASCII letter or digit becomes `-`.
pub(super) fn folder_name(dir: &Path) -> Result<String, CannotFork> {
    let name: String = dir
        .to_string_lossy()
        .chars()
        .flat_map(|c| {
            let keep = c.is_ascii_alphanumeric();
            std::iter::repeat_n(
                if keep { c } else { '-' },
                if keep { 1 } else { c.len_utf16() },
            )
        })
        .collect();
    if name.len() > MAX_FOLDER_NAME {
        return Err(CannotFork(format!(
            "the path {} is too long for ckpt to name Claude Code's folder for it",
            quote(&dir.to_string_lossy())
        )));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_follow_claude_code() {
        let name = |p: &str| folder_name(Path::new(p)).unwrap();
        assert_eq!(name("/tmp/exp/c/proj"), "-tmp-exp-c-proj");
        assert_eq!(name("/home/me/my_repo.v2"), "-home-me-my-repo-v2");
        assert_eq!(name("/a/é/😀"), "-a-----");
        assert!(folder_name(Path::new(&format!("/{}", "x".repeat(250)))).is_err());
    }
}
