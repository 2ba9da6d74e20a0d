//! The index's folder tree: cached tree ids per folder, invalidated on change and written back
//! as git trees.

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::{EntryKind, EntryRef};
use gix::ObjectId;

use super::file_index::FileIndex;
use super::node::{node_at, node_in, DirNode};
use crate::filter::split_parent;
use crate::store::checkpoint::KnownChanges;
use crate::store::{Store, StoreError};

/// How [`FileIndex::write_tree`] writes the trees of folders that changed since its last
/// write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trees {
    /// Each is looked for in the store first: the files may be back in an earlier state (a
    /// restore's result, an undo), whose trees the store holds.
    LookedUp,
    /// The project moved on (a prompt's checkpoint): a changed folder's tree is almost always
    /// one the store lacks, and goes into the pending pack without a look (see
    /// `write_tree_object`).
    New,
}

impl FileIndex {
    /// Writes the trees that changed (pending in `store` until its next flush) and returns the
    /// root tree id.
    pub fn write_tree(&mut self, store: &Store, trees: Trees) -> Result<ObjectId, StoreError> {
        // Counted before the trees are written: changed folders are those without a tree id.
        let counts = self.baseline.counts(&self.root);
        let written =
            store
                .begin()
                .objects(|repo| match write_node(repo, &mut self.root, trees)? {
                    Some(id) => Ok(id),
                    None => write_empty_tree(repo),
                });
        let id = match written {
            Ok(id) => id,
            Err(e) => {
                // Some folders may hold ids of trees written since: none is a baseline now.
                self.baseline.lose();
                self.last_changes = None;
                return Err(e);
            }
        };
        self.last_changes = match (self.last_root, counts) {
            (Some(old), Some((added, modified, deleted))) => Some(KnownChanges {
                old,
                new: id,
                added,
                modified,
                deleted,
            }),
            _ => None,
        };
        self.baseline.reset();
        self.last_root = Some(id);
        Ok(id)
    }

    pub(super) fn node(&self, path: &BStr) -> Option<&DirNode> {
        node_in(&self.root, path)
    }

    /// Drops the cached tree ids of folder `dir` and of every folder above it, each recorded
    /// first as it was at the last write (see `Baseline`).
    pub(super) fn invalidate_trees(&mut self, dir: &BStr) {
        let mut node = &mut self.root;
        self.baseline.record(b"".as_bstr(), node);
        node.forget_tree();
        if dir.is_empty() {
            return;
        }
        let mut end = 0;
        for comp in dir.split(|b| *b == b'/') {
            end += comp.len();
            match node.dirs.get_mut(comp.as_bstr()) {
                Some(next) => {
                    self.baseline.record(dir[..end].as_bstr(), next);
                    next.forget_tree();
                    node = next;
                }
                None => return,
            }
            end += 1;
        }
    }

    /// Takes the folder at `path` out of the index (the root: everything).
    pub(super) fn detach(&mut self, path: &BStr) -> Option<DirNode> {
        if path.is_empty() {
            self.baseline
                .record_subtree(&BString::default(), &self.root);
            return Some(std::mem::take(&mut self.root));
        }
        let (parent, name) = split_parent(path);
        let taken = node_at(&mut self.root, parent, false)?.dirs.remove(name)?;
        // The folders above keep their files: recorded after the removal all the same.
        self.invalidate_trees(parent);
        self.baseline.record_subtree(&path.to_owned(), &taken);
        Some(taken)
    }

    pub(super) fn attach(&mut self, path: &BStr, mut node: DirNode) {
        node.tree = None;
        node.written = None;
        if path.is_empty() {
            let replaced = std::mem::replace(&mut self.root, node);
            self.baseline.record_subtree(&BString::default(), &replaced);
            return;
        }
        let (parent, name) = split_parent(path);
        self.invalidate_trees(parent);
        if let Some(dir) = node_at(&mut self.root, parent, true) {
            dir.files.remove(name);
            if let Some(replaced) = dir.dirs.insert(name.to_owned(), node) {
                self.baseline.record_subtree(&path.to_owned(), &replaced);
            }
        }
    }
}

