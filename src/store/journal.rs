//! The store's journal: one device flush makes an operation durable.
//!
//! An operation's new pack (when it is small enough to have been built in memory) and the ref
//! changes it makes are written together as one record into `ckpt-journal`, a file in the
//! store, and flushed with one `fdatasync`. The file grows in steps of written zeros
//! ([`GROW_BYTES`]) up to [`RING_BYTES`] and records are written over what is there, so a flush
//! usually writes data only (no size or block allocation to record). Only then is the pack
//! published and the refs moved, both without flushes of their own: the record holds all it
//! takes to redo them.
//!
//! Records follow each other from the start of the file, each carrying the file's current
//! *epoch* and a SHA-1 of itself; reading stops at the first record that is cut short, does not
//! verify, or has another epoch. When the next record would not fit, or before packs are
//! removed (a merge, a gc, a damaged pack set aside), the files the records wrote are flushed
//! ("settled") and a new epoch starts at the start of the file: nothing written earlier is read
//! again.
//!
//! When a store is first opened by a process, the records of the current epoch are redone
//! ([`replay_packs`], then the store's `replay_refs`): each pack whose file is missing or
//! differs, or has no index, is written again (flushed), and each ref the records touched is
//! set to the value the last of them gave it. Every ref change of the store goes through the journal, so that value is the
//! ref's value; redoing is a no-op when nothing was lost (a `kill -9` leaves everything in the
//! page cache). Then everything is settled and a new epoch starts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use gix::ObjectId;

use super::pack::{sha1, StagedPack};
use super::pending::fsync_if_present;
use super::StoreError;

/// The journal's file name in the store (git ignores files it does not know).
pub const JOURNAL_FILE: &str = "ckpt-journal";
/// The journal's largest size: records go from its start until the next would not fit.
pub(crate) const RING_BYTES: u64 = 4 << 20;
/// The journal grows by this much (zeros written with the record that needs the room).
const GROW_BYTES: u64 = 128 << 10;
/// Packs up to this size are journaled (every pack built in memory: 1 MiB and its checksum);
/// larger ones are flushed as files.
pub(crate) const JOURNALED_PACK_BYTES: usize = (1 << 20) + 64;
const MAGIC: &[u8; 8] = b"ckptjrn1";
/// Magic, epoch, payload length.
const HEAD: usize = 8 + 8 + 4;
const SUM: usize = 20;

/// One operation's changes.
#[derive(Default)]
pub(crate) struct Record {
    /// Packs (`pack-<checksum>`, bytes).
    pub packs: Vec<(String, Vec<u8>)>,
    /// Refs and the value the operation gave them (None: deleted).
    pub refs: Vec<(String, Option<ObjectId>)>,
}

impl Record {
    fn encode(&self, epoch: u64) -> Result<Vec<u8>, StoreError> {
        let mut payload = Vec::new();
        payload.extend_from_slice(&(self.packs.len() as u32).to_le_bytes());
        for (name, bytes) in &self.packs {
            put_bytes(&mut payload, name.as_bytes());
            put_bytes(&mut payload, bytes);
        }
        payload.extend_from_slice(&(self.refs.len() as u32).to_le_bytes());
        for (name, new) in &self.refs {
            put_bytes(&mut payload, name.as_bytes());
            match new {
                Some(id) => put_bytes(&mut payload, id.as_bytes()),
                None => put_bytes(&mut payload, &[]),
            }
        }
        let mut out = Vec::with_capacity(HEAD + payload.len() + SUM);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&epoch.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&payload);
        let sum = sha1(&out)?;
        out.extend_from_slice(sum.as_bytes());
        Ok(out)
    }

    fn decode(payload: &[u8]) -> Option<Record> {
        let mut at = payload;
        let mut record = Record::default();
        for _ in 0..take_u32(&mut at)? {
            let name = String::from_utf8(take_bytes(&mut at)?.to_vec()).ok()?;
            record.packs.push((name, take_bytes(&mut at)?.to_vec()));
        }
        for _ in 0..take_u32(&mut at)? {
            let name = String::from_utf8(take_bytes(&mut at)?.to_vec()).ok()?;
            let new = match take_bytes(&mut at)? {
                [] => None,
                id => Some(ObjectId::try_from(id).ok()?),
            };
            record.refs.push((name, new));
        }
        at.is_empty().then_some(record)
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn take_u32(at: &mut &[u8]) -> Option<u32> {
    let (n, rest) = at.split_first_chunk::<4>()?;
    *at = rest;
    Some(u32::from_le_bytes(*n))
}

fn take_bytes<'a>(at: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = take_u32(at)? as usize;
    if at.len() < n {
        return None;
    }
    let (bytes, rest) = at.split_at(n);
    *at = rest;
    Some(bytes)
}

