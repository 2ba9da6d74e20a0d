//! No prompt goes unrecorded without the user learning it: a broken `config.toml` (the hook
//! still records through the running daemon, every command keeps working with one warning), a
//! prompt from a folder that holds a watched project (it becomes a project beside it), a
//! prompt from a system folder (refused, and listed by `ckpt status` and `ckpt log`); and
//! `ckpt log` shows what each prompt's turn changed, counting prompts only.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::harness::*;

/// Runs `ckpt hook claude-code` for `prompt` sent from `cwd`.
fn prompt(env: &TestEnv, cwd: &Path, prompt: &str) -> Output {
    let input = json!({ "session_id": "s1", "cwd": cwd, "prompt": prompt,
        "hook_event_name": "UserPromptSubmit" });
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    cmd.current_dir(&env.home)
        .args(["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "a hook never fails the turn");
    out
}

fn labels(env: &TestEnv, cwd: &Path) -> Vec<String> {
    env.json_in(cwd, &["list", "--all-sessions"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap().to_string())
        .collect()
}

fn hook_log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.data_dir().join("hook.log")).unwrap_or_default()
}

#[test]
fn a_broken_config_still_records_prompts_through_the_running_daemon() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    prompt(&env, &p, "before the slip");
    // The user breaks the file; the running daemon keeps the configuration it loaded.
    std::fs::write(
        env.home.join("config/ckpt/config.toml"),
        "max_file_size = [\n",
    )
    .unwrap();
    write(&p, "a.txt", "two\n");
    let out = prompt(&env, &p, "after the slip");
    assert!(
        stdout(&out).is_empty(),
        "the hook prints what the agent expects"
    );
    assert!(labels(&env, &p).contains(&"after the slip".to_string()));
    let log = hook_log(&env);
    assert!(log.contains("config.toml"), "{log}");
    assert!(
        log.ends_with('\n') && log.lines().all(|l| l.contains(" ckpt hook claude-code: ")),
        "{log}"
    );
    // Every command keeps working, with one warning.
    for args in [
        &["list"][..],
        &["log"],
        &["rewind", "--dry-run"],
        &["restore", "--dry-run", "@"],
        &["diff", "@"],
    ] {
        let out = env.ckpt(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let warned = stderr(&out).matches("warning: invalid config file").count();
        assert_eq!(warned, 1, "{args:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("\n  |"),
            "one line: {}",
            stderr(&out)
        );
    }
    let status = env.json(&["status"]);
    assert!(
        status["config_problem"]
            .as_str()
            .unwrap()
            .contains("unclosed array"),
        "{status}"
    );
    assert!(stdout(&env.ckpt(&["status"])).contains("config   cannot be used"));
    // `config check` still says what is wrong, with the exit status of a bad configuration.
    assert_eq!(env.ckpt(&["config", "check"]).status.code(), Some(78));
    env.assert_serving();
}

#[test]
fn a_prompt_with_no_daemon_to_record_it_is_listed_by_status() {
    let mut env = TestEnv::new();
    let p = env.proj();
    env.watch();
    env.stop_daemon();
    std::fs::write(env.home.join("config/ckpt/config.toml"), "retention = 3\n").unwrap();
    // The hook starts a daemon, which refuses the broken file: the prompt is not recorded.
    prompt(&env, &p, "lost without a word?");
    let log = hook_log(&env);
    assert!(log.contains("prompt not recorded"), "{log}");
    let out = env.ckpt(&["status"]);
    assert_eq!(out.status.code(), Some(1), "no daemon: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("1 prompt not recorded"), "{text}");
    assert!(text.contains("config   cannot be used"), "{text}");
    // Fixed: the next prompt is recorded, and the missed one is in the log, with why.
    std::fs::write(env.home.join("config/ckpt/config.toml"), "").unwrap();
    env.start_daemon();
    prompt(&env, &p, "recorded again");
    let log = env.json(&["log"]);
    assert_eq!(log["prompts"][0]["label"], "recorded again", "{log}");
    let missed = &log["unrecorded"][0];
    assert_eq!(missed["prompt"], "lost without a word?", "{log}");
    assert!(!missed["why"].as_str().unwrap().is_empty());
    let text = stdout(&env.ckpt(&["log"]));
    let (missed_at, recorded_at) = (
        text.find("NOT RECORDED").unwrap(),
        text.find("recorded again").unwrap(),
    );
    assert!(recorded_at < missed_at, "newest first: {text}");
}

#[test]
fn a_prompt_from_a_folder_holding_a_project_makes_it_a_project_beside_it() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "src/lib.rs", "inner\n");
    write(&p, "README", "outer\n");
    let src = p.join("src");
    prompt(&env, &src, "in src");
    prompt(&env, &p, "in the project");
    let roots: Vec<String> = env
        .json(&["projects"])
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["root"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(roots.len(), 2, "{roots:?}");
    assert!(labels(&env, &p).contains(&"in the project".to_string()));
    assert!(labels(&env, &src).contains(&"in src".to_string()));
    assert!(!labels(&env, &src).contains(&"in the project".to_string()));
    // The outer checkpoint holds the inner files too.
    let tree = git_in(
        &env.store_of(&p),
        &["ls-tree", "-r", "--name-only", "refs/ckpt/dialogs/s1"],
    );
    assert!(
        tree.contains("src/lib.rs") && tree.contains("README"),
        "{tree}"
    );
    assert!(hook_log(&env).contains("is now a project of its own"));
    // A person's `watch` of a folder holding a project asks for --nest.
    let other = env.home.join("other");
    write(&other, "inner/x.txt", "x\n");
    env.json_in(&other.join("inner"), &["watch"]);
    let out = env.ckpt_in(&other, &["--json", "watch"]);
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], -32008, "{err}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("--nest"),
        "{err}"
    );
    let w = env.json_in(&other, &["watch", "--nest"]);
    assert_eq!(w["nested"][0], other.join("inner").to_str().unwrap(), "{w}");
    env.assert_serving();
}

