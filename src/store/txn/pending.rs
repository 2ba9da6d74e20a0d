//! The pending batch: an operation's new objects — blobs in a pack being written by the
//! capture workers, trees, commits and metadata in the memory of one repository handle (which
//! can read them back) — until [`Durable::write_pending`] completes them as one pack, journaled
//! with the operation's ref changes (see [`super`]). Blobs too many for the pack's memory are
//! sealed in a pack of their own before the trees are written ([`Durable::seal_large_blobs`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::durable::Durable;
use super::journal::JOURNALED_PACK_BYTES;
use super::staged::Finished;
use crate::store::error::StoreError;
use crate::store::pack::small::MAX_SMALL_PACKS;
use crate::store::pack::writer::PackWriter;

impl Durable {
    /// The pack this operation's blobs go into (shared by the capture workers).
    pub(crate) fn pending_blobs(&self) -> Result<Arc<PackWriter>, StoreError> {
        let mut pending = self.pending.lock();
        if let Some(pack) = &pending.blobs {
            return Ok(pack.clone());
        }
        let pack = PackWriter::quick(&self.dir)?;
        let pack = Arc::new(match self.holds_no_objects() {
            true => pack.in_empty_store(),
            false => pack,
        });
        pending.blobs = Some(pack.clone());
        Ok(pack)
    }

    /// Whether the store holds no object at all: nothing in `objects/` but a `pack/` with no
    /// pack and an `info/` that names no alternate (each may be missing). Anything else, or a
    /// folder that cannot be read, counts as holding objects. Once it held objects, nothing is
    /// listed again.
    fn holds_no_objects(&self) -> bool {
        if self.holds_objects.load(Ordering::Relaxed) {
            return false;
        }
        let objects = self.dir.join("objects");
        let only =
            |dir: &std::path::Path, allowed: &dyn Fn(&[u8]) -> bool| match std::fs::read_dir(dir) {
                Ok(entries) => entries.into_iter().all(|e| {
                    e.is_ok_and(|e| {
                        allowed(std::os::unix::ffi::OsStrExt::as_bytes(&*e.file_name()))
                    })
                }),
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            };
        let empty = only(&objects, &|name| name == b"info" || name == b"pack")
            && only(&objects.join("info"), &|name| name != b"alternates")
            && only(&objects.join("pack"), &|name| name.starts_with(b"tmp_"));
        if !empty {
            self.holds_objects.store(true, Ordering::Relaxed);
        }
        empty
    }

    /// Runs `f` with the handle whose memory holds this operation's trees and commits: what it
    /// writes is pending, and it reads both pending and stored objects.
    /// `handle` makes that handle when the operation has none yet.
    pub(crate) fn with_pending<T>(
        &self,
        handle: impl FnOnce() -> gix::Repository,
        f: impl FnOnce(&gix::Repository) -> T,
    ) -> T {
        let mut pending = self.pending.lock();
        let repo = pending
            .repo
            .get_or_insert_with(|| handle().with_object_memory());
        f(repo)
    }

