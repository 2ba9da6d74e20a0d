//! What the index held, when it last wrote a tree, in the folders that changed since: the next
//! tree's counts of added, modified and deleted files are taken against it instead of reading
//! the old trees back from the store (at a million files those reads are of packs the page
//! cache has let go of, 9–40 ms on a checkpoint of ten files).
//!
//! A folder is recorded the first time it changes after a write (its cached tree id is
//! dropped, or it leaves the index): a folder whose tree id is still cached holds what it held
//! at the write, and so does every folder below it. A folder with no cached id and no record
//! was not in the index at the write: all its files are new.

use std::collections::HashMap;

use gix::bstr::{BStr, BString, ByteSlice};

use super::name::Name;
use super::node::{node_in, DirNode};
use crate::filter::join_rel;
use crate::store::tree::FileState;

/// Past this many recorded files the baseline is let go of (the counts read the trees, as a
/// full verify's do): it stays a small fraction of the index.
const MAX_RECORDED_FILES: usize = 100_000;

/// See the module's documentation. `folders` is None when the index cannot say (nothing
/// written yet, a full verify, lost objects, a failed write, too much recorded).
#[derive(Debug, Default)]
pub(super) struct Baseline {
    folders: Option<HashMap<BString, Vec<(Name, FileState)>>>,
    files: usize,
}

impl Baseline {
    /// Nothing to count against: the next counts read the trees.
    pub(super) fn lose(&mut self) {
        self.folders = None;
        self.files = 0;
    }

    /// A tree was just written: nothing has changed since.
    pub(super) fn reset(&mut self) {
        self.folders = Some(HashMap::new());
        self.files = 0;
    }

    /// Records what `node` (the folder at `path`) holds, if it still holds what it held at
    /// the write (its tree id is cached) and was not recorded before.
    pub(super) fn record(&mut self, path: &BStr, node: &DirNode) {
        if node.tree.is_none() {
            return;
        }
        let Some(folders) = &mut self.folders else {
            return;
        };
        if folders.contains_key(path) {
            return;
        }
        self.files += node.files.len();
        if self.files > MAX_RECORDED_FILES {
            self.lose();
            return;
        }
        let files = node
            .files
            .iter()
            .map(|(name, e)| (name.clone(), e.state))
            .collect();
        folders.insert(path.to_owned(), files);
    }

    /// Records `node` (at `path`) and every folder below it, which are leaving the index.
    pub(super) fn record_subtree(&mut self, path: &BString, node: &DirNode) {
        if self.folders.is_none() {
            return;
        }
        self.record(path.as_bstr(), node);
        for (name, child) in &node.dirs {
            self.record_subtree(&join_rel(path, name), child);
        }
    }

    /// How many files `root` (the index now, before its trees are written) adds, modifies and
    /// deletes against the tree last written: (added, modified, deleted), or None when the
    /// index cannot say.
    pub(super) fn counts(&self, root: &DirNode) -> Option<(u64, u64, u64)> {
        let folders = self.folders.as_ref()?;
        let mut counts = (0, 0, 0);
        for (path, old) in folders {
            let Some(now) = node_in(root, path.as_bstr()) else {
                counts.2 += old.len() as u64;
                continue;
            };
            let mut kept = 0;
            for (name, state) in old {
                match now.files.get(name.as_bytes().as_bstr()) {
                    None => counts.2 += 1,
                    Some(e) => {
                        kept += 1;
                        counts.1 += u64::from(e.state != *state);
                    }
                }
            }
            counts.0 += (now.files.len() - kept) as u64;
        }
        // Folders changed since and not recorded are new: every file in them is added.
        fn new_files(
            node: &DirNode,
            path: &mut BString,
            folders: &HashMap<BString, Vec<(Name, FileState)>>,
        ) -> u64 {
            if node.tree.is_some() {
                return 0;
            }
            let mut n = if folders.contains_key(path) {
                0
            } else {
                node.files.len() as u64
            };
            let at = path.len();
            for (name, child) in &node.dirs {
                if at > 0 {
                    path.push(b'/');
                }
                path.extend_from_slice(name);
                n += new_files(child, path, folders);
                path.truncate(at);
            }
            n
        }
        counts.0 += new_files(root, &mut BString::default(), folders);
        Some(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::Stat;
    use crate::index::file_index::FileIndex;
    use crate::index::node::IndexEntry;
    use crate::index::tree::Trees;
    use crate::store::tree::FileState;
    use crate::store::treediff::count_tree_changes;
    use gix::bstr::BString;
    use gix::objs::tree::EntryKind;
    use std::path::Path;

    /// A small deterministic generator (xorshift64*), so a failure replays from its seed.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
        }
    }

    const DIRS: &[&str] = &["", "a", "a/b", "a/b/c", "d", "d/e"];
    const NAMES: &[&str] = &["x", "y.txt", "b", "e", "run.sh"];

