//! Restore safety: ignored files untouched, symlinked parents never followed, unwritable and
//! uncaptured files skipped and reported while the rest is restored, hostile trees refused.

use crate::harness::*;

#[test]
fn ignored_and_excluded_files_are_never_touched() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, ".gitignore", "*.log\n");
    write(&p, "src/app.js", "v1");
    write(&p, "node_modules/dep/index.js", "dependency v1");
    write(&p, ".env", "TOKEN=one");
    write(&p, "debug.log", "log v1");
    env.watch();
    let first = env.checkpoint("v1");
    write(&p, "src/app.js", "v2");
    write(&p, "node_modules/dep/index.js", "dependency v2");
    write(&p, "node_modules/added/index.js", "new dependency");
    write(&p, ".env", "TOKEN=two");
    write(&p, "debug.log", "log v2");
    let excluded_before: Vec<_> = tree_state(&p)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("src"))
        .collect();
    env.json(&["restore", &first, "--yes"]);
    assert_eq!(std::fs::read_to_string(p.join("src/app.js")).unwrap(), "v1");
    let excluded_after: Vec<_> = tree_state(&p)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("src"))
        .collect();
    assert_eq!(
        excluded_before, excluded_after,
        "ignored and excluded files must survive byte for byte"
    );
}

#[test]
fn a_symlinked_parent_is_never_followed() {
    let env = TestEnv::new();
    let p = env.proj();
    let outside = env.home.join("outside");
    write(&outside, "file.txt", "outside the project");
    write(&p, "sub/file.txt", "inside v1");
    write(&p, "other/x.txt", "x v1");
    env.watch();
    let first = env.checkpoint("v1");

    // Captured case: the symlink is part of the project; restoring replaces the link itself.
    std::fs::remove_dir_all(p.join("sub")).unwrap();
    symlink(&p, "sub", outside.to_str().unwrap());
    let report = env.json(&["restore", &first, "--yes"]);
    assert!(report["skipped"].as_array().unwrap().is_empty(), "{report}");
    assert!(!std::fs::symlink_metadata(p.join("sub"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(p.join("sub/file.txt")).unwrap(),
        "inside v1"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("file.txt")).unwrap(),
        "outside the project"
    );

    // Uncaptured case: an ignored symlink sits where a folder should be; it is left alone and
    // nothing is written through it.
    write(&p, ".gitignore", "/other\n");
    std::fs::remove_dir_all(p.join("other")).unwrap();
    symlink(&p, "other", outside.to_str().unwrap());
    let out = env.ckpt(&["--json", "restore", &first, "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "skips give exit code 2: {}",
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped = report["skipped"].as_array().unwrap();
    assert!(
        skipped.iter().any(
            |s| s["path"] == "other/x.txt" && s["reason"].as_str().unwrap().contains("symlink")
        ),
        "{report}"
    );
    assert!(
        !outside.join("x.txt").exists(),
        "a restore wrote through a symlink out of the project"
    );
    assert!(std::fs::symlink_metadata(p.join("other"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn an_unwritable_file_is_skipped_and_the_rest_restored() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "locked/a.txt", "a v1");
    write(&p, "free/b.txt", "b v1");
    env.watch();
    let first = env.checkpoint("v1");
    write(&p, "locked/a.txt", "a v2");
    write(&p, "free/b.txt", "b v2");
    make_unwritable(&p.join("locked"));
    let out = env.ckpt(&["--json", "restore", &first, "--yes"]);
    make_writable(&p.join("locked"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{report}");
    assert_eq!(skipped[0]["path"], "locked/a.txt");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("cannot write"),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("free/b.txt")).unwrap(),
        "b v1"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("locked/a.txt")).unwrap(),
        "a v2"
    );
    assert!(
        env.log().contains("skipped while restoring"),
        "skips are logged"
    );
    // Human output names the skip as well.
    make_unwritable(&p.join("locked"));
    let human = env.ckpt(&["restore", &first, "--yes"]);
    make_writable(&p.join("locked"));
    assert_eq!(human.status.code(), Some(2));
    assert!(
        stdout(&human).contains("skipped  locked/a.txt"),
        "{}",
        stdout(&human)
    );
    // No temp files are left behind.
    assert!(
        tree_state(&p).keys().all(|k| !k.contains(".ckpt-tmp-")),
        "{:?}",
        tree_state(&p)
    );
}

#[test]
fn a_file_the_undo_checkpoint_cannot_hold_is_left_alone() {
    let env = TestEnv::with_config("max_file_size = 100\n");
    let p = env.proj();
    write(&p, "data.csv", "small,v1\n");
    env.watch();
    let first = env.checkpoint("small");
    let big = "row\n".repeat(100);
    write(&p, "data.csv", &big);
    let out = env.ckpt(&["--json", "restore", &first, "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["skipped"][0]["path"], "data.csv", "{report}");
    assert_eq!(
        std::fs::read_to_string(p.join("data.csv")).unwrap(),
        big,
        "uncapturable content was destroyed"
    );
}

/// A file the agent created above `max_file_size` cannot be captured, so a rewind leaves it:
/// and says so (its path, `too_large`, exit 2), in a dry run too; a restore of other paths
/// does not mention it.
#[test]
fn a_rewind_reports_the_too_large_file_it_leaves() {
    let env = TestEnv::with_config("max_file_size = 100\n");
    let p = env.proj();
    write(&p, "a.txt", "before\n");
    env.watch();
    env.json(&["checkpoint", "--prompt", "-m", "make a data file"]);
    write(&p, "a.txt", "after\n");
    write(&p, "data.bin", &"x".repeat(500));
    for dry in [true, false] {
        let mut args = vec!["--json", "rewind", "--yes"];
        if dry {
            args.push("--dry-run");
        }
        let out = env.ckpt(&args);
        assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let skipped = report["skipped"].as_array().unwrap();
        assert_eq!(skipped.len(), 1, "{report}");
        assert_eq!(skipped[0]["path"], "data.bin");
        assert_eq!(skipped[0]["reason_code"], "too_large", "{report}");
    }
    assert_eq!(
        std::fs::read_to_string(p.join("a.txt")).unwrap(),
        "before\n"
    );
    assert_eq!(std::fs::read(p.join("data.bin")).unwrap().len(), 500);
    let out = env.ckpt(&["rewind", "--yes"]);
    assert!(stdout(&out).contains("data.bin"), "{}", stdout(&out));
    let first = env.json(&["list"]).as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let report = env.json(&["restore", "--yes", &first, "--", "a.txt"]);
    assert!(report["skipped"].as_array().unwrap().is_empty(), "{report}");
}

#[test]
fn restore_selected_paths_and_dry_run() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a/one.txt", "one v1");
    write(&p, "a/two.txt", "two v1");
    write(&p, "b/three.txt", "three v1");
    env.watch();
    let first = env.checkpoint("v1");
    write(&p, "a/one.txt", "one v2");
    write(&p, "a/two.txt", "two v2");
    write(&p, "b/three.txt", "three v2");
    write(&p, "a/new.txt", "new");

    let before = tree_state(&p);
    let dry = env.json(&["restore", &first, "--dry-run"]);
    assert_eq!(tree_state(&p), before, "a dry run changes nothing");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["undo_checkpoint"], serde_json::Value::Null);
    assert_eq!(dry["written"].as_array().unwrap().len(), 3);
    assert_eq!(dry["deleted"], serde_json::json!(["a/new.txt"]));
    assert_eq!(
        env.json(&["list"]).as_array().unwrap().len(),
        1,
        "a dry run records nothing"
    );

    // Paths are relative to the current directory.
    let out = env.ckpt_in(
        &p.join("a"),
        &[
            "--json", "restore", &first, "--yes", "--", "one.txt", "new.txt",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join("a/one.txt")).unwrap(),
        "one v1"
    );
    assert!(!p.join("a/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("a/two.txt")).unwrap(),
        "two v2"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("b/three.txt")).unwrap(),
        "three v2"
    );

    // A folder restores everything below it.
    env.json(&["restore", &first, "--yes", "--", "b"]);
    assert_eq!(
        std::fs::read_to_string(p.join("b/three.txt")).unwrap(),
        "three v1"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("a/two.txt")).unwrap(),
        "two v2"
    );

    // A path outside the project is refused, and nothing changes.
    let out = env.ckpt(&["restore", &first, "--yes", "--", "../elsewhere"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("outside the project"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn hostile_tree_entries_are_refused() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "ok.txt", "fine");
    env.watch();
    env.checkpoint("base");
    let blob = raw_object(&env, "blob", b"pwned\n");
    let mut tree = Vec::new();
    tree.extend(tree_entry(
        "40000",
        "..",
        &raw_object(&env, "tree", &tree_entry("100644", "escaped.txt", &blob)),
    ));
    tree.extend(tree_entry(
        "40000",
        ".git",
        &raw_object(&env, "tree", &tree_entry("100644", "config", &blob)),
    ));
    tree.extend(tree_entry("100644", "ok.txt", &blob));
    let tree_id = raw_object(&env, "tree", &tree);
    let header = r#"{"v":1,"dialog":"evil","seq":1,"kind":"message","created_at":"2026-01-01T00:00:00Z","files":3,"added":3,"modified":0,"deleted":0}"#;
    let commit = format!(
        "tree {tree_id}\nauthor x <x@x> 0 +0000\ncommitter x <x@x> 0 +0000\nckpt {header}\n\nevil\n"
    );
    let commit_id = raw_object(&env, "commit", commit.as_bytes());
    env.git(&["update-ref", "refs/ckpt/dialogs/evil", &commit_id]);

    let out = env.ckpt(&["--json", "restore", &commit_id, "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped: Vec<&str> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert!(
        skipped.contains(&"../escaped.txt") && skipped.contains(&".git/config"),
        "{report}"
    );
    assert!(
        !env.home.join("escaped.txt").exists(),
        "a tree entry escaped the project root"
    );
    assert!(!p.join(".git").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("ok.txt")).unwrap(),
        "pwned\n",
        "safe entries are still restored"
    );
}

/// A file ignored before a restore whose `.gitignore` rule the restore removes is left alone
/// by the restore (reported), and the undo, which brings the rule back, leaves it alone too.
#[test]
fn undo_keeps_a_file_the_restore_left_alone() {
    let env = TestEnv::new();
    let proj = env.proj();
    write(&proj, ".gitignore", "");
    write(&proj, "a.txt", "a1\n");
    env.watch();
    let before_rule = env.checkpoint("no rule yet");
    write(&proj, ".gitignore", "secret.txt\n");
    write(&proj, "secret.txt", "the user's own notes\n");
    write(&proj, "a.txt", "a2\n");
    env.checkpoint("rule added");

    let out = env.ckpt(&["restore", &before_rule, "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out).contains("secret.txt"), "{}", stdout(&out));
    assert_eq!(
        std::fs::read_to_string(proj.join("secret.txt")).unwrap(),
        "the user's own notes\n"
    );

    let undo = env.json(&["undo", "--yes"]);
    assert!(undo["skipped"].as_array().unwrap().is_empty(), "{undo}");
    assert!(
        !undo["deleted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "secret.txt"),
        "{undo}"
    );
    assert_eq!(
        std::fs::read_to_string(proj.join("secret.txt")).unwrap(),
        "the user's own notes\n",
        "undo deleted a file the restore had left alone"
    );
    assert_eq!(std::fs::read_to_string(proj.join("a.txt")).unwrap(), "a2\n");
    assert_eq!(
        std::fs::read_to_string(proj.join(".gitignore")).unwrap(),
        "secret.txt\n"
    );
    env.fsck();
}

/// A file another process writes while a restore runs is left in place and reported as such,
/// not as a file that was ignored before the restore.
#[test]
fn files_written_during_a_restore_are_reported_for_what_they_are() {
    let env = TestEnv::new();
    let proj = env.proj();
    for i in 0..1500 {
        write(&proj, &format!("d{}/f{i}.txt", i % 30), "old\n");
    }
    env.watch();
    let old = env.checkpoint("old");
    for i in 0..1500 {
        write(&proj, &format!("d{}/f{i}.txt", i % 30), "new\n");
    }
    env.checkpoint("new");
    for attempt in 0..5 {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (dir, flag) = (proj.clone(), stop.clone());
        let writer = std::thread::spawn(move || {
            let mut n = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                std::fs::write(dir.join(format!("late-{attempt}-{n}.txt")), "agent\n").unwrap();
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(30));
        let out = env.ckpt(&["--json", "restore", "--yes", &old]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        writer.join().unwrap();
        let late: Vec<&serde_json::Value> = report["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["path"].as_str().unwrap().starts_with("late-"))
            .collect();
        for s in &late {
            assert!(
                s["reason"].as_str().unwrap().contains("another process"),
                "{s}"
            );
        }
        if !late.is_empty() {
            return;
        }
    }
    panic!("no file was written during any restore: the test proves nothing");
}

/// Every name under `root` (hidden ones included, symlinks not followed) that starts with
/// ckpt's temporary prefix.
fn temporary_names(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".ckpt-tmp-") {
                found.push(entry.path().display().to_string());
            }
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    found
}

/// A replaced file keeps a second name (so that the rename frees nothing) in the store, never
/// in the project, and only until the reply has gone: the project has no temporary name even
/// right after the reply, then every restored file has exactly one name, the store's folder
/// of second names is empty, and git finds the store clean. An undo does the same.
#[test]
fn a_restore_leaves_no_second_names_behind() {
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let p = env.proj();
    for i in 0..6 {
        write(&p, &format!("d{i}/f.txt"), "v1\n");
    }
    symlink(&p, "link", "d0/f.txt");
    env.watch();
    let first = env.checkpoint("v1");
    for i in 0..6 {
        write(&p, &format!("d{i}/f.txt"), &format!("v2 {i}\n"));
    }
    std::fs::remove_file(p.join("link")).unwrap();
    symlink(&p, "link", "d1/f.txt");
    env.checkpoint("v2");
    let store = env.store();
    let settled = |what: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let left = temporary_names(&p);
            let trash: Vec<_> = std::fs::read_dir(store.join("ckpt-trash"))
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            if left.is_empty() && trash.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: second names still there 10 s after the reply: {left:?} {trash:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let report = env.json(&["restore", &first, "--yes"]);
    assert_eq!(temporary_names(&p), Vec::<String>::new());
    assert_eq!(report["written"].as_array().unwrap().len(), 7, "{report}");
    settled("restore");
    for i in 0..6 {
        let path = p.join(format!("d{i}/f.txt"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "v1\n");
        assert_eq!(std::fs::metadata(&path).unwrap().nlink(), 1, "{i}");
    }
    assert_eq!(
        std::fs::read_link(p.join("link")).unwrap(),
        std::path::Path::new("d0/f.txt")
    );
    env.json(&["undo", "--yes"]);
    assert_eq!(temporary_names(&p), Vec::<String>::new());
    settled("undo");
    assert_eq!(
        std::fs::read_to_string(p.join("d3/f.txt")).unwrap(),
        "v2 3\n"
    );
    env.fsck();
    assert!(env.log().contains("restore finished"));
}

/// A restore of many files writes them from several threads at once: every file, executable
/// bit and symlink comes back exactly, a folder nothing can be written into costs only its own
/// files (each reported), the index stays equal to a full scan, no temporary or second name is
/// left, and the undo brings every change back.
#[test]
fn a_restore_of_many_files_writes_them_together_and_exactly() {
    let env = TestEnv::new();
    let p = env.proj();
    for d in 0..6 {
        for f in 0..8 {
            write(&p, &format!("d{d}/f{f}.txt"), &format!("v1 {d} {f}\n"));
        }
        chmod(&p, &format!("d{d}/f0.txt"), 0o755);
        symlink(&p, &format!("d{d}/link"), "f1.txt");
    }
    env.watch();
    let first = env.checkpoint("v1");
    let v1 = tree_state(&p);
    for d in 0..6 {
        for f in 0..8 {
            write(
                &p,
                &format!("d{d}/f{f}.txt"),
                &format!("v2 {d} {f} longer\n"),
            );
        }
        chmod(&p, &format!("d{d}/f0.txt"), 0o644);
        chmod(&p, &format!("d{d}/f2.txt"), 0o755);
        std::fs::remove_file(p.join(format!("d{d}/link"))).unwrap();
        symlink(&p, &format!("d{d}/link"), "f3.txt");
        write(&p, &format!("d{d}/new.txt"), "new\n");
    }
    env.checkpoint("v2");
    let v2 = tree_state(&p);
    make_unwritable(&p.join("d3"));
    let out = env.ckpt(&["--json", "restore", &first, "--yes"]);
    make_writable(&p.join("d3"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut skipped: Vec<&str> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    skipped.sort();
    // d3's files stay as they were (new.txt cannot be deleted either).
    let mut in_d3: Vec<String> = (0..8).map(|f| format!("d3/f{f}.txt")).collect();
    in_d3.extend(["d3/link".to_string(), "d3/new.txt".to_string()]);
    in_d3.sort();
    assert_eq!(skipped, in_d3, "{report}");
    let now = tree_state(&p);
    for (path, state) in &now {
        let expected = if path.starts_with("d3/") { &v2 } else { &v1 };
        assert_eq!(Some(state), expected.get(path), "{path}");
    }
    assert_eq!(now.len(), v1.len() + 1, "only d3/new.txt is extra");
    let verify = env.json(&["verify"]);
    assert_eq!(verify["equal"], true, "{verify}");
    assert!(temporary_names(&p).is_empty());
    let trash = env.store().join("ckpt-trash");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_dir(&trash).is_ok_and(|mut d| d.next().is_some()) {
        assert!(std::time::Instant::now() < deadline, "second names left");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    env.json(&["undo", "--yes"]);
    assert_eq!(tree_state(&p), v2);
    let verify = env.json(&["verify"]);
    assert_eq!(verify["equal"], true, "{verify}");
    env.fsck();
}

/// The files a restore wrote count as racy, like files just read (a rewrite by someone else
/// within the same timestamp tick would leave their stat as the restore recorded it): once
/// their window has passed the daemon reads them again after the reply and settles them, which
/// it logs. Without the marking nothing is settled after a restore.
#[test]
fn the_files_a_restore_writes_are_settled_after_it() {
    let env = TestEnv::new();
    let p = env.proj();
    for i in 0..6 {
        write(&p, &format!("d{}/f{i}.txt", i % 2), &format!("v1 {i}\n"));
    }
    env.watch();
    let first = env.checkpoint("v1");
    for i in 0..6 {
        write(&p, &format!("d{}/f{i}.txt", i % 2), &format!("v2 {i}\n"));
    }
    let second = env.checkpoint("v2");
    let settled = || -> usize {
        env.log()
            .lines()
            .filter(|l| l.contains("racy entries settled"))
            .filter_map(|l| l.split("settled=").nth(1)?.trim().parse::<usize>().ok())
            .sum()
    };
    let quiet = || {
        // Whatever the checkpoints left racy has settled (or never was).
        let mut last = settled();
        loop {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let now = settled();
            if now == last {
                return now;
            }
            last = now;
        }
    };
    // A loaded machine may take longer than the window between a write and its marking:
    // then the next round tries again.
    for round in 0..5 {
        let before = quiet();
        let target = if round % 2 == 0 { &first } else { &second };
        let r = env.json(&["restore", target, "--yes"]);
        let written = r["written"].as_array().unwrap().len();
        assert_eq!(written, 6, "{r}");
        if quiet() >= before + written {
            let verify = env.json(&["verify"]);
            assert_eq!(verify["equal"], true, "{verify}");
            return;
        }
    }
    panic!("the restored files were never settled: {}", env.log());
}

/// The counts a restore's result records are what git finds between the undo point and the
/// result: for a whole restore (taken from its plan), for one limited to some paths (counted
/// by walking the trees), and for one whose result is not the target (a file it had to leave).
#[test]
fn a_restores_result_counts_what_changed_since_its_undo_point() {
    let env = TestEnv::with_config("max_file_size = 100\n");
    let p = env.proj();
    write(&p, "a.txt", "a1");
    write(&p, "b.txt", "b1");
    write(&p, "sub/c.txt", "c1");
    env.watch();
    let first = env.checkpoint("first");
    write(&p, "a.txt", "a2");
    std::fs::remove_file(p.join("b.txt")).unwrap();
    write(&p, "sub/d.txt", "d2");
    write(&p, "e.txt", "e2");
    env.checkpoint("second");
    let check = |r: &serde_json::Value| {
        let undo = r["undo_checkpoint"].as_str().unwrap();
        let result = r["restore_checkpoint"].as_str().unwrap();
        let status = env.git(&["diff", "--name-status", "--no-renames", undo, result]);
        let count = |letter: &str| status.lines().filter(|l| l.starts_with(letter)).count() as u64;
        let shown = env.json(&["show", result]);
        assert_eq!(
            (
                shown["added"].as_u64(),
                shown["modified"].as_u64(),
                shown["deleted"].as_u64()
            ),
            (Some(count("A")), Some(count("M")), Some(count("D"))),
            "{status}\n{shown}"
        );
        let files = env.ls_tree(result).len() as u64;
        assert_eq!(shown["files"].as_u64(), Some(files), "{shown}");
    };
    let whole = env.json(&["restore", &first, "--yes"]);
    check(&whole);
    env.json(&["undo", "--yes"]);
    let partial = env.json(&["restore", &first, "--yes", "--", "sub"]);
    check(&partial);
    env.json(&["undo", "--yes"]);
    // A file the undo point cannot hold (over the size limit) stays: the result is not the
    // target.
    write(&p, "a.txt", &"x".repeat(200));
    let out = env.ckpt(&["--json", "restore", &first, "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let left: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(left["skipped"][0]["path"], "a.txt", "{left}");
    check(&left);
}
