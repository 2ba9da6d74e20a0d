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

/// A restore records its undo point while it checks and prepares its writes: where the undo
/// point cannot be recorded, the restore fails naming the cause and nothing in the project has
/// changed (no file written or deleted, no folder made, no temporary file left); once the
/// cause is gone the same restore works and its undo brings back every edit.
#[test]
fn a_restore_whose_undo_point_cannot_be_recorded_changes_nothing() {
    let env = TestEnv::new();
    let p = env.proj();
    for i in 0..20 {
        write(&p, &format!("src/f{i:02}.txt"), &format!("v1 {i}\n"));
    }
    write(&p, "deep/er/y.txt", "deep\n");
    write(&p, "gone.txt", "gone\n");
    env.watch();
    let first = env.checkpoint("first");
    // The agent's edits, never checkpointed: the undo point is what holds them.
    for i in 0..20 {
        write(&p, &format!("src/f{i:02}.txt"), &format!("v2 {i}\n"));
    }
    write(&p, "new/n.txt", "new\n");
    std::fs::remove_dir_all(p.join("deep")).unwrap();
    std::fs::remove_file(p.join("gone.txt")).unwrap();
    // Past the racy window: the daemon trusts the files' stats from here on, so a change to
    // one (even to its metadata alone) would show as one.
    std::thread::sleep(std::time::Duration::from_secs(1));
    env.json(&["status"]);
    let edited = tree_state(&p);
    let stats = |what: &str| -> Vec<(String, i64, u64)> {
        use std::os::unix::fs::MetadataExt;
        edited
            .keys()
            .map(|rel| {
                let m = std::fs::symlink_metadata(p.join(rel)).expect(what);
                (
                    rel.clone(),
                    m.ctime_nsec() + m.ctime() * 1_000_000_000,
                    m.nlink(),
                )
            })
            .collect()
    };
    let before = stats("before");
    let unchanged = |what: &str| {
        assert_eq!(tree_state(&p), edited, "{what}");
        assert!(!p.join("deep").exists(), "{what}: a folder was made");
    };

    let refs = env.store().join("refs/ckpt/dialogs");
    make_unwritable(&refs);
    let out = env.ckpt(&["restore", &first, "--yes"]);
    make_writable(&refs);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("error:"), "{}", stderr(&out));
    unchanged("after the failed restore");
    // Not even a file's metadata: no second name was given to a file it would have replaced.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        stats("after"),
        before,
        "metadata changed by the failed restore"
    );
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 1);
    env.assert_serving();

    let report = env.json(&["restore", &first, "--yes"]);
    assert!(report["skipped"].as_array().unwrap().is_empty(), "{report}");
    let read = |rel: &str| std::fs::read_to_string(p.join(rel)).unwrap();
    assert_eq!(read("src/f07.txt"), "v1 7\n");
    assert_eq!(read("deep/er/y.txt"), "deep\n");
    assert!(!p.join("new").exists());
    env.json(&["undo", "--yes"]);
    unchanged("after the undo");
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
        let mut cmd = std::process::Command::new(ckpt_bin());
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

fn error_of(out: &std::process::Output) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)));
    v["error"].clone()
}

/// Every blob of checkpoint `id` can be read, and each file equals the one on disk.
fn assert_whole_and_equal_to_disk(env: &TestEnv, id: &str) {
    for path in env.ls_tree(id) {
        let blob = env.git(&["show", &format!("{id}:{path}")]);
        let disk = std::fs::read_to_string(env.proj().join(&path)).unwrap();
        assert_eq!(blob, disk, "{path}");
    }
}

