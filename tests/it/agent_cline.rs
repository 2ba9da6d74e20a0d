//! The real Cline CLI offline (an OpenAI-compatible provider against a stand-in Chat Completions
//! server): the hook files `ckpt hook install cline` writes (`TaskStart`, `PostToolUse`,
//! `TaskComplete`) make each prompt a checkpoint in the session's dialog, with a step per tool
//! call and the turn's end: a one-shot `cline "…"` (a new session), then a second prompt in that
//! session over ACP (`cline --acp`, how Cline resumes headless). A rewind puts the files back as
//! before the second prompt and leaves Cline's session files as they were. Ignored by default
//! (it needs the agents); `.ci/run` runs it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agents::{agent_bin, git_in_worktree, model};
use crate::harness::*;

fn cline(env: &TestEnv, cmd: &mut Command) {
    env.env(cmd);
    // No hub daemon that outlives the run; no update check.
    cmd.env("CLINE_SESSION_BACKEND_MODE", "local")
        .env("CLINE_NO_AUTO_UPDATE", "1")
        .stdin(Stdio::null());
}

/// Waits (at most 20 s) until the log shows `n` ended turns: Cline runs `TaskStart` and
/// `TaskComplete` detached, so their hooks may finish after the agent.
fn ended_turns(env: &TestEnv, p: &Path, n: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = env.json_in(p, &["log", "--steps"]);
        let ended = log["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                t["steps"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|s| s["kind"] == "turn-end"))
            })
            .count();
        if ended >= n || Instant::now() > deadline {
            return log;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn steps(turn: &Value) -> Vec<(String, String)> {
    turn["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let tool = s["tool"].as_str().unwrap_or("");
            (s["kind"].as_str().unwrap().to_string(), tool.to_string())
        })
        .collect()
}

