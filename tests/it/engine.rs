//! The engine and the index without the socket or a runtime: operations are plain functions,
//! called in-process on a project's state (`engine::opened::operate`), in temp dirs, checked
//! with the real git.

use std::path::Path;
use std::sync::Arc;

use ckpt::config::{Config, Paths};
use ckpt::engine::opened::operate;
use ckpt::engine::{self, Opened, Project};
use ckpt::filter::Filter;
use ckpt::index::{FileIndex, StatCache};
use ckpt::model::{Kind, SkipReason};
use ckpt::protocol::methods::{
    CheckpointParams, EditBeginParams, EditParams, RestoreParams, UndoParams,
};
use ckpt::store::{Snapshot, SnapshotOptions, Store};

use crate::harness::*;

/// A project and its (not yet opened) state.
fn project(env: &TestEnv) -> (Project, Option<Opened>) {
    let paths = Paths {
        socket: env.home.join("run/unused.sock"),
        data_dir: env.home.join("data/engine"),
    };
    (Project::new(env.proj(), &Config::default(), &paths), None)
}

fn checkpoint_params(root: &Path, label: &str) -> CheckpointParams {
    CheckpointParams {
        project: root.to_path_buf(),
        label: Some(label.into()),
        dialog: None,
        message_id: None,
        kind: None,
        meta: None,
    }
}

#[test]
fn checkpoint_restore_and_undo_in_process() {
    let env = TestEnv::without_daemon("");
    let root = env.proj();
    write(&root, "a.txt", "one\n");
    write(&root, "src/b.rs", "fn b() {}\n");
    let (p, mut state) = project(&env);
    let params = checkpoint_params(&root, "first");
    let c = operate(&p, &mut state, true, |p, o| {
        engine::checkpoint::checkpoint(p, o, params)
    })
    .unwrap();
    assert_eq!((c.kind, c.seq, c.files), (Kind::Message, 1, 2));
    assert_eq!(
        git_in(
            &p.store_dir,
            &["ls-tree", "-r", "--name-only", &c.id.to_string()]
        ),
        "a.txt\nsrc/b.rs\n"
    );
    write(&root, "a.txt", "two\n");
    std::fs::remove_file(root.join("src/b.rs")).unwrap();
    let params = RestoreParams {
        project: root.clone(),
        id: "@".into(),
        paths: vec![],
        dry_run: false,
        dialog: None,
        by: None,
    };
    let r = operate(&p, &mut state, true, |p, o| {
        engine::restore::restore(p, o, params)
    })
    .unwrap();
    assert_eq!(r.restored_to, c.id);
    assert_eq!(
        (r.written.len(), r.deleted.len(), r.skipped.len()),
        (2, 0, 0)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(root.join("src/b.rs").is_file());
    let undo = UndoParams {
        project: root.clone(),
        dialog: None,
        dry_run: false,
    };
    operate(&p, &mut state, true, |p, o| {
        engine::restore::undo(p, o, undo)
    })
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "two\n"
    );
    assert!(!root.join("src/b.rs").exists());
    git_in(&p.store_dir, &["fsck", "--strict"]);
}

#[test]
fn edit_abort_writes_through_the_same_rules_as_a_restore() {
    let env = TestEnv::without_daemon("");
    let root = env.proj();
    write(&root, "a.txt", "saved\n");
    std::fs::create_dir(root.join("dir")).unwrap();
    write(&root, "dir/b.txt", "saved b\n");
    let (p, mut state) = project(&env);
    let begin = EditBeginParams {
        project: root.clone(),
        paths: vec![root.join("a.txt"), root.join("dir/b.txt")],
    };
    let tx = operate(&p, &mut state, true, |p, o| {
        engine::edit::edit_begin(p, o, begin)
    })
    .unwrap();
    write(&root, "a.txt", "clobbered\n");
    // The folder becomes a symlink to somewhere outside: never written through.
    let outside = env.home.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::remove_dir_all(root.join("dir")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("dir")).unwrap();
    let abort = EditParams {
        project: root.clone(),
        token: tx.token,
    };
    let a = operate(&p, &mut state, true, |p, o| {
        engine::edit::edit_abort(p, o, abort)
    })
    .unwrap();
    assert_eq!(a.restored, vec!["a.txt".to_string()]);
    assert_eq!(a.skipped.len(), 1, "{:?}", a.skipped);
    assert_eq!(a.skipped[0].reason_code, SkipReason::ParentNotFolder);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "saved\n"
    );
    assert!(!outside.join("b.txt").exists(), "written through a symlink");
}

/// The index, refreshed with a dirty set after edits, equals a fresh full scan.
#[test]
fn index_refresh_equals_a_full_scan() {
    let env = TestEnv::without_daemon("");
    let root = env.proj();
    for i in 0..50 {
        write(&root, &format!("d{}/f{i}.txt", i % 5), &format!("{i}\n"));
    }
    write(&root, ".gitignore", "*.log\n");
    write(&root, "x.log", "ignored\n");
    let store = Store::open_or_init(&env.home.join("store"), &root).unwrap();
    let filter = Filter::new(&root, &Config::default().exclusions, vec![]).unwrap();
    let options = SnapshotOptions {
        write: true,
        max_file_size: 1 << 20,
    };
    let mut index = FileIndex::with_stat_cache(StatCache::default(), Arc::default());
    let scan_tree = |store: &Store| {
        let scan = Snapshot::take(store, &filter, options).unwrap();
        Snapshot::tree_id(&scan.files).unwrap()
    };
    index
        .refresh(&store, &filter, Vec::new(), options, &mut |_| {})
        .unwrap();
    let tree = index
        .write_tree(&store, ckpt::index::Trees::LookedUp)
        .unwrap();
    store.flush_objects().unwrap();
    assert_eq!(tree, scan_tree(&store));
    // Edit, delete, add, and un-ignore; tell the index only which paths changed.
    write(&root, "d1/f1.txt", "changed\n");
    std::fs::remove_file(root.join("d2/f2.txt")).unwrap();
    write(&root, "new/n.txt", "new\n");
    write(&root, ".gitignore", "");
    let dirty = ["d1/f1.txt", "d2/f2.txt", "new", ".gitignore", "x.log"].map(Into::into);
    index
        .refresh(&store, &filter, dirty, options, &mut |_| {})
        .unwrap();
    let tree = index
        .write_tree(&store, ckpt::index::Trees::LookedUp)
        .unwrap();
    store.flush_objects().unwrap();
    assert_eq!(tree, scan_tree(&store));
    let listed = git_in(
        store.dir(),
        &["ls-tree", "-r", "--name-only", &tree.to_string()],
    );
    assert!(
        listed.contains("x.log") && listed.contains("new/n.txt") && !listed.contains("d2/f2.txt")
    );
}
