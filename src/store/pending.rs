//! Durability at the cost of ckpt's own bytes. New objects of an operation collect in one
//! pending batch — blobs in a pack being written by the capture workers, trees, commits and
//! metadata in the memory of one repository handle (which can read them back) — and
//! [`Store::write_pending`] completes the batch as one pack. A pack built in memory (up to
//! 1 MiB: every checkpoint of a change) becomes durable together with the operation's ref
//! changes in one record of the store's journal, one `fdatasync` ([`super::journal`]), and is
//! published after it; a larger one is flushed with its folder (its index too from 4 MiB; a
//! smaller pack's index is rebuilt from the pack if a power cut leaves it unfinished: see
//! `pack::repair_indices`) before any ref may name it. Nothing here waits for another process's
//! data (no `syncfs`): a build writing gigabytes next door costs a checkpoint nothing.
//!
//! Small packs accumulate (about one per checkpoint); [`Store::consolidate_packs`] merges them
//! once there are more than [`MAX_SMALL_PACKS`], so lookups stay fast.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::journal::JOURNALED_PACK_BYTES;
use super::pack::{Finished, PackWriter, Stored};
use super::{Store, StoreError};

/// Packs below this size count as small and are merged by [`Store::consolidate_packs`].
pub const SMALL_PACK_BYTES: u64 = 4 << 20;
/// New small packs allowed before they are merged (each lookup and each check of the store
/// visits every pack, so fewer is faster; a merge copies compressed bytes, so it is cheap).
pub const MAX_SMALL_PACKS: usize = 8;

/// The objects of the current operation, not yet durable.
#[derive(Default)]
pub(crate) struct Pending {
    /// Blobs from the capture workers.
    blobs: Option<Arc<PackWriter>>,
    /// Trees, commits and metadata, readable through this handle before they are flushed.
    repo: Option<gix::Repository>,
}

impl Store {
    /// The pack this operation's blobs go into (shared by the capture workers).
    pub(crate) fn pending_blobs(&self) -> Result<Arc<PackWriter>, StoreError> {
        let mut pending = self.pending.lock().expect("pending lock poisoned");
        if let Some(pack) = &pending.blobs {
            return Ok(pack.clone());
        }
        let pack = Arc::new(PackWriter::quick(self.dir())?);
        pending.blobs = Some(pack.clone());
        Ok(pack)
    }

    /// Runs `f` with the handle whose memory holds this operation's trees and commits: what it
    /// writes is pending, and it reads both pending and stored objects.
    pub(crate) fn with_pending<T>(&self, f: impl FnOnce(&gix::Repository) -> T) -> T {
        let mut pending = self.pending.lock().expect("pending lock poisoned");
        let repo = pending
            .repo
            .get_or_insert_with(|| self.own_repo().with_object_memory());
        f(repo)
    }

    /// Makes every pending object durable: one pack, fsynced with its folder, which
    /// the store's handles then load. On failure the pending objects are dropped and
    /// [`Store::take_lost`] says so once (whoever cached their ids must forget them).
    pub fn flush_objects(&self) -> Result<(), StoreError> {
        if self.write_pending()? {
            self.commit_staged()?;
            if let Some(load) = self.pack_loader() {
                load();
            }
        }
        Ok(())
    }

