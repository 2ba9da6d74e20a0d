//! Differences between two stored trees, descending only into subtrees whose ids differ, so
//! the cost follows the size of the change, not of the project. Two walks: the quick one here
//! (changes in any order: counts, and lists sorted after), and [`ordered`], which yields them
//! in path order one at a time, for answers that stop when they are full.

mod entries;
mod ordered;

use gix::bstr::{BString, ByteSlice};
use gix::ObjectId;

use crate::filter::join_rel;
use crate::store::tree::within;
use crate::store::StoreError;
pub use entries::TreeChange;
use entries::{relevant, split, step, tree_data, Listing, Step};
pub use ordered::changes_in_order;

/// The file-level changes from tree `old` to tree `new` (None: empty), limited to `paths`
/// (files or folders; everything when empty), sorted by path.
pub fn diff_trees(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    paths: &[BString],
) -> Result<Vec<TreeChange>, StoreError> {
    let mut out = Vec::new();
    walk(repo, old, new, paths, &mut |c| out.push(c))?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// How many files tree `new` adds, modifies and deletes against tree `old` (None: empty),
/// without collecting the changes (a first checkpoint adds every file of the project).
pub fn count_tree_changes(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
) -> Result<(u64, u64, u64), StoreError> {
    let mut counts = (0, 0, 0);
    walk(repo, old, new, &[], &mut |c| tally(&mut counts, &c))?;
    Ok(counts)
}

/// How many files differ from tree `old` to tree `new` within `paths` (everything when empty).
pub fn count_changes_within(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    paths: &[BString],
) -> Result<u64, StoreError> {
    let mut n = 0;
    walk(repo, old, new, paths, &mut |_| n += 1)?;
    Ok(n)
}

/// Counts `changes` as [`count_tree_changes`] does: (added, modified, deleted).
pub fn count_changes<'a>(changes: impl IntoIterator<Item = &'a TreeChange>) -> (u64, u64, u64) {
    let mut counts = (0, 0, 0);
    for c in changes {
        tally(&mut counts, c);
    }
    counts
}

fn tally(counts: &mut (u64, u64, u64), c: &TreeChange) {
    match (&c.old, &c.new) {
        (None, Some(_)) => counts.0 += 1,
        (Some(_), Some(_)) => counts.1 += 1,
        (Some(_), None) => counts.2 += 1,
        (None, None) => {}
    }
}

/// Compares trees `old` and `new`: both listings of a folder are walked side by side in git's
/// order, an entry equal on both sides is passed over without building its path, and only
/// folders whose ids differ are descended into. The folders still to compare are a list, not
/// the call stack: a tree of any depth (one from a bundle or a remote) cannot overflow it.
fn walk(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    paths: &[BString],
    out: &mut dyn FnMut(TreeChange),
) -> Result<(), StoreError> {
    let mut todo = vec![(BString::default(), old, new)];
    while let Some((prefix, old, new)) = todo.pop() {
        if old != new {
            compare(repo, &prefix, old, new, paths, &mut todo, out)?;
        }
    }
    Ok(())
}

