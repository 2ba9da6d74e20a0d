//! `ckpt hook AGENT` fed each agent's exact hook input (fixtures in `tests/fixtures/hooks/`),
//! its stdout checked byte for byte; the hook never fails the turn; `hook install` merges into
//! the agents' settings; `rewind` and `log`.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::*;

const AGENTS: [(&str, &str); 8] = [
    ("claude-code", ""),
    ("gemini", ""),
    ("codex", ""),
    ("cursor", "{\"continue\":true}\n"),
    ("copilot", ""),
    ("qwen", ""),
    // What ckpt's plugin for them sends (they have no stdout contract).
    ("opencode", ""),
    ("kilo", ""),
];

fn fixture(agent: &str, project: &Path) -> String {
    let path = format!(
        "{}/tests/fixtures/hooks/{agent}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .replace("@PROJECT@", project.to_str().unwrap())
}

/// Runs `ckpt [extra] hook AGENT` with `input` on stdin, in `cwd`.
fn hook(env: &TestEnv, cwd: &Path, agent: &str, input: &str, extra: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = run_hook(env, cwd, agent, input, extra);
    (out, started.elapsed())
}

#[test]
fn every_agent_payload_records_its_prompt_and_prints_what_the_agent_expects() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "src/main.rs", "fn main() {}\n");
    for (agent, expected_stdout) in AGENTS {
        let input = fixture(agent, &p);
        let (out, _) = hook(&env, &env.home, agent, &input, &[]);
        assert_eq!(out.status.code(), Some(0), "{agent}: {}", stderr(&out));
        assert_eq!(
            stdout(&out),
            expected_stdout,
            "{agent}: stdout byte for byte"
        );
        assert_eq!(stderr(&out), "", "{agent}: quiet when all is well");
        let payload: Value = serde_json::from_str(&input).unwrap();
        let prompt = payload["prompt"].as_str().unwrap();
        let list = env.json(&["list", "--all-sessions"]);
        let c = list
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["label"] == prompt)
            .unwrap_or_else(|| panic!("{agent}: no checkpoint labelled with the prompt: {list}"));
        assert_eq!(c["kind"], "message", "{agent}");
        let session = ["session_id", "conversation_id"]
            .iter()
            .find_map(|k| payload[k].as_str())
            .unwrap_or(agent);
        assert_eq!(c["dialog"], session, "{agent}: dialog = the session");
        let message_id = ["prompt_id", "turn_id", "generation_id"]
            .iter()
            .find_map(|k| payload[k].as_str());
        assert_eq!(c["message_id"].as_str(), message_id, "{agent}");
        // The raw hook input, minus the prompt and its id, is the checkpoint's client metadata.
        let shown = env.json(&["show", c["id"].as_str().unwrap()]);
        let mut meta = payload.clone();
        for key in [
            "prompt",
            "submitted_prompt",
            "prompt_id",
            "turn_id",
            "generation_id",
        ] {
            meta.as_object_mut().unwrap().remove(key);
        }
        // Which agent sent it too: a rewind finds the prompt in that agent's session.
        meta["ckpt_agent"] = agent.into();
        assert_eq!(shown["meta"], meta, "{agent}");
    }
    // Neither prompts nor the agents' metadata reach the daemon's log (even at debug level).
    let log = env.log();
    for secret in [
        "Add a --verbose flag",
        "Refactor the parser",
        "transcript",
        "dev@example.com",
    ] {
        assert!(!log.contains(secret), "{secret:?} is in the log");
    }
    // The project was registered once, at its root, from the first hook.
    let projects = env.json(&["projects"]);
    assert_eq!(projects.as_array().unwrap().len(), 1, "{projects}");
    assert_eq!(projects[0]["root"], json!(p));
}

