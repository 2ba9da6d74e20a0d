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

/// How to drive one agent headless against its stand-in.
struct Agent {
    /// `ckpt hook` name.
    hook: &'static str,
    /// Folder under target/agents and binary name.
    package: &'static str,
    bin: &'static str,
    /// The stand-in model server script.
    model: &'static str,
}

/// Installs the hook, has the real agent perform one turn (it writes a file, appends to one and
/// deletes or renames another), checks that the checkpoint of the prompt was taken before those
/// edits, then rewinds and checks the project is back exactly.
fn turn_is_checkpointed_and_rewound(
    agent: Agent,
    configure: impl FnOnce(&TestEnv, &Path, u16, &mut Command),
) {
    let binary = agent_bin(agent.package, agent.bin);
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "old.txt", "to be deleted by the agent\n");
    write(&p, "notes.txt", "notes\n");
    let out = env.ckpt_in(&p, &["hook", "install", agent.hook]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let before = tree_state(&p);
    let log = env.home.join("model.log");
    let (mut server, port) = model(agent.model, &p, &log);
    let prompt = format!("{}: write a file and run a command", agent.hook);
    let mut cmd = Command::new(&binary);
    env.env(&mut cmd);
    cmd.current_dir(&p).stdin(Stdio::null());
    configure(&env, &p, port, &mut cmd);
    let out = cmd.arg(&prompt).output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let model_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        out.status.success(),
        "{} failed: {}\n{}\nmodel: {model_log}",
        agent.bin,
        stdout(&out),
        stderr(&out)
    );
    // The agent acted: it wrote a file, and its shell command edited and removed others.
    assert!(
        p.join("written-by-agent.txt").is_file(),
        "model: {model_log}"
    );
    assert!(!p.join("old.txt").exists(), "model: {model_log}");
    // The hook recorded the prompt before any of that.
    let list = env.json(&["list", "--all-sessions"]);
    let message = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "message" && c["label"] == prompt.as_str())
        .unwrap_or_else(|| panic!("no checkpoint of the prompt: {list}"));
    let id = message["id"].as_str().unwrap();
    let files = env.ls_tree(id);
    assert!(files.iter().any(|f| f.ends_with("old.txt")), "{files:?}");
    assert!(
        !files.iter().any(|f| f.contains("written-by-agent")),
        "{files:?}"
    );
    let meta = &env.json(&["show", id])["meta"];
    assert!(meta["session_id"].is_string(), "{meta}");
    assert!(meta.get("prompt").is_none(), "{meta}");
    // One command brings the project back exactly.
    let out = env.ckpt_in(&p, &["rewind", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains(&prompt), "{}", stderr(&out));
    let without_git = |mut t: std::collections::BTreeMap<String, String>| {
        t.retain(|k, _| !k.starts_with(".git/"));
        t
    };
    assert_eq!(without_git(tree_state(&p)), without_git(before));
    env.fsck();
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_turn_is_checkpointed_before_its_edits_and_rewound() {
    let agent = Agent {
        hook: "claude-code",
        package: "claude",
        bin: "claude",
        model: "anthropic.py",
    };
    turn_is_checkpointed_and_rewound(agent, |_, _, port, cmd| {
        cmd.env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("ANTHROPIC_API_KEY", "sk-ant-offline")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .args([
                "--output-format",
                "json",
                "--permission-mode",
                "acceptEdits",
            ])
            .args(["--allowedTools", "Bash", "-p"]);
    });
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn gemini_cli_turn_is_checkpointed_before_its_edits_and_rewound() {
    let agent = Agent {
        hook: "gemini",
        package: "gemini",
        bin: "gemini",
        model: "gemini.py",
    };
    turn_is_checkpointed_and_rewound(agent, |env, _, port, cmd| {
        let settings = env.home.join("home/.gemini/settings.json");
        std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
        let auth = r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#;
        std::fs::write(&settings, auth).unwrap();
        cmd.env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("GEMINI_API_KEY", "offline")
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .args(["--output-format", "json", "--yolo", "-p"]);
    });
}

#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn codex_turn_is_checkpointed_before_its_edits_and_rewound() {
    let agent = Agent {
        hook: "codex",
        package: "codex",
        bin: "codex",
        model: "openai.py",
    };
    turn_is_checkpointed_and_rewound(agent, |env, project, port, cmd| {
        let codex_home = env.home.join("codex");
        std::fs::create_dir_all(&codex_home).unwrap();
        let config = format!(
            "model = \"gpt-standin\"\nmodel_provider = \"standin\"\n\n\
             [model_providers.standin]\nname = \"standin\"\n\
             base_url = \"http://127.0.0.1:{port}/v1\"\nwire_api = \"responses\"\n\
             env_key = \"STANDIN_API_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n\
             [projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            project.display()
        );
        std::fs::write(codex_home.join("config.toml"), &config).unwrap();
        // Codex runs a new hook only once trusted in /hooks; `hook status` says so, and says
        // what /hooks records. Trusting it that way (no bypass flag) makes the real Codex run
        // the hook only if ckpt computed Codex's key and hash exactly.
        let codex_row = |env: &TestEnv| {
            let mut status = Command::new(env!("CARGO_BIN_EXE_ckpt"));
            env.env(&mut status);
            let out = status
                .env("CODEX_HOME", &codex_home)
                .current_dir(project)
                .args(["--json", "hook", "status"])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            rows.as_array()
                .unwrap()
                .iter()
                .find(|r| r["agent"] == "codex" && r["scope"] == "project")
                .cloned()
                .unwrap()
        };
        let row = codex_row(env);
        assert_eq!(row["codex_trust"], "untrusted", "{row}");
        let trusted = format!(
            "{config}\n[hooks.state.{}]\ntrusted_hash = {}\n",
            row["codex_key"], row["codex_hash"]
        );
        std::fs::write(codex_home.join("config.toml"), trusted).unwrap();
        let row = codex_row(env);
        assert_eq!(row["codex_trust"], "trusted", "{row}");
        cmd.env("CODEX_HOME", &codex_home)
            .env("STANDIN_API_KEY", "offline")
            .args(["exec", "--skip-git-repo-check"])
            .args(["--dangerously-bypass-approvals-and-sandbox"]);
    });
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
