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

mod persist;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::{Entry, EntryKind};
use gix::ObjectId;

use crate::filter::{join_rel, rel_to_abs, split_parent, Filter, RulesCache, WalkEntry};
use crate::model::{SkipReason, SkippedFile};
use crate::store::diff::within;
use crate::store::pack::PackWriter;
use crate::store::snapshot::{capture, Captured, FileState, SnapshotOptions};
use crate::store::{Store, StoreError};

pub use persist::{load_stat_cache, save_stat_cache};

/// An mtime this close to (or after) the moment of reading may hide a later write with the same
/// timestamp; such entries are re-read at the next refresh. Generous, because file timestamps
/// come from a coarse kernel clock.
const RACY_WINDOW_NS: i128 = 50_000_000;
/// Batches of at least this many files are written as one pack instead of loose objects.
const PACK_THRESHOLD: usize = 256;

pub use crate::filter::Stat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub state: FileState,
    pub stat: Stat,
}

#[derive(Debug, Default)]
struct DirNode {
    files: BTreeMap<BString, IndexEntry>,
    dirs: BTreeMap<BString, DirNode>,
    /// The git tree of this folder; None when unknown (something below changed).
    tree: Option<Option<ObjectId>>,
}

/// What a refresh did, for logs and status.
#[derive(Debug, Default)]
pub struct RefreshOutcome {
    /// Files read and hashed (the rest were unchanged by stat).
    pub hashed: usize,
    /// Whether the whole project was verified.
    pub full: bool,
}

/// Sees every folder a refresh lists, before it is listed.
pub type OnDir<'a> = &'a mut dyn FnMut(&Path);

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

#[derive(Debug, Default)]
pub struct FileIndex {
    root: DirNode,
    skipped: BTreeMap<BString, (SkipReason, String)>,
    racy: BTreeSet<BString>,
    repos: BTreeSet<BString>,
    rules: RulesCache,
    /// Stats of rule files outside the project's folders, as last seen.
    rule_stats: Vec<(PathBuf, Option<Stat>)>,
    /// Entries loaded from disk, used as a stat cache by the next full verify, then dropped.
    stale: HashMap<BString, IndexEntry>,
    /// True once a full verify has run: from then on dirty paths suffice.
    verified: bool,
    /// The root tree last written: every blob and tree id the index holds is reachable from it.
    last_root: Option<ObjectId>,
    progress: Arc<Progress>,
}

impl FileIndex {
    /// An index that will verify everything at its first refresh, using `stale` entries (from
    /// a previous run) to avoid re-hashing files whose stat still matches.
    pub fn with_stat_cache(
        stale: HashMap<BString, IndexEntry>,
        progress: Arc<Progress>,
    ) -> FileIndex {
        FileIndex {
            stale,
            progress,
            ..FileIndex::default()
        }
    }

    pub fn is_verified(&self) -> bool {
        self.verified
    }

    /// Forces a full verify at the next refresh (watcher overflow or error).
    pub fn invalidate_all(&mut self) {
        self.verified = false;
        self.rules.clear();
    }

    /// Verifies the whole project by stat (re-hashing only what differs).
    pub fn verify_all(
        &mut self,
        store: &Store,
        filter: &Filter,
        options: SnapshotOptions,
        on_dir: OnDir<'_>,
    ) -> Result<RefreshOutcome, StoreError> {
        self.rules.clear();
        let mut outcome = RefreshOutcome {
            full: true,
            ..RefreshOutcome::default()
        };
        self.verify_subtree(
            store,
            filter,
            BString::default(),
            options,
            on_dir,
            &mut outcome,
        )?;
        self.rule_stats = self.current_rule_stats(filter);
        self.stale = HashMap::new();
        self.verified = true;
        Ok(outcome)
    }

    /// Refreshes `dirty` paths (relative to the root), plus racy entries; falls back to a full
    /// verify when the index was never verified or a rule file outside the project changed.
    pub fn refresh(
        &mut self,
        store: &Store,
        filter: &Filter,
        dirty: impl IntoIterator<Item = BString>,
        options: SnapshotOptions,
        on_dir: OnDir<'_>,
    ) -> Result<RefreshOutcome, StoreError> {
        let racy = self.racy.clone();
        let result = self.refresh_inner(store, filter, dirty, options, on_dir);
        if result.is_err() {
            // Entries read in the racy window must still be read again.
            self.racy.extend(racy);
        }
        self.progress.start(0, 0);
        result
    }

