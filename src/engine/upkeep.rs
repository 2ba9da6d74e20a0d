//! What an opened project does besides operations: after an operation's reply (its
//! [`Leftovers`]: the new pack loaded, spare files made, replaced files freed, history pages let
//! go), once the project is quiet ([`Opened::upkeep`]: the stat cache saved, small packs
//! merged, objects given to the worktrees' pool) and at shutdown ([`Opened::close`]).

use std::time::{Duration, Instant};

use super::opened::Opened;
use super::Project;
use crate::index::{save_stat_cache, stat_cache_path, INDEX_REF};

/// The stat cache is written at most this often (and at shutdown): it only saves re-hashing.
const SAVE_INTERVAL: Duration = Duration::from_secs(300);

/// What an operation leaves to do once its reply is sent (see [`Opened::leftovers`]).
pub struct Leftovers {
    /// Small packs must be merged now.
    pub urgent: bool,
    /// Upkeep is due once the project is quiet.
    pub later: bool,
    /// Loads the pack the operation wrote into the store's handles.
    pub load: Option<Box<dyn FnOnce() + Send>>,
    /// Makes the next publish's spare files.
    pub spares: Option<Box<dyn FnOnce() + Send>>,
    /// The files the operation replaced, freed when dropped.
    pub retired: crate::fs::Retired,
    /// When the index's racy entries come due.
    pub settle: Option<i64>,
}

impl Opened {
    /// Writes the stat cache now, or (`now` false) marks it to be written after the reply if
    /// it is due: at 100,000 files it takes tens of milliseconds no one should wait for.
    pub fn save_index(&mut self, now: bool) {
        if !now {
            self.save_due |= self.last_saved.is_none_or(|t| t.elapsed() >= SAVE_INTERVAL);
            return;
        }
        self.save_due = false;
        self.protect_index_objects();
        let path = stat_cache_path(self.store.dir());
        match save_stat_cache(&self.index, &path) {
            Ok(()) => self.last_saved = Some(Instant::now()),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot save the stat cache")
            }
        }
    }

    /// Points `refs/ckpt/index` at the index's last written tree, so that no gc (ckpt's or
    /// git's) removes an object the saved stat cache names.
    pub fn protect_index_objects(&self) {
        let Some(tree) = self.index.last_root() else {
            return;
        };
        let repo = self.store.repo();
        let result = self
            .store
            .ref_target(&repo, INDEX_REF)
            .and_then(|old| match old {
                Some(old) if old == tree => Ok(()),
                old => {
                    let mut txn = self.store.begin();
                    txn.update(INDEX_REF, old, tree, "ckpt: index")?;
                    txn.commit("updating")
                }
            });
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot record the index's tree");
        }
    }

    /// For an operation about to read much history (a blame reads every version of a file):
    /// the store lets go of the pack pages earlier operations mapped, now, and of those this
    /// one maps, after its reply. Resident memory then holds one such operation's pages at a
    /// time, not the sum of all reads since the store was opened.
    pub fn read_widely(&mut self) {
        self.release_mappings();
        self.release_due = true;
    }

    /// After the reply of an operation that read widely: the store lets go of its mappings.
    pub fn release_if_due(&mut self) {
        if std::mem::take(&mut self.release_due) {
            self.release_mappings();
        }
    }

    fn release_mappings(&mut self) {
        if let Err(e) = self.store.release_mappings() {
            tracing::warn!(store = %self.store.dir().display(), error = %e, "cannot open the store's handles again");
        }
    }

    /// What the operation just run leaves for after its reply.
    pub fn leftovers(&mut self) -> Leftovers {
        Leftovers {
            urgent: self.store.must_merge(),
            later: self.save_due || self.store.needs_merge() || self.pool_due,
            load: self.store.pack_loader().map(|l| Box::new(l) as Box<_>),
            spares: self.store.spare_maker().map(|m| Box::new(m) as Box<_>),
            retired: self.store.take_retired(),
            settle: self.index.settle_due(),
        }
    }

    /// The upkeep operations leave for a quiet moment: the stat cache when it is due, and
    /// merging the store's small packs (one per checkpoint) when their turn comes.
    pub fn upkeep(&mut self, project: &Project) {
        // A worktree whose sibling was registered since the store was opened joins the pool.
        let registry = std::fs::metadata(project.data_dir.join("projects.json"))
            .and_then(|m| m.modified())
            .ok();
        if registry != self.registry_seen && !self.pool_due && self.store.pool().is_none() {
            self.registry_seen = registry;
            if let Ok(Some(joined)) = project.join_pool(&self.store) {
                self.store = joined;
                self.pool_due = true;
            }
        }
        if self.save_due {
            self.save_index(true);
        }
        if self.store.needs_merge() {
            if let Err(e) = self.store.consolidate_packs() {
                tracing::warn!(store = %self.store.dir().display(), error = %e, "cannot merge small packs");
            }
        }
        if self.pool_due {
            self.give_to_pool();
        }
        drop(self.store.take_retired());
    }

    /// Gives the worktrees' pool this store's objects (a gc), once it has a checkpoint.
    fn give_to_pool(&mut self) {
        let has_checkpoints = self
            .store
            .dialogs(&self.store.repo())
            .is_ok_and(|d| !d.is_empty());
        if !has_checkpoints {
            return;
        }
        // The tree the index describes is kept too (its ids are what the next checkpoint reuses).
        let extra: Vec<gix::ObjectId> = self.index.last_root().into_iter().collect();
        match self.store.gc(&extra) {
            Ok(report) => {
                self.pool_due = false;
                tracing::info!(store = %self.store.dir().display(), kept_here = report.objects, "objects given to the worktrees' pool");
                self.save_index(true);
            }
            Err(e) => {
                tracing::warn!(store = %self.store.dir().display(), error = %e, "cannot give objects to the worktrees' pool")
            }
        }
    }

    /// At shutdown: saves the stat cache and settles the store's journal.
    pub fn close(&mut self) {
        // An index that never verified knows less than the cache it was opened with (a
        // project opened and not yet used): that cache stays as it is.
        if self.index.is_verified() {
            self.save_index(true);
        }
        // Everything the journal holds is flushed where it belongs: the next daemon has
        // nothing to redo (and a ref someone changes in between is not set back).
        if let Err(e) = self.store.retire_journal() {
            tracing::warn!(store = %self.store.dir().display(), error = %e, "cannot settle the store's journal");
        }
    }
}