#[test]
fn the_same_message_twice_is_one_checkpoint() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    let input = fixture("cursor", &p);
    let (first, _) = hook(&env, &p, "cursor", &input, &[]);
    assert_eq!(first.status.code(), Some(0));
    write(&p, "a.txt", "changed before the retry\n");
    let (again, _) = hook(&env, &p, "cursor", &input, &[]);
    assert_eq!(stdout(&again), "{\"continue\":true}\n");
    let list = env.json(&["list", "--all-sessions"]);
    let messages: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "message")
        .collect();
    assert_eq!(messages.len(), 1, "{list}");
    // Through the protocol too: the reply is the checkpoint already recorded.
    let params = json!({ "project": p, "dialog": messages[0]["dialog"], "message_id": "gen-42",
        "label": "again" });
    let line = json!({ "jsonrpc": "2.0", "id": 1, "method": "checkpoint", "params": params });
    let reply = &env.raw(&[line.to_string().as_bytes()])[0];
    assert_eq!(reply["result"]["id"], messages[0]["id"], "{reply}");
    // Still after other prompts of the dialog: the newest 64 checkpoints are searched.
    let dialog = messages[0]["dialog"].clone();
    let mut rpc = Rpc::connect(&env);
    for i in 0..5 {
        write(&p, "a.txt", &format!("prompt {i}\n"));
        rpc.call(
            "checkpoint",
            json!({ "project": p, "dialog": dialog, "message_id": format!("other-{i}") }),
        );
    }
    let again = rpc.call(
        "checkpoint",
        json!({ "project": p, "dialog": dialog, "message_id": "gen-42" }),
    );
    assert_eq!(again["id"], messages[0]["id"], "{again}");
}

/// The search for a repeated prompt follows the dialog as it is now, whatever moved it: after
/// the dialog is set back (here with `git update-ref`, as a reset or another tool would), a
/// message id only the dropped checkpoints had records anew, one still in the chain does not;
/// and a prompt 64 checkpoints back is no longer a repeat.
#[test]
fn a_repeated_prompt_is_searched_in_the_dialog_as_it_is_now() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "0\n");
    env.watch();
    let mut rpc = Rpc::connect(&env);
    let mut ask = |message: &str| -> String {
        write(&p, "a.txt", &format!("{message}\n"));
        let c = rpc.call(
            "checkpoint",
            json!({ "project": p, "dialog": "talk", "message_id": message }),
        );
        c["id"].as_str().unwrap().to_string()
    };
    let m1 = ask("m1");
    let m2 = ask("m2");
    assert_eq!(ask("m2"), m2, "a repeat of the newest");
    assert_eq!(ask("m1"), m1, "a repeat of an older one");
    env.git(&["update-ref", "refs/ckpt/dialogs/talk", &m1, &m2]);
    let again = ask("m2");
    assert_ne!(again, m2, "m2 is no longer in the dialog: recorded anew");
    assert_eq!(ask("m2"), again);
    assert_eq!(ask("m1"), m1);
    for i in 0..64 {
        ask(&format!("filler-{i}"));
    }
    assert_ne!(ask("m1"), m1, "past the newest 64: a new prompt");
    let list = env.json(&["list", "--dialog", "talk", "--all-sessions"]);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&m2.as_str()), "{list}");
    env.fsck();
}

