//! Reading a file whole: only a regular file (a FIFO or a device is refused, never waited on),
//! read until two looks agree, so an in-place rewrite is never read as a mix of two versions.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use super::stat::{now_ns, Stat};

/// How many times a file that changes while it is read is read again before it is skipped.
const READ_ATTEMPTS: usize = 4;
/// A file modified this recently may be written again within the same timestamp tick, which
/// a stat comparison cannot see: such a file is read twice and the reads compared.
const RACY_NS: i64 = 50_000_000;

/// Opens `path` (from a request or a config) for reading if it is a regular file; a FIFO,
/// a device or a folder is refused with `InvalidInput` instead of blocking.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_with_size(path).map(|(file, _)| file)
}

/// [`open_regular`], and the file's size when opened.
fn open_regular_with_size(path: &Path) -> io::Result<(File, u64)> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = File::from(fd);
    let size = ensure_regular(&file)?.len();
    Ok((file, size))
}

/// Reads a text file named by a user (a configuration, an agent's settings) of at most 16 MiB,
/// refusing a FIFO, a device or a folder instead of blocking on it.
pub fn read_text(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    open_regular(path)?
        .take(16 << 20)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Reads a small text file (an ignore file, a `.git` pointer) if it is a regular file of at
/// most `max` bytes; None when it is absent, not regular or too large.
pub fn read_small(path: &Path, max: u64) -> Option<Vec<u8>> {
    let (file, size) = open_regular_with_size(path).ok()?;
    // A larger file is not read at all (a store's packs: one of 5 MB was read 4 MiB deep to
    // find it too large, at each open); one that grows meanwhile is cut at `max + 1` and refused.
    if size > max {
        return None;
    }
    let mut data = Vec::with_capacity(size as usize);
    file.take(max + 1).read_to_end(&mut data).ok()?;
    (data.len() as u64 <= max).then_some(data)
}

fn ensure_regular(file: &File) -> io::Result<std::fs::Metadata> {
    let meta = file.metadata()?;
    if meta.is_file() {
        Ok(meta)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a folder, FIFO, socket or device)",
        ))
    }
}

/// The outcome of [`read_stable`].
#[derive(Debug)]
pub enum StableRead {
    /// The bytes of one version of the file, and the stat they belong to.
    Data { data: Vec<u8>, stat: Stat },
    /// Larger than the limit (its size).
    TooLarge(u64),
    /// Not a regular file any more.
    NotRegular,
    /// It kept changing while it was read.
    Changing,
}

/// Reads the open `file` as one version that existed on disk: the stat before and after the
/// read must agree (a growing file is fine as long as the bytes read are still its prefix),
/// and a file modified within the last timestamp tick is read twice and compared. Retries a
/// few times, then gives up with [`StableRead::Changing`].
pub fn read_stable(file: &File, max: u64) -> io::Result<StableRead> {
    for _ in 0..READ_ATTEMPTS {
        let Ok(meta) = ensure_regular(file) else {
            return Ok(StableRead::NotRegular);
        };
        let before = Stat::of(&meta);
        if before.size > max {
            return Ok(StableRead::TooLarge(before.size));
        }
        let data = read_at_most(file, before.size)?;
        if data.len() as u64 != before.size {
            continue; // It shrank meanwhile.
        }
        let after = Stat::of(&file.metadata()?);
        let same = after.size == before.size
            && after.mtime_ns == before.mtime_ns
            && after.ctime_ns == before.ctime_ns;
        let stable = if same {
            // A write within the same tick leaves the stat as it was: compare a second read.
            !is_racy(&after) || read_at_most(file, before.size)? == data
        } else {
            // Appends keep what was read: it is a prefix that existed on disk.
            after.size > before.size && read_at_most(file, before.size)? == data
        };
        if stable {
            return Ok(StableRead::Data { data, stat: before });
        }
    }
    Ok(StableRead::Changing)
}

/// [`read_stable`] for a file a walk has just seen as a regular file with the stat `seen`: when
/// the open file's stat after the read is `seen` (inode, size, times), nothing changed it since
/// the walk (within the current tick, a second read agrees), so no stat is taken before the
/// read. Anything else (changed or replaced since, a FIFO: `pread` refuses it) goes through
/// [`read_stable`]; a device node put in its place (which takes the right to make one) is read
/// for at most `seen.size` bytes before its stat refuses it.
pub fn read_stable_seen(file: &File, max: u64, seen: &Stat) -> io::Result<StableRead> {
    if seen.size <= max {
        if let Ok(data) = read_at_most(file, seen.size) {
            let meta = file.metadata()?;
            let after = Stat::of(&meta);
            if meta.is_file()
                && data.len() as u64 == seen.size
                && after == *seen
                && (!is_racy(&after) || read_at_most(file, seen.size)? == data)
            {
                return Ok(StableRead::Data { data, stat: after });
            }
        }
    }
    read_stable(file, max)
}

/// Reads the first `len` bytes of `file` (fewer if it is shorter now) from offset 0.
fn read_at_most(file: &File, len: u64) -> io::Result<Vec<u8>> {
    let mut data = vec![0u8; len as usize];
    let mut filled = 0;
    while filled < data.len() {
        match file.read_at(&mut data[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    data.truncate(filled);
    Ok(data)
}

fn is_racy(stat: &Stat) -> bool {
    stat.mtime_ns.saturating_add(RACY_NS) >= now_ns()
}
