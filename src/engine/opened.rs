//! A project's opened state ([`Opened`]): its store, filter, index and watcher, made on first
//! use and kept; and [`operate`], how every operation runs on it — the root and the store
//! checked, the operation run, what it left pending made durable. Plain synchronous code: the
//! daemon's owner of each project (`daemon::owner`) calls it on a blocking thread with the
//! project's lock held, and a test can call it directly.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::events::start_pump;
use super::{Error, Project, Result};
use crate::filter::Filter;
use crate::index::{
    load_stat_cache, stat_cache_path, FileIndex, RefreshOutcome, StatCache, Trees, INDEX_REF,
};
use crate::model::WatchMode;
use crate::store::{SnapshotOptions, Store};
use crate::watch::{Changes, ProjectWatcher, Tap};

/// Watcher notes buffered for the event pump before they are dropped (and reported lost).
const TAP_QUEUE: usize = 65_536;
/// The store's folder where the watcher's sync cookie lives (see [`crate::watch`]).
const SYNC_DIR: &str = "ckpt-sync";

/// The message ids of a dialog's newest checkpoints (newest first), as the chain from `head`
/// gives them: a hook's search for a repeated prompt reads them once per dialog (see
/// `record::recent_with_message`).
#[derive(Debug, Default)]
pub struct RecentMessages {
    pub(crate) head: Option<gix::ObjectId>,
    pub(crate) newest: std::collections::VecDeque<(Option<String>, gix::ObjectId)>,
}

/// The opened state of a project; created on first use and kept.
pub struct Opened {
    pub store: Store,
    pub filter: Filter,
    pub index: FileIndex,
    pub(crate) watcher: Option<ProjectWatcher>,
    pub(crate) last_saved: Option<Instant>,
    /// The stat cache is due: it is written after the reply (see [`Opened::save_index`]).
    pub(crate) save_due: bool,
    /// Each dialog's newest message ids, for a hook's search for a repeated prompt.
    pub(crate) recent_messages: std::collections::HashMap<String, RecentMessages>,
    /// The tree the index wrote during the current operation (cleared when one begins): it is
    /// in the store, pending or in a pack published since, which the store's handles find
    /// only by listing the pack folder again (see [`Opened::prepare`]).
    pub(crate) written_root: Option<gix::ObjectId>,
    /// A dialog whose retention is due (its 10th checkpoint was just recorded): it runs after
    /// the reply, before the project's lock is let go (see [`Opened::prune_after_reply`]).
    pub(crate) prune_due: Option<String>,
    /// The operation read much history: the store lets go of what it mapped after the reply
    /// (see [`Opened::read_widely`]).
    pub(crate) release_due: bool,
    /// The store borrows from its worktrees' pool and has not given it its objects yet: a gc
    /// does, once the project is quiet (see [`Opened::upkeep`]).
    pub(crate) pool_due: bool,
    /// When the registry of projects last changed, as the last look for a sibling worktree saw
    /// it (see [`Opened::upkeep`]).
    pub(crate) registry_seen: Option<std::time::SystemTime>,
    /// The turns running now and the checkpoint recorded last (see [`super::running`]).
    pub(crate) turns: super::running::Running,
}

