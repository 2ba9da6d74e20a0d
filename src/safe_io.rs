//! Opening paths that come from a project or a request without being fooled by them.
//!
//! A project is a folder other processes change while ckpt reads it, and a request names
//! paths a client chose. So every open here is non-blocking (a FIFO never hangs a thread),
//! checks the type on the opened descriptor (not on an earlier `stat`), and, below a project
//! root, resolves with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: a parent folder
//! swapped for a symlink cannot lead a read outside the project. A file is read until two
//! looks agree, so an in-place rewrite is never stored as a mix of two versions.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// How many times a file that changes while it is read is read again before it is skipped.
const READ_ATTEMPTS: usize = 4;
/// A file modified this recently may be written again within the same timestamp tick, which
/// a stat comparison cannot see: such a file is read twice and the reads compared.
const RACY_NS: i64 = 50_000_000;

/// Opens the folder `path` (never a FIFO or a symlink to one).
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens `rel` (a `/`-separated path below `root`) for reading: never through a symlink
/// (parents included), never blocking on a FIFO. A final symlink fails with `ELOOP`.
pub fn open_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> io::Result<File> {
    let rel = std::ffi::OsStr::from_bytes(rel);
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(root, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(File::from(fd)),
        // Kernels before 5.6: the final component is still never followed.
        Err(rustix::io::Errno::NOSYS) => Ok(File::from(rustix::fs::openat(
            root,
            rel,
            flags,
            Mode::empty(),
        )?)),
        Err(e) => Err(e.into()),
    }
}

/// Opens the folder `rel` below `root` as [`open_beneath`] opens a file: never through a
/// symlink, its own name included.
pub fn open_dir_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> io::Result<OwnedFd> {
    let rel = std::ffi::OsStr::from_bytes(rel);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(root, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::NOSYS) => Ok(rustix::fs::openat(root, rel, flags, Mode::empty())?),
        Err(e) => Err(e.into()),
    }
}

/// Opens files below a root folder by folder, as [`open_beneath`] does: the last parent
/// folder stays open (itself opened beneath the root, never through a symlink), and each
/// file is opened by its name in it with `O_NOFOLLOW`. A walk lists a folder's files together,
/// so each costs a lookup of one name instead of a walk of its whole path (a first checkpoint
/// opens every file of the project).
pub struct Beneath<'a> {
    root: BorrowedFd<'a>,
    parent: Option<(Vec<u8>, OwnedFd)>,
}

impl<'a> Beneath<'a> {
    pub fn new(root: BorrowedFd<'a>) -> Beneath<'a> {
        Beneath { root, parent: None }
    }

    pub fn root(&self) -> BorrowedFd<'a> {
        self.root
    }

    /// Opens the file `rel` for reading; a final symlink fails with `ELOOP`, a FIFO never
    /// blocks.
    pub fn open(&mut self, rel: &[u8]) -> io::Result<File> {
        let Some(slash) = rel.iter().rposition(|b| *b == b'/') else {
            return open_beneath(self.root, rel);
        };
        let (parent, name) = (&rel[..slash], &rel[slash + 1..]);
        let dir = match &self.parent {
            Some((open, dir)) if open.as_slice() == parent => dir,
            _ => {
                self.parent = None;
                match open_dir_beneath(self.root, parent) {
                    Ok(dir) => &self.parent.insert((parent.to_vec(), dir)).1,
                    // The whole path's open says why, in its own words (a symlink on the
                    // way is `ELOOP`, as callers expect).
                    Err(_) => return open_beneath(self.root, rel),
                }
            }
        };
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let name = std::ffi::OsStr::from_bytes(name);
        Ok(File::from(rustix::fs::openat(
            dir,
            name,
            flags,
            Mode::empty(),
        )?))
    }
}

/// Reads the target of the symlink `rel` below `root`, without following any parent symlink.
pub fn read_link_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> io::Result<Vec<u8>> {
    let rel = std::ffi::OsStr::from_bytes(rel);
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let fd = match rustix::fs::openat2(root, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOSYS) => rustix::fs::openat(root, rel, flags, Mode::empty())?,
        Err(e) => return Err(e.into()),
    };
    Ok(rustix::fs::readlinkat(&fd, "", Vec::new())?.into_bytes())
}

/// Removes the file `rel` below `root` without following any symlink on the way.
pub fn remove_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> io::Result<()> {
    let (parent, name) = match rel.iter().rposition(|b| *b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&b"."[..], rel),
    };
    let dir = open_dir_beneath(root, parent)?;
    Ok(rustix::fs::unlinkat(
        &dir,
        std::ffi::OsStr::from_bytes(name),
        rustix::fs::AtFlags::empty(),
    )?)
}

