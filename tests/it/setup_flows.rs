//! Setting up and first use, the flows that broke: a restore that switched recording off (the
//! agents' hook files are kept out of checkpoints), blame and show after retention and gc, MCP
//! `diff` asked what the last turn changed, and `hook install` from a subfolder.

use serde_json::{json, Value};

use crate::bounded_answers::Mcp;
use crate::harness::*;

/// `ckpt hook claude-code` for `prompt` in the project, then waits until it is recorded.
fn prompt(env: &TestEnv, text: &str) {
    claude_prompt(env, &env.proj(), text);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while env.json(&["list", "-n", "1"])[0]["label"] != text {
        assert!(
            std::time::Instant::now() < deadline,
            "{text} was never recorded"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The files ckpt's installs write are never captured: a restore to before the install, an
/// undo, a fork or a fetch never removes or replaces ckpt's hook.
#[test]
fn a_restore_never_switches_recording_off() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    // The user's own Gemini settings and Cursor hooks, there before ckpt.
    write(&p, ".gemini/settings.json", "{\"theme\": \"dark\"}\n");
    env.watch();
    let before = env.checkpoint("before the install");
    for agent in [
        "claude-code",
        "codex",
        "gemini",
        "cursor",
        "copilot",
        "qwen",
    ] {
        let out = env.ckpt_in(&p, &["hook", "install", agent]);
        assert_eq!(out.status.code(), Some(0), "{agent}: {}", stderr(&out));
        assert!(
            stdout(&out).contains("out of checkpoints"),
            "{agent}: {}",
            stdout(&out)
        );
    }
    let out = env.ckpt_in(&p, &["mcp", "install", "cursor"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let installed = [
        ".claude/settings.local.json",
        ".codex/hooks.json",
        ".gemini/settings.json",
        ".cursor/hooks.json",
        ".cursor/mcp.json",
        ".github/hooks/ckpt.json",
        ".qwen/settings.json",
    ];
    let wiring = |p: &std::path::Path| -> Vec<String> {
        installed
            .iter()
            .map(|f| std::fs::read_to_string(p.join(f)).unwrap_or_default())
            .collect()
    };
    let wired = wiring(&p);
    assert!(wired.iter().all(|t| t.contains("ckpt")), "{wired:?}");
    write(&p, "a.txt", "two\n");
    let after = env.checkpoint("after the install");
    let captured = env.ls_tree(&after);
    for f in installed {
        assert!(
            !captured.iter().any(|line| line.ends_with(f)),
            "{f} was captured: {captured:?}"
        );
    }
    // Back to before the install: the files come back, the hooks stay.
    let out = env.ckpt_in(&p, &["restore", &before, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "one\n");
    assert_eq!(wiring(&p), wired, "a restore changed ckpt's wiring");
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(wiring(&p), wired);
    // And the next prompt is recorded.
    prompt(&env, "recorded after the restore");
    env.fsck();
}

/// A session longer than retention keeps (62 prompts, `keep = 50`), then `ckpt gc`: blame and
/// show of the oldest kept checkpoint stop cleanly where the history was cut.
#[test]
fn blame_and_show_stop_at_the_retention_cut_after_gc() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "first line\n");
    env.watch();
    let mut text = String::from("first line\n");
    for i in 0..62 {
        prompt(&env, &format!("prompt {i}"));
        text.push_str(&format!("line of turn {i}\n"));
        write(&p, "f.txt", &text);
    }
    prompt(&env, "the last");
    let out = env.ckpt(&["gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list = env.json(&["list"]);
    let kept = list.as_array().unwrap();
    assert!(kept.len() < 60, "retention kept {} of 64", kept.len());
    // The oldest of the kept run: its parent was pruned (retention keeps the session's first
    // checkpoint too, apart).
    let ids: Vec<&Value> = kept.iter().map(|c| &c["id"]).collect();
    let oldest = kept
        .iter()
        .find(|c| !c["parent"].is_null() && !ids.contains(&&c["parent"]))
        .unwrap_or_else(|| panic!("no checkpoint lost its parent: {list}"))["id"]
        .as_str()
        .unwrap();
    let shown = env.json(&["show", oldest]);
    assert_eq!(shown["parent_pruned"], true, "{shown}");
    let out = env.ckpt(&["show", oldest]);
    assert!(stdout(&out).contains("pruned"), "{}", stdout(&out));
    let blamed = env.json(&["blame", "f.txt"]);
    let lines = blamed["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 63, "{blamed}");
    let last = lines[62].to_string();
    assert!(last.contains("prompt 61"), "{last}");
    let mut mcp = Mcp::start(&env);
    mcp.initialize();
    let mcp_blame = mcp.call(2, "blame", json!({"path": "f.txt"}));
    assert_eq!(mcp_blame["total_lines"], 63, "{mcp_blame}");
    let mcp_show = mcp.call(3, "show_checkpoint", json!({"id": oldest}));
    assert_eq!(mcp_show["id"], oldest, "{mcp_show}");
    env.fsck();
    env.assert_serving();
}

/// MCP `diff` with no arguments: what the last finished turn changed, from the previous prompt
/// to the latest, not the question's own empty turn.
#[test]
fn mcp_diff_with_no_arguments_is_the_last_finished_turn() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "src/parser.rs", "fn parse() {}\n");
    env.watch();
    let mut mcp = Mcp::start(&env);
    mcp.initialize();
    let none = mcp.call(2, "diff", json!({}));
    assert!(none.is_null(), "{none}");
    prompt(&env, "add a cache to the parser");
    write(&p, "src/parser.rs", "fn parse() { cache() }\n");
    write(&p, "tests/cache.rs", "#[test] fn cached() {}\n");
    let so_far = mcp.call(3, "diff", json!({}));
    assert!(
        so_far["turn"]["what"].as_str().unwrap().contains("so far"),
        "{so_far}"
    );
    assert!(
        so_far["diff"].as_str().unwrap().contains("tests/cache.rs"),
        "{so_far}"
    );
    prompt(
        &env,
        "the parser tests fail since your last change: what did you change?",
    );
    let turn: Value = mcp.call(4, "diff", json!({}));
    let diff = turn["diff"].as_str().unwrap();
    assert!(
        diff.contains("src/parser.rs") && diff.contains("tests/cache.rs"),
        "{turn}"
    );
    assert_eq!(
        turn["turn"]["prompt"], "add a cache to the parser",
        "{turn}"
    );
    // `from: "@"` is this turn so far: nothing yet.
    let now = mcp.call(5, "diff", json!({"from": "@"}));
    assert_eq!(now["diff"], "", "{now}");
}

/// `hook install` from a folder inside a repository installs and registers at the work tree's
/// top, where the hook records prompts, and says so.
#[test]
fn hook_install_in_a_subfolder_installs_at_the_top() {
    let env = TestEnv::new();
    let p = env.proj();
    crate::agents::git_in_worktree(&p, &["init", "-q"]);
    write(&p, "src/deep/a.rs", "a\n");
    let out = env.ckpt_in(&p.join("src/deep"), &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(p.join(".claude/settings.local.json").exists());
    assert!(!p.join("src/deep/.claude").exists());
    assert!(
        stdout(&out).contains("top of the work tree"),
        "{}",
        stdout(&out)
    );
    let projects = env.json(&["projects"]);
    assert_eq!(projects[0]["root"], json!(p), "{projects}");
    assert_eq!(projects.as_array().unwrap().len(), 1, "{projects}");
}

/// The real Claude Code: a restore to a checkpoint taken before `hook install`, then a prompt:
/// it is recorded (the hook's file was never captured, so the restore left it alone).
#[test]
#[ignore = "needs the real agents: tests/agents/install.sh, then --ignored (.ci/run does both)"]
fn claude_code_prompts_are_recorded_after_a_restore_to_before_the_install() {
    use crate::conversations::{Driver, Which};
    let env = TestEnv::new();
    let p = env.proj();
    crate::agents::git_in_worktree(&p, &["init", "-q"]);
    write(&p, "notes.txt", "notes\n");
    write(&p, "old.txt", "to be deleted\n");
    env.watch();
    let before = env.checkpoint("before the install");
    let agent = Driver::start(Which::Claude, &env, &p);
    agent.turn(&p, "the first prompt, recorded", None);
    let prompts = |env: &TestEnv| -> Vec<String> {
        env.json(&["list", "--all-sessions"])
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "message")
            .map(|c| c["label"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(prompts(&env), ["the first prompt, recorded"]);
    let out = env.ckpt_in(&p, &["restore", &before, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(p.join(".claude/settings.local.json").exists());
    write(&p, "old.txt", "to be deleted\n");
    agent.turn(&p, "after the restore, recorded too", None);
    assert_eq!(
        prompts(&env),
        [
            "after the restore, recorded too",
            "the first prompt, recorded"
        ]
    );
}

/// The line counts `show` and `diff` give are git's: `git diff --numstat` of the same two
/// checkpoints in the store says the same for every file.
#[test]
fn line_counts_are_gits() {
    let env = TestEnv::new();
    let p = env.proj();
    let numbered = |n: usize, skip: usize| -> String {
        (0..n)
            .filter(|i| *i != skip)
            .map(|i| format!("line {i}\n"))
            .collect()
    };
    write(&p, "edited.txt", &numbered(40, 99));
    write(&p, "shrunk.txt", &numbered(30, 99));
    write(&p, "gone.txt", "a\nb\nc\n");
    write(&p, "no-newline.txt", "one\ntwo");
    env.watch();
    let a = env.checkpoint("a");
    write(&p, "edited.txt", &(numbered(40, 7) + "appended\n"));
    write(&p, "shrunk.txt", &numbered(10, 99));
    std::fs::remove_file(p.join("gone.txt")).unwrap();
    write(&p, "new.txt", "x\ny\n");
    write(&p, "no-newline.txt", "one\ntwo\nthree");
    let b = env.checkpoint("b");
    let numstat = env.git(&["diff", "--numstat", &a, &b]);
    let git: std::collections::BTreeMap<String, (u64, u64)> = numstat
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[2].to_string(),
                (f[0].parse().unwrap(), f[1].parse().unwrap()),
            )
        })
        .collect();
    assert_eq!(git.len(), 5, "{numstat}");
    let ours = |changes: &Value| -> std::collections::BTreeMap<String, (u64, u64)> {
        changes
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let n = |k: &str| c[k].as_u64().unwrap();
                (
                    c["path"].as_str().unwrap().to_string(),
                    (n("lines_added"), n("lines_removed")),
                )
            })
            .collect()
    };
    assert_eq!(ours(&env.json(&["show", &b])["changes"]), git);
    assert_eq!(ours(&env.json(&["diff", &a, &b])["files"]), git);
}

/// `ckpt diff` with no checkpoint named is what the agent changed during this turn, since the
/// latest prompt, whatever was recorded after it; `@` stays the newest checkpoint of any kind.
#[test]
fn diff_with_no_checkpoint_is_the_turn_so_far() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    prompt(&env, "make it two");
    write(&p, "a.txt", "two\n");
    env.checkpoint("a manual checkpoint in the middle of the turn");
    write(&p, "b.txt", "new\n");
    let turn = env.json(&["diff", "--name-only"]);
    let files: Vec<&str> = turn["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["a.txt", "b.txt"], "{turn}");
    let since_newest = env.json(&["diff", "@", "--name-only"]);
    assert_eq!(
        since_newest["files"].as_array().unwrap().len(),
        1,
        "{since_newest}"
    );
    let out = env.ckpt(&["diff", "--stat"]);
    assert!(
        stderr(&out).contains("since your latest prompt"),
        "{}",
        stderr(&out)
    );
}
