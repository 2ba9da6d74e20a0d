//! Real agents performing real turns offline: the agent's own binary (installed by
//! `tests/agents/install.sh`), pointed at a scripted stand-in for its model API on loopback,
//! with the hook that `ckpt hook install` wrote. Ignored by default (they need the agents);
//! `.ci/run` installs them and runs these with `--ignored`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::harness::*;

pub(crate) fn agent_bin(name: &str, bin: &str) -> PathBuf {
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
pub(crate) fn model(script: &str, project: &Path, log: &Path) -> (Child, u16) {
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

fn without_git(
    mut t: std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    t.retain(|k, _| !k.starts_with(".git/"));
    t
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
    let prompt = format!(
        "{}: write a file, run a command, then:third.txt",
        agent.hook
    );
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
    // The agent acted: it wrote a file, its shell command edited and removed others, and it
    // wrote one more.
    assert!(
        p.join("written-by-agent.txt").is_file() && p.join("third.txt").is_file(),
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
    // The agent's turn-end and after-tool hooks made the turn exact: it ended, its tool calls
    // are steps, and it changed exactly what the agent did.
    let log = env.json(&["log", "--steps"]);
    let turn = log["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("{log}"))
        .clone();
    println!("{}: {turn}", agent.hook);
    assert!(
        turn["turn"]["until"].is_string(),
        "the turn has no end: {turn}"
    );
    let steps: Vec<&serde_json::Value> = turn["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "step")
        .collect();
    // Three tool calls, three steps.
    assert_eq!(steps.len(), 3, "{turn}");
    assert!(steps.iter().all(|s| s["tool"].is_string()), "{turn}");
    assert!(turn["turn"]["added"].as_u64() >= Some(1), "{turn}");
    assert!(turn["turn"]["deleted"].as_u64() >= Some(1), "{turn}");
    // `ckpt revert` takes the turn back exactly, and `ckpt undo` puts it back.
    let after = tree_state(&p);
    let out = env.ckpt_in(&p, &["--json", "revert", "--yes", id]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(without_git(tree_state(&p)), without_git(before.clone()));
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(tree_state(&p), after);
    // A restore to the first step is exact: the agent's first file, not its shell's edits nor
    // the third tool's file; undone, the turn's end is back.
    let first = steps[0]["id"].as_str().unwrap();
    let out = env.ckpt_in(&p, &["restore", "--yes", first]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The agents' own settings (the hook) are ckpt's wiring, kept out of checkpoints.
    let theirs = |f: &String| {
        [".claude/", ".gemini/", ".codex/"]
            .iter()
            .any(|d| f.starts_with(d))
    };
    let mut now: Vec<String> = without_git(tree_state(&p)).into_keys().collect();
    now.retain(|f| !theirs(f));
    now.sort();
    let mut at_step = env.ls_tree(first);
    at_step.retain(|f| !theirs(f));
    at_step.sort();
    assert_eq!(now, at_step);
    assert!(p.join("written-by-agent.txt").is_file() && p.join("old.txt").is_file());
    assert!(!p.join("third.txt").exists());
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(tree_state(&p), after);
    // One command brings the project back exactly.
    let out = env.ckpt_in(&p, &["rewind", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains(&prompt), "{}", stderr(&out));
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
    turn_is_checkpointed_and_rewound(agent, |env, project, port, cmd| {
        gemini_settings(env);
        // The folder trusted as Gemini's own dialog records it: `hook status` reads the same
        // file, and the real Gemini runs the project's hook only if it agrees.
        let trusted = serde_json::json!({ project.to_str().unwrap(): "TRUST_FOLDER" });
        let file = env.home.join("home/.gemini/trustedFolders.json");
        std::fs::write(&file, trusted.to_string()).unwrap();
        assert_eq!(gemini_row(env, project)["gemini_folder_trust"], "trusted");
        gemini_offline(cmd, port);
    });
}

/// Gemini's user settings: an API key as the way to sign in.
pub(crate) fn gemini_settings(env: &TestEnv) {
    let settings = env.home.join("home/.gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let auth = r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#;
    std::fs::write(&settings, auth).unwrap();
}

/// Gemini pointed at its stand-in, one headless turn (the prompt follows).
pub(crate) fn gemini_offline(cmd: &mut Command, port: u16) {
    cmd.env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("GEMINI_API_KEY", "offline")
        .args(["--output-format", "json", "--yolo", "-p"]);
}

/// `ckpt hook status`'s row for Gemini's project hook.
fn gemini_row(env: &TestEnv, project: &Path) -> serde_json::Value {
    env.json_in(project, &["hook", "status"])
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "gemini" && r["scope"] == "project")
        .cloned()
        .unwrap()
}

/// `gemini --skip-trust` trusts the session only after reading its settings: it runs none of
/// the project's hooks (so the prompt is not checkpointed, and `hook status` says why), while
/// a user-level hook runs.
#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn gemini_skip_trust_runs_only_user_level_hooks() {
    let binary = agent_bin("gemini", "gemini");
    let env = TestEnv::new();
    let p = env.proj();
    git_in_worktree(&p, &["init", "-q"]);
    write(&p, "old.txt", "to be deleted by the agent\n");
    write(&p, "notes.txt", "notes\n");
    gemini_settings(&env);
    let prompts = |env: &TestEnv| -> usize {
        let list = env.json_in(&p, &["list", "--all-sessions"]);
        list.as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "message")
            .count()
    };
    let turn = |prompt: &str| {
        let log = env.home.join("model.log");
        let (mut server, port) = model("gemini.py", &p, &log);
        let mut cmd = Command::new(&binary);
        env.env(&mut cmd);
        cmd.current_dir(&p).stdin(Stdio::null()).arg("--skip-trust");
        gemini_offline(&mut cmd, port);
        let out = cmd.arg(prompt).output().unwrap();
        let _ = server.kill();
        let _ = server.wait();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let out = env.ckpt_in(&p, &["hook", "install", "gemini"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let row = gemini_row(&env, &p);
    assert_eq!(row["gemini_folder_trust"], "undecided", "{row}");
    assert!(
        row["state"].as_str().unwrap().contains("--skip-trust"),
        "{row}"
    );
    turn("gemini: a turn with --skip-trust");
    assert_eq!(prompts(&env), 0, "Gemini ran the project's hook");
    let out = env.ckpt_in(&p, &["hook", "install", "gemini", "--user"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    write(&p, "old.txt", "back\n");
    turn("gemini: again, with the hook in the user's settings");
    assert_eq!(prompts(&env), 1, "the user-level hook did not run");
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
        // Codex runs a new hook only once trusted in /hooks; `hook status` says so, and
        // `ckpt hook trust codex` records the trust as /hooks does: the real Codex then runs
        // the hook only if ckpt computed Codex's key and hash exactly.
        let ckpt = |env: &TestEnv, args: &[&str]| {
            let mut cmd = Command::new(ckpt_bin());
            env.env(&mut cmd);
            let out = cmd
                .env("CODEX_HOME", &codex_home)
                .current_dir(project)
                .args(args)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
        };
        let codex_row = |env: &TestEnv| {
            ckpt(env, &["--json", "hook", "status"])
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["agent"] == "codex" && r["scope"] == "project")
                .cloned()
                .unwrap()
        };
        let row = codex_row(env);
        assert_eq!(row["codex_trust"], "untrusted", "{row}");
        let granted = ckpt(env, &["--json", "hook", "trust", "codex"]);
        assert_eq!(granted["changed"], true, "{granted}");
        let after = std::fs::read_to_string(codex_home.join("config.toml")).unwrap();
        assert!(
            after.starts_with(&config),
            "the user's config stays: {after}"
        );
        let row = codex_row(env);
        assert_eq!(row["codex_trust"], "trusted", "{row}");
        cmd.env("CODEX_HOME", &codex_home)
            .env("STANDIN_API_KEY", "offline")
            .args(["exec", "--skip-git-repo-check"])
            .args(["--dangerously-bypass-approvals-and-sandbox"]);
    });
}

pub(crate) fn git_in_worktree(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}