/// A project of 300 files, watched, whose first checkpoint went into a pack: that pack.
fn checkpointed_in_a_pack(env: &TestEnv) -> std::path::PathBuf {
    let proj = env.proj();
    for i in 0..300 {
        write(
            &proj,
            &format!("src/f{i:03}.txt"),
            &format!("content {i}\n"),
        );
    }
    env.watch();
    env.checkpoint("first");
    std::fs::read_dir(env.store().join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("the first checkpoint wrote a pack")
}

/// A truncated pack is found before it is used: checkpoints refuse with what is damaged,
/// fsck lists it, fsck --repair salvages what it can, and the next checkpoint reads again
/// every file whose content was lost (never naming an unreadable blob).
#[test]
fn a_truncated_pack_is_reported_and_repaired() {
    let env = TestEnv::new();
    let proj = env.proj();
    let pack = checkpointed_in_a_pack(&env);
    let len = std::fs::metadata(&pack).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pack)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    write(&proj, "src/f000.txt", "changed\n");

    let out = env.ckpt(&["--json", "checkpoint", "-m", "on a damaged store"]);
    assert_eq!(out.status.code(), Some(1));
    let err = error_of(&out);
    assert_eq!(err["data"]["kind"], "store_error", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("does not match its index"),
        "{err}"
    );
    let out = env.ckpt(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "verify checks the store too");

    let out = env.ckpt(&["--json", "fsck"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["damaged_packs"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert!(report["unreadable_count"].as_u64().unwrap() > 0, "{report}");
    assert!(report["affected_count"].as_u64().unwrap() > 0, "{report}");

    let repaired = env.json(&["fsck", "--repair"]);
    assert!(
        repaired["repair"]["salvaged"].as_u64().unwrap() > 0,
        "{repaired}"
    );
    assert!(env.store().join("damaged").is_dir());
    let c = env.json(&["checkpoint", "-m", "after the repair"]);
    assert_whole_and_equal_to_disk(&env, c["id"].as_str().unwrap());
    env.assert_serving();
}

/// Each operation looks again only at what changed in the store since the last one (the kernel
/// says what): damage made between two operations is found whichever way it is made — a
/// damaged copy renamed over a pack, the pack folder replaced by a copy, bytes overwritten
/// in place with the size and modification time kept (invisible to a check by stat alone),
/// `HEAD` removed — and once it is undone the store works again.
#[test]
fn damage_between_operations_is_found_however_it_is_made() {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let proj = env.proj();
    let biggest = checkpointed_in_a_pack(&env);
    // A few operations that only add packs: the first pack is known whole by now.
    for round in 0..3 {
        write(&proj, "src/f000.txt", &format!("round {round}\n"));
        env.checkpoint(&format!("round {round}"));
    }
    let store = env.store();
    let pack_dir = store.join("objects/pack");
    let good = std::fs::read(&biggest).unwrap();
    let mut round = 10;
    let mut refused = |why: &str, words: &str| {
        round += 1;
        write(&proj, "src/f001.txt", &format!("round {round}\n"));
        let out = env.ckpt(&["--json", "checkpoint", "-m", "on a damaged store"]);
        assert_eq!(out.status.code(), Some(1), "{why}: {}", stdout(&out));
        let err = error_of(&out);
        assert_eq!(err["data"]["kind"], "store_error", "{why}: {err}");
        assert!(
            err["message"].as_str().unwrap().contains(words),
            "{why}: {err}"
        );
    };
    let works = |why: &str| {
        let c = env.json(&["checkpoint", "-m", why]);
        assert_whole_and_equal_to_disk(&env, c["id"].as_str().unwrap());
    };
    let cut = || good[..good.len() / 2].to_vec();

    // A damaged copy renamed over the pack.
    let aside = env.home.join("damaged.pack");
    std::fs::write(&aside, cut()).unwrap();
    std::fs::rename(&aside, &biggest).unwrap();
    refused("renamed over", "does not match its index");
    std::fs::write(&aside, &good).unwrap();
    std::fs::rename(&aside, &biggest).unwrap();
    works("after the rename back");

    // The pack folder replaced by a copy holding a damaged pack.
    let old = store.join("objects/pack.old");
    std::fs::rename(&pack_dir, &old).unwrap();
    std::fs::create_dir(&pack_dir).unwrap();
    for entry in std::fs::read_dir(&old).unwrap() {
        let from = entry.unwrap().path();
        std::fs::copy(&from, pack_dir.join(from.file_name().unwrap())).unwrap();
    }
    std::fs::write(&biggest, cut()).unwrap();
    refused("folder replaced", "does not match its index");
    std::fs::remove_dir_all(&pack_dir).unwrap();
    std::fs::rename(&old, &pack_dir).unwrap();
    works("after the folder is put back");

    // Bytes overwritten in place: same size, same modification time.
    let before = std::fs::metadata(&biggest).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&biggest)
        .unwrap();
    file.seek(SeekFrom::End(-20)).unwrap();
    file.write_all(&[0u8; 20]).unwrap();
    drop(file);
    let keep_time = std::process::Command::new("touch")
        .arg("-d")
        .arg(format!("@{}.{:09}", before.mtime(), before.mtime_nsec()))
        .arg(&biggest)
        .status()
        .unwrap();
    assert!(keep_time.success());
    let after = std::fs::metadata(&biggest).unwrap();
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec(), after.ino()),
        (
            before.len(),
            before.mtime(),
            before.mtime_nsec(),
            before.ino()
        )
    );
    refused("overwritten in place", "does not match its index");
    std::fs::write(&biggest, &good).unwrap();
    works("after the bytes are put back");

    // HEAD removed.
    let head = std::fs::read(store.join("HEAD")).unwrap();
    std::fs::remove_file(store.join("HEAD")).unwrap();
    refused("HEAD removed", "HEAD is missing");
    std::fs::write(store.join("HEAD"), head).unwrap();
    works("after HEAD is back");
    env.fsck();
    env.assert_serving();
}

