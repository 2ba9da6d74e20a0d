//! Second names that keep a replaced file's blocks alive until after the reply.

use std::io;
use std::path::Path;

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