/// The records of the journal's current epoch, in order, and that epoch (None: no record).
/// A journal that is missing, is not a regular file or cannot be read has none.
pub(crate) fn read_records(store: &Path) -> (Vec<Record>, Option<u64>) {
    let mut records = Vec::new();
    let Ok(file) = crate::safe_io::open_regular(&store.join(JOURNAL_FILE)) else {
        return (records, None);
    };
    let mut epoch = None;
    let mut offset = 0u64;
    loop {
        let mut head = [0u8; HEAD];
        if file.read_exact_at(&mut head, offset).is_err() || &head[..8] != MAGIC {
            break;
        }
        let this = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
        if epoch.is_some_and(|e| e != this) {
            break;
        }
        let len = u32::from_le_bytes(head[16..20].try_into().expect("4 bytes")) as u64;
        if offset + (HEAD + SUM) as u64 + len > RING_BYTES {
            break;
        }
        let mut rest = vec![0u8; len as usize + SUM];
        if file.read_exact_at(&mut rest, offset + HEAD as u64).is_err() {
            break;
        }
        let (payload, sum) = rest.split_at(len as usize);
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        hasher.update(&head);
        hasher.update(payload);
        if hasher.try_finalize().map_or(true, |s| s.as_bytes() != sum) {
            break;
        }
        let Some(record) = Record::decode(payload) else {
            break;
        };
        epoch = Some(this);
        // The marker that starts an epoch holds nothing to redo.
        if !record.packs.is_empty() || !record.refs.is_empty() {
            records.push(record);
        }
        offset += (HEAD + SUM) as u64 + len;
    }
    (records, epoch)
}

/// Writes every pack the records hold whose file is missing or differs, or that has no index
/// (flushed, with its index; an index that exists is `pack::repair_indices`' to check); returns
/// the paths it wrote or found, for settling. A pack that does not verify
/// against its name is an error: the journal is not trusted past it.
pub(crate) fn replay_packs(store: &Path, records: &[Record]) -> Result<Vec<PathBuf>, StoreError> {
    let pack_dir = store.join("objects").join("pack");
    let mut paths = Vec::new();
    for (name, bytes) in records.iter().flat_map(|r| &r.packs) {
        let path = pack_dir.join(format!("{name}.pack"));
        paths.push(path.clone());
        let on_disk = crate::safe_io::read_small(&path, bytes.len() as u64 + 1);
        // A pack whose index is missing (never renamed in) is written again with one: the
        // index repair only mends indices that exist. One that exists but differs is its job.
        let indexed = std::fs::symlink_metadata(path.with_extension("idx")).is_ok();
        if on_disk.as_deref() == Some(bytes.as_slice()) && indexed {
            continue;
        }
        let staged = StagedPack::from_pack(name, bytes.clone()).ok_or_else(|| StoreError::Io {
            path: store.join(JOURNAL_FILE),
            source: std::io::Error::other(format!("the journal's copy of {name} does not verify")),
        })?;
        std::fs::create_dir_all(&pack_dir).map_err(|source| StoreError::Io {
            path: pack_dir.clone(),
            source,
        })?;
        staged
            .publish(&pack_dir, true)
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
        tracing::warn!(pack = %name, "wrote a pack again from the store's journal (it was lost, e.g. in a power cut)");
    }
    if !paths.is_empty() {
        paths.push(pack_dir);
    }
    Ok(paths)
}

/// The value each ref touched by the records was last given (None: deleted).
pub(crate) fn final_refs(records: &[Record]) -> BTreeMap<String, Option<ObjectId>> {
    records
        .iter()
        .flat_map(|r| r.refs.iter().cloned())
        .collect()
}

/// The journal of one store, shared by every handle of the store in this process.
pub(crate) struct Journal {
    store: PathBuf,
    file: Option<File>,
    /// The file's length.
    len: u64,
    epoch: u64,
    /// Where the next record goes.
    cursor: u64,
    /// Files and folders written since the epoch began and not flushed yet.
    unsettled: BTreeSet<PathBuf>,
    /// A record was (perhaps) written whose changes were not all made: the epoch must end
    /// before anything else is journaled, so that a replay never makes them.
    broken: bool,
    /// Packs of the current operation, complete, not yet journaled.
    staged: Vec<StagedPack>,
}

impl Journal {
    fn new(store: &Path, after: Option<u64>) -> Journal {
        Journal {
            store: store.to_path_buf(),
            file: None,
            len: 0,
            epoch: next_epoch(after.unwrap_or(0)),
            cursor: 0,
            unsettled: BTreeSet::new(),
            broken: false,
            staged: Vec::new(),
        }
    }

    pub(crate) fn stage(&mut self, pack: StagedPack) {
        self.staged.push(pack);
    }

