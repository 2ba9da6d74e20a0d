//! The verify: a walk of a folder (the whole project after a restart, a folder that changed)
//! compared with what the index and the stat cache know, file by file as each folder is
//! listed; what is new or changed by stat is read, the rest keeps its entry.

use std::collections::BTreeSet;
use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice};

use super::file_index::FileIndex;
use super::name::Name;
use super::node::{node_at, DirNode};
use super::progress::{OnDir, RefreshOutcome};
use crate::filter::Listed;
use crate::filter::{split_parent, Filter, WalkEntry};
use crate::model::SkipReason;
use crate::store::snapshot::SnapshotOptions;
use crate::store::tree::within;
use crate::store::{Store, StoreError};

impl FileIndex {
    /// Verifies the whole project by stat (re-hashing only what differs).
    pub fn verify_all(
        &mut self,
        store: &Store,
        filter: &Filter,
        options: SnapshotOptions,
        on_dir: OnDir<'_>,
    ) -> Result<RefreshOutcome, StoreError> {
        self.rules.clear();
        // Every folder is taken out and put back: the next counts read the trees instead.
        self.baseline.lose();
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
        self.stale = DirNode::default();
        self.verified = true;
        Ok(outcome)
    }

    /// Re-walks the folder `start` under the current rules and replaces its part of the index.
    pub(super) fn verify_subtree(
        &mut self,
        store: &Store,
        filter: &Filter,
        start: BString,
        options: SnapshotOptions,
        on_dir: OnDir<'_>,
        outcome: &mut RefreshOutcome,
    ) -> Result<(), StoreError> {
        // What was known below `start`: the index's own entries, or (first verify after a
        // restart) the stat cache's. Each folder's are taken out when the walk reaches it.
        let old = self.detach(start.as_bstr()).unwrap_or_default();
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
        let mut counting = |dirs: &[&Path]| {
            dirs.iter().for_each(|_| progress.step());
            on_dir(dirs)
        };
        // Each folder's files are sorted as the walk lists them, never gathered into one list
        // of every file of the project: the folder's known entries are taken out of the old
        // index and the stat cache, the unchanged ones join the new index, and only what must
        // be read is kept. The old entries, the cache and the new index are never all whole
        // at once.
        let mut sorter = Sorter {
            start: &start,
            racy: &racy,
            old,
            stale: None,
            waiting: Vec::new(),
            node: DirNode::default(),
            to_read: Default::default(),
        };
        let walk = filter.walk_each(start.clone(), rules, &mut counting, &mut |files| {
            // The stat cache (first verify after a restart) is read while the walk lists:
            // folders listed before it is ready wait for it.
            if sorter.stale.is_none() {
                if !self.stale_is_ready() {
                    sorter.waiting.push(files);
                    return;
                }
                sorter.stale_from(self);
            }
            sorter.sort(files);
        });
        if sorter.stale.is_none() {
            sorter.stale_from(self);
        }
        for dir in &walk.dirs {
            if dir != &start {
                node_at(&mut sorter.node, relative_to(&start, dir.as_bstr()), true);
            }
        }
        let Sorter {
            node,
            to_read,
            old,
            stale,
            ..
        } = sorter;
        drop((old, stale));
        for skip in walk.skips {
            self.note_skip(skip.rel, (SkipReason::Unreadable, skip.reason));
        }
        remove_litter(filter.root(), &walk.litter);
        self.repos.extend(walk.repos);
        self.attach(start.as_bstr(), node);
        self.capture_changed(
            store,
            filter.root(),
            to_read,
            options,
            &mut |index, read, at| index.apply_captured(read, at, outcome),
        )
    }
}

/// Sorts a verify's walked files into unchanged (joining the new index) and to read.
struct Sorter<'a> {
    /// The folder the walk started from.
    start: &'a BString,
    racy: &'a BTreeSet<BString>,
    /// What the index knew below `start`.
    old: DirNode,
    /// What the stat cache knew below `start`, once it is read.
    stale: Option<DirNode>,
    /// Folders' files listed before the stat cache was ready.
    waiting: Vec<Listed>,
    /// The new index below `start`.
    node: DirNode,
    to_read: super::refresh::ToRead,
}

