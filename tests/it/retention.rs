//! Retention, prune and gc: what is kept stays restorable byte for byte, what is pruned leaves
//! the store, and `git fsck --strict` passes throughout.

use std::collections::{BTreeMap, BTreeSet};

use crate::harness::*;

/// Records a checkpoint on `dialog` after writing `file`, remembering the project's state.
fn step(
    env: &TestEnv,
    states: &mut BTreeMap<String, BTreeMap<String, String>>,
    dialog: &str,
    file: &str,
    content: &str,
) -> String {
    write(&env.proj(), file, content);
    let c = env.json(&["checkpoint", "--dialog", dialog, "-m", content]);
    let id = c["id"].as_str().unwrap().to_string();
    states.insert(id.clone(), tree_state(&env.proj()));
    id
}

fn listed(env: &TestEnv, dialog: &str) -> Vec<serde_json::Value> {
    env.json(&["list", "--all-sessions", "--dialog", dialog])
        .as_array()
        .unwrap()
        .clone()
}

fn ids(list: &[serde_json::Value]) -> BTreeSet<String> {
    list.iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

/// Restores every checkpoint in `states` that is still listed and compares the files.
fn assert_all_restore(
    env: &TestEnv,
    dialog: &str,
    states: &BTreeMap<String, BTreeMap<String, String>>,
) {
    for c in listed(env, dialog) {
        let id = c["id"].as_str().unwrap();
        let Some(expected) = states.get(id) else {
            continue;
        };
        let out = env.ckpt(&["restore", id, "--yes"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(&tree_state(&env.proj()), expected, "restoring {id}");
    }
}

fn exists(env: &TestEnv, id: &str) -> bool {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(env.store())
        .args(["cat-file", "-e", id])
        .status()
        .unwrap()
        .success()
}

#[test]
fn prune_keeps_what_the_policy_names_and_gc_removes_the_rest() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "base.txt", "base");
    env.watch();
    let mut states = BTreeMap::new();
    let created = env.json(&["dialog", "new", "work", "-m", "the work"]);
    let initial = created["initial"]["id"].as_str().unwrap().to_string();
    states.insert(initial.clone(), tree_state(&p));

    let mut first = Vec::new();
    for i in 1..=5 {
        first.push(step(
            &env,
            &mut states,
            "work",
            "a.txt",
            &format!("one-{i}"),
        ));
    }
    env.json(&["tag", &first[1], "keep-me"]);
    let approved = env.json(&["session", "approve", "--dialog", "work", "-m", "ok"]);
    let approved_id = approved["approved_commit"].as_str().unwrap().to_string();
    states.insert(approved_id.clone(), tree_state(&p));
    let mut second = Vec::new();
    for i in 1..=6 {
        second.push(step(
            &env,
            &mut states,
            "work",
            &format!("b{i}.txt"),
            &format!("two-{i}"),
        ));
    }
    env.json(&["note", &second[0], "worth keeping"]);
    let restored = env.json(&["restore", &second[2], "--yes"]);
    let undo = restored["undo_checkpoint"].as_str().unwrap().to_string();
    let restore_ckpt = restored["restore_checkpoint"].as_str().unwrap().to_string();
    states.insert(undo.clone(), states[&second[5]].clone());
    states.insert(restore_ckpt.clone(), tree_state(&p));

    let before = listed(&env, "work");
    let size_before = env.json(&["status"])["projects"][0]["store_bytes"]
        .as_u64()
        .unwrap();
    assert!(size_before > 0);

    let report = env.json(&["prune", "--dialog", "work", "--keep", "2"]);
    // Kept: the oldest (initial), the tagged one, the approved state, the annotated one, the
    // two newest of the active session (pre-restore and restore, which are also the last
    // restore and its undo).
    let expected: BTreeSet<String> = [
        initial.clone(),
        first[1].clone(),
        approved_id.clone(),
        second[0].clone(),
        undo.clone(),
        restore_ckpt.clone(),
    ]
    .into_iter()
    .collect();
    let after = listed(&env, "work");
    assert_eq!(ids(&after), expected, "{report}");
    let pruned: BTreeSet<String> = report["pruned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(pruned, &ids(&before) - &expected);
    assert_eq!(report["kept"], expected.len());
    env.fsck();

    // Pruned commits stay in the store until gc, then they are gone.
    let gone = pruned.iter().next().unwrap().clone();
    assert!(exists(&env, &gone));
    let gc = env.json(&["gc"]);
    assert!(gc["objects"].as_u64().unwrap() > 0, "{gc}");
    assert!(!exists(&env, &gone), "gc kept a pruned checkpoint");
    for id in &expected {
        assert!(exists(&env, id), "gc removed kept checkpoint {id}");
    }
    env.fsck();
    let size_after = env.json(&["status"])["projects"][0]["store_bytes"]
        .as_u64()
        .unwrap();
    assert!(size_after < size_before, "{size_after} !< {size_before}");
    assert_eq!(env.ckpt(&["show", &gone]).status.code(), Some(1));

    // Pruning again changes nothing; the timeline reads the same.
    let again = env.json(&["prune", "--dialog", "work", "--keep", "2"]);
    assert_eq!(again["pruned"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(ids(&listed(&env, "work")), expected);

    // The index still matches the disk after gc, and new checkpoints build on the store.
    assert_eq!(env.json(&["verify"])["equal"], true);
    let later = step(&env, &mut states, "work", "c.txt", "three");
    env.fsck();
    assert!(ids(&listed(&env, "work")).contains(&later));

    assert_all_restore(&env, "work", &states);
    env.fsck();
    // And after plain git's own gc, everything that remains still restores.
    env.git(&["gc", "--prune=now", "--quiet"]);
    env.fsck();
    assert_all_restore(&env, "work", &states);
    env.assert_serving();
}

#[test]
fn prune_runs_after_checkpoints_with_the_dialogs_retention() {
    let env = TestEnv::new();
    let p = env.proj();
    env.watch();
    write(&p, "f.txt", "0");
    env.checkpoint("first");
    let keep = env.json(&["dialog", "keep", "default", "3"]);
    assert_eq!(keep["keep"], 3);
    let mut all = Vec::new();
    for i in 1..=19 {
        write(&p, "f.txt", &i.to_string());
        all.push(env.checkpoint(&format!("m{i}")));
    }
    // Retention read the dialog's chain after #20's reply, a commit from each checkpoint's
    // pack, and the store let go of those pages then: an operation that reads no object finds
    // the data of at most the newest pack mapped (loaded after each reply; lookups by what
    // else runs under the lock meanwhile map indexes only).
    let out = env.ckpt(&["rescan"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pid = env.daemon.as_ref().unwrap().id();
    let mapped = mapped_packs(pid, &env.store());
    assert!(mapped.len() <= 1, "{mapped:?}");
    // Checkpoint #20 triggered retention: the oldest and the three newest remain.
    let list = env.json(&["list", "--all-sessions"]);
    let seqs: Vec<u64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![20, 19, 18, 1]);
    env.fsck();
    env.git(&["gc", "--prune=now", "--quiet"]);
    env.fsck();
    let out = env.ckpt(&["restore", &all[17], "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(p.join("f.txt")).unwrap(), "18");

    // Back to the configured number (50): nothing more is pruned.
    assert_eq!(
        env.json(&["dialog", "keep", "default", "--default"])["keep"],
        50
    );
}

#[test]
fn bad_retention_requests_are_refused_and_change_nothing() {
    let env = TestEnv::new();
    write(&env.proj(), "f.txt", "x");
    env.watch();
    env.checkpoint("one");
    for (args, kind) in [
        (vec!["--json", "prune", "--keep", "0"], "invalid_params"),
        (
            vec!["--json", "prune", "--dialog", "nosuch"],
            "unknown_dialog",
        ),
        (
            vec!["--json", "prune", "--dialog", "../x"],
            "invalid_params",
        ),
        (
            vec!["--json", "dialog", "keep", "default", "0"],
            "invalid_params",
        ),
        (
            vec!["--json", "dialog", "keep", "nosuch", "3"],
            "unknown_dialog",
        ),
    ] {
        let out = env.ckpt(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
        let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(err["error"]["data"]["kind"], kind, "{args:?}: {err}");
    }
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 1);
    env.assert_serving();
}

#[test]
fn a_store_that_lost_the_indexed_objects_is_read_again() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "stays");
    env.watch();
    env.checkpoint("default one");
    // Content that only a removed dialog held.
    write(&p, "only-there.txt", "unique content");
    // Old enough that the index trusts its stat (no racy re-hash hides the loss).
    std::thread::sleep(std::time::Duration::from_millis(200));
    env.json(&["checkpoint", "--dialog", "gone", "-m", "soon removed"]);
    env.json(&["dialog", "rm", "gone"]);
    // Lose everything no ref reaches, including what the daemon's index points at.
    let _ = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(env.store())
        .args(["update-ref", "-d", "refs/ckpt/index"])
        .status();
    env.git(&["reflog", "expire", "--expire=now", "--all"]);
    env.git(&["gc", "--prune=now", "--quiet"]);

    // The next checkpoint notices and re-reads the files instead of trusting lost ids.
    let id = env.checkpoint("after the loss");
    env.fsck();
    let files = env.ls_tree(&id);
    assert!(files.contains(&"only-there.txt".to_string()), "{files:?}");
    assert_eq!(
        env.git(&["cat-file", "-p", &format!("{id}:only-there.txt")]),
        "unique content"
    );
    write(&p, "only-there.txt", "changed");
    let out = env.ckpt(&["restore", &id, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join("only-there.txt")).unwrap(),
        "unique content"
    );
}

#[test]
fn retention_config_is_validated() {
    for (config, needle) in [
        ("[retention]\nkeep = 0\n", "retention.keep"),
        ("[retention]\nkeepp = 3\n", "unknown field"),
        ("auto_checkpoint = \"10q\"\n", "unknown unit"),
        ("auto_checkpoint = \"100ms\"\n", "shorter than one second"),
        ("[projects.\"relative/path\"]\nkeep = 3\n", "absolute"),
    ] {
        let env = TestEnv::without_daemon(config);
        let out = std::process::Command::new(CKPTD)
            .arg("--config")
            .arg(env.home.join("config/ckpt/config.toml"))
            .arg("--socket")
            .arg(&env.socket)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{config}");
        let err = stderr(&out);
        assert!(err.contains(needle), "{config}: {err}");
    }
}

/// The probe's case: 19 checkpoints across an approved, a reset and an active session. The
/// default retention keeps all of them (an approval never makes history vanish), a dry run
/// changes nothing, and a prune says exactly what it removed.
#[test]
fn retention_never_surprises() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "0");
    env.watch();
    for i in 1..=6 {
        write(&p, "a.txt", &format!("s1-{i}"));
        env.checkpoint(&format!("session one, message {i}"));
    }
    env.json(&["session", "approve", "-m", "good"]);
    for i in 1..=5 {
        write(&p, "a.txt", &format!("s2-{i}"));
        env.checkpoint(&format!("session two, message {i}"));
    }
    let out = env.ckpt(&["session", "reset", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for i in 1..=4 {
        write(&p, "a.txt", &format!("s3-{i}"));
        env.checkpoint(&format!("session three, message {i}"));
    }
    let all = |env: &TestEnv| {
        env.json(&["list", "--all-sessions"])
            .as_array()
            .unwrap()
            .len()
    };
    let before = all(&env);
    assert_eq!(before, 18, "6 + approved + 5 + pre-restore + reset + 4");

    let report = env.json(&["prune"]);
    assert_eq!(report["pruned"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(all(&env), before);

    let dry = env.json(&["prune", "--keep", "3", "--dry-run"]);
    let would = dry["pruned_checkpoints"].as_array().unwrap().clone();
    assert!(!would.is_empty(), "{dry}");
    assert_eq!(all(&env), before, "a dry run pruned something");
    let text = stdout(&env.ckpt(&["prune", "--keep", "3", "--dry-run"]));
    assert!(text.starts_with("would prune"), "{text}");
    let first = would[0]["id"].as_str().unwrap();
    assert!(text.contains(&first[..12]), "{text}");
    assert!(would
        .iter()
        .all(|c| c["dialog"] == "default" && c["seq"].as_u64().is_some()));

    let done = env.json(&["prune", "--keep", "3"]);
    assert_eq!(done["pruned_checkpoints"], serde_json::Value::Array(would));
    assert_eq!(all(&env), before - done["pruned"].as_array().unwrap().len());
    env.fsck();
}

/// Past `max_store_bytes`, the oldest checkpoints go first until the store fits; the newest
/// keep restoring exactly.
#[test]
fn a_disk_budget_removes_the_oldest_first() {
    let env = TestEnv::with_config("[retention]\nmax_store_bytes = \"200KiB\"\n");
    let p = env.proj();
    write(&p, "keep.txt", "stays\n");
    env.watch();
    let mut ids = Vec::new();
    for i in 0..20u32 {
        // Incompressible, so that every checkpoint adds ~30 KiB.
        let mut x = 0x9e3779b9u32.wrapping_mul(i + 1);
        let data: Vec<u8> = (0..30_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        std::fs::write(p.join("data.bin"), &data).unwrap();
        ids.push(env.checkpoint(&format!("turn {i}")));
    }
    let listed: Vec<String> = env
        .json(&["list", "--all-sessions"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert!(listed.len() < ids.len(), "nothing was pruned");
    assert!(listed.contains(ids.last().unwrap()), "the newest went");
    assert!(
        !listed.contains(&ids[1]),
        "an old one stayed while newer ones went"
    );
    let bytes = env.json(&["status"])["projects"][0]["store_bytes"]
        .as_u64()
        .unwrap();
    assert!(bytes <= 200 * 1024, "store is {bytes} bytes");
    let newest = ids.last().unwrap();
    std::fs::write(p.join("data.bin"), "scribbled").unwrap();
    env.json(&["restore", newest, "--yes"]);
    assert_eq!(
        env.git(&["rev-parse", &format!("{newest}:data.bin")])
            .trim(),
        env.git(&["hash-object", p.join("data.bin").to_str().unwrap()])
            .trim()
    );
    env.fsck();
}
