//! Dialogs: one timeline per conversation, all in the project's one store.

use crate::harness::*;

#[test]
fn dialogs_have_their_own_timelines_in_one_store() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "base");
    env.watch();

    // A new dialog starts with an initial checkpoint of the files as they are.
    let created = env.json(&["dialog", "new", "feature-x", "-m", "Build feature X"]);
    assert_eq!(created["dialog"], "feature-x");
    assert_eq!(created["initial"]["kind"], "initial");
    assert_eq!(created["initial"]["seq"], 1);
    assert_eq!(created["initial"]["label"], "Build feature X");
    let out = env.ckpt(&["--json", "dialog", "new", "feature-x"]);
    assert_eq!(out.status.code(), Some(1));
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["data"]["kind"], "dialog_exists");

    // A made-up name is valid and unique enough.
    let made_up = env.json(&["dialog", "new"]);
    assert!(
        made_up["dialog"].as_str().unwrap().starts_with("d-"),
        "{made_up}"
    );

    // Checkpointing an unknown named dialog creates it: initial first, then the message.
    write(&p, "a.txt", "edited");
    let msg = env.json(&[
        "checkpoint",
        "--dialog",
        "session-42",
        "-m",
        "first message",
    ]);
    assert_eq!(msg["seq"], 2);
    let timeline = env.json(&["list", "--dialog", "session-42"]);
    let kinds: Vec<&str> = timeline
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["manual", "initial"]);

    // The default dialog is separate and needs no initial checkpoint.
    let d = env.json(&["checkpoint", "-m", "in default"]);
    assert_eq!(
        (d["dialog"].as_str(), d["seq"].as_u64()),
        (Some("default"), Some(1))
    );

    let dialogs = env.json(&["dialog", "list"]);
    let names: Vec<&str> = dialogs
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dialog"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"feature-x") && names.contains(&"session-42") && names.contains(&"default"),
        "{dialogs}"
    );
    let fx = dialogs
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dialog"] == "feature-x")
        .unwrap();
    assert_eq!(fx["title"], "Build feature X");
    assert_eq!(fx["checkpoints"], 1);
    let human = stdout(&env.ckpt(&["dialog", "list"]));
    assert!(
        human.starts_with("DIALOG") && human.contains("Build feature X"),
        "{human}"
    );

    // Removing a dialog forgets its timeline; content shared with others stays.
    let removed = env.json(&["dialog", "rm", "session-42"]);
    assert_eq!(removed["dialog"], "session-42");
    let out = env.ckpt(&["--json", "list", "--dialog", "session-42"]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        serde_json::json!([])
    );
    let out = env.ckpt(&["--json", "dialog", "rm", "session-42"]);
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["data"]["kind"], "unknown_dialog");
    let out = env.ckpt(&["--json", "dialog", "new", "../bad"]);
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["data"]["kind"], "invalid_params");
    env.git(&["gc", "--prune=now", "--quiet"]);
    env.json(&["restore", d["id"].as_str().unwrap(), "--yes"]);
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "edited");
    env.fsck();
}

#[test]
fn the_session_example_end_to_end() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "README.md", "# todo\n");
    env.watch();
    env.json(&["dialog", "new", "todo-app", "-m", "Create a TODO app"]);
    let d = ["--dialog", "todo-app"];
    let msg = |label: &str| {
        let mut args = vec!["checkpoint", "-m", label];
        args.extend_from_slice(&d);
        env.json(&args)
    };
    // Three messages, each followed by the agent's edits.
    let m1 = msg("Create main.py");
    write(&p, "main.py", "print('todo')\n");
    let m2 = msg("Add models");
    write(&p, "models.py", "class Todo: pass\n");
    let m3 = msg("Add tests");
    write(&p, "tests.py", "def test(): pass\n");
    let mut status_args = vec!["session", "status"];
    status_args.extend_from_slice(&d);
    let status = env.json(&status_args);
    assert_eq!(status["active_session"], 1);
    assert_eq!(status["has_unapproved"], true);
    assert_eq!(status["last_approved_at"], serde_json::Value::Null);

    let mut approve = vec!["session", "approve", "-m", "Feature complete"];
    approve.extend_from_slice(&d);
    let approved = env.json(&approve);
    assert_eq!(approved["new_session"], 2);
    assert_eq!(
        approved["commits_approved"], 4,
        "initial + three messages: {approved}"
    );
    let approved_state = tree_state(&p);
    let status = env.json(&status_args);
    assert_eq!(
        (
            status["active_session"].as_u64(),
            status["has_unapproved"].as_bool()
        ),
        (Some(2), Some(false))
    );
    assert_eq!(status["approved_commit"], approved["approved_commit"]);

    // Two more messages in session 2, with changes of every kind.
    let m4 = msg("Rename things");
    std::fs::remove_file(p.join("models.py")).unwrap();
    write(&p, "main.py", "print('renamed')\n");
    let m5 = msg("Add a CLI");
    write(&p, "cli.py", "import sys\n");
    assert_eq!(m4["session"], 2);
    assert_eq!(m5["session"], 2);
    // Only the active session is listed by default (with the approved checkpoint it starts from).
    let mut list = vec!["list"];
    list.extend_from_slice(&d);
    let ids: Vec<String> = env
        .json(&list)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.contains(&m4["id"].as_str().unwrap().to_string())
            && !ids.contains(&m1["id"].as_str().unwrap().to_string()),
        "{ids:?}"
    );
    let mut all = list.clone();
    all.push("--all-sessions");
    assert_eq!(env.json(&all).as_array().unwrap().len(), 7);

    // Reset: back to the approved state, byte for byte; a new session starts.
    let mut reset = vec!["session", "reset", "--yes"];
    reset.extend_from_slice(&d);
    let r = env.json(&reset);
    assert_eq!(r["reset_to"], approved["approved_commit"]);
    assert_eq!(r["new_session"], 3);
    assert_eq!(
        tree_state(&p),
        approved_state,
        "reset must return exactly to the approved state"
    );
    let status = env.json(&status_args);
    assert_eq!(
        (
            status["active_session"].as_u64(),
            status["has_unapproved"].as_bool()
        ),
        (Some(3), Some(false))
    );

    // Restore to a middle checkpoint, then undo that restore.
    let before_restore = tree_state(&p);
    env.json(&["restore", m2["id"].as_str().unwrap(), "--yes"]);
    assert!(
        p.join("main.py").exists() && !p.join("models.py").exists() && !p.join("tests.py").exists()
    );
    env.json(&["undo", "--yes", "--dialog", "todo-app"]);
    assert_eq!(tree_state(&p), before_restore);
    let _ = m3;
    env.fsck();
    env.git(&["gc", "--prune=now", "--quiet"]);
    env.fsck();
    // After gc every checkpoint still restores byte-identically.
    env.json(&[
        "restore",
        approved["approved_commit"].as_str().unwrap(),
        "--yes",
    ]);
    assert_eq!(tree_state(&p), approved_state);
}

