//! The file-state index of one project: path -> (stat, mode, blob id), arranged as a folder
//! tree with a cached git tree id per folder.
//!
//! A checkpoint refreshes only what may have changed (the watcher's dirty paths, or everything
//! in a stat-only verify), re-reads only files whose stat differs, rebuilds only the trees above
//! them, and writes only new objects. It is an optimisation and never a source of truth: every
//! refresh decision is the same one a fresh full walk makes (`Filter::walk_from`), and an entry
//! whose mtime is too close to the moment it was read (git's racy-timestamp rule) is re-read at
//! the next refresh. The persisted form is only a stat cache: lost or corrupt, the next verify
//! re-hashes.

mod baseline;
mod name;
mod persist;
mod racy;
mod refresh;
mod tree;
mod verify;

use baseline::Baseline;
use name::Name;

pub use tree::Trees;
use tree::{node_at, node_in};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::{EntryKind, EntryRef};
use gix::ObjectId;

use crate::filter::{join_rel, rel_to_abs, split_parent, Filter, RulesCache, WalkEntry};
use crate::model::{SkipReason, SkippedFile};
use crate::store::checkpoint::KnownChanges;
use crate::store::snapshot::{capture, Captured, SnapshotOptions};
use crate::store::tree::within;
use crate::store::tree::FileState;
use crate::store::{Store, StoreError};

pub use persist::{load_stat_cache, save_stat_cache};

/// An mtime this close to (or after) the moment of reading may hide a later write with the same
/// timestamp; such entries are re-read at the next refresh. Generous, because file timestamps
/// come from a coarse kernel clock.
const RACY_WINDOW_NS: i64 = 50_000_000;

use crate::fs::now_ns;
pub use crate::fs::Stat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub state: FileState,
    pub stat: Stat,
}

#[derive(Debug, Default)]
struct DirNode {
    files: BTreeMap<Name, IndexEntry>,
    dirs: BTreeMap<BString, DirNode>,
    /// The git tree of this folder; None when unknown (something below changed).
    tree: Option<Option<ObjectId>>,
    /// The tree this folder had at the last write, until it is written again: the store holds
    /// it, and a tree that differs from it is new (see `tree::write_node`).
    written: Option<ObjectId>,
}

impl DirNode {
    /// Drops the cached tree id (something below changed), keeping the tree as last written.
    fn forget_tree(&mut self) {
        if let Some(Some(id)) = self.tree.take() {
            self.written = Some(id);
        }
    }

    /// Adds many files to this folder at once (a later entry for the same name wins). A
    /// `BTreeMap` filled one insert at a time in key order leaves its nodes half full (~1.8
    /// times the bytes of its entries); built from a sorted list it fills them, so a folder
    /// that gains many files at once is rebuilt whole.
    fn add_files(&mut self, files: Vec<(Name, IndexEntry)>) {
        if !self.dirs.is_empty() {
            for (name, _) in &files {
                self.dirs.remove(name.as_bytes().as_bstr());
            }
        }
        if files.len() < 8 || files.len() < self.files.len() / 4 {
            self.files.extend(files);
        } else {
            let known = std::mem::take(&mut self.files);
            self.files = known.into_iter().chain(files).collect();
        }
    }
}

/// What a refresh did, for logs and status.
#[derive(Debug, Default)]
pub struct RefreshOutcome {
    /// Files read and hashed (the rest were unchanged by stat).
    pub hashed: usize,
    /// Whether the whole project was verified.
    pub full: bool,
}

/// Sees every folder a refresh lists, before it is listed (a few at a time: a folder's
/// subfolders together).
pub type OnDir<'a> = &'a mut dyn FnMut(&[&Path]);

/// How far a long refresh has come; read by `status` while the project is busy.
#[derive(Debug, Default)]
pub struct Progress {
    /// 0 idle, 1 scanning folders, 2 reading files.
    phase: AtomicU8,
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    fn start(&self, phase: u8, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.phase.store(phase, Ordering::Relaxed);
    }

    fn step(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// (phase, done, total), or None when idle.
    pub fn get(&self) -> Option<(&'static str, u64, u64)> {
        let phase = match self.phase.load(Ordering::Relaxed) {
            1 => "scanning",
            2 => "reading",
            _ => return None,
        };
        Some((
            phase,
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        ))
    }
}

/// A stat cache loaded from disk (see [`load_stat_cache`]), arranged as the index arranges
/// files: one map per folder, so that a verify takes each folder's entries as it reaches it
/// instead of looking every path up in one map of every file.
#[derive(Debug, Default)]
pub struct StatCache {
    root: DirNode,
    len: usize,
}

impl StatCache {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, path: &BStr) -> Option<&IndexEntry> {
        let (parent, name) = split_parent(path);
        node_in(&self.root, parent)?.files.get(name)
    }