impl Opened {
    /// Brings the index up to date with the disk: syncs with the watcher (every write that
    /// completed before now is seen) and refreshes what changed, or verifies everything by stat
    /// when the watcher cannot vouch for the dirty set.
    pub fn prepare(&mut self, project: &Project) -> Result<RefreshOutcome> {
        // Objects lost since (a failed write) take what the index vouches for with them.
        self.forget_if_lost();
        if let Some(root) = self.index.last_root() {
            // A tree written during this operation needs no look: it is there (a handle that
            // has not loaded the pack it went into since would list the pack folder to find
            // it, e.g. after a restore's undo point).
            if self.written_root != Some(root) && !self.store.repo().has_object(root) {
                // Someone removed objects the index vouches for (e.g. `git gc` after a dialog
                // was removed): forget every cached id and hash everything again.
                tracing::warn!(root = %project.root.display(), tree = %root, "the store lost the index's tree; re-reading the whole project");
                self.index =
                    FileIndex::with_stat_cache(StatCache::default(), project.progress.clone());
                // Fresh handles: an index of a pack someone deleted must not vouch for objects.
                self.store.reopen()?;
            }
        }
        let changes = match &self.watcher {
            Some(w) => w.sync(),
            None => Changes {
                rescan: Some("not watching".into()),
                ..Changes::default()
            },
        };
        tracing::debug!(dirty = changes.paths.len(), rescan = ?changes.rescan, "synced with the watcher");
        if let Some(why) = &changes.rescan {
            if self.index.is_verified() {
                tracing::info!(root = %project.root.display(), reason = %why, "verifying the whole project by stat");
            }
            self.index.invalidate_all();
        }
        let options = SnapshotOptions {
            write: true,
            max_file_size: project.max_file_size(),
        };
        let watcher = &mut self.watcher;
        let mut on_dir = |dirs: &[&Path]| {
            if let Some(w) = watcher.as_mut() {
                w.watch_dirs(dirs);
            }
        };
        let outcome = match self.index.refresh(
            &self.store,
            &self.filter,
            changes.paths,
            options,
            &mut on_dir,
        ) {
            Ok(outcome) => outcome,
            Err(e) => {
                // The dirty paths are consumed and part of the index may describe reads whose
                // objects never reached the store: the next attempt verifies everything by
                // stat, which re-reads every file the index does not vouch for.
                self.index.invalidate_all();
                tracing::error!(root = %project.root.display(), error = %e, "reading changes failed; the next checkpoint verifies every file");
                return Err(e.into());
            }
        };
        let mode = match self
            .watcher
            .as_ref()
            .map_or(WatchMode::Polling, ProjectWatcher::mode)
        {
            // Says what to raise and by how much, now that the walk counted the folders.
            WatchMode::Degraded(why) if why == crate::watch::WATCH_LIMIT => {
                WatchMode::Degraded(crate::watch::watch_limit_advice(self.index.folder_count()))
            }
            mode => mode,
        };
        *project.mode.lock() = mode;
        if outcome.full {
            tracing::info!(root = %project.root.display(), hashed = outcome.hashed, "verified the whole project");
        }
        Ok(outcome)
    }

    /// The tree of the project as it is now (after [`Opened::prepare`]), its new objects still
    /// pending: for a caller that records a checkpoint of it, which flushes them all as one pack.
    /// A prompt's checkpoint records the project as it moved on: its changed folders' trees are
    /// written as new ones ([`Trees::New`]).
    pub fn tree_to_record(&mut self, project: &Project) -> Result<gix::ObjectId> {
        self.prepared_tree(project, Trees::New)
    }

    fn prepared_tree(&mut self, project: &Project, trees: Trees) -> Result<gix::ObjectId> {
        self.prepare(project)?;
        if let Err(e) = self.store.seal_large_blobs() {
            self.forget_if_lost();
            return Err(e.into());
        }
        let tree = self.write_tree(trees)?;
        project.events.set_baseline(tree);
        Ok(tree)
    }

    /// Writes the index's tree (pending) as it is, without refreshing it first.
    pub fn write_tree(&mut self, trees: Trees) -> Result<gix::ObjectId> {
        let tree = self.index.write_tree(&self.store, trees)?;
        self.written_root = Some(tree);
        Ok(tree)
    }

    /// The tree of the project as it is now, written to the store (durable, readable by every
    /// handle). The files may be in an earlier state (after a restore, say): each changed
    /// folder's tree is looked for in the store first ([`Trees::LookedUp`]).
    pub fn current_tree(&mut self, project: &Project) -> Result<gix::ObjectId> {
        let tree = self.prepared_tree(project, Trees::LookedUp)?;
        self.flush()?;
        Ok(tree)
    }

    /// Settles the index's racy entries whose window has passed (see
    /// [`FileIndex::settle_racy`]); nothing is written, a failure only leaves them racy.
    pub fn settle_racy(&mut self, project: &Project) {
        let root = project.root.as_path();
        match self
            .index
            .settle_racy(&self.store, root, project.max_file_size())
        {
            Ok(n) => tracing::debug!(settled = n, "racy entries settled"),
            Err(e) => {
                tracing::debug!(error = %e, "cannot settle racy entries; the next refresh reads them")
            }
        }
    }

