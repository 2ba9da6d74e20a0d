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
//! `repair_indices` rebuilds it from the pack when the store is next opened.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gix::ObjectId;

use super::pending::SMALL_PACK_BYTES;
use super::StoreError;

struct Written {
    id: ObjectId,
    offset: u64,
    crc32: u32,
}

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
            let mut file = std::io::BufWriter::new(create_private(tmp)?);
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

/// What finishing a pack gave.
pub(crate) enum Finished {
    /// It held nothing; nothing was written.
    Empty,
    /// Flushed and published.
    Published,
    /// Complete in memory, written nowhere yet.
    Staged(StagedPack),
}

/// A complete pack and its index, in memory.
pub(crate) struct StagedPack {
    /// `pack-<checksum>`.
    pub name: String,
    pub pack: Vec<u8>,
    pub idx: Vec<u8>,
    /// The object written first (a probe for loading the pack).
    pub first: ObjectId,
}

impl StagedPack {
    /// A staged pack from its bytes alone (as the journal holds it): None unless it verifies.
    pub(crate) fn from_pack(name: &str, pack: Vec<u8>) -> Option<StagedPack> {
        let idx = index_from_pack(&pack)?;
        let sum = ObjectId::try_from(&pack[pack.len() - 20..]).ok()?;
        if name != format!("pack-{sum}") {
            return None;
        }
        // Any object will do as the probe: the first in the index.
        let first = ObjectId::try_from(idx.get(8 + 256 * 4..8 + 256 * 4 + 20)?).ok()?;
        Some(StagedPack {
            name: name.to_string(),
            pack,
            idx,
            first,
        })
    }

    /// Writes the pack and then its index into `dir` under their names (temporary files
    /// renamed into place, read-only to their owner), replacing what is there. `durable`:
    /// both files and the folder are flushed too; otherwise the journal holds the pack.
    pub(crate) fn publish(&self, dir: &Path, durable: bool) -> std::io::Result<()> {
        self.publish_into(dir, durable, None)
    }

