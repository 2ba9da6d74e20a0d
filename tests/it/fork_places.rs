//! Where a conversation fork is read from and written to, attacked: a fetched prompt whose
//! metadata names a session file of the remote's choosing (behind a symlink that leads out of
//! every agent's folder), a date folder swapped for a symlink, an agent folder that cannot be
//! written (the rewind still reports its restore and its undo), and a fork folder named with
//! `..`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;
use crate::servers::{bare_repo, GitDaemon};

const CODEX_ID: &str = "01a21c41-3280-7fc1-8508-0f0b81bbe359";
const CODEX_TURN: &str = "01a21c41-3f09-7962-a151-c38a412c1615";

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sessions")
            .join(name),
    )
    .unwrap()
}

/// Runs `ckpt hook AGENT` in `project` with `input` on stdin.
fn hook(env: &TestEnv, project: &Path, agent: &str, input: &Value) {
    hook_json(env, project, agent, input);
}

/// A Codex prompt ("turn B" of the fixture's session) whose transcript is `transcript`.
fn codex_prompt(env: &TestEnv, project: &Path, transcript: &Path) {
    let input = serde_json::json!({ "session_id": CODEX_ID, "turn_id": CODEX_TURN,
        "transcript_path": transcript, "cwd": project, "hook_event_name": "UserPromptSubmit",
        "model": "m", "permission_mode": "default", "prompt": "turn B" });
    hook(env, project, "codex", &input);
}

/// Every file below `dir` (none when it does not exist).
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            match meta.is_dir() {
                true => todo.push(e.path()),
                false => out.push(e.path()),
            }
        }
    }
    out.sort();
    out
}

fn rewind_json(env: &TestEnv, project: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["rewind", "--yes", "--json"];
    all.extend_from_slice(args);
    let out = env.ckpt_in(project, &all);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&out), stderr(&out)));
    (out.status.code(), report)
}

/// A folder anyone can write to, shaped like Codex's, holding a real session; and a folder
/// of the user's (`victim`) that a symlink for today's date folder leads to.
struct Planted {
    day: PathBuf,
    rollout: PathBuf,
    victim: PathBuf,
}

fn plant(env: &TestEnv) -> Planted {
    let shared = env.home.join("shared");
    let day = shared.join("sessions/2026/11/27");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let rollout = day.join(format!("rollout-2026-11-27T09-06-04-{CODEX_ID}.jsonl"));
    std::fs::write(&rollout, fixture("codex.jsonl")).unwrap();
    let victim = env.home.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    Planted {
        day,
        rollout,
        victim,
    }
}

/// Today's date folder below `sessions` made a symlink to `to`.
fn today_linked(sessions: &Path, to: &Path) {
    let now = jiff::Zoned::now();
    let month = sessions.join(now.strftime("%Y/%m").to_string());
    std::fs::create_dir_all(&month).unwrap();
    std::os::unix::fs::symlink(to, month.join(now.strftime("%d").to_string())).unwrap();
}

