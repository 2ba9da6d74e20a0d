//! Gemini CLI's sessions: `~/.gemini/tmp/<project>/chats/session-<time>-<first 8 of id>.jsonl`,
//! one record a line: a header `{sessionId, projectHash, startTime, lastUpdated, kind}` (again at
//! each resume), `{"$set": …}` updates of the session (at a resume, the whole history so far), and
//! message records `{id, timestamp, type: user|gemini, content}` appended as the turn goes.
//! The hook runs before the prompt's record is written, so the prompt is the first user record of
//! its text at or after the hook's `timestamp`.
//!
//! The fork is the file up to the prompt's record, each `sessionId` the new id, bytes otherwise
//! as they were (Gemini CLI recognises its lines only spelled compactly), in a file named as it
//! names them.

use serde_json::Value;

use super::jsonl::{self, object, replace_field};
use super::{uuid_v4, Agent, CannotFork, NewSession, Place, Point};

const AGENT: Agent = Agent::Gemini;

/// What a Gemini CLI session's first message says before any prompt.
const SESSION_CONTEXT: &str = "<session_context>";

/// The prompt's record (an index among the file's lines).
pub fn locate(point: &Point, text: &str) -> Result<usize, CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    find(point, &lines)
}

/// The text of a user message record (not a function's response), if it is one.
fn user_text(record: &Value) -> Option<String> {
    if record.get("type")?.as_str()? != "user" {
        return None;
    }
    let text = jsonl::message_text(record.get("content")?, None)?;
    (!text.starts_with(SESSION_CONTEXT)).then_some(text)
}

fn find(point: &Point, lines: &[(usize, &str)]) -> Result<usize, CannotFork> {
    let Some((number, first)) = lines.first() else {
        return Err(CannotFork::format(AGENT, "the session file is empty"));
    };
    let header = object(AGENT, *number, first)?;
    if header.get("sessionId").and_then(Value::as_str) != Some(point.session.as_str())
        || header.get("projectHash").is_none()
    {
        return Err(CannotFork::format(
            AGENT,
            "its first line is not the session's header",
        ));
    }
    let mut seen = 0;
    for (i, (number, line)) in lines.iter().enumerate() {
        if !line.contains("\"user\"") {
            continue;
        }
        let record = object(AGENT, *number, line)?;
        if record.get("id").and_then(Value::as_str).is_none() {
            continue;
        }
        let Some(text) = user_text(&record) else {
            continue;
        };
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
        "the prompt is not in the Gemini CLI session {}",
        point.transcript.display()
    )))
}

/// Whether a record holds a prompt: a user record, or an update carrying a history with one.
fn holds_a_prompt(record: &Value) -> bool {
    user_text(record).is_some()
        || record
            .get("$set")
            .and_then(|s| s.get("messages"))
            .and_then(Value::as_array)
            .is_some_and(|messages| messages.iter().any(|m| user_text(m).is_some()))
}

/// The new session: the file before the prompt's record, or none when no prompt came before.
pub fn fork(point: &Point, text: &str, place: &Place) -> Result<Option<NewSession>, CannotFork> {
    if let Place::Folder(_) = place {
        return Err(CannotFork(
            "Gemini CLI chooses where it keeps a new folder's sessions on its first run there: \
             ckpt forks Gemini conversations in place only (`ckpt rewind`)"
                .into(),
        ));
    }
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    let at = find(point, &lines)?;
    let mut records = Vec::with_capacity(at);
    for (number, line) in &lines[..at] {
        records.push(object(AGENT, *number, line)?);
    }
    if !records.iter().any(holds_a_prompt) {
        return Ok(None);
    }
    let id = uuid_v4();
    let mut bytes = Vec::new();
    for ((number, line), record) in lines[..at].iter().zip(&records) {
        let (out, n) = replace_field(line, "sessionId", &point.session, &id);
        let names_session = record.get("sessionId").is_some()
            || record
                .get("$set")
                .is_some_and(|s| s.get("sessionId").is_some());
        if names_session && n == 0 {
            return Err(CannotFork::format(
                AGENT,
                format!("line {number} names another session"),
            ));
        }
        bytes.extend_from_slice(out.as_bytes());
        bytes.push(b'\n');
    }
    let folder = point
        .transcript
        .parent()
        .ok_or_else(|| CannotFork::format(AGENT, "the session file has no folder"))?
        .to_path_buf();
    let started = jiff::Timestamp::now().strftime("%Y-%m-%dT%H-%M");
    Ok(Some(NewSession {
        file_name: format!("session-{started}-{}.jsonl", &id[..8]),
        id,
        folder,
        bytes,
        beside: Vec::new(),
    }))
}
