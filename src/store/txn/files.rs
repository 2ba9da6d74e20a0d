//! The file operations every durable write of the store is made of: a new private file, a file
//! replaced atomically and flushed, a file or folder flushed, a checksum. A leaf: everything
//! else in [`super`] (and the store's other writers) call down to it.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use gix::ObjectId;

use crate::store::error::StoreError;

/// Writes `bytes` to `path` through a temporary file and a rename, flushed to disk.
pub(crate) fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = File::create(&tmp).map_err(io)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
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

/// The SHA-1 of `data` (a pack's checksum, a journal record's).
pub(crate) fn sha1(data: &[u8]) -> Result<ObjectId, StoreError> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(data);
    hasher
        .try_finalize()
        .map_err(|e| StoreError::git("hashing", e))
}

/// Creates `path` (which must not exist) read-only to its owner, open for reading and writing.
pub(crate) fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(path)
}

/// A number no other call in this process returns (for temporary names).
pub(crate) fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The stamps of a pack's index and of its data file.
pub(crate) type PackStamp = (Option<FileStamp>, Option<FileStamp>);
/// A file's size, modification time, inode and change time (which no one can set back: a
/// write that keeps the size and resets the modification time still changes it).
pub(crate) type FileStamp = (u64, i64, i64, u64, i64, i64);

/// The stamp of the file `m` describes.
pub(crate) fn stamp_of(m: &rustix::fs::Stat) -> FileStamp {
    (
        m.st_size as u64,
        m.st_mtime,
        m.st_mtime_nsec as i64,
        m.st_ino,
        m.st_ctime,
        m.st_ctime_nsec as i64,
    )
}
