//! What the three agents' session files have in common: JSON objects one per line, written
//! compactly and appended as the session goes. Reading one (bounded, never blocking on a FIFO),
//! its lines, a string field changed in a line without touching another byte of it (an agent may
//! recognise its lines by their exact spelling), and a new file placed beside the agent's own.

use std::io::Read;

use serde_json::Value;

use super::{Agent, CannotFork};

/// The largest session file read (long sessions with large tool outputs reach hundreds of MB).
const MAX_TRANSCRIPT: u64 = 1 << 30;

/// The session file's text (opened below its agent's folder, never through a symlink).
pub fn read(agent: Agent, located: &super::place::Located) -> Result<String, CannotFork> {
    let path = &located.path();
    let cannot = |why: String| {
        CannotFork(format!(
            "cannot read the {} session {}: {why}",
            agent.name(),
            path.display()
        ))
    };
    let file = super::place::open(&located.root, &located.rel).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => cannot(format!("it no longer exists{}", gone_why(agent))),
        _ if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => cannot(
            "it, or a folder on its way, is a symlink (never followed among an agent's \
             sessions)"
                .into(),
        ),
        _ => cannot(e.to_string()),
    })?;
    let mut data = Vec::new();
    file.take(MAX_TRANSCRIPT + 1)
        .read_to_end(&mut data)
        .map_err(|e| cannot(e.to_string()))?;
    if data.len() as u64 > MAX_TRANSCRIPT {
        return Err(cannot(format!("larger than {MAX_TRANSCRIPT} bytes")));
    }
    String::from_utf8(data).map_err(|_| CannotFork::format(agent, "not UTF-8 text"))
}

/// A small file beside the session file, in its folder (Copilot CLI's `workspace.yaml`), opened
/// the same way.
pub fn read_beside(
    agent: Agent,
    located: &super::place::Located,
    name: &str,
) -> Result<String, CannotFork> {
    let rel = located.rel.with_file_name(name);
    let cannot = |why: String| {
        CannotFork(format!(
            "cannot read the {} session's {name}: {why}",
            agent.name()
        ))
    };
    let file = super::place::open(&located.root, &rel).map_err(|e| cannot(e.to_string()))?;
    let mut data = Vec::new();
    file.take(1 << 20)
        .read_to_end(&mut data)
        .map_err(|e| cannot(e.to_string()))?;
    String::from_utf8(data).map_err(|_| cannot("not UTF-8 text".into()))
}

/// What may have deleted a session the user did not: Gemini CLI deletes sessions itself.
fn gone_why(agent: Agent) -> &'static str {
    match agent {
        Agent::Gemini => {
            " (Gemini CLI's session cleanup deletes sessions past its `maxAge`, and one resumed \
             in a later minute than it began, at its next start: `general.sessionRetention` in \
             ~/.gemini/settings.json)"
        }
        _ => "",
    }
}

/// The complete lines of `text` (a last line without its newline is still being written and is
/// left out), each with its number from 1.
pub fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .split('\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.trim().is_empty())
}

/// The first line of `text` that is not a JSON object: its number, and its index among
/// [`lines`].
pub fn first_bad(text: &str) -> Option<(usize, usize)> {
    lines(text)
        .enumerate()
        .find(|(_, (_, line))| {
            !line.trim_start().starts_with('{')
                || serde_json::from_str::<serde::de::IgnoredAny>(line).is_err()
        })
        .map(|(index, (number, _))| (number, index))
}

/// A line as a JSON object, or why it is not one.
pub fn object(agent: Agent, number: usize, line: &str) -> Result<Value, CannotFork> {
    match serde_json::from_str::<Value>(line) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(CannotFork::format(
            agent,
            format!("line {number} is not a JSON object"),
        )),
    }
}

/// The text of `content` as agents store a message: a string, or a list of parts each with a
/// `text` (a list with any other kind of part is not a typed message: None).
pub fn message_text(content: &Value, text_type: Option<&str>) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let mut texts = Vec::new();
            for part in parts {
                if let Some(kind) = text_type {
                    if part.get("type").and_then(Value::as_str) != Some(kind) {
                        return None;
                    }
                }
                texts.push(part.get("text")?.as_str()?);
            }
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// Whether a stored prompt is the one the hook recorded (agents may trim what was typed).
pub fn same_prompt(stored: &str, recorded: &str) -> bool {
    stored == recorded || stored.trim() == recorded.trim()
}

/// `line` with every `"key":"from"` spelled `"key":"to"` (keys and values as JSON writes them),
/// and how many there were.
pub fn replace_field(line: &str, key: &str, from: &str, to: &str) -> (String, usize) {
    let spell = |value: &str| format!("{}:{}", quote(key), quote(value));
    let (from, to) = (spell(from), spell(to));
    let n = line.matches(&from).count();
    (line.replace(&from, &to), n)
}

/// `s` as a JSON string.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_left_out() {
        let got: Vec<_> = lines("{\"a\":1}\n\n{\"b\":2}\n{\"c\"").collect();
        assert_eq!(got, [(1, "{\"a\":1}"), (3, "{\"b\":2}")]);
        assert_eq!(lines("").count(), 0);
        assert_eq!(lines("{\"partial\"").count(), 0);
    }

    #[test]
    fn a_field_is_replaced_where_it_is_that_field_only() {
        let line = r#"{"sessionId":"old","text":"sessionId old","x":{"sessionId":"old"}}"#;
        let (out, n) = replace_field(line, "sessionId", "old", "new");
        assert_eq!(n, 2);
        assert_eq!(
            out,
            r#"{"sessionId":"new","text":"sessionId old","x":{"sessionId":"new"}}"#
        );
        let (out, n) = replace_field(r#"{"cwd":"/a \"b\""}"#, "cwd", "/a \"b\"", "/c");
        assert_eq!((out.as_str(), n), (r#"{"cwd":"/c"}"#, 1));
    }

    #[test]
    fn message_texts() {
        let text = |v: Value, kind| message_text(&v, kind);
        assert_eq!(text(serde_json::json!("hi"), None), Some("hi".into()));
        let parts =
            serde_json::json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
        assert_eq!(text(parts.clone(), Some("text")), Some("a\nb".into()));
        let result = serde_json::json!([{"type": "tool_result", "content": "x"}]);
        assert_eq!(text(result, Some("text")), None);
        assert_eq!(text(serde_json::json!([]), None), None);
        assert_eq!(text(serde_json::json!(3), None), None);
    }

    #[test]
    fn a_missing_gemini_session_names_geminis_own_cleanup() {
        let dir = tempfile::tempdir().unwrap();
        let missing = super::super::place::Located {
            root: dir.path().to_path_buf(),
            rel: "p/chats/session-2026-11-28T08-27-3e3dd339.jsonl".into(),
        };
        let gemini = read(Agent::Gemini, &missing).unwrap_err().0;
        assert!(gemini.contains("no longer exists"), "{gemini}");
        assert!(gemini.contains("general.sessionRetention"), "{gemini}");
        let claude = read(Agent::ClaudeCode, &missing).unwrap_err().0;
        assert!(claude.ends_with("it no longer exists"), "{claude}");
    }
}