    fn refresh_inner(
        &mut self,
        store: &Store,
        filter: &Filter,
        dirty: impl IntoIterator<Item = BString>,
        options: SnapshotOptions,
        on_dir: OnDir<'_>,
    ) -> Result<RefreshOutcome, StoreError> {
        if !self.verified || self.current_rule_stats(filter) != self.rule_stats {
            return self.verify_all(store, filter, options, on_dir);
        }
        let racy = std::mem::take(&mut self.racy);
        let mut paths: BTreeSet<BString> = dirty.into_iter().collect();
        paths.extend(racy.iter().cloned());
        // Anything that changed may have changed type (a folder replaced by a symlink): nothing
        // cached about it may be trusted, or a file below could be read through a symlink.
        for p in &paths {
            self.rules.invalidate(p.as_bstr());
        }
        // A changed ignore file re-evaluates its whole folder.
        let mut subtrees: BTreeSet<BString> = BTreeSet::new();
        for p in &paths {
            let (parent, name) = split_parent(p.as_bstr());
            if name == b".gitignore" || name == b".git" {
                subtrees.insert(parent.to_owned());
            }
        }
        let mut outcome = RefreshOutcome::default();
        let mut done: Vec<BString> = Vec::new();
        // `within` treats an empty list as "everything"; here an empty list covers nothing.
        let covered = |p: &BString, done: &[BString]| !done.is_empty() && within(p, done);
        for dir in &subtrees {
            if covered(dir, &done) {
                continue;
            }
            self.rules.invalidate(dir.as_bstr());
            self.verify_subtree(store, filter, dir.clone(), options, on_dir, &mut outcome)?;
            done.push(dir.clone());
        }
        let mut files = Vec::new();
        for path in paths {
            if covered(&path, &done) {
                continue;
            }
            let abs = rel_to_abs(filter.root(), &path);
            match std::fs::symlink_metadata(&abs) {
                Ok(meta) if meta.is_dir() => {
                    self.verify_subtree(
                        store,
                        filter,
                        path.clone(),
                        options,
                        on_dir,
                        &mut outcome,
                    )?;
                    done.push(path);
                }
                Ok(meta) => {
                    let (parent, _) = split_parent(path.as_bstr());
                    if !path.is_empty()
                        && self.node(parent).is_none()
                        && filter.rules_for_dir(&mut self.rules, parent).is_some()
                    {
                        // A folder the index has not seen yet (its own event may come later).
                        let parent = parent.to_owned();
                        self.verify_subtree(
                            store,
                            filter,
                            parent.clone(),
                            options,
                            on_dir,
                            &mut outcome,
                        )?;
                        done.push(parent);
                    } else if filter.includes_file(&mut self.rules, path.as_bstr()) {
                        let unchanged = self
                            .get(path.as_bstr())
                            .is_some_and(|e| e.stat == Stat::of(&meta));
                        if !unchanged || racy.contains(&path) {
                            files.push(WalkEntry {
                                rel: path,
                                file_type: meta.file_type(),
                                stat: Stat::of(&meta),
                            });
                        }
                    } else {
                        self.remove(path.as_bstr());
                    }
                }
                Err(_) => self.remove(path.as_bstr()),
            }
        }
        let captured = self.capture_changed(store, filter.root(), files, options)?;
        outcome.hashed += captured.len();
        for c in captured {
            self.apply_capture(c);
        }
        Ok(outcome)
    }

    fn current_rule_stats(&self, filter: &Filter) -> Vec<(PathBuf, Option<Stat>)> {
        let repos: Vec<BString> = self.repos.iter().cloned().collect();
        filter
            .rule_files(&repos)
            .into_iter()
            .map(|p| {
                let stat = std::fs::metadata(&p).ok().map(|m| Stat::of(&m));
                (p, stat)
            })
            .collect()
    }

