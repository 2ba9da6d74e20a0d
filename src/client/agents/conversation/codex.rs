//! Codex's sessions ("rollouts"): `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`,
//! one record a line, `{timestamp, type, payload}`, the first a `session_meta` whose payload's
//! `id` is the session's. Each turn starts with a `task_started` event carrying the `turn_id` the
//! prompt hook was given, followed by the turn's context, the prompt and everything the model did.
//!
//! The fork is the rollout up to the line where the prompt's turn starts, its session id
//! (`id`, `session_id`, `thread_id`) the new one, in a rollout file of its own named as Codex
//! names them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::jsonl::{self, object, replace_field};
use super::{uuid_v7, Agent, CannotFork, NewSession, Place, Point};

const AGENT: Agent = Agent::Codex;

/// The fields that hold the session's id.
const SESSION_FIELDS: [&str; 3] = ["id", "session_id", "thread_id"];

/// The line (an index among the rollout's lines) where the prompt's turn starts.
pub fn locate(point: &Point, text: &str) -> Result<usize, CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    find(point, &lines)
}

fn payload_str<'a>(record: &'a Value, key: &str) -> Option<&'a str> {
    record.get("payload")?.get(key)?.as_str()
}

fn find(point: &Point, lines: &[(usize, &str)]) -> Result<usize, CannotFork> {
    let Some((number, first)) = lines.first() else {
        return Err(CannotFork::format(AGENT, "the rollout is empty"));
    };
    let meta = object(AGENT, *number, first)?;
    if meta.get("type").and_then(Value::as_str) != Some("session_meta")
        || payload_str(&meta, "id") != Some(point.session.as_str())
    {
        return Err(CannotFork::format(
            AGENT,
            "its first line is not the session's session_meta",
        ));
    }
    let mut seen = 0;
    let mut turn_start = None;
    for (i, (number, line)) in lines.iter().enumerate() {
        let candidate = match &point.message_id {
            Some(id) => line.contains(id.as_str()),
            None => line.contains("task_started") || line.contains("\"user\""),
        };
        if !candidate {
            continue;
        }
        let record = object(AGENT, *number, line)?;
        let kind = payload_str(&record, "type");
        if let Some(id) = &point.message_id {
            // The first line of the turn: its start event, or its context in older rollouts.
            if payload_str(&record, "turn_id") == Some(id.as_str()) {
                return Ok(i);
            }
            continue;
        }
        if kind == Some("task_started") {
            turn_start = Some(i);
            continue;
        }
        let text = record.get("payload").and_then(|p| {
            (p.get("role")?.as_str()? == "user")
                .then(|| jsonl::message_text(p.get("content")?, Some("input_text")))?
        });
        if kind == Some("message") && text.is_some_and(|t| jsonl::same_prompt(&t, &point.prompt)) {
            if seen == point.occurrence {
                return Ok(turn_start.unwrap_or(i));
            }
            seen += 1;
        }
    }
    Err(CannotFork(format!(
        "the prompt's turn is not in the Codex session {}",
        point.transcript.display()
    )))
}

/// The new session: the rollout before the prompt's turn, or none when it was the first turn.
pub fn fork(point: &Point, text: &str, place: &Place) -> Result<Option<NewSession>, CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    let at = find(point, &lines)?;
    let mut records = Vec::with_capacity(at);
    for (number, line) in &lines[..at] {
        records.push(object(AGENT, *number, line)?);
    }
    let earlier_turn = records
        .iter()
        .any(|r| payload_str(r, "type") == Some("task_started"));
    if !earlier_turn {
        return Ok(None);
    }
    let id = uuid_v7();
    let new_cwd = match place {
        Place::Beside => None,
        Place::Folder(dir) => Some(dir.to_string_lossy()),
    };
    let mut bytes = Vec::new();
    for ((number, line), record) in lines[..at].iter().zip(&records) {
        let mut out = line.to_string();
        for key in SESSION_FIELDS {
            out = replace_field(&out, key, &point.session, &id).0;
        }
        if let (Some(dir), Some(cwd)) = (&new_cwd, payload_str(record, "cwd")) {
            out = replace_field(&out, "cwd", cwd, dir).0;
        }
        if *number == lines[0].0 && payload_str(&object(AGENT, *number, &out)?, "id") != Some(&id) {
            return Err(CannotFork::format(
                AGENT,
                "its session_meta names the session differently",
            ));
        }
        bytes.extend_from_slice(out.as_bytes());
        bytes.push(b'\n');
    }
    let now = jiff::Zoned::now();
    let folder = sessions_folder(&point.transcript)?
        .join(now.strftime("%Y").to_string())
        .join(now.strftime("%m").to_string())
        .join(now.strftime("%d").to_string());
    Ok(Some(NewSession {
        file_name: format!("rollout-{}-{id}.jsonl", now.strftime("%Y-%m-%dT%H-%M-%S")),
        id,
        folder,
        bytes,
        beside: Vec::new(),
    }))
}

/// `sessions/` of the Codex home the rollout is in (`sessions/YYYY/MM/DD/rollout-….jsonl`).
fn sessions_folder(rollout: &Path) -> Result<PathBuf, CannotFork> {
    rollout
        .ancestors()
        .nth(4)
        .filter(|sessions| sessions.file_name() == Some("sessions".as_ref()))
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            CannotFork::format(
                AGENT,
                format!(
                    "{} is not in a sessions/YYYY/MM/DD folder",
                    rollout.display()
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sessions_folder_is_found_from_a_rollout() {
        let rollout = Path::new("/h/.codex/sessions/2026/11/27/rollout-x.jsonl");
        assert_eq!(
            sessions_folder(rollout).unwrap(),
            Path::new("/h/.codex/sessions")
        );
        assert!(sessions_folder(Path::new("/h/rollout-x.jsonl")).is_err());
        assert!(sessions_folder(Path::new("/h/other/2026/11/27/rollout-x.jsonl")).is_err());
    }
}