    /// Makes the operation's pending objects durable. If they were lost instead (a failed
    /// flush), the index forgets everything it knew, since it may name them: the next
    /// checkpoint reads every file again.
    pub fn flush(&mut self) -> Result<()> {
        let result = self.store.flush_objects();
        self.forget_if_lost();
        Ok(result?)
    }

    /// After a failed flush: forget what the index cached (see [`Opened::flush`]).
    pub fn forget_if_lost(&mut self) {
        if self.store.take_lost() {
            tracing::error!(store = %self.store.dir().display(), "new objects could not be written; the next checkpoint reads every file again");
            self.index = FileIndex::with_stat_cache(StatCache::default(), self.index.progress());
        }
    }

    /// Applies `dialog`'s retention once the reply is sent, with the project still locked: the
    /// checkpoint that made it due does not wait for it, and the next operation sees the
    /// dialog pruned.
    pub fn prune_after_reply(&mut self, dialog: &str) {
        self.prune_due = Some(dialog.to_string());
    }

    /// Asks for a full verify at the next checkpoint, exactly as a watcher overflow does.
    pub fn force_rescan(&mut self, why: &str) {
        match &mut self.watcher {
            Some(w) => w.force_rescan(why),
            None => self.index.invalidate_all(),
        }
    }
}

impl Opened {
    /// Opens the state of `project`: its store (created if new), filter, stat cache and
    /// watcher, with the event pump that feeds its subscribers.
    pub fn open(project: &Project) -> Result<Opened> {
        Store::remove_stale_files(&project.store_dir, project.started);
        if std::fs::symlink_metadata(&project.store_dir)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o077 != 0)
        {
            tracing::info!(store = %project.store_dir.display(), "making the store private to this user");
            crate::fs::make_private(&project.store_dir, true);
        }
        let mut store = Store::open_or_init(&project.store_dir, &project.root)?;
        match project.join_pool(&store) {
            Ok(Some(joined)) => store = joined,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(store = %store.dir().display(), error = %e, "cannot use the worktrees' pool; the store keeps its own objects")
            }
        }
        let pool_due = store.pool().is_some() && !store.given_to_pool();
        // The data directory is never part of a project, even when it lives inside one.
        let hard = vec![project.data_dir.clone(), project.store_dir.clone()];
        let exclusions = project.config().exclusions;
        let filter = Filter::new(&project.root, &exclusions, hard.clone())?;
        let repo = store.repo();
        let lost = match store.ref_target(&repo, INDEX_REF) {
            Ok(Some(tree)) => !repo.has_object(tree),
            _ => false,
        };
        drop(repo);
        let index = if lost {
            tracing::warn!(store = %store.dir().display(), "the stat cache names objects the store lost; ignoring it");
            FileIndex::with_stat_cache(StatCache::default(), project.progress.clone())
        } else {
            // Read while the first verify lists the project (see `FileIndex::stale_ready`).
            let path = stat_cache_path(store.dir());
            match std::thread::Builder::new()
                .name("ckpt-stat-cache".into())
                .spawn(move || load_stat_cache(&path))
            {
                Ok(loading) => {
                    FileIndex::with_stat_cache_loading(loading, project.progress.clone())
                }
                Err(_) => FileIndex::with_stat_cache(
                    load_stat_cache(&stat_cache_path(store.dir())),
                    project.progress.clone(),
                ),
            }
        };
        let (tap_tx, tap_rx) = crate::watch::queue::bounded(TAP_QUEUE);
        let tap = Tap {
            tx: tap_tx,
            lost: Arc::default(),
        };
        let lost = tap.lost.clone();
        let cookie_dir = store.dir().join(SYNC_DIR);
        let watcher = match ProjectWatcher::start_with(&project.root, &cookie_dir, Some(tap)) {
            Ok(w) => {
                let pump_filter = Filter::new(&project.root, &exclusions, hard.clone())?;
                start_pump(
                    project.events.clone(),
                    tap_rx,
                    lost,
                    pump_filter,
                    project.store_dir.clone(),
                    project.max_file_size(),
                    w.handle(),
                );
                Some(w)
            }
            Err(e) => {
                tracing::warn!(root = %project.root.display(), error = %e, "cannot watch; checkpoints verify by stat");
                None
            }
        };
        Ok(Opened {
            store,
            filter,
            index,
            watcher,
            last_saved: None,
            save_due: false,
            recent_messages: Default::default(),
            written_root: None,
            prune_due: None,
            release_due: false,
            pool_due,
            registry_seen: None,
            turns: Default::default(),
        })
    }

    /// Follows the project's new exclusions or `max_file_size` exactly: a new filter, and a
    /// full verify by stat at the next checkpoint.
    pub fn follow_rules(&mut self, project: &Project) -> Result<()> {
        let hard = vec![project.data_dir.clone(), project.store_dir.clone()];
        self.filter = Filter::new(&project.root, &project.config().exclusions, hard)?;
        self.force_rescan("the configuration changed");
        Ok(())
    }

    /// The dialog whose retention is due after the reply, if any (see
    /// [`Opened::prune_after_reply`]).
    pub fn take_prune_due(&mut self) -> Option<String> {
        self.prune_due.take()
    }
}

