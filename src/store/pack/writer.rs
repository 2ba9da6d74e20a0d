//! Writing many objects at once as one pack and its index (v2), instead of one loose file per
//! object: the first checkpoint of a large project writes ~2 files instead of ~100,000.
//!
//! Entries are compressed by the capture workers in parallel and appended to a temporary pack
//! file; [`PackWriter::finish`] patches the object count, appends the checksum, writes the
//! index, flushes the pack (and the index of a pack of 4 MiB or more) to disk, and publishes the
//! pack before its index (readers look for the index), both read-only to their owner (0400:
//! stores are private). Objects already in the store or already in this pack are skipped.
//! An operation's pack ([`PackWriter::quick`]) stores its first 128 KiB of entries without
//! compression; merging small packs compresses them.
//!
//! A small pack's index is derived data: if a power cut leaves it unfinished,
//! [`super::index::repair_indices`] rebuilds it from the pack when the store is next opened.
//!
//! The writer and its index writer are ckpt's own, over gix's object encoding: gix-pack's
//! `Bundle::write_to_directory` re-inflates every entry to index it (+1.2 s and +190 MB for a
//! 100,000-file first checkpoint, see `docs/decisions.md`), and an operation's pack is built in
//! memory and journaled before any file exists, which no gix writer does.

use parking_lot::Mutex;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::entry::{deflate_into, entry_header, store_into};
use super::index::{index_bytes, write_index, Written};
use super::sealed::{seal, Sealed};
use super::small::SMALL_PACK_BYTES;
use crate::store::error::StoreError;
use crate::store::txn::files::{create_private, sha1, unique};
use crate::store::txn::staged::{Finished, StagedPack};

/// A pack up to this size is built in memory and written in one go (no temporary file until
/// it is finished, no reading it back to checksum it); a larger one spills to its file.
const IN_MEMORY_BYTES: usize = 1 << 20;

/// Where the pack's bytes go: memory first, its temporary file once it grows.
enum Sink {
    Memory(Vec<u8>),
    File(std::io::BufWriter<File>),
}

struct State {
    sink: Sink,
    offset: u64,
    entries: Vec<Written>,
    /// The ids the pack holds, as positions in `entries` (4 bytes an object, not a second
    /// copy of each id: at a million files the set of ids was larger than the entries).
    ids: hashbrown::HashTable<u32>,
    /// A write failed part way: the file may hold half an entry, so the pack is never finished.
    broken: bool,
}

/// Ids are already uniformly distributed: their first bytes are their hash.
fn id_hash(id: &ObjectId) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&id.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

impl State {
    fn holds(&self, id: &ObjectId) -> bool {
        let entries = &self.entries;
        self.ids
            .find(id_hash(id), |&i| entries[i as usize].id == *id)
            .is_some()
    }

    /// Records the entry just written at the end of `entries`.
    fn push(&mut self, entry: Written) {
        let State { entries, ids, .. } = self;
        let position = u32::try_from(entries.len()).expect("a pack holds at most 2^32 objects");
        ids.insert_unique(id_hash(&entry.id), position, |&i| {
            id_hash(&entries[i as usize].id)
        });
        entries.push(entry);
    }

    fn write(&mut self, bytes: &[u8], tmp: &Path) -> std::io::Result<()> {
        if let Sink::Memory(buf) = &mut self.sink {
            if buf.len() + bytes.len() <= IN_MEMORY_BYTES {
                buf.extend_from_slice(bytes);
                return Ok(());
            }
            // Writers hold the pack's lock while they write: 8 KiB at a time (the default),
            // a first checkpoint made ~4,600 writes under it, each making the others wait.
            let mut file = std::io::BufWriter::with_capacity(256 << 10, create_private(tmp)?);
            file.write_all(buf)?;
            self.sink = Sink::File(file);
        }
        match &mut self.sink {
            Sink::File(file) => file.write_all(bytes),
            Sink::Memory(_) => unreachable!("spilled just above"),
        }
    }
}