/// The prompts of one session keep one metadata blob (the prompt and its id are the label and
/// the message id): one keep-alive ref for the session, not one per prompt.
#[test]
fn the_prompts_of_a_session_share_their_metadata() {
    let env = TestEnv::new();
    let p = env.proj();
    let input: Value = serde_json::from_str(&fixture("claude-code", &p)).unwrap();
    let mut ids = Vec::new();
    for n in 0..3 {
        write(&p, "a.txt", &format!("prompt {n}\n"));
        let mut prompt = input.clone();
        prompt["prompt_id"] = json!(format!("prompt-{n}"));
        prompt["prompt"] = json!(format!("prompt number {n}"));
        let (out, _) = hook(&env, &p, "claude-code", &prompt.to_string(), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let c = checkpoint_labelled(&env, &format!("prompt number {n}"));
        assert_eq!(c["message_id"], format!("prompt-{n}"));
        ids.push(c["id"].as_str().unwrap().to_string());
    }
    let refs = env.git(&["for-each-ref", "--format=%(refname)", "refs/ckpt/meta/"]);
    assert_eq!(refs.lines().count(), 1, "{refs}");
    for id in &ids {
        let meta = &env.json(&["show", id])["meta"];
        assert_eq!(meta["session_id"], input["session_id"], "{meta}");
        assert!(
            meta.get("prompt_id").is_none() && meta.get("prompt").is_none(),
            "{meta}"
        );
    }
    // An id that cannot be a message id (not text) is not dropped: it stays in the metadata.
    write(&p, "a.txt", "odd id\n");
    let mut odd = input.clone();
    odd["prompt_id"] = json!(42);
    odd["prompt"] = json!("odd id");
    let (out, _) = hook(&env, &p, "claude-code", &odd.to_string(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let c = checkpoint_labelled(&env, "odd id");
    assert!(c["message_id"].is_null(), "{c}");
    let meta = &env.json(&["show", c["id"].as_str().unwrap()])["meta"];
    assert_eq!(meta["prompt_id"], 42, "{meta}");
    env.fsck();
}

/// The checkpoint (of any session) labelled `label`.
fn checkpoint_labelled(env: &TestEnv, label: &str) -> Value {
    let list = env.json(&["list", "--all-sessions"]);
    list.as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == label)
        .unwrap_or_else(|| panic!("no checkpoint labelled {label}: {list}"))
        .clone()
}

#[test]
fn a_hook_never_fails_the_turn() {
    let env = TestEnv::without_daemon("");
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    // No daemon, and none may be started.
    let input = fixture("gemini", &p);
    let (out, took) = hook(&env, &p, "gemini", &input, &["--no-spawn"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "", "Gemini wants JSON or nothing");
    assert!(
        stderr(&out).contains("no ckptd answers"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    // Input that is not JSON, and JSON without the fields.
    for bad in ["not json at all", "{}", "[1,2]", ""] {
        let (out, _) = hook(&env, &p, "cursor", bad, &["--no-spawn"]);
        assert_eq!(out.status.code(), Some(0), "{bad:?}");
        assert_eq!(stdout(&out), "{\"continue\":true}\n", "{bad:?}");
    }
    // A daemon that accepts but never answers: the hook gives up within its budget.
    let socket = env.home.join("silent.sock");
    let server = format!(
        "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind({:?})\ns.listen(8)\n\
         print('ready', flush=True)\nwhile True:\n    c, _ = s.accept()\n    time.sleep(60)\n",
        socket.to_str().unwrap()
    );
    let mut silent = Command::new("/usr/bin/python3")
        .args(["-c", &server])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 5];
    std::io::Read::read_exact(silent.stdout.as_mut().unwrap(), &mut ready).unwrap();
    let (out, took) = hook(
        &env,
        &p,
        "cursor",
        &fixture("cursor", &p),
        &["--socket", socket.to_str().unwrap()],
    );
    let _ = silent.kill();
    let _ = silent.wait();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "{\"continue\":true}\n",
        "answered exactly once"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(stderr(&out).contains("gave up"), "{}", stderr(&out));
    let log = std::fs::read_to_string(env.data_dir().join("hook.log")).unwrap();
    assert!(log.contains("gave up") && log.contains("not JSON"), "{log}");
}

#[test]
fn the_home_folder_and_the_root_are_never_projects() {
    let env = TestEnv::new();
    let home = env.home.join("home");
    for cwd in [home.clone(), std::path::PathBuf::from("/")] {
        let input = fixture("claude-code", &cwd).replace("\"@PROJECT@\"", "\"\"");
        let (out, _) = hook(&env, &cwd, "claude-code", &input, &[]);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(stdout(&out), "");
        assert!(
            stderr(&out).contains("prompt not recorded"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(env.json(&["projects"]), json!([]));
}

#[test]
fn install_merges_into_the_agents_settings_and_uninstall_removes_only_its_own() {
    let env = TestEnv::new();
    let p = env.proj();
    let settings = p.join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let theirs = r#"{
  "permissions": {"allow": ["Bash(ls)"]},
  "hooks": {
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "their-hook.sh"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}]
  },
  "model": "opus"
}"#;
    std::fs::write(&settings, theirs).unwrap();
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let keys: Vec<&String> = after.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["permissions", "hooks", "model"], "order kept");
    let ups = after["hooks"]["UserPromptSubmit"].as_array().unwrap();
    assert_eq!(ups.len(), 2);
    assert_eq!(ups[0]["hooks"][0]["command"], "their-hook.sh");
    let ours = ups[1]["hooks"][0]["command"].as_str().unwrap();
    let client = ckpt_bin();
    assert_eq!(ours, format!("{client} hook claude-code"));
    assert_eq!(ups[1]["hooks"][0]["timeout"], 10);
    assert_eq!(
        after["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify.sh"
    );
    // The project is watched from now on.
    assert_eq!(env.json(&["projects"])[0]["root"], json!(p));
    // Twice changes nothing.
    let before = std::fs::read(&settings).unwrap();
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert!(
        stdout(&out).contains("already installed"),
        "{}",
        stdout(&out)
    );
    assert_eq!(std::fs::read(&settings).unwrap(), before);
    // Status names it; uninstall removes only ours.
    let status = stdout(&env.ckpt_in(&p, &["hook", "status"]));
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("claude-code")
                && l.contains("installed with turn ends and steps (")),
        "{status}"
    );
    let out = env.ckpt_in(&p, &["hook", "uninstall", "claude-code"]);
    assert_eq!(out.status.code(), Some(0));
    let after: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let original: Value = serde_json::from_str(theirs).unwrap();
    assert_eq!(after, original);
    // Every agent's file is created when absent, in its own shape.
    for (agent, file, probe) in [
        (
            "gemini",
            ".gemini/settings.json",
            "/hooks/BeforeAgent/0/hooks/0/timeout",
        ),
        (
            "codex",
            ".codex/hooks.json",
            "/hooks/UserPromptSubmit/0/hooks/0/timeout",
        ),
        (
            "cursor",
            ".cursor/hooks.json",
            "/hooks/beforeSubmitPrompt/0/command",
        ),
        (
            "copilot",
            ".github/hooks/ckpt.json",
            "/hooks/userPromptSubmitted/0/timeoutSec",
        ),
        (
            "qwen",
            ".qwen/settings.json",
            "/hooks/PostToolUse/0/hooks/0/timeout",
        ),
    ] {
        let out = env.ckpt_in(&p, &["hook", "install", agent]);
        assert_eq!(out.status.code(), Some(0), "{agent}: {}", stderr(&out));
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(p.join(file)).unwrap()).unwrap();
        assert!(v.pointer(probe).is_some(), "{agent}: {v}");
    }
    assert!(stdout(&env.ckpt_in(&p, &["hook", "install", "codex"])).contains("already"));
    // Copilot CLI's folder hooks need folder trust, its user hooks none: status says which.
    let rows = env.json_in(&p, &["hook", "status"]);
    let copilot = |scope: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["agent"] == "copilot" && r["scope"] == scope)
            .cloned()
            .unwrap()
    };
    let folder = copilot("project");
    assert_eq!(folder["copilot_trust"], "folder", "{folder}");
    assert!(
        folder["state"].as_str().unwrap().contains("--trust-folder"),
        "{folder}"
    );
    assert!(
        copilot("user").get("copilot_trust").is_none(),
        "not installed there"
    );
    // Qwen Code runs a folder's hooks unless its folder trust is on and the folder untrusted.
    let qwen = |rows: &Value| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["agent"] == "qwen" && r["scope"] == "project")
            .cloned()
            .unwrap()
    };
    assert_eq!(qwen(&rows)["qwen_folder_trust"], "off", "{rows}");
    let qwen_home = env.home.join("home/.qwen");
    std::fs::create_dir_all(&qwen_home).unwrap();
    let on = r#"{"security": {"folderTrust": {"enabled": true}}}"#;
    std::fs::write(qwen_home.join("settings.json"), on).unwrap();
    let rows = env.json_in(&p, &["hook", "status"]);
    assert_eq!(qwen(&rows)["qwen_folder_trust"], "untrusted", "{rows}");
    assert!(qwen(&rows)["state"].as_str().unwrap().contains("skips"));
    let trusted = serde_json::json!({ p.to_str().unwrap(): "TRUST_FOLDER" });
    std::fs::write(qwen_home.join("trustedFolders.json"), trusted.to_string()).unwrap();
    let rows = env.json_in(&p, &["hook", "status"]);
    assert_eq!(qwen(&rows)["qwen_folder_trust"], "trusted", "{rows}");
    // A file that is not JSON is refused and left as it is.
    let broken = p.join(".gemini/settings.json");
    std::fs::write(&broken, "{ not json").unwrap();
    let out = env.ckpt_in(&p, &["hook", "install", "gemini"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&broken).unwrap(), "{ not json");
    // --user writes the user-level file.
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code", "--user"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(env.home.join("home/.claude/settings.json").is_file());
}

