//! What an agent's after-tool hook says about the tool that ran: its name, the paths it
//! names, and whether those are all it can have changed (an edit or a read tool; a shell, a
//! subagent or an unknown tool could have changed anything). Tool names and fields from the
//! agents' hook payloads as their binaries send them (see the README's agent table).

use std::path::PathBuf;

use serde_json::Value;

use super::agent::Agent;

/// One tool call, as the after-tool hook describes it.
#[derive(Debug, Default, PartialEq)]
pub struct ToolCall {
    pub tool: Option<String>,
    pub paths: Vec<PathBuf>,
    /// The tool can have changed only `paths`.
    pub declared: bool,
    /// A point the user may come back to even when no file changed.
    pub point: bool,
    pub tool_use_id: Option<String>,
}

/// Tools that change only the files they name (their `file_path`, `path`, ...).
const EDITS: &[&str] = &[
    // Claude Code (and the agents that speak its dialect)
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    // Gemini CLI
    "write_file",
    "replace",
    "edit",
];

/// Tools that change no file.
const READS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "ToolSearch",
    "AskUserQuestion",
    "ExitPlanMode",
    "read_file",
    "read_many_files",
    "glob",
    "grep",
    "search_file_content",
    "list_directory",
    "google_web_search",
    "web_fetch",
    "save_memory",
    "write_todos",
];

/// Tools after which the turn is worth coming back to even when no file changed: an answered
/// question, an approved plan.
const POINTS: &[&str] = &["AskUserQuestion", "ExitPlanMode"];

/// The input fields that name a file.
const PATH_KEYS: &[&str] = &[
    "file_path",
    "notebook_path",
    "path",
    "absolute_path",
    "filePath",
];

/// Reads an after-tool hook's payload.
pub fn tool_call(agent: Agent, payload: &Value) -> ToolCall {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(String::from);
    let input = payload.get("tool_input").cloned().unwrap_or(Value::Null);
    let named = |v: &Value| -> Vec<PathBuf> {
        PATH_KEYS
            .iter()
            .filter_map(|k| text(v, k))
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect()
    };
    if agent == Agent::Cursor {
        // `afterFileEdit` is Cursor's only after-tool event: one file, named.
        return ToolCall {
            tool: Some("edit".into()),
            paths: named(payload),
            declared: true,
            point: false,
            tool_use_id: text(payload, "generation_id"),
        };
    }
    let tool = text(payload, "tool_name");
    let name = tool.as_deref().unwrap_or("");
    let (paths, declared) = if EDITS.contains(&name) {
        let paths = named(&input);
        let declared = !paths.is_empty();
        (paths, declared)
    } else {
        (Vec::new(), READS.contains(&name))
    };
    ToolCall {
        point: POINTS.contains(&name),
        tool,
        paths,
        declared,
        tool_use_id: text(payload, "tool_use_id").or_else(|| text(payload, "tool_call_id")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edit_tools_name_their_files_and_shells_say_nothing() {
        let write = json!({"hook_event_name": "PostToolUse", "tool_name": "Write",
            "tool_input": {"file_path": "/p/a.txt", "content": "x"}, "tool_use_id": "toolu_1"});
        let call = tool_call(Agent::ClaudeCode, &write);
        assert_eq!(call.paths, [PathBuf::from("/p/a.txt")]);
        assert!(call.declared && !call.point);
        assert_eq!(call.tool_use_id.as_deref(), Some("toolu_1"));

        let bash = json!({"tool_name": "Bash", "tool_input": {"command": "rm -rf x"}});
        let call = tool_call(Agent::ClaudeCode, &bash);
        assert!(!call.declared && call.paths.is_empty());

        let shell = json!({"tool_name": "run_shell_command", "tool_call_id": "call_2"});
        assert!(!tool_call(Agent::Gemini, &shell).declared);

        let ask = json!({"tool_name": "AskUserQuestion", "tool_input": {}});
        let call = tool_call(Agent::ClaudeCode, &ask);
        assert!(call.declared && call.point && call.paths.is_empty());

        // An edit tool that names no file cannot vouch for anything.
        let odd = json!({"tool_name": "Edit", "tool_input": {}});
        assert!(!tool_call(Agent::ClaudeCode, &odd).declared);

        let cursor = json!({"hook_event_name": "afterFileEdit", "file_path": "/p/b.rs"});
        let call = tool_call(Agent::Cursor, &cursor);
        assert_eq!(call.paths, [PathBuf::from("/p/b.rs")]);
        assert!(call.declared);
    }
}
