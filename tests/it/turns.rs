//! Exact turns: an agent's prompt, after-tool and turn-end hooks (`ckpt hook`, as the agents run
//! it) make each turn an interval with steps in it; `ckpt revert` takes back exactly one turn's
//! changes and leaves every other session's files and the user's edits byte-identical.

use std::path::Path;

use serde_json::{json, Value};

use crate::harness::{
    claude_prompt_with, claude_stop, claude_tool, stderr, stdout, tree_state, write, TestEnv,
};

fn tool(env: &TestEnv, session: &str, tool: &str, file: Option<&Path>) {
    claude_tool(env, &env.proj(), session, tool, file);
}

fn stop(env: &TestEnv, session: &str) {
    claude_stop(env, &env.proj(), session);
}

fn prompt(env: &TestEnv, session: &str, text: &str) -> String {
    claude_prompt_with(env, &env.proj(), session, text, json!({}));
    let log = env.json(&["log", "--dialog", session, "-n", "1"]);
    log["prompts"][0]["id"].as_str().unwrap().to_string()
}

fn revert(env: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json", "revert", "--yes"];
    all.extend_from_slice(args);
    let out = env.ckpt(&all);
    let code = out.status.code().unwrap();
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{} {}", stdout(&out), stderr(&out)));
    (code, value)
}

fn read(env: &TestEnv, rel: &str) -> Option<String> {
    std::fs::read_to_string(env.proj().join(rel)).ok()
}

#[test]
fn reverting_one_sessions_turn_leaves_the_other_session_and_the_user_alone() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "shared.txt", "1\n2\n3\n4\n5\n");
    env.watch();
    // Session A's turn: a new file and line 2 of the shared file, by its edit tools.
    let a = prompt(&env, "A", "add a.txt, change line 2");
    write(&p, "a.txt", "from A\n");
    tool(&env, "A", "Write", Some(&p.join("a.txt")));
    write(&p, "shared.txt", "1\nTWO\n3\n4\n5\n");
    tool(&env, "A", "Edit", Some(&p.join("shared.txt")));
    stop(&env, "A");
    // The user edits line 5 between turns; session B's turn writes its own file by Bash.
    write(&p, "shared.txt", "1\nTWO\n3\n4\nfive (user)\n");
    let b = prompt(&env, "B", "add b.txt");
    write(&p, "b.txt", "from B\n");
    tool(&env, "B", "Bash", None);
    stop(&env, "B");
    write(&p, "user.txt", "mine\n");

    // The log counts each turn's own changes: A's two files, B's one.
    let log = env.json(&["log"])["prompts"].clone();
    let turn_of = |id: &str| {
        log.as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap()["turn"]
            .clone()
    };
    assert_eq!(
        (
            turn_of(&a)["added"].clone(),
            turn_of(&a)["modified"].clone()
        ),
        (json!(1), json!(1))
    );
    assert_eq!(
        (
            turn_of(&b)["added"].clone(),
            turn_of(&b)["modified"].clone()
        ),
        (json!(1), json!(0))
    );
    assert!(turn_of(&a)["until"].is_string(), "A's turn ended: {log}");

    let before = tree_state(&p);
    let (code, r) = revert(&env, &[&a]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["reverted"], json!(["a.txt", "shared.txt"]), "{r}");
    assert_eq!(r["refused"], json!([]));
    assert_eq!(
        read(&env, "a.txt"),
        None,
        "the file the turn created is gone"
    );
    assert_eq!(
        read(&env, "shared.txt").unwrap(),
        "1\n2\n3\n4\nfive (user)\n"
    );
    assert_eq!(read(&env, "b.txt").unwrap(), "from B\n");
    assert_eq!(read(&env, "user.txt").unwrap(), "mine\n");
    // `ckpt undo` puts back exactly the files as they were before the revert.
    let undo = r["undo_checkpoint"].as_str().unwrap().to_string();
    env.json(&["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);
    assert_eq!(env.json(&["show", &undo])["kind"], "pre-restore");
    env.fsck();
}

#[test]
fn overlapping_turns_are_told_apart_by_the_paths_their_tools_name() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "keep\n");
    env.watch();
    let a = prompt(&env, "A", "two files");
    write(&p, "a1.txt", "a1\n");
    tool(&env, "A", "Write", Some(&p.join("a1.txt")));
    // B's turn starts and writes while A's is still running.
    let b = prompt(&env, "B", "one file");
    write(&p, "b.txt", "b\n");
    tool(&env, "B", "Write", Some(&p.join("b.txt")));
    write(&p, "a2.txt", "a2\n");
    tool(&env, "A", "Write", Some(&p.join("a2.txt")));
    stop(&env, "A");
    stop(&env, "B");

    let (code, r) = revert(&env, &[&a]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["reverted"], json!(["a1.txt", "a2.txt"]));
    assert_eq!(read(&env, "b.txt").unwrap(), "b\n");
    let (code, r) = revert(&env, &[&b]);
    assert_eq!((code, r["reverted"].clone()), (0, json!(["b.txt"])));
    assert_eq!(
        tree_state(&p).keys().cloned().collect::<Vec<_>>(),
        ["keep.txt"]
    );
}

