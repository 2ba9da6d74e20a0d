//! Replacing one project file without losing what another process wrote meanwhile.
//!
//! A restore checks each file against what its undo checkpoint captured, and replaces it only
//! once the undo point is durable: between the two, the agent may write the file again. So a
//! replacement is an exchange (`renameat2(RENAME_EXCHANGE)`): the restored version takes the
//! name in one step and the displaced file comes out under the temporary name, where it is
//! checked once more. If it is what the undo checkpoint holds, it is discarded; if not, a
//! write completed after the check, and it goes back in place (by exchanging again, so that a
//! write made in between is not lost either) and the path is reported as changed during the
//! restore. A new file takes its name only if none appeared meanwhile (`RENAME_NOREPLACE`),
//! and a deletion moves the file aside and checks it before letting it go. So every write
//! that completed before the restore replaced its file is on disk, in the undo checkpoint, or
//! reported. On a filesystem without these renames (some network and FUSE ones), a last look
//! by stat just before a plain rename narrows the window to a few microseconds.
//!
//! Also here: the temporary files a replacement starts from (beside their path, with ckpt's
//! temporary prefix, never part of a checkpoint).

use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use gix::objs::tree::EntryKind;
use rustix::fs::{RenameFlags, CWD};

use crate::filter::TEMP_PREFIX;
use crate::index::{IndexEntry, Stat};
use crate::store::Store;

/// What the undo checkpoint holds for a path: its entry, and whether its stat was taken within
/// a timestamp tick of a write (then only the content tells whether it changed since).
#[derive(Debug, Clone, Copy)]
pub struct Captured {
    pub entry: IndexEntry,
    pub racy: bool,
}

/// How a replacement or deletion ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The restore's version (or its deletion) is in place.
    Done,
    /// Another process wrote the path after it was checked: its version is in place (or it
    /// deleted the file), and the restore's is not.
    Kept,
}

/// How often a displaced version is put back while the path keeps being replaced under it.
const PUT_BACK_ATTEMPTS: usize = 8;

/// Puts the temporary `tmp` (the restore's version) at `abs`, which held a file the undo
/// checkpoint captured as `captured`; a version written there since goes back in place.
pub fn replace(store: &Store, tmp: &Path, abs: &Path, captured: &Captured) -> io::Result<Outcome> {
    let ours = std::fs::symlink_metadata(tmp)?.ino();
    match rename2(tmp, abs, RenameFlags::EXCHANGE) {
        Ok(()) => {}
        // Deleted since the check: a change the restore leaves as it is.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let _ = std::fs::remove_file(tmp);
            return Ok(Outcome::Kept);
        }
        Err(e) if unsupported(&e) => return replace_after_a_look(tmp, abs, captured),
        Err(e) => {
            let _ = std::fs::remove_file(tmp);
            return Err(e);
        }
    }
    // `tmp` now names the file that was at `abs`.
    if holds(tmp, captured) {
        store.discard(tmp);
        return Ok(Outcome::Done);
    }
    put_back(store, tmp, abs, ours)?;
    Ok(Outcome::Kept)
}

/// Puts the temporary `tmp` at `abs`, where there was nothing when it was checked; a file
/// created there since is left in place.
pub fn create(tmp: &Path, abs: &Path) -> io::Result<Outcome> {
    let result = match rename2(tmp, abs, RenameFlags::NOREPLACE) {
        Err(e) if unsupported(&e) => match std::fs::symlink_metadata(abs) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::rename(tmp, abs),
            _ => Err(io::ErrorKind::AlreadyExists.into()),
        },
        result => result,
    };
    match result {
        Ok(()) => Ok(Outcome::Done),
        Err(e) => {
            let _ = std::fs::remove_file(tmp);
            match e.kind() {
                io::ErrorKind::AlreadyExists => Ok(Outcome::Kept),
                _ => Err(e),
            }
        }
    }
}

/// Deletes `abs`, which held a file the undo checkpoint captured as `captured`: it is moved
/// aside and checked first, and goes back where it was written since.
pub fn delete(store: &Store, abs: &Path, captured: &Captured) -> io::Result<Outcome> {
    let aside = temp_beside(abs);
    match std::fs::rename(abs, &aside) {
        Ok(()) => {}
        // Deleted by someone else meanwhile: what the restore wanted.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Done),
        Err(e) => return Err(e),
    }
    if holds(&aside, captured) {
        store.discard(&aside);
        return Ok(Outcome::Done);
    }
    match create(&aside, abs) {
        Ok(Outcome::Done) => Ok(Outcome::Kept),
        // A newer file took the name meanwhile (`create` removed the older one aside): the
        // writer replaced its own version, as it would have without the restore.
        Ok(Outcome::Kept) => Ok(Outcome::Kept),
        Err(e) => Err(e),
    }
}

