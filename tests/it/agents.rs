//! Real agents performing real turns offline: the agent's own binary (installed by
//! `tests/agents/install.sh`), pointed at a scripted stand-in for its model API on loopback,
//! with the hook that `ckpt hook install` wrote. Ignored by default (they need the agents);
//! `.ci/run` installs them and runs these with `--ignored`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::harness::*;

fn agent_bin(name: &str, bin: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/agents")
        .join(name)
        .join("node_modules/.bin")
        .join(bin);
    assert!(
        path.exists(),
        "{} is missing: run tests/agents/install.sh",
        path.display()
    );
    path
}

/// Starts a stand-in model server; returns it and its port.
fn model(script: &str, project: &Path, log: &Path) -> (Child, u16) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents")
        .join(script);
    let mut child = Command::new("/usr/bin/python3")
        .arg(script)
        .arg(project)
        .arg(log)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    (
        child,
        line.trim()
            .parse()
            .expect("the model server prints its port"),
    )
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_turn_is_checkpointed_before_its_edits_and_rewound() {
    let claude = agent_bin("claude", "claude");
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "old.txt", "to be deleted by the agent\n");
    write(&p, "notes.txt", "notes\n");
    let before = tree_state(&p);
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = env.home.join("model.log");
    let (mut server, port) = model("anthropic.py", &p, &log);
    let mut cmd = Command::new(&claude);
    env.env(&mut cmd);
    let out = cmd
        .current_dir(&p)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "sk-ant-offline")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args([
            "-p",
            "write a file and run a command",
            "--output-format",
            "json",
        ])
        .args(["--permission-mode", "acceptEdits", "--allowedTools", "Bash"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "claude failed: {}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = result["session_id"].as_str().unwrap().to_string();
    // The agent acted: it wrote a file, and its shell command edited and deleted others.
    assert!(
        p.join("written-by-agent.txt").is_file(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert!(!p.join("old.txt").exists());
    // The hook recorded the prompt, on the session's dialog, before any of that.
    let list = env.json(&["list", "--dialog", &session]);
    let message = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "message")
        .unwrap_or_else(|| panic!("no message checkpoint: {list}"));
    assert_eq!(message["label"], "write a file and run a command");
    let files = env.ls_tree(message["id"].as_str().unwrap());
    assert!(files.iter().any(|f| f.ends_with("old.txt")), "{files:?}");
    assert!(
        !files.iter().any(|f| f.contains("written-by-agent")),
        "{files:?}"
    );
    let meta = &env.json(&["show", message["id"].as_str().unwrap()])["meta"];
    assert_eq!(meta["hook_event_name"], "UserPromptSubmit", "{meta}");
    assert!(meta["transcript_path"].is_string(), "{meta}");
    // Nothing polluted the model's context: the hook printed nothing.
    assert!(!std::fs::read_to_string(&log)
        .unwrap()
        .contains("checkpoint "));
    // One command brings the project back exactly.
    let out = env.ckpt_in(&p, &["rewind", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut now = tree_state(&p);
    now.retain(|k, _| !k.starts_with(".claude/") && !k.starts_with(".git/"));
    let mut expected = before;
    expected.retain(|k, _| !k.starts_with(".git/"));
    assert_eq!(now, expected);
    env.fsck();
}

fn git_in_worktree(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}