    /// Adds the files of one folder (`parent`, relative to the project).
    fn add_folder(&mut self, parent: &BStr, files: Vec<(Name, IndexEntry)>) {
        if let Some(dir) = node_at(&mut self.root, parent, true) {
            self.len += files.len();
            dir.add_files(files);
        }
    }
}

#[derive(Debug, Default)]
pub struct FileIndex {
    root: DirNode,
    skipped: BTreeMap<BString, (SkipReason, String)>,
    racy: BTreeSet<BString>,
    repos: BTreeSet<BString>,
    rules: RulesCache,
    /// Stats of rule files outside the project's folders, as last seen.
    rule_stats: Vec<(PathBuf, Option<Stat>)>,
    /// Entries loaded from disk, used as a stat cache by the next full verify (each folder's
    /// taken out as the verify reaches it), then dropped.
    stale: DirNode,
    /// The stat cache while it is still being read, on a thread of its own: the first verify
    /// lists the project meanwhile and waits for it only when it starts matching.
    stale_loading: Option<std::thread::JoinHandle<StatCache>>,
    /// True once a full verify has run: from then on dirty paths suffice.
    verified: bool,
    /// The root tree last written: every blob and tree id the index holds is reachable from it.
    last_root: Option<ObjectId>,
    /// What the changed folders held when `last_root` was written.
    baseline: Baseline,
    /// How the tree last written differs from the one written before it, when the index knew.
    last_changes: Option<KnownChanges>,
    progress: Arc<Progress>,
}

impl FileIndex {
    /// An index that will verify everything at its first refresh, using `stale` entries (from
    /// a previous run) to avoid re-hashing files whose stat still matches.
    pub fn with_stat_cache(stale: StatCache, progress: Arc<Progress>) -> FileIndex {
        FileIndex {
            stale: stale.root,
            progress,
            ..FileIndex::default()
        }
    }

    /// Like [`FileIndex::with_stat_cache`], with the cache still being read by `loading`.
    pub fn with_stat_cache_loading(
        loading: std::thread::JoinHandle<StatCache>,
        progress: Arc<Progress>,
    ) -> FileIndex {
        FileIndex {
            stale_loading: Some(loading),
            progress,
            ..FileIndex::default()
        }
    }

    /// The stat cache, once read (an empty one if its reading thread failed: every file is
    /// then read again, which is slower and as exact).
    /// Whether the stat cache is read (or none is being read).
    fn stale_is_ready(&self) -> bool {
        self.stale_loading.as_ref().is_none_or(|h| h.is_finished())
    }

    fn stale_ready(&mut self) {
        if let Some(loading) = self.stale_loading.take() {
            self.stale = loading.join().map(|c| c.root).unwrap_or_default();
        }
    }

    /// How many files `tree` holds, when it is the tree the index describes as it is now
    /// (written, and nothing changed since): each file is one entry of it.
    pub fn files_in(&self, tree: ObjectId) -> Option<u64> {
        fn count(node: &DirNode) -> u64 {
            node.files.len() as u64 + node.dirs.values().map(count).sum::<u64>()
        }
        (self.root.tree == Some(Some(tree))).then(|| count(&self.root))
    }

    /// How many folders the index holds (the root included).
    pub fn folder_count(&self) -> usize {
        fn count(node: &DirNode) -> usize {
            1 + node.dirs.values().map(count).sum::<usize>()
        }
        count(&self.root)
    }

    /// The progress counters `status` reads (shared with a replacement index).
    pub fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    pub fn is_verified(&self) -> bool {
        self.verified
    }

    /// Forces a full verify at the next refresh (watcher overflow or error).
    pub fn invalidate_all(&mut self) {
        self.verified = false;
        self.rules.clear();
    }

    /// Marks files the daemon itself just wrote as racy, as if it had just read them: a write
    /// by someone else within the same timestamp tick would leave their stat as it is.
    pub fn mark_written(&mut self, paths: &[BString]) {
        let now = now_ns();
        for rel in paths {
            let recent = self
                .get(rel.as_bstr())
                .is_some_and(|e| e.stat.mtime_ns.saturating_add(RACY_WINDOW_NS) >= now);
            if recent {
                self.racy.insert(rel.clone());
            }
        }
    }

    /// Whether `path`'s entry was read within a timestamp tick of a write to it: its stat
    /// cannot tell a later write in the same tick, only its content can.
    pub fn is_racy(&self, path: &BStr) -> bool {
        self.racy.contains(path)
    }

    /// Records that `path` now holds `entry` (a restore just wrote it).
    pub fn insert(&mut self, path: &BStr, entry: IndexEntry) {
        let (parent, name) = split_parent(path);
        self.invalidate_trees(parent);
        if let Some(dir) = node_at(&mut self.root, parent, true) {
            if let Some(gone) = dir.dirs.remove(name) {
                self.baseline.record_subtree(&path.to_owned(), &gone);
            }
            dir.files.insert(Name::from(name), entry);
        }
    }

