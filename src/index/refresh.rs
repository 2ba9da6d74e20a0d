//! Bringing the index up to date: re-reading what the watcher reported (or, when it cannot
//! vouch, a verify of every file by stat: see `verify`), capturing changed files into the store.

use super::*;

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
        self.apply_captured(captured, &mut outcome);
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

    /// Reads the given files in parallel and adds what is new to the pending pack; returns
    /// what each reading thread found (never copied into one list: a first checkpoint holds
    /// one entry per file).
    pub(super) fn capture_changed(
        &self,
        store: &Store,
        root: &Path,
        files: Vec<WalkEntry>,
        options: SnapshotOptions,
    ) -> Result<(Vec<Vec<Captured>>, i64), StoreError> {
        let read_at = now_ns();
        if files.is_empty() {
            // The usual case of a checkpoint with nothing changed: no folder to open.
            return Ok((Vec::new(), read_at));
        }
        self.progress.start(2, files.len() as u64);
        let progress = &self.progress;
        // Opened before the pack, so that failing to open it leaves no temporary pack behind.
        let root_fd = crate::safe_io::open_dir(root).map_err(|source| StoreError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        // Blobs join the operation's pending pack, flushed (one pack, fsynced) with the trees
        // and the commit before any ref names them.
        let pack = if options.write {
            let pack = store.pending_blobs()?;
            // Room for a blob per file and the trees above them (a hint: it grows past it).
            pack.reserve(files.len() + files.len() / 8);
            Some(pack)
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
        // Each thread owns its part and drops each entry once read: the walk's paths are freed
        // as their copies in the results appear.
        let chunk = files.len().div_ceil(threads).max(1);
        let mut parts: Vec<Vec<WalkEntry>> = Vec::with_capacity(threads);
        let mut rest = files;
        while rest.len() > chunk {
            parts.push(rest.split_off(rest.len() - chunk));
            rest.shrink_to_fit();
        }
        parts.push(rest);
        parts.reverse();
        let root_fd = std::os::fd::AsFd::as_fd(&root_fd);
        let pack = pack.as_deref();
        let read = |repo: &gix::Repository, part: Vec<WalkEntry>| {
            let mut found = Vec::with_capacity(part.len());
            let mut files = crate::safe_io::Beneath::new(root_fd);
            for e in part {
                found.push(capture(repo, &mut files, &e, options, pack)?);
                progress.step();
            }
            Ok::<_, StoreError>(found)
        };
        let captured: Vec<Result<Vec<Captured>, StoreError>> = if parts.len() == 1 {
            // A few files (a checkpoint's usual change) are read here: a thread would cost
            // more to start than the reads.
            let part = parts.pop().expect("one part");
            vec![read(&store.repo(), part)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = parts
                    .into_iter()
                    .map(|part| {
                        let repo = store.thread_safe();
                        let read = &read;
                        scope.spawn(move || read(&repo.to_thread_local(), part))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("capture worker panicked"))
                    .collect()
            })
        };
        // A store error fails the whole batch: nothing of it reaches the index (what reached
        // the pending pack is flushed with the rest of the operation, or dropped as a whole).
        Ok((captured.into_iter().collect::<Result<_, _>>()?, read_at))
    }

    /// Puts what the reading threads found into the index, each thread's results freed as
    /// they are applied.
    pub(super) fn apply_captured(
        &mut self,
        (captured, read_at): (Vec<Vec<Captured>>, i64),
        outcome: &mut RefreshOutcome,
    ) {
        // A folder's files are next to each other in what was read: they join the index
        // together (see `DirNode::add_files`).
        let mut folder: Option<(BString, Vec<(Name, IndexEntry)>)> = None;
        for part in captured {
            outcome.hashed += part.len();
            for c in part {
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
    use super::testing::read_once;
    use super::*;

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
