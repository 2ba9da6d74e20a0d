//! A fresh, full snapshot of a project: walk it under the filter, read and hash every file and
//! symlink in parallel, and build the git trees bottom-up from the sorted path list. It uses no
//! cache at all, which makes it the reference the index is checked against (`verify`, the
//! exactness tests). Also the per-file capture shared with the index.
//!
//! A file that cannot be read, is too large, or is not a regular file or symlink is skipped and
//! reported; the rest of the snapshot goes on.

use std::collections::BTreeMap;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::{Entry, EntryKind};
use gix::ObjectId;

use std::os::fd::AsFd;

use super::pack::writer::PackWriter;
use super::tree::FileState;
use super::{Store, StoreError};
use crate::filter::{split_parent, Filter, WalkEntry};
use crate::fs::{open_dir, read_link_beneath, read_stable_seen, Beneath, StableRead};
use crate::model::{SkipReason, SkippedFile};

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("project directory {path} is not accessible: {source}")]
    Root {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Clone, Copy)]
pub struct SnapshotOptions {
    /// Write blobs into the store (false: only compute ids, e.g. for a dry run or a diff).
    pub write: bool,
    pub max_file_size: u64,
}

/// The state of a project at one moment: every captured path, and every skipped one.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub files: BTreeMap<BString, FileState>,
    pub skipped: Vec<SkippedFile>,
}

impl Snapshot {
    /// Walks and hashes the project under `filter`.
    #[tracing::instrument(skip_all, fields(root = %filter.root().display()))]
    pub fn take(
        store: &Store,
        filter: &Filter,
        options: SnapshotOptions,
    ) -> Result<Snapshot, SnapshotError> {
        std::fs::read_dir(filter.root()).map_err(|source| SnapshotError::Root {
            path: filter.root().to_path_buf(),
            source,
        })?;
        let walk = filter.walk();
        let entries = walk.files;
        let mut snapshot = Snapshot::default();
        for skip in walk.skips {
            snapshot.skipped.push(SkippedFile::new(
                &skip.rel,
                SkipReason::Unreadable,
                skip.reason,
            ));
        }

        let root = open_dir(filter.root()).map_err(|source| SnapshotError::Root {
            path: filter.root().to_path_buf(),
            source,
        })?;
        let threads = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .min(8);
        let chunk = entries.len().div_ceil(threads).max(1);
        let results: Vec<Result<Vec<Captured>, StoreError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = entries
                .chunks(chunk)
                .map(|part| {
                    let repo = store.thread_safe();
                    let root = root.as_fd();
                    scope.spawn(move || {
                        let repo = repo.to_thread_local();
                        let mut files = Beneath::new(root);
                        part.iter()
                            .map(|e| capture(&repo, &mut files, e.clone(), options, None))
                            .collect::<Result<Vec<_>, _>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("snapshot worker panicked"))
                .collect()
        });
        for captured in results {
            for captured in captured? {
                match captured {
                    Captured::File { rel, state, .. } => {
                        snapshot.files.insert(rel, state);
                    }
                    Captured::Skipped(_, skip) => snapshot.skipped.push(*skip),
                    Captured::Vanished(_) => {}
                }
            }
        }
        snapshot.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        for skip in &snapshot.skipped {
            tracing::warn!(path = %skip.path, reason = %skip.reason, "skipped while taking a snapshot");
        }
        Ok(snapshot)
    }

    /// The root tree id `files` would have, without writing anything.
    pub fn tree_id(files: &BTreeMap<BString, FileState>) -> Result<ObjectId, StoreError> {
        build_tree(files, &mut |tree| {
            let mut buf = Vec::new();
            gix::objs::WriteTo::write_to(tree, &mut buf)
                .map_err(|e| StoreError::git("encoding a tree", e))?;
            gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Tree, &buf)
                .map_err(|e| StoreError::git("hashing a tree", e))
        })
    }
}

/// The outcome of reading one walked entry.
pub(crate) enum Captured {
    File {
        rel: BString,
        state: FileState,
        stat: crate::fs::Stat,
    },
    /// Boxed: skips are rare, and every entry of a first checkpoint's results is as large as
    /// the largest kind.
    Skipped(BString, Box<SkippedFile>),
    /// It disappeared between the walk and the read.
    Vanished(BString),
}