/// The umask the user started ckptd with. The daemon itself runs with 077 so that nothing in
/// its data dir is readable by others; folders it creates in a project get the user's own.
static USER_UMASK: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0o022);

/// Makes every file and folder this process creates from now on private to the user,
/// remembering the user's umask for what it creates in projects.
pub fn private_umask() {
    let old = rustix::process::umask(Mode::from_raw_mode(0o077));
    USER_UMASK.store(
        old.as_raw_mode() as u32,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Creates the folder `path` in a project with the permissions the user's umask gives.
pub fn create_project_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(path)?;
    let mode = 0o777 & !USER_UMASK.load(std::sync::atomic::Ordering::Relaxed);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Removes group and other permissions from `path` and, when `recursive`, from everything
/// below it (never following symlinks): how an install made before stores were private is
/// tightened.
pub fn make_private(path: &Path, recursive: bool) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.file_type().is_symlink() {
        return;
    }
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o077));
    }
    if recursive && meta.is_dir() {
        if let Ok(entries) = std::fs::read_dir(path) {
            for entry in entries.flatten() {
                make_private(&entry.path(), true);
            }
        }
    }
}

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

/// A descriptor usable as the root of [`open_beneath`].
pub fn as_root(fd: &OwnedFd) -> BorrowedFd<'_> {
    fd.as_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = open_regular(&fifo).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let root = open_dir(dir.path()).unwrap();
        let file = open_beneath(root.as_fd(), b"pipe").unwrap();
        assert!(matches!(
            read_stable(&file, 100).unwrap(),
            StableRead::NotRegular
        ));
        assert!(read_small(&fifo, 100).is_none());
    }

    /// A walk's stat stands for the stat before the read only while the file is unchanged:
    /// rewritten since (even to its size and mtime), it is read as it is now, with its new stat.
    #[test]
    fn a_walks_stat_holds_only_for_an_unchanged_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "one").unwrap();
        let seen = Stat::of(&std::fs::metadata(&path).unwrap());
        let root = open_dir(dir.path()).unwrap();
        let read = |max| {
            let file = open_beneath(root.as_fd(), b"f").unwrap();
            match read_stable_seen(&file, max, &seen).unwrap() {
                StableRead::Data { data, stat } => (data, stat),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(read(100), (b"one".to_vec(), seen));
        std::fs::write(&path, "uno").unwrap();
        let mtime = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: seen.mtime_ns.div_euclid(1_000_000_000),
                tv_nsec: seen.mtime_ns.rem_euclid(1_000_000_000) as _,
            },
        };
        rustix::fs::utimensat(rustix::fs::CWD, &path, &mtime, rustix::fs::AtFlags::empty())
            .unwrap();
        let (data, stat) = read(100);
        assert_eq!(data, b"uno");
        assert_eq!((stat.size, stat.mtime_ns), (seen.size, seen.mtime_ns));
        assert_ne!(stat.ctime_ns, seen.ctime_ns);
        std::fs::write(&path, "longer").unwrap();
        assert_eq!(read(100).0, b"longer");
        let file = open_beneath(root.as_fd(), b"f").unwrap();
        let too_large = read_stable_seen(&file, 4, &seen).unwrap();
        assert!(
            matches!(too_large, StableRead::TooLarge(6)),
            "{too_large:?}"
        );
    }

    #[test]
    fn read_small_takes_files_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [7u8; 100]).unwrap();
        assert_eq!(read_small(&path, 100).unwrap(), [7u8; 100]);
        assert!(read_small(&path, 99).is_none());
        assert!(read_small(&dir.path().join("absent"), 100).is_none());
        assert!(read_small(dir.path(), 100).is_none());
    }

    #[test]
    fn symlinked_parents_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::fs::write(dir.path().join("plain"), "p").unwrap();
        let root = open_dir(dir.path()).unwrap();
        assert!(open_beneath(root.as_fd(), b"link/secret").is_err());
        assert!(open_beneath(root.as_fd(), b"link").is_err());
        assert!(open_beneath(root.as_fd(), b"../x").is_err());
        let file = open_beneath(root.as_fd(), b"plain").unwrap();
        match read_stable(&file, 100).unwrap() {
            StableRead::Data { data, stat } => {
                assert_eq!(data, b"p");
                assert_eq!(stat.size, 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            read_link_beneath(root.as_fd(), b"link").unwrap(),
            outside.path().as_os_str().as_bytes()
        );
    }

    /// Opening folder by folder refuses what `open_beneath` refuses, and a folder swapped for
    /// a symlink between two opens is not followed.
    #[test]
    fn folder_by_folder_opens_refuse_what_open_beneath_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/one"), "1").unwrap();
        std::fs::write(dir.path().join("a/b/two"), "2").unwrap();
        std::fs::write(dir.path().join("top"), "t").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("one", dir.path().join("a/b/alias")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("a/b/fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let root = open_dir(dir.path()).unwrap();
        let mut files = Beneath::new(root.as_fd());
        let read = |f: File| read_small_from(f);
        assert_eq!(read(files.open(b"a/b/one").unwrap()), b"1");
        assert_eq!(read(files.open(b"a/b/two").unwrap()), b"2");
        assert_eq!(read(files.open(b"top").unwrap()), b"t");
        let loop_err = files.open(b"a/b/alias").unwrap_err();
        assert_eq!(
            loop_err.raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error())
        );
        // A FIFO opens without blocking; reading it finds no regular file.
        let fifo = files.open(b"a/b/fifo").unwrap();
        assert!(matches!(read_stable(&fifo, 10), Ok(StableRead::NotRegular)));
        // Nor when the walk saw a regular file by that name: `pread` refuses a FIFO.
        let seen = Stat::of(&std::fs::metadata(dir.path().join("top")).unwrap());
        let fifo_read = read_stable_seen(&fifo, 10, &seen);
        assert!(
            matches!(fifo_read, Ok(StableRead::NotRegular)),
            "{fifo_read:?}"
        );
        assert!(files.open(b"link/secret").is_err());
        assert!(files.open(b"../x/y").is_err());
        let gone = files.open(b"a/b/none").unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
        // The folder is moved away and a symlink to the outside takes its name: the open
        // folder is still the one it opened (never the symlink's target), and a fresh open of
        // the folder refuses the symlink.
        assert_eq!(read(files.open(b"a/b/one").unwrap()), b"1");
        std::fs::rename(dir.path().join("a/b"), dir.path().join("a/old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("a/b")).unwrap();
        assert_eq!(read(files.open(b"a/b/two").unwrap()), b"2");
        assert!(files.open(b"a/b/secret").is_err());
        let mut fresh = Beneath::new(root.as_fd());
        let refused = fresh.open(b"a/b/secret").unwrap_err();
        assert_eq!(
            refused.raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error())
        );
    }

    fn read_small_from(file: File) -> Vec<u8> {
        match read_stable(&file, 100).unwrap() {
            StableRead::Data { data, .. } => data,
            other => panic!("{other:?}"),
        }
    }
}

/// What `stat` said about a file when it was seen. Timestamps are nanoseconds since the epoch
/// in an `i64` (1677 to 2262; beyond, they saturate — the ctime still changes with every
/// change), which keeps the index's entry for a file at 64 bytes rather than 96.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub mode: u32,
}