    /// Changes the project at random; returns the paths a watcher would report.
    fn random_change(rng: &mut Rng, root: &Path, step: usize) -> Vec<BString> {
        use std::os::unix::fs::PermissionsExt;
        let dir = DIRS[rng.below(DIRS.len())];
        let name = NAMES[rng.below(NAMES.len())];
        let rel = if dir.is_empty() {
            name.to_string()
        } else {
            format!("{dir}/{name}")
        };
        let path = root.join(&rel);
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        let clear = |path: &Path| {
            let _ = std::fs::remove_dir_all(path);
            let _ = std::fs::remove_file(path);
        };
        match rng.below(7) {
            // A file written (over a folder of that name, too).
            0 | 1 => {
                clear(&path);
                let _ = std::fs::create_dir_all(path.parent().unwrap());
                let _ = std::fs::write(&path, format!("{step} {}", rng.below(3)));
            }
            2 => clear(&path),
            3 if !is_dir => {
                let mode = if rng.below(2) == 0 { 0o755 } else { 0o644 };
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
            }
            // A folder of files where a file may have been.
            4 => {
                clear(&path);
                for f in ["one", "two"] {
                    let _ = std::fs::create_dir_all(&path);
                    let _ = std::fs::write(path.join(f), format!("{step}"));
                }
            }
            5 => {
                clear(&path);
                let _ = std::fs::create_dir_all(path.parent().unwrap());
                let _ = std::os::unix::fs::symlink(format!("t{}", rng.below(2)), &path);
            }
            _ => {
                // An ignore file: its folder is walked again.
                let _ = std::fs::create_dir_all(root.join(dir));
                let rules = ["", "*.txt\n", "b\n"][rng.below(3)];
                let gi = if dir.is_empty() {
                    ".gitignore".to_string()
                } else {
                    format!("{dir}/.gitignore")
                };
                let _ = std::fs::write(root.join(&gi), rules);
                return vec![BString::from(gi)];
            }
        }
        vec![BString::from(rel)]
    }

    /// Whatever changes, the counts the index gives equal those read from the two trees, and
    /// it gives them for every refresh of dirty paths (a full verify lets go of them).
    #[test]
    fn the_counts_from_the_index_equal_those_read_from_the_trees() {
        let (_dir, store, filter) =
            crate::index::testing::project(&["a/b"], &[("a/b/start", "start")]);
        let root = filter.root().to_path_buf();
        let options = crate::index::testing::WRITE;
        let mut index = FileIndex::default();
        let refresh = |index: &mut FileIndex, dirty: Vec<BString>| {
            index
                .refresh(&store, &filter, dirty, options, &mut |_| {})
                .unwrap();
            let tree = index.write_tree(&store, Trees::LookedUp).unwrap();
            store.flush_objects().unwrap();
            tree
        };
        let mut old = refresh(&mut index, Vec::new());
        assert_eq!(index.last_changes(), None, "nothing was written before");
        let (mut known, mut changed, mut sums) = (0, 0, (0, 0, 0));
        for seed in [3u64, 11, 97] {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            // One pack per checkpoint, and a store's handles hold at most 256 (the daemon
            // consolidates them).
            for step in 0..70 {
                let mut dirty = Vec::new();
                for _ in 0..=rng.below(3) {
                    dirty.extend(random_change(&mut rng, &root, step));
                }
                if step % 30 == 29 {
                    // What a restore does: the index told of a file it wrote.
                    let path = root.join("d/restored");
                    std::fs::create_dir_all(root.join("d")).unwrap();
                    std::fs::write(&path, "restored").unwrap();
                    let entry = IndexEntry {
                        state: FileState {
                            kind: EntryKind::Blob,
                            id: gix::objs::compute_hash(
                                gix::hash::Kind::Sha1,
                                gix::objs::Kind::Blob,
                                b"restored",
                            )
                            .unwrap(),
                        },
                        stat: Stat::of(&std::fs::symlink_metadata(&path).unwrap()),
                    };
                    index.insert(b"d/restored".as_bstr(), entry);
                }
                let new = refresh(&mut index, dirty);
                let read = count_tree_changes(&store.repo(), Some(old), Some(new)).unwrap();
                if let Some(k) = index.last_changes() {
                    assert_eq!((k.old, k.new), (old, new));
                    assert_eq!(
                        (k.added, k.modified, k.deleted),
                        read,
                        "seed {seed} step {step}"
                    );
                    known += 1;
                    changed += usize::from(old != new);
                    sums = (sums.0 + k.added, sums.1 + k.modified, sums.2 + k.deleted);
                }
                old = new;
            }
        }
        assert!(
            known >= 200,
            "the index knew the counts {known} times of 210"
        );
        assert!(
            changed > 100,
            "{changed} of the checkpoints changed something"
        );
        assert!(sums.0 > 50 && sums.1 > 20 && sums.2 > 50, "{sums:?}");
        // A full verify lets go of the baseline: the counts are read from the trees.
        index.invalidate_all();
        std::fs::write(root.join("after-verify"), "v").unwrap();
        refresh(&mut index, Vec::new());
        assert_eq!(index.last_changes(), None);
    }
}