impl Sink {
    /// Patches in the object count and appends the checksum; returns the complete pack's file
    /// (flushed to disk) and its checksum, which names it.
    fn seal(self, count: usize, tmp: &Path) -> Result<(File, ObjectId), StoreError> {
        let io = |source| StoreError::Io {
            path: tmp.to_path_buf(),
            source,
        };
        let count = (count as u32).to_be_bytes();
        match self {
            Sink::Memory(mut buf) => {
                buf[8..12].copy_from_slice(&count);
                let sum = sha1(&buf)?;
                buf.extend_from_slice(sum.as_bytes());
                let mut file = create_private(tmp).map_err(io)?;
                file.write_all(&buf).map_err(io)?;
                file.sync_all().map_err(io)?;
                Ok((file, sum))
            }
            Sink::File(file) => {
                let mut file = file.into_inner().map_err(|e| io(e.into_error()))?;
                let sum = seal(&mut file, &count, tmp)?;
                Ok((file, sum))
            }
        }
    }
}

/// A pack being written. Shared by the threads that add to it.
pub struct PackWriter {
    dir: PathBuf,
    tmp: PathBuf,
    state: Mutex<State>,
    /// Entries are stored uncompressed while the pack is under [`QUICK_BYTES`] (see
    /// [`PackWriter::quick`]).
    quick: bool,
    /// The store held no object when this pack started (see [`PackWriter::is_new`]).
    store_was_empty: bool,
}

/// A quick pack stores its entries uncompressed up to this size: an operation's few changed
/// files, trees and commit. Past it (a first checkpoint) entries are compressed as usual.
const QUICK_BYTES: u64 = 128 << 10;

impl PackWriter {
    /// Starts a pack in the store's `objects/pack` folder.
    pub fn new(store_dir: &Path) -> Result<PackWriter, StoreError> {
        Self::new_in(store_dir.join("objects").join("pack"))
    }

    /// Starts an operation's pack, whose entries are stored without compression while it is
    /// small: a zlib stream clears a 128 KiB table before its first byte, so compressing an
    /// operation's dozens of small objects took longer than writing them whole. Merging
    /// small packs ([`Store::consolidate_packs`]) compresses them, after the reply.
    ///
    /// [`Store::consolidate_packs`]: super::Store::consolidate_packs
    pub fn quick(store_dir: &Path) -> Result<PackWriter, StoreError> {
        Ok(PackWriter {
            quick: true,
            ..Self::new(store_dir)?
        })
    }