    /// Forgets every entry whose object is in `lost` (the store cannot give it back) and asks
    /// for a full verify: those files are read again at the next refresh.
    /// Entries whose object the store does not have are forgotten too (cheap existence
    /// checks, not re-reads): below a lost commit, fsck cannot even name what was lost.
    pub fn forget_objects(
        &mut self,
        lost: &std::collections::HashSet<ObjectId>,
        repo: &gix::Repository,
    ) {
        // A miss makes the store list its packs once; from then on lookups need no refresh.
        let _ = repo.has_object(ObjectId::null(gix::hash::Kind::Sha1));
        let gone = |id: &ObjectId| lost.contains(id) || !repo.objects.exists_without_refresh(id);
        fn visit(node: &mut DirNode, gone: &dyn Fn(&ObjectId) -> bool) {
            let before = node.files.len();
            node.files.retain(|_, e| !gone(&e.state.id));
            // A cached tree may be lost while every blob below it survived (they share packs).
            let mut changed =
                node.files.len() != before || node.tree.flatten().is_some_and(|t| gone(&t));
            for child in node.dirs.values_mut() {
                visit(child, gone);
                changed |= child.tree.is_none();
            }
            if changed {
                node.tree = None;
                node.written = None;
            }
        }
        visit(&mut self.root, &gone);
        self.stale_ready();
        visit(&mut self.stale, &gone);
        self.last_root = None;
        self.baseline.lose();
        self.invalidate_all();
    }

    /// Forgets `path`, a file or a whole folder.
    pub fn remove(&mut self, path: &BStr) {
        self.skipped.remove(path);
        let _ = self.detach(path);
        let (parent, name) = split_parent(path);
        if self.get(path).is_some() {
            // Invalidated first: the folder is recorded as it was (see `Baseline`).
            self.invalidate_trees(parent);
            if let Some(dir) = node_at(&mut self.root, parent, false) {
                dir.files.remove(name);
            }
        }
    }

    pub fn get(&self, path: &BStr) -> Option<&IndexEntry> {
        let (parent, name) = split_parent(path);
        self.node(parent)?.files.get(name)
    }

    /// Calls `f` with every file and its entry (folder by folder), collecting nothing.
    pub fn for_each_file(&self, mut f: impl FnMut(&BStr, &IndexEntry)) {
        tree::visit_files(&self.root, &mut BString::default(), &mut f);
    }

    /// Every file, in path order.
    pub fn files(&self) -> BTreeMap<BString, IndexEntry> {
        let mut out = BTreeMap::new();
        self.for_each_file(|path, e| {
            out.insert(path.to_owned(), *e);
        });
        out
    }

    pub fn skipped(&self) -> Vec<SkippedFile> {
        self.skipped
            .iter()
            .map(|(p, (code, why))| SkippedFile::new(p, *code, why.clone()))
            .collect()
    }

    /// The root tree last written by [`FileIndex::write_tree`].
    pub fn last_root(&self) -> Option<ObjectId> {
        self.last_root
    }

    /// How the tree last written by [`FileIndex::write_tree`] differs from the one written
    /// before it (its counts of added, modified and deleted files), when the index knew.
    pub fn last_changes(&self) -> Option<KnownChanges> {
        self.last_changes
    }
}

/// Removes what a killed ckptd left behind (temporary files of a restore, sync cookies of
/// earlier builds).
fn remove_litter(root: &Path, litter: &[BString]) {
    if litter.is_empty() {
        return;
    }
    let Ok(root_fd) = crate::fs::open_dir(root) else {
        return;
    };
    for rel in litter {
        match crate::fs::remove_beneath(std::os::fd::AsFd::as_fd(&root_fd), rel) {
            Ok(()) => tracing::info!(path = %rel, "removed a temporary file a stopped ckptd left"),
            Err(e) => {
                tracing::warn!(path = %rel, error = %e, "cannot remove a temporary file a stopped ckptd left")
            }
        }
    }
}

/// `path` relative to `base` (a folder containing it).
fn relative_to<'a>(base: &BString, path: &'a BStr) -> &'a BStr {
    if base.is_empty() {
        path
    } else if path.len() == base.len() {
        b"".as_bstr()
    } else {
        path[base.len() + 1..].as_bstr()
    }
}

/// The ref that keeps the tree the saved stat cache describes reachable (no gc, ckpt's or
/// git's, removes an object the cache names).
pub const INDEX_REF: &str = "refs/ckpt/index";

/// Where the stat cache of a store lives.
pub fn stat_cache_path(store_dir: &Path) -> PathBuf {
    store_dir.join("ckpt-index")
}

/// A real store and project in a temporary folder, for the index's tests.
#[cfg(test)]
pub(super) mod testing {
    use super::*;

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
}
