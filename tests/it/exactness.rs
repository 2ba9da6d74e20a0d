//! Exactness: whatever happens to the files, the tree a checkpoint records (from the watcher
//! and the index) equals a fresh full scan (a separate code path) at that moment.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::harness::*;

/// A small deterministic generator (xorshift64*), so failures replay from their seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

const DIRS: &[&str] = &[
    "",
    "a",
    "a/b",
    "c",
    "c/d/e",
    "ignored_dir",
    "node_modules/x",
    "logs",
];
const NAMES: &[&str] = &[
    "f1.txt", "f2.rs", "run.sh", "x.log", "data.bin", ".env", "notes.md",
];

/// Every file, symlink and folder below `root` except `.git` internals.
fn entries(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in read.flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                dirs.push(p.clone());
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    (files, dirs)
}

fn random_op(rng: &mut Rng, root: &Path, outside: &Path, step: usize) {
    let (files, dirs) = entries(root);
    let dir = root.join(rng.pick(DIRS).unwrap());
    let name = *rng.pick(NAMES).unwrap();
    match rng.below(15) {
        0..=2 => {
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                return;
            }
            let _ = std::fs::remove_file(&path);
            std::fs::write(path, format!("content {step} {}\n", rng.next())).unwrap();
        }
        3 | 4 => {
            if let Some(f) = rng.pick(&files) {
                if !std::fs::symlink_metadata(f)
                    .unwrap()
                    .file_type()
                    .is_symlink()
                {
                    std::fs::write(f, format!("edit {step}\n")).unwrap();
                }
            }
        }
        5 => {
            if let Some(f) = rng.pick(&files) {
                std::fs::remove_file(f).unwrap();
            }
        }
        6 => {
            if let Some(f) = rng.pick(&files) {
                std::fs::create_dir_all(&dir).unwrap();
                let to = dir.join(format!("renamed{step}"));
                let _ = std::fs::rename(f, to);
            }
        }
        7 => {
            if let Some(f) = rng.pick(&files) {
                if !std::fs::symlink_metadata(f)
                    .unwrap()
                    .file_type()
                    .is_symlink()
                {
                    let mode = if rng.below(2) == 0 { 0o755 } else { 0o644 };
                    chmod(Path::new("/"), f.to_str().unwrap(), mode);
                }
            }
        }
        8 => {
            std::fs::create_dir_all(&dir).unwrap();
            let link = dir.join(format!("link{}", rng.below(3)));
            let _ = std::fs::remove_file(&link);
            if !link.exists() {
                let _ = std::os::unix::fs::symlink(format!("target{}", rng.below(4)), link);
            }
        }
        9 => {
            // A folder built elsewhere, full of files, moved in: its files made no events here.
            let staged = outside.join(format!("staged{step}"));
            write(&staged, "inner/one.txt", &format!("one {step}"));
            write(&staged, "two.txt", "two");
            std::fs::create_dir_all(&dir).unwrap();
            let _ = std::fs::rename(&staged, dir.join(format!("moved{step}")));
        }
        10 => {
            if let Some(d) = rng.pick(&dirs) {
                let _ = std::fs::remove_dir_all(d);
            }
        }
        11 => {
            if let Some(d) = rng.pick(&dirs) {
                let to = root.join(format!("dir_renamed{step}"));
                let _ = std::fs::rename(d, to);
            }
        }
        12 => {
            let patterns = [
                "*.log\n",
                "ignored_dir/\n",
                "*.md\n!notes.md\n",
                "renamed*\n",
                "",
            ];
            let gi = if rng.below(2) == 0 {
                root.join(".gitignore")
            } else {
                root.join("a/.gitignore")
            };
            std::fs::create_dir_all(gi.parent().unwrap()).unwrap();
            std::fs::write(gi, rng.pick(&patterns).unwrap()).unwrap();
        }
        13 => {
            // A folder replaced by a symlink to a folder outside with the same file names: a
            // refresh must never read through it.
            if let Some(d) = rng.pick(&dirs) {
                let _ = std::fs::remove_dir_all(d);
                write(outside, "elsewhere/f1.txt", "outside the project");
                write(outside, "elsewhere/notes.md", "outside the project");
                let _ = std::os::unix::fs::symlink(outside.join("elsewhere"), d);
            }
        }
        _ => {
            std::fs::create_dir_all(dir.join(format!("empty{step}"))).unwrap();
        }
    }
}