    pub(crate) fn take_staged(&mut self) -> Vec<StagedPack> {
        std::mem::take(&mut self.staged)
    }

    pub(crate) fn has_staged(&self) -> bool {
        !self.staged.is_empty()
    }

    pub(crate) fn set_broken(&mut self) {
        self.broken = true;
    }

    /// Remembers paths to flush before the current epoch may end.
    pub(crate) fn unsettled(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.unsettled.extend(paths);
    }

    /// Ends the epoch first if a failed operation may have left a record behind.
    pub(crate) fn recover(&mut self) -> Result<(), StoreError> {
        if self.broken {
            self.retire()?;
        }
        Ok(())
    }

    /// Writes `record` and flushes it. On failure the record may or may not be on disk: the
    /// epoch ends before the next one is written.
    pub(crate) fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        self.recover()?;
        if self.open_file()? && self.cursor > 0 {
            // Another file than the one this epoch's records went to (it was replaced or
            // removed): they are not there to redo, so what they wrote is flushed first.
            self.settle()?;
            self.epoch = next_epoch(self.epoch);
            self.cursor = 0;
        }
        let mut bytes = record.encode(self.epoch)?;
        if self.cursor + bytes.len() as u64 > RING_BYTES {
            if bytes.len() as u64 > RING_BYTES {
                return Err(self.io(std::io::Error::other("record larger than the journal")));
            }
            self.settle()?;
            self.epoch = next_epoch(self.epoch);
            self.cursor = 0;
            bytes = record.encode(self.epoch)?;
        }
        let result = self.write_at(&bytes, self.cursor);
        if result.is_err() {
            self.broken = true;
        } else {
            self.cursor += bytes.len() as u64;
        }
        result
    }

    /// Flushes what the epoch's records wrote, then starts a new epoch: the records written
    /// so far are never read again.
    pub(crate) fn retire(&mut self) -> Result<(), StoreError> {
        self.settle()?;
        let epoch = next_epoch(self.epoch);
        let marker = Record::default().encode(epoch)?;
        self.write_at(&marker, 0)?;
        self.epoch = epoch;
        self.cursor = marker.len() as u64;
        self.broken = false;
        Ok(())
    }

    fn settle(&mut self) -> Result<(), StoreError> {
        while let Some(path) = self.unsettled.first().cloned() {
            fsync_if_present(&path)?;
            self.unsettled.remove(&path);
        }
        Ok(())
    }

    fn write_at(&mut self, bytes: &[u8], offset: u64) -> Result<(), StoreError> {
        self.open_file()?;
        let len = self.len;
        let file = self.file.as_ref().expect("opened above");
        let end = offset + bytes.len() as u64;
        let result = if end > len {
            // Grown with zeros, so that the next records are written over allocated blocks.
            let grown = end.div_ceil(GROW_BYTES) * GROW_BYTES;
            let mut buf = bytes.to_vec();
            buf.resize((grown - offset) as usize, 0);
            file.write_all_at(&buf, offset)
                .and_then(|()| file.sync_data())
                .map(|()| grown)
        } else {
            file.write_all_at(bytes, offset)
                .and_then(|()| file.sync_data())
                .map(|()| len)
        };
        match result {
            Ok(len) => {
                self.len = len;
                Ok(())
            }
            Err(e) => {
                // What the file holds now is not known: measured again when next opened.
                self.file = None;
                Err(self.io(e))
            }
        }
    }

    /// Opens the journal's file unless it is open, creating it (empty, flushed with the store's
    /// folder) if missing; whether it opened it now.
    fn open_file(&mut self) -> Result<bool, StoreError> {
        // A journal removed with its store (and the store made again) is opened afresh.
        if self
            .file
            .as_ref()
            .is_some_and(|f| f.metadata().map_or(true, |m| m.nlink() == 0))
        {
            self.file = None;
        }
        if self.file.is_none() {
            let path = self.store.join(JOURNAL_FILE);
            let opened = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                .open(&path);
            let file = match opened {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.create()?,
                Err(e) => return Err(self.io(e)),
            };
            let meta = file.metadata().map_err(|e| self.io(e))?;
            if !meta.is_file() {
                return Err(self.io(std::io::Error::other("the journal is not a regular file")));
            }
            self.len = meta.len();
            self.file = Some(file);
            return Ok(true);
        }
        Ok(false)
    }

    fn create(&self) -> Result<File, StoreError> {
        let path = self.store.join(JOURNAL_FILE);
        let tmp = self
            .store
            .join(format!("tmp_ckpt_journal_{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let made = (|| {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(&self.store)?.sync_all()?;
            Ok(f)
        })();
        made.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.io(e)
        })
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.store.join(JOURNAL_FILE),
            source,
        }
    }
}

