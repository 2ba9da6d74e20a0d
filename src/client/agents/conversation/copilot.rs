//! GitHub Copilot CLI's sessions: a folder each, `~/.copilot/session-state/<session id>/`, whose
//! `events.jsonl` is the transcript (one event a line, `{type, data, id, parentId, timestamp}`:
//! `session.start`, `user.message {content, transformedContent, messageId}`, `assistant.*`,
//! `tool.*`, `hook.*`, `session.resume` at each resume, …) and whose `workspace.yaml` names the
//! session (`id: …`, `cwd: …`). The hook runs before the prompt's `user.message` is written, so
//! the prompt is the first user message of its text at or after the hook's `timestamp`.
//!
//! The fork is a new folder holding `events.jsonl` up to the prompt's message (without the
//! resume and hook events that led up to it) and `workspace.yaml`, the old id replaced by the
//! new one in both: `copilot --resume <new id>` continues it (tried with the pinned Copilot CLI;
//! its other files, checkpoints and file snapshots of the original, are not needed).

use std::path::Path;

use serde_json::Value;

use super::jsonl::{self, object};
use super::{uuid_v4, Agent, CannotFork, NewSession, Place, Point};

const AGENT: Agent = Agent::Copilot;

/// The prompt's event (an index among the file's lines).
pub fn locate(point: &Point, text: &str) -> Result<usize, CannotFork> {
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    find(point, &lines)
}

/// The text of a user message event.
fn user_text(event: &Value) -> Option<&str> {
    if event.get("type")?.as_str()? != "user.message" {
        return None;
    }
    event.get("data")?.get("content")?.as_str()
}

fn find(point: &Point, lines: &[(usize, &str)]) -> Result<usize, CannotFork> {
    let mut seen = 0;
    for (i, (number, line)) in lines.iter().enumerate() {
        if !line.contains("\"user.message\"") {
            continue;
        }
        let event = object(AGENT, *number, line)?;
        let Some(text) = user_text(&event) else {
            continue;
        };
        if !jsonl::same_prompt(text, &point.prompt) {
            continue;
        }
        if let Some(hook) = point.hook_time {
            let at = event
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
        "the prompt is not in the Copilot CLI session {}",
        point.transcript.display()
    )))
}

/// The new session folder: the events before the prompt's message, or none when no prompt came
/// before. `workspace` is the original's `workspace.yaml`.
pub fn fork(
    point: &Point,
    text: &str,
    workspace: &str,
    place: &Place,
) -> Result<Option<NewSession>, CannotFork> {
    if let Place::Folder(_) = place {
        return Err(CannotFork(
            "ckpt forks Copilot CLI conversations in place only (`ckpt rewind`), not into \
             another folder"
                .into(),
        ));
    }
    let lines: Vec<(usize, &str)> = jsonl::lines(text).collect();
    let mut at = find(point, &lines)?;
    // The resume and the hooks that led up to the prompt belong to it, not to what came before.
    while at > 0 {
        let (number, line) = lines[at - 1];
        let event = object(AGENT, number, line)?;
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "session.resume" && !kind.starts_with("hook.") {
            break;
        }
        at -= 1;
    }
    let mut before = false;
    for (number, line) in &lines[..at] {
        before |= user_text(&object(AGENT, *number, line)?).is_some();
    }
    if !before {
        return Ok(None);
    }
    if !workspace
        .lines()
        .any(|l| l.trim_end() == format!("id: {}", point.session))
    {
        return Err(CannotFork::format(
            AGENT,
            "workspace.yaml does not name the session",
        ));
    }
    let id = uuid_v4();
    let mut bytes = Vec::new();
    for (_, line) in &lines[..at] {
        bytes.extend_from_slice(line.replace(&point.session, &id).as_bytes());
        bytes.push(b'\n');
    }
    let sessions = session_folder(&point.transcript)?
        .parent()
        .ok_or_else(|| CannotFork::format(AGENT, "the session folder has no folder"))?;
    Ok(Some(NewSession {
        folder: sessions.join(&id),
        file_name: "events.jsonl".into(),
        bytes,
        beside: vec![(
            "workspace.yaml".into(),
            workspace.replace(&point.session, &id).into_bytes(),
        )],
        id,
    }))
}

/// The session's own folder (where `events.jsonl` is).
pub fn session_folder(transcript: &Path) -> Result<&Path, CannotFork> {
    transcript
        .parent()
        .ok_or_else(|| CannotFork::format(AGENT, "the session file has no folder"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn event(kind: &str, text: &str, at: &str) -> String {
        serde_json::json!({"type": kind, "data": {"content": text, "sessionId": "s-1"},
            "id": format!("e-{at}"), "parentId": null, "timestamp": at})
        .to_string()
    }

    #[test]
    fn the_fork_ends_before_the_prompt_and_what_led_up_to_it() {
        let text = [
            event("session.start", "", "2026-01-01T00:00:00Z"),
            event("user.message", "A", "2026-01-01T00:00:01Z"),
            event("assistant.message", "done", "2026-01-01T00:00:02Z"),
            event("session.resume", "", "2026-01-01T00:00:03Z"),
            event("hook.start", "", "2026-01-01T00:00:04Z"),
            event("user.message", "B", "2026-01-01T00:00:05Z"),
        ]
        .join("\n")
            + "\n";
        let point = |prompt: &str, hook: &str| Point {
            agent: AGENT,
            session: "s-1".into(),
            transcript: PathBuf::from("/h/.copilot/session-state/s-1/events.jsonl"),
            prompt: prompt.into(),
            message_id: None,
            hook_time: Some(hook.parse().unwrap()),
            occurrence: 0,
            index: None,
            after_tool: None,
        };
        let workspace = "id: s-1\ncwd: /p\n";
        let b = point("B", "2026-01-01T00:00:04Z");
        let new = fork(&b, &text, workspace, &Place::Beside).unwrap().unwrap();
        let events = String::from_utf8(new.bytes).unwrap();
        assert_eq!(events.lines().count(), 3, "{events}");
        assert!(!events.contains("s-1") && events.contains(&new.id));
        assert_eq!(
            new.folder,
            PathBuf::from(format!("/h/.copilot/session-state/{}", new.id))
        );
        assert_eq!(
            new.beside[0].1,
            format!("id: {}\ncwd: /p\n", new.id).into_bytes()
        );
        // Nothing before the first prompt: no fork; a workspace naming another session: refused.
        let a = point("A", "2026-01-01T00:00:00Z");
        assert!(fork(&a, &text, workspace, &Place::Beside)
            .unwrap()
            .is_none());
        assert!(fork(&b, &text, "id: other\n", &Place::Beside).is_err());
        // A prompt sent before the hook's time is another one.
        assert!(locate(&point("B", "2026-01-01T00:00:06Z"), &text).is_err());
    }
}
