//! The index's folder tree: each folder's files and subfolders, and the git tree id it had when
//! last written.

use std::collections::BTreeMap;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;

use super::name::Name;
use crate::fs::Stat;
use crate::store::tree::FileState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub state: FileState,
    pub stat: Stat,
}

#[derive(Debug, Default)]
pub(super) struct DirNode {
    pub(super) files: BTreeMap<Name, IndexEntry>,
    pub(super) dirs: BTreeMap<BString, DirNode>,
    /// The git tree of this folder; None when unknown (something below changed).
    pub(super) tree: Option<Option<ObjectId>>,
    /// The tree this folder had at the last write, until it is written again: the store holds
    /// it, and a tree that differs from it is new (see `tree::write_node`).
    pub(super) written: Option<ObjectId>,
}

impl DirNode {
    /// Drops the cached tree id (something below changed), keeping the tree as last written.
    pub(super) fn forget_tree(&mut self) {
        if let Some(Some(id)) = self.tree.take() {
            self.written = Some(id);
        }
    }

    /// Adds many files to this folder at once (a later entry for the same name wins). A
    /// `BTreeMap` filled one insert at a time in key order leaves its nodes half full (~1.8
    /// times the bytes of its entries); built from a sorted list it fills them, so a folder
    /// that gains many files at once is rebuilt whole.
    pub(super) fn add_files(&mut self, files: Vec<(Name, IndexEntry)>) {
        if !self.dirs.is_empty() {
            for (name, _) in &files {
                self.dirs.remove(name.as_bytes().as_bstr());
            }
        }
        if files.len() < 8 || files.len() < self.files.len() / 4 {
            self.files.extend(files);
        } else {
            let known = std::mem::take(&mut self.files);
            self.files = known.into_iter().chain(files).collect();
        }
    }
}

pub(super) fn node_at<'a>(
    root: &'a mut DirNode,
    path: &BStr,
    create: bool,
) -> Option<&'a mut DirNode> {
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

/// The folder at `path` below `root`, if there is one.
pub(super) fn node_in<'a>(root: &'a DirNode, path: &BStr) -> Option<&'a DirNode> {
    let mut node = root;
    if !path.is_empty() {
        for comp in path.split(|b| *b == b'/') {
            node = node.dirs.get(comp.as_bstr())?;
        }
    }
    Some(node)
}

/// Whether any file lies below `node`.
pub(super) fn has_files(node: &DirNode) -> bool {
    !node.files.is_empty() || node.dirs.values().any(has_files)
}

/// Calls `f` with every file below `node` (whose path is `path`) and its entry, without
/// collecting them.
pub(super) fn visit_files(
    node: &DirNode,
    path: &mut BString,
    f: &mut dyn FnMut(&gix::bstr::BStr, &IndexEntry),
) {
    let at = path.len();
    let enter = |path: &mut BString, name: &[u8]| {
        if at > 0 {
            path.push(b'/');
        }
        path.extend_from_slice(name);
    };
    for (name, e) in &node.files {
        enter(path, name.as_bytes());
        f(path.as_ref(), e);
        path.truncate(at);
    }
    for (name, child) in &node.dirs {
        enter(path, name);
        visit_files(child, path, f);
        path.truncate(at);
    }
}
