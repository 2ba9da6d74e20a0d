//! Trees as the store holds them: the state of a path in a tree ([`FileState`]), the entries
//! of one tree, a tree read whole into a path map, and which paths a list of paths covers.
//! Snapshots, tree diffs, diffs and checkpoints read trees through here.

use std::collections::BTreeMap;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use super::StoreError;

/// One captured file, as it will appear in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileState {
    pub kind: EntryKind,
    pub id: ObjectId,
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

/// Reads the tree `id` recursively into a flat path map (trees are descended, not listed).
/// Entries that are not files or symlinks (submodule commits) are returned separately.
pub fn read_tree(
    repo: &gix::Repository,
    id: ObjectId,
) -> Result<BTreeMap<BString, FileState>, StoreError> {
    let mut files = BTreeMap::new();
    let mut stack = vec![(BString::default(), id)];
    while let Some((prefix, tree_id)) = stack.pop() {
        for (name, kind, oid) in tree_entries(repo, tree_id)? {
            let path = crate::filter::join_rel(&prefix, &name);
            match kind {
                EntryKind::Tree => stack.push((path, oid)),
                EntryKind::Blob
                | EntryKind::BlobExecutable
                | EntryKind::Link
                | EntryKind::Commit => {
                    files.insert(path, FileState { kind, id: oid });
                }
            }
        }
    }
    Ok(files)
}

/// The regular file (not a symlink) at `path` in tree `tree`.
pub fn file_at(
    repo: &gix::Repository,
    tree: ObjectId,
    path: &BStr,
) -> Result<Option<FileState>, StoreError> {
    let parts: Vec<&[u8]> = path.split_str("/").collect();
    let mut id = tree;
    for (i, part) in parts.iter().enumerate() {
        let Some((_, kind, oid)) = tree_entries(repo, id)?
            .into_iter()
            .find(|(name, _, _)| name.as_slice() == *part)
        else {
            return Ok(None);
        };
        if i + 1 == parts.len() {
            let file = matches!(kind, EntryKind::Blob | EntryKind::BlobExecutable);
            return Ok(file.then_some(FileState { kind, id: oid }));
        }
        if kind != EntryKind::Tree {
            return Ok(None);
        }
        id = oid;
    }
    Ok(None)
}

/// True when `path` is one of `paths` or lies below one of them (all paths when empty).
pub fn within(path: &[u8], paths: &[BString]) -> bool {
    paths.is_empty()
        || paths.iter().any(|p| {
            p.is_empty()
                || path == p.as_slice()
                || (path.starts_with(p) && path.get(p.len()) == Some(&b'/'))
        })
}