    /// Starts a pack whose temporary file lives in `dir`.
    pub fn new_in(dir: PathBuf) -> Result<PackWriter, StoreError> {
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            path: dir.clone(),
            source,
        })?;
        let tmp = dir.join(format!("tmp_ckpt_{}_{}.pack", std::process::id(), unique()));
        // The object count is patched in when the pack is sealed.
        let header = b"PACK\0\0\0\x02\0\0\0\0".to_vec();
        Ok(PackWriter {
            dir,
            tmp,
            state: Mutex::new(State {
                offset: header.len() as u64,
                sink: Sink::Memory(header),
                entries: Vec::new(),
                ids: hashbrown::HashTable::new(),
                broken: false,
            }),
            quick: false,
            store_was_empty: false,
        })
    }

    /// Marks the pack as started in a store that held no object at all (no pack, no loose
    /// object, no alternate: a project's first checkpoint), so that [`PackWriter::is_new`] need
    /// not ask the store. Asking costs a `stat` of a loose object's path per new object, a
    /// tenth of a first checkpoint's time.
    pub(crate) fn in_empty_store(self) -> PackWriter {
        PackWriter {
            store_was_empty: true,
            ..self
        }
    }

    /// Whether `id` still has to be written: neither this pack nor the store holds it. A wrong
    /// `true` only ever costs a duplicate entry (objects that reach the store meanwhile, from
    /// a fetch or a pool, are written again); it never says `false` for a missing object.
    pub(crate) fn is_new(&self, repo: &gix::Repository, id: &ObjectId) -> bool {
        if self.store_was_empty {
            !self.holds(id)
        } else {
            !repo.objects.exists_without_refresh(id)
        }
    }

    /// Adds an object (its id already computed) unless the pack holds it already.
    pub fn add(&self, id: ObjectId, kind: gix::objs::Kind, data: &[u8]) -> Result<(), StoreError> {
        if self.lock().holds(&id) {
            return Ok(());
        }
        let mut entry = Vec::with_capacity(data.len() / 2 + 16);
        entry_header(kind, data.len(), &mut entry);
        if self.quick && self.lock().offset < QUICK_BYTES {
            store_into(data, &mut entry);
        } else {
            deflate_into(data, &mut entry).map_err(|source| self.io(source))?;
        }
        let crc32 = crc32fast::hash(&entry);
        self.append(id, &entry, crc32)
    }

    /// Whether the pack holds `id` already.
    pub(crate) fn holds(&self, id: &ObjectId) -> bool {
        self.lock().holds(id)
    }

    /// Adds an entry copied as it is from another pack (`raw`: its header and compressed data,
    /// whose CRC-32 is `crc32`), unless the pack holds it already. Only whole objects: a delta
    /// names its base by where it was.
    pub fn add_raw(&self, id: ObjectId, raw: &[u8], crc32: u32) -> Result<(), StoreError> {
        self.append(id, raw, crc32)
    }

    fn append(&self, id: ObjectId, entry: &[u8], crc32: u32) -> Result<(), StoreError> {
        let mut state = self.lock();
        if state.holds(&id) {
            return Ok(());
        }
        let offset = state.offset;
        if let Err(source) = state.write(entry, &self.tmp) {
            state.broken = true;
            return Err(self.io(source));
        }
        state.offset += entry.len() as u64;
        state.push(Written { id, offset, crc32 });
        Ok(())
    }

    /// Makes room for `objects` more entries at once (a first checkpoint knows how many files
    /// it reads): growing by doubling would leave up to half the room unused.
    pub fn reserve(&self, objects: usize) {
        let mut state = self.lock();
        let State { entries, ids, .. } = &mut *state;
        entries.reserve(objects);
        ids.reserve(objects, |&i| id_hash(&entries[i as usize].id));
    }

    /// Whether the pack outgrew memory ([`IN_MEMORY_BYTES`]) for its temporary file: it is
    /// then published on its own, never through the store's journal.
    pub(crate) fn is_large(&self) -> bool {
        matches!(self.lock().sink, Sink::File(_))
    }

    /// Some object of this pack, if any.
    pub fn first_id(&self) -> Option<ObjectId> {
        self.lock().entries.first().map(|e| e.id)
    }

    /// Gives up on the pack: its temporary file (if it has one yet) is removed.
    pub fn discard(self) {
        drop(self.state);
        let _ = std::fs::remove_file(&self.tmp);
    }

    /// Completes, flushes and publishes the pack; returns how many objects it holds. An empty
    /// pack is discarded.
    pub fn finish(self) -> Result<usize, StoreError> {
        self.finish_named().map(|(count, _)| count)
    }

    /// Completes the pack. One small enough to have stayed in memory is returned whole,
    /// written nowhere yet (the caller makes it durable in the store's journal and then
    /// publishes it: see [`StagedPack::publish`]); a larger one is flushed and published as
    /// [`PackWriter::finish`] does.
    pub(crate) fn finish_staged(self) -> Result<Finished, StoreError> {
        let state = self.state.into_inner();
        if state.broken || state.entries.is_empty() || !matches!(state.sink, Sink::Memory(_)) {
            let result = Self::complete(&self.dir, &self.tmp, state);
            if result.is_err() {
                let _ = std::fs::remove_file(&self.tmp);
            }
            return Ok(match result? {
                Some(_) => Finished::Published,
                None => Finished::Empty,
            });
        }
        let State {
            sink, mut entries, ..
        } = state;
        let Sink::Memory(mut pack) = sink else {
            unreachable!("checked above")
        };
        pack[8..12].copy_from_slice(&(entries.len() as u32).to_be_bytes());
        let sum = sha1(&pack)?;
        pack.extend_from_slice(sum.as_bytes());
        let first = entries[0].id;
        entries.sort_unstable_by_key(|e| e.id);
        let idx = index_bytes(&entries, sum)?;
        Ok(Finished::Staged(StagedPack {
            name: format!("pack-{sum}"),
            pack,
            idx,
            first,
        }))
    }

    /// Like [`PackWriter::finish`], also returning the pack's name (`pack-<checksum>`).
    pub fn finish_named(self) -> Result<(usize, Option<String>), StoreError> {
        let state = self.state.into_inner();
        let count = state.entries.len();
        let tmp = self.tmp.clone();
        let result = Self::complete(&self.dir, &tmp, state);
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map(|name| (count, name))
    }

    /// Completes the pack on disk as [`PackWriter::finish`] does, under temporary names: it is
    /// published later ([`Sealed::publish`]), or removed if dropped first. None if empty.
    pub(crate) fn seal(self) -> Result<Option<Sealed>, StoreError> {
        let state = self.state.into_inner();
        let result = Self::seal_files(&self.dir, &self.tmp, state);
        if result.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        result
    }

    fn complete(dir: &Path, tmp: &Path, state: State) -> Result<Option<String>, StoreError> {
        match Self::seal_files(dir, tmp, state)? {
            Some(sealed) => sealed.publish().map(Some),
            None => Ok(None),
        }
    }

    fn seal_files(dir: &Path, tmp: &Path, state: State) -> Result<Option<Sealed>, StoreError> {
        if state.broken {
            return Err(StoreError::Io {
                path: tmp.to_path_buf(),
                source: std::io::Error::other("an earlier write to this pack failed"),
            });
        }
        if state.entries.is_empty() {
            drop(state);
            let _ = std::fs::remove_file(tmp);
            return Ok(None);
        }
        let State {
            sink,
            mut entries,
            ids,
            offset,
            ..
        } = state;
        drop(ids);
        let (file, pack_sum) = sink.seal(entries.len(), tmp)?;
        drop(file);

        entries.sort_unstable_by_key(|e| e.id);
        let sealed = Sealed {
            dir: dir.to_path_buf(),
            pack: tmp.to_path_buf(),
            idx: dir.join(format!("tmp_ckpt_{}_{}.idx", std::process::id(), unique())),
            name: format!("pack-{pack_sum}"),
            first: entries[0].id,
            published: false,
        };
        // Both files are created read-only to their owner (0400), so nothing changes their
        // mode later; the descriptor opened to create them still writes.
        // A small pack's index is not flushed: after a power cut, [`repair_indices`] rebuilds
        // it from the pack, which is. A larger one's is (rebuilding it would read the pack).
        let flush_index = offset + 20 >= SMALL_PACK_BYTES;
        let index = || -> std::io::Result<()> {
            let f = write_index(&entries, pack_sum, create_private(&sealed.idx)?)?;
            if flush_index {
                f.sync_all()?;
            }
            Ok(())
        };
        index().map_err(|source| StoreError::Io {
            path: sealed.idx.clone(),
            source,
        })?;
        Ok(Some(sealed))
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.tmp.clone(),
            source,
        }
    }
}