pub(crate) fn capture(
    repo: &gix::Repository,
    files: &mut Beneath<'_>,
    entry: WalkEntry,
    options: SnapshotOptions,
    pack: Option<&PackWriter>,
) -> Result<Captured, StoreError> {
    let skip = |(code, reason): (SkipReason, String)| {
        let file = SkippedFile::new(&entry.rel, code, reason);
        Ok(Captured::Skipped(entry.rel.clone(), Box::new(file)))
    };
    let unreadable = |why: String| (SkipReason::Unreadable, why);
    let special = || {
        let why = "not a regular file or symlink (socket, fifo or device)";
        (SkipReason::SpecialFile, why.to_string())
    };
    let vanished = || Ok(Captured::Vanished(entry.rel.clone()));
    let (kind, data, stat) = if entry.is_symlink() {
        match read_link_beneath(files.root(), &entry.rel) {
            Ok(target) => (EntryKind::Link, target, entry.stat),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return vanished(),
            Err(e) => return skip(unreadable(format!("cannot read symlink: {e}"))),
        }
    } else if entry.is_file() {
        if entry.stat.size > options.max_file_size {
            return skip(too_large(entry.stat.size, options.max_file_size));
        }
        let file = match files.open(&entry.rel) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return vanished(),
            // Replaced by a symlink since the walk: capture what is there now.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return match read_link_beneath(files.root(), &entry.rel) {
                    Ok(target) => store_captured(
                        repo,
                        entry.rel,
                        EntryKind::Link,
                        target,
                        entry.stat,
                        options,
                        pack,
                    ),
                    Err(_) => vanished(),
                };
            }
            Err(e) => return skip(unreadable(format!("cannot read: {e}"))),
        };
        match read_stable_seen(&file, options.max_file_size, &entry.stat) {
            Ok(StableRead::Data { data, stat }) => {
                let kind = if stat.mode & 0o100 != 0 {
                    EntryKind::BlobExecutable
                } else {
                    EntryKind::Blob
                };
                (kind, data, stat)
            }
            Ok(StableRead::TooLarge(size)) => return skip(too_large(size, options.max_file_size)),
            // Replaced by a folder: its files come from the walk of that folder.
            Ok(StableRead::NotRegular) if file.metadata().is_ok_and(|m| m.is_dir()) => {
                return vanished()
            }
            Ok(StableRead::NotRegular) => return skip(special()),
            Ok(StableRead::Changing) => {
                return skip((SkipReason::Changing, CHANGING_WHILE_READ.into()))
            }
            Err(e) => return skip(unreadable(format!("cannot read: {e}"))),
        }
    } else {
        return skip(special());
    };
    store_captured(repo, entry.rel, kind, data, stat, options, pack)
}

/// Why a file that kept changing while it was read is not in a checkpoint.
pub const CHANGING_WHILE_READ: &str =
    "changing while read: it was rewritten during every attempt to read one version of it";

fn too_large(size: u64, max: u64) -> (SkipReason, String) {
    let why = format!(
        "larger than max_file_size ({} > {})",
        crate::model::human_bytes(size),
        crate::model::human_bytes(max)
    );
    (SkipReason::TooLarge, why)
}

/// Hashes `data` (the file at `rel`) and adds it to the pending pack (unless the store has it):
/// a failure to store is an error of the whole operation, never a skipped file.
fn store_captured(
    repo: &gix::Repository,
    rel: BString,
    kind: EntryKind,
    data: Vec<u8>,
    stat: crate::fs::Stat,
    options: SnapshotOptions,
    pack: Option<&PackWriter>,
) -> Result<Captured, StoreError> {
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &data)
        .map_err(|e| StoreError::git("hashing a file", e))?;
    let is_new = || match pack {
        Some(pack) => pack.is_new(repo, &id),
        None => !repo.objects.exists_without_refresh(&id),
    };
    if options.write && is_new() {
        // Written only into the operation's pending pack: never as a loose object, which would
        // cost an inode and its own flush.
        let pack = pack.ok_or_else(|| {
            StoreError::Concurrent("a capture that writes needs the pending pack".into())
        })?;
        pack.add(id, gix::objs::Kind::Blob, &data)?;
    }
    Ok(Captured::File {
        rel,
        state: FileState { kind, id },
        stat,
    })
}

/// Builds trees bottom-up from a flat, byte-sorted path map, handing each tree to `emit`
/// (which writes or hashes it) and returning the root's id.
fn build_tree(
    files: &BTreeMap<BString, FileState>,
    emit: &mut dyn FnMut(&gix::objs::Tree) -> Result<ObjectId, StoreError>,
) -> Result<ObjectId, StoreError> {
    // Stack of (directory path, entries so far); the path of each is a prefix of the next.
    let mut stack: Vec<(BString, Vec<Entry>)> = vec![(BString::default(), Vec::new())];
    for (path, state) in files {
        let (dir, name) = split_parent(path.as_bstr());
        // Close directories that are not ancestors of `dir`.
        while !is_ancestor_or_self(stack.last().expect("root stays").0.as_bstr(), dir) {
            close_top(&mut stack, emit)?;
        }
        // Open the directories between the top of the stack and `dir`.
        let top = stack.last().expect("root stays").0.clone();
        let rest = if top.is_empty() {
            dir
        } else {
            dir[top.len()..]
                .strip_prefix(b"/")
                .unwrap_or_default()
                .as_bstr()
        };
        if !rest.is_empty() {
            let mut cur = top;
            for comp in rest.split(|b| *b == b'/') {
                cur = crate::filter::join_rel(&cur, comp);
                stack.push((cur.clone(), Vec::new()));
            }
        }
        stack.last_mut().expect("root stays").1.push(Entry {
            mode: state.kind.into(),
            filename: name.into(),
            oid: state.id,
        });
    }
    while stack.len() > 1 {
        close_top(&mut stack, emit)?;
    }
    let (_, mut entries) = stack.pop().expect("root stays");
    entries.sort();
    emit(&gix::objs::Tree { entries })
}

fn close_top(
    stack: &mut Vec<(BString, Vec<Entry>)>,
    emit: &mut dyn FnMut(&gix::objs::Tree) -> Result<ObjectId, StoreError>,
) -> Result<(), StoreError> {
    let (path, mut entries) = stack.pop().expect("caller keeps the root");
    entries.sort();
    let id = emit(&gix::objs::Tree { entries })?;
    let (_, name) = split_parent(path.as_bstr());
    stack.last_mut().expect("root stays").1.push(Entry {
        mode: EntryKind::Tree.into(),
        filename: name.into(),
        oid: id,
    });
    Ok(())
}

fn is_ancestor_or_self(ancestor: &BStr, dir: &BStr) -> bool {
    ancestor.is_empty()
        || dir == ancestor
        || (dir.starts_with(ancestor) && dir.get(ancestor.len()) == Some(&b'/'))
}
