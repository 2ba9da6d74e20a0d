//! `ckpt hook generic`, the adapter for any agent that speaks Claude Code's hook dialect, driven
//! by a hand-made caller: a shell script that, like an in-house agent, pipes its events to the
//! hook (a prompt, two tool calls, the turn's end, and a continuation that is no prompt). The
//! prompt is one checkpoint in the session's dialog, each tool call a step, the turn exact (a
//! revert takes back only its changes), and bad input is refused or noted without a trace.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::harness::*;

/// Runs `script` with bash in `dir`, with ckpt as the tests' client on its PATH-free command
/// line (`$CKPT`): what an agent's hook runner does.
fn agent_script(env: &TestEnv, dir: &Path, script: &str) {
    let mut cmd = Command::new("bash");
    env.env(&mut cmd);
    let out = cmd
        .current_dir(dir)
        .env("CKPT", ckpt_bin())
        .args(["-euc", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out), "", "the hook prints nothing");
}

#[test]
fn a_hand_made_caller_gets_prompts_steps_and_exact_turns() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "notes.txt", "notes\n");
    write(&p, "old.txt", "old\n");
    env.watch();
    let script = r#"
        event() { printf '%s' "$1" | "$CKPT" hook generic; }
        cwd=$(pwd)
        event '{"hook_event_name":"UserPromptSubmit","session_id":"house-agent-7","cwd":"'"$cwd"'","prompt":"add a.txt and tidy","prompt_id":"p-1","model":"in-house-1"}'
        printf 'from the agent\n' > a.txt
        event '{"hook_event_name":"PostToolUse","session_id":"house-agent-7","cwd":"'"$cwd"'","tool_name":"Write","tool_input":{"file_path":"'"$cwd"'/a.txt"},"tool_use_id":"t-1"}'
        event '{"hook_event_name":"UserPromptSubmit","session_id":"house-agent-7","cwd":"'"$cwd"'","prompt":""}'
        printf 'shell\n' >> notes.txt && rm old.txt
        event '{"hook_event_name":"PostToolUse","session_id":"house-agent-7","cwd":"'"$cwd"'","tool_name":"run_tests","tool_input":{"command":"make"}}'
        event '{"hook_event_name":"Stop","session_id":"house-agent-7","cwd":"'"$cwd"'"}'
    "#;
    agent_script(&env, &p, script);
    write(&p, "user.txt", "the user's, after the turn\n");

    let list = env.json(&["list", "--all-sessions"]);
    let prompts: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "message")
        .collect();
    assert_eq!(prompts.len(), 1, "the continuation is no prompt: {list}");
    let c = prompts[0];
    assert_eq!(
        (&c["label"], &c["dialog"], &c["message_id"]),
        (
            &json!("add a.txt and tidy"),
            &json!("house-agent-7"),
            &json!("p-1")
        )
    );
    let shown = env.json(&["show", c["id"].as_str().unwrap()]);
    assert_eq!(shown["meta"]["ckpt_agent"], "generic", "{shown}");
    assert_eq!(shown["meta"]["model"], "in-house-1", "{shown}");

    let log = env.json(&["log", "--steps"])["prompts"][0].clone();
    let steps: Vec<(&Value, &Value)> = log["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (&s["kind"], &s["tool"]))
        .collect();
    assert_eq!(
        steps,
        [
            (&json!("step"), &json!("Write")),
            (&json!("step"), &json!("run_tests")),
            (&json!("turn-end"), &Value::Null)
        ],
        "{log}"
    );
    assert_eq!(log["steps"][0]["touched"], json!(["a.txt"]), "{log}");
    let turn = &log["turn"];
    assert_eq!(
        (&turn["added"], &turn["modified"], &turn["deleted"]),
        (&json!(1), &json!(1), &json!(1)),
        "{log}"
    );

    // The turn is exact: its revert leaves the user's later file alone.
    let out = env.ckpt(&["--json", "revert", "--yes", c["id"].as_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!p.join("a.txt").exists() && p.join("old.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("notes.txt")).unwrap(),
        "notes\n"
    );
    assert!(p.join("user.txt").exists());
    env.fsck();
}

#[test]
fn bad_input_to_the_generic_hook_changes_nothing_and_is_noted() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    // There is no settings file to install into: a clear error, nothing written.
    let out = env.ckpt_in(&p, &["hook", "install", "generic"]);
    assert_eq!(out.status.code(), Some(64), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("ckpt hook generic"),
        "{}",
        stderr(&out)
    );
    let out = env.ckpt_in(&p, &["hook", "uninstall", "generic"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(!p.join(".ckpt-generic-hook.json").exists());
    let out = env.ckpt_in(&p, &["mcp", "install", "generic"]);
    assert_eq!(out.status.code(), Some(64));
    // Not JSON, or JSON but not an object: exit 0, nothing recorded, and each kept as an
    // unrecorded prompt with why, for `ckpt status`.
    for input in ["not json", "[1, 2]"] {
        let out = run_hook(&env, &p, "generic", input, &[]);
        assert_eq!(out.status.code(), Some(0), "{input}");
        assert_eq!(stdout(&out), "", "{input}");
        assert!(
            stderr(&out).contains("ckpt hook generic"),
            "{}",
            stderr(&out)
        );
    }
    let list = env.json(&["list", "--all-sessions"]);
    let messages = |list: &Value| -> Vec<Value> {
        let all = list.as_array().unwrap().iter();
        all.filter(|c| c["kind"] == "message").cloned().collect()
    };
    assert!(messages(&list).is_empty(), "{list}");
    let status = env.json_in(&p, &["status"]);
    let missed = status["unrecorded"].to_string();
    assert!(
        missed.contains("not JSON") && missed.contains("not a JSON object"),
        "{status}"
    );
    // A prompt that is not a string still marks a user message: its checkpoint is the safety
    // net, unlabelled.
    let odd = json!({"session_id": "odd", "cwd": p, "prompt": 42});
    hook_json(&env, &p, "generic", &odd);
    let list = env.json(&["list", "--all-sessions"]);
    let odd = messages(&list);
    assert_eq!(odd.len(), 1, "{list}");
    assert_eq!(
        (&odd[0]["dialog"], &odd[0]["label"]),
        (&json!("odd"), &json!(""))
    );
    // A tool call with no turn running, and a turn end with none: nothing, and it keeps serving.
    let tool = json!({"hook_event_name": "PostToolUse", "session_id": "s", "cwd": p,
        "tool_name": "Write", "tool_input": {"file_path": p.join("a.txt")}});
    let stop = json!({"hook_event_name": "Stop", "session_id": "s", "cwd": p});
    for input in [&tool, &stop] {
        let out = run_hook(&env, &p, "generic", &input.to_string(), &[]);
        assert_eq!(out.status.code(), Some(0));
    }
    // A payload naming no event is a prompt (as an agent without event names sends one).
    let bare = json!({"session_id": "s", "cwd": p, "prompt": "the bare prompt"});
    hook_json(&env, &p, "generic", &bare);
    let list = env.json(&["list", "--all-sessions"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "the bare prompt" && c["dialog"] == "s"),
        "{list}"
    );
}