#[test]
fn rewind_undoes_the_last_turns_and_log_shows_the_prompts() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "original\n");
    let turn = |n: u32, prompt: &str| {
        let input = json!({ "session_id": "s1", "cwd": p, "prompt": prompt,
            "prompt_id": format!("m{n}"), "hook_event_name": "UserPromptSubmit" });
        let (out, _) = hook(&env, &p, "claude-code", &input.to_string(), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    };
    turn(1, "first: edit a");
    let after_none = tree_state(&p);
    write(&p, "a.txt", "edited by turn 1\n");
    turn(2, "second: add b");
    let after_one = tree_state(&p);
    write(&p, "b.txt", "added by turn 2\n");
    write(&p, "a.txt", "edited by turn 2\n");
    let log = stdout(&env.ckpt(&["log"]));
    let first = log.find("second: add b").unwrap();
    assert!(
        first < log.find("first: edit a").unwrap(),
        "newest first: {log}"
    );
    let out = env.ckpt(&["rewind", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rewinding past: second: add b"),
        "{}",
        stderr(&out)
    );
    assert_eq!(tree_state(&p), after_one);
    let out = env.ckpt(&["rewind", "2", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(tree_state(&p), after_none);
    // Undoable like any restore.
    env.ckpt(&["undo", "-y"]);
    assert_eq!(tree_state(&p), after_one);
    let out = env.ckpt(&["rewind", "9", "-y"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("has 2 prompts"), "{}", stderr(&out));
    env.fsck();
}

/// Settings kept elsewhere through a symlink stay a symlink; a FIFO where the settings should
/// be is refused at once instead of hanging.
#[test]
fn install_follows_symlinked_settings_and_never_hangs_on_a_fifo() {
    let env = TestEnv::new();
    let p = env.proj();
    let dotfiles = env.home.join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::write(dotfiles.join("gemini.json"), r#"{"theme": "dark"}"#).unwrap();
    std::fs::create_dir_all(p.join(".gemini")).unwrap();
    std::os::unix::fs::symlink(
        dotfiles.join("gemini.json"),
        p.join(".gemini/settings.json"),
    )
    .unwrap();
    let out = env.ckpt_in(&p, &["hook", "install", "gemini"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let link = std::fs::symlink_metadata(p.join(".gemini/settings.json")).unwrap();
    assert!(
        link.file_type().is_symlink(),
        "the symlink was replaced by a file"
    );
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dotfiles.join("gemini.json")).unwrap())
            .unwrap();
    assert_eq!(v["theme"], "dark");
    assert!(
        v.pointer("/hooks/BeforeAgent/0/hooks/0/command").is_some(),
        "{v}"
    );
    // A FIFO: refused, quickly.
    std::fs::create_dir_all(p.join(".cursor")).unwrap();
    let fifo = p.join(".cursor/hooks.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let out = env.ckpt_in(&p, &["hook", "install", "cursor"]);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let status = env.ckpt_in(&p, &["hook", "status"]);
    assert_eq!(status.status.code(), Some(0));
}

/// A temporary name beside the settings that is a symlink (planted by a cloned repository) is
/// never written through.
#[test]
fn install_never_writes_through_a_planted_temporary_file() {
    let env = TestEnv::new();
    let p = env.proj();
    let outside = env.home.join("outside.txt");
    std::fs::write(&outside, "keep me\n").unwrap();
    std::fs::create_dir_all(p.join(".claude")).unwrap();
    std::os::unix::fs::symlink(&outside, p.join(".claude/settings.local.ckpt-tmp")).unwrap();
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me\n");
    let settings = std::fs::read_to_string(p.join(".claude/settings.local.json")).unwrap();
    assert!(settings.contains("hook claude-code"), "{settings}");
}

/// An empty `cwd` in the hook's input means the folder the agent ran the hook in.
#[test]
fn an_empty_cwd_is_the_hooks_own_folder() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    let input = r#"{"session_id":"s-empty","cwd":"","prompt":"empty cwd","hook_event_name":"UserPromptSubmit"}"#;
    let (out, _) = hook(&env, &p, "claude-code", input, &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "", "{}", stderr(&out));
    let list = env.json(&["list", "--dialog", "s-empty"]);
    assert_eq!(list[0]["label"], "empty cwd", "{list}");
}

/// Thirty `ckpt hook install` at once, into the same settings files (a project's and the
/// user's, for every agent): every one succeeds, each file is valid JSON holding exactly one
/// ckpt entry, and the user's own entries are all still there.
#[test]
fn concurrent_installs_all_succeed_and_keep_every_entry() {
    let env = TestEnv::new();
    let p = env.proj();
    let user_hook = json!({"hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": "echo mine"}]}]}, "theme": "dark"});
    write(&p, ".claude/settings.local.json", &user_hook.to_string());
    // Every agent `hook install` knows (Cline's hook files too).
    let names: Vec<&'static str> = AGENTS.iter().map(|a| a.0).chain(["cline"]).collect();
    let runs: Vec<std::thread::JoinHandle<Output>> = (0..names.len() * 6)
        .map(|i| {
            let agent = names[i % names.len()];
            let count = names.len();
            let home = env.home.clone();
            let p = p.clone();
            std::thread::spawn(move || {
                let mut cmd = Command::new(ckpt_bin());
                env_for(&home, &mut cmd);
                cmd.current_dir(&p)
                    .args(["--no-spawn", "hook", "install", agent]);
                // Each agent installed three times in each scope.
                if (i / count) % 2 == 1 {
                    cmd.arg("--user");
                }
                cmd.output().unwrap()
            })
        })
        .collect();
    for run in runs {
        let out = run.join().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let status = env.json(&["hook", "status"]);
    for row in status.as_array().unwrap() {
        if row["scope"] == "mcp" {
            continue; // where `ckpt mcp` would be registered: none was
        }
        let file = Path::new(row["file"].as_str().unwrap());
        let text = std::fs::read_to_string(file).unwrap();
        if row["agent"] == "cline" {
            // Cline's: ckpt's own hook scripts, each running one command.
            assert_eq!(text.lines().filter(|l| l.starts_with("exec ")).count(), 1);
            assert!(
                row["state"].as_str().unwrap().starts_with("installed"),
                "{row}"
            );
            continue;
        }
        if file.extension().is_some_and(|e| e == "js") {
            // OpenCode's and Kilo's: ckpt's own plugin file, whole, running one command.
            assert_eq!(
                text.matches("[\"hook\", \"").count(),
                1,
                "{}",
                file.display()
            );
            assert!(
                row["state"].as_str().unwrap().starts_with("installed"),
                "{row}"
            );
            continue;
        }
        let _: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        // One entry per event ckpt installs under: the prompt's, and the turn's end and
        // after-tool ones where ckpt reads them.
        let events = 3;
        assert_eq!(
            text.matches(" hook ").count(),
            events,
            "one entry an event: {}",
            file.display()
        );
        assert!(
            row["state"].as_str().unwrap().starts_with("installed"),
            "{row}"
        );
    }
    let claude = std::fs::read_to_string(p.join(".claude/settings.local.json")).unwrap();
    assert!(
        claude.contains("echo mine") && claude.contains("\"dark\""),
        "{claude}"
    );
    let leftovers: Vec<_> = walk_names(&env.home)
        .into_iter()
        .filter(|n| n.contains("ckpt-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Every file name below `root`.
fn walk_names(root: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            names.push(entry.file_name().to_string_lossy().into_owned());
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    names
}

/// `ckpt hook trust codex` records the trust Codex's `/hooks` would, keeping the rest of
/// Codex's config byte for byte; it refuses other agents and a hook that is not installed.
#[test]
fn hook_trust_codex_records_the_trust_and_keeps_the_config() {
    let env = TestEnv::new();
    let p = env.proj();
    let codex_home = env.home.join("home/.codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let mine = "# mine\nmodel = \"o4\"\n";
    std::fs::write(codex_home.join("config.toml"), mine).unwrap();
    let out = env.ckpt_in(&p, &["hook", "trust", "codex"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("hook install codex"),
        "{}",
        stderr(&out)
    );
    let out = env.ckpt_in(&p, &["hook", "trust", "gemini"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    env.ckpt_in(&p, &["hook", "install", "codex"]);
    let granted = env.json_in(&p, &["hook", "trust", "codex"]);
    assert_eq!(granted["changed"], true, "{granted}");
    // The project itself is Codex's to trust: said, not done.
    assert_eq!(granted["codex_trust"], "project-untrusted", "{granted}");
    let text = std::fs::read_to_string(codex_home.join("config.toml")).unwrap();
    assert!(text.starts_with(mine), "{text}");
    assert!(text.contains(granted["hash"].as_str().unwrap()), "{text}");
    let again = env.json_in(&p, &["hook", "trust", "codex"]);
    assert_eq!(again["changed"], false);
    assert_eq!(
        std::fs::read_to_string(codex_home.join("config.toml")).unwrap(),
        text
    );
}