impl PackWriter {
    /// Completes the pack and writes `header` followed by it to `dest` (a git bundle, say);
    /// no index is written and nothing enters the store.
    /// The file is written beside `dest` and renamed into place, so a symlink at `dest` is
    /// replaced, never written through; an existing `dest` is refused unless `replace`.
    pub fn finish_into(
        self,
        header: &[u8],
        dest: &Path,
        replace: bool,
    ) -> Result<usize, StoreError> {
        let state = self.state.into_inner();
        let count = state.entries.len();
        let tmp = self.tmp.clone();
        let out_tmp = dest.with_file_name(format!(
            "{}{}-bundle-{}",
            crate::filter::TEMP_PREFIX,
            std::process::id(),
            unique()
        ));
        let result = (|| {
            let io = |source| StoreError::Io {
                path: dest.to_path_buf(),
                source,
            };
            let (mut file, _) = state.sink.seal(count, &tmp)?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&out_tmp)
                .map_err(io)?;
            out.write_all(header).map_err(io)?;
            std::io::copy(&mut file, &mut out).map_err(io)?;
            out.sync_all().map_err(io)?;
            drop(out);
            let flags = match replace {
                true => rustix::fs::RenameFlags::empty(),
                false => rustix::fs::RenameFlags::NOREPLACE,
            };
            rustix::fs::renameat_with(rustix::fs::CWD, &out_tmp, rustix::fs::CWD, dest, flags)
                .map_err(|e| io(e.into()))
        })();
        let _ = std::fs::remove_file(&tmp);
        let _ = std::fs::remove_file(&out_tmp);
        result.map(|()| count)
    }
}

#[cfg(test)]
mod tests;
