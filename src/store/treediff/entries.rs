//! What both walks of a tree diff share: a folder's entries read in git's order, the step
//! that pairs two folders' entries by name, and one changed file.

use std::cmp::Ordering;

use gix::bstr::{BStr, BString};
use gix::objs::tree::EntryRef;
use gix::ObjectId;

use crate::store::tree::{within, FileState};
use crate::store::StoreError;

/// One file that differs: absent on one side, or different in mode or content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    pub path: BString,
    pub old: Option<FileState>,
    pub new: Option<FileState>,
}

/// True when `path` is within `paths` or leads to one of them.
pub(super) fn relevant(path: &BStr, paths: &[BString]) -> bool {
    within(path, paths)
        || paths
            .iter()
            .any(|p| p.starts_with(path) && p.get(path.len()) == Some(&b'/'))
}

/// One side of a folder's comparison: the entries of a stored tree in git's order (a folder's
/// name compared as if it ended in `/`).
pub(super) struct Listing<'a> {
    pub(super) entries: Vec<EntryRef<'a>>,
}

impl<'a> Listing<'a> {
    pub(super) fn new(data: &'a [u8]) -> Result<Listing<'a>, StoreError> {
        let mut entries = gix::objs::TreeRef::from_bytes(data, gix::hash::Kind::Sha1)
            .map_err(|e| StoreError::git("decoding a tree", e))?
            .entries;
        if !entries
            .windows(2)
            .all(|w| w[0].cmp(&w[1]) == Ordering::Less)
        {
            // Not in git's order (a tree git itself would refuse): sorted here, and of a name
            // listed twice the last counts, so the comparison still pairs entries by name.
            entries.sort();
            entries.reverse();
            entries.dedup_by(|later, earlier| (*later).cmp(earlier) == Ordering::Equal);
            entries.reverse();
        }
        Ok(Listing { entries })
    }
}

/// The bytes of tree `id` (empty for None).
pub(super) fn tree_data(
    repo: &gix::Repository,
    id: Option<ObjectId>,
) -> Result<Vec<u8>, StoreError> {
    let Some(id) = id else {
        return Ok(Vec::new());
    };
    let tree = repo
        .find_object(id)
        .map_err(|e| StoreError::git("reading a tree", e))?
        .try_into_tree()
        .map_err(|e| StoreError::git("reading a tree", e))?;
    Ok(tree.detach().data)
}

/// What a differing entry is on one side: a folder (its tree) or a file.
pub(super) fn split(e: Option<&EntryRef<'_>>) -> (Option<ObjectId>, Option<FileState>) {
    match e {
        Some(e) if e.mode.is_tree() => (Some(e.oid.to_owned()), None),
        Some(e) => (
            None,
            Some(FileState {
                kind: e.mode.kind(),
                id: e.oid.to_owned(),
            }),
        ),
        None => (None, None),
    }
}

/// The next step through two folders' entries side by side (each in git's order): both ended,
/// the same entry on both sides (passed over), or the entries that differ (one side's alone,
/// or the same name changed).
pub(super) enum Step<'a> {
    Done,
    Same,
    Differ(Option<&'a EntryRef<'a>>, Option<&'a EntryRef<'a>>),
}

pub(super) fn step<'a>(x: Option<&'a EntryRef<'a>>, y: Option<&'a EntryRef<'a>>) -> Step<'a> {
    match (x, y) {
        (None, None) => Step::Done,
        (Some(x), None) => Step::Differ(Some(x), None),
        (None, Some(y)) => Step::Differ(None, Some(y)),
        // Git's order (`Ord` of an entry): by name, a folder's as if it ended in `/`.
        (Some(x), Some(y)) => match x.cmp(y) {
            Ordering::Less => Step::Differ(Some(x), None),
            Ordering::Greater => Step::Differ(None, Some(y)),
            Ordering::Equal if x.oid == y.oid && x.mode == y.mode => Step::Same,
            Ordering::Equal => Step::Differ(Some(x), Some(y)),
        },
    }
}
