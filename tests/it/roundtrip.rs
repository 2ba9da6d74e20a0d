//! Checkpoint, change everything a project can change, restore, and compare byte for byte.

use std::os::unix::fs::PermissionsExt;

use crate::harness::*;

fn populate(p: &std::path::Path) {
    write(p, "README.md", "# demo\n");
    write(p, "src/main.rs", "fn main() {}\n");
    write(p, "src/lib/util.rs", "pub fn util() {}\n");
    write(p, "scripts/run.sh", "#!/bin/sh\necho run\n");
    chmod(p, "scripts/run.sh", 0o755);
    write(p, "swap/was_file", "i am a file\n");
    write(p, "swap/was_dir/inner.txt", "inside a dir\n");
    symlink(p, "link_to_readme", "README.md");
    symlink(p, "dangling", "does/not/exist");
    write(p, ".github/workflows/ci.yml", "on: push\n");
    write(p, "empty.txt", "");
}

#[test]
fn restore_undoes_every_kind_of_change() {
    let env = TestEnv::new();
    let p = env.proj();
    populate(&p);
    env.watch();
    let before = tree_state(&p);
    let first = env.checkpoint("before the agent ran");

    // Edit, create, delete, chmod both ways, file<->dir swaps, symlink retarget/replace.
    write(&p, "README.md", "# changed by the agent\n");
    write(&p, "src/new_module.rs", "mod x;\n");
    write(&p, "brand/new/deep/file.txt", "deep\n");
    std::fs::remove_file(p.join("src/lib/util.rs")).unwrap();
    chmod(&p, "scripts/run.sh", 0o644);
    chmod(&p, "src/main.rs", 0o755);
    std::fs::remove_file(p.join("swap/was_file")).unwrap();
    write(&p, "swap/was_file/now_inside.txt", "file became a dir\n");
    std::fs::remove_dir_all(p.join("swap/was_dir")).unwrap();
    write(&p, "swap/was_dir", "dir became a file\n");
    std::fs::remove_file(p.join("link_to_readme")).unwrap();
    symlink(&p, "link_to_readme", "src/main.rs");
    std::fs::remove_file(p.join("dangling")).unwrap();
    write(&p, "dangling", "now a regular file\n");
    std::fs::remove_file(p.join("empty.txt")).unwrap();
    symlink(&p, "empty.txt", "README.md");
    let after_agent = tree_state(&p);
    assert_ne!(before, after_agent);

    let report = env.json(&["restore", &first, "--yes"]);
    assert_eq!(report["restored_to"], first.as_str());
    assert!(report["skipped"].as_array().unwrap().is_empty(), "{report}");
    assert!(!report["written"].as_array().unwrap().is_empty());
    assert!(!report["deleted"].as_array().unwrap().is_empty());
    assert_eq!(
        tree_state(&p),
        before,
        "restore must give back the exact tree"
    );

    // The undo checkpoint brings the agent's state back, byte for byte.
    let undo = report["undo_checkpoint"].as_str().unwrap().to_string();
    let shown = env.json(&["show", &undo]);
    assert_eq!(shown["kind"], "pre-restore");
    env.json(&["restore", &undo, "--yes"]);
    assert_eq!(
        tree_state(&p),
        after_agent,
        "undo must give back the state before the restore"
    );

    env.fsck();
}

#[test]
fn checkpoint_tree_lists_exactly_the_project_files() {
    let env = TestEnv::new();
    let p = env.proj();
    populate(&p);
    write(&p, "node_modules/pkg/index.js", "ignored\n");
    write(&p, ".env", "SECRET=1\n");
    env.watch();
    let id = env.checkpoint("one");
    let mut expected: Vec<String> = tree_state(&p)
        .into_iter()
        .filter(|(path, _)| !path.starts_with("node_modules") && path != ".env")
        .map(|(path, _)| path)
        .collect();
    expected.sort();
    assert_eq!(env.ls_tree(&id), expected);

    // Modes and symlinks are git's: 100755 for the script, 120000 for links.
    let listing = env.git(&["ls-tree", "-r", &id]);
    assert!(
        listing.contains("100755 blob") && listing.contains("\tscripts/run.sh"),
        "{listing}"
    );
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("120000") && l.ends_with("\tlink_to_readme")),
        "{listing}"
    );
    let link_blob = env.git(&["rev-parse", &format!("{id}:link_to_readme")]);
    assert_eq!(env.git(&["cat-file", "-p", link_blob.trim()]), "README.md");

    // Checkpoints are readable with plain git, and the store is sound.
    let log = env.git(&["log", "--all", "--format=%s"]);
    assert!(log.contains("[default] #1 manual: one"), "{log}");
    env.fsck();
}

