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
//! differs, or has no index, is written again (flushed), and each ref change is made again
//! where the ref still holds the value the change found ([`ref_targets`]). Every ref change of
//! the store is a compare-and-swap that goes through the journal, so a ref never moves
//! backwards: one already past a record (a later record's value is in place) stays where it
//! is, whatever records could not be read. Redoing is a no-op when nothing was lost (a `kill
//! -9` leaves everything in the page cache). Then everything is settled and a new epoch starts.
//!
//! A power cut can only cut short the last record written (each is flushed before the next
//! is written). So a record that does not verify but is followed by one of its epoch that
//! does, or whose refs had already moved to the values it gives them, is damage, not a power
//! cut ([`End`]): the store reports it (the log, and `fsck` until `fsck --repair` sets it
//! aside) and keeps a copy of the journal, and nothing from that record on is redone.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::files::fsync_if_present;
use super::records::{read_records, End, Journaled, Record, JOURNAL_FILE, RING_BYTES};
use super::staged::StagedPack;
use crate::store::StoreError;

/// The journal grows by this much (zeros written with the record that needs the room).
const GROW_BYTES: u64 = 128 << 10;
/// Packs up to this size are journaled (every pack built in memory: 1 MiB and its checksum);
/// larger ones are flushed as files.
pub(crate) const JOURNALED_PACK_BYTES: usize = (1 << 20) + 64;
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
    redo: impl FnOnce(Option<(Journaled, &mut Journal)>) -> Result<T, StoreError>,
) -> Result<(Arc<Mutex<Journal>>, T, bool), StoreError> {
    let meta = std::fs::metadata(dir).map_err(|e| StoreError::Open {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let identity = (meta.dev(), meta.ino(), meta.created().ok());
    let mut registry = registry().lock();
    if let Some((id, journal)) = registry.get(dir) {
        if *id == identity {
            let journal = journal.clone();
            drop(registry);
            return Ok((journal, redo(None)?, false));
        }
    }
    let journaled = read_records(dir);
    let mut journal = Journal::new(dir, journaled.epoch);
    let out = if journaled.records.is_empty() && matches!(journaled.end, End::Clean) {
        redo(None)?
    } else {
        redo(Some((journaled, &mut journal)))?
    };
    let journal = Arc::new(Mutex::new(journal));
    registry.insert(dir.to_path_buf(), (identity, journal.clone()));
    Ok((journal, out, true))
}

#[cfg(test)]
mod tests;
