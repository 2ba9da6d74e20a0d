//! A pack complete on disk under temporary names, published (renamed into place, index last)
//! or removed when dropped; and the sealing of a pack file: its object count patched in, its
//! checksum appended, flushed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use crate::store::error::StoreError;

/// A pack and its index complete on disk under temporary names ([`PackWriter::seal`]).
pub(crate) struct Sealed {
    pub(super) dir: PathBuf,
    pub(super) pack: PathBuf,
    pub(super) idx: PathBuf,
    pub(super) name: String,
    /// One of its objects (to probe for it once published).
    pub(crate) first: ObjectId,
    pub(super) published: bool,
}

impl Sealed {
    /// Renames the pack and then its index into place (readers look for the index) and
    /// flushes the folder; returns the pack's name (`pack-<checksum>`).
    pub(crate) fn publish(mut self) -> Result<String, StoreError> {
        let dir = &self.dir;
        let publish = || -> std::io::Result<()> {
            std::fs::rename(&self.pack, dir.join(format!("{}.pack", self.name)))?;
            std::fs::rename(&self.idx, dir.join(format!("{}.idx", self.name)))?;
            File::open(dir)?.sync_all()
        };
        publish().map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        self.published = true;
        Ok(std::mem::take(&mut self.name))
    }
}

impl Drop for Sealed {
    /// One never published leaves nothing behind.
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.pack);
            let _ = std::fs::remove_file(&self.idx);
        }
    }
}

/// Patches the object count into the header, appends the checksum and flushes; returns the
/// checksum (which names the pack).
///
/// The checksum covers the patched header, so the file is read back once to hash it; its data
/// is flushed meanwhile from another thread (tens of MiB for a first checkpoint: each of the
/// two took ~27 ms one after the other), and the last flush only writes the checksum.
pub(super) fn seal(file: &mut File, count: &[u8; 4], tmp: &Path) -> Result<ObjectId, StoreError> {
    let io = |source| StoreError::Io {
        path: tmp.to_path_buf(),
        source,
    };
    file.seek(SeekFrom::Start(8)).map_err(io)?;
    file.write_all(count).map_err(io)?;
    let early = file.try_clone().map_err(io)?;
    let (hashed, flushed) = std::thread::scope(|scope| {
        // Without a thread to spare, the flush below does it all.
        let flusher = std::thread::Builder::new()
            .name("ckpt-pack-flush".into())
            .spawn_scoped(scope, move || early.sync_data());
        let hashed = hash_file(file);
        let flushed = flusher.map_or(Ok(()), |flusher| {
            flusher
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the flushing thread panicked")))
        });
        (hashed, flushed)
    });
    // A failed flush fails the pack: the error is reported once per open file, so the flush
    // below might not see it again.
    flushed.map_err(io)?;
    let pack_sum = hashed.map_err(io)??;
    file.seek(SeekFrom::End(0)).map_err(io)?;
    file.write_all(pack_sum.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(pack_sum)
}

/// The SHA-1 of `file`'s contents, read from its start.
fn hash_file(file: &mut File) -> std::io::Result<Result<ObjectId, StoreError>> {
    file.seek(SeekFrom::Start(0))?;
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .try_finalize()
        .map_err(|e| StoreError::git("hashing a pack", e)))
}