#[test]
fn a_shell_in_both_turns_at_once_is_ambiguous_and_refused_unless_forced() {
    let env = TestEnv::new();
    let p = env.proj();
    env.watch();
    let a = prompt(&env, "A", "run a script");
    prompt(&env, "B", "run another");
    write(&p, "out.txt", "who wrote me?\n");
    tool(&env, "A", "Bash", None);
    tool(&env, "B", "Bash", None);
    stop(&env, "B");
    let (code, r) = revert(&env, &[&a]);
    assert_eq!(code, 2, "{r}");
    assert_eq!(r["reverted"], json!([]));
    assert_eq!(r["refused"][0]["path"], "out.txt");
    assert!(
        r["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("ambiguous"),
        "{r}"
    );
    // B reported its turn's end: nothing to say about its hooks.
    assert!(!r["refused"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("hook status"));
    assert!(r["undo_checkpoint"].is_null());
    assert_eq!(read(&env, "out.txt").unwrap(), "who wrote me?\n");
    let (code, r) = revert(&env, &["--force", &a]);
    assert_eq!((code, r["reverted"].clone()), (0, json!(["out.txt"])));
    assert_eq!(read(&env, "out.txt"), None);
}

/// A session whose hooks record prompts only (no step, no turn end) keeps its turn open: a shell
/// change in another turn is ambiguous with it, and the refusal says where to look.
#[test]
fn a_session_that_reports_no_turn_end_is_named_as_such_when_it_makes_a_change_ambiguous() {
    let env = TestEnv::new();
    let p = env.proj();
    env.watch();
    prompt(&env, "silent", "an agent with prompt hooks only");
    let a = prompt(&env, "A", "run a script");
    write(&p, "out.txt", "who wrote me?\n");
    tool(&env, "A", "Bash", None);
    stop(&env, "A");
    let (code, r) = revert(&env, &[&a]);
    assert_eq!(code, 2, "{r}");
    let why = r["refused"][0]["reason"].as_str().unwrap();
    assert!(
        why.contains("ambiguous") && why.contains("ckpt hook status"),
        "{r}"
    );
    assert_eq!(read(&env, "out.txt").unwrap(), "who wrote me?\n");
}

#[test]
fn a_line_changed_since_is_refused_and_named_the_rest_taken_back() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "1\n2\n3\n4\n5\n6\n");
    write(&p, "bin.dat", "\0old");
    env.watch();
    let a = prompt(&env, "A", "edit");
    write(&p, "f.txt", "1\nTWO\n3\n4\n5\nSIX\n");
    write(&p, "bin.dat", "\0new");
    tool(&env, "A", "Bash", None);
    stop(&env, "A");
    // The user changes one of the turn's lines, and the binary file.
    write(&p, "f.txt", "1\nuser's two\n3\n4\n5\nSIX\n");
    write(&p, "bin.dat", "\0user");
    let (code, r) = revert(&env, &[&a]);
    assert_eq!(code, 2, "{r}");
    assert_eq!(r["reverted"], json!(["f.txt"]));
    let refused: Vec<&str> = r["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert_eq!(refused, ["bin.dat", "f.txt"], "{r}");
    assert_eq!(read(&env, "f.txt").unwrap(), "1\nuser's two\n3\n4\n5\n6\n");
    assert_eq!(std::fs::read(p.join("bin.dat")).unwrap(), b"\0user");
}

#[test]
fn steps_are_points_in_a_turn_to_restore_and_revert_from() {
    let env = TestEnv::new();
    let p = env.proj();
    env.watch();
    let a = prompt(&env, "A", "three tools");
    for n in 1..=3 {
        write(&p, &format!("f{n}.txt"), &format!("{n}\n"));
        tool(&env, "A", "Write", Some(&p.join(format!("f{n}.txt"))));
    }
    // A read tool that changed nothing records no step.
    tool(&env, "A", "Read", Some(&p.join("f1.txt")));
    stop(&env, "A");
    let log = env.json(&["log", "--steps"])["prompts"].clone();
    let steps = log[0]["steps"].as_array().unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["step", "step", "step", "turn-end"], "{log}");
    assert!(steps.iter().all(|s| s["turn"] == a.as_str()));
    assert_eq!(steps[0]["tool"], "Write");
    assert_eq!(steps[1]["step"], 2);
    assert_eq!(steps[2]["touched"], json!(["f3.txt"]));
    // `list` hides them unless asked.
    let list = env.json(&["list"]);
    assert!(list.as_array().unwrap().iter().all(|c| c["kind"] != "step"));
    let list = env.json(&["list", "--steps"]);
    assert_eq!(
        list.as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "step")
            .count(),
        3
    );

    let first = steps[0]["id"].as_str().unwrap();
    // Reverting from the first step takes back what came after it.
    let (code, r) = revert(&env, &[first]);
    assert_eq!(
        (code, r["reverted"].clone()),
        (0, json!(["f2.txt", "f3.txt"]))
    );
    assert_eq!(read(&env, "f1.txt").unwrap(), "1\n");
    env.json(&["undo", "--yes"]);
    // Restoring to it is exact.
    env.json(&["restore", "--yes", first]);
    let names: Vec<String> = tree_state(&p).keys().cloned().collect();
    assert_eq!(names, ["f1.txt"]);
    env.fsck();
}

