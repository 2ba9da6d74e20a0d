//! Qwen Code's sessions: `~/.qwen/projects/<folder>/chats/<session id>.jsonl`, one record a
//! line, `{uuid, parentUuid, sessionId, timestamp, type: user|assistant|tool_result|system,
//! message: {role, parts: [{text} | {functionCall} | …]}, …}`, appended as the turn goes (a
//! resumed session appends to the same file). The hook runs before the prompt's record is
//! written, so the prompt is the first user record of its text at or after the hook's
//! `timestamp` (tried with the pinned Qwen Code).
//!
//! The fork is the file up to the prompt's record, each `sessionId` the new id and the bytes
//! otherwise as they were, in `<new id>.jsonl` beside the original (or, for another folder, in
//! that folder's `chats/`, named as Qwen Code names it, each `cwd` that folder); `qwen --resume
//! <new id>` continues it.

use serde_json::Value;

use super::claude;
use super::jsonl::{self, object, replace_field};
use super::{uuid_v4, Agent, CannotFork, NewSession, Place, Point};

const AGENT: Agent = Agent::Qwen;

/// The prompt's record (an index among the file's lines).
pub fn locate(point: &Point, text: &str) -> Result<usize, CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    find(point, &lines)
}

/// The text a user typed, of a record that holds one.
fn user_text(record: &Value) -> Option<String> {
    if record.get("type")?.as_str()? != "user" {
        return None;
    }
    jsonl::message_text(record.get("message")?.get("parts")?, None)
}

fn find(point: &Point, lines: &[(usize, &str)]) -> Result<usize, CannotFork> {
    let mut seen = 0;
    for (i, (number, line)) in lines.iter().enumerate() {
        if !line.contains("\"user\"") {
            continue;
        }
        let record = object(AGENT, *number, line)?;
        let Some(text) = user_text(&record) else {
            continue;
        };
        if record.get("sessionId").and_then(Value::as_str) != Some(point.session.as_str()) {
            return Err(CannotFork::format(
                AGENT,
                format!("line {number} names another session"),
            ));
        }
        if !jsonl::same_prompt(&text, &point.prompt) {
            continue;
        }
        if let Some(hook) = point.hook_time {
            let at = record
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<jiff::Timestamp>().ok());
            match at {
                Some(at) if at >= hook => return Ok(i),
                Some(_) => continue,
                None => {
                    return Err(CannotFork::format(
                        AGENT,
                        format!("line {number}: a message without a time"),
                    ))
                }
            }
        }
        if seen == point.occurrence {
            return Ok(i);
        }
        seen += 1;
    }
    Err(CannotFork(format!(
        "the prompt is not in the Qwen Code session {}",
        point.transcript.display()
    )))
}

/// The new session: the file before the prompt's record, or none when no prompt came before.
pub fn fork(point: &Point, text: &str, place: &Place) -> Result<Option<NewSession>, CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    let at = find(point, &lines)?;
    let mut records = Vec::with_capacity(at);
    for (number, line) in &lines[..at] {
        records.push(object(AGENT, *number, line)?);
    }
    if !records.iter().any(|r| user_text(r).is_some()) {
        return Ok(None);
    }
    let id = uuid_v4();
    let mut bytes = Vec::new();
    for ((number, line), record) in lines[..at].iter().zip(&records) {
        let (mut out, n) = replace_field(line, "sessionId", &point.session, &id);
        if record.get("sessionId").is_some() && n == 0 {
            return Err(CannotFork::format(
                AGENT,
                format!("line {number} names another session"),
            ));
        }
        if let (Place::Folder(dir), Some(cwd)) = (place, record.get("cwd").and_then(Value::as_str))
        {
            out = replace_field(&out, "cwd", cwd, &dir.to_string_lossy()).0;
        }
        bytes.extend_from_slice(out.as_bytes());
        bytes.push(b'\n');
    }
    let chats = point
        .transcript
        .parent()
        .ok_or_else(|| CannotFork::format(AGENT, "the session file has no folder"))?;
    let folder = match place {
        Place::Beside => chats.to_path_buf(),
        // Qwen Code names a folder's place as Claude Code does (`sanitizeCwd`).
        Place::Folder(dir) => {
            let projects = chats.parent().and_then(|f| f.parent()).ok_or_else(|| {
                CannotFork::format(AGENT, "the session file is not in projects/<folder>/chats")
            })?;
            projects.join(claude::folder_name(dir)?).join("chats")
        }
    };
    Ok(Some(NewSession {
        file_name: format!("{id}.jsonl"),
        id,
        folder,
        bytes,
        beside: Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn record(kind: &str, text: &str, at: &str) -> String {
        serde_json::json!({"uuid": format!("u-{at}"), "parentUuid": null, "sessionId": "s1",
            "timestamp": at, "type": kind, "message": {"role": "user", "parts": [{"text": text}]}})
        .to_string()
    }

    fn point(prompt: &str, hook: Option<&str>) -> Point {
        Point {
            agent: AGENT,
            session: "s1".into(),
            transcript: PathBuf::from("/h/.qwen/projects/-p/chats/s1.jsonl"),
            prompt: prompt.into(),
            message_id: None,
            hook_time: hook.map(|t| t.parse().unwrap()),
            occurrence: 0,
            index: None,
            after_tool: None,
        }
    }

    #[test]
    fn the_fork_ends_before_the_prompt_sent_at_or_after_the_hook() {
        let text = [
            record("user", "again", "2026-01-01T00:00:01Z"),
            record("assistant", "ok", "2026-01-01T00:00:02Z"),
            record("user", "again", "2026-01-01T00:00:05Z"),
            record("assistant", "ok", "2026-01-01T00:00:06Z"),
        ]
        .join("\n")
            + "\n";
        let p = point("again", Some("2026-01-01T00:00:04Z"));
        assert_eq!(locate(&p, &text).unwrap(), 2);
        let new = fork(&p, &text, &Place::Beside).unwrap().unwrap();
        let forked = String::from_utf8(new.bytes).unwrap();
        assert_eq!(forked.lines().count(), 2);
        assert!(!forked.contains("\"s1\"") && forked.contains(&new.id));
        assert_eq!(new.file_name, format!("{}.jsonl", new.id));
        // The first prompt has nothing before it: no fork.
        let first = point("again", Some("2026-01-01T00:00:00Z"));
        assert!(fork(&first, &text, &Place::Beside).unwrap().is_none());
        // A prompt that is not there, and another session's line, are refused.
        assert!(locate(&point("missing", None), &text).is_err());
        let other = text.replace("\"s1\"", "\"s2\"");
        assert!(locate(&p, &other)
            .unwrap_err()
            .0
            .contains("another session"));
        // Into another folder: that folder's place, its path as every `cwd`.
        let text = text.replace("\"type\"", "\"cwd\":\"/p\",\"type\"");
        let elsewhere = Place::Folder(PathBuf::from("/w/try-1"));
        let new = fork(&p, &text, &elsewhere).unwrap().unwrap();
        assert_eq!(
            new.folder,
            PathBuf::from("/h/.qwen/projects/-w-try-1/chats")
        );
        let forked = String::from_utf8(new.bytes).unwrap();
        assert!(forked.contains("\"cwd\":\"/w/try-1\"") && !forked.contains("\"/p\""));
    }
}