    /// [`StagedPack::publish`], writing into files made ahead of time where `spares` has them
    /// (and making its own where it has none, or where one of them cannot be used).
    pub(crate) fn publish_into(
        &self,
        dir: &Path,
        durable: bool,
        spares: Option<&Spares>,
    ) -> std::io::Result<()> {
        if let Some(spares) = spares {
            if let Some(pair) = spares.take_pair() {
                match self.write_files(dir, durable, pair) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        // Most likely someone emptied their folder: the others go too.
                        tracing::debug!(error = %e, "cannot publish through spare files; making new ones");
                        spares.clear();
                    }
                }
            }
        }
        let tmp = |ext: &str| {
            let path = dir.join(format!(
                "tmp_ckpt_{}_{}.{ext}",
                std::process::id(),
                unique()
            ));
            let file = create_private(&path)?;
            Ok::<_, std::io::Error>(Spare { path, file })
        };
        let pack = tmp("pack")?;
        let idx = match tmp("idx") {
            Ok(idx) => idx,
            Err(e) => {
                let _ = std::fs::remove_file(&pack.path);
                return Err(e);
            }
        };
        self.write_files(dir, durable, [pack, idx])
    }

    /// Writes the pack and its index into `files` (new, empty), then renames them into place.
    fn write_files(&self, dir: &Path, durable: bool, files: [Spare; 2]) -> std::io::Result<()> {
        let paths = [files[0].path.clone(), files[1].path.clone()];
        let result = (|| {
            for (spare, bytes) in files.into_iter().zip([&self.pack, &self.idx]) {
                let mut f = spare.file;
                f.write_all(bytes)?;
                if durable {
                    f.sync_all()?;
                }
            }
            std::fs::rename(&paths[0], dir.join(format!("{}.pack", self.name)))?;
            std::fs::rename(&paths[1], dir.join(format!("{}.idx", self.name)))?;
            if durable {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        if result.is_err() {
            for path in &paths {
                let _ = std::fs::remove_file(path);
            }
        }
        result
    }
}

/// An empty file made ahead of time (see [`Spares`]).
pub(crate) struct Spare {
    path: PathBuf,
    file: File,
}

/// Empty files the next publish writes its pack and index into, made after a reply: creating a
/// file took 0.2–0.35 ms on this project's test machine (twice per operation, on the way to
/// its reply) where writing one of tens of KiB takes 0.04. They live in the store's
/// [`SPARE_DIR`](super::SPARE_DIR), which a daemon that starts empties, and are removed when the
/// store is dropped.
#[derive(Default)]
pub(crate) struct Spares(Mutex<Vec<Spare>>);

/// Spare files kept ready: two packs and their indexes (a restore publishes twice: its undo
/// point and its result).
const SPARES: usize = 4;

impl Spares {
    /// Two spare files (for a pack and its index), if there are two.
    fn take_pair(&self) -> Option<[Spare; 2]> {
        let mut ready = self.0.lock().expect("spares lock poisoned");
        if ready.len() < 2 {
            return None;
        }
        let (a, b) = (ready.pop()?, ready.pop()?);
        Some([a, b])
    }

    /// Drops (and removes) every spare file.
    fn clear(&self) {
        let mut ready = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let all = std::mem::take(&mut *ready);
        drop(ready);
        for spare in all {
            let _ = std::fs::remove_file(&spare.path);
        }
    }

    /// Whether fewer than [`SPARES`] are ready.
    pub(crate) fn short(&self) -> bool {
        self.0.lock().expect("spares lock poisoned").len() < SPARES
    }

    /// Makes spare files in `folder` (a real folder of the store) until a publish has enough.
    pub(crate) fn top_up(&self, folder: &Path) {
        while self.short() {
            let path = folder.join(format!("spare-{}-{}", std::process::id(), unique()));
            match create_private(&path) {
                Ok(file) => self
                    .0
                    .lock()
                    .expect("spares lock poisoned")
                    .push(Spare { path, file }),
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "cannot make a spare file");
                    return;
                }
            }
        }
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        self.clear();
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
        })
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
        let state = self.state.into_inner().expect("pack lock poisoned");
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
        let state = self.state.into_inner().expect("pack lock poisoned");
        let count = state.entries.len();
        let tmp = self.tmp.clone();
        let result = Self::complete(&self.dir, &tmp, state);
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map(|name| (count, name))
    }

    fn complete(dir: &Path, tmp: &Path, state: State) -> Result<Option<String>, StoreError> {
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
        let name = format!("pack-{pack_sum}");
        let idx_tmp = dir.join(format!("tmp_ckpt_{}_{}.idx", std::process::id(), unique()));
        // Both files are created read-only to their owner (0400), so nothing changes their
        // mode later; the descriptor opened to create them still writes.
        // A small pack's index is not flushed: after a power cut, [`repair_indices`] rebuilds
        // it from the pack, which is. A larger one's is (rebuilding it would read the pack).
        let flush_index = offset + 20 >= SMALL_PACK_BYTES;
        let publish = || -> std::io::Result<()> {
            let f = write_index(&entries, pack_sum, create_private(&idx_tmp)?)?;
            if flush_index {
                f.sync_all()?;
            }
            drop(f);
            std::fs::rename(tmp, dir.join(format!("{name}.pack")))?;
            std::fs::rename(&idx_tmp, dir.join(format!("{name}.idx")))?;
            File::open(dir)?.sync_all()
        };
        publish().map_err(|source| {
            let _ = std::fs::remove_file(&idx_tmp);
            StoreError::Io {
                path: dir.to_path_buf(),
                source,
            }
        })?;
        Ok(Some(name))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("pack lock poisoned")
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
        let state = self.state.into_inner().expect("pack lock poisoned");
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

/// Patches the object count into the header, appends the checksum and flushes; returns the
/// checksum (which names the pack).
fn seal(file: &mut File, count: &[u8; 4], tmp: &Path) -> Result<ObjectId, StoreError> {
    let io = |source| StoreError::Io {
        path: tmp.to_path_buf(),
        source,
    };
    file.seek(SeekFrom::Start(8)).map_err(io)?;
    file.write_all(count).map_err(io)?;
    // The checksum covers the patched header, so read the whole file back once.
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let pack_sum = hasher
        .try_finalize()
        .map_err(|e| StoreError::git("hashing a pack", e))?;
    file.seek(SeekFrom::End(0)).map_err(io)?;
    file.write_all(pack_sum.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(pack_sum)
}

/// The SHA-1 of `data` (a pack's checksum, a journal record's).
pub(crate) fn sha1(data: &[u8]) -> Result<ObjectId, StoreError> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(data);
    hasher
        .try_finalize()
        .map_err(|e| StoreError::git("hashing", e))
}

/// Creates `path` (which must not exist) read-only to its owner, open for reading and writing.
fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(path)
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

thread_local! {
    /// Each thread's compressor, reset for every object: setting one up allocates and clears
    /// a few hundred KiB, which dominated small objects.
    static DEFLATE: std::cell::RefCell<Option<gix::zlib::stream::deflate::Compress>> =
        const { std::cell::RefCell::new(None) };
}

/// Appends `data`, zlib-compressed (fastest level: gc may recompress), to `out`.
fn deflate_into(data: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    use gix::zlib::stream::deflate::{Compress, FlushCompress};
    use gix::zlib::Status;
    DEFLATE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let z = cell.get_or_insert_with(|| Compress::new(gix::zlib::Compression::BEST_SPEED));
        z.reset();
        let mut input = data;
        let mut buf = [0u8; 16 * 1024];
        loop {
            let (before_in, before_out) = (z.total_in(), z.total_out());
            let status = z
                .compress(input, &mut buf, FlushCompress::Finish)
                .map_err(std::io::Error::other)?;
            out.extend_from_slice(&buf[..(z.total_out() - before_out) as usize]);
            input = &input[(z.total_in() - before_in) as usize..];
            match status {
                Status::StreamEnd => return Ok(()),
                Status::Ok | Status::BufError => {
                    if z.total_in() == before_in && z.total_out() == before_out {
                        return Err(std::io::Error::other("zlib made no progress"));
                    }
                }
            }
        }
    })
}

