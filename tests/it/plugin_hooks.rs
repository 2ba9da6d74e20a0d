//! `ckpt hook install opencode|kilo|cline`: the files of ckpt's own these agents run (the
//! OpenCode plugin and the placeholder of its plugin package; Cline's hook scripts), and what
//! install refuses or leaves alone: a file of someone else's at ckpt's place, a FIFO there, a
//! config folder with packages of its own. The agents' binaries run them in `conversations` and
//! `agent_cline` (ignored by default); here the files and the payloads are checked, with the
//! real client and daemon.

use std::path::Path;

use serde_json::Value;

use crate::agents::git_in_worktree;
use crate::harness::*;

fn placeholder(dir: &Path, package: &str) -> Value {
    let file = dir.join("node_modules").join(package).join("package.json");
    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap()
}

#[test]
fn the_plugin_and_its_placeholders_are_written_once_and_removed_whole() {
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "src/lib.rs", "pub fn f() {}\n");
    let out = env.ckpt_in(&p, &["hook", "install", "opencode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("wrote a placeholder"), "{said}");
    let plugin = p.join(".opencode/plugin/ckpt.js");
    let text = std::fs::read_to_string(&plugin).unwrap();
    assert!(text.contains(&format!("{:?}", ckpt_bin())), "{text}");
    for event in ["\"chat.message\"", "\"tool.execute.after\"", "session.idle"] {
        assert!(text.contains(event), "{event}");
    }
    let user = env.home.join("config/opencode");
    for dir in [p.join(".opencode"), user.clone()] {
        assert_eq!(
            placeholder(&dir, "@opencode-ai/plugin")["ckpt_placeholder"],
            true
        );
    }
    // The agent's own `.gitignore` of its folder: git and ckpt leave its packages out.
    let git_status = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(&p)
        .output()
        .unwrap();
    let listed = stdout(&git_status);
    assert!(
        !listed.contains("node_modules") && !listed.contains("package"),
        "{listed}"
    );
    // Installing again changes nothing.
    let again = env.json_in(&p, &["hook", "install", "opencode"]);
    assert_eq!(again["changed"], false, "{again}");
    assert_eq!(again["plugin_package"][0]["package"], "present", "{again}");
    // A checkpoint holds none of it, so no restore removes the hook.
    let c = env.json_in(&p, &["checkpoint", "-m", "with the plugin"]);
    let tree = env.ls_tree(c["id"].as_str().unwrap());
    assert!(tree.iter().all(|f| !f.starts_with(".opencode")), "{tree:?}");
    let status = env.json_in(&p, &["hook", "status"]);
    let row = status
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "opencode" && r["scope"] == "project")
        .unwrap()
        .clone();
    assert_eq!(row["plugin_package"], "placeholder", "{row}");
    assert!(row["state"]
        .as_str()
        .unwrap()
        .starts_with("installed with turn ends"));

    let out = env.ckpt_in(&p, &["hook", "uninstall", "opencode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!plugin.exists());
    assert!(!p.join(".opencode/node_modules").exists());
    assert!(!p.join(".opencode/package.json").exists());
    // The user's folder serves other projects: only `--user` takes its placeholder out.
    assert!(user.join("package.json").exists());
    let out = env.ckpt_in(&p, &["hook", "uninstall", "opencode", "--user"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!user.join("package.json").exists() && !user.join("node_modules").exists());
    env.fsck();
}

#[test]
fn a_plugin_not_ckpts_a_fifo_and_the_users_own_packages_are_left_alone() {
    let env = TestEnv::new();
    let p = env.proj();
    // Someone else's plugin at ckpt's place: refused, nothing written anywhere.
    let mine = "export const Mine = async () => ({});\n";
    write(&p, ".kilo/plugin/ckpt.js", mine);
    let out = env.ckpt_in(&p, &["hook", "install", "kilo"]);
    assert_eq!(out.status.code(), Some(64), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("a plugin ckpt did not write"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(p.join(".kilo/plugin/ckpt.js")).unwrap(),
        mine
    );
    assert!(!p.join(".kilo/package.json").exists());
    assert!(!env.home.join("config/kilo").exists());
    let out = env.ckpt_in(&p, &["hook", "uninstall", "kilo"]);
    assert_eq!(out.status.code(), Some(64));
    assert_eq!(
        std::fs::read_to_string(p.join(".kilo/plugin/ckpt.js")).unwrap(),
        mine
    );

    // A FIFO there: never opened for long, refused the same way.
    std::fs::remove_file(p.join(".kilo/plugin/ckpt.js")).unwrap();
    let fifo = p.join(".kilo/plugin/ckpt.js");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = env.ckpt_in(&p, &["hook", "install", "kilo"]);
    assert_eq!(out.status.code(), Some(64), "{}", stdout(&out));
    assert!(stderr(&out).contains("unreadable"), "{}", stderr(&out));
    std::fs::remove_file(&fifo).unwrap();

    // A config folder with packages of its own: its manifest stays as it is, and install
    // says the agent installs them at start.
    let own = r#"{"dependencies":{"left-pad":"1.3.0"}}"#;
    write(&p, ".kilo/package.json", own);
    let out = env.ckpt_in(&p, &["hook", "install", "kilo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("has packages of its own"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        std::fs::read_to_string(p.join(".kilo/package.json")).unwrap(),
        own
    );
    assert!(!p.join(".kilo/node_modules").exists());
    let out = env.ckpt_in(&p, &["hook", "uninstall", "kilo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join(".kilo/package.json")).unwrap(),
        own
    );

    // The daemon kept serving throughout.
    let c = env.json_in(&p, &["checkpoint", "-m", "still here"]);
    assert!(c["id"].is_string());
}

/// The plugin's three moments, as it sends them, make a prompt's checkpoint, a step and the
/// turn's end on the session's dialog.
#[test]
fn the_plugins_payloads_record_a_turn_with_its_steps() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    let session = "ses_dc516517affeZr9FNcAHhsoMu1";
    let send = |payload: Value| {
        let mut cmd = std::process::Command::new(ckpt_bin());
        env.env(&mut cmd);
        cmd.current_dir(&p).args(["hook", "opencode"]);
        let out = send_stdin(&mut cmd, &payload.to_string());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "", "the plugin reads nothing back");
    };
    let cwd = p.to_str().unwrap();
    send(
        serde_json::json!({"cwd": cwd, "hook_event_name": "UserPromptSubmit",
        "session_id": session, "prompt_id": "msg_23ae9c2f6001eSW0a5yyQ7eApU",
        "prompt": "make b", "model": "fake/fake-model"}),
    );
    write(&p, "b.txt", "b\n");
    send(
        serde_json::json!({"cwd": cwd, "hook_event_name": "PostToolUse", "session_id": session,
        "tool_name": "write", "tool_input": {"filePath": p.join("b.txt"), "content": "b\n"},
        "tool_use_id": "call_1"}),
    );
    send(serde_json::json!({"cwd": cwd, "hook_event_name": "Stop", "session_id": session}));
    let log = env.json_in(&p, &["log", "--steps"]);
    let turn = &log["prompts"][0];
    let list = env.json_in(&p, &["list", "--all-sessions"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "make b" && c["message_id"] == "msg_23ae9c2f6001eSW0a5yyQ7eApU"),
        "{list}"
    );
    assert_eq!(turn["dialog"], session, "{log}");
    let steps: Vec<(&Value, &Value)> = turn["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (&s["kind"], &s["tool"]))
        .collect();
    assert_eq!(
        steps,
        [
            (&Value::from("step"), &Value::from("write")),
            (&Value::from("turn-end"), &Value::Null)
        ],
        "{log}"
    );
}

/// Cline's hook scripts: executable, ckpt's own, refused over someone else's; its `TaskStart`
/// payload (no text) is labelled from the session's metadata, a tool's result is a step.
#[test]
fn clines_hook_files_and_payloads() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    let out = env.ckpt_in(&p, &["hook", "install", "cline"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for event in ["TaskStart", "TaskComplete", "PostToolUse"] {
        let file = p.join(".clinerules/hooks").join(event);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{event} is executable");
    }
    let status = env.json_in(&p, &["hook", "status"]);
    let row = status
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "cline" && r["scope"] == "project")
        .unwrap()
        .clone();
    assert!(
        row["state"]
            .as_str()
            .unwrap()
            .starts_with("installed with turn ends"),
        "{row}"
    );

    let session = "1796285589570_jpew7";
    let folder = env.home.join("home/.cline/data/sessions").join(session);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join(format!("{session}.json")),
        r#"{"session_id": "1796285589570_jpew7", "prompt": "make b from the TUI"}"#,
    )
    .unwrap();
    let run = |payload: Value| {
        let script = p.join(".clinerules/hooks/TaskStart");
        let mut cmd = std::process::Command::new(script);
        env.env(&mut cmd);
        let out = send_stdin(&mut cmd, &payload.to_string());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "");
    };
    let common = serde_json::json!({"clineVersion": "", "taskId": "conv_1796285589_x",
        "sessionContext": {"rootSessionId": session}, "workspaceRoots": [p]});
    let with = |extra: Value| {
        let mut v = common.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    run(with(
        serde_json::json!({"hookName": "agent_start", "taskStart": {"taskMetadata": {}}}),
    ));
    write(&p, "b.txt", "b\n");
    run(with(
        serde_json::json!({"hookName": "tool_result", "tool_result": {"id": "call_0",
        "name": "editor", "input": {"path": p.join("b.txt"), "new_text": "b\n"}}}),
    ));
    run(with(
        serde_json::json!({"hookName": "agent_end", "turn": {"status": "completed"}}),
    ));
    let log = env.json_in(&p, &["log", "--steps"]);
    let turn = &log["prompts"][0];
    assert_eq!(turn["label"], "make b from the TUI", "{log}");
    assert_eq!(turn["dialog"], session, "{log}");
    assert_eq!(turn["steps"][0]["tool"], "editor", "{log}");
    assert_eq!(turn["steps"][0]["touched"][0], "b.txt", "{log}");
    assert_eq!(turn["steps"][1]["kind"], "turn-end", "{log}");

    // Someone else's hook at one of ckpt's places: uninstall and install refuse, change nothing.
    let mine = "#!/bin/sh\necho mine\n";
    std::fs::write(p.join(".clinerules/hooks/TaskComplete"), mine).unwrap();
    for verb in ["uninstall", "install"] {
        let out = env.ckpt_in(&p, &["hook", verb, "cline"]);
        assert_eq!(out.status.code(), Some(64), "{verb}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("a hook ckpt did not write"),
            "{}",
            stderr(&out)
        );
    }
    assert!(p.join(".clinerules/hooks/TaskStart").exists());
    assert_eq!(
        std::fs::read_to_string(p.join(".clinerules/hooks/TaskComplete")).unwrap(),
        mine
    );
    std::fs::remove_file(p.join(".clinerules/hooks/TaskComplete")).unwrap();
    let removed = env.json_in(&p, &["hook", "uninstall", "cline"]);
    assert_eq!(removed["removed"], 2, "{removed}");
    assert!(!p.join(".clinerules/hooks/TaskStart").exists());
}

/// Runs `cmd` with `input` on its stdin.
fn send_stdin(cmd: &mut std::process::Command, input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}