/// The stand-in, stopped however the test ends.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn files(p: &Path) -> BTreeMap<String, String> {
    let mut t = tree_state(p);
    t.retain(|k, _| !k.starts_with(".git") && !k.starts_with(".clinerules/"));
    t
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn cline_cli_prompts_are_checkpoints_with_their_steps_and_rewind() {
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    for name in ["old.txt", "gone.txt", "notes.txt"] {
        write(&p, name, &format!("{name}\n"));
    }
    let out = env.ckpt_in(&p, &["hook", "install", "cline"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log_file = env.home.join("model-cline.log");
    let (server, port) = model("completions.py", &p, &log_file);
    let _server = Stopped(server);
    let bin = agent_bin("cline", "cline");
    let mut auth = Command::new(&bin);
    cline(&env, &mut auth);
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = auth
        .args(["auth", "-p", "openai-compatible", "-k", "sk-offline"])
        .args(["-m", "fake-model", "-b", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    // Turn A: a one-shot, a new session.
    let a = "turn A write:a.txt delete:old.txt";
    let mut turn = Command::new(&bin);
    cline(&env, &mut turn);
    let out = turn.current_dir(&p).args([a, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let log = ended_turns(&env, &p, 1);
    let session = log["prompts"][0]["dialog"].as_str().unwrap().to_string();
    let before_b = files(&p);

    // Turn B: the same session, over ACP.
    acp_turn(&env, &p, &session, "turn B write:b.txt delete:gone.txt");
    assert!(p.join("b.txt").exists() && !p.join("gone.txt").exists());
    let log = ended_turns(&env, &p, 2);
    let prompts = log["prompts"].as_array().unwrap();
    let labels: Vec<&str> = prompts
        .iter()
        .map(|t| t["label"].as_str().unwrap())
        .collect();
    // Cline sends no text: the session's first prompt from its metadata, the next by its place.
    assert_eq!(labels, ["Cline prompt 2", a], "{log}");
    assert!(
        prompts.iter().all(|t| t["dialog"] == session.as_str()),
        "{log}"
    );
    let want = |write: &str| {
        [("step", write), ("step", "run_commands"), ("turn-end", "")]
            .map(|(k, t)| (k.to_string(), t.to_string()))
    };
    // One-shot runs offer `editor`; over ACP the default model gets `apply_patch`.
    assert_eq!(steps(&prompts[1]), want("editor"), "{log}");
    assert_eq!(steps(&prompts[0]), want("apply_patch"), "{log}");
    for turn in prompts {
        assert_eq!(turn["conversation"]["can_fork"], true, "{turn}");
    }

    let cline_sessions = env.home.join("home/.cline/data/sessions");
    let original = tree_state(&cline_sessions.join(&session));
    let out = env.ckpt_in(&p, &["rewind", "--both", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(files(&p), before_b, "the files are as before B");
    assert_eq!(
        tree_state(&cline_sessions.join(&session)),
        original,
        "untouched"
    );
    let forked = report["conversation"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(forked, session);
    assert_eq!(
        report["conversation"]["resume"],
        serde_json::json!(["cline", "--id", forked])
    );

    // The fork, resumed over ACP: the model is shown A and C, never B.
    std::fs::write(&log_file, "").unwrap();
    acp_turn(&env, &p, &forked, "turn C write:c.txt delete:a.txt");
    let shown: Vec<Value> = std::fs::read_to_string(&log_file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["reply"] != serde_json::json!(["text"]))
        .collect();
    assert!(!shown.is_empty(), "no model call for C");
    for request in &shown {
        let texts = request["user_texts"].to_string();
        assert!(
            texts.contains("turn A") && texts.contains("turn C"),
            "{texts}"
        );
        assert!(!texts.contains("turn B"), "{texts}");
    }
    assert!(p.join("c.txt").exists());
    // Its conversation is as it was; its metadata is Cline's own to change (at C's start, its
    // "stale session reconciler" marks the one-shot's session `failed`, ckpt or not).
    let messages = format!("{session}.messages.json");
    assert!(original.contains_key(&messages), "{:?}", original.keys());
    let after = tree_state(&cline_sessions.join(&session));
    assert_eq!(after.get(&messages), original.get(&messages), "after C");
    env.fsck();
}

/// One prompt in Cline session `session` over ACP (`cline --acp`, how it resumes headless).
fn acp_turn(env: &TestEnv, p: &Path, session: &str, prompt: &str) {
    let mut acp = Command::new("/usr/bin/python3");
    cline(env, &mut acp);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/acp.py");
    let out = acp
        // ACP asks for Cline's own sign-in unless a key is given; the provider stays ours.
        .env("CLINE_API_KEY", "sk-offline")
        .env("CLINE_PROVIDER", "openai-compatible")
        .arg(script)
        .arg(p)
        .arg(session)
        .arg(prompt)
        .arg("--")
        .arg(agent_bin("cline", "cline"))
        .args(["--acp", "--auto-approve", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
}

/// A Cline fork whose row cannot be copied (the original's row is not in sessions.db) leaves no
/// session folder behind and says why; with the row there, the fork's row names its own
/// messages. Cline's files are made by hand here (as its binary writes them), so this runs
/// without the agent; the real `sqlite3` writes the index.
#[test]
fn a_cline_fork_is_indexed_or_leaves_nothing() {
    if Command::new("sqlite3").arg("-version").output().is_err() {
        eprintln!("skipped: sqlite3 is not installed (.ci/run installs it)");
        return;
    }
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    let session = "1796285589570_jpew7";
    let sessions = env.home.join("home/.cline/data/sessions");
    let folder = sessions.join(session);
    std::fs::create_dir_all(&folder).unwrap();
    let messages_file = folder.join(format!("{session}.messages.json"));
    let meta = serde_json::json!({"session_id": session, "prompt": "make b",
        "messages_path": messages_file});
    std::fs::write(folder.join(format!("{session}.json")), meta.to_string()).unwrap();
    let user =
        |t: &str| serde_json::json!({"role": "user", "content": [{"type": "text", "text": t}]});
    let reply =
        serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]});
    let save = |messages: Vec<Value>| {
        let doc = serde_json::json!({"sessionId": session, "origin": {"sessionId": session},
            "messages": messages});
        std::fs::write(&messages_file, doc.to_string()).unwrap();
    };
    save(vec![]);
    let start = serde_json::json!({"hookName": "agent_start", "taskId": "conv_1",
        "sessionContext": {"rootSessionId": session}, "workspaceRoots": [p]});
    let hook = |payload: &Value| {
        let mut cmd = Command::new(ckpt_bin());
        env.env(&mut cmd);
        let mut child = cmd
            .current_dir(&p)
            .args(["hook", "cline"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.to_string().as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    };
    hook(&start);
    let mut start = start;
    start["taskId"] = "conv_2".into();
    write(&p, "b.txt", "b\n");
    save(vec![
        user("<user_input mode=\"act\">make b</user_input>"),
        reply.clone(),
    ]);
    hook(&start);
    write(&p, "c.txt", "c\n");
    save(vec![
        user("make b"),
        reply.clone(),
        user("make c"),
        reply.clone(),
    ]);
    let db = env.home.join("home/.cline/data/db/sessions.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let sql = |statement: &str| {
        let out = Command::new("sqlite3")
            .arg(&db)
            .arg(statement)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    sql(
        "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, status TEXT NOT NULL, \
         messages_path TEXT);",
    );
    let before = tree_state(&sessions);

    // No row for the session: the files are rewound, the fork is not, and nothing is left.
    let out = env.ckpt_in(&p, &["rewind", "--both", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !p.join("c.txt").exists() && p.join("b.txt").exists(),
        "{report}"
    );
    let why = report["conversation_skipped"].as_str().unwrap_or_default();
    assert!(why.contains("0 rows copied"), "{report}");
    assert_eq!(tree_state(&sessions), before, "no folder of a fork is left");
    assert_eq!(sql("SELECT count(*) FROM sessions;").trim(), "0");

    // With the row: the fork is a folder and a row of its own.
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let path = messages_file.to_str().unwrap();
    sql(&format!(
        "INSERT INTO sessions VALUES ('{session}', 'completed', '{path}');"
    ));
    let out = env.ckpt_in(&p, &["rewind", "--both", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let forked = report["conversation"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let row = sql(&format!(
        "SELECT status, messages_path FROM sessions WHERE session_id = '{forked}';"
    ));
    let own = sessions
        .join(&forked)
        .join(format!("{forked}.messages.json"));
    assert_eq!(row.trim(), format!("completed|{}", own.display()));
    let doc: Value = serde_json::from_slice(&std::fs::read(&own).unwrap()).unwrap();
    assert_eq!(doc["messages"].as_array().unwrap().len(), 2, "{doc}");
    assert_eq!(doc["sessionId"], forked.as_str());
    // The original session is as it was.
    assert_eq!(tree_state(&folder), {
        let mut kept = before.clone();
        kept.retain(|k, _| k.starts_with(session));
        kept.into_iter()
            .map(|(k, v)| (k[session.len() + 1..].to_string(), v))
            .collect::<BTreeMap<_, _>>()
    });
}