/// Writes the tree of `node` (None when it holds no file at any depth: git has no empty folders).
pub(super) fn write_node(
    repo: &gix::Repository,
    node: &mut DirNode,
    trees: Trees,
) -> Result<Option<ObjectId>, StoreError> {
    if let Some(known) = node.tree {
        return Ok(known);
    }
    for child in node.dirs.values_mut() {
        write_node(repo, child, trees)?;
    }
    // Names and ids borrowed from the index: no copy of each entry per tree written.
    let mut entries: Vec<EntryRef<'_>> = node
        .files
        .iter()
        .map(|(name, e)| EntryRef {
            mode: e.state.kind.into(),
            filename: name.as_bytes().as_bstr(),
            oid: &e.state.id,
        })
        .collect();
    for (name, child) in &node.dirs {
        if let Some(Some(id)) = &child.tree {
            entries.push(EntryRef {
                mode: EntryKind::Tree.into(),
                filename: name.as_bstr(),
                oid: id,
            });
        }
    }
    let written = node.written.take().filter(|_| trees == Trees::New);
    let id = if entries.is_empty() {
        None
    } else {
        entries.sort();
        Some(write_tree_object(
            repo,
            gix::objs::TreeRef { entries },
            written,
        )?)
    };
    node.tree = Some(id);
    Ok(id)
}

/// The empty tree, written for real: gix takes it to exist in every repository and
/// `write_object` skips it, but git's fsck wants it in the store of every commit naming it (an
/// empty project, a fork's worktree before its files arrive).
fn write_empty_tree(repo: &gix::Repository) -> Result<ObjectId, StoreError> {
    let id = ObjectId::empty_tree(repo.object_hash());
    gix::prelude::Write::write_buf_with_known_id(&repo.objects, gix::objs::Kind::Tree, b"", id)
        .map_err(|e| StoreError::git("writing a tree", e))
}

/// Writes `tree` (pending), the folder's tree at the last write being `written` (None: look
/// first). When the project moved on ([`Trees::New`]), a folder whose tree was written before
/// and changed since almost always has a tree the store lacks: it goes straight into the
/// operation's pending objects, without looking for it in the store first (a look visits every
/// pack's index and `stat`s a loose object's path, most of the time spent writing a
/// checkpoint's trees). The rare tree the store holds all the same (a folder an agent changed
/// back to an older state) is then written again, a duplicate in the new pack and never a
/// loss. A folder with no tree written before (a new one, or any after a restart) is looked
/// for first, as is every tree of a first checkpoint or of a restore's result.
fn write_tree_object(
    repo: &gix::Repository,
    tree: gix::objs::TreeRef<'_>,
    written: Option<ObjectId>,
) -> Result<ObjectId, StoreError> {
    const WHAT: &str = "writing a tree";
    if tree.entries.is_empty() {
        return write_empty_tree(repo);
    }
    if written.is_none() {
        return repo
            .write_object(&tree)
            .map(|id| id.detach())
            .map_err(|e| StoreError::git(WHAT, e));
    }
    let mut buf = Vec::with_capacity(tree.entries.len() * 40);
    gix::objs::WriteTo::write_to(&tree, &mut buf).map_err(|e| StoreError::git(WHAT, e))?;
    let kind = gix::objs::Kind::Tree;
    let id = gix::objs::compute_hash(repo.object_hash(), kind, &buf)
        .map_err(|e| StoreError::git(WHAT, e))?;
    if written == Some(id) {
        // Changed and changed back since the last write: the store holds it.
        return Ok(id);
    }
    gix::prelude::Write::write_buf_with_known_id(&repo.objects, kind, &buf, id)
        .map_err(|e| StoreError::git(WHAT, e))
}