#[test]
fn a_prompt_from_a_system_folder_is_refused_and_shown() {
    let env = TestEnv::new();
    prompt(&env, Path::new("/etc"), "edit the hosts file");
    prompt(&env, &env.home.join("home"), "in the home folder");
    assert!(env.json(&["projects"]).as_array().unwrap().is_empty());
    let status = env.json(&["status"]);
    let missed = status["unrecorded"].as_array().unwrap();
    assert_eq!(missed.len(), 2, "{status}");
    assert!(
        missed[0]["why"]
            .as_str()
            .unwrap()
            .contains("a folder of the system"),
        "{status}"
    );
    assert!(missed[1]["why"].as_str().unwrap().contains("home folder"));
    // A person can still watch it by name, and then its prompts are recorded.
    let out = env.ckpt_in(Path::new("/usr"), &["watch"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    env.assert_serving();
}

#[test]
fn log_shows_what_each_turn_changed_and_only_prompts_are_rewound() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    write(&p, "b.txt", "one\n");
    env.watch();
    prompt(&env, &p, "first: edit both");
    write(&p, "a.txt", "two\n");
    write(&p, "b.txt", "two\n");
    prompt(&env, &p, "second: add c");
    write(&p, "c.txt", "new\n");
    // A person's checkpoint marks a point; it is not a prompt.
    let manual = env.json(&["checkpoint", "-m", "my own mark"]);
    assert_eq!(manual["kind"], "manual");
    write(&p, "c.txt", "newer\n");
    let log = env.json(&["log"]);
    let turns = log["prompts"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{log}");
    assert_eq!(turns[0]["label"], "second: add c");
    assert_eq!(
        (&turns[0]["turn"]["added"], &turns[0]["turn"]["until"]),
        (&json!(1), &Value::Null),
        "{log}"
    );
    assert_eq!(turns[1]["turn"]["modified"], 2, "{log}");
    assert_eq!(turns[1]["turn"]["until"], turns[0]["id"], "{log}");
    let text = stdout(&env.ckpt(&["log"]));
    assert!(text.contains("its turn: +1 ~0 -0 so far"), "{text}");
    // A hook input without a transcript: the files can be rewound, not the conversation.
    assert!(
        text.contains("its turn: +0 ~2 -0  conversation: code only (the claude-code hook named no transcript)\n"),
        "{text}"
    );
    assert_eq!(turns[0]["conversation"]["can_fork"], false, "{log}");
    assert_eq!(turns[0]["conversation"]["agent"], "claude-code", "{log}");
    assert!(turns[0].get("meta").is_none(), "{log}");
    // Rewind goes back past the last prompt, not to the manual mark.
    let out = env.ckpt(&["rewind", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!p.join("c.txt").exists());
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "two\n");
    // `--prompt` records one by hand.
    let c = env.json(&["checkpoint", "--prompt", "-m", "typed by hand"]);
    assert_eq!(c["kind"], "message");
}