fn check(rpc: &mut Rpc, project: &Path, step: usize, seed: u64) -> serde_json::Value {
    let c = rpc.call(
        "checkpoint",
        json!({ "project": project, "label": format!("step {step}") }),
    );
    let v = rpc.call("verify", json!({ "project": project }));
    assert_eq!(
        c["tree"], v["scan_tree"],
        "seed {seed} step {step}: the checkpoint's tree differs from a full scan ({v})"
    );
    assert_eq!(v["equal"], true, "seed {seed} step {step}: {v}");
    c
}

/// A checkpoint's counts of added, modified and deleted files are git's, between its tree
/// and `parent_tree`.
fn check_counts(env: &TestEnv, c: &serde_json::Value, parent_tree: &str, what: &str) {
    let raw = env.git(&[
        "diff-tree",
        "-r",
        "--no-renames",
        parent_tree,
        c["tree"].as_str().unwrap(),
    ]);
    let mut counts = [0u64; 3];
    for line in raw.lines() {
        let status = line.split('\t').next().unwrap().rsplit(' ').next().unwrap();
        match status {
            "A" => counts[0] += 1,
            "M" | "T" => counts[1] += 1,
            "D" => counts[2] += 1,
            other => panic!("{what}: unexpected status {other} in {line}"),
        }
    }
    let said = ["added", "modified", "deleted"].map(|k| c[k].as_u64().unwrap());
    assert_eq!(said, counts, "{what}: counts differ from git's: {c}");
}

#[test]
fn incremental_checkpoints_equal_full_scans() {
    for seed in [1u64, 7, 42] {
        // Every checkpoint stays restorable here (retention would prune the oldest).
        let mut env = TestEnv::with_config("[retention]\nkeep = 1000\n");
        let root = env.proj();
        let outside = env.home.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        write(&root, "a/start.txt", "start");
        env.watch();
        let mut rpc = Rpc::connect(&env);
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut ids = Vec::new();
        let mut parent_tree: Option<String> = None;
        for step in 0..60 {
            for _ in 0..rng.below(4) + 1 {
                random_op(&mut rng, &root, &outside, step);
            }
            if step == 20 {
                // What an overflow does: the next checkpoint verifies everything by stat.
                rpc.call("rescan", json!({ "project": root }));
            }
            if step == 40 {
                // A restart mid-sequence: the persisted stat cache must not mislead.
                drop(rpc);
                env.stop_daemon();
                random_op(&mut rng, &root, &outside, step);
                env.start_daemon();
                rpc = Rpc::connect(&env);
            }
            let c = check(&mut rpc, &root, step, seed);
            if let Some(parent) = &parent_tree {
                check_counts(&env, &c, parent, &format!("seed {seed} step {step}"));
            }
            parent_tree = Some(c["tree"].as_str().unwrap().to_string());
            ids.push(c["id"].as_str().unwrap().to_string());
        }
        // Restores go through the index as well: afterwards it must still match a full scan.
        for id in [&ids[10], &ids[45], &ids[30]] {
            let r = rpc.call("restore", json!({ "project": root, "id": id }));
            let v = rpc.call("verify", json!({ "project": root }));
            assert_eq!(v["equal"], true, "seed {seed} after restore: {v}");
            let c = rpc.call("checkpoint", json!({ "project": root }));
            let target = rpc.call("show", json!({ "project": root, "id": id }));
            // The restored tree equals the target but for paths the restore reported: files it
            // may not touch because they were ignored before (and are not under the restored
            // rules). Nothing may differ silently.
            let skipped: Vec<String> = r["skipped"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["path"].as_str().unwrap().to_string())
                .collect();
            let diff = env.git(&[
                "diff",
                "--name-only",
                "--no-renames",
                target["tree"].as_str().unwrap(),
                c["tree"].as_str().unwrap(),
            ]);
            for path in diff.lines() {
                assert!(
                    skipped.contains(&path.to_string()),
                    "seed {seed}: {path} differs after restoring {id} but was not reported: {r}"
                );
            }
        }
        env.fsck();
    }
}