/// Appends `data` as a zlib stream of stored blocks: no compression, and no table to clear.
fn store_into(data: &[u8], out: &mut Vec<u8>) {
    out.reserve(data.len() + 2 + 5 * (data.len() / 0xffff + 1) + 4);
    // Deflate with a 32 KiB window, fastest level; (0x78 << 8 | 0x01) is a multiple of 31.
    out.extend_from_slice(&[0x78, 0x01]);
    let mut blocks = data.chunks(0xffff).peekable();
    if data.is_empty() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let len = block.len() as u16;
        out.push(u8::from(blocks.peek().is_none()));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&zlib_rs::adler32::adler32(1, data).to_be_bytes());
}

/// What a pack entry's zlib stream is, as [`store_into`] writes them.
#[derive(Debug, PartialEq)]
pub(crate) enum Stored {
    /// Stored blocks only, their checksum verified: the data.
    Data(Vec<u8>),
    /// Stored blocks only, whose checksum does not match their data.
    Broken,
    /// Anything else (compressed blocks, another layout): copied as it is.
    No,
}

/// Reads a zlib stream made only of stored blocks.
pub(crate) fn read_stored(stream: &[u8]) -> Stored {
    let Some((header, mut rest)) = stream.split_at_checked(2) else {
        return Stored::No;
    };
    // Deflate, no preset dictionary, a valid header check.
    if header[0] & 0x0f != 8
        || header[1] & 0x20 != 0
        || u16::from_be_bytes([header[0], header[1]]) % 31 != 0
    {
        return Stored::No;
    }
    let mut data = Vec::new();
    loop {
        let Some((&head, after)) = rest.split_first() else {
            return Stored::No;
        };
        if head & !1 != 0 {
            return Stored::No; // A compressed block (or stray bits).
        }
        let Some((lengths, after)) = after.split_at_checked(4) else {
            return Stored::No;
        };
        let len = u16::from_le_bytes([lengths[0], lengths[1]]);
        if !len != u16::from_le_bytes([lengths[2], lengths[3]]) {
            return Stored::No;
        }
        let Some((block, after)) = after.split_at_checked(usize::from(len)) else {
            return Stored::No;
        };
        data.extend_from_slice(block);
        rest = after;
        if head & 1 == 1 {
            break;
        }
    }
    match <[u8; 4]>::try_from(rest) {
        Ok(sum) if u32::from_be_bytes(sum) == zlib_rs::adler32::adler32(1, &data) => {
            Stored::Data(data)
        }
        Ok(_) => Stored::Broken,
        Err(_) => Stored::No,
    }
}