/// One prompt whose session is `transcript`, then a rewind: its report, after checking the
/// files came back either way.
fn rewound(env: &TestEnv, transcript: &Path) -> Value {
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    codex_prompt(env, &p, transcript);
    write(&p, "a.txt", "two\n");
    let (code, report) = rewind_json(env, &p, &[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "one\n");
    assert!(report["undo_checkpoint"].is_string(), "{report}");
    report
}

/// A session file outside Codex's folder, or reached through a symlinked date folder, is
/// never read; a fork whose folder is a symlink is never written through.
#[test]
fn a_session_is_only_read_and_forked_inside_the_agents_own_folder() {
    // 1. The hook named a transcript outside Codex's folder (today's date folder there leads
    //    into the user's folder).
    let env = TestEnv::new();
    let planted = plant(&env);
    today_linked(&env.home.join("shared/sessions"), &planted.victim);
    let report = rewound(&env, &planted.rollout);
    let why = report["conversation_skipped"].as_str().unwrap_or_default();
    assert!(why.contains("not where codex keeps session"), "{report}");
    assert_eq!(files_below(&planted.victim), Vec::<PathBuf>::new());

    // 2. Inside Codex's folder, but its date folder is a symlink to the planted one.
    let env = TestEnv::new();
    let planted = plant(&env);
    let sessions = env.home.join("home/.codex/sessions");
    std::fs::create_dir_all(sessions.join("2026/11")).unwrap();
    std::os::unix::fs::symlink(&planted.day, sessions.join("2026/11/27")).unwrap();
    let through = sessions.join(format!(
        "2026/11/27/rollout-2026-11-27T09-06-04-{CODEX_ID}.jsonl"
    ));
    let report = rewound(&env, &through);
    let why = report["conversation_skipped"].as_str().unwrap_or_default();
    assert!(why.contains("symlink"), "{report}");

    // 3. The session is Codex's own, but the folder the fork goes to (today's) is a symlink:
    //    the files are rewound, the report says so, and nothing is written through it.
    let env = TestEnv::new();
    let planted = plant(&env);
    let sessions = env.home.join("home/.codex/sessions");
    let own = sessions.join(format!(
        "2026/11/27/rollout-2026-11-27T09-06-04-{CODEX_ID}.jsonl"
    ));
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    std::fs::write(&own, fixture("codex.jsonl")).unwrap();
    today_linked(&sessions, &planted.victim);
    let report = rewound(&env, &own);
    assert!(report["conversation"].is_null(), "{report}");
    let why = report["conversation_skipped"].as_str().unwrap_or_default();
    assert!(why.contains("cannot write the forked session"), "{report}");
    assert_eq!(
        files_below(&planted.victim),
        Vec::<PathBuf>::new(),
        "written through the link"
    );
    assert_eq!(std::fs::read(&own).unwrap(), fixture("codex.jsonl"));
    env.assert_serving();
}

/// A prompt fetched from a remote carries metadata the remote chose: its conversation is never
/// forked, whatever it names, and its files rewind as ever.
#[test]
fn a_fetched_prompts_metadata_never_names_a_session() {
    let base = tempfile::tempdir().unwrap();
    let _remote = bare_repo(base.path(), "team.git");
    let server = GitDaemon::start(base.path());
    let mallory = TestEnv::with_config("push_as = \"mallory\"\n");
    let bob = TestEnv::with_config("push_as = \"bob\"\n");
    // Bob has a real Codex session where the metadata will point.
    let sessions = bob.home.join("home/.codex/sessions/2026/11/27");
    std::fs::create_dir_all(&sessions).unwrap();
    let rollout = sessions.join(format!("rollout-2026-11-27T09-06-04-{CODEX_ID}.jsonl"));
    std::fs::write(&rollout, fixture("codex.jsonl")).unwrap();
    let mp = mallory.proj();
    write(&mp, "a.txt", "mallory's\n");
    mallory.watch();
    let meta = serde_json::json!({ "ckpt_agent": "codex", "session_id": CODEX_ID,
        "turn_id": CODEX_TURN, "transcript_path": rollout, "hook_event_name": "UserPromptSubmit" });
    let meta_file = mallory.home.join("meta.json");
    std::fs::write(&meta_file, meta.to_string()).unwrap();
    mallory.json(&[
        "checkpoint",
        "-m",
        "turn B",
        "--prompt",
        "--dialog",
        "s1",
        "--message-id",
        CODEX_TURN,
        "--meta",
        meta_file.to_str().unwrap(),
    ]);
    write(&bob.proj(), "b.txt", "bob's\n");
    bob.watch();
    for env in [&mallory, &bob] {
        let out = env.ckpt(&["remote", "add", "team", &server.url("team.git")]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    mallory.json(&["push", "team", "--with-metadata"]);
    bob.json(&["fetch", "team"]);
    let theirs = bob.json(&["list", "--remote", "team"]);
    let prompt = theirs
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "turn B")
        .unwrap_or_else(|| panic!("{theirs}"));
    let id = prompt["id"].as_str().unwrap();
    let before = files_below(&bob.home.join("home/.codex"));
    let (code, report) = rewind_json(&bob, &bob.proj(), &[id]);
    assert_eq!(code, Some(0), "{report}");
    let why = report["conversation_skipped"].as_str().unwrap_or_default();
    assert!(why.contains("fetched from team"), "{report}");
    assert_eq!(files_below(&bob.home.join("home/.codex")), before);
    assert_eq!(
        std::fs::read_to_string(bob.proj().join("a.txt")).unwrap(),
        "mallory's\n"
    );
    bob.assert_serving();
}

/// An agent folder that cannot be written: the rewind restores the files and says so, with
/// the checkpoint that undoes it, and names why the conversation was not forked; `--conversation`
/// alone fails and changes nothing.
#[test]
fn a_fork_that_cannot_be_written_still_reports_the_rewind() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    let folder = env.home.join("home/.claude/projects/-proj");
    std::fs::create_dir_all(&folder).unwrap();
    let session = "193241d3-a622-4f2c-a4b6-ad4873cf4d61";
    let transcript = folder.join(format!("{session}.jsonl"));
    std::fs::write(&transcript, fixture("claude-code.jsonl")).unwrap();
    let input = serde_json::json!({ "session_id": session, "transcript_path": transcript,
        "cwd": p, "prompt": "turn B", "prompt_id": "5f04f98c-11b6-41f5-b3f1-b7385b164174",
        "hook_event_name": "UserPromptSubmit" });
    hook(&env, &p, "claude-code", &input);
    write(&p, "a.txt", "two\n");
    make_unwritable(&folder);
    let out = env.ckpt_in(&p, &["rewind", "--conversation", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "two\n");
    let (code, report) = rewind_json(&env, &p, &[]);
    make_writable(&folder);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["written"], serde_json::json!(["a.txt"]), "{report}");
    let undo = report["undo_checkpoint"].as_str().unwrap();
    assert!(report["conversation"].is_null(), "{report}");
    let why = report["conversation_skipped"].as_str().unwrap_or_default();
    assert!(why.contains("cannot write the forked session"), "{report}");
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "one\n");
    let names: Vec<_> = std::fs::read_dir(&folder).unwrap().collect();
    assert_eq!(names.len(), 1, "only the original session is there");
    // The human output says both.
    write(&p, "a.txt", "three\n");
    hook(&env, &p, "claude-code", &input);
    make_unwritable(&folder);
    let out = env.ckpt_in(&p, &["rewind", "--yes"]);
    make_writable(&folder);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("undo with"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("the conversation was not"),
        "{}",
        stderr(&out)
    );
    let shown = env.json(&["show", undo]);
    assert_eq!(shown["kind"], "pre-restore", "{shown}");
    env.assert_serving();
}