#[test]
fn a_write_just_before_a_checkpoint_is_always_in_it() {
    let env = TestEnv::new();
    let root = env.proj();
    write(&root, "f.txt", "0");
    env.watch();
    let mut rpc = Rpc::connect(&env);
    for i in 1..=150 {
        let content = format!("{i}");
        std::fs::write(root.join("f.txt"), &content).unwrap();
        if i % 10 == 0 {
            write(&root, &format!("new/dir{i}/g.txt"), &content);
        }
        let c = rpc.call("checkpoint", json!({ "project": root }));
        let id = c["id"].as_str().unwrap();
        assert_eq!(
            env.git(&["show", &format!("{id}:f.txt")]),
            content,
            "write {i} missing from its checkpoint"
        );
        if i % 10 == 0 {
            assert_eq!(
                env.git(&["show", &format!("{id}:new/dir{i}/g.txt")]),
                content
            );
        }
    }
}

/// A write through a shared memory map makes no modify event (only the close after it says
/// the file was open for writing): the next checkpoint still has it.
#[test]
fn a_write_through_a_memory_map_is_in_the_next_checkpoint() {
    let env = TestEnv::new();
    let root = env.proj();
    write(&root, "db/data.bin", "0123456789");
    env.watch();
    let mut rpc = Rpc::connect(&env);
    rpc.call("checkpoint", json!({ "project": root }));
    // Past the racy window: only the watcher can tell of the next write.
    std::thread::sleep(std::time::Duration::from_millis(150));
    for (i, bytes) in ["ABCDE", "abcde"].iter().enumerate() {
        let script = format!(
            "import mmap\nf = open('db/data.bin', 'r+b')\nm = mmap.mmap(f.fileno(), 0)\n\
             m[0:5] = b'{bytes}'\nm.flush()\nm.close()\nf.close()\n"
        );
        let out = std::process::Command::new("python3")
            .args(["-c", &script])
            .current_dir(&root)
            .output()
            .expect("run python3");
        assert!(out.status.success(), "{}", stderr(&out));
        let c = rpc.call("checkpoint", json!({ "project": root }));
        let id = c["id"].as_str().unwrap();
        assert_eq!(
            env.git(&["show", &format!("{id}:db/data.bin")]),
            format!("{bytes}56789"),
            "write {i} through a map is missing: {c}"
        );
        assert_eq!(c["modified"], 1, "{c}");
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let v = rpc.call("verify", json!({ "project": root }));
    assert_eq!(v["equal"], true, "{v}");
}

/// The watcher asks inotify for changes, never for opens (a `grep -r` would send one event per
/// file), and for closes after writing (a memory map's writes make no other event); it never
/// watches through a symlink.
#[test]
fn the_watcher_asks_inotify_for_changes_only() {
    let mut env = TestEnv::without_daemon("");
    let Some(trace) = env.start_daemon_traced("inotify_add_watch") else {
        return;
    };
    let root = env.proj();
    write(&root, "src/a.txt", "a");
    env.watch();
    env.checkpoint("first");
    drop(env.daemon.take().map(|mut d| d.kill()));
    let calls = std::fs::read_to_string(&trace).unwrap();
    let project = root.to_str().unwrap();
    let watches: Vec<&str> = calls
        .lines()
        .filter(|l| l.contains(&format!("\"{project}")))
        .collect();
    assert!(
        watches.len() >= 2,
        "the root and src/ are watched:\n{calls}"
    );
    for w in watches {
        assert!(!w.contains("IN_OPEN"), "{w}");
        assert!(
            w.contains("IN_DONT_FOLLOW"),
            "a symlink is never followed: {w}"
        );
        for wanted in [
            "IN_MODIFY",
            "IN_ATTRIB",
            "IN_CLOSE_WRITE",
            "IN_CREATE",
            "IN_DELETE",
            "IN_MOVED_FROM",
            "IN_MOVED_TO",
        ] {
            assert!(w.contains(wanted), "{wanted} missing: {w}");
        }
    }
}

/// The watcher's sync never writes into the project: its cookie lives in the store, so a
/// checkpoint leaves the root folder's modification time (which tools read) as it was.
#[test]
fn a_checkpoint_never_touches_the_project_root() {
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let root = env.proj();
    write(&root, "src/a.txt", "0");
    env.watch();
    env.checkpoint("first");
    let stamp = || {
        let m = std::fs::metadata(&root).unwrap();
        (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
    };
    let before = stamp();
    for i in 1..=5 {
        write(&root, "src/a.txt", &format!("{i}"));
        let id = env.checkpoint(&format!("edit {i}"));
        assert_eq!(
            env.git(&["show", &format!("{id}:src/a.txt")]),
            format!("{i}")
        );
    }
    assert_eq!(
        stamp(),
        before,
        "a checkpoint wrote into the project's root folder"
    );
}

/// The sync cookie's folder removed (or replaced by a file) under the daemon: the next sync
/// puts it back, or verifies by stat; every checkpoint still holds every write.
#[test]
fn a_removed_sync_folder_is_put_back_and_nothing_is_missed() {
    let env = TestEnv::new();
    let root = env.proj();
    write(&root, "f.txt", "0");
    env.watch();
    env.checkpoint("first");
    env.checkpoint("second (the first sync)");
    let sync = env.store().join("ckpt-sync");
    assert!(sync.is_dir(), "no sync folder in the store");
    for i in 1..=3 {
        std::fs::remove_dir_all(&sync).unwrap();
        if i == 2 {
            std::fs::write(&sync, "in the way").unwrap();
        }
        write(&root, "f.txt", &format!("{i}"));
        let id = env.checkpoint(&format!("edit {i}"));
        assert_eq!(env.git(&["show", &format!("{id}:f.txt")]), format!("{i}"));
        if i == 2 {
            std::fs::remove_file(&sync).unwrap();
        }
        write(&root, "g.txt", &format!("{i}"));
        let id = env.checkpoint(&format!("again {i}"));
        assert_eq!(env.git(&["show", &format!("{id}:g.txt")]), format!("{i}"));
    }
    env.fsck();
    env.assert_serving();
}

#[test]
fn status_reports_how_changes_are_found() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a");
    env.watch();
    env.checkpoint("one");
    let status = env.json(&["status"]);
    assert_eq!(status["projects"][0]["mode"], "watching", "{status}");
    let out = env.ckpt(&["verify"]);
    assert!(
        out.status.success() && stdout(&out).contains("matches a full scan"),
        "{}",
        stdout(&out)
    );
}

/// Files read (or restored) moments ago are racy: a rewrite within the same timestamp tick
/// would leave their stat as it was, so they are read again. Once their window has passed the
/// daemon reads them after the reply and settles those still as recorded; checkpoints taken
/// before, during and after that stay equal to full scans, and a restored file rewritten at
/// once is recorded as rewritten.
#[test]
fn racy_files_are_settled_after_the_reply_and_checkpoints_stay_exact() {
    let env = TestEnv::new();
    let root = env.proj();
    write(&root, "d0/f0.txt", "0000");
    env.watch();
    let mut rpc = Rpc::connect(&env);
    let settled = |log: &str| {
        log.lines()
            .filter(|l| l.contains("racy entries settled"))
            .filter_map(|l| {
                let n = l.split("settled=").nth(1)?.split_whitespace().next()?;
                n.parse::<usize>().ok()
            })
            .sum::<usize>()
    };
    let wait_for_more_than = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while settled(&env.log()) <= n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        settled(&env.log()) > n
    };
    // Files written just before a checkpoint reads them are racy (unless a loaded machine
    // made the read come later than the window: then the next round tries again).
    let mut first = String::new();
    for round in 0..5 {
        let before = settled(&env.log());
        for i in 0..12 {
            write(
                &root,
                &format!("d{}/f{i}.txt", i % 3),
                &format!("{round}{i:03}"),
            );
        }
        first = check(&mut rpc, &root, 0, 0)["id"]
            .as_str()
            .unwrap()
            .to_string();
        if wait_for_more_than(before) {
            break;
        }
        assert!(round < 4, "no racy file was ever settled: {}", env.log());
    }
    // Rewrites of the same size, before and after their files settle.
    for step in 1..=6 {
        std::fs::write(
            root.join(format!("d0/f{}.txt", step * 3 % 12)),
            format!("x{step:03}"),
        )
        .unwrap();
        check(&mut rpc, &root, step, 0);
        if step % 2 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(120));
        }
    }
    // A restore's own writes, rewritten right after its reply with bytes of the same size.
    let before = settled(&env.log());
    let r = rpc.call("restore", json!({ "project": root, "id": first }));
    let written = r["written"].as_array().unwrap().len();
    assert!(written >= 2, "{r}");
    std::fs::write(root.join("d0/f3.txt"), "y003").unwrap();
    let id = check(&mut rpc, &root, 7, 0)["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(env.git(&["show", &format!("{id}:d0/f3.txt")]), "y003");
    assert!(
        wait_for_more_than(before),
        "the rewritten file was not settled"
    );
    check(&mut rpc, &root, 8, 0);
    env.fsck();
}

