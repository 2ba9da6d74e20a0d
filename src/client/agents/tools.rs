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
    // Copilot CLI (`edit` as Gemini's)
    "create",
    // OpenCode and Kilo CLI (`filePath`; `edit` as above)
    "write",
    // Cline CLI (`path`)
    "editor",
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
    // Copilot CLI
    "view",
    // Qwen Code
    "grep_search",
    "todo_write",
    "web_search",
    // OpenCode and Kilo CLI
    "read",
    "list",
    "todowrite",
    "todoread",
    "webfetch",
    "websearch",
    "codesearch",
    // Cline CLI
    "read_files",
    "search_codebase",
    "fetch_web_content",
    "ask_question",
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

/// Tools that apply a Codex patch (`*** Begin Patch` ...): they change the files it names.
const PATCHES: &[&str] = &["apply_patch", "ApplyPatch"];

/// The files a Codex patch in a tool's input names (added, updated, deleted, moved to): the
/// input itself or its `command`, `input` or `patch`, as text or as a command's arguments.
fn patched(input: &Value) -> Vec<PathBuf> {
    let strings = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut texts = strings(input);
    for key in ["command", "input", "patch", "cmd", "patchText"] {
        texts.extend(input.get(key).map(strings).unwrap_or_default());
    }
    let mut paths = Vec::new();
    for line in texts.iter().flat_map(|t| t.lines()) {
        let named = [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|head| line.strip_prefix(head));
        if let Some(path) = named.map(str::trim).filter(|p| !p.is_empty()) {
            let path = PathBuf::from(path);
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    paths
}

/// Reads an after-tool hook's payload.
pub fn tool_call(agent: Agent, payload: &Value) -> ToolCall {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(String::from);
    // Copilot's own events: `toolName` and `toolArgs` (its Claude-style ones, as Claude Code's).
    // Cline's: its `tool_result` (`id`, `name`, `input`).
    let cline = payload.get("tool_result").filter(|_| agent == Agent::Cline);
    let input = payload
        .get("tool_input")
        .or_else(|| payload.get("toolArgs"))
        .or_else(|| cline.and_then(|r| r.get("input")))
        .cloned()
        .unwrap_or(Value::Null);
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
    let tool = text(payload, "tool_name")
        .or_else(|| text(payload, "toolName"))
        .or_else(|| cline.and_then(|r| text(r, "name")));
    let name = tool.as_deref().unwrap_or("");
    let (paths, declared) = if PATCHES.contains(&name) {
        let paths = patched(&input);
        let declared = !paths.is_empty();
        (paths, declared)
    } else if EDITS.contains(&name) {
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
        tool_use_id: text(payload, "tool_use_id")
            .or_else(|| text(payload, "tool_call_id"))
            .or_else(|| cline.and_then(|r| text(r, "id"))),
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

        // A Codex patch names the files it adds, updates, deletes and moves to.
        let patch =
            "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Move to: src/b.rs\n\
                     *** Delete File: old.rs\n*** End Patch\n";
        let call = tool_call(
            Agent::Codex,
            &json!({"tool_name": "apply_patch", "tool_input": {"command": patch}}),
        );
        assert_eq!(
            call.paths,
            [
                PathBuf::from("src/a.rs"),
                PathBuf::from("src/b.rs"),
                PathBuf::from("old.rs")
            ]
        );
        assert!(call.declared);
        let empty = json!({"tool_name": "apply_patch", "tool_input": {"command": "echo"}});
        assert!(!tool_call(Agent::Codex, &empty).declared);

        // Copilot's own payloads, as its binary sends them.
        let create = json!({"sessionId": "s", "cwd": "/p", "toolName": "create",
            "toolArgs": {"path": "/p/hello.txt", "file_text": "hi\n"}});
        let call = tool_call(Agent::Copilot, &create);
        assert_eq!(call.tool.as_deref(), Some("create"));
        assert_eq!(call.paths, [PathBuf::from("/p/hello.txt")]);
        assert!(call.declared);
        let bash = json!({"sessionId": "s", "toolName": "bash", "toolArgs": {"command": "x"}});
        assert!(!tool_call(Agent::Copilot, &bash).declared);

        let cursor = json!({"hook_event_name": "afterFileEdit", "file_path": "/p/b.rs"});
        let call = tool_call(Agent::Cursor, &cursor);
        assert_eq!(call.paths, [PathBuf::from("/p/b.rs")]);
        assert!(call.declared);
    }
}
