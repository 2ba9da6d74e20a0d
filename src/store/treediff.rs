//! Differences between two stored trees, descending only into subtrees whose ids differ, so
//! the cost follows the size of the change, not of the project.

use std::collections::BTreeMap;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use super::diff::within;
use super::snapshot::FileState;
use super::StoreError;
use crate::filter::join_rel;

/// One file that differs: absent on one side, or different in mode or content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    pub path: BString,
    pub old: Option<FileState>,
    pub new: Option<FileState>,
}

/// The file-level changes from tree `old` to tree `new` (None: empty), limited to `paths`
/// (files or folders; everything when empty), sorted by path.
pub fn diff_trees(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    paths: &[BString],
) -> Result<Vec<TreeChange>, StoreError> {
    let mut out = Vec::new();
    walk(repo, &BString::default(), old, new, paths, &mut |c| {
        out.push(c)
    })?;
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
    walk(
        repo,
        &BString::default(),
        old,
        new,
        &[],
        &mut |c| match (c.old, c.new) {
            (None, Some(_)) => counts.0 += 1,
            (Some(_), Some(_)) => counts.1 += 1,
            (Some(_), None) => counts.2 += 1,
            (None, None) => {}
        },
    )?;
    Ok(counts)
}

/// The entries (name, kind, id) of tree `id`.
pub(crate) fn tree_entries(
    repo: &gix::Repository,
    id: ObjectId,
) -> Result<Vec<(BString, EntryKind, ObjectId)>, StoreError> {
    let tree = repo
        .find_object(id)
        .map_err(|e| StoreError::git("reading a tree", e))?
        .try_into_tree()
        .map_err(|e| StoreError::git("reading a tree", e))?;
    let decoded = tree
        .decode()
        .map_err(|e| StoreError::git("decoding a tree", e))?;
    Ok(decoded
        .entries
        .iter()
        .map(|e| (e.filename.to_owned(), e.mode.kind(), e.oid.to_owned()))
        .collect())
}

fn entries(
    repo: &gix::Repository,
    id: Option<ObjectId>,
) -> Result<BTreeMap<BString, (EntryKind, ObjectId)>, StoreError> {
    let mut map = BTreeMap::new();
    if let Some(id) = id {
        for (name, kind, oid) in tree_entries(repo, id)? {
            map.insert(name, (kind, oid));
        }
    }
    Ok(map)
}

/// True when `path` is within `paths` or leads to one of them.
fn relevant(path: &BStr, paths: &[BString]) -> bool {
    within(path, paths)
        || paths
            .iter()
            .any(|p| p.starts_with(path) && p.get(path.len()) == Some(&b'/'))
}

fn walk(
    repo: &gix::Repository,
    prefix: &BString,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    paths: &[BString],
    out: &mut dyn FnMut(TreeChange),
) -> Result<(), StoreError> {
    if old == new {
        return Ok(());
    }
    let (a, b) = (entries(repo, old)?, entries(repo, new)?);
    let mut names: Vec<&BString> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let path = join_rel(prefix, name);
        if !relevant(path.as_bstr(), paths) {
            continue;
        }
        let split = |e: Option<&(EntryKind, ObjectId)>| match e {
            Some((EntryKind::Tree, id)) => (Some(*id), None),
            Some((kind, id)) => (
                None,
                Some(FileState {
                    kind: *kind,
                    id: *id,
                }),
            ),
            None => (None, None),
        };
        let (old_tree, old_file) = split(a.get(name));
        let (new_tree, new_file) = split(b.get(name));
        if old_tree.is_some() || new_tree.is_some() {
            walk(repo, &path, old_tree, new_tree, paths, out)?;
        }
        if old_file != new_file && within(&path, paths) {
            out(TreeChange {
                path,
                old: old_file,
                new: new_file,
            });
        }
    }
    Ok(())
}
