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
    assert_eq!(kinds, vec!["message", "initial"]);

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