    /// Re-walks the folder `start` under the current rules and replaces its part of the index.
    fn verify_subtree(
        &mut self,
        store: &Store,
        filter: &Filter,
        start: BString,
        options: SnapshotOptions,
        on_dir: OnDir<'_>,
        outcome: &mut RefreshOutcome,
    ) -> Result<(), StoreError> {
        let old = self.detach(start.as_bstr());
        let mut old_files = HashMap::new();
        if let Some(node) = &old {
            flatten(node, &start, &mut old_files, &mut BTreeSet::new());
        }
        let here = std::slice::from_ref(&start);
        let racy: BTreeSet<BString> = self
            .racy
            .iter()
            .filter(|k| within(k, here))
            .cloned()
            .collect();
        self.skipped.retain(|k, _| !within(k, here));
        self.racy.retain(|k| !within(k, here));
        self.repos.retain(|k| !within(k, here));
        let Some(rules) = filter.rules_for_dir(&mut self.rules, start.as_bstr()) else {
            return Ok(());
        };
        self.progress.start(1, 0);
        let progress = self.progress.clone();
        let mut counting = |dir: &Path| {
            progress.step();
            on_dir(dir)
        };
        let walk = filter.walk_from(start.clone(), rules, &mut counting);
        let mut to_read = Vec::new();
        let mut node = DirNode::default();
        for dir in &walk.dirs {
            if dir != &start {
                node_at(&mut node, relative_to(&start, dir.as_bstr()), true);
            }
        }
        for file in walk.files {
            let stat = file.stat;
            let known = old_files
                .get(&file.rel)
                .or_else(|| self.stale.get(&file.rel));
            match known {
                Some(e) if e.stat == stat && !racy.contains(&file.rel) => {
                    let (parent, name) = split_parent(file.rel.as_bstr());
                    let dir =
                        node_at(&mut node, relative_to(&start, parent), true).expect("created");
                    dir.files.insert(name.to_owned(), *e);
                }
                _ => to_read.push(file),
            }
        }
        for skip in walk.skips {
            self.note_skip(skip.rel, (SkipReason::Unreadable, skip.reason));
        }
        remove_litter(filter.root(), &walk.litter);
        self.repos.extend(walk.repos);
        self.attach(start.as_bstr(), node);
        let captured = self.capture_changed(store, filter.root(), to_read, options)?;
        outcome.hashed += captured.len();
        for c in captured {
            self.apply_capture(c);
        }
        Ok(())
    }

