//! Merging small packs: an operation writes one pack (about one per checkpoint), and lookups
//! visit every pack, so once there are more than [`MAX_SMALL_PACKS`](super::small::MAX_SMALL_PACKS) they are merged into one,
//! durable before any of them is removed.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::entry::{read_stored, Stored};
use super::small::{merge_candidates, SMALL_PACK_BYTES};
use super::writer::PackWriter;
use crate::store::error::StoreError;
use crate::store::open::Store;
use crate::store::txn::files::fsync_if_present;

impl Store {
    /// Merges the small packs into one once there are more than [`MAX_SMALL_PACKS`](super::small::MAX_SMALL_PACKS); returns
    /// how many were merged (0: nothing to do). The new pack is durable before any old one is
    /// removed, and only packs listed before starting are removed.
    pub fn consolidate_packs(&mut self) -> Result<usize, StoreError> {
        let merged = self.merge_small_packs();
        if merged.is_err() {
            // Tried again once as many small packs have accumulated again, not at every
            // operation.
            self.durable.small_packs.store(0, Ordering::Relaxed);
        }
        merged
    }

    fn merge_small_packs(&mut self) -> Result<usize, StoreError> {
        let pack_dir = self.dir().join("objects").join("pack");
        let small = merge_candidates(self.dir());
        if small.len() < 2 {
            return Ok(0);
        }
        // What the operations since the last merge mapped goes first (the handles are made
        // anew at the end anyway): the merge's buffers never come on top of it.
        self.release_mappings()?;
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
    let data = crate::fs::read_small(&path, SMALL_PACK_BYTES)
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
        let decoded = gix_pack::data::Entry::from_bytes(raw, 0, gix::hash::Kind::Sha1)
            .map_err(|_| damaged("an entry's header cannot be read"))?;
        match (decoded.header.as_kind(), entry.crc32) {
            (Some(kind), Some(crc)) => {
                if crc32fast::hash(raw) != crc {
                    return Err(damaged("an entry does not match its CRC-32"));
                }
                // An operation's pack holds its entries uncompressed: compressed here.
                let start = decoded.header_size().min(raw.len());
                match read_stored(&raw[start..]) {
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
