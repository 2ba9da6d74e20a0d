//! Garbage collection: keep what a ref reaches, in one pack; drop everything else.
//!
//! The walk follows commits to their trees and parents (not past a commit whose history was
//! cut, see `retention`), trees to their entries, and keeps the blobs refs point at directly
//! (client metadata, notes). Every reachable object is copied into one new pack, which is made
//! durable before any old pack or loose object is removed; reflog entries that name removed
//! objects are dropped so that `git fsck` stays clean. The daemon holds the project's lock
//! throughout, so no checkpoint writes objects meanwhile.

use std::collections::HashSet;
use std::path::Path;

use gix::ObjectId;

use super::pack::writer::PackWriter;
use super::txn::files::{fsync_if_present, write_atomically};
use super::{Store, StoreError};

/// What a gc did.
#[derive(Debug, Clone)]
pub struct GcReport {
    /// Objects kept (all now in one pack).
    pub objects: usize,
    /// Loose object files and packs removed.
    pub loose_removed: usize,
    pub packs_removed: usize,
    /// Size of `objects/` before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Adds every object reachable from `roots` to `pack`, calling `on_commit` with each commit
/// it adds; returns the parents that were not followed because their child's history was cut.
/// What the pack holds is what the walk has seen: no set of ids beside the pack's own (at a
/// million objects, 44 MiB less).
pub(crate) fn pack_reachable(
    repo: &gix::Repository,
    roots: &[ObjectId],
    shallow: &HashSet<ObjectId>,
    pack: &PackWriter,
    on_commit: impl FnMut(ObjectId),
) -> Result<Vec<ObjectId>, StoreError> {
    pack_reachable_beyond(repo, roots, shallow, pack, on_commit, &|_| false)
}

/// Like [`pack_reachable`], leaving out every object `elsewhere` has, and what it reaches
/// (a place that holds an object holds everything it reaches: the worktrees' pool).
pub(crate) fn pack_reachable_beyond(
    repo: &gix::Repository,
    roots: &[ObjectId],
    shallow: &HashSet<ObjectId>,
    pack: &PackWriter,
    mut on_commit: impl FnMut(ObjectId),
    elsewhere: &dyn Fn(&ObjectId) -> bool,
) -> Result<Vec<ObjectId>, StoreError> {
    let mut todo: Vec<ObjectId> = roots.to_vec();
    let mut cut = Vec::new();
    while let Some(id) = todo.pop() {
        if pack.holds(&id) || elsewhere(&id) {
            continue;
        }
        let object = repo
            .find_object(id)
            .map_err(|e| StoreError::git("reading an object", e))?;
        match object.kind {
            gix::objs::Kind::Commit => {
                on_commit(id);
                let commit = gix::objs::CommitRef::from_bytes(&object.data, gix::hash::Kind::Sha1)
                    .map_err(|e| StoreError::git("decoding a commit", e))?;
                todo.push(commit.tree());
                if shallow.contains(&id) {
                    cut.extend(commit.parents());
                } else {
                    todo.extend(commit.parents());
                }
            }
            gix::objs::Kind::Tree => {
                let tree = gix::objs::TreeRef::from_bytes(&object.data, gix::hash::Kind::Sha1)
                    .map_err(|e| StoreError::git("decoding a tree", e))?;
                todo.extend(
                    tree.entries
                        .iter()
                        .filter(|e| !e.mode.is_commit())
                        .map(|e| e.oid.to_owned()),
                );
            }
            gix::objs::Kind::Blob | gix::objs::Kind::Tag => {}
        }
        pack.add(id, object.kind, &object.data)?;
    }
    cut.retain(|id| !pack.holds(id));
    Ok(cut)
}

impl Store {
    /// Bytes used by the store's objects (loose and packed).
    pub fn objects_size(&self) -> u64 {
        dir_size(&self.dir().join("objects"))
    }

