//! `ckpt revert` at its edges, through the real daemon: a symlink, a file deleted or renamed
//! since, a binary file unchanged since, a file created again; and the ids it cannot take (a step
//! whose turn was pruned, a turn brought in from a bundle): a clear error, nothing changed; and
//! retention, which prunes a turn's steps with it and never counts them against `keep`.

use std::path::Path;

use serde_json::{json, Value};

use crate::harness::{
    claude_prompt_with, claude_stop, claude_tool, stderr, stdout, symlink, tree_state, write,
    TestEnv,
};

fn prompt(env: &TestEnv, session: &str, text: &str) -> String {
    claude_prompt_with(env, &env.proj(), session, text, json!({}));
    let log = env.json(&["log", "--dialog", session, "-n", "1"]);
    log["prompts"][0]["id"].as_str().unwrap().to_string()
}

fn revert(env: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json", "revert", "--yes"];
    all.extend_from_slice(args);
    let out = env.ckpt(&all);
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{} {}", stdout(&out), stderr(&out)));
    (out.status.code().unwrap(), value)
}

fn refused(r: &Value) -> Vec<(String, String)> {
    r["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["path"].as_str().unwrap().to_string(),
                x["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn link_of(p: &Path, rel: &str) -> Option<String> {
    std::fs::read_link(p.join(rel))
        .ok()
        .map(|t| t.to_string_lossy().into_owned())
}

#[test]
fn symlinks_binaries_and_files_gone_since_go_back_whole_or_are_named() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "kept.txt", "the turn edits me\n");
    write(&p, "moved.txt", "the turn edits me, then you move me\n");
    write(&p, "img.bin", "\0\u{1}old image");
    symlink(&p, "old-link", "kept.txt");
    env.watch();
    let a = prompt(&env, "A", "edit everything");
    // The turn: a new symlink, a symlink retargeted, a binary rewritten, two text edits, a file
    // created that you delete later, one deleted that you create again.
    symlink(&p, "new-link", "kept.txt");
    std::fs::remove_file(p.join("old-link")).unwrap();
    symlink(&p, "old-link", "moved.txt");
    write(&p, "img.bin", "\0\u{1}new image");
    write(&p, "kept.txt", "the turn edited me\n");
    write(&p, "moved.txt", "the turn edited me, then you moved me\n");
    write(&p, "made.txt", "made by the turn\n");
    write(&p, "doomed.txt", "made by the turn, deleted by you\n");
    claude_tool(&env, &p, "A", "Bash", None);
    claude_stop(&env, &p, "A");
    // You, after the turn: rename one of its files, delete another, and change nothing else.
    std::fs::rename(p.join("moved.txt"), p.join("renamed.txt")).unwrap();
    std::fs::remove_file(p.join("doomed.txt")).unwrap();
    let before = tree_state(&p);

    let (code, r) = revert(&env, &[&a]);
    assert_eq!(code, 2, "{r}");
    assert_eq!(
        r["reverted"],
        json!(["img.bin", "kept.txt", "made.txt", "new-link", "old-link"]),
        "{r}"
    );
    let refused = refused(&r);
    let paths: Vec<&str> = refused.iter().map(|(p, _)| p.as_str()).collect();
    // A file the turn created and you deleted is already as before the turn: nothing to do.
    assert_eq!(paths, ["moved.txt"], "{r}");
    assert!(refused[0].1.contains("deleted since"), "{r}");
    // Symlinks come back as links with their old targets; the binary whole.
    assert_eq!(link_of(&p, "new-link"), None);
    assert!(!p.join("new-link").exists());
    assert_eq!(link_of(&p, "old-link").as_deref(), Some("kept.txt"));
    assert_eq!(
        std::fs::read(p.join("img.bin")).unwrap(),
        b"\0\x01old image"
    );
    assert!(!p.join("made.txt").exists());
    // What you did is as you left it: the renamed file keeps the turn's edit (it is yours now).
    assert_eq!(
        std::fs::read_to_string(p.join("renamed.txt")).unwrap(),
        "the turn edited me, then you moved me\n"
    );
    assert!(!p.join("moved.txt").exists() && !p.join("doomed.txt").exists());
    env.json(&["undo", "--yes"]);
    assert_eq!(tree_state(&p), before);
    env.fsck();
}