/// Where the zlib stream of a pack entry starts (after its type-and-size header).
pub(crate) fn entry_data_start(raw: &[u8]) -> Option<usize> {
    raw.iter().position(|b| b & 0x80 == 0).map(|i| i + 1)
}

/// The kind of a whole object from the first byte of its pack entry; None for a delta.
pub(crate) fn entry_kind(first: u8) -> Option<gix::objs::Kind> {
    match (first >> 4) & 7 {
        1 => Some(gix::objs::Kind::Commit),
        2 => Some(gix::objs::Kind::Tree),
        3 => Some(gix::objs::Kind::Blob),
        4 => Some(gix::objs::Kind::Tag),
        _ => None,
    }
}

/// The pack entry header: type and size, 4 then 7 bits at a time.
fn entry_header(kind: gix::objs::Kind, size: usize, out: &mut Vec<u8>) {
    let t: u8 = match kind {
        gix::objs::Kind::Commit => 1,
        gix::objs::Kind::Tree => 2,
        gix::objs::Kind::Blob => 3,
        gix::objs::Kind::Tag => 4,
    };
    let mut byte = (t << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// The version 2 index of a pack whose entries are sorted by id.
fn index_bytes(entries: &[Written], pack_sum: ObjectId) -> Result<Vec<u8>, StoreError> {
    let out = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    write_index(entries, pack_sum, out).map_err(|e| StoreError::git("hashing", e))
}

/// Writes the version 2 index of `entries` (sorted by id) of the pack whose checksum is
/// `pack_sum` to `out` as it goes, hashed in the buffer's chunks: a pack's index is never whole
/// in memory (28 bytes an object). Returns `out`.
fn write_index<W: std::io::Write>(
    entries: &[Written],
    pack_sum: ObjectId,
    out: W,
) -> std::io::Result<W> {
    let hashing = gix::hash::io::Write::new(out, gix::hash::Kind::Sha1);
    let mut out = std::io::BufWriter::with_capacity(64 << 10, hashing);
    out.write_all(b"\xfftOc")?;
    out.write_all(&2u32.to_be_bytes())?;
    let mut fanout = [0u32; 256];
    for e in entries {
        fanout[e.id.as_bytes()[0] as usize] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        out.write_all(&total.to_be_bytes())?;
    }
    for e in entries {
        out.write_all(e.id.as_bytes())?;
    }
    for e in entries {
        out.write_all(&e.crc32.to_be_bytes())?;
    }
    let mut large = Vec::new();
    for e in entries {
        if e.offset < 0x8000_0000 {
            out.write_all(&(e.offset as u32).to_be_bytes())?;
        } else {
            out.write_all(&(0x8000_0000 | large.len() as u32).to_be_bytes())?;
            large.push(e.offset);
        }
    }
    for off in large {
        out.write_all(&off.to_be_bytes())?;
    }
    out.write_all(pack_sum.as_bytes())?;
    let gix::hash::io::Write { mut inner, hash } = out.into_inner().map_err(|e| e.into_error())?;
    let sum = hash.try_finalize().map_err(std::io::Error::other)?;
    inner.write_all(sum.as_bytes())?;
    Ok(inner)
}

impl super::Store {
    /// Writes a git bundle (v2) to `dest` holding `commits` (named `refs/heads/ckpt-<id>`, the
    /// first also as HEAD) with every object they reach and their client metadata, so
    /// `git clone` and `git fetch` read it and `ckpt import` restores the metadata too.
    pub fn export_bundle(
        &self,
        commits: &[ObjectId],
        dest: &Path,
        replace: bool,
    ) -> Result<usize, StoreError> {
        let repo = self.repo();
        let mut header = String::from("# v2 git bundle\n");
        for (i, id) in commits.iter().enumerate() {
            if i == 0 {
                header.push_str(&format!("{id} HEAD\n"));
            }
            header.push_str(&format!(
                "{id} refs/heads/ckpt-{}\n",
                id.to_hex_with_len(12)
            ));
        }
        header.push('\n');
        let pack = PackWriter::new(self.dir())?;
        let shallow = self.shallow()?;
        let mut walked = Vec::new();
        let cut = super::gc::pack_reachable(&repo, commits, &shallow, &pack, |id| walked.push(id))?;
        // Client metadata is named in a commit header, not linked: add it so an import keeps it.
        for id in walked {
            let Ok(c) = self.checkpoint(&repo, id) else {
                continue;
            };
            if let Some(blob) = Self::meta_blob_of(&c) {
                let object = repo
                    .find_object(blob)
                    .map_err(|e| StoreError::git("reading metadata", e))?;
                pack.add(blob, object.kind, &object.data)?;
            }
        }
        // History that retention cut away: the bundle names it as a prerequisite.
        for id in cut {
            header.insert_str(
                "# v2 git bundle\n".len(),
                &format!("-{id} pruned by ckpt retention\n"),
            );
        }
        pack.finish_into(header.as_bytes(), dest, replace)
    }
}

/// Rebuilds the indices of small packs that do not match their pack: a small pack's index is
/// written without a flush (see [`PackWriter::finish_named`]), so a power cut may leave it cut
/// short or holding stale blocks, while the pack, flushed, is whole. Each is rebuilt from its
/// pack (which must verify: its checksum, every entry a whole object) and flushed. A pack that
/// does not verify is left as it is, for the store's damage check to report. Returns the packs
/// whose index was rebuilt.
pub(crate) fn repair_indices(pack_dir: &Path) -> Vec<String> {
    let Ok(listing) = std::fs::read_dir(pack_dir) else {
        return Vec::new();
    };
    let mut rebuilt = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".idx").filter(|s| s.starts_with("pack-")) else {
            continue;
        };
        let pack_path = pack_dir.join(format!("{stem}.pack"));
        // Both are read only as regular files (a FIFO is never read, so nothing blocks) and
        // never past the small-pack size.
        let Some(pack) = crate::safe_io::read_small(&pack_path, SMALL_PACK_BYTES) else {
            continue;
        };
        let idx = crate::safe_io::read_small(&entry.path(), 2 * SMALL_PACK_BYTES);
        if idx.is_some_and(|idx| index_matches(&idx, &pack)) {
            continue;
        }
        let Some(fresh) = index_from_pack(&pack) else {
            continue;
        };
        let tmp = pack_dir.join(format!("tmp_ckpt_{}_{}.idx", std::process::id(), unique()));
        let publish = || -> std::io::Result<()> {
            let mut f = create_private(&tmp)?;
            f.write_all(&fresh)?;
            f.sync_all()?;
            drop(f);
            std::fs::rename(&tmp, entry.path())?;
            File::open(pack_dir)?.sync_all()
        };
        match publish() {
            Ok(()) => {
                tracing::warn!(pack = %stem, "rebuilt a pack's index from the pack (it did not match, e.g. after a power cut)");
                rebuilt.push(stem.to_string());
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(pack = %stem, error = %e, "cannot rebuild a pack's index");
            }
        }
    }
    rebuilt
}