/// Runs `f` on `project`'s state (opened first if it is not, or again if its store vanished),
/// after checking that the root is still the folder watched and, with `refuse_damage`, that
/// the store is not damaged; whatever `f` left pending is made durable (or forgotten) before
/// it returns.
pub fn operate<T>(
    project: &Project,
    guard: &mut Option<Opened>,
    refuse_damage: bool,
    f: impl FnOnce(&Project, &mut Opened) -> Result<T>,
) -> Result<T> {
    // The root was canonical when it was watched: a symlink there now points
    // somewhere else, which is not this project. One open answers both (a folder
    // that can be read, and not through a symlink).
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if let Err(e) = rustix::fs::open(&project.root, flags, Mode::empty()) {
        let root = project.root.clone();
        if std::fs::symlink_metadata(&root).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::RootReplaced { root });
        }
        let source = std::io::Error::from(e);
        return Err(Error::Unavailable { root, source });
    }
    if guard.is_some() && std::fs::symlink_metadata(&project.store_dir).is_err() {
        // Gone whole (deleted under the daemon): start a new store, never write into
        // a half-made folder. Everything is read again into it.
        tracing::error!(store = %project.store_dir.display(), "the store vanished; creating it afresh (earlier checkpoints are gone)");
        *guard = None;
    }
    if guard.is_none() {
        if !refuse_damage {
            Store::repair_layout(&project.store_dir);
        }
        *guard = Some(Opened::open(project)?);
        if project
            .config()
            .auto_checkpoint_for(&project.root)
            .is_some()
        {
            // Watches are placed by a walk: do it now, not at the first checkpoint.
            let opened = guard.as_mut().expect("opened just above");
            if let Err(e) = opened.prepare(project) {
                tracing::warn!(root = %project.root.display(), error = %e, "cannot read the project");
            }
        }
    }
    let opened = guard.as_mut().expect("opened just above");
    let damage = opened.store.damage();
    if !damage.is_empty() || opened.store.take_packs_vanished() {
        // Nothing may read through mappings made before the damage (a pack cut short
        // under a mapping raises SIGBUS), or trust the index of a pack someone else's
        // `git gc` removed: fresh handles see the disk as it is.
        if let Err(e) = opened.store.reopen() {
            // The damage itself is reported below (or repaired by fsck).
            tracing::warn!(store = %project.store_dir.display(), error = %e, "cannot reopen the store");
        }
    }
    if refuse_damage && !damage.is_empty() {
        tracing::error!(store = %project.store_dir.display(), damage = ?damage, "refusing to use a damaged store");
        let store = project.store_dir.clone();
        return Err(Error::Damaged { store, damage });
    }
    // What the index wrote before is looked for again (someone may have removed it
    // since).
    opened.written_root = None;
    let result = f(project, opened);
    // Whatever the operation left pending is made durable (or forgotten) before the
    // project is free again.
    let flushed = opened.flush();
    let value = result?;
    flushed.map(|()| value)
}
