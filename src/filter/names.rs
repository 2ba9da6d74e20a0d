//! Paths inside a project as trees hold them (`/`-separated, relative to the root) and the names
//! of ckpt's own temporary files there. A leaf.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};

/// Whether `name` is a temporary file of a ckptd that no longer runs (or a sync cookie, which
/// earlier builds created in the project root): the names carry the writer's pid, and that
/// process is gone or is not a ckptd.
pub fn is_litter(name: &[u8]) -> bool {
    let Some(rest) = name.strip_prefix(TEMP_PREFIX.as_bytes()) else {
        return false;
    };
    let rest = rest.strip_prefix(b"cookie-").unwrap_or(rest);
    let Some(pid) = rest
        .split(|b| *b == b'-')
        .next()
        .and_then(|p| std::str::from_utf8(p).ok())
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    if pid == std::process::id() {
        return false;
    }
    match std::fs::read(format!("/proc/{pid}/comm")) {
        Ok(comm) => comm.trim_ascii() != b"ckptd",
        Err(_) => true,
    }
}

/// Names the restore machinery uses for its temporary files; never part of a checkpoint.
pub const TEMP_PREFIX: &str = ".ckpt-tmp-";

/// Converts a tree path to a filesystem path below `root`.
pub fn rel_to_abs(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(std::ffi::OsStr::from_bytes(rel.as_bstr()))
}

pub(crate) fn split_parent(path: &BStr) -> (&BStr, &BStr) {
    match path.rfind_byte(b'/') {
        Some(i) => (path[..i].as_bstr(), path[i + 1..].as_bstr()),
        None => (b"".as_bstr(), path),
    }
}

pub(crate) fn join_rel(dir: &BString, name: &[u8]) -> BString {
    if dir.is_empty() {
        BString::from(name)
    } else {
        let mut p = dir.clone();
        p.push(b'/');
        p.extend_from_slice(name);
        p
    }
}
