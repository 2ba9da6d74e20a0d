//! `ckpt mcp`, the MCP server agents call, driven by the official MCP Python SDK
//! (`tests/mcp/client.py`, installed by `tests/mcp/install.sh`) and by the real Claude Code
//! offline; `ckpt mcp install` writing each agent's configuration. The SDK and agent tests are
//! ignored by default; `.ci/run` installs what they need and runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::harness::*;

fn sdk_python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run tests/mcp/install.sh",
        python.display()
    );
    python
}

/// Runs the SDK client against `ckpt mcp [server_args]` in `project`: the server's tools and
/// each call's result.
fn session(env: &TestEnv, project: &Path, calls: Value, server_args: &[&str]) -> Value {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let mut cmd = Command::new(sdk_python());
    env.env(&mut cmd);
    let out = cmd
        .arg(client)
        .arg(ckpt_bin())
        .arg(project)
        .arg(calls.to_string())
        .args(server_args)
        .current_dir(project)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn text(result: &Value) -> &str {
    result["text"].as_str().unwrap()
}

#[test]
#[ignore = "needs the MCP Python SDK: tests/mcp/install.sh, then --ignored (.ci/run does both)"]
fn the_sdk_reads_the_timeline_and_restores_only_when_allowed_and_confirmed() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    write(&p, ".env", "TOKEN=secret-value\n");
    claude_prompt(&env, &p, "first prompt");
    write(&p, "f.txt", "one\ntwo\n");
    claude_prompt(&env, &p, "second prompt");
    write(&p, "f.txt", "one\ntwo\nthree\n");
    write(&p, ".env", "TOKEN=another-secret\n");

    let calls = json!([
        ["list_checkpoints", {"limit": 2}],
        ["list_checkpoints", {"prompts_only": true}],
        ["show_checkpoint", {"id": "@"}],
        ["diff", {"from": "@"}],
        ["diff", {"from": "@", "max_bytes": 10}],
        ["blame", {"path": "f.txt"}],
        ["file_at", {"id": "@~1", "path": "f.txt"}],
        ["file_at", {"id": "@", "path": ".env"}],
        ["blame", {"path": ".env"}],
        ["restore", {"id": "@~1", "confirm": true}],
        ["show_checkpoint", {"id": "no-such"}],
    ]);
    let s = session(&env, &p, calls, &[]);
    assert_eq!(s["server"], "ckpt");
    let tools: Vec<&str> = s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "list_checkpoints",
            "show_checkpoint",
            "diff",
            "blame",
            "file_at"
        ]
    );
    let r = s["results"].as_array().unwrap();
    assert_eq!(
        r[0]["structured"]["checkpoints"].as_array().unwrap().len(),
        2,
        "{}",
        r[0]
    );
    assert_eq!(r[0]["structured"]["next_cursor"], "2", "{}", r[0]);
    let prompts: Vec<&str> = r[1]["structured"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["second prompt", "first prompt"]);
    assert_eq!(r[2]["structured"]["label"], "second prompt", "{}", r[2]);
    assert!(text(&r[3]).contains("+three"), "{}", r[3]);
    assert!(
        r[4]["structured"]["next_offset"].as_u64().is_some(),
        "{}",
        r[4]
    );
    let blamed: Vec<&str> = r[5]["structured"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["prompt"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(blamed, ["-", "first prompt", "second prompt"], "{}", r[5]);
    assert_eq!(r[6]["structured"]["content"], "one\n", "{}", r[6]);
    // Secrets ckpt keeps out are nowhere: not in a file, a blame or a diff.
    for (i, result) in r.iter().enumerate() {
        assert!(!result.to_string().contains("secret"), "call {i}: {result}");
    }
    assert!(r[7]["is_error"].as_bool().unwrap(), "{}", r[7]);
    assert!(r[8]["is_error"].as_bool().unwrap(), "{}", r[8]);
    assert!(
        r[9]["is_error"].as_bool().unwrap() && text(&r[9]).contains("no tool"),
        "{}",
        r[9]
    );
    assert!(r[10]["is_error"].as_bool().unwrap(), "{}", r[10]);
    assert_eq!(
        std::fs::read_to_string(p.join("f.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );

    // With --allow-restore: a plan first, then the restore, once per prompt.
    let calls = json!([
        ["restore", {"id": "@~1"}],
        ["restore", {"id": "@~1", "confirm": true}],
        ["restore", {"id": "@", "confirm": true}],
    ]);
    let mut ids = env.json_in(&p, &["list", "--all-sessions"]);
    let first = ids
        .as_array_mut()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "first prompt")
        .unwrap()["id"]
        .clone();
    let calls = json!(calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if c[1]["id"] == "@~1" {
                c[1]["id"] = first.clone();
            }
            c
        })
        .collect::<Vec<_>>());
    let s = session(&env, &p, calls, &["--allow-restore"]);
    let tools = s["tools"].to_string();
    assert!(tools.contains("\"restore\""), "{tools}");
    let r = s["results"].as_array().unwrap();
    assert_eq!(r[0]["structured"]["restored"], false, "{}", r[0]);
    assert!(
        r[0]["structured"]["written"].to_string().contains("f.txt"),
        "{}",
        r[0]
    );
    assert_eq!(r[1]["structured"]["restored"], true, "{}", r[1]);
    assert!(r[2]["is_error"].as_bool().unwrap(), "{}", r[2]);
    assert!(text(&r[2]).contains("already restored"), "{}", r[2]);
    assert_eq!(std::fs::read_to_string(p.join("f.txt")).unwrap(), "one\n");
    let list = env.json_in(&p, &["list", "--all-sessions"]);
    assert!(
        list[0]["label"]
            .as_str()
            .unwrap()
            .ends_with("asked by the agent (ckpt mcp)"),
        "{list}"
    );
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join("f.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    env.fsck();
}

/// `ckpt mcp install` writes what each agent's own `mcp add` writes, idempotent, merged into
/// the user's settings; `hook status` shows it; `uninstall` takes only ckpt's entry out; a
/// settings file that is not valid is refused and left as it was.
#[test]
fn mcp_install_writes_each_agents_configuration() {
    let env = TestEnv::new();
    let p = env.proj();
    write(
        &p,
        ".gemini/settings.json",
        "{\"theme\": \"dark\", \"mcpServers\": {\"other\": {\"command\": \"x\"}}}\n",
    );
    let codex = env.home.join("codex");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(codex.join("config.toml"), "# mine\nmodel = \"m\"\n").unwrap();
    let ckpt = |args: &[&str]| {
        let mut cmd = Command::new(ckpt_bin());
        env.env(&mut cmd);
        cmd.env("CODEX_HOME", &codex)
            .current_dir(&p)
            .args(args)
            .output()
            .unwrap()
    };
    for agent in ["claude-code", "codex", "gemini", "cursor", "qwen"] {
        let out = ckpt(&["--json", "mcp", "install", agent]);
        assert_eq!(out.status.code(), Some(0), "{agent}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["changed"], true, "{v}");
        let again: Value =
            serde_json::from_slice(&ckpt(&["--json", "mcp", "install", agent]).stdout).unwrap();
        assert_eq!(
            again["changed"], false,
            "{agent}: installing twice changes nothing"
        );
    }
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.join("home/.claude.json")).unwrap())
            .unwrap();
    let entry = &claude["projects"][p.to_str().unwrap()]["mcpServers"]["ckpt"];
    assert_eq!(entry["type"], "stdio", "{claude}");
    assert_eq!(entry["command"], ckpt_bin(), "{claude}");
    assert_eq!(entry["args"], json!(["mcp"]), "{claude}");
    let toml = std::fs::read_to_string(codex.join("config.toml")).unwrap();
    assert!(toml.starts_with("# mine\nmodel = \"m\"\n"), "{toml}");
    assert!(toml.contains("[mcp_servers.ckpt]\ncommand = "), "{toml}");
    let gemini: Value =
        serde_json::from_str(&std::fs::read_to_string(p.join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(gemini["theme"], "dark");
    assert_eq!(gemini["mcpServers"]["other"]["command"], "x");
    assert_eq!(gemini["mcpServers"]["ckpt"]["args"], json!(["mcp"]));
    let cursor: Value =
        serde_json::from_str(&std::fs::read_to_string(p.join(".cursor/mcp.json")).unwrap())
            .unwrap();
    assert_eq!(cursor["mcpServers"]["ckpt"]["command"], ckpt_bin());
    // --allow-restore is what the agent then starts.
    let out = ckpt(&["mcp", "install", "cursor", "--allow-restore"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status: Value =
        serde_json::from_slice(&ckpt(&["--json", "hook", "status"]).stdout).unwrap();
    let mcp: Vec<String> = status
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["scope"] == "mcp")
        .map(|r| {
            format!(
                "{} {}",
                r["agent"].as_str().unwrap(),
                r["state"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        mcp.contains(&"claude-code MCP server installed (ckpt mcp)".to_string()),
        "{mcp:?}"
    );
    assert!(
        mcp.contains(&"codex MCP server installed (ckpt mcp)".to_string()),
        "{mcp:?}"
    );
    assert!(
        mcp.contains(&"cursor MCP server installed (ckpt mcp --allow-restore)".to_string()),
        "{mcp:?}"
    );
    for agent in ["codex", "gemini"] {
        let out = ckpt(&["mcp", "uninstall", agent]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert_eq!(
        std::fs::read_to_string(codex.join("config.toml")).unwrap(),
        "# mine\nmodel = \"m\"\n"
    );
    let gemini: Value =
        serde_json::from_str(&std::fs::read_to_string(p.join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert!(
        gemini["mcpServers"].get("ckpt").is_none() && gemini["mcpServers"]["other"].is_object()
    );
    // Not valid: refused, untouched.
    write(&p, ".gemini/settings.json", "{ not json");
    let out = ckpt(&["mcp", "install", "gemini"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join(".gemini/settings.json")).unwrap(),
        "{ not json"
    );
    std::fs::write(codex.join("config.toml"), "model = [").unwrap();
    let out = ckpt(&["mcp", "install", "codex"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(codex.join("config.toml")).unwrap(),
        "model = ["
    );
    let out = ckpt(&["mcp", "install", "copilot"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
}

/// The real Claude Code, offline: with `ckpt mcp install claude-code`, the stand-in model loads
/// ckpt's tool with ToolSearch (Claude defers MCP tools in `-p` mode), calls it, and is then shown
/// the prompts of the timeline.
#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_calls_ckpts_mcp_server() {
    let env = TestEnv::new();
    let p = env.proj();
    crate::agents::git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.ckpt_in(&p, &["mcp", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    claude_prompt(&env, &p, "an earlier prompt about the parser");
    let log = env.home.join("model.log");
    let (mut server, port) = crate::agents::model("anthropic.py", &p, &log);
    let claude = crate::agents::agent_bin("claude", "claude");
    let mut cmd = Command::new(claude);
    env.env(&mut cmd);
    let tool = "mcp__ckpt__list_checkpoints";
    let out = cmd
        .current_dir(&p)
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
        .args(["--allowedTools", &format!("Bash,ToolSearch,{tool}")])
        .args(["-p", "use-mcp: what did the user ask before?"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let model_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\n{}\nmodel: {model_log}",
        stdout(&out),
        stderr(&out)
    );
    // The last request shows the model the tool's answer: the prompts, this one included.
    let last = model_log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|e| e["reply"] == json!(["text"]) && e["tools"].as_u64().unwrap_or(0) > 0)
        .unwrap_or_else(|| panic!("no final request: {model_log}"));
    let results = last["tool_results"].to_string();
    assert!(
        results.contains("an earlier prompt about the parser"),
        "{results}"
    );
    assert!(
        results.contains("use-mcp: what did the user ask before?"),
        "{results}"
    );
}

/// The README's example, as written, with the real Claude Code: after a turn that changed files,
/// the user asks what it changed, the model calls `diff` with no arguments, and it is shown that
/// turn's changes (not an empty diff of the question's own checkpoint).
#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_asked_what_it_changed_is_shown_its_last_turn() {
    use crate::conversations::{Driver, Which};
    let env = TestEnv::new();
    let p = env.proj();
    crate::agents::git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    write(&p, "old.txt", "to be deleted\n");
    let agent = Driver::start(Which::Claude, &env, &p);
    let out = env.ckpt_in(&p, &["mcp", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    agent.turn(&p, "add a cache to the parser", None);
    assert!(p.join("written-by-agent.txt").exists());
    let session = env.json_in(&p, &["list"])[0]["dialog"]
        .as_str()
        .unwrap()
        .to_string();
    agent.turn(
        &p,
        "what-did-you-change: the parser tests fail since your last change — what did you change?",
        Some(&session),
    );
    let log = agent.model_log();
    let shown = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| e["tool_results"].to_string())
        .find(|r| r.contains("diff --git"))
        .unwrap_or_else(|| panic!("the model was shown no diff: {log}"));
    assert!(shown.contains("written-by-agent.txt"), "{shown}");
    assert!(shown.contains("shell was here"), "{shown}");
    assert!(shown.contains("your last finished turn"), "{shown}");
}

/// Codex and Gemini CLI, offline, the same way: the stand-in model calls ckpt's tool under the
/// name the agent declares it by (Codex: `list_checkpoints` in the namespace `mcp__ckpt`; Gemini
/// CLI: `mcp_ckpt_list_checkpoints`) and is shown the timeline's prompts.
fn agent_calls_ckpts_mcp_server(which: crate::conversations::Which, name: &str) {
    use crate::conversations::{codex_home, Driver};
    let env = TestEnv::new();
    let p = env.proj();
    crate::agents::git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    let agent = Driver::start(which, &env, &p);
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let out = cmd
        .env("CODEX_HOME", codex_home(&env))
        .current_dir(&p)
        .args(["mcp", "install", name])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    claude_prompt(&env, &p, "an earlier prompt about the parser");
    agent.turn(&p, "use-mcp: what did the user ask before?", None);
    let log = agent.model_log();
    let shown = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|e| {
            e["tool_results"]
                .to_string()
                .contains("an earlier prompt about the parser")
        });
    assert!(shown, "the model was not shown ckpt's answer: {log}");
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn codex_calls_ckpts_mcp_server() {
    agent_calls_ckpts_mcp_server(crate::conversations::Which::Codex, "codex");
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn gemini_cli_calls_ckpts_mcp_server() {
    agent_calls_ckpts_mcp_server(crate::conversations::Which::Gemini, "gemini");
}

/// The `revert` tool (only with `--allow-restore`): a plan first, then with `confirm` one
/// session's turn taken back and the other session's file left as it is.
#[test]
#[ignore = "needs the MCP Python SDK: tests/mcp/install.sh, then --ignored (.ci/run does both)"]
fn the_sdk_reverts_one_turn_only_when_allowed_and_confirmed() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "k\n");
    env.watch();
    claude_prompt_with(&env, &p, "A", "write a.txt", json!({}));
    write(&p, "a.txt", "from A\n");
    claude_tool(&env, &p, "A", "Write", Some(&p.join("a.txt")));
    claude_stop(&env, &p, "A");
    claude_prompt_with(&env, &p, "B", "write b.txt", json!({}));
    write(&p, "b.txt", "from B\n");
    claude_stop(&env, &p, "B");
    let a = env.json_in(&p, &["log", "--dialog", "A", "-n", "1"])["prompts"][0]["id"].clone();

    let calls = json!([["revert", {"id": a}]]);
    let s = session(&env, &p, calls.clone(), &[]);
    assert!(
        !s["tools"].to_string().contains("\"revert\""),
        "{}",
        s["tools"]
    );
    assert!(
        text(&s["results"][0]).contains("no tool"),
        "{}",
        s["results"]
    );

    let calls = json!([["revert", {"id": a}], ["revert", {"id": a, "confirm": true}]]);
    let s = session(&env, &p, calls, &["--allow-restore"]);
    let r = s["results"].as_array().unwrap();
    assert_eq!(r[0]["structured"]["reverted"], false, "{}", r[0]);
    assert_eq!(r[0]["structured"]["paths"], json!(["a.txt"]), "{}", r[0]);
    assert_eq!(r[1]["structured"]["reverted"], true, "{}", r[1]);
    assert!(!p.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("b.txt")).unwrap(),
        "from B\n"
    );
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join("a.txt")).unwrap(),
        "from A\n"
    );
    env.fsck();
}

/// `ckpt mcp install qwen` with the real Qwen Code offline: it starts ckpt's server from the
/// project's `.qwen/settings.json` (beside ckpt's hooks there), reports it connected and offers
/// its tools.
#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn qwen_code_connects_to_ckpts_mcp_server() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    for args in [["hook", "install", "qwen"], ["mcp", "install", "qwen"]] {
        let out = env.ckpt_in(&p, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let log = env.home.join("model.log");
    let (mut server, port) = crate::agents::model("completions.py", &p, &log);
    let mut cmd = Command::new(crate::agents::agent_bin("qwen", "qwen"));
    env.env(&mut cmd);
    let out = cmd
        .current_dir(&p)
        .stdin(Stdio::null())
        .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .env("OPENAI_API_KEY", "sk-offline")
        .env("OPENAI_MODEL", "fake-model")
        .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
        .args(["--auth-type", "openai", "--yolo", "--output-format", "json"])
        .arg("turn M write:m.txt delete:a.txt")
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Value = serde_json::from_slice(&out.stdout).unwrap();
    let init = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "system" && e["subtype"] == "init")
        .unwrap_or_else(|| panic!("no init: {events}"));
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "ckpt", "status": "connected"}]),
        "{init}"
    );
    let tools = init["tools"].to_string();
    assert!(tools.contains("mcp__ckpt__diff"), "{tools}");
    // The hook beside it in the same file still records the prompt.
    let list = env.json_in(&p, &["list", "--all-sessions"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "turn M write:m.txt delete:a.txt"),
        "{list}"
    );
}
