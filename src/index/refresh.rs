//! Bringing the index up to date: re-reading what the watcher reported (or, when it cannot
//! vouch, a verify of every file by stat: see `verify`), capturing changed files into the store.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gix::bstr::{BString, ByteSlice};

use super::file_index::{FileIndex, RACY_WINDOW_NS};
use super::name::Name;
use super::node::{node_at, IndexEntry};
use super::progress::{OnDir, RefreshOutcome};
use crate::filter::{join_rel, rel_to_abs, split_parent, Filter, WalkEntry};
use crate::fs::Beneath;
use crate::fs::{now_ns, Stat};
use crate::model::SkipReason;
use crate::store::snapshot::{capture, Captured, SnapshotOptions};
use crate::store::tree::within;
use crate::store::{Store, StoreError};

/// Files to read, in batches of up to [`BATCH`] in the order they were found.
#[derive(Default)]
pub(super) struct ToRead {
    batches: Vec<Vec<WalkEntry>>,
    len: usize,
}

/// Files per batch: enough to keep a reading thread busy between two looks at the queue, few
/// enough that a first checkpoint frees the walk's list as it reads it.
const BATCH: usize = 4096;

impl ToRead {
    pub(super) fn push(&mut self, file: WalkEntry) {
        match self.batches.last_mut() {
            Some(batch) if batch.len() < BATCH => batch.push(file),
            _ => self.batches.push(vec![file]),
        }
        self.len += 1;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// At least `threads` batches when there are fewer (a change of a few thousand files):
    /// the files split evenly, so that every thread has a share.
    fn split_for(self, threads: usize) -> ToRead {
        if self.batches.len() >= threads {
            return self;
        }
        let per = self.len.div_ceil(threads).max(1);
        let mut all = self.batches.into_iter().flatten();
        let batches = std::iter::from_fn(|| {
            let batch: Vec<WalkEntry> = all.by_ref().take(per).collect();
            (!batch.is_empty()).then_some(batch)
        })
        .collect();
        ToRead {
            batches,
            len: self.len,
        }
    }
}

impl FileIndex {
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

    // Long by design: the refresh is one sequence (dirty set, folder walks, rule changes,
    // captures, tree invalidation) whose steps share the same borrowed state.
    pub(super) fn refresh_inner(
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
        let mut files = ToRead::default();
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
        self.capture_changed(
            store,
            filter.root(),
            files,
            options,
            &mut |index, read, at| index.apply_captured(read, at, &mut outcome),
        )?;
        Ok(outcome)
    }