#[test]
fn revert_refuses_what_is_not_a_turn_and_changes_nothing() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "x.txt", "x\n");
    env.watch();
    let manual = env.json(&["checkpoint", "-m", "by hand"]);
    let before = tree_state(&p);
    for (id, says) in [
        (manual["id"].as_str().unwrap(), "`manual` checkpoint"),
        ("deadbeef", "no checkpoint matches"),
    ] {
        let out = env.ckpt(&["revert", "--yes", id]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
    assert_eq!(tree_state(&p), before);
    env.assert_serving();
}

fn rewind(env: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json", "rewind", "--code", "--yes"];
    all.extend_from_slice(args);
    let out = env.ckpt(&all);
    let code = out.status.code().unwrap();
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{} {}", stdout(&out), stderr(&out)));
    (code, value)
}

#[test]
fn rewind_in_a_shared_folder_takes_back_only_this_sessions_turns() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "shared.txt", "1\n2\n3\n4\n5\n");
    env.watch();
    let a1 = prompt(&env, "A", "add a.txt, change line 2");
    let at_a1 = tree_state(&p);
    write(&p, "a.txt", "from A\n");
    tool(&env, "A", "Write", Some(&p.join("a.txt")));
    write(&p, "shared.txt", "1\nTWO\n3\n4\n5\n");
    tool(&env, "A", "Edit", Some(&p.join("shared.txt")));
    stop(&env, "A");
    write(&p, "shared.txt", "1\nTWO\n3\n4\nfive (user)\n");
    prompt(&env, "B", "add b.txt");
    write(&p, "b.txt", "from B\n");
    tool(&env, "B", "Bash", None);
    stop(&env, "B");
    let a2 = prompt(&env, "A", "add a2.txt");
    write(&p, "a2.txt", "again A\n");
    tool(&env, "A", "Bash", None);
    stop(&env, "A");

    let before = tree_state(&p);
    let (code, r) = rewind(&env, &["--dialog", "A", "2"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["files"], "reverted", "{r}");
    assert_eq!(r["turns"], json!([a1, a2]), "{r}");
    assert_eq!(
        r["reverted"],
        json!(["a.txt", "a2.txt", "shared.txt"]),
        "{r}"
    );
    let kept: Vec<(String, String)> = r["left_alone"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["path"].as_str().unwrap().into(),
                k["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(kept.len(), 2, "{r}");
    assert_eq!(kept[0].0, "b.txt");
    assert!(kept[0].1.contains("dialog B"), "{r}");
    assert_eq!(kept[1].0, "shared.txt");
    assert!(kept[1].1.contains("by you"), "{r}");
    assert_eq!(read(&env, "a.txt"), None);
    assert_eq!(read(&env, "a2.txt"), None);
    assert_eq!(read(&env, "b.txt").unwrap(), "from B\n");
    assert_eq!(
        read(&env, "shared.txt").unwrap(),
        "1\n2\n3\n4\nfive (user)\n"
    );
    // Undoable exactly; and `--all` puts the whole tree back as it was at the prompt.
    env.json(&["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);
    let (code, r) = rewind(&env, &["--dialog", "A", "--all", "2"]);
    assert_eq!((code, r["files"].clone()), (0, json!("restored")), "{r}");
    assert_eq!(tree_state(&p), at_a1);
    env.fsck();
}

#[test]
fn rewind_with_one_session_and_nobody_else_restores_the_whole_tree() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "k\n");
    env.watch();
    prompt(&env, "A", "first");
    write(&p, "x.txt", "x\n");
    tool(&env, "A", "Write", Some(&p.join("x.txt")));
    // The second turn never reports its end: its changes are not checkpointed yet.
    let second = prompt(&env, "A", "second");
    let at_second = tree_state(&p);
    write(&p, "y.txt", "y\n");
    std::fs::remove_file(p.join("keep.txt")).unwrap();

    // Revert sees the running turn's changes no checkpoint holds yet.
    let (code, r) = revert(&env, &["--dry-run", &second]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["reverted"], json!(["keep.txt", "y.txt"]), "{r}");

    let (code, r) = rewind(&env, &["--dialog", "A", "1"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["files"], "restored", "{r}");
    assert_eq!(tree_state(&p), at_second);
    // Twice: the restore's own changes are nobody else's work.
    let (code, r) = rewind(&env, &["--dialog", "A", "2"]);
    assert_eq!((code, r["files"].clone()), (0, json!("restored")), "{r}");
    assert_eq!(read(&env, "x.txt"), None);
    env.fsck();
}

/// Copilot CLI's own events (as its binary sends them: no event name, camelCase fields): a
/// prompt, a `create` tool call and the turn's end make an exact turn with one step.
#[test]
fn copilots_own_events_make_an_exact_turn() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "k\n");
    env.watch();
    let hook = |payload: Value| {
        crate::harness::hook_json(&env, &p, "copilot", &payload);
    };
    hook(json!({"sessionId": "cp-1", "timestamp": 1, "cwd": p, "prompt": "make hello"}));
    write(&p, "hello.txt", "hello\n");
    hook(
        json!({"sessionId": "cp-1", "timestamp": 2, "cwd": p, "toolName": "create",
        "toolArgs": {"path": p.join("hello.txt"), "file_text": "hello\n"},
        "toolResult": {"resultType": "success"}}),
    );
    hook(
        json!({"sessionId": "cp-1", "timestamp": 3, "cwd": p, "stopReason": "end_turn",
        "stop_hook_active": false}),
    );
    let log = env.json(&["log", "--steps", "--dialog", "cp-1"]);
    let turn = &log["prompts"][0];
    assert_eq!(log["prompts"].as_array().unwrap().len(), 1, "{log}");
    assert_eq!(turn["label"], "make hello");
    assert!(turn["turn"]["until"].is_string(), "{turn}");
    assert_eq!(turn["steps"][0]["tool"], "create", "{turn}");
    assert_eq!(turn["steps"][0]["touched"], json!(["hello.txt"]), "{turn}");
    assert_eq!(turn["turn"]["added"], 1, "{turn}");
}
