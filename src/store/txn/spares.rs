//! Empty files made ahead of time that the next publish writes its pack and index into.

use parking_lot::Mutex;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::files::{create_private, unique};

/// An empty file made ahead of time (see [`Spares`]).
pub(crate) struct Spare {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
}

/// Empty files the next publish writes its pack and index into, made after a reply: creating a
/// file took 0.2–0.35 ms on this project's test machine (twice per operation, on the way to
/// its reply) where writing one of tens of KiB takes 0.04. They live in the store's
/// [`SPARE_DIR`](crate::store::SPARE_DIR), which a daemon that starts empties, and are removed when the
/// store is dropped.
#[derive(Default)]
pub(crate) struct Spares(Mutex<Vec<Spare>>);

/// Spare files kept ready: two packs and their indexes (a restore publishes twice: its undo
/// point and its result).
const SPARES: usize = 4;

impl Spares {
    /// Two spare files (for a pack and its index), if there are two.
    pub(crate) fn take_pair(&self) -> Option<[Spare; 2]> {
        let mut ready = self.0.lock();
        if ready.len() < 2 {
            return None;
        }
        let (a, b) = (ready.pop()?, ready.pop()?);
        Some([a, b])
    }

    /// Drops (and removes) every spare file.
    pub(crate) fn clear(&self) {
        let mut ready = self.0.lock();
        let all = std::mem::take(&mut *ready);
        drop(ready);
        for spare in all {
            let _ = std::fs::remove_file(&spare.path);
        }
    }

    /// Whether fewer than [`SPARES`] are ready.
    pub(crate) fn short(&self) -> bool {
        self.0.lock().len() < SPARES
    }

    /// Makes spare files in `folder` (a real folder of the store) until a publish has enough.
    pub(crate) fn top_up(&self, folder: &Path) {
        while self.short() {
            let path = folder.join(format!("spare-{}-{}", std::process::id(), unique()));
            match create_private(&path) {
                Ok(file) => self.0.lock().push(Spare { path, file }),
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "cannot make a spare file");
                    return;
                }
            }
        }
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        self.clear();
    }
}