/// A first checkpoint reads its files in batches from several threads and puts each batch in
/// the index as it is read (a folder of 5,000 files spans two batches), and a checkpoint of
/// thousands of changes does the same: both equal a full scan, and git reads every file.
#[test]
fn checkpoints_read_in_batches_equal_full_scans() {
    let env = TestEnv::new();
    let root = env.proj();
    for i in 0..5_000 {
        write(&root, &format!("big/f{i:05}.txt"), &format!("big {i}\n"));
    }
    for d in 0..40 {
        for i in 0..100 {
            write(&root, &format!("d{d}/s/f{i}.rs"), &format!("{d} {i}\n"));
        }
    }
    let run = |what: &str| {
        let path = root.join("big").join(what);
        assert!(std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success());
    };
    run("f02500.fifo");
    std::os::unix::fs::symlink("f00001.txt", root.join("big/link")).unwrap();
    let tool = root.join("d3/s/tool.sh");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.watch();
    let mut rpc = Rpc::connect(&env);
    let first = check(&mut rpc, &root, 0, 0);
    let skipped = first["skipped"].to_string();
    assert!(skipped.contains("big/f02500.fifo"), "{first}");
    let id = first["id"].as_str().unwrap();
    assert_eq!(env.ls_tree(id).len(), 5_000 + 4_000 + 2);
    assert_eq!(
        env.git(&["show", &format!("{id}:big/f04999.txt")]),
        "big 4999\n"
    );
    assert_eq!(env.git(&["show", &format!("{id}:d39/s/f99.rs")]), "39 99\n");
    let mode = env.git(&["ls-tree", id, "d3/s/tool.sh"]);
    assert!(mode.starts_with("100755 "), "{mode}");
    // Thousands of changes at once: most of the big folder rewritten, some deleted.
    for i in (0..5_000).step_by(2) {
        write(
            &root,
            &format!("big/f{i:05}.txt"),
            &format!("changed {i}\n"),
        );
    }
    for i in (1..5_000).step_by(7) {
        std::fs::remove_file(root.join(format!("big/f{i:05}.txt"))).unwrap();
    }
    let second = check(&mut rpc, &root, 1, 0);
    let id = second["id"].as_str().unwrap();
    assert_eq!(
        env.git(&["show", &format!("{id}:big/f04998.txt")]),
        "changed 4998\n"
    );
    env.git(&["fsck", "--strict", "--no-dangling"]);
}