impl Stat {
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        use std::os::unix::fs::MetadataExt;
        Stat {
            size: meta.len(),
            mtime_ns: nanos(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: nanos(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }
}

/// Seconds and nanoseconds since the epoch as nanoseconds, saturating.
pub fn nanos(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// Now, in nanoseconds since the epoch (the precise clock).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Second names given to files just before a rename replaces them, removed after the reply.
///
/// Renaming over a file frees its blocks inside the `rename`; a filesystem mounted with
/// `discard` (and no journal to batch it) trims them there and then, which costs a replaced
/// file as much as writing it (0.15–0.8 ms on this project's test machine). A second name keeps
/// the blocks alive through the rename; removing it later (when the list is dropped, after the
/// reply) does the freeing. Nothing is read or followed: a hard link to a symlink links the
/// symlink itself. Where a hard link fails (another filesystem, or one without them), nothing
/// is kept and the rename pays as before.
#[derive(Debug, Default)]
pub struct Retired(Vec<std::path::PathBuf>);

impl Retired {
    /// Gives the file at `path` the second name `alias` (which must not exist), if it can.
    pub fn keep(&mut self, path: &Path, alias: std::path::PathBuf) {
        if std::fs::hard_link(path, &alias).is_ok() {
            self.0.push(alias);
        }
    }

    /// Moves the file at `path` to the name `alias` (which must not exist), so that it is
    /// freed when the list is dropped; false (nothing moved) where it cannot be.
    pub fn take(&mut self, path: &Path, alias: std::path::PathBuf) -> bool {
        let moved = std::fs::rename(path, &alias).is_ok();
        if moved {
            self.0.push(alias);
        }
        moved
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for Retired {
    /// Removes every second name: the freeing the renames skipped. Whoever holds the list
    /// chooses when, by where it is dropped.
    fn drop(&mut self) {
        for alias in self.0.drain(..) {
            if let Err(e) = std::fs::remove_file(&alias) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(path = %alias.display(), error = %e, "cannot remove a replaced file's second name");
                }
            }
        }
    }
}