/// Whether `idx` is a whole version 2 index of `pack`: its own checksum holds, it names the
/// pack's checksum and as many objects as the pack's header.
fn index_matches(idx: &[u8], pack: &[u8]) -> bool {
    const HEAD: usize = 8 + 256 * 4;
    if idx.len() < HEAD + 40 || pack.len() < 32 || !idx.starts_with(b"\xfftOc\0\0\0\x02") {
        return false;
    }
    let (body, own_sum) = idx.split_at(idx.len() - 20);
    let count = u32::from_be_bytes(idx[HEAD - 4..HEAD].try_into().expect("4 bytes"));
    body[body.len() - 20..] == pack[pack.len() - 20..]
        && pack[8..12] == count.to_be_bytes()
        && sha1(body).is_ok_and(|sum| sum.as_bytes() == own_sum)
}

/// The version 2 index of `pack`, a pack of whole objects (what [`PackWriter`] writes), from
/// the pack alone: each entry is inflated to find where it ends and which object it is. None
/// when the pack does not verify (its checksum, an entry cut short or not whole, a delta).
pub(crate) fn index_from_pack(pack: &[u8]) -> Option<Vec<u8>> {
    use gix::zlib::{Decompress, FlushDecompress, Status};
    if pack.len() < 32 || !pack.starts_with(b"PACK\0\0\0\x02") {
        return None;
    }
    let end = pack.len() - 20;
    let sum = ObjectId::try_from(&pack[end..]).ok()?;
    if sha1(&pack[..end]).ok()? != sum {
        return None;
    }
    let count = u32::from_be_bytes(pack[8..12].try_into().ok()?);
    let mut entries = Vec::with_capacity(count.min(1 << 20) as usize);
    let mut inflate = Decompress::new();
    let mut data = Vec::new();
    let mut offset = 12;
    for _ in 0..count {
        let start = offset;
        let mut byte = *pack.get(offset)?;
        let kind = entry_kind(byte)?;
        let mut size = u64::from(byte & 0x0f);
        let mut shift = 4;
        while byte & 0x80 != 0 {
            offset += 1;
            byte = *pack.get(offset)?;
            if shift > 57 {
                return None;
            }
            size |= u64::from(byte & 0x7f) << shift;
            shift += 7;
        }
        offset += 1;
        // One byte of room past the size: a stream that holds more does not end.
        data.clear();
        data.resize(usize::try_from(size).ok()?.checked_add(1)?, 0);
        inflate.reset();
        let status = inflate
            .decompress(pack.get(offset..end)?, &mut data, FlushDecompress::Finish)
            .ok()?;
        if status != Status::StreamEnd || inflate.total_out() != size {
            return None;
        }
        offset += usize::try_from(inflate.total_in()).ok()?;
        data.truncate(size as usize);
        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data).ok()?;
        entries.push(Written {
            id,
            offset: start as u64,
            crc32: crc32fast::hash(&pack[start..offset]),
        });
    }
    if offset != end {
        return None;
    }
    entries.sort_unstable_by_key(|e| e.id);
    index_bytes(&entries, sum).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds `data` to `pack` as a blob; returns its id.
    fn add_blob(pack: &PackWriter, data: &[u8]) -> ObjectId {
        let id =
            gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data).unwrap();
        pack.add(id, gix::objs::Kind::Blob, data).unwrap();
        id
    }

    /// What `git verify-pack -v` says of the pack of index `idx` (which it must accept).
    fn verify_pack(idx: &Path) -> String {
        crate::testing::git([
            std::ffi::OsStr::new("verify-pack"),
            "-v".as_ref(),
            idx.as_os_str(),
        ])
    }

    /// The pack's set of ids tells apart ids that share their first 8 bytes (its hash), and
    /// an id added twice is written once.
    #[test]
    fn ids_sharing_their_hash_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let pack = PackWriter::new_in(dir.path().to_path_buf()).unwrap();
        pack.reserve(3);
        let id = |last: u8| {
            let mut bytes = [7u8; 20];
            bytes[19] = last;
            ObjectId::from_bytes_or_panic(&bytes)
        };
        for round in 0..2 {
            for n in 0..200u8 {
                pack.add_raw(id(n), &[0x30 + round], 0).unwrap();
            }
        }
        let state = pack.lock();
        assert_eq!(state.entries.len(), 200);
        assert!((0..200).all(|n| state.holds(&id(n))));
        assert!(!state.holds(&id(200)));
        assert!(state
            .entries
            .iter()
            .enumerate()
            .all(|(n, e)| e.id == id(n as u8)));
    }

    /// A real pack of blobs, some of them twice, is what git reads back.
    #[test]
    fn a_pack_with_repeated_blobs_verifies_with_git() {
        let dir = tempfile::tempdir().unwrap();
        let pack = PackWriter::new_in(dir.path().to_path_buf()).unwrap();
        for n in 0..3000 {
            add_blob(&pack, format!("blob {}\n", n % 1000).as_bytes());
        }
        let (count, name) = pack.finish_named().unwrap();
        assert_eq!(count, 1000);
        let idx = dir.path().join(format!("{}.idx", name.unwrap()));
        let listed = verify_pack(&idx)
            .lines()
            .filter(|l| l.contains(" blob "))
            .count();
        assert_eq!(listed, 1000);
    }

    /// Stored streams read back as written, across block boundaries; compressed, damaged
    /// or cut-short streams are told apart.
    #[test]
    fn stored_streams_read_back_and_others_are_told_apart() {
        for len in [0, 1, 100, 0xffff, 0x10000, 200_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut stream = Vec::new();
            store_into(&data, &mut stream);
            assert_eq!(read_stored(&stream), Stored::Data(data.clone()), "{len}");
            // Any zlib reader agrees.
            let mut inflated = vec![0u8; len + 1];
            let mut z = gix::zlib::Decompress::new();
            z.decompress(&stream, &mut inflated, gix::zlib::FlushDecompress::Finish)
                .unwrap();
            assert_eq!(z.total_out() as usize, len);
            assert_eq!(&inflated[..len], data.as_slice());
            if len > 0 {
                let mut flipped = stream.clone();
                flipped[8] ^= 1;
                assert_eq!(read_stored(&flipped), Stored::Broken, "{len}");
            }
            assert_eq!(read_stored(&stream[..stream.len() - 1]), Stored::No);
            let mut compressed = Vec::new();
            deflate_into(&data, &mut compressed).unwrap();
            if len > 0 {
                assert_eq!(read_stored(&compressed), Stored::No, "{len}");
            }
        }
        assert_eq!(read_stored(b""), Stored::No);
        assert_eq!(read_stored(b"\x78\x9c"), Stored::No);
    }

    /// An operation's pack stores its first entries uncompressed and compresses the rest;
    /// git reads every one back.
    #[test]
    fn a_quick_pack_stores_small_entries_and_git_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let pack = PackWriter::quick(dir.path()).unwrap();
        let text = |n: usize| format!("line {n} of a text that compresses well\n").repeat(n);
        let mut ids = Vec::new();
        for n in 0..400 {
            let data = text(n);
            ids.push((add_blob(&pack, data.as_bytes()), data.len()));
        }
        let (count, name) = pack.finish_named().unwrap();
        assert_eq!(count, 400);
        let idx = dir
            .path()
            .join("objects/pack")
            .join(format!("{}.idx", name.unwrap()));
        let listed = verify_pack(&idx);
        // `<id> blob <size> <size in pack> <offset>`
        let in_pack = |id: &ObjectId| {
            let line = listed
                .lines()
                .find(|l| l.starts_with(&id.to_string()))
                .unwrap();
            let fields: Vec<u64> = line
                .split_whitespace()
                .skip(2)
                .map(|f| f.parse().unwrap())
                .collect();
            (fields[1], fields[2])
        };
        let (first, size) = ids[50];
        let (stored, offset) = in_pack(&first);
        assert!(offset < QUICK_BYTES && stored > size as u64, "{listed}");
        let (last, size) = ids[399];
        let (compressed, offset) = in_pack(&last);
        assert!(
            offset > QUICK_BYTES && compressed < size as u64 / 4,
            "{listed}"
        );
    }

    #[test]
    fn entry_headers_encode_sizes() {
        let mut out = Vec::new();
        entry_header(gix::objs::Kind::Blob, 15, &mut out);
        assert_eq!(out, vec![0x3f]);
        out.clear();
        entry_header(gix::objs::Kind::Blob, 16, &mut out);
        assert_eq!(out, vec![0xb0, 0x01]);
        out.clear();
        entry_header(gix::objs::Kind::Tree, 2000, &mut out);
        assert_eq!(out, vec![0xa0, 0x7d]);
    }

    /// A pack of blobs, trees and a commit, some large enough to take several bytes of entry
    /// header; returns its name.
    fn sample_pack(dir: &Path) -> String {
        let pack = PackWriter::new_in(dir.to_path_buf()).unwrap();
        let add = |kind, data: Vec<u8>| {
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data).unwrap();
            pack.add(id, kind, &data).unwrap();
        };
        for n in 0..300 {
            add(
                gix::objs::Kind::Blob,
                format!("blob {n}\n").repeat(n * 7).into_bytes(),
            );
        }
        add(gix::objs::Kind::Blob, Vec::new());
        add(gix::objs::Kind::Tree, Vec::new());
        add(
            gix::objs::Kind::Commit,
            b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nmessage\n".to_vec(),
        );
        pack.finish_named().unwrap().1.unwrap()
    }

    /// A pack's index rebuilt from the pack alone is the index written with it, byte for
    /// byte; a pack that does not verify gives none.
    #[test]
    fn an_index_rebuilt_from_its_pack_is_the_one_written() {
        let dir = tempfile::tempdir().unwrap();
        let name = sample_pack(dir.path());
        let pack = std::fs::read(dir.path().join(format!("{name}.pack"))).unwrap();
        let idx = std::fs::read(dir.path().join(format!("{name}.idx"))).unwrap();
        assert!(index_matches(&idx, &pack));
        assert_eq!(index_from_pack(&pack).as_deref(), Some(idx.as_slice()));
        for at in [
            0,
            9,
            12,
            13,
            100,
            pack.len() / 2,
            pack.len() - 21,
            pack.len() - 1,
        ] {
            let mut bad = pack.clone();
            bad[at] ^= 0x40;
            assert_eq!(index_from_pack(&bad), None, "byte {at} flipped");
        }
        assert_eq!(index_from_pack(&pack[..pack.len() - 1]), None);
        assert_eq!(index_from_pack(&[]), None);
        let cut = &idx[..idx.len() - 1];
        assert!(!index_matches(cut, &pack));
        let mut stale = idx.clone();
        stale[1100..1200].fill(0);
        assert!(!index_matches(&stale, &pack));
    }

    /// Indices cut short, emptied or holding stale blocks are rebuilt from their packs and
    /// flushed; an index that matches is left alone, and a damaged pack's index is not rebuilt
    /// from it.
    #[test]
    fn indices_that_do_not_match_are_rebuilt_from_their_packs() {
        let dir = tempfile::tempdir().unwrap();
        let one_blob = |data: &[u8]| {
            let pack = PackWriter::new_in(dir.path().to_path_buf()).unwrap();
            let kind = gix::objs::Kind::Blob;
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, data).unwrap();
            pack.add(id, kind, data).unwrap();
            pack.finish_named().unwrap().1.unwrap()
        };
        let (a, b, c) = (sample_pack(dir.path()), one_blob(b"b"), one_blob(b"c"));
        let path = |stem: &str, ext: &str| dir.path().join(format!("{stem}.{ext}"));
        let original: Vec<Vec<u8>> = [&a, &b, &c]
            .iter()
            .map(|s| std::fs::read(path(s, "idx")).unwrap())
            .collect();
        assert!(
            repair_indices(dir.path()).is_empty(),
            "whole indices were rebuilt"
        );
        let overwrite = |p: PathBuf, bytes: &[u8]| {
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            std::fs::write(&p, bytes).unwrap();
        };
        overwrite(path(&a, "idx"), &original[0][..original[0].len() / 2]);
        let mut stale = original[1].clone();
        stale[8..1032].fill(0);
        overwrite(path(&b, "idx"), &stale);
        overwrite(path(&c, "idx"), b"");
        let mut rebuilt = repair_indices(dir.path());
        rebuilt.sort();
        let mut expected = vec![a.clone(), b.clone(), c.clone()];
        expected.sort();
        assert_eq!(rebuilt, expected);
        for (stem, bytes) in [&a, &b, &c].iter().zip(&original) {
            assert_eq!(&std::fs::read(path(stem, "idx")).unwrap(), bytes, "{stem}");
        }
        // A damaged pack: its index stays as it is, for the damage check to report.
        let mut pack = std::fs::read(path(&c, "pack")).unwrap();
        let last = pack.len() - 25;
        pack[last] ^= 1;
        overwrite(path(&c, "pack"), &pack);
        overwrite(path(&c, "idx"), b"short");
        assert!(repair_indices(dir.path()).is_empty());
        assert_eq!(std::fs::read(path(&c, "idx")).unwrap(), b"short");
        // A FIFO where an index should be is never opened for reading (that would block): it
        // is replaced by the index rebuilt from its pack.
        std::fs::remove_file(path(&b, "idx")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(path(&b, "idx"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(repair_indices(dir.path()), vec![b.clone()]);
        assert_eq!(std::fs::read(path(&b, "idx")).unwrap(), original[1]);
    }
}
