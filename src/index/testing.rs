//! A real store and project in a temporary folder, for the index's tests.

use crate::filter::Filter;
use crate::index::FileIndex;
use crate::store::{SnapshotOptions, Store};

pub const WRITE: SnapshotOptions = SnapshotOptions {
    write: true,
    max_file_size: 1 << 20,
};

/// A project (`project/`, with `dirs` made and `files` written) and its store (`store/`).
pub fn project(dirs: &[&str], files: &[(&str, &str)]) -> (tempfile::TempDir, Store, Filter) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    for d in dirs {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for (rel, content) in files {
        std::fs::write(root.join(rel), content).unwrap();
    }
    let store = Store::open_or_init(&dir.path().join("store"), &root).unwrap();
    let filter = Filter::new(&root, &Default::default(), Vec::new()).unwrap();
    (dir, store, filter)
}

/// A real store and project in a temporary folder, with every file read once.
pub fn read_once(files: &[(&str, &str)]) -> (tempfile::TempDir, Store, Filter, FileIndex) {
    let (dir, store, filter) = project(&["sub"], files);
    let mut index = FileIndex::default();
    index
        .refresh(&store, &filter, Vec::new(), WRITE, &mut |_| {})
        .unwrap();
    store.flush_objects().unwrap();
    (dir, store, filter, index)
}