/// `tmp` holds a version written after the check, `abs` the restore's file (`ours`): puts the
/// newest version back at `abs` and discards what comes out, where it is the restore's file
/// or a version the writer itself replaced later.
fn put_back(store: &Store, tmp: &Path, abs: &Path, ours: u64) -> io::Result<()> {
    // What must come out of `abs` when nobody wrote it since the last exchange.
    let mut expected = ours;
    for _ in 0..PUT_BACK_ATTEMPTS {
        let putting = std::fs::symlink_metadata(tmp)?.ino();
        match rename2(tmp, abs, RenameFlags::EXCHANGE) {
            Ok(()) => {}
            // The restore's file was deleted meanwhile: the version simply goes back.
            Err(e) if e.kind() == io::ErrorKind::NotFound => match create(tmp, abs)? {
                Outcome::Done => return Ok(()),
                Outcome::Kept => return Ok(()),
            },
            Err(e) => return Err(e),
        }
        let out = std::fs::symlink_metadata(tmp).map(|m| m.ino());
        if out.as_ref().is_ok_and(|ino| *ino == expected) {
            store.discard(tmp);
            return Ok(());
        }
        // A newer version replaced what was at `abs` before this exchange: it goes back in
        // turn, and what must come out then is what was just put there.
        expected = putting;
    }
    // Written again and again, faster than it can be put back: the newest version seen is
    // the one at `tmp`, the path is reported, and the older one stays.
    store.discard(tmp);
    Ok(())
}

/// The fallback where the filesystem cannot exchange: replaces `abs` only if its stat is still
/// what was captured, a moment before the rename.
fn replace_after_a_look(tmp: &Path, abs: &Path, captured: &Captured) -> io::Result<Outcome> {
    let unchanged = std::fs::symlink_metadata(abs)
        .is_ok_and(|m| Stat::of(&m) == captured.entry.stat && !captured.racy);
    if !unchanged {
        let _ = std::fs::remove_file(tmp);
        return Ok(Outcome::Kept);
    }
    rename_over(tmp, abs).map(|()| Outcome::Done)
}

/// Whether the file at `path` is the version the undo checkpoint captured: its stat (the
/// change time aside, which the exchange itself moved) when that is conclusive, else its
/// content.
fn holds(path: &Path, captured: &Captured) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let want = &captured.entry;
    match want.state.kind {
        EntryKind::Link => {
            meta.file_type().is_symlink()
                && std::fs::read_link(path)
                    .is_ok_and(|t| blob_id(t.as_os_str().as_bytes()) == Some(want.state.id))
        }
        EntryKind::Blob | EntryKind::BlobExecutable => {
            let exec = meta.mode() & 0o100 != 0;
            if !meta.is_file()
                || exec != (want.state.kind == EntryKind::BlobExecutable)
                || meta.len() != want.stat.size
            {
                return false;
            }
            let stat = Stat::of(&meta);
            let same_stat = stat.ino == want.stat.ino
                && stat.mtime_ns == want.stat.mtime_ns
                && stat.mode == want.stat.mode;
            (same_stat && !captured.racy) || content_id(path, meta.len()) == Some(want.state.id)
        }
        EntryKind::Tree | EntryKind::Commit => false,
    }
}

/// The blob id of the regular file at `path`, which must be `len` bytes long (never blocking
/// on a FIFO put in its place).
fn content_id(path: &Path, len: u64) -> Option<gix::ObjectId> {
    let file = crate::fs::open_regular(path).ok()?;
    let mut data = Vec::with_capacity(len as usize);
    file.take(len + 1).read_to_end(&mut data).ok()?;
    if data.len() as u64 != len {
        return None;
    }
    blob_id(&data)
}

fn blob_id(data: &[u8]) -> Option<gix::ObjectId> {
    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data).ok()
}

fn rename2(from: &Path, to: &Path, flags: RenameFlags) -> io::Result<()> {
    Ok(rustix::fs::renameat_with(CWD, from, CWD, to, flags)?)
}

/// Whether `e` says the filesystem (or kernel) has no `renameat2` with these flags.
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::INVAL.raw_os_error()
            || code == rustix::io::Errno::NOSYS.raw_os_error()
            || code == rustix::io::Errno::OPNOTSUPP.raw_os_error()
    )
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new temporary name beside `abs`.
pub fn temp_beside(abs: &Path) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    abs.with_file_name(format!("{TEMP_PREFIX}{}-{n}", std::process::id()))
}

/// Replaces `abs` with a file holding `data` (no check of what was there).
pub fn replace_with_file(abs: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    rename_over(&file_beside(abs, data, mode)?.0, abs)
}

/// Replaces `abs` with a symlink to `target` (no check of what was there).
pub fn replace_with_symlink(abs: &Path, target: &[u8]) -> io::Result<()> {
    rename_over(&symlink_beside(abs, target)?, abs)
}

/// A new temporary file beside `abs` holding `data` with `mode`; its name, and the file.
pub fn file_beside(abs: &Path, data: &[u8], mode: u32) -> io::Result<(PathBuf, std::fs::File)> {
    let tmp = temp_beside(abs);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(data)?;
        // The umask may have narrowed the mode given to open.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        Ok(f)
    })();
    match result {
        Ok(f) => Ok((tmp, f)),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// A new temporary symlink beside `abs` to `target`; its name.
pub fn symlink_beside(abs: &Path, target: &[u8]) -> io::Result<PathBuf> {
    let tmp = temp_beside(abs);
    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &tmp)?;
    Ok(tmp)
}

/// Renames the temporary `tmp` over `abs`; removes it where that fails.
fn rename_over(tmp: &Path, abs: &Path) -> io::Result<()> {
    std::fs::rename(tmp, abs).inspect_err(|_| {
        let _ = std::fs::remove_file(tmp);
    })
}