/// The store deleted under the daemon: the next checkpoint goes into a whole new store that a
/// restarted daemon opens, with that checkpoint in it.
#[test]
fn a_store_deleted_under_the_daemon_is_recreated_whole() {
    let mut env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("first");
    let store = env.store();
    std::fs::remove_dir_all(&store).unwrap();
    write(&env.proj(), "b.txt", "b\n");
    let id = env.checkpoint("into a new store");
    env.fsck();
    env.stop_daemon();
    env.start_daemon();
    let list = env.json(&["list"]);
    assert_eq!(list[0]["id"], id.as_str(), "{list}");
    assert_whole_and_equal_to_disk(&env, &id);
}

/// objects/ deleted: a store error that says so (not "unknown checkpoint"), and a repair
/// that lets the project record checkpoints again.
#[test]
fn a_store_without_objects_says_so_and_is_repaired() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("first");
    std::fs::remove_dir_all(env.store().join("objects")).unwrap();
    for args in [&["checkpoint", "-m", "x"][..], &["list"][..]] {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = env.ckpt(&all);
        assert_eq!(out.status.code(), Some(1));
        let err = error_of(&out);
        assert_eq!(err["data"]["kind"], "store_error", "{args:?}: {err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("objects is missing"),
            "{err}"
        );
    }
    let repaired = env.json(&["fsck", "--repair"]);
    assert!(
        !repaired["repair"]["refs_set_aside"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{repaired}"
    );
    let c = env.json(&["checkpoint", "-m", "after the repair"]);
    assert_whole_and_equal_to_disk(&env, c["id"].as_str().unwrap());
    env.fsck();
}