#[test]
fn notes_tags_grep_and_forks() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one");
    env.watch();
    let c1 = env.json(&["checkpoint", "-m", "Add login form"]);
    write(&p, "a.txt", "two");
    let c2 = env.json(&["checkpoint", "-m", "Refactor the router"]);
    let id1 = c1["id"].as_str().unwrap();

    env.json(&["tag", &id1[..8], "before-router"]);
    let out = env.ckpt(&["--json", "tag", c2["id"].as_str().unwrap(), "before-router"]);
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["data"]["kind"], "tag_exists");
    let out = env.ckpt(&["tag", id1, "../nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid tag name"),
        "{}",
        stderr(&out)
    );
    env.json(&["note", id1, "works on Firefox"]);
    let noted = env.json(&["note", id1, "broken on Safari"]);
    assert_eq!(noted["notes"], "works on Firefox\nbroken on Safari");
    let shown = env.json(&["show", id1]);
    assert_eq!(shown["tags"], serde_json::json!(["before-router"]));
    assert!(stdout(&env.ckpt(&["show", id1])).contains("broken on Safari"));

    let found = |pattern: &str| -> Vec<String> {
        env.json(&["list", "--grep", pattern])
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(found("SAFARI"), vec![id1.to_string()]);
    assert_eq!(found("before-router"), vec![id1.to_string()]);
    assert_eq!(
        found("router"),
        vec![c2["id"].as_str().unwrap().to_string(), id1.to_string()]
    );
    assert!(found("nothing like this").is_empty());
    // Notes and tags are kept by refs: they survive git gc.
    env.git(&["gc", "--prune=now", "--quiet"]);
    assert_eq!(
        env.json(&["show", id1])["notes"],
        "works on Firefox\nbroken on Safari"
    );

    // A fork starts a dialog whose approved state is that checkpoint; files are untouched.
    let fork = env.json(&["dialog", "fork", id1, "--name", "alt"]);
    assert_eq!(fork["forked_from"], id1);
    assert_eq!(fork["initial"]["tree"], c1["tree"]);
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "two");
    let status = env.json(&["session", "status", "--dialog", "alt"]);
    assert_eq!(status["approved_commit"], fork["initial"]["id"]);
    assert_eq!(
        status["has_unapproved"], true,
        "files differ from the forked state: {status}"
    );
    env.json(&["session", "reset", "--dialog", "alt", "--yes"]);
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "one");
    env.fsck();
}

