//! The index itself ([`FileIndex`]): every file's entry in the folder tree, what was skipped,
//! what is racy, the rules in force, the tree last written; and the stat cache it starts from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;

use super::baseline::Baseline;
use super::name::Name;
use super::node::{has_files, node_at, node_in, visit_files, DirNode, IndexEntry};
use super::progress::Progress;
use crate::filter::{split_parent, RulesCache};
use crate::fs::{now_ns, Stat};
use crate::model::{SkipReason, SkippedFile};
use crate::store::checkpoint::KnownChanges;

/// An mtime this close to (or after) the moment of reading may hide a later write with the same
/// timestamp; such entries are re-read at the next refresh. Generous, because file timestamps
/// come from a coarse kernel clock.
pub(super) const RACY_WINDOW_NS: i64 = 50_000_000;

/// A stat cache loaded from disk (see [`load_stat_cache`]), arranged as the index arranges
/// files: one map per folder, so that a verify takes each folder's entries as it reaches it
/// instead of looking every path up in one map of every file.
#[derive(Debug, Default)]
pub struct StatCache {
    pub(super) root: DirNode,
    pub(super) len: usize,
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
    pub(super) fn add_folder(&mut self, parent: &BStr, files: Vec<(Name, IndexEntry)>) {
        if let Some(dir) = node_at(&mut self.root, parent, true) {
            self.len += files.len();
            dir.add_files(files);
        }
    }
}

#[derive(Debug, Default)]
pub struct FileIndex {
    pub(super) root: DirNode,
    pub(super) skipped: BTreeMap<BString, (SkipReason, String)>,
    pub(super) racy: BTreeSet<BString>,
    pub(super) repos: BTreeSet<BString>,
    pub(super) rules: RulesCache,
    /// Stats of rule files outside the project's folders, as last seen.
    pub(super) rule_stats: Vec<(PathBuf, Option<Stat>)>,
    /// Entries loaded from disk, used as a stat cache by the next full verify (each folder's
    /// taken out as the verify reaches it), then dropped.
    pub(super) stale: DirNode,
    /// The stat cache while it is still being read, on a thread of its own: the first verify
    /// lists the project meanwhile and waits for it only when it starts matching.
    pub(super) stale_loading: Option<std::thread::JoinHandle<StatCache>>,
    /// True once a full verify has run: from then on dirty paths suffice.
    pub(super) verified: bool,
    /// The root tree last written: every blob and tree id the index holds is reachable from it.
    pub(super) last_root: Option<ObjectId>,
    /// What the changed folders held when `last_root` was written.
    pub(super) baseline: Baseline,
    /// How the tree last written differs from the one written before it, when the index knew.
    pub(super) last_changes: Option<KnownChanges>,
    pub(super) progress: Arc<Progress>,
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
    pub(super) fn stale_is_ready(&self) -> bool {
        self.stale_loading.as_ref().is_none_or(|h| h.is_finished())
    }

    pub(super) fn stale_ready(&mut self) {
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

    /// Whether the index holds `path`: a file there, or a folder with a file below it.
    pub fn holds(&self, path: &BStr) -> bool {
        self.get(path).is_some() || self.node(path).is_some_and(has_files)
    }

    /// Calls `f` with every file and its entry (folder by folder), collecting nothing.
    pub fn for_each_file(&self, mut f: impl FnMut(&BStr, &IndexEntry)) {
        visit_files(&self.root, &mut BString::default(), &mut f);
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

/// The ref that keeps the tree the saved stat cache describes reachable (no gc, ckpt's or
/// git's, removes an object the cache names).
pub const INDEX_REF: &str = "refs/ckpt/index";

/// Where the stat cache of a store lives.
pub fn stat_cache_path(store_dir: &Path) -> PathBuf {
    store_dir.join("ckpt-index")
}

#[cfg(test)]
mod tests {
    use gix::bstr::ByteSlice;

    use crate::index::testing::read_once;

    #[test]
    fn holds_a_file_and_a_folder_with_files_below_not_a_name_that_only_starts_alike() {
        let (_dir, _store, _filter, index) = read_once(&[("sub/b.txt", "b"), ("a.txt", "a")]);
        for (path, held) in [
            ("a.txt", true),
            ("sub", true),
            ("sub/b.txt", true),
            ("su", false),
            ("sub/b", false),
            ("nothing", false),
        ] {
            assert_eq!(index.holds(path.as_bytes().as_bstr()), held, "{path}");
        }
    }
}