/// One folder of [`walk`]: its differing files go to `out`, its differing folders to `todo`.
fn compare(
    repo: &gix::Repository,
    prefix: &BString,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    paths: &[BString],
    todo: &mut Vec<(BString, Option<ObjectId>, Option<ObjectId>)>,
    out: &mut dyn FnMut(TreeChange),
) -> Result<(), StoreError> {
    let (a_data, b_data) = (tree_data(repo, old)?, tree_data(repo, new)?);
    let (a, b) = (Listing::new(&a_data)?, Listing::new(&b_data)?);
    let (mut i, mut j) = (0, 0);
    loop {
        let (ea, eb) = match step(a.entries.get(i), b.entries.get(j)) {
            Step::Done => break,
            Step::Same => {
                i += 1;
                j += 1;
                continue;
            }
            Step::Differ(ea, eb) => (ea, eb),
        };
        i += usize::from(ea.is_some());
        j += usize::from(eb.is_some());
        let name = ea.or(eb).expect("one side has the entry").filename;
        let path = join_rel(prefix, name);
        if !relevant(path.as_bstr(), paths) {
            continue;
        }
        let (old_tree, old_file) = split(ea);
        let (new_tree, new_file) = split(eb);
        if old_file != new_file && within(&path, paths) {
            out(TreeChange {
                path: path.clone(),
                old: old_file,
                new: new_file,
            });
        }
        if old_tree.is_some() || new_tree.is_some() {
            todo.push((path, old_tree, new_tree));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use gix::objs::tree::{Entry, EntryKind};

    use super::*;
    use crate::store::tree::read_tree;
    use crate::store::tree::FileState;

    /// A small deterministic generator (xorshift), so a failure names its seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Writes the files `files` (path → state) as trees; returns the root.
    fn write(repo: &gix::Repository, files: &BTreeMap<String, FileState>) -> ObjectId {
        let mut here: BTreeMap<&str, FileState> = BTreeMap::new();
        let mut below: BTreeMap<&str, BTreeMap<String, FileState>> = BTreeMap::new();
        for (path, state) in files {
            match path.split_once('/') {
                Some((dir, rest)) => {
                    below.entry(dir).or_default().insert(rest.into(), *state);
                }
                None => {
                    here.insert(path, *state);
                }
            }
        }
        let mut entries: Vec<Entry> = here
            .into_iter()
            .map(|(name, s)| Entry {
                mode: s.kind.into(),
                filename: name.into(),
                oid: s.id,
            })
            .collect();
        for (name, sub) in below {
            entries.push(Entry {
                mode: EntryKind::Tree.into(),
                filename: name.into(),
                oid: write(repo, &sub),
            });
        }
        entries.sort();
        repo.write_object(&gix::objs::Tree { entries })
            .unwrap()
            .detach()
    }

    /// Random files whose names collide as a file and a folder (`a` and `a/…`) and sort
    /// differently by name and in git's order (`a-b`, `a.b`, `a`, `a0`).
    fn random_files(rng: &mut Rng, blobs: &[ObjectId]) -> BTreeMap<String, FileState> {
        const NAMES: [&str; 6] = ["a", "a-b", "a.b", "a0", "b", "c"];
        let kinds = [EntryKind::Blob, EntryKind::BlobExecutable, EntryKind::Link];
        let mut files = BTreeMap::new();
        for _ in 0..rng.next(30) {
            let depth = 1 + rng.next(3);
            let path: Vec<&str> = (0..depth).map(|_| NAMES[rng.next(6) as usize]).collect();
            let path = path.join("/");
            // A path that is a folder of another (or has one as its folder) is left out.
            let clash = files.keys().any(|p: &String| {
                p.starts_with(&format!("{path}/")) || path.starts_with(&format!("{p}/"))
            });
            if !clash {
                let state = FileState {
                    kind: kinds[rng.next(3) as usize],
                    id: blobs[rng.next(blobs.len() as u64) as usize],
                };
                files.insert(path, state);
            }
        }
        files
    }

    /// Every change, from the two trees' full listings.
    fn by_listing(
        repo: &gix::Repository,
        old: ObjectId,
        new: ObjectId,
        paths: &[BString],
    ) -> Vec<TreeChange> {
        let (a, b) = (read_tree(repo, old).unwrap(), read_tree(repo, new).unwrap());
        let mut names: Vec<&BString> = a.keys().chain(b.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter(|n| within(n, paths))
            .filter(|n| a.get(*n) != b.get(*n))
            .map(|n| TreeChange {
                path: n.clone(),
                old: a.get(n).copied(),
                new: b.get(n).copied(),
            })
            .collect()
    }

    /// Walking two trees side by side finds exactly the changes their full listings differ
    /// by, with and without a path filter, and counts them the same.
    #[test]
    fn the_walk_equals_comparing_full_listings() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init_bare(dir.path()).unwrap();
        let blobs: Vec<ObjectId> = (0..3)
            .map(|n| repo.write_blob(format!("{n}")).unwrap().detach())
            .collect();
        for seed in 1..400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let (a, b) = (
                random_files(&mut rng, &blobs),
                random_files(&mut rng, &blobs),
            );
            let (old, new) = (write(&repo, &a), write(&repo, &b));
            let filters: [Vec<BString>; 3] =
                [vec![], vec!["a".into()], vec!["a/a-b".into(), "c".into()]];
            for paths in &filters {
                let walked = diff_trees(&repo, Some(old), Some(new), paths).unwrap();
                assert_eq!(
                    walked,
                    by_listing(&repo, old, new, paths),
                    "seed {seed}, paths {paths:?}"
                );
                let mut in_order = Vec::new();
                changes_in_order(&repo, Some(old), Some(new), paths, &mut |c| {
                    in_order.push(c);
                    Ok(std::ops::ControlFlow::Continue(()))
                })
                .unwrap();
                assert_eq!(in_order, walked, "in order: seed {seed}, paths {paths:?}");
            }
            let all = by_listing(&repo, old, new, &[]);
            let count = |f: fn(&TreeChange) -> bool| all.iter().filter(|c| f(c)).count() as u64;
            let expected = (
                count(|c| c.old.is_none()),
                count(|c| c.old.is_some() && c.new.is_some()),
                count(|c| c.new.is_none()),
            );
            assert_eq!(
                count_tree_changes(&repo, Some(old), Some(new)).unwrap(),
                expected,
                "seed {seed}"
            );
        }
    }

    /// A tree far deeper than any call stack allows is compared all the same.
    #[test]
    fn a_tree_of_any_depth_is_compared_without_recursion() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init_bare(dir.path()).unwrap();
        let blob = repo.write_blob("x").unwrap().detach();
        let mut tree = repo
            .write_object(&gix::objs::Tree {
                entries: vec![Entry {
                    mode: EntryKind::Blob.into(),
                    filename: "f".into(),
                    oid: blob,
                }],
            })
            .unwrap()
            .detach();
        for _ in 0..5_000 {
            tree = repo
                .write_object(&gix::objs::Tree {
                    entries: vec![Entry {
                        mode: EntryKind::Tree.into(),
                        filename: "d".into(),
                        oid: tree,
                    }],
                })
                .unwrap()
                .detach();
        }
        let run = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || count_tree_changes(&repo, None, Some(tree)).unwrap())
            .unwrap();
        assert_eq!(run.join().unwrap(), (1, 0, 0));
    }

    /// A tree out of git's order (which git refuses, but a store may hold) is compared by
    /// name all the same.
    #[test]
    fn a_tree_out_of_order_is_compared_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init_bare(dir.path()).unwrap();
        let blob = |s: &str| repo.write_blob(s).unwrap().detach();
        let (x, y) = (blob("x"), blob("y"));
        let raw = |entries: &[(&str, ObjectId)]| {
            let mut bytes = Vec::new();
            for (name, id) in entries {
                bytes.extend_from_slice(format!("100644 {name}\0").as_bytes());
                bytes.extend_from_slice(id.as_bytes());
            }
            gix::objs::Write::write_buf(&repo.objects, gix::objs::Kind::Tree, &bytes).unwrap()
        };
        let sorted = raw(&[("a", x), ("b", x), ("c", x)]);
        let shuffled = raw(&[("c", x), ("a", y), ("b", x)]);
        let changes = diff_trees(&repo, Some(sorted), Some(shuffled), &[]).unwrap();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].path, "a");
        assert_eq!(
            count_tree_changes(&repo, Some(shuffled), Some(sorted)).unwrap(),
            (0, 1, 0)
        );
    }
}