impl Sorter<'_> {
    /// Takes the stat cache's part below `start` (waiting for it to be read), and sorts the
    /// files that waited for it.
    fn stale_from(&mut self, index: &mut FileIndex) {
        index.stale_ready();
        self.stale = Some(take_folder(&mut index.stale, self.start.as_bstr()).unwrap_or_default());
        for files in std::mem::take(&mut self.waiting) {
            self.sort(files);
        }
    }

    /// Sorts one folder's files (a walk hands each folder's over once; were a folder's ever
    /// handed over twice, the second part would find nothing known and be read again: slower,
    /// still exact). A file's path is made only for a file to read or one that is racy.
    fn sort(&mut self, listed: Listed) {
        let rel = relative_to(self.start, listed.dir.as_bstr());
        let take = |tree: &mut DirNode| {
            node_at(tree, rel, false)
                .map(|n| std::mem::take(&mut n.files))
                .unwrap_or_default()
        };
        let old = take(&mut self.old);
        let stale = take(
            self.stale
                .as_mut()
                .expect("sorting waits for the stat cache"),
        );
        let mut unchanged = Vec::with_capacity(listed.len());
        for (name, stat) in listed.iter() {
            let racy = || !self.racy.is_empty() && self.racy.contains(&listed.path_of(name));
            match old.get(name).or_else(|| stale.get(name)) {
                Some(e) if e.stat == stat && !racy() => unchanged.push((Name::from(name), *e)),
                _ => self.to_read.push(WalkEntry {
                    rel: listed.path_of(name),
                    stat,
                }),
            }
        }
        let dir = node_at(&mut self.node, rel, true).expect("created");
        dir.add_files(unchanged);
    }
}

/// Takes the folder at `path` out of `root` (the root itself: everything).
fn take_folder(root: &mut DirNode, path: &BStr) -> Option<DirNode> {
    if path.is_empty() {
        return Some(std::mem::take(root));
    }
    let (parent, name) = split_parent(path);
    node_at(root, parent, false)?.dirs.remove(name)
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

#[cfg(test)]
mod tests {

    use crate::index::file_index::FileIndex;
    use crate::index::tree::Trees;
    use crate::store::snapshot::SnapshotOptions;
    use std::sync::Arc;

    /// A verify whose stat cache is still being read when the walk lists its folders: they
    /// wait for it, then find their entries there; only the files changed since are read, and
    /// the index equals a full scan.
    #[test]
    fn folders_listed_before_the_stat_cache_is_read_wait_for_it() {
        let names: Vec<(String, String)> = (0..200)
            .map(|i| (format!("sub/d{}/f{i}", i % 20), format!("{i}")))
            .collect();
        let dirs: Vec<String> = (0..20).map(|d| format!("sub/d{d}")).collect();
        let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
        let files: Vec<(&str, &str)> = names
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        let (dir, store, filter) = crate::index::testing::project(&dirs, &files);
        // Older than the racy window when read: the cache keeps every entry.
        std::thread::sleep(std::time::Duration::from_millis(120));
        let mut index = FileIndex::default();
        index
            .refresh(
                &store,
                &filter,
                Vec::new(),
                crate::index::testing::WRITE,
                &mut |_| {},
            )
            .unwrap();
        let cache = dir.path().join("stat-cache");
        crate::index::save_stat_cache(&index, &cache).unwrap();
        let root = filter.root().to_path_buf();
        for i in [3, 77, 150] {
            std::fs::write(root.join(format!("sub/d{}/f{i}", i % 20)), "changed!").unwrap();
        }
        let loading = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            crate::index::load_stat_cache(&cache)
        });
        let mut restarted = FileIndex::with_stat_cache_loading(loading, Arc::default());
        let outcome = restarted
            .refresh(
                &store,
                &filter,
                Vec::new(),
                crate::index::testing::WRITE,
                &mut |_| {},
            )
            .unwrap();
        assert!(outcome.full);
        assert_eq!(outcome.hashed, 3);
        let tree = restarted.write_tree(&store, Trees::LookedUp).unwrap();
        store.flush_objects().unwrap();
        let scan = crate::store::Snapshot::take(
            &store,
            &filter,
            SnapshotOptions {
                write: false,
                max_file_size: 1 << 20,
            },
        )
        .unwrap();
        assert_eq!(tree, crate::store::Snapshot::tree_id(&scan.files).unwrap());
    }
}
