//! Faults: store writes that fail, stores damaged under the daemon, files that change while
//! they are read. Each must give a clear error or a correct checkpoint, and lose nothing.

use crate::harness::*;

fn counts(c: &serde_json::Value) -> (u64, u64, u64) {
    (
        c["added"].as_u64().unwrap(),
        c["modified"].as_u64().unwrap(),
        c["deleted"].as_u64().unwrap(),
    )
}

/// A checkpoint that fails on a store write error leaves nothing half-done: once the cause is
/// gone, the next checkpoint captures every change (a large batch goes through a pack).
#[test]
fn a_failed_pack_write_loses_no_change() {
    let env = TestEnv::new();
    let proj = env.proj();
    for i in 0..300 {
        write(&proj, &format!("src/f{i:03}.txt"), &format!("v1 {i}\n"));
    }
    env.watch();
    env.checkpoint("first");
    for i in 0..300 {
        write(&proj, &format!("src/f{i:03}.txt"), &format!("v2 {i}\n"));
    }
    for i in 0..100 {
        write(&proj, &format!("new/n{i:03}.txt"), &format!("new {i}\n"));
    }
    let pack_dir = env.store().join("objects/pack");
    make_unwritable(&pack_dir);
    let out = env.ckpt(&["checkpoint", "-m", "fails"]);
    make_writable(&pack_dir);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("error:"), "{}", stderr(&out));

    let c = env.json(&["checkpoint", "-m", "after"]);
    assert_eq!(counts(&c), (100, 300, 0), "{c}");
    assert!(c["skipped"].as_array().unwrap().is_empty(), "{c}");
    let id = c["id"].as_str().unwrap();
    assert_eq!(
        env.git(&["show", &format!("{id}:src/f123.txt")]),
        "v2 123\n"
    );
    assert_eq!(
        env.git(&["show", &format!("{id}:new/n042.txt")]),
        "new 42\n"
    );
    assert_eq!(env.ls_tree(id).len(), 400);
    env.fsck();
    env.assert_serving();
}

/// The same with loose objects: the failure is an error of the checkpoint (naming the cause),
/// never a skipped file that outlives the fault.
#[test]
fn a_failed_loose_write_is_an_error_not_a_skip() {
    let env = TestEnv::new();
    let proj = env.proj();
    for i in 0..5 {
        write(&proj, &format!("f{i}.txt"), &format!("v1 {i}\n"));
    }
    env.watch();
    env.checkpoint("first");
    for i in 0..5 {
        write(&proj, &format!("f{i}.txt"), &format!("v2 {i}\n"));
    }
    let objects = env.store().join("objects");
    let mut locked = vec![objects.clone()];
    for entry in std::fs::read_dir(&objects).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            locked.push(path);
        }
    }
    for dir in &locked {
        make_unwritable(dir);
    }
    let out = env.ckpt(&["checkpoint", "-m", "fails"]);
    for dir in &locked {
        make_writable(dir);
    }
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not permitted") || err.contains("denied"),
        "the cause is named: {err}"
    );

    let c = env.json(&["checkpoint", "-m", "after"]);
    assert_eq!(counts(&c), (0, 5, 0), "{c}");
    assert!(c["skipped"].as_array().unwrap().is_empty(), "{c}");
    let id = c["id"].as_str().unwrap();
    assert_eq!(env.git(&["show", &format!("{id}:f3.txt")]), "v2 3\n");
    env.fsck();
}

/// Every temporary file under `root` (restores write `.ckpt-tmp-*` beside their targets).
fn litter(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else if name.starts_with(".ckpt-tmp-") {
                found.push(entry.path().display().to_string());
            }
        }
    }
    found
}

/// kill -9 in the middle of restores: every file is old or new (never torn), and the
/// restarted daemon removes the temporary files the killed one left.
#[test]
fn a_restarted_daemon_removes_what_a_killed_restore_left() {
    let mut env = TestEnv::new();
    let proj = env.proj();
    let big = |tag: &str| tag.repeat(1 << 20);
    for i in 0..24 {
        write(&proj, &format!("d{}/f{i}.bin", i % 4), &big("a"));
    }
    env.watch();
    let old = env.checkpoint("old");
    for i in 0..24 {
        write(&proj, &format!("d{}/f{i}.bin", i % 4), &big("b"));
    }
    env.checkpoint("new");
    // A dead daemon's leftover, named as ckptd names them (pid of a process that is gone).
    let gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    let _ = gone.wait_with_output();
    write(&proj, &format!("d1/.ckpt-tmp-{pid}-7"), "partial");
    let mut seen_litter = false;
    for round in 0..6 {
        let mut cmd = std::process::Command::new(CKPT);
        env.env(&mut cmd);
        let mut restore = cmd
            .current_dir(&proj)
            .args(["--no-spawn", "restore", "--yes", &old])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(40 + 25 * round));
        env.kill_daemon();
        let _ = restore.wait();
        seen_litter |= !litter(&proj).is_empty();
        for i in 0..24 {
            let data = std::fs::read(proj.join(format!("d{}/f{i}.bin", i % 4))).unwrap();
            assert_eq!(data.len(), 1 << 20, "f{i} is truncated");
            assert!(data.iter().all(|b| *b == data[0]), "f{i} is a mix");
        }
        env.start_daemon();
        env.checkpoint("after a kill");
        assert_eq!(litter(&proj), Vec::<String>::new(), "round {round}");
    }
    assert!(
        seen_litter,
        "no round left anything behind: the test proves nothing"
    );
    env.fsck();
}

/// A ref lock and a temporary pack left by a killed daemon would refuse every later update of
/// that dialog: the next daemon removes them (only one daemon serves a store).
#[test]
fn stale_locks_of_a_killed_daemon_are_removed() {
    let mut env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("first");
    let store = env.store();
    env.kill_daemon();
    write(&store, "refs/ckpt/dialogs/default.lock", "");
    write(&store, "objects/pack/tmp_ckpt_1_1.pack", "PACK");
    std::thread::sleep(std::time::Duration::from_millis(20));
    env.start_daemon();
    write(&env.proj(), "a.txt", "b\n");
    let c = env.json(&["checkpoint", "-m", "second"]);
    assert_eq!(c["seq"], 2, "{c}");
    assert!(!store.join("refs/ckpt/dialogs/default.lock").exists());
    assert!(!store.join("objects/pack/tmp_ckpt_1_1.pack").exists());
    env.fsck();
}
