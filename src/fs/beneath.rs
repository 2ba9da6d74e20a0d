//! Opening below a project root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: a parent
//! folder swapped for a symlink cannot lead outside; every open is non-blocking and checks the
//! type on the opened descriptor.

use std::fs::File;
use std::io::{self};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

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

/// A descriptor usable as the root of [`open_beneath`].
pub fn as_root(fd: &OwnedFd) -> BorrowedFd<'_> {
    fd.as_fd()
}