    pub(super) fn current_rule_stats(&self, filter: &Filter) -> Vec<(PathBuf, Option<Stat>)> {
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

    /// Reads `files` in parallel, adding what is new to the pending pack, and hands each
    /// batch's results to `take` (with the moment the reading began) as soon as it is read: a
    /// first checkpoint holds neither its whole walk nor everything read from it at once. A
    /// store error stops the reading and is returned; the batches taken before it may name
    /// objects of the pending pack, which the operation flushes or loses as a whole, as it
    /// does for a folder verified before another fails (a loss makes the index forget
    /// everything: `Opened::forget_if_lost`).
    pub(super) fn capture_changed(
        &mut self,
        store: &Store,
        root: &Path,
        files: ToRead,
        options: SnapshotOptions,
        take: &mut dyn FnMut(&mut FileIndex, Vec<Captured>, i64),
    ) -> Result<(), StoreError> {
        let read_at = now_ns();
        if files.is_empty() {
            // The usual case of a checkpoint with nothing changed: no folder to open.
            return Ok(());
        }
        self.progress.start(2, files.len as u64);
        let progress = self.progress.clone();
        // Opened before the pack, so that failing to open it leaves no temporary pack behind.
        let root_fd = crate::fs::open_dir(root).map_err(|source| StoreError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        // Blobs join the operation's pending pack, flushed (one pack, fsynced) with the trees
        // and the commit before any ref names them.
        let pack = if options.write {
            let pack = store.pending_blobs()?;
            // Room for a blob per file and the trees above them (a hint: it grows past it).
            pack.reserve(files.len + files.len / 8);
            Some(pack)
        } else {
            None
        };
        let threads = if files.len < 64 {
            1
        } else {
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(8)
        };
        let files = files.split_for(threads);
        let threads = threads.min(files.batches.len());
        // The threads take batches from one queue; each batch's list is freed once it is
        // read (the walk's paths move into the results).
        let queue = parking_lot::Mutex::new(files.batches.into_iter());
        let next = || queue.lock().next();
        let root_fd = std::os::fd::AsFd::as_fd(&root_fd);
        let pack = pack.as_deref();
        let read = |repo: &gix::Repository, files: &mut Beneath<'_>, batch: Vec<WalkEntry>| {
            let mut read = Vec::with_capacity(batch.len());
            for e in batch {
                read.push(capture(repo, files, e, options, pack)?);
                progress.step();
            }
            Ok::<_, StoreError>(read)
        };
        if threads == 1 {
            // A few files (a checkpoint's usual change) are read here: a thread would cost
            // more to start than the reads.
            let repo = store.repo();
            let mut files = Beneath::new(root_fd);
            while let Some(batch) = next() {
                let read = read(&repo, &mut files, batch)?;
                take(self, read, read_at);
            }
            return Ok(());
        }
        // Bounded: readers ahead of the index wait rather than pile their results up.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Captured>>(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (tx, repo) = (tx.clone(), store.thread_safe());
                    let (next, read, queue) = (&next, &read, &queue);
                    scope.spawn(move || {
                        let repo = repo.to_thread_local();
                        let mut files = Beneath::new(root_fd);
                        while let Some(batch) = next() {
                            match read(&repo, &mut files, batch) {
                                Ok(read) => {
                                    if tx.send(read).is_err() {
                                        break;
                                    }
                                }
                                Err(e) => {
                                    // The other readers stop at their next batch.
                                    *queue.lock() = Vec::new().into_iter();
                                    return Err(e);
                                }
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            drop(tx);
            for read in rx {
                take(self, read, read_at);
            }
            // The scope joins every reader; the first error is the refresh's.
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("capture worker panicked"))
        })
    }

    /// Puts one batch of what was read into the index.
    pub(super) fn apply_captured(
        &mut self,
        read: Vec<Captured>,
        read_at: i64,
        outcome: &mut RefreshOutcome,
    ) {
        // A folder's files are next to each other in a batch: they join the index together
        // (see `DirNode::add_files`; a folder split between batches joins in two steps).
        let mut folder: Option<(BString, Vec<(Name, IndexEntry)>)> = None;
        outcome.hashed += read.len();
        for c in read {
            match c {
                Captured::File { rel, state, stat } => {
                    if stat.mtime_ns.saturating_add(RACY_WINDOW_NS) >= read_at {
                        self.racy.insert(rel.clone());
                    }
                    self.skipped.remove(&rel);
                    let (parent, name) = split_parent(rel.as_bstr());
                    if folder.as_ref().is_some_and(|(p, _)| p != parent) {
                        self.add_folder_files(folder.take());
                    }
                    folder
                        .get_or_insert_with(|| (parent.to_owned(), Vec::new()))
                        .1
                        .push((Name::from(name), IndexEntry { state, stat }));
                }
                Captured::Skipped(rel, skip) => {
                    self.remove(rel.as_bstr());
                    self.note_skip(rel, (skip.reason_code, skip.reason));
                }
                Captured::Vanished(rel) => self.remove(rel.as_bstr()),
            }
        }
        self.add_folder_files(folder);
    }

    /// Adds the files read in one folder to the index.
    fn add_folder_files(&mut self, folder: Option<(BString, Vec<(Name, IndexEntry)>)>) {
        let Some((parent, files)) = folder else {
            return;
        };
        self.invalidate_trees(parent.as_bstr());
        if let Some(dir) = node_at(&mut self.root, parent.as_bstr(), true) {
            // Folders that files replace leave the index: recorded as they were.
            for (name, _) in &files {
                if let Some(gone) = dir.dirs.get(name.as_bytes().as_bstr()) {
                    self.baseline
                        .record_subtree(&join_rel(&parent, name.as_bytes()), gone);
                }
            }
            dir.add_files(files);
        }
    }

    /// Remembers that `rel` exists but cannot be captured; logged when it starts.
    pub(super) fn note_skip(&mut self, rel: BString, reason: (SkipReason, String)) {
        if self.skipped.get(&rel) != Some(&reason) {
            tracing::warn!(path = %rel, reason = %reason.1, "skipped while taking a snapshot");
        }
        self.skipped.insert(rel, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::WalkEntry;
    use crate::fs::Stat;
    use crate::index::testing::read_once;
    use crate::index::tree::Trees;
    use crate::store::snapshot::SnapshotOptions;
    use gix::bstr::BString;

    /// A few thousand files to read are split evenly between the threads, in their order; a
    /// list of many batches is left as it is.
    #[test]
    fn files_to_read_are_shared_between_threads() {
        let entry = |n: usize| WalkEntry {
            rel: format!("f{n}").into(),
            stat: Stat {
                size: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                ino: 0,
                mode: 0,
            },
        };
        let names = |files: &ToRead| -> Vec<Vec<BString>> {
            let batch = |b: &Vec<WalkEntry>| b.iter().map(|e| e.rel.clone()).collect();
            files.batches.iter().map(batch).collect()
        };
        for (len, threads, sizes) in [
            (101, 2, vec![51, 50]),
            (3, 8, vec![1, 1, 1]),
            (5_000, 2, vec![4096, 904]),
            (9_000, 2, vec![4096, 4096, 808]),
        ] {
            let mut files = ToRead::default();
            (0..len).for_each(|n| files.push(entry(n)));
            let files = files.split_for(threads);
            let got = names(&files);
            assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), sizes);
            let flat: Vec<BString> = got.into_iter().flatten().collect();
            let want: Vec<BString> = (0..len).map(|n| format!("f{n}").into()).collect();
            assert_eq!(flat, want);
            assert_eq!(files.len, len);
        }
    }

    /// The index writes its trees in git's order (a folder sorts as its name and a slash),
    /// equal to a full scan's, and git finds them well formed.
    #[test]
    fn trees_written_from_the_index_are_in_git_order_and_equal_a_full_scan() {
        let (dir, store, filter, mut index) = read_once(&[
            ("a-b", "file"),
            ("a0", "file"),
            ("sub/b.txt", "b"),
            ("sub.txt", "file"),
        ]);
        let root = filter.root().to_path_buf();
        for folder in ["a", "a.b", "sub/c", "sub/c-d", "z"] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
            std::fs::write(root.join(folder).join("f"), folder).unwrap();
        }
        let options = SnapshotOptions {
            write: true,
            max_file_size: 1 << 20,
        };
        let changed = ["a", "a.b", "sub/c", "sub/c-d", "z"].map(BString::from);
        index
            .refresh(&store, &filter, changed, options, &mut |_| {})
            .unwrap();
        let tree = index.write_tree(&store, Trees::LookedUp).unwrap();
        store.flush_objects().unwrap();
        let scan = crate::store::Snapshot::take(
            &store,
            &filter,
            SnapshotOptions {
                write: false,
                ..options
            },
        )
        .unwrap();
        assert_eq!(tree, crate::store::Snapshot::tree_id(&scan.files).unwrap());
        let store_dir = dir.path().join("store");
        let git = |args: &[&str]| {
            let mut all = vec!["--git-dir", store_dir.to_str().unwrap()];
            all.extend_from_slice(args);
            crate::testing::git(all)
        };
        let listed = git(&["ls-tree", "--name-only", &tree.to_string()]);
        assert_eq!(
            listed.lines().collect::<Vec<_>>(),
            ["a-b", "a.b", "a", "a0", "sub.txt", "sub", "z"]
        );
        git(&["fsck", "--strict", "--no-dangling"]);
    }
}