    /// Removes every object that no ref (nor `extra_roots`, e.g. the tree the daemon's index
    /// describes) reaches, and packs the rest into one pack.
    #[tracing::instrument(skip_all, fields(store = %self.dir().display()))]
    pub fn gc(&mut self, extra_roots: &[ObjectId]) -> Result<GcReport, StoreError> {
        let bytes_before = self.objects_size();
        let repo = self.repo();
        let mut roots: Vec<ObjectId> = self
            .refs_under(&repo, "refs/")?
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        roots.extend_from_slice(extra_roots);
        let shallow = self.shallow()?;
        // A store of a worktree first gives the pool what it lacks, then keeps only the rest.
        let pool = match self.pool() {
            Some(pool) => Some(self.donate(&repo, &pool, &roots, &shallow)?),
            None => None,
        };
        let in_pool = |id: &ObjectId| pool.as_ref().is_some_and(|p| p.has_object(id));
        let pack = PackWriter::new(self.dir())?;
        pack_reachable_beyond(&repo, &roots, &shallow, &pack, |_| {}, &in_pool)?;
        drop(repo);
        // Durable (pack, index and folder fsynced) before anything is removed.
        let (objects, new_pack) = pack.finish_named()?;
        // No journal record may name a pack about to go (a redo would write it again).
        self.retire_journal()?;

        // From here on every reachable object is durable in the new pack, and is reachable
        // exactly when its index names it (read from the file, mapped: nothing held besides).
        let objects_dir = self.dir().join("objects");
        let kept = match &new_pack {
            Some(name) => {
                let idx = objects_dir.join("pack").join(format!("{name}.idx"));
                let index = gix_pack::index::File::at(&idx, gix::hash::Kind::Sha1)
                    .map_err(|e| StoreError::git("reading the new pack's index", e))?;
                Some(index)
            }
            None => None,
        };
        let reachable = |id: &ObjectId| {
            kept.as_ref()
                .is_some_and(|index| index.lookup(id).is_some())
                || in_pool(id)
        };
        trim_reflogs(&self.dir().join("logs"), &reachable)?;
        let kept_shallow: HashSet<ObjectId> =
            shallow.iter().copied().filter(|id| reachable(id)).collect();
        if kept_shallow != shallow {
            self.write_shallow(&kept_shallow)?;
        }
        drop(kept);
        let mut loose_removed = 0;
        let mut packs_removed = 0;
        for entry in read_dir(&objects_dir)? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                for file in read_dir(&entry.path())? {
                    remove(&file.path())?;
                    loose_removed += 1;
                }
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        let pack_dir = objects_dir.join("pack");
        for entry in read_dir(&pack_dir)? {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".pack") else {
                continue;
            };
            if new_pack.as_deref() == Some(stem) || pack_dir.join(format!("{stem}.keep")).exists() {
                continue;
            }
            // The index first, so that no reader finds an index without its pack.
            for ext in ["idx", "rev", "bitmap", "mtimes"] {
                let other = pack_dir.join(format!("{stem}.{ext}"));
                if other.exists() {
                    remove(&other)?;
                }
            }
            remove(&path)?;
            packs_removed += 1;
        }
        fsync_if_present(&pack_dir)?;
        self.reopen()?;
        let report = GcReport {
            objects,
            loose_removed,
            packs_removed,
            bytes_before,
            bytes_after: self.objects_size(),
        };
        tracing::info!(?report, "gc done");
        Ok(report)
    }

    /// Opens the repository again, so that no cached pack list or mapping outlives a gc or a
    /// damaged pack (reading a mapping past a truncated file's end kills the process).
    pub fn reopen(&mut self) -> Result<(), StoreError> {
        *self = Store::open(self.dir())?;
        Ok(())
    }
}

/// Drops reflog lines that name an object outside `reachable` (`git fsck` checks them).
fn trim_reflogs(dir: &Path, reachable: &dyn Fn(&ObjectId) -> bool) -> Result<(), StoreError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            trim_reflogs(&path, reachable)?;
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let known = |hex: &str| {
            ObjectId::from_hex(hex.as_bytes()).is_ok_and(|id| id.is_null() || reachable(&id))
        };
        let kept: Vec<&str> = text
            .lines()
            .filter(|line| {
                let mut ids = line.splitn(3, ' ');
                let (old, new) = (ids.next().unwrap_or(""), ids.next().unwrap_or(""));
                known(old) && known(new)
            })
            .collect();
        if kept.len() != text.lines().count() {
            let mut out = kept.join("\n");
            if !out.is_empty() {
                out.push('\n');
            }
            write_atomically(&path, out.as_bytes())?;
        }
    }
    Ok(())
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>, StoreError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries.flatten().collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(StoreError::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

fn remove(path: &Path) -> Result<(), StoreError> {
    std::fs::remove_file(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Bytes in the files below `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
