//! Exact turns with the real Claude Code offline: two sessions in one folder, their prompt,
//! after-tool and turn-end hooks as `ckpt hook install` wrote them, the user's own edits
//! between; `ckpt revert` of one session's turn leaves the other's files and the user's edits
//! byte-identical. Ignored by default (it needs the agents); `.ci/run` runs it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::agents::{agent_bin, git_in_worktree, model};
use crate::harness::*;

/// Claude Code headless in `p` against the stand-in model on `port`, writes and the shell
/// allowed; the caller adds the prompt.
fn claude(env: &TestEnv, p: &Path, port: u16) -> Command {
    let mut cmd = Command::new(agent_bin("claude", "claude"));
    env.env(&mut cmd);
    cmd.current_dir(p)
        .stdin(Stdio::null())
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "sk-ant-offline")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args([
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits",
        ])
        .args(["--allowedTools", "Bash"]);
    cmd
}

/// The session id of a finished headless turn.
fn session_of(out: &Output) -> String {
    assert!(out.status.success(), "{}\n{}", stdout(out), stderr(out));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    result["session_id"].as_str().unwrap().to_string()
}

/// One headless Claude Code turn on `prompt` (a new session); its session id.
fn claude_turn(env: &TestEnv, p: &Path, port: u16, prompt: &str) -> String {
    session_of(&claude(env, p, port).args(["-p", prompt]).output().unwrap())
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_sessions_in_one_folder_revert_only_their_own_turns() {
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    write(&p, "gone-a.txt", "A deletes me\n");
    write(&p, "gone-b.txt", "B deletes me\n");
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = env.json_in(&p, &["hook", "status"]);
    let row = status
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "claude-code" && r["scope"] == "project")
        .unwrap();
    assert_eq!(
        row["turn_events"],
        serde_json::json!(["Stop", "PostToolUse"]),
        "{row}"
    );
    let log = env.home.join("model.log");
    let (mut server, port) = model("anthropic.py", &p, &log);
    // Session A writes a.txt, appends to notes.txt and deletes gone-a.txt (Write, then Bash).
    let a = claude_turn(&env, &p, port, "A: write:a.txt delete:gone-a.txt");
    // The user edits between the turns; then session B does the same with its own files.
    write(&p, "user.txt", "the user's own file\n");
    let b = claude_turn(&env, &p, port, "B: write:b.txt delete:gone-b.txt");
    let _ = server.kill();
    let _ = server.wait();
    assert_ne!(a, b);

    let log = env.json_in(&p, &["log", "--steps"])["prompts"].clone();
    let prompt_of = |session: &str| {
        log.as_array()
            .unwrap()
            .iter()
            .find(|t| t["dialog"] == session)
            .unwrap_or_else(|| panic!("no prompt of {session}: {log}"))
            .clone()
    };
    let (ta, tb) = (prompt_of(&a), prompt_of(&b));
    // Each turn: its Write and its Bash as steps, then its end; a.txt added, notes.txt
    // modified, gone-a.txt deleted, and not the user's file.
    let kinds: Vec<&str> = ta["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["step", "step", "turn-end"], "{ta}");
    assert_eq!(ta["steps"][0]["tool"], "Write");
    assert_eq!(ta["steps"][0]["touched"], serde_json::json!(["a.txt"]));
    assert_eq!(ta["steps"][1]["tool"], "Bash");
    let counts = |t: &Value| {
        let c = &t["turn"];
        (
            c["added"].as_u64(),
            c["modified"].as_u64(),
            c["deleted"].as_u64(),
        )
    };
    assert_eq!(counts(&ta), (Some(1), Some(1), Some(1)), "{ta}");
    assert_eq!(counts(&tb), (Some(1), Some(1), Some(1)), "{tb}");

    let before = tree_state(&p);
    let out = env.ckpt_in(
        &p,
        &["--json", "revert", "--yes", ta["id"].as_str().unwrap()],
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{r} {}", stderr(&out));
    assert_eq!(
        r["reverted"],
        serde_json::json!(["a.txt", "gone-a.txt", "notes.txt"]),
        "{r}"
    );
    assert!(!p.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("gone-a.txt")).unwrap(),
        "A deletes me\n"
    );
    // B's line in notes.txt stays (one of the two identical appends goes), B's files stay,
    // the user's file stays.
    assert_eq!(
        std::fs::read_to_string(p.join("notes.txt")).unwrap(),
        "notes\nshell was here\n"
    );
    assert!(p.join("b.txt").exists() && !p.join("gone-b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("user.txt")).unwrap(),
        "the user's own file\n"
    );
    env.json_in(&p, &["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);
    env.fsck();
}

/// Waits (at most 120 s) until `path` exists, failing early when `child` ended first.
fn wait_for(path: &Path, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        assert!(child.try_wait().unwrap().is_none(), "the turn ended first");
        assert!(Instant::now() < deadline, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two Claude Code sessions whose turns overlap: B's whole turn runs between A's Write and A's
/// shell. The Write tools name their files, so each session's write is its own; B's shell ran
/// while A's turn was running too, so what it changed is ambiguous: refused unless forced.
#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_sessions_whose_turns_overlap_are_told_apart_by_their_tools() {
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    write(&p, "gone-a.txt", "A deletes me\n");
    write(&p, "gone-b.txt", "B deletes me\n");
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = env.home.join("model.log");
    let (mut server, port) = model("anthropic.py", &p, &log);
    let mut a = claude(&env, &p, port)
        .args(["-p", "A: write:a.txt delete:gone-a.txt wait:gate"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A has written a.txt and waits for its next model answer: B takes a whole turn.
    wait_for(&env.home.join("gate.waiting"), &mut a);
    let b = claude_turn(&env, &p, port, "B: write:b.txt delete:gone-b.txt");
    std::fs::write(env.home.join("gate"), "").unwrap();
    let a = session_of(&a.wait_with_output().unwrap());
    let _ = server.kill();
    let _ = server.wait();

    let log = env.json_in(&p, &["log", "--steps"])["prompts"].clone();
    let prompt_of = |session: &str| {
        log.as_array()
            .unwrap()
            .iter()
            .find(|t| t["dialog"] == session)
            .unwrap_or_else(|| panic!("no prompt of {session}: {log}"))
            .clone()
    };
    let (ta, tb) = (prompt_of(&a), prompt_of(&b));
    for t in [&ta, &tb] {
        let tools: Vec<&str> = t["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["tool"].as_str().unwrap_or("end"))
            .collect();
        assert_eq!(tools, ["Write", "Bash", "end"], "{t}");
    }
    // B's prompt came in the middle of A's turn.
    let at = |v: &Value| v["created_at"].as_str().unwrap().to_string();
    assert!(at(&ta["steps"][0]) < at(&tb), "{ta} {tb}");
    assert!(at(&tb["steps"][2]) < at(&ta["steps"][1]), "{ta} {tb}");
    // What each turn changed, as `log` counts it: all of A's; B's write, not its shell's
    // (ambiguous, so neither turn's).
    let counts = |t: &Value| {
        let c = &t["turn"];
        (
            c["added"].clone(),
            c["modified"].clone(),
            c["deleted"].clone(),
        )
    };
    assert_eq!(counts(&ta), (json!(1), json!(1), json!(1)), "{ta}");
    assert_eq!(counts(&tb), (json!(1), json!(0), json!(0)), "{tb}");

    let before = tree_state(&p);
    let revert = |id: &str, force: bool| {
        let mut args = vec!["--json", "revert", "--yes", id];
        if force {
            args.push("--force");
        }
        let out = env.ckpt_in(&p, &args);
        let r: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{} {}", stdout(&out), stderr(&out)));
        (out.status.code(), r)
    };
    let notes = || std::fs::read_to_string(p.join("notes.txt")).unwrap();
    let refused = |r: &Value| -> Vec<String> {
        r["refused"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["path"].as_str().unwrap().to_string())
            .collect()
    };
    // A's shell ran after B's turn ended: it is A's, and goes back with A's write. B's shell ran
    // while A's turn ran too: what it changed could be A's, so it is named and left.
    let (code, r) = revert(ta["id"].as_str().unwrap(), false);
    assert_eq!(code, Some(2), "{r}");
    assert_eq!(
        r["reverted"],
        json!(["a.txt", "gone-a.txt", "notes.txt"]),
        "{r}"
    );
    assert_eq!(refused(&r), ["gone-b.txt", "notes.txt"], "{r}");
    assert!(r["refused"][0]["reason"]
        .as_str()
        .unwrap()
        .contains(&tb["id"].as_str().unwrap()[..12]));
    assert!(p.join("b.txt").exists() && !p.join("gone-b.txt").exists());
    assert_eq!(notes(), "notes\nshell was here\n");
    env.json_in(&p, &["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);

    // B's Write is B's; its shell's changes could be A's too: named, left, then forced.
    let (code, r) = revert(tb["id"].as_str().unwrap(), false);
    assert_eq!(code, Some(2), "{r}");
    assert_eq!(r["reverted"], json!(["b.txt"]), "{r}");
    assert_eq!(refused(&r), ["gone-b.txt", "notes.txt"], "{r}");
    assert!(r["refused"][0]["reason"]
        .as_str()
        .unwrap()
        .contains(&ta["id"].as_str().unwrap()[..12]));
    assert!(!p.join("gone-b.txt").exists() && p.join("a.txt").exists());
    assert_eq!(notes(), "notes\nshell was here\nshell was here\n");
    env.json_in(&p, &["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);
    let (code, r) = revert(tb["id"].as_str().unwrap(), true);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(
        r["reverted"],
        json!(["b.txt", "gone-b.txt", "notes.txt"]),
        "{r}"
    );
    assert_eq!(notes(), "notes\nshell was here\n");
    assert!(p.join("a.txt").exists() && !p.join("gone-a.txt").exists());
    env.json_in(&p, &["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);
    env.fsck();
}

/// `ckpt rewind --to STEP` with the real Claude Code: the files as they were just after the
/// step's tool call, and a forked session that, resumed, shows the model the turn up to that
/// tool's result and not the later one's.
#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_rewinds_to_a_step_with_its_conversation() {
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    write(&p, "gone.txt", "the shell deletes me\n");
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = env.home.join("model.log");
    let (mut server, port) = model("anthropic.py", &p, &log);
    // Three tool calls: Write, Bash, Write.
    let session = claude_turn(&env, &p, port, "write:a.txt delete:gone.txt then:c.txt");
    let turn = env.json_in(&p, &["log", "--steps", "--dialog", &session])["prompts"][0].clone();
    let tools: Vec<&str> = turn["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tool"].as_str().unwrap_or("end"))
        .collect();
    assert_eq!(tools, ["Write", "Bash", "Write", "end"], "{turn}");
    assert_eq!(turn["steps"][2]["touched"], json!(["c.txt"]), "{turn}");
    assert!(p.join("c.txt").exists());
    let write_step = turn["steps"][0].clone();
    assert_eq!(write_step["tool"], "Write", "{turn}");
    assert!(write_step["tool_use_id"].is_string(), "{turn}");
    let at_step = env.ls_tree(write_step["id"].as_str().unwrap());

    let out = env.ckpt_in(
        &p,
        &[
            "--json",
            "rewind",
            "--yes",
            "--to",
            write_step["id"].as_str().unwrap(),
        ],
    );
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{} {}", stdout(&out), stderr(&out)));
    assert_eq!(out.status.code(), Some(0), "{r}");
    // The files: a.txt as the Write left it, the shell's edits and the third tool's undone.
    assert!(p.join("a.txt").exists() && !p.join("c.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("notes.txt")).unwrap(),
        "notes\n"
    );
    assert!(p.join("gone.txt").exists());
    let mut now: Vec<String> = tree_state(&p)
        .into_keys()
        .filter(|k| !k.starts_with(".git/") && !k.starts_with(".claude/"))
        .collect();
    now.sort();
    let mut expected: Vec<String> = at_step
        .iter()
        .filter(|f| !f.starts_with(".claude/"))
        .cloned()
        .collect();
    expected.sort();
    assert_eq!(now, expected);
    // The conversation: a new session ending with the Write's result.
    let fork = r["conversation"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("not forked: {r}"))
        .to_string();
    assert_ne!(fork, session);
    let path = r["conversation"]["path"].as_str().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        last.contains(write_step["tool_use_id"].as_str().unwrap()),
        "{last}"
    );

    // Resumed, the model is shown the Write's result and not the shell's.
    std::fs::write(&log, "").unwrap();
    let out = claude(&env, &p, port)
        .args(["--resume", &fork, "-p", "go on"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let shown = std::fs::read_to_string(&log).unwrap();
    let first: Value = shown
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["tools"].as_u64() > Some(0))
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(
        first["tool_results"].as_array().map(Vec::len),
        Some(1),
        "{first}"
    );
    assert!(
        first["user_texts"].to_string().contains("write:a.txt"),
        "{first}"
    );
    env.fsck();
}