#[test]
fn checkpoint_metadata_and_counts() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    write(&p, "b.txt", "b\n");
    env.watch();
    let label = "Fix the login bug\n\nLine two of the user's message, with \"quotes\" and ünïcode.";
    let first = env.json(&["checkpoint", "-m", label, "--message-id", "msg-1"]);
    assert_eq!(first["seq"], 1);
    assert_eq!(first["dialog"], "default");
    assert_eq!(first["kind"], "message");
    assert_eq!(first["label"], label);
    assert_eq!(first["message_id"], "msg-1");
    assert_eq!(first["files"], 2);
    assert_eq!(first["added"], 2);
    assert!(first["created_at"]
        .as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .is_ok());
    assert_eq!(first["id"].as_str().unwrap().len(), 40);

    write(&p, "a.txt", "changed\n");
    std::fs::remove_file(p.join("b.txt")).unwrap();
    write(&p, "c.txt", "c\n");
    write(&p, "d.txt", "d\n");
    let second = env.json(&["checkpoint"]);
    assert_eq!(second["seq"], 2);
    assert_eq!(
        (
            second["added"].as_u64(),
            second["modified"].as_u64(),
            second["deleted"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );

    // Nothing changed: a checkpoint is still made, with zero counts.
    let third = env.json(&["checkpoint", "-m", "no changes"]);
    assert_eq!(third["seq"], 3);
    assert_eq!(
        (
            third["added"].as_u64(),
            third["modified"].as_u64(),
            third["deleted"].as_u64()
        ),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(third["tree"], second["tree"]);

    let list = env.json(&["list"]);
    let seqs: Vec<u64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![3, 2, 1]);

    // Client metadata is stored with the checkpoint and returned by show.
    let meta_file = env.home.join("meta.json");
    std::fs::write(
        &meta_file,
        r#"{"messages":[{"role":"user","content":"hi"}],"steps":[1,2]}"#,
    )
    .unwrap();
    let with_meta = env.json(&[
        "checkpoint",
        "-m",
        "meta",
        "--meta",
        meta_file.to_str().unwrap(),
    ]);
    let shown = env.json(&["show", &with_meta["id"].as_str().unwrap()[..10]]);
    assert_eq!(shown["meta"]["steps"], serde_json::json!([1, 2]));
    assert_eq!(shown["label"], "meta");
    env.git(&["gc", "--prune=now", "--quiet"]);
    let shown = env.json(&["show", with_meta["id"].as_str().unwrap()]);
    assert_eq!(
        shown["meta"]["messages"][0]["content"], "hi",
        "metadata must survive git gc"
    );
    // A restore hands the metadata back, so the agent can roll its conversation back too.
    let restored = env.json(&["restore", with_meta["id"].as_str().unwrap(), "--yes"]);
    assert_eq!(restored["meta"]["steps"], serde_json::json!([1, 2]));
    let plain = env.json(&["restore", second["id"].as_str().unwrap(), "--yes"]);
    assert_eq!(plain["meta"], serde_json::Value::Null);
    env.fsck();
}

#[test]
fn show_and_diff_between_checkpoints_and_the_working_tree() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "same\n");
    write(&p, "edit.txt", "one\ntwo\nthree\n");
    write(&p, "gone.txt", "bye\n");
    env.watch();
    let a = env.checkpoint("a");
    write(&p, "edit.txt", "one\nTWO\nthree\n");
    std::fs::remove_file(p.join("gone.txt")).unwrap();
    write(&p, "new.txt", "hello\n");
    let b = env.checkpoint("b");

    let shown = env.json(&["show", &b]);
    let changes: Vec<(String, String)> = shown["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            ("edit.txt".into(), "modified".into()),
            ("gone.txt".into(), "deleted".into()),
            ("new.txt".into(), "added".into())
        ]
    );

    let out = env.ckpt(&["diff", &a, &b]);
    assert!(out.status.success());
    let patch = stdout(&out);
    assert!(
        patch.contains("diff --git a/edit.txt b/edit.txt"),
        "{patch}"
    );
    assert!(patch.contains("-two\n+TWO\n"), "{patch}");
    assert!(patch.contains("deleted file mode 100644"), "{patch}");
    assert!(patch.contains("+++ b/new.txt"), "{patch}");
    assert!(!patch.contains("keep.txt"));

    // The patch applies with real git onto the older state.
    let scratch = env.home.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    write(&scratch, "keep.txt", "same\n");
    write(&scratch, "edit.txt", "one\ntwo\nthree\n");
    write(&scratch, "gone.txt", "bye\n");
    std::fs::write(env.home.join("p.diff"), &patch).unwrap();
    let applied = std::process::Command::new("git")
        .current_dir(&scratch)
        .args(["apply", "--whitespace=nowarn"])
        .arg(env.home.join("p.diff"))
        .output()
        .unwrap();
    assert!(applied.status.success(), "git apply: {}", stderr(&applied));
    assert_eq!(
        std::fs::read_to_string(scratch.join("edit.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert!(!scratch.join("gone.txt").exists());

    let names = stdout(&env.ckpt(&["diff", &a, &b, "--name-only"]));
    assert_eq!(names, "edit.txt\ngone.txt\nnew.txt\n");
    let stat = stdout(&env.ckpt(&["diff", &a, &b, "--stat"]));
    assert!(
        stat.contains("3 files changed, 2 insertions(+), 2 deletions(-)"),
        "{stat}"
    );

    // Against the working tree, limited to one path.
    write(&p, "new.txt", "hello\nworld\n");
    write(&p, "keep.txt", "touched\n");
    let d = env.json(&["diff", &b, "--", "new.txt"]);
    assert_eq!(d["to"], serde_json::Value::Null);
    assert_eq!(d["files"].as_array().unwrap().len(), 1);
    assert!(d["patch"].as_str().unwrap().contains("+world"));
}

#[test]
fn a_large_checkpoint_is_written_as_one_pack() {
    let env = TestEnv::new();
    let p = env.proj();
    for i in 0..600 {
        write(
            &p,
            &format!("d{}/f{i}.txt", i % 7),
            &format!("file {i}\n").repeat(20 + i % 5),
        );
    }
    write(&p, "dup1.txt", "same content\n");
    write(&p, "dup2.txt", "same content\n");
    env.watch();
    let id = env.checkpoint("many files");
    let store = env.store();
    let packs: Vec<_> = std::fs::read_dir(store.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    let idx = packs[0].with_extension("idx");
    let verify = env.git(&["verify-pack", "-v", idx.to_str().unwrap()]);
    // 601 blobs (two files share one), 8 trees and the commit, all in the one pack; not one
    // loose object.
    assert!(verify.contains("non delta: 610 objects"), "{verify}");
    let counts = env.git(&["count-objects", "-v"]);
    assert!(counts.contains("in-pack: 610"), "{counts}");
    assert!(counts.lines().any(|l| l == "count: 0"), "{counts}");
    env.fsck();
    assert_eq!(env.ls_tree(&id).len(), 602);
    // Content comes back out of the pack.
    std::fs::remove_dir_all(p.join("d3")).unwrap();
    env.json(&["restore", &id, "--yes"]);
    assert_eq!(
        std::fs::read_to_string(p.join("d3/f3.txt")).unwrap(),
        "file 3\n".repeat(23)
    );
    // No temporary files are left in the store.
    let leftovers: Vec<_> = std::fs::read_dir(store.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tmp_"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_restore_is_recorded_and_undo_toggles_it() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "v1");
    env.watch();
    let out = env.ckpt(&["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no restore to undo"),
        "{}",
        stderr(&out)
    );

    let first = env.json(&["checkpoint", "-m", "v1"]);
    write(&p, "a.txt", "v2 by the agent");
    write(&p, "b.txt", "new by the agent");
    let agent_state = tree_state(&p);
    let report = env.json(&["restore", first["id"].as_str().unwrap(), "--yes"]);
    let recorded = report["restore_checkpoint"].as_str().unwrap().to_string();
    let shown = env.json(&["show", &recorded]);
    assert_eq!(shown["kind"], "restore");
    assert_eq!(shown["restore"]["restored_to"], first["id"]);
    assert_eq!(shown["restore"]["undo"], report["undo_checkpoint"]);
    assert_eq!(
        shown["tree"], first["tree"],
        "the restore checkpoint records the restored state"
    );
    let kinds: Vec<String> = env
        .json(&["list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, vec!["restore", "pre-restore", "manual"]);
    let v1_state = tree_state(&p);

    // Undo brings the agent's state back; undoing that undo restores v1 again.
    let undone = env.json(&["undo", "--yes"]);
    assert_eq!(undone["restored_to"], report["undo_checkpoint"]);
    assert_eq!(tree_state(&p), agent_state);
    env.json(&["undo", "--yes"]);
    assert_eq!(tree_state(&p), v1_state);
    let human = stdout(&env.ckpt(&["undo", "--dry-run"]));
    assert!(human.starts_with("would restore to "), "{human}");
    assert_eq!(tree_state(&p), v1_state, "a dry run changes nothing");
    env.fsck();
}

#[test]
fn an_exported_patch_applies_with_git() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "same\n");
    write(&p, "edit.txt", "a\nb\nc\n");
    env.watch();
    let base = env.checkpoint("base");
    let snapshot_of_base = tree_state(&p);
    write(&p, "edit.txt", "a\nB\nc\n");
    write(&p, "new/file.txt", "new\n");
    std::fs::remove_file(p.join("keep.txt")).unwrap();
    let next = env.checkpoint("next");

    let out = env.ckpt(&["export", &next, "--patch"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let against = env.ckpt(&["export", &next, "--patch", "--against", &base]);
    assert_eq!(
        stdout(&out),
        stdout(&against),
        "the parent is the default base"
    );
    // Apply to a copy of the older state with real git: it becomes the newer state.
    let scratch = env.home.join("apply");
    for (path, desc) in &snapshot_of_base {
        write(&scratch, path, desc.splitn(3, ' ').nth(2).unwrap());
    }
    std::fs::write(env.home.join("export.diff"), stdout(&out)).unwrap();
    let applied = std::process::Command::new("git")
        .current_dir(&scratch)
        .args(["apply"])
        .arg(env.home.join("export.diff"))
        .output()
        .unwrap();
    assert!(applied.status.success(), "git apply: {}", stderr(&applied));
    assert_eq!(
        std::fs::read_to_string(scratch.join("edit.txt")).unwrap(),
        "a\nB\nc\n"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.join("new/file.txt")).unwrap(),
        "new\n"
    );
    assert!(!scratch.join("keep.txt").exists());
}

#[test]
fn an_exported_bundle_clones_with_git() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "src/main.rs", "fn main() {}\n");
    write(&p, "run.sh", "#!/bin/sh\n");
    chmod(&p, "run.sh", 0o755);
    env.watch();
    let first = env.checkpoint("first");
    write(&p, "src/main.rs", "fn main() { println!(\"hi\"); }\n");
    let second = env.checkpoint("second");
    let bundle = env.home.join("ckpt.bundle");
    let out = env.ckpt(&[
        "export",
        &second,
        &first,
        "--bundle",
        bundle.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let git = |dir: &std::path::Path, args: &[&str]| {
        let o = std::process::Command::new("git")
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
        stdout(&o)
    };
    let listed = git(
        &env.home,
        &["bundle", "list-heads", bundle.to_str().unwrap()],
    );
    assert!(
        listed.contains(&second) && listed.contains(&first),
        "{listed}"
    );
    git(
        &env.home,
        &["clone", "-q", bundle.to_str().unwrap(), "cloned"],
    );
    let cloned = env.home.join("cloned");
    assert_eq!(git(&cloned, &["rev-parse", "HEAD"]).trim(), second);
    assert_eq!(
        std::fs::read_to_string(cloned.join("src/main.rs")).unwrap(),
        "fn main() { println!(\"hi\"); }\n"
    );
    assert_eq!(
        std::fs::metadata(cloned.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111,
        0o111
    );
    git(&cloned, &["fsck", "--strict", "--no-progress"]);
    // Only one of --patch and --bundle, and --patch takes one checkpoint.
    assert_ne!(env.ckpt(&["export", &second]).status.code(), Some(0));
    assert_eq!(
        env.ckpt(&["export", &second, &first, "--patch"])
            .status
            .code(),
        Some(64)
    );
}