    /// The work of making the store's handles load the pack written last (listing the pack
    /// folder, reading the new index, mapping the pack: the next operation often reads the
    /// commit just written, a restore to it say), when they have not: the caller chooses
    /// when, e.g. after its reply. A handle that misses an object does the same by itself, so
    /// running it late, twice or never changes no result, only who waits for it.
    pub fn pack_loader(&self) -> Option<impl FnOnce() + Send + 'static> {
        let probe = self
            .unloaded
            .lock()
            .expect("unloaded lock poisoned")
            .take()?;
        let repo = self.thread_safe().clone();
        Some(move || {
            let _ = repo.to_thread_local().try_find_header(probe);
        })
    }

    /// A pack written outside the journal is readable: count it, and probe it later.
    pub(crate) fn published(&self, probe: gix::ObjectId) {
        *self.unloaded.lock().expect("unloaded lock poisoned") = Some(probe);
        self.small_packs.fetch_add(1, Ordering::Relaxed);
    }

    /// Completes the pending objects as one pack, leaving it for [`Store::pack_loader`]; says
    /// whether there was one. A pack small enough is *staged*: it becomes durable, with the
    /// operation's ref changes, in one journal record ([`Store::move_refs`],
    /// [`Store::commit_staged`]); a larger one is flushed here.
    pub(crate) fn write_pending(&self) -> Result<bool, StoreError> {
        let (blobs, memory) = {
            let mut pending = self.pending.lock().expect("pending lock poisoned");
            let memory = pending
                .repo
                .as_ref()
                .and_then(|r| r.objects.reset_object_memory());
            (pending.blobs.take(), memory)
        };
        // Only objects the store lacked are in memory: they were all written through
        // `write_object` or `write_blob`, which skip one the store has (a tree written again,
        // unchanged). They go in a fixed order, trees before the commits that name them: a
        // pack cut short keeps a commit only with everything it names in this pack.
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
        if blobs.is_none() && new.is_empty() {
            return Ok(false);
        }
        let result = (|| {
            let pack = match blobs {
                Some(pack) => Arc::try_unwrap(pack).map_err(|_| {
                    StoreError::Concurrent("a capture still writes to the pending pack".into())
                })?,
                None => PackWriter::quick(self.dir())?,
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
                    self.journal
                        .lock()
                        .expect("journal lock poisoned")
                        .stage(pack);
                    Ok(true)
                }
                Finished::Staged(pack) => {
                    let dir = self.dir().join("objects").join("pack");
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

    /// Whether enough small packs accumulated to merge them ([`Store::consolidate_packs`])
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

impl Store {
    /// Merges the small packs into one once there are more than [`MAX_SMALL_PACKS`]; returns
    /// how many were merged (0: nothing to do). The new pack is durable before any old one is
    /// removed, and only packs listed before starting are removed.
    pub fn consolidate_packs(&mut self) -> Result<usize, StoreError> {
        let merged = self.merge_small_packs();
        if merged.is_err() {
            // Tried again once as many small packs have accumulated again, not at every
            // operation.
            self.small_packs.store(0, Ordering::Relaxed);
        }
        merged
    }

    fn merge_small_packs(&mut self) -> Result<usize, StoreError> {
        let pack_dir = self.dir().join("objects").join("pack");
        let small = merge_candidates(self.dir());
        if small.len() < 2 {
            return Ok(0);
        }
        let repo = self.repo();
        let pack = PackWriter::new(self.dir())?;
        let copied = (|| {
            for stem in &small {
                copy_pack(&pack_dir, stem, &pack, &repo)?;
            }
            Ok(())
        })();
        drop(repo);
        if let Err(e) = copied {
            pack.discard();
            return Err(e);
        }
        let (_, merged) = pack.finish_named()?;
        // No journal record may name a pack about to go (a redo would write it again).
        self.retire_journal()?;
        for stem in &small {
            if merged.as_deref() == Some(stem.as_str()) {
                continue;
            }
            // The index first, so that no reader finds an index without its pack.
            for ext in ["idx", "pack"] {
                let path = pack_dir.join(format!("{stem}.{ext}"));
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove a merged pack");
                }
            }
        }
        fsync_if_present(&pack_dir)?;
        // No handle keeps a list of the removed packs.
        *self = Store::open(self.dir())?;
        tracing::info!(packs = small.len(), "merged small packs");
        Ok(small.len())
    }
}

/// Copies the objects of the small pack `stem` into `pack`: whole objects as they are
/// (compressed bytes, checked against the index's CRC-32), entries an operation stored
/// uncompressed compressed now (their id checked against their data), deltas (from someone
/// else's repack) read whole and compressed again.
fn copy_pack(
    pack_dir: &Path,
    stem: &str,
    pack: &PackWriter,
    repo: &gix::Repository,
) -> Result<(), StoreError> {
    let idx = pack_dir.join(format!("{stem}.idx"));
    let index = gix_pack::index::File::at(&idx, gix::hash::Kind::Sha1)
        .map_err(|e| StoreError::git("reading a pack index", e))?;
    let path = pack_dir.join(format!("{stem}.pack"));
    let damaged = |why: &str| StoreError::Io {
        path: path.clone(),
        source: std::io::Error::other(why.to_string()),
    };
    let data = crate::safe_io::read_small(&path, SMALL_PACK_BYTES)
        .ok_or_else(|| damaged("cannot read the pack"))?;
    // Entries end where the next one starts; the last before the 20-byte checksum.
    let mut entries: Vec<_> = index.iter().collect();
    entries.sort_by_key(|e| e.pack_offset);
    let data_end = data
        .len()
        .checked_sub(20)
        .ok_or_else(|| damaged("the pack is cut short"))?;
    for (i, entry) in entries.iter().enumerate() {
        let start = entry.pack_offset as usize;
        let end = entries
            .get(i + 1)
            .map_or(data_end, |next| next.pack_offset as usize);
        let raw = data
            .get(start..end)
            .filter(|raw| !raw.is_empty())
            .ok_or_else(|| damaged("an entry lies outside the pack"))?;
        match (super::pack::entry_kind(raw[0]), entry.crc32) {
            (Some(kind), Some(crc)) => {
                if crc32fast::hash(raw) != crc {
                    return Err(damaged("an entry does not match its CRC-32"));
                }
                // An operation's pack holds its entries uncompressed: compressed here.
                let start = super::pack::entry_data_start(raw).unwrap_or(raw.len());
                match super::pack::read_stored(&raw[start..]) {
                    Stored::Data(data) => {
                        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data)
                            .map_err(|e| StoreError::git("hashing an object", e))?;
                        if id != entry.oid {
                            return Err(damaged("an entry does not match its id"));
                        }
                        pack.add(entry.oid, kind, &data)?;
                    }
                    Stored::Broken => return Err(damaged("an entry does not match its checksum")),
                    Stored::No => pack.add_raw(entry.oid, raw, crc)?,
                }
            }
            _ => {
                let object = repo
                    .find_object(entry.oid)
                    .map_err(|e| StoreError::git("reading a packed object", e))?;
                pack.add(entry.oid, object.kind, &object.data)?;
            }
        }
    }
    Ok(())
}

/// The small packs the next merge takes: under [`SMALL_PACK_BYTES`], not kept, and not one
/// larger than all smaller ones together (earlier merges' results), so a merge copies about
/// what arrived since the last one, not everything again: sizes stay a geometric series.
pub(crate) fn merge_candidates(store_dir: &Path) -> Vec<String> {
    let mut small = small_packs(store_dir);
    small.sort_by_key(|(_, size)| std::cmp::Reverse(*size));
    let mut rest: u64 = small.iter().map(|(_, size)| size).sum();
    let mut large = 0;
    for (_, size) in &small {
        rest -= size;
        if *size <= rest {
            break;
        }
        large += 1;
    }
    small.drain(..large);
    small.into_iter().map(|(stem, _)| stem).collect()
}

/// The names (`pack-<sum>`) and sizes of the store's small packs: under [`SMALL_PACK_BYTES`],
/// not kept.
fn small_packs(store_dir: &Path) -> Vec<(String, u64)> {
    let pack_dir = store_dir.join("objects").join("pack");
    let Ok(entries) = std::fs::read_dir(&pack_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".pack")?.to_string();
            let size = e.metadata().ok().map(|m| m.len())?;
            let kept = pack_dir.join(format!("{stem}.keep")).exists();
            (size < SMALL_PACK_BYTES && !kept).then_some((stem, size))
        })
        .collect()
}

/// Fsyncs a file or folder; one that does not exist (a deleted ref) is fine. Never blocks on a
/// FIFO and never follows a symlink.
pub(crate) fn fsync_if_present(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path);
    match opened {
        Ok(file) => file.sync_all().map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}
