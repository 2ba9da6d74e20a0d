//! Edit transactions for agent tools: `edit_begin` saves some paths' current state (content and
//! mode, a symlink's target, or absence), `edit_commit` drops the copy, `edit_abort` puts the
//! paths back exactly.
//!
//! Saved copies live in the daemon's memory, never in the store (a tool may edit `.env`), at
//! most [`MAX_EDIT_BYTES`] per transaction, and expire [`EDIT_TTL`] after `edit_begin` if the
//! client never commits or aborts (a dead client). They do not survive a daemon restart.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use gix::bstr::{BString, ByteSlice};

use crate::filter::rel_to_abs;
use crate::safe_io::StableRead;
use crate::store::restore::{replace_with_file, replace_with_symlink, safe_tree_path};
use crate::store::SkippedFile;

/// How long an open transaction is kept.
pub const EDIT_TTL: Duration = Duration::from_secs(600);
/// Most bytes one transaction may hold.
pub const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

/// What a path held when the transaction began.
#[derive(Debug, Clone)]
enum Saved {
    Absent,
    File { data: Vec<u8>, mode: u32 },
    Symlink(Vec<u8>),
}

#[derive(Debug)]
pub struct EditTx {
    started: Instant,
    saved: Vec<(BString, Saved)>,
}

/// The open transactions of one project.
#[derive(Debug, Default)]
pub struct Edits {
    open: HashMap<String, EditTx>,
}

impl Edits {
    /// Saves `paths` (tree paths) under `root` and returns the new token.
    pub fn begin(&mut self, root: &Path, paths: &[BString]) -> Result<String, String> {
        self.expire();
        if paths.is_empty() {
            return Err("edit_begin needs at least one path".into());
        }
        let mut total = 0u64;
        let mut saved = Vec::new();
        for rel in paths {
            if rel.is_empty() {
                return Err("the project root itself cannot be an edit path".into());
            }
            safe_tree_path(rel.as_bstr())?;
            check_parents(root, rel)?;
            let abs = rel_to_abs(root, rel);
            let state = match std::fs::symlink_metadata(&abs) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Saved::Absent,
                Err(e) => return Err(format!("cannot stat {}: {e}", rel.to_str_lossy())),
                Ok(m) if m.file_type().is_symlink() => {
                    let target = std::fs::read_link(&abs)
                        .map_err(|e| format!("cannot read {}: {e}", rel.to_str_lossy()))?;
                    Saved::Symlink(target.as_os_str().as_bytes().to_vec())
                }
                Ok(m) if m.is_file() => {
                    total += m.len();
                    if total > MAX_EDIT_BYTES {
                        return Err(format!(
                            "an edit transaction holds at most {MAX_EDIT_BYTES} bytes"
                        ));
                    }
                    let cannot = |e: String| format!("cannot read {}: {e}", rel.to_str_lossy());
                    let root_fd =
                        crate::safe_io::open_dir(root).map_err(|e| cannot(e.to_string()))?;
                    let file = crate::safe_io::open_beneath(root_fd.as_fd(), rel)
                        .map_err(|e| cannot(e.to_string()))?;
                    match crate::safe_io::read_stable(&file, MAX_EDIT_BYTES) {
                        Ok(StableRead::Data { data, stat }) => Saved::File {
                            data,
                            mode: stat.mode & 0o7777,
                        },
                        Ok(StableRead::Changing) => {
                            return Err(cannot("it keeps changing while it is read".into()))
                        }
                        Ok(_) => return Err(cannot("not a regular file".into())),
                        Err(e) => return Err(cannot(e.to_string())),
                    }
                }
                Ok(_) => return Err(format!("{} is not a file or symlink", rel.to_str_lossy())),
            };
            saved.push((rel.clone(), state));
        }
        let token = new_token();
        self.open.insert(
            token.clone(),
            EditTx {
                started: Instant::now(),
                saved,
            },
        );
        Ok(token)
    }

    /// Drops the saved copy; false if the token is unknown or expired.
    pub fn commit(&mut self, token: &str) -> bool {
        self.expire();
        self.open.remove(token).is_some()
    }

    /// Puts every saved path back; returns the paths restored and the ones that could not be.
    pub fn abort(&mut self, root: &Path, token: &str) -> Option<(Vec<String>, Vec<SkippedFile>)> {
        self.expire();
        let tx = self.open.remove(token)?;
        let (mut restored, mut skipped) = (Vec::new(), Vec::new());
        for (rel, state) in tx.saved {
            let path = rel.to_str_lossy().into_owned();
            match put_back(root, &rel, &state) {
                Ok(()) => restored.push(path),
                Err(reason) => {
                    tracing::warn!(path = %path, reason = %reason, "skipped while aborting an edit");
                    skipped.push(SkippedFile::new(path, reason));
                }
            }
        }
        Some((restored, skipped))
    }

    fn expire(&mut self) {
        self.open.retain(|_, tx| tx.started.elapsed() < EDIT_TTL);
    }
}

fn put_back(root: &Path, rel: &BString, state: &Saved) -> Result<(), String> {
    safe_tree_path(rel.as_bstr())?;
    check_parents(root, rel)?;
    let abs = rel_to_abs(root, rel);
    if let Ok(m) = std::fs::symlink_metadata(&abs) {
        if m.is_dir() {
            return Err("a folder is now in the way; left as it is".into());
        }
    }
    let result = match state {
        Saved::Absent => match std::fs::remove_file(&abs) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        Saved::File { data, mode } => {
            create_parents(root, rel).map_err(|e| format!("cannot create its folder: {e}"))?;
            replace_with_file(&abs, data, *mode)
        }
        Saved::Symlink(target) => replace_with_symlink(&abs, target),
    };
    result.map_err(|e| format!("cannot write: {e}"))
}

/// Refuses paths whose parents are symlinks or files (never written through).
fn check_parents(root: &Path, rel: &BString) -> Result<(), String> {
    let mut cur = root.to_path_buf();
    let parts: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
    for part in &parts[..parts.len() - 1] {
        cur.push(std::ffi::OsStr::from_bytes(part));
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "a parent of {} is not a folder; never followed",
                    rel.to_str_lossy()
                ))
            }
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Creates the missing folders above `rel` (whose existing parents `check_parents` vouched
/// for) with the user's permissions.
fn create_parents(root: &Path, rel: &BString) -> std::io::Result<()> {
    let mut cur = root.to_path_buf();
    let parts: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
    for part in &parts[..parts.len() - 1] {
        cur.push(std::ffi::OsStr::from_bytes(part));
        if std::fs::symlink_metadata(&cur).is_err() {
            crate::safe_io::create_project_dir(&cur)?;
        }
    }
    Ok(())
}

fn new_token() -> String {
    let seed = format!(
        "{:?}-{}-{:?}",
        Instant::now(),
        std::process::id(),
        std::thread::current().id()
    );
    let id = gix::objs::compute_hash(
        gix::hash::Kind::Sha1,
        gix::objs::Kind::Blob,
        seed.as_bytes(),
    )
    .expect("sha1 is always available");
    format!("edit-{}", id.to_hex_with_len(16))
}