    /// The work of making the store's handles load the pack written last (listing the pack
    /// folder, reading the new index, mapping the pack: the next operation often reads the
    /// commit just written, a restore to it say), when they have not: the caller chooses
    /// when, e.g. after its reply. A handle that misses an object does the same by itself, so
    /// running it late, twice or never changes no result, only who waits for it.
    pub(crate) fn pack_loader(
        &self,
        repo: &gix::ThreadSafeRepository,
    ) -> Option<impl FnOnce() + Send + 'static> {
        let probe = self.unloaded.lock().take()?;
        let repo = repo.clone();
        Some(move || {
            let _ = repo.to_thread_local().try_find_header(probe);
        })
    }

    /// A pack written outside the journal is readable: count it, and probe it later.
    pub(crate) fn published(&self, probe: gix::ObjectId) {
        *self.unloaded.lock() = Some(probe);
        self.small_packs.fetch_add(1, Ordering::Relaxed);
    }

    /// Completes the operation's blobs' pack now, on disk but unpublished, if there are so
    /// many that it outgrew memory (a first checkpoint, a large change; such a pack is
    /// published on its own, outside the journal, anyway): its list of objects is freed before
    /// the trees are written (at a million files the list, 42 MB, and the trees, 37 MB, were
    /// held at once). [`Durable::write_pending`] publishes it before the rest. A failure drops
    /// the blobs as a failed flush does ([`Durable::take_lost`]).
    pub(crate) fn seal_large_blobs(&self) -> Result<(), StoreError> {
        let blobs = {
            let mut pending = self.pending.lock();
            match &pending.blobs {
                Some(pack) if pack.is_large() => pending.blobs.take(),
                _ => None,
            }
        };
        let Some(pack) = blobs else {
            return Ok(());
        };
        let sealed = Arc::try_unwrap(pack)
            .map_err(|_| {
                StoreError::Concurrent("a capture still writes to the pending pack".into())
            })
            .and_then(PackWriter::seal);
        match sealed {
            Ok(sealed) => {
                self.pending.lock().sealed.extend(sealed);
                Ok(())
            }
            Err(e) => {
                self.lost.store(true, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// Completes the pending objects as one pack, leaving it for [`Durable::pack_loader`]; says
    /// whether there was one. A pack small enough is *staged*: it becomes durable, with the
    /// operation's ref changes, in one journal record ([`Durable::move_refs`],
    /// [`Durable::commit_staged`]); a larger one is flushed here.
    pub(crate) fn write_pending(&self) -> Result<bool, StoreError> {
        let (blobs, memory, sealed) = {
            let mut pending = self.pending.lock();
            let memory = pending
                .repo
                .as_ref()
                .and_then(|r| r.objects.reset_object_memory());
            let sealed = std::mem::take(&mut pending.sealed);
            (pending.blobs.take(), memory, sealed)
        };
        // Objects the store lacked are in memory, each once: most were written through
        // `write_object` or `write_blob`, which skip one the store has (a tree written again,
        // unchanged); a changed folder's tree is not looked for first (`index::tree`), and
        // the rare one the store held already is a duplicate here, never a loss. They go in
        // a fixed order, trees before the commits that name them: a pack cut short keeps a
        // commit only with everything it names in this pack.
        let mut new: Vec<_> = memory.iter().flat_map(|m| m.iter()).collect();
        new.sort_by_key(|(id, (kind, _))| {
            let rank = match kind {
                gix::objs::Kind::Blob => 0,
                gix::objs::Kind::Tree => 1,
                gix::objs::Kind::Tag => 2,
                gix::objs::Kind::Commit => 3,
            };
            (rank, **id)
        });
        if blobs.is_none() && new.is_empty() && sealed.is_empty() {
            return Ok(false);
        }
        let result = (|| {
            for pack in sealed {
                let probe = pack.first;
                if let Err(e) = pack.publish() {
                    // The rest is dropped with it: sealed packs remove their files, and so
                    // does the pack of blobs read since.
                    if let Some(blobs) = blobs.and_then(|b| Arc::try_unwrap(b).ok()) {
                        blobs.discard();
                    }
                    return Err(e);
                }
                self.published(probe);
            }
            if blobs.is_none() && new.is_empty() {
                return Ok(true);
            }
            let pack = match blobs {
                Some(pack) => Arc::try_unwrap(pack).map_err(|_| {
                    StoreError::Concurrent("a capture still writes to the pending pack".into())
                })?,
                None => PackWriter::quick(&self.dir)?,
            };
            for (id, (kind, data)) in &new {
                if let Err(e) = pack.add(**id, *kind, data) {
                    pack.discard();
                    return Err(e);
                }
            }
            let probe = pack.first_id();
            match pack.finish_staged()? {
                Finished::Empty => Ok(false),
                Finished::Staged(pack) if pack.pack.len() <= JOURNALED_PACK_BYTES => {
                    self.journal.lock().stage(pack);
                    Ok(true)
                }
                Finished::Staged(pack) => {
                    let dir = self.dir.join("objects").join("pack");
                    pack.publish(&dir, true)
                        .map_err(|source| StoreError::Io { path: dir, source })?;
                    self.checked_whole(&pack.name);
                    self.published(pack.first);
                    Ok(true)
                }
                Finished::Published => {
                    if let Some(id) = probe {
                        self.published(id);
                    }
                    Ok(true)
                }
            }
        })();
        if result.is_err() {
            self.lost.store(true, Ordering::SeqCst);
        }
        result
    }

    /// Whether enough small packs accumulated to merge them ([`Store::consolidate_packs`](crate::store::Store::consolidate_packs))
    /// when the project is quiet.
    pub fn needs_merge(&self) -> bool {
        self.small_packs.load(Ordering::Relaxed) > MAX_SMALL_PACKS
    }

    /// Whether so many accumulated (a long busy spell) that they are merged without waiting
    /// for quiet: every lookup visits every pack.
    pub fn must_merge(&self) -> bool {
        self.small_packs.load(Ordering::Relaxed) > 4 * MAX_SMALL_PACKS
    }

    /// Whether pending objects were dropped since the last call (a failed flush).
    pub fn take_lost(&self) -> bool {
        self.lost.swap(false, Ordering::SeqCst)
    }
}