#[test]
fn the_graph_shows_dialogs_sessions_and_forks() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "1");
    env.watch();
    let first = env.checkpoint("first message");
    write(&p, "a.txt", "2");
    env.json(&["session", "approve", "-m", "looks good"]);
    write(&p, "a.txt", "3");
    env.checkpoint("second session work");
    env.json(&["restore", &first, "--yes"]);
    env.json(&["dialog", "fork", &first, "--name", "alt"]);
    env.json(&["tag", &first, "v1"]);
    let out = env.ckpt(&["list", "--graph"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let g = stdout(&out);
    let lines: Vec<&str> = g.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("default  session 2 active")),
        "{g}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("alt  session 1 active  (forked from ")),
        "{g}"
    );
    assert!(lines.contains(&"|-- session 1: approved"), "{g}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("| A ") && l.contains("looks good")),
        "{g}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("| R ") && l.contains("restored to")),
        "{g}"
    );
    assert!(lines.iter().any(|l| l.starts_with("| U ")), "{g}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("| o ") && l.contains("first message") && l.contains("[v1]")),
        "{g}"
    );
    // Newest first within a dialog: the restore comes before the approval.
    let pos = |m: &str| lines.iter().position(|l| l.contains(m)).unwrap();
    assert!(
        pos("restored to") < pos("looks good") && pos("looks good") < pos("first message"),
        "{g}"
    );
}

/// A full id names its checkpoint wherever a dialog's timeline holds it, and nothing else:
/// the newest, one a few prompts back, one past the first 64 (found by the whole search), a
/// checkpoint of another dialog; not a tree of the store, and not a checkpoint whose dialog was
/// removed.
#[test]
fn full_ids_name_checkpoints_near_and_far_and_only_in_a_timeline() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "start");
    env.watch();
    let mut rpc = Rpc::connect(&env);
    let mut ids = Vec::new();
    for i in 0..70 {
        write(&p, "a.txt", &format!("{i}"));
        let c = rpc.call("checkpoint", serde_json::json!({ "project": p }));
        ids.push(c["id"].as_str().unwrap().to_string());
        if i == 0 {
            // All 70 stay (retention keeps 50 by default).
            env.json(&["dialog", "keep", "default", "100"]);
        }
    }
    for n in [69, 66, 0] {
        let shown = env.json(&["show", &ids[n]]);
        assert_eq!(shown["id"].as_str(), Some(ids[n].as_str()), "{shown}");
        assert_eq!(shown["seq"].as_u64(), Some(n as u64 + 1), "{shown}");
        assert_eq!(
            env.git(&["show", &format!("{}:a.txt", ids[n])]),
            n.to_string()
        );
    }
    let side = rpc.call(
        "checkpoint",
        serde_json::json!({ "project": p, "dialog": "side", "label": "on the side" }),
    );
    let side_id = side["id"].as_str().unwrap().to_string();
    assert_eq!(env.json(&["show", &side_id])["dialog"], "side");

    let tree = env.json(&["show", &ids[3]])["tree"]
        .as_str()
        .unwrap()
        .to_string();
    for (what, id) in [("a tree", tree), ("a removed dialog's checkpoint", side_id)] {
        if what != "a tree" {
            env.json(&["dialog", "rm", "side"]);
        }
        let out = env.ckpt(&["show", &id]);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("no checkpoint matches"),
            "{what}: {}",
            stderr(&out)
        );
    }
    env.assert_serving();
}

/// A new dialog's first checkpoint counts every file of its tree as added, whether the count
/// comes from the index that wrote the tree (the files as they are) or from reading the tree
/// (a fork from an older checkpoint); both equal what git counts.
#[test]
fn a_new_dialogs_first_checkpoint_counts_the_files_of_its_tree() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, ".gitignore", "*.log\n");
    write(&p, "a.txt", "a\n");
    write(&p, "src/lib/deep/x.rs", "x\n");
    write(&p, "src/lib/y.rs", "y\n");
    write(&p, "skipped.log", "ignored\n");
    write(&p, "run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(
        p.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("a.txt", p.join("link")).unwrap();
    std::fs::create_dir_all(p.join("empty/inside")).unwrap();
    env.watch();
    let old = env.json(&["checkpoint", "-m", "before"]);
    write(&p, "b.txt", "new\n");
    std::fs::remove_file(p.join("src/lib/y.rs")).unwrap();

    // Every file of the tree added, as many as git counts in it.
    let assert_counts = |c: &serde_json::Value, files: u64| {
        let tree = c["tree"].as_str().unwrap();
        let counted = env
            .git(&["ls-tree", "-r", "--name-only", tree])
            .lines()
            .count();
        assert_eq!(c["files"].as_u64(), Some(counted as u64), "{c}");
        assert_eq!(
            (c["files"].as_u64(), c["added"].as_u64()),
            (Some(files), Some(files)),
            "{c}"
        );
    };
    let first_of = |dialog: &str| {
        let list = env.json(&["list", "--dialog", dialog]);
        list.as_array().unwrap().last().unwrap().clone()
    };
    let msg = env.json(&["checkpoint", "--dialog", "s-1", "-m", "first prompt"]);
    assert_eq!(msg["seq"], 2);
    let initial = first_of("s-1");
    assert_eq!(initial["kind"], "initial");
    assert_counts(&initial, 6);
    assert_eq!(
        (&msg["files"], &msg["added"]),
        (&initial["files"], &0.into())
    );

    let fork = env.json(&[
        "dialog",
        "fork",
        old["id"].as_str().unwrap(),
        "--name",
        "alt",
    ]);
    assert_counts(&fork["initial"], 6);
    env.fsck();
}