/// Starts ckptd in a user and mount namespace of its own whose data folder is a tmpfs of
/// `size`: a real "no space left on device" without touching the machine. Returns the
/// daemon's pid (to look inside with nsenter), or None where namespaces are not allowed.
fn daemon_on_small_disk(env: &mut TestEnv, size: &str) -> Option<u32> {
    let probe = std::process::Command::new("unshare")
        .args(["-U", "-r", "-m", "--propagation", "private", "true"])
        .stderr(std::process::Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return None;
    }
    let log = std::fs::File::create(env.home.join("ckptd.log")).unwrap();
    let mut cmd = std::process::Command::new("unshare");
    env.env(&mut cmd);
    cmd.args(["-U", "-r", "-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o size={size} tmpfs \"$1\" && exec \"$0\"",
        ))
        .arg(CKPTD)
        .arg(env.home.join("data"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    env.daemon = Some(child);
    env.wait_for_socket();
    Some(pid)
}

/// `git ARGS` run inside the daemon's mount namespace (where its tmpfs is).
fn git_inside(pid: u32, args: &[&str]) -> std::process::Output {
    std::process::Command::new("nsenter")
        .args([
            "-t",
            &pid.to_string(),
            "-U",
            "-m",
            "--preserve-credentials",
            "git",
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(args)
        .output()
        .unwrap()
}

fn noise(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A full disk under the data folder: the checkpoint fails naming the cause, reads keep
/// working for every project, and once the cause is gone the next checkpoint captures every
/// change exactly.
#[test]
fn a_full_disk_is_a_clear_error_and_nothing_is_lost() {
    let mut env = TestEnv::without_daemon("");
    let Some(pid) = daemon_on_small_disk(&mut env, "3m") else {
        eprintln!("skipped: this machine has no unprivileged user and mount namespaces");
        return;
    };
    let proj = env.proj();
    let other = env.home.join("other");
    for i in 0..20 {
        write(&proj, &format!("src/f{i:02}.txt"), &format!("v1 {i}\n"));
        write(&other, &format!("g{i:02}.txt"), &format!("other {i}\n"));
    }
    env.watch();
    env.json_in(&other, &["watch"]);
    env.checkpoint("first");
    let first_other = env.json_in(&other, &["checkpoint", "-m", "first"]);

    std::fs::write(proj.join("huge.bin"), noise(7, 4 << 20)).unwrap();
    write(&proj, "src/f03.txt", "v2 3\n");
    let out = env.ckpt(&["checkpoint", "-m", "too big for the disk"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("No space left"), "{}", stderr(&out));
    // Reads go on, for this project and the other.
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 1);
    assert_eq!(env.json_in(&other, &["list"])[0]["id"], first_other["id"]);

    // The cause goes away: the next checkpoint has every change since the last success.
    std::fs::remove_file(proj.join("huge.bin")).unwrap();
    write(&proj, "src/f04.txt", "v2 4\n");
    let c = env.json(&["checkpoint", "-m", "after"]);
    assert_eq!(
        (c["added"].as_u64(), c["modified"].as_u64()),
        (Some(0), Some(2)),
        "{c}"
    );
    let store = env.store_of(&proj);
    let git_dir = store.to_str().unwrap();
    let id = c["id"].as_str().unwrap();
    let show = git_inside(
        pid,
        &["--git-dir", git_dir, "show", &format!("{id}:src/f03.txt")],
    );
    assert_eq!(stdout(&show), "v2 3\n", "{}", stderr(&show));
    let fsck = git_inside(
        pid,
        &["--git-dir", git_dir, "fsck", "--strict", "--no-progress"],
    );
    assert!(fsck.status.success(), "{}", stderr(&fsck));
    env.assert_serving();
}

/// The project moved away and a symlink put in its place: the daemon never follows it (it
/// would snapshot or restore another folder), says so, serves other projects, and works
/// again once the project is back.
#[test]
fn a_project_replaced_by_a_symlink_is_not_followed() {
    let env = TestEnv::with_config("auto_checkpoint = \"1s\"\n");
    let proj = env.proj();
    let other = env.home.join("other");
    write(&proj, "a.txt", "a\n");
    write(&other, "b.txt", "b\n");
    env.watch();
    env.json_in(&other, &["watch"]);
    let id = env.checkpoint("first");
    let elsewhere = env.home.join("elsewhere");
    write(&elsewhere, "secret.txt", "not this project\n");
    let moved = env.home.join("moved");
    std::fs::rename(&proj, &moved).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &proj).unwrap();
    for args in [
        &[
            "--json",
            "-C",
            proj.to_str().unwrap(),
            "checkpoint",
            "-m",
            "x",
        ][..],
        &[
            "--json",
            "-C",
            proj.to_str().unwrap(),
            "restore",
            "--yes",
            &id,
        ][..],
    ] {
        let out = env.ckpt_in(&env.home, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let kind = v["error"]["data"]["kind"].as_str().unwrap();
        assert!(
            matches!(kind, "project_unavailable" | "not_a_project"),
            "{v}"
        );
    }
    // A change in the moved folder (still watched) makes an automatic checkpoint due: it
    // must neither capture the other folder nor record the project as emptied.
    write(&moved, "c.txt", "c\n");
    std::thread::sleep(std::time::Duration::from_millis(3000));
    let store = env.store_of(&proj);
    for commit in git_in(&store, &["rev-list", "--all"]).lines() {
        let files = git_in(&store, &["ls-tree", "-r", "--name-only", commit]);
        if files.is_empty() || !git_in(&store, &["cat-file", "-t", commit]).starts_with("commit") {
            continue;
        }
        assert!(
            !files.contains("secret.txt"),
            "{commit} captured the symlink's target"
        );
        assert!(
            files.contains("a.txt"),
            "{commit} recorded the project without its files"
        );
    }
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("secret.txt")).unwrap(),
        "not this project\n"
    );
    assert!(
        !elsewhere.join("a.txt").exists(),
        "a restore wrote through the symlink"
    );
    env.json_in(&other, &["checkpoint", "-m", "still served"]);
    std::fs::remove_file(&proj).unwrap();
    std::fs::rename(&moved, &proj).unwrap();
    let listed = env.json(&["list"]);
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "recorded through a symlink: {listed}"
    );
    let c = env.json(&["checkpoint", "-m", "back"]);
    assert_eq!(
        (c["files"].as_u64(), c["added"].as_u64()),
        (Some(2), Some(1)),
        "{c}"
    );
    env.fsck();
}

/// An inotify watch limit lower than the project's folders (set low in a user namespace of the
/// daemon's own): watching degrades, checkpoints stay exact by stat verification, and `status`
/// names the limit to raise and to what.
#[test]
fn a_low_watch_limit_degrades_exactly_and_says_what_to_raise() {
    let probe = std::process::Command::new("unshare")
        .args([
            "-U",
            "-r",
            "sh",
            "-c",
            "echo 3 > /proc/sys/user/max_inotify_watches",
        ])
        .stderr(std::process::Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no user namespaces with their own inotify limit here");
        return;
    }
    let mut env = TestEnv::without_daemon("");
    let p = env.proj();
    for i in 0..10 {
        write(&p, &format!("d{i}/f.txt"), &format!("{i}\n"));
    }
    env.start_daemon_under(&[
        "unshare",
        "-U",
        "-r",
        "sh",
        "-c",
        "echo 3 > /proc/sys/user/max_inotify_watches && exec \"$0\"",
    ]);
    env.watch();
    env.checkpoint("first");
    let status = env.json(&["status"]);
    let mode = status["projects"][0]["mode"].as_str().unwrap_or_default();
    assert!(
        mode.contains("user.max_inotify_watches is 3 and this project has 11 folders")
            && mode.contains("raise it to at least 14"),
        "{status}"
    );
    // Exact without events: a change in a folder nobody watches is in the next checkpoint.
    write(&p, "d9/f.txt", "changed where no watch is\n");
    write(&p, "d9/new.txt", "new\n");
    let id = env.checkpoint("second");
    assert_eq!(
        env.git(&["cat-file", "-p", &format!("{id}:d9/f.txt")]),
        "changed where no watch is\n"
    );
    assert!(env.ls_tree(&id).contains(&"d9/new.txt".to_string()));
    let verify = env.json(&["verify"]);
    assert_eq!(verify["equal"], true, "{verify}");
    // Raised (inside the daemon's namespace) and rescanned: watching again.
    let pid = env.daemon.as_ref().unwrap().id().to_string();
    let raised = std::process::Command::new("nsenter")
        .args(["-t", &pid, "-U", "--preserve-credentials", "sh", "-c"])
        .arg("echo 100 > /proc/sys/user/max_inotify_watches")
        .status()
        .unwrap();
    assert!(raised.success());
    let out = env.ckpt(&["rescan"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    env.checkpoint("third");
    let status = env.json(&["status"]);
    assert_eq!(status["projects"][0]["mode"], "watching", "{status}");
    env.fsck();
}

/// A pack cut short while the daemon has it mapped (it read a blob from it): every later
/// request reports the damage, and the daemon keeps serving instead of dying on SIGBUS.
#[test]
fn a_pack_cut_short_under_the_daemons_mapping_is_reported_not_fatal() {
    let env = TestEnv::new();
    let proj = env.proj();
    for i in 0..300 {
        write(
            &proj,
            &format!("src/f{i:03}.txt"),
            &format!("content {i}\n").repeat(40),
        );
    }
    env.watch();
    let id = env.checkpoint("first");
    write(&proj, "src/f007.txt", "changed\n");
    // The diff reads the old content out of the pack: the daemon maps it.
    let diff = env.ckpt(&["diff", &id]);
    assert_eq!(diff.status.code(), Some(0), "{}", stderr(&diff));
    let pack_dir = env.store().join("objects/pack");
    for entry in std::fs::read_dir(&pack_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "pack") {
            let len = std::fs::metadata(&path).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(len / 3)
                .unwrap();
        }
    }
    let out = env.ckpt(&["--json", "fsck"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !report["damaged_packs"].as_array().unwrap().is_empty(),
        "{report}"
    );
    let diff = env.ckpt(&["diff", &id]);
    assert_eq!(diff.status.code(), Some(1), "{}", stderr(&diff));
    assert!(
        stderr(&diff).contains("does not match its index"),
        "{}",
        stderr(&diff)
    );
    let status = env.json(&["status"]);
    assert_eq!(status["projects"].as_array().unwrap().len(), 1, "{status}");
}
