//! Cline CLI's hook payloads and the prompt's text. Cline runs an executable file named after
//! each event (`TaskStart`, `TaskComplete`, `PostToolUse`; see `agents::plugin` for the files
//! ckpt writes) with JSON on stdin that names the event by its inner name (`hookName`:
//! `agent_start`, `agent_end`, `tool_result`), the session (`sessionContext.rootSessionId`) and
//! the workspace (`workspaceRoots`).
//!
//! `TaskStart` is the prompt's moment (Cline 3.0.65 never runs `UserPromptSubmit` headless or
//! over ACP), and it carries no prompt text; Cline has not written the user's message to the
//! session when it runs. The text is taken from the session's own metadata
//! (`~/.cline/data/sessions/<id>/<id>.json`, its `prompt`), which holds the session's first
//! prompt: every prompt of `cline "…"`, which starts a session each time. A later prompt of one
//! session (over ACP or in the TUI) is labelled `Cline prompt N` instead, N its place in the
//! session.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The Claude Code event a Cline payload is (by its `hookName`).
pub fn event_of(payload: &Value) -> Option<&'static str> {
    let name = payload.get("hookName").and_then(Value::as_str)?;
    Some(match name {
        "agent_start" | "TaskStart" => "UserPromptSubmit",
        "agent_end" | "TaskComplete" => "Stop",
        "tool_result" | "PostToolUse" => "PostToolUse",
        _ => return None,
    })
}

/// The folder the agent works in: its first workspace root.
pub fn workspace(payload: &Value) -> Option<String> {
    payload
        .get("workspaceRoots")
        .and_then(Value::as_array)
        .and_then(|roots| roots.first())
        .or_else(|| payload.get("workspaceInfo").and_then(|w| w.get("rootPath")))
        .and_then(Value::as_str)
        .map(String::from)
}

/// The session: the root session of the run (a subagent's runs share it).
pub fn session(payload: &Value) -> Option<String> {
    payload
        .get("sessionContext")
        .and_then(|c| c.get("rootSessionId"))
        .and_then(Value::as_str)
        .map(String::from)
}

/// Where Cline keeps sessions.
pub fn sessions_root(home: &Path) -> PathBuf {
    home.join(".cline/data/sessions")
}

/// The prompt's text for session `id`, read from its files (see the module's note); and how
/// many user messages came before it.
pub fn prompt_text(home: &Path, id: &str) -> (String, usize) {
    if id.is_empty() || id.contains('/') || id.starts_with('.') {
        return (String::new(), 0);
    }
    let folder = sessions_root(home).join(id);
    let read = |name: String| -> Option<Value> {
        let text = crate::fs::read_text(&folder.join(name)).ok()?;
        serde_json::from_str(&text).ok()
    };
    let earlier = read(format!("{id}.messages.json"))
        .and_then(|m| {
            let messages = m.get("messages")?.as_array()?;
            Some(messages.iter().filter(|m| is_user_text(m)).count())
        })
        .unwrap_or(0);
    if earlier > 0 {
        return (format!("Cline prompt {}", earlier + 1), earlier);
    }
    let first = read(format!("{id}.json"))
        .and_then(|meta| meta.get("prompt")?.as_str().map(unwrap_input))
        .unwrap_or_default();
    (first, 0)
}

/// The text inside Cline's `<user_input mode="…">…</user_input>` (its ACP sessions store the
/// prompt so), else the text.
fn unwrap_input(text: &str) -> String {
    let inner = text
        .trim()
        .strip_prefix("<user_input")
        .and_then(|rest| rest.split_once('>'))
        .and_then(|(_, rest)| rest.strip_suffix("</user_input>"));
    inner.unwrap_or(text).to_string()
}

/// Whether a stored message is a user's prompt (not a tool's result, which Cline stores as a
/// user message too).
pub fn is_user_text(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("user")
        && message
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts
                    .iter()
                    .any(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    && !parts
                        .iter()
                        .any(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
            })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payloads_and_the_prompts_text_from_the_sessions_files() {
        let start = json!({"taskId": "conv_1", "sessionContext": {"rootSessionId": "1796_ab"},
            "workspaceRoots": ["/p"], "hookName": "agent_start", "taskStart": {}});
        assert_eq!(event_of(&start), Some("UserPromptSubmit"));
        assert_eq!(event_of(&json!({"hookName": "agent_end"})), Some("Stop"));
        assert_eq!(
            event_of(&json!({"hookName": "tool_result"})),
            Some("PostToolUse")
        );
        assert_eq!(event_of(&json!({"hookName": "prompt_submit"})), None);
        assert_eq!(workspace(&start).as_deref(), Some("/p"));
        assert_eq!(session(&start).as_deref(), Some("1796_ab"));

        let home = tempfile::tempdir().unwrap();
        let folder = home.path().join(".cline/data/sessions/1796_ab");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("1796_ab.json"), r#"{"prompt": "Prompt A"}"#).unwrap();
        std::fs::write(folder.join("1796_ab.messages.json"), r#"{"messages": []}"#).unwrap();
        assert_eq!(prompt_text(home.path(), "1796_ab"), ("Prompt A".into(), 0));
        let messages = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "<user_input>Prompt A</user_input>"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "editor"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
        ]});
        std::fs::write(folder.join("1796_ab.messages.json"), messages.to_string()).unwrap();
        assert_eq!(
            prompt_text(home.path(), "1796_ab"),
            ("Cline prompt 2".into(), 1)
        );
        assert_eq!(prompt_text(home.path(), "../x"), (String::new(), 0));
        assert_eq!(
            unwrap_input("<user_input mode=\"act\">turn D</user_input>"),
            "turn D"
        );
        assert_eq!(unwrap_input("plain <b>"), "plain <b>");
    }
}
