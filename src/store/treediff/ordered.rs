//! The changes between two trees in path order, one at a time, so an answer that is full (a page
//! of a diff, the first entries of a big checkpoint) stops the walk there instead of listing a
//! million files first.
//!
//! A folder's entries in git's order are its paths' order (git compares a folder's name as if
//! it ended in `/`), so visiting each differing entry as it comes, a file at once and a folder
//! by descending into it before the next entry, yields every changed path in order. The
//! folders being walked are a list, not the call stack: each keeps its two listings and where
//! it is in them.

use std::ops::{ControlFlow, Range};

use gix::bstr::{BString, ByteSlice};
use gix::objs::tree::{EntryMode, EntryRef};
use gix::ObjectId;

use super::entries::{relevant, split, step, tree_data, Listing, Step, TreeChange};
use crate::filter::join_rel;
use crate::store::tree::within;
use crate::store::StoreError;

/// One side of a folder being walked: the tree's bytes and its entries (names as ranges of
/// them), in git's order.
struct Side {
    data: Vec<u8>,
    entries: Vec<(EntryMode, ObjectId, Range<usize>)>,
}

impl Side {
    fn read(repo: &gix::Repository, id: Option<ObjectId>) -> Result<Side, StoreError> {
        let data = tree_data(repo, id)?;
        let base = data.as_ptr() as usize;
        let entries = Listing::new(&data)?
            .entries
            .iter()
            .map(|e| {
                let start = e.filename.as_ptr() as usize - base;
                (e.mode, e.oid.to_owned(), start..start + e.filename.len())
            })
            .collect();
        Ok(Side { data, entries })
    }

    fn get(&self, i: usize) -> Option<EntryRef<'_>> {
        self.entries.get(i).map(|(mode, oid, name)| EntryRef {
            mode: *mode,
            filename: self.data[name.clone()].as_bstr(),
            oid,
        })
    }
}

struct Folder {
    path: BString,
    a: Side,
    b: Side,
    i: usize,
    j: usize,
}

impl Folder {
    fn read(
        repo: &gix::Repository,
        path: BString,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
    ) -> Result<Folder, StoreError> {
        Ok(Folder {
            path,
            a: Side::read(repo, old)?,
            b: Side::read(repo, new)?,
            i: 0,
            j: 0,
        })
    }
}

/// Calls `out` with each file-level change from tree `old` to tree `new` (None: empty) within
/// `paths` (everything when empty), in path order, until `out` breaks; whether every change
/// was given.
pub fn changes_in_order(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    paths: &[BString],
    out: &mut dyn FnMut(TreeChange) -> Result<ControlFlow<()>, StoreError>,
) -> Result<bool, StoreError> {
    if old == new {
        return Ok(true);
    }
    let mut stack = vec![Folder::read(repo, BString::default(), old, new)?];
    while let Some(top) = stack.last_mut() {
        let (x, y) = (top.a.get(top.i), top.b.get(top.j));
        let (ea, eb) = match step(x.as_ref(), y.as_ref()) {
            Step::Done => {
                stack.pop();
                continue;
            }
            Step::Same => {
                top.i += 1;
                top.j += 1;
                continue;
            }
            Step::Differ(ea, eb) => (ea, eb),
        };
        let (advance_a, advance_b) = (ea.is_some(), eb.is_some());
        let name = ea.or(eb).expect("one side has the entry").filename;
        let path = join_rel(&top.path, name);
        let (old_tree, old_file) = split(ea);
        let (new_tree, new_file) = split(eb);
        top.i += usize::from(advance_a);
        top.j += usize::from(advance_b);
        if !relevant(path.as_bstr(), paths) {
            continue;
        }
        if old_file != new_file && within(&path, paths) {
            let change = TreeChange {
                path: path.clone(),
                old: old_file,
                new: new_file,
            };
            if out(change)?.is_break() {
                return Ok(false);
            }
        }
        if old_tree.is_some() || new_tree.is_some() {
            stack.push(Folder::read(repo, path, old_tree, new_tree)?);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::treediff::diff_trees;

    /// A tree of `files` (path → content), written; its id.
    fn tree(repo: &gix::Repository, files: &[(&str, &str)]) -> ObjectId {
        let mut editor = repo
            .edit_tree(ObjectId::empty_tree(gix::hash::Kind::Sha1))
            .unwrap();
        for (path, content) in files {
            let blob = repo.write_blob(content).unwrap().detach();
            editor
                .upsert(*path, gix::objs::tree::EntryKind::Blob, blob)
                .unwrap();
        }
        editor.write().unwrap().detach()
    }

    /// In order, the same changes as the quick walk sorted, and a walk stopped early gives the
    /// first of them.
    #[test]
    fn changes_come_in_path_order_and_stop_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init_bare(dir.path()).unwrap();
        let old = tree(
            &repo,
            &[("a", "1"), ("a.b", "1"), ("a-b/x", "1"), ("z/q", "1")],
        );
        let new = tree(
            &repo,
            &[
                ("a/x", "2"),
                ("a.b", "2"),
                ("a-b/x", "2"),
                ("a0", "2"),
                ("z/q", "1"),
            ],
        );
        for paths in [vec![], vec![BString::from("a-b")], vec![BString::from("a")]] {
            let mut seen = Vec::new();
            let complete = changes_in_order(&repo, Some(old), Some(new), &paths, &mut |c| {
                seen.push(c);
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
            assert!(complete);
            assert_eq!(
                seen,
                diff_trees(&repo, Some(old), Some(new), &paths).unwrap()
            );
        }
        let mut first = Vec::new();
        let complete = changes_in_order(&repo, Some(old), Some(new), &[], &mut |c| {
            first.push(c.path);
            Ok(match first.len() {
                2 => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            })
        })
        .unwrap();
        assert!(!complete);
        assert_eq!(first, ["a", "a-b/x"]);
    }
}
