//! What a store handle keeps to make writes durable: the pending batch, the journal, the files
//! made ahead of time, and what it knows of the packs it wrote. One per [`Store`] handle; its
//! operations are in [`super::pending`] (staging objects) and [`super::refs`] (committing them
//! with ref changes). It knows nothing of the rest of the store.
//!
//! [`Store`]: crate::store::Store

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use parking_lot::Mutex;

use super::files::{stamp_of, PackStamp};
use super::journal::Journal;
use super::spares::Spares;
use crate::store::pack::sealed::Sealed;
use crate::store::pack::small::merge_candidates;
use crate::store::pack::writer::PackWriter;

/// The durability state of one store handle.
pub struct Durable {
    pub(crate) dir: PathBuf,
    /// The current operation's objects, not yet durable.
    pub(crate) pending: Mutex<Pending>,
    /// Set when pending objects were dropped by a failed flush.
    pub(crate) lost: AtomicBool,
    /// Set once the store was seen holding objects (see `Durable::holds_no_objects`): a
    /// store never loses all of them again (its refs keep some).
    pub(crate) holds_objects: AtomicBool,
    /// Small packs on disk the next merge would take (see [`Durable::needs_merge`]).
    pub(crate) small_packs: AtomicUsize,
    /// An object of the pack written last, when the handles have not loaded that pack yet
    /// (see [`Durable::pack_loader`]).
    pub(crate) unloaded: Mutex<Option<gix::ObjectId>>,
    /// The store's journal (shared by every handle of the store in this process).
    pub(crate) journal: Arc<Mutex<Journal>>,
    /// Files made ahead of time for the next publish.
    pub(crate) spares: Arc<Spares>,
    /// Packs found whole, with the stat of their index and data file when checked (the
    /// store's check of its packs reads them; a pack this handle published is whole).
    pub(crate) checked_packs: Mutex<HashMap<String, PackStamp>>,
}

/// The objects of the current operation, not yet durable.
#[derive(Default)]
pub(crate) struct Pending {
    /// Blobs from the capture workers.
    pub(crate) blobs: Option<Arc<PackWriter>>,
    /// Trees, commits and metadata, readable through this handle before they are flushed.
    pub(crate) repo: Option<gix::Repository>,
    /// Packs of blobs complete on disk, published first when the rest is written.
    pub(crate) sealed: Vec<Sealed>,
}

impl Pending {
    /// Drops the handle of pending objects if nothing is pending; whether nothing is.
    pub(crate) fn let_go(&mut self) -> bool {
        let idle = self.blobs.is_none()
            && self.sealed.is_empty()
            && self
                .repo
                .as_ref()
                .is_none_or(|r| r.objects.num_objects_in_memory() == 0);
        if idle {
            self.repo = None;
        }
        idle
    }
}

impl Durable {
    /// The durability state of the store at `dir`, whose journal is `journal`.
    pub(crate) fn new(dir: &Path, journal: Arc<Mutex<Journal>>) -> Durable {
        Durable {
            dir: dir.to_path_buf(),
            pending: Default::default(),
            lost: Default::default(),
            holds_objects: Default::default(),
            small_packs: merge_candidates(dir).len().into(),
            unloaded: Default::default(),
            journal,
            spares: Default::default(),
            checked_packs: Default::default(),
        }
    }

    /// Records the pack `name` (`pack-<checksum>`), just published by this store from bytes it
    /// made, as whole: the next check does not read its trailer again.
    pub(crate) fn checked_whole(&self, name: &str) {
        let pack_dir = self.dir.join("objects").join("pack");
        let stamp = |ext: &str| {
            rustix::fs::lstat(pack_dir.join(format!("{name}.{ext}")))
                .ok()
                .map(|m| stamp_of(&m))
        };
        let key = (stamp("idx"), stamp("pack"));
        if key.0.is_some() && key.1.is_some() {
            self.checked_packs.lock().insert(name.to_string(), key);
        }
    }
}
