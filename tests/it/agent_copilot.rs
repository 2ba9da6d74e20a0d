//! Exact turns with the real GitHub Copilot CLI offline (a custom provider against a stand-in
//! Chat Completions server): the hooks `ckpt hook install copilot` writes (its own camelCase
//! `userPromptSubmitted`, `postToolUse`, `agentStop`) make each prompt a turn with a step per
//! tool call; `ckpt revert` of one session's turn leaves the other session's files and the user's
//! edits byte-identical, and a restore to a step is exact. Ignored by default (it needs the
//! agents); `.ci/run` runs it.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::agents::{agent_bin, git_in_worktree, model};
use crate::harness::*;

/// One Copilot CLI turn on `prompt` in `p` (a new session, the folder's hooks trusted for it);
/// its session id.
fn copilot_turn(env: &TestEnv, p: &Path, port: u16, prompt: &str) -> String {
    let mut cmd = Command::new(agent_bin("copilot", "copilot"));
    env.env(&mut cmd);
    let out = cmd
        .current_dir(p)
        .stdin(Stdio::null())
        .env("COPILOT_OFFLINE", "true")
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("http://127.0.0.1:{port}/v1"),
        )
        .env("COPILOT_PROVIDER_API_KEY", "sk-offline")
        .env("COPILOT_MODEL", "fake-model")
        .env("COPILOT_AUTO_UPDATE", "false")
        .args([
            "--allow-all-tools",
            "--output-format",
            "json",
            "--trust-folder",
        ])
        .args(["-p", prompt])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let last = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {}", stdout(&out)));
    last["sessionId"].as_str().unwrap().to_string()
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn copilot_cli_turns_are_exact_and_revert_alone() {
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    write(&p, "gone-a.txt", "A deletes me\n");
    write(&p, "gone-b.txt", "B deletes me\n");
    env.watch();
    let out = env.ckpt_in(&p, &["hook", "install", "copilot"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = env.home.join("model.log");
    let (mut server, port) = model("completions.py", &p, &log);
    let a = copilot_turn(&env, &p, port, "A: write:a.txt delete:gone-a.txt");
    write(&p, "user.txt", "the user's own file\n");
    let b = copilot_turn(&env, &p, port, "B: write:b.txt delete:gone-b.txt");
    let _ = server.kill();
    let _ = server.wait();
    assert_ne!(a, b);

    let log = env.json_in(&p, &["log", "--steps"])["prompts"].clone();
    let turn_of = |session: &str| {
        log.as_array()
            .unwrap()
            .iter()
            .find(|t| t["dialog"] == session)
            .unwrap_or_else(|| panic!("no prompt of {session}: {log}"))
            .clone()
    };
    let (ta, tb) = (turn_of(&a), turn_of(&b));
    for (t, file) in [(&ta, "a.txt"), (&tb, "b.txt")] {
        let steps: Vec<(Value, Value)> = t["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["kind"].clone(), s["tool"].clone()))
            .collect();
        assert_eq!(
            steps,
            [
                (json!("step"), json!("create")),
                (json!("step"), json!("bash")),
                (json!("turn-end"), Value::Null)
            ],
            "{t}"
        );
        assert_eq!(t["steps"][0]["touched"], json!([file]), "{t}");
        // Its own three changes, not the user's file.
        let c = &t["turn"];
        assert_eq!(
            (&c["added"], &c["modified"], &c["deleted"]),
            (&json!(1), &json!(1), &json!(1)),
            "{t}"
        );
    }

    let before = tree_state(&p);
    let out = env.ckpt_in(
        &p,
        &["--json", "revert", "--yes", ta["id"].as_str().unwrap()],
    );
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{} {}", stdout(&out), stderr(&out)));
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(
        r["reverted"],
        json!(["a.txt", "gone-a.txt", "notes.txt"]),
        "{r}"
    );
    assert!(!p.join("a.txt").exists() && p.join("gone-a.txt").exists());
    assert!(p.join("b.txt").exists() && !p.join("gone-b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("notes.txt")).unwrap(),
        "notes\nshell was here\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("user.txt")).unwrap(),
        "the user's own file\n"
    );
    env.json_in(&p, &["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);

    // A restore to B's first step: the files as they were just after its `create`.
    let step = tb["steps"][0]["id"].as_str().unwrap();
    let at_step = env.ls_tree(step);
    env.json_in(&p, &["restore", "--yes", step]);
    let mut now: Vec<String> = tree_state(&p)
        .into_keys()
        .filter(|k| !k.starts_with(".git/") && !k.starts_with(".github/"))
        .collect();
    now.sort();
    let mut expected: Vec<String> = at_step
        .into_iter()
        .filter(|f| !f.starts_with(".github/"))
        .collect();
    expected.sort();
    assert_eq!(now, expected);
    assert!(p.join("b.txt").exists() && p.join("gone-b.txt").exists());
    env.fsck();
}