/// `ckpt fork ID --worktree X/new/../new2` makes `X/new2` alone.
#[test]
fn a_fork_folder_named_with_dotdot_makes_that_folder_alone() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    let first = env.checkpoint("first");
    let x = env.home.join("x");
    std::fs::create_dir_all(&x).unwrap();
    let named = format!("{}/new/../new2", x.display());
    let out = env.ckpt_in(&p, &["fork", &first, "--worktree", &named, "--code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(x.join("new2/a.txt").exists());
    assert!(!x.join("new").exists(), "an empty x/new was left");
    assert!(
        stdout(&out).contains(&format!("{}/new2", x.display())),
        "{}",
        stdout(&out)
    );
}

/// After a rewind, the forked session's prompts show as a fork of the original in `list
/// --graph`; an undo of the rewind names the session the files belong to again (the original).
#[test]
fn a_forked_session_is_shown_as_a_fork_and_undo_names_the_original() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    let folder = env.home.join("home/.claude/projects/-proj");
    std::fs::create_dir_all(&folder).unwrap();
    let session = "193241d3-a622-4f2c-a4b6-ad4873cf4d61";
    let transcript = folder.join(format!("{session}.jsonl"));
    std::fs::write(&transcript, fixture("claude-code.jsonl")).unwrap();
    let input = serde_json::json!({ "session_id": session, "transcript_path": transcript,
        "cwd": p, "prompt": "turn B", "prompt_id": "5f04f98c-11b6-41f5-b3f1-b7385b164174",
        "hook_event_name": "UserPromptSubmit" });
    hook(&env, &p, "claude-code", &input);
    write(&p, "a.txt", "two\n");
    let (code, report) = rewind_json(&env, &p, &[]);
    assert_eq!(code, Some(0), "{report}");
    let fork = report["conversation"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The user goes on in the fork: its prompts arrive under its own session.
    let next = serde_json::json!({ "session_id": fork, "cwd": p, "prompt": "turn B, better",
        "hook_event_name": "UserPromptSubmit" });
    hook(&env, &p, "claude-code", &next);
    let graph = stdout(&env.ckpt(&["list", "--graph"]));
    assert!(
        graph.contains(&format!(
            "(a fork of {session}'s conversation, rewound past \"turn B\")"
        )),
        "{graph}"
    );
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("claude --resume {session}")),
        "{}",
        stdout(&out)
    );
}