/// An epoch after `after`: the clock's nanoseconds, so that one never repeats one written
/// before (even one left beyond a record that could not be read).
fn next_epoch(after: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now.max(after + 1)
}

/// The journal of each store this process opened, with the store folder's identity (a store
/// removed and made again gets a new journal).
type Registry = HashMap<PathBuf, (Identity, Arc<Mutex<Journal>>)>;
/// A folder's device, inode and birth time.
type Identity = (u64, u64, Option<std::time::SystemTime>);

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The shared journal of the store at `dir`, and whether this is the process's first open of
/// the store. The first open redoes the journal's records: `redo` gets them (and the journal,
/// to retire it) and must finish before any other handle of the store is opened; it runs under
/// the registry's lock.
pub(crate) fn open<T>(
    dir: &Path,
    redo: impl FnOnce(Option<(Vec<Record>, &mut Journal)>) -> Result<T, StoreError>,
) -> Result<(Arc<Mutex<Journal>>, T, bool), StoreError> {
    let meta = std::fs::metadata(dir).map_err(|e| StoreError::Open {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let identity = (meta.dev(), meta.ino(), meta.created().ok());
    let mut registry = registry().lock().expect("journal registry poisoned");
    if let Some((id, journal)) = registry.get(dir) {
        if *id == identity {
            let journal = journal.clone();
            drop(registry);
            return Ok((journal, redo(None)?, false));
        }
    }
    let (records, epoch) = read_records(dir);
    let mut journal = Journal::new(dir, epoch);
    let out = if records.is_empty() {
        redo(None)?
    } else {
        redo(Some((records, &mut journal)))?
    };
    let journal = Arc::new(Mutex::new(journal));
    registry.insert(dir.to_path_buf(), (identity, journal.clone()));
    Ok((journal, out, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    #[test]
    fn records_are_read_back_in_order_until_one_does_not_verify() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::new(dir.path(), None);
        let one = Record {
            packs: vec![("pack-x".into(), b"bytes".to_vec())],
            refs: vec![("refs/ckpt/dialogs/a".into(), Some(id(1)))],
        };
        let two = Record {
            packs: vec![],
            refs: vec![
                ("refs/ckpt/dialogs/a".into(), None),
                ("refs/ckpt/meta/b".into(), Some(id(2))),
            ],
        };
        j.append(&one).unwrap();
        j.append(&two).unwrap();
        let (read, epoch) = read_records(dir.path());
        assert_eq!(epoch, Some(j.epoch));
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].packs, one.packs);
        assert_eq!(read[0].refs, one.refs);
        assert_eq!(read[1].refs, two.refs);
        let last = final_refs(&read);
        assert_eq!(last["refs/ckpt/dialogs/a"], None);
        assert_eq!(last["refs/ckpt/meta/b"], Some(id(2)));

        // A byte flipped in the second record: only the first is read.
        let path = dir.path().join(JOURNAL_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let second = one.encode(j.epoch).unwrap().len();
        bytes[second + HEAD + 3] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_records(dir.path()).0.len(), 1);
        // The first cut short: none.
        bytes[HEAD + 1] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_records(dir.path()).0.is_empty());
    }

    #[test]
    fn a_new_epoch_hides_every_earlier_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::new(dir.path(), None);
        let r = |n| Record {
            packs: vec![],
            refs: vec![(format!("refs/ckpt/dialogs/d{n}"), Some(id(n)))],
        };
        for n in 0..5 {
            j.append(&r(n)).unwrap();
        }
        j.retire().unwrap();
        assert!(read_records(dir.path()).0.is_empty());
        j.append(&r(9)).unwrap();
        let (read, _) = read_records(dir.path());
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].refs, r(9).refs);
    }

    #[test]
    fn a_full_journal_settles_and_starts_again_at_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::new(dir.path(), None);
        let settled = dir.path().join("written");
        std::fs::write(&settled, b"x").unwrap();
        let big = |n: u8| Record {
            packs: vec![(format!("pack-{n}"), vec![n; 1 << 20])],
            refs: vec![("refs/ckpt/dialogs/a".into(), Some(id(n)))],
        };
        for n in 0..3 {
            j.append(&big(n)).unwrap();
        }
        j.unsettled([settled.clone()]);
        let first_epoch = j.epoch;
        j.append(&big(3)).unwrap();
        assert!(j.unsettled.is_empty(), "the old epoch's files were flushed");
        assert_ne!(j.epoch, first_epoch);
        let (read, _) = read_records(dir.path());
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].refs, big(3).refs);
    }

    #[test]
    fn a_journal_that_is_not_a_regular_file_is_refused_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(read_records(dir.path()).0.is_empty());
        let mut j = Journal::new(dir.path(), None);
        let err = j.append(&Record::default()).unwrap_err();
        assert!(err.to_string().contains(JOURNAL_FILE), "{err}");
    }
}
