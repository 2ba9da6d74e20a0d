//! Edit transactions' saved copies: the paths' state before an agent tool edits them (content
//! and mode, a symlink's target, or absence), and putting it back exactly.
//!
//! Saved copies live in the daemon's memory, never in the store (a tool may edit `.env`), at
//! most [`MAX_EDIT_BYTES`] per transaction, and expire [`EDIT_TTL`] after they are taken if the
//! client never commits or aborts (a dead client). They do not survive a daemon restart.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use gix::bstr::{BString, ByteSlice};

use super::paths::{check_parents, safe_tree_path};
use super::replace::{replace_with_file, replace_with_symlink};
use crate::filter::rel_to_abs;
use crate::fs::StableRead;
use crate::model::{SkipReason, SkippedFile};

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
            safe_tree_path(rel.as_bstr()).map_err(|(_, why)| why)?;
            check_parents(root, rel.as_bstr(), false, None).map_err(|(_, why)| why)?;
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
                    let root_fd = crate::fs::open_dir(root).map_err(|e| cannot(e.to_string()))?;
                    let file = crate::fs::open_beneath(root_fd.as_fd(), rel)
                        .map_err(|e| cannot(e.to_string()))?;
                    match crate::fs::read_stable(&file, MAX_EDIT_BYTES) {
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
    pub fn abort(&mut self, root: &Path, token: &str) -> Option<(Vec<BString>, Vec<SkippedFile>)> {
        self.expire();
        let tx = self.open.remove(token)?;
        let (mut restored, mut skipped) = (Vec::new(), Vec::new());
        for (rel, state) in tx.saved {
            let path = rel.to_str_lossy().into_owned();
            match put_back(root, &rel, &state) {
                Ok(()) => restored.push(rel),
                Err((code, reason)) => {
                    tracing::warn!(path = %path, reason = %reason, "skipped while aborting an edit");
                    skipped.push(SkippedFile::new(&rel, code, reason));
                }
            }
        }
        super::flush::flush_written(root, &restored, &[]);
        Some((restored, skipped))
    }

    fn expire(&mut self) {
        self.open.retain(|_, tx| tx.started.elapsed() < EDIT_TTL);
    }
}

fn put_back(root: &Path, rel: &BString, state: &Saved) -> Result<(), (SkipReason, String)> {
    safe_tree_path(rel.as_bstr())?;
    check_parents(
        root,
        rel.as_bstr(),
        matches!(state, Saved::File { .. }),
        None,
    )?;
    let abs = rel_to_abs(root, rel);
    if std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir()) {
        let why = "a folder is now in the way; left as it is".to_string();
        return Err((SkipReason::FolderInTheWay, why));
    }
    let result = match state {
        Saved::Absent => match std::fs::remove_file(&abs) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        Saved::File { data, mode } => replace_with_file(&abs, data, *mode),
        Saved::Symlink(target) => replace_with_symlink(&abs, target),
    };
    result.map_err(|e| (SkipReason::Unwritable, format!("cannot write: {e}")))
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
