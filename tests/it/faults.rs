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