    /// Reads and stores the given files in parallel; a large batch goes into one new pack.
    fn capture_changed(
        &self,
        store: &Store,
        root: &Path,
        files: Vec<WalkEntry>,
        options: SnapshotOptions,
    ) -> Result<Vec<(Captured, i128)>, StoreError> {
        if files.is_empty() {
            // The usual case of a checkpoint with nothing changed: no folder to open.
            return Ok(Vec::new());
        }
        let read_at = now_ns();
        self.progress.start(2, files.len() as u64);
        let progress = &self.progress;
        // Opened before the pack, so that failing to open it leaves no temporary pack behind.
        let root_fd = crate::safe_io::open_dir(root).map_err(|source| StoreError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let pack = if options.write && files.len() >= PACK_THRESHOLD {
            Some(PackWriter::new(store.dir())?)
        } else {
            None
        };
        let threads = if files.len() < 64 {
            1
        } else {
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(8)
        };
        let chunk = files.len().div_ceil(threads).max(1);
        let captured: Vec<Result<Vec<(Captured, i128)>, StoreError>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = files
                    .chunks(chunk)
                    .map(|part| {
                        let repo = store.thread_safe();
                        let pack = pack.as_ref();
                        let root_fd = std::os::fd::AsFd::as_fd(&root_fd);
                        scope.spawn(move || {
                            let repo = repo.to_thread_local();
                            part.iter()
                                .map(|e| {
                                    let c = capture(&repo, root_fd, e, options, pack)?;
                                    progress.step();
                                    Ok((c, read_at))
                                })
                                .collect::<Result<Vec<_>, StoreError>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("capture worker panicked"))
                    .collect()
            });
        // A store error fails the whole batch: nothing of it reaches the index.
        let captured: Vec<(Captured, i128)> =
            match captured.into_iter().collect::<Result<Vec<_>, _>>() {
                Ok(parts) => parts.into_iter().flatten().collect(),
                Err(e) => {
                    if let Some(pack) = pack {
                        pack.discard();
                    }
                    return Err(e);
                }
            };
        if let Some(pack) = pack {
            let first = captured.iter().find_map(|(c, _)| match c {
                Captured::File { state, .. } => Some(state.id),
                _ => None,
            });
            let written = pack.finish()?;
            if written > 0 {
                // Makes the store load the new pack now, so later existence checks see it.
                if let Some(id) = first {
                    let _ = store.repo().has_object(id);
                }
                tracing::info!(objects = written, "wrote a pack");
            }
        }
        Ok(captured)
    }

    fn apply_capture(&mut self, (captured, read_at): (Captured, i128)) {
        match captured {
            Captured::File { rel, state, stat } => {
                if stat.mtime_ns + RACY_WINDOW_NS >= read_at {
                    self.racy.insert(rel.clone());
                }
                self.skipped.remove(&rel);
                self.insert(rel.as_bstr(), IndexEntry { state, stat });
            }
            Captured::Skipped(rel, skip) => {
                self.remove(rel.as_bstr());
                self.note_skip(rel, (skip.reason_code, skip.reason));
            }
            Captured::Vanished(rel) => self.remove(rel.as_bstr()),
        }
    }

    /// Remembers that `rel` exists but cannot be captured; logged when it starts.
    fn note_skip(&mut self, rel: BString, reason: (SkipReason, String)) {
        if self.skipped.get(&rel) != Some(&reason) {
            tracing::warn!(path = %rel, reason = %reason.1, "skipped while taking a snapshot");
        }
        self.skipped.insert(rel, reason);
    }

    /// Records that `path` now holds `entry` (a restore just wrote it).
    pub fn insert(&mut self, path: &BStr, entry: IndexEntry) {
        let (parent, name) = split_parent(path);
        self.invalidate_trees(parent);
        if let Some(dir) = node_at(&mut self.root, parent, true) {
            dir.dirs.remove(name);
            dir.files.insert(name.to_owned(), entry);
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
            let mut changed = node.files.len() != before;
            for child in node.dirs.values_mut() {
                visit(child, gone);
                changed |= child.tree.is_none();
            }
            if changed {
                node.tree = None;
            }
        }
        visit(&mut self.root, &gone);
        self.stale.retain(|_, e| !gone(&e.state.id));
        self.last_root = None;
        self.invalidate_all();
    }

    /// Forgets `path`, a file or a whole folder.
    pub fn remove(&mut self, path: &BStr) {
        self.skipped.remove(path);
        let _ = self.detach(path);
        let (parent, name) = split_parent(path);
        if let Some(dir) = node_at(&mut self.root, parent, false) {
            if dir.files.remove(name).is_some() {
                self.invalidate_trees(parent);
            }
        }
    }

    pub fn get(&self, path: &BStr) -> Option<&IndexEntry> {
        let (parent, name) = split_parent(path);
        self.node(parent)?.files.get(name)
    }

    /// Every file, in path order.
    pub fn files(&self) -> BTreeMap<BString, IndexEntry> {
        let mut out = HashMap::new();
        let mut dirs = BTreeSet::new();
        flatten(&self.root, &BString::default(), &mut out, &mut dirs);
        out.into_iter().collect()
    }

    pub fn skipped(&self) -> Vec<SkippedFile> {
        self.skipped
            .iter()
            .map(|(p, (code, why))| SkippedFile::new(p, *code, why.clone()))
            .collect()
    }

    /// Writes the trees that changed and returns the root tree id.
    pub fn write_tree(&mut self, repo: &gix::Repository) -> Result<ObjectId, StoreError> {
        let id = match write_node(repo, &mut self.root)? {
            Some(id) => id,
            None => repo
                .write_object(gix::objs::Tree::empty())
                .map(|id| id.detach())
                .map_err(|e| StoreError::git("writing a tree", e))?,
        };
        self.last_root = Some(id);
        Ok(id)
    }

    /// The root tree last written by [`FileIndex::write_tree`].
    pub fn last_root(&self) -> Option<ObjectId> {
        self.last_root
    }

    fn node(&self, path: &BStr) -> Option<&DirNode> {
        let mut node = &self.root;
        if !path.is_empty() {
            for comp in path.split(|b| *b == b'/') {
                node = node.dirs.get(comp.as_bstr())?;
            }
        }
        Some(node)
    }

    fn invalidate_trees(&mut self, dir: &BStr) {
        let mut node = &mut self.root;
        node.tree = None;
        if dir.is_empty() {
            return;
        }
        for comp in dir.split(|b| *b == b'/') {
            match node.dirs.get_mut(comp.as_bstr()) {
                Some(next) => {
                    next.tree = None;
                    node = next;
                }
                None => return,
            }
        }
    }

    /// Takes the folder at `path` out of the index (the root: everything).
    fn detach(&mut self, path: &BStr) -> Option<DirNode> {
        if path.is_empty() {
            return Some(std::mem::take(&mut self.root));
        }
        let (parent, name) = split_parent(path);
        let taken = node_at(&mut self.root, parent, false)?.dirs.remove(name);
        if taken.is_some() {
            self.invalidate_trees(parent);
        }
        taken
    }

    fn attach(&mut self, path: &BStr, mut node: DirNode) {
        node.tree = None;
        if path.is_empty() {
            self.root = node;
            return;
        }
        let (parent, name) = split_parent(path);
        self.invalidate_trees(parent);
        if let Some(dir) = node_at(&mut self.root, parent, true) {
            dir.files.remove(name);
            dir.dirs.insert(name.to_owned(), node);
        }
    }
}

/// Removes what a killed ckptd left behind (temporary files of a restore, sync cookies).
fn remove_litter(root: &Path, litter: &[BString]) {
    if litter.is_empty() {
        return;
    }
    let Ok(root_fd) = crate::safe_io::open_dir(root) else {
        return;
    };
    for rel in litter {
        match crate::safe_io::remove_beneath(std::os::fd::AsFd::as_fd(&root_fd), rel) {
            Ok(()) => tracing::info!(path = %rel, "removed a temporary file a stopped ckptd left"),
            Err(e) => {
                tracing::warn!(path = %rel, error = %e, "cannot remove a temporary file a stopped ckptd left")
            }
        }
    }
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
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

fn node_at<'a>(root: &'a mut DirNode, path: &BStr, create: bool) -> Option<&'a mut DirNode> {
    let mut node = root;
    if path.is_empty() {
        return Some(node);
    }
    for comp in path.split(|b| *b == b'/') {
        if create {
            node.files.remove(comp.as_bstr());
            node = node.dirs.entry(comp.into()).or_default();
        } else {
            node = node.dirs.get_mut(comp.as_bstr())?;
        }
    }
    Some(node)
}

fn flatten(
    node: &DirNode,
    prefix: &BString,
    files: &mut HashMap<BString, IndexEntry>,
    dirs: &mut BTreeSet<BString>,
) {
    dirs.insert(prefix.clone());
    for (name, e) in &node.files {
        files.insert(join_rel(prefix, name), *e);
    }
    for (name, child) in &node.dirs {
        flatten(child, &join_rel(prefix, name), files, dirs);
    }
}

/// Writes the tree of `node` (None when it holds no file at any depth: git has no empty folders).
fn write_node(repo: &gix::Repository, node: &mut DirNode) -> Result<Option<ObjectId>, StoreError> {
    if let Some(known) = node.tree {
        return Ok(known);
    }
    let mut entries: Vec<Entry> = node
        .files
        .iter()
        .map(|(name, e)| Entry {
            mode: e.state.kind.into(),
            filename: name.clone(),
            oid: e.state.id,
        })
        .collect();
    for (name, child) in node.dirs.iter_mut() {
        if let Some(id) = write_node(repo, child)? {
            entries.push(Entry {
                mode: EntryKind::Tree.into(),
                filename: name.clone(),
                oid: id,
            });
        }
    }
    let id = if entries.is_empty() {
        None
    } else {
        entries.sort();
        let tree = gix::objs::Tree { entries };
        Some(
            repo.write_object(&tree)
                .map_err(|e| StoreError::git("writing a tree", e))?
                .detach(),
        )
    };
    node.tree = Some(id);
    Ok(id)
}

/// Where the stat cache of a store lives.
pub fn stat_cache_path(store_dir: &Path) -> PathBuf {
    store_dir.join("ckpt-index")
}