#[test]
fn a_file_the_turn_deleted_and_you_created_again_is_left_and_named() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "old.txt", "old\n");
    write(&p, "link", "a file the turn makes a symlink\n");
    env.watch();
    let a = prompt(&env, "A", "delete it");
    std::fs::remove_file(p.join("old.txt")).unwrap();
    std::fs::remove_file(p.join("link")).unwrap();
    symlink(&p, "link", "old.txt");
    claude_tool(&env, &p, "A", "Bash", None);
    claude_stop(&env, &p, "A");
    write(
        &p,
        "old.txt",
        "yours, written after the turn deleted mine\n",
    );
    // You make the turn's symlink a file again: it is refused, not overwritten.
    std::fs::remove_file(p.join("link")).unwrap();
    write(&p, "link", "yours\n");
    let (code, r) = revert(&env, &[&a]);
    assert_eq!(code, 2, "{r}");
    assert_eq!(r["reverted"], json!([]), "{r}");
    let refused = refused(&r);
    assert_eq!(refused[0].0, "link", "{r}");
    assert!(refused[0].1.contains("not a text file"), "{r}");
    assert_eq!(refused[1].0, "old.txt", "{r}");
    assert!(refused[1].1.contains("created again since"), "{r}");
    assert!(r["undo_checkpoint"].is_null(), "{r}");
    assert_eq!(
        std::fs::read_to_string(p.join("old.txt")).unwrap(),
        "yours, written after the turn deleted mine\n"
    );
    assert_eq!(std::fs::read_to_string(p.join("link")).unwrap(), "yours\n");
    env.assert_serving();
}

#[test]
fn a_step_of_a_pruned_turn_and_a_turn_from_a_bundle_are_refused_and_nothing_changes() {
    let env = TestEnv::new();
    let p = env.proj();
    env.watch();
    let first = prompt(&env, "A", "the first turn");
    write(&p, "one.txt", "1\n");
    claude_tool(&env, &p, "A", "Write", Some(&p.join("one.txt")));
    claude_stop(&env, &p, "A");
    let log = env.json(&["log", "--steps", "--dialog", "A"]);
    let step = log["prompts"][0]["steps"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for n in 2..=3 {
        prompt(&env, "A", &format!("turn {n}"));
        write(&p, &format!("{n}.txt"), "n\n");
        claude_stop(&env, &p, "A");
    }
    // The bundle holds the first turn, before it is pruned.
    let bundle = env.home.join("turn.bundle");
    let b = bundle.to_str().unwrap();
    env.json(&["export", &first, "--bundle", b]);
    let pruned = env.json(&["prune", "--keep", "1", "--dialog", "A", "--gc"]);
    let ids: Vec<&str> = pruned["pruned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert!(ids.contains(&first.as_str()), "{pruned}");
    assert!(
        ids.contains(&step.as_str()),
        "its steps go with it: {pruned}"
    );
    let before = tree_state(&p);
    for id in [&first, &step] {
        let out = env.ckpt(&["revert", "--yes", id]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(
            stderr(&out).contains("no checkpoint matches"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(tree_state(&p), before);

    // Imported into another project, the turn is a checkpoint to restore, not to revert.
    let other = env.home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    assert!(env.ckpt_in(&other, &["watch"]).status.success());
    write(&other, "theirs.txt", "the other project\n");
    let imported = env.json_in(&other, &["import", "--bundle", b]);
    let id = imported["imported"][0]["id"].as_str().unwrap().to_string();
    let state = tree_state(&other);
    let out = env.ckpt_in(&other, &["revert", "--yes", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("was brought in"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing was changed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(tree_state(&other), state);
    env.assert_serving();
    env.fsck();
}

#[test]
fn steps_go_with_their_turn_and_never_push_prompts_out_of_keep() {
    let env = TestEnv::new();
    let p = env.proj();
    env.watch();
    let mut prompts = Vec::new();
    for n in 1..=4 {
        prompts.push(prompt(&env, "S", &format!("turn {n}")));
        for k in 1..=3 {
            let rel = format!("t{n}-{k}.txt");
            write(&p, &rel, "x\n");
            claude_tool(&env, &p, "S", "Write", Some(&p.join(&rel)));
        }
        claude_stop(&env, &p, "S");
    }
    // Sixteen points in the dialog, four of them prompts: keeping two keeps two turns whole.
    let pruned = env.json(&["prune", "--keep", "2", "--dialog", "S"]);
    let gone: Vec<&str> = pruned["pruned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert!(gone.contains(&prompts[1].as_str()), "{pruned}");
    let log = env.json(&["log", "--steps", "--dialog", "S"])["prompts"].clone();
    let kept: Vec<(&str, usize)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap(),
                t["steps"].as_array().map_or(0, Vec::len),
            )
        })
        .collect();
    for newest in &prompts[2..] {
        assert!(kept.contains(&(newest.as_str(), 4)), "{log}");
    }
    // No step of a pruned turn is left behind.
    let listed = env.json(&["list", "--steps", "--dialog", "S"]);
    for c in listed.as_array().unwrap() {
        if let Some(turn) = c["turn"].as_str() {
            assert!(!gone.contains(&turn), "{c}");
        }
    }
    env.fsck();
}
