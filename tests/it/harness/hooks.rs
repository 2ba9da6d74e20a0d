//! Running an agent's hook as the agent does: `ckpt hook AGENT` in the project, its JSON on
//! stdin. The one way the tests play an agent's prompt.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use super::{ckpt_bin, TestEnv};

/// Runs `ckpt [extra…] hook AGENT` in `cwd` with `input` on stdin; its output, whatever it is.
pub fn run_hook(env: &TestEnv, cwd: &Path, agent: &str, input: &str, extra: &[&str]) -> Output {
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let mut child = cmd
        .current_dir(cwd)
        .args(extra)
        .args(["hook", agent])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hook that exits before reading all of it (it gave up) closes the pipe: not an error.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().unwrap()
}

/// `ckpt hook AGENT` with `input`, which must succeed (a hook always exits 0).
pub fn hook_json(env: &TestEnv, cwd: &Path, agent: &str, input: &Value) -> Output {
    let out = run_hook(env, cwd, agent, &input.to_string(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A Claude Code prompt in `project`, in session `session`, with `fields` added to its input.
pub fn claude_prompt_with(
    env: &TestEnv,
    project: &Path,
    session: &str,
    prompt: &str,
    fields: Value,
) {
    let mut input = json!({ "session_id": session, "cwd": project, "prompt": prompt,
        "hook_event_name": "UserPromptSubmit" });
    if let (Some(input), Value::Object(fields)) = (input.as_object_mut(), fields) {
        input.extend(fields);
    }
    hook_json(env, project, "claude-code", &input);
}

/// A Claude Code prompt in `project` (session `s1`).
pub fn claude_prompt(env: &TestEnv, project: &Path, prompt: &str) {
    claude_prompt_with(env, project, "s1", prompt, json!({}));
}

/// A Claude Code `PostToolUse` of `tool` in session `session` in `project`: a `Write` or an
/// `Edit` names its `file`, anything else runs a shell command.
pub fn claude_tool(env: &TestEnv, project: &Path, session: &str, tool: &str, file: Option<&Path>) {
    let input = match file {
        Some(f) => json!({ "file_path": f, "content": "…" }),
        None => json!({ "command": "sh -c …" }),
    };
    let payload = json!({ "session_id": session, "cwd": project,
        "hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": input,
        "tool_use_id": format!("toolu_{tool}") });
    hook_json(env, project, "claude-code", &payload);
}

/// A Claude Code `Stop` (the turn ended) in session `session` in `project`.
pub fn claude_stop(env: &TestEnv, project: &Path, session: &str) {
    let payload = json!({ "session_id": session, "cwd": project,
        "hook_event_name": "Stop", "stop_hook_active": false });
    hook_json(env, project, "claude-code", &payload);
}
