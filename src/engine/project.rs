//! One registered project: its root, its store, and the one owner of its state (a lock taken
//! by every operation, which then runs on a blocking thread).

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use gix::bstr::BString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::events::{start_pump, Events};
use super::{Error, Result};
use crate::config::{Config, Paths};
use crate::filter::Filter;
use crate::index::{
    load_stat_cache, save_stat_cache, stat_cache_path, FileIndex, Progress, RefreshOutcome,
    StatCache,
};
use crate::model::{Retention, WatchMode};
use crate::store::SnapshotOptions;
use crate::store::Store;
use crate::watch::{Changes, ProjectWatcher, Tap};

/// Watcher notes buffered for the event pump before they are dropped (and reported lost).
const TAP_QUEUE: usize = 65_536;
/// The store's folder where the watcher's sync cookie lives (see [`crate::watch`]).
const SYNC_DIR: &str = "ckpt-sync";
/// Upkeep (the stat cache, merging small packs) waits until no operation began for this long.
const QUIET: Duration = Duration::from_secs(1);

/// How long after the racy window has passed its entries are settled (clock slack).
const SETTLE_MARGIN: Duration = Duration::from_millis(2);
/// The stat cache is written at most this often (and at shutdown): it only saves re-hashing.
const SAVE_INTERVAL: Duration = Duration::from_secs(300);

/// What an operation leaves to do once its reply is sent (see [`Project::after_reply`]).
struct AfterReply {
    /// Small packs must be merged now.
    urgent: bool,
    /// Upkeep is due once the project is quiet.
    later: bool,
    /// Loads the pack the operation wrote into the store's handles.
    load: Option<Box<dyn FnOnce() + Send>>,
    /// Makes the next publish's spare files.
    spares: Option<Box<dyn FnOnce() + Send>>,
    /// The files the operation replaced, freed when dropped.
    retired: crate::safe_io::Retired,
    /// When the index's racy entries come due.
    settle: Option<i64>,
}

/// The opened state of a project; created on first use and kept.
pub struct Opened {
    pub store: Store,
    pub filter: Filter,
    pub index: FileIndex,
    watcher: Option<ProjectWatcher>,
    last_saved: Option<Instant>,
    /// The stat cache is due: it is written after the reply (see [`Opened::save_index`]).
    save_due: bool,
    /// Each dialog's newest message ids, for a hook's search for a repeated prompt.
    pub(super) recent_messages:
        std::collections::HashMap<String, super::checkpoint::RecentMessages>,
    /// The tree the index wrote during the current operation (cleared when one begins): it is
    /// in the store, pending or in a pack published since, which the store's handles find
    /// only by listing the pack folder again (see [`Opened::prepare`]).
    written_root: Option<gix::ObjectId>,
    /// A dialog whose retention is due (its 10th checkpoint was just recorded): it runs after
    /// the reply, before the project's lock is let go (see [`Opened::prune_after_reply`]).
    prune_due: Option<String>,
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
        let mut on_dir = |dir: &Path| {
            if let Some(w) = watcher.as_mut() {
                w.watch_dir(dir);
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
        *project.mode.lock().expect("mode lock poisoned") = mode;
        if outcome.full {
            tracing::info!(root = %project.root.display(), hashed = outcome.hashed, "verified the whole project");
        }
        Ok(outcome)
    }

    /// The tree of the project as it is now (after [`Opened::prepare`]), its new objects still
    /// pending: for a caller that records a checkpoint of it, which flushes them all as one pack.
    pub fn tree_to_record(&mut self, project: &Project) -> Result<gix::ObjectId> {
        self.prepare(project)?;
        let tree = self.write_tree()?;
        project.events.set_baseline(tree);
        Ok(tree)
    }

    /// Writes the index's tree (pending) as it is, without refreshing it first.
    pub fn write_tree(&mut self) -> Result<gix::ObjectId> {
        let tree = self.index.write_tree(&self.store)?;
        self.written_root = Some(tree);
        Ok(tree)
    }

    /// The tree of the project as it is now, written to the store (durable, readable by every
    /// handle).
    pub fn current_tree(&mut self, project: &Project) -> Result<gix::ObjectId> {
        let tree = self.tree_to_record(project)?;
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
}

impl Opened {
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
                old => self
                    .store
                    .update_ref(&repo, INDEX_REF, old, tree, "ckpt: index"),
            });
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot record the index's tree");
        }
    }
}

/// When this process started (first asked for by the daemon, at its start).
pub static DAEMON_STARTED: std::sync::LazyLock<std::time::SystemTime> =
    std::sync::LazyLock::new(std::time::SystemTime::now);

/// Keeps the tree the saved stat cache describes reachable.
const INDEX_REF: &str = "refs/ckpt/index";

pub struct Project {
    pub root: PathBuf,
    pub store_dir: PathBuf,
    config: std::sync::RwLock<Config>,
    data_dir: PathBuf,
    state: Arc<tokio::sync::Mutex<Option<Opened>>>,
    /// How changes are found (read without the lock).
    pub mode: std::sync::Mutex<WatchMode>,
    /// How far a long refresh has come (read without the lock).
    pub progress: Arc<Progress>,
    /// Open edit transactions.
    pub edits: std::sync::Mutex<super::edit::Edits>,
    /// Live events for subscribers.
    pub events: Arc<Events>,
    /// The tree of the checkpoint recorded last (by this daemon), if any.
    pub last_recorded: std::sync::Mutex<Option<gix::ObjectId>>,
    /// When this daemon started: lock files in the store older than that are stale.
    started: std::time::SystemTime,
    /// Operations begun so far: upkeep waits until this stops moving ([`QUIET`]).
    ops: AtomicU64,
    /// Whether a task already waits for a quiet moment to do the upkeep.
    upkeep_waiting: AtomicBool,
    /// Whether a task already waits to settle the index's racy entries.
    settle_waiting: AtomicBool,
    /// Its history was deleted (`forget`): no operation runs any more.
    forgotten: AtomicBool,
}

impl Project {
    pub fn new(root: PathBuf, config: &Config, paths: &Paths) -> Project {
        let root_for_events = root.clone();
        Project {
            store_dir: paths.store_dir(&root),
            root,
            config: std::sync::RwLock::new(config.clone()),
            data_dir: paths.data_dir.clone(),
            state: Arc::new(tokio::sync::Mutex::new(None)),
            mode: std::sync::Mutex::new(WatchMode::NotOpened),
            progress: Arc::default(),
            edits: std::sync::Mutex::default(),
            events: Arc::new(Events::new(root_for_events)),
            last_recorded: std::sync::Mutex::new(None),
            started: *DAEMON_STARTED,
            ops: AtomicU64::new(0),
            upkeep_waiting: AtomicBool::new(false),
            settle_waiting: AtomicBool::new(false),
            forgotten: AtomicBool::new(false),
        }
    }

    /// The retention of `dialog`: `dialog keep`, else the project's or the global config.
    pub fn retention(&self, store: &Store, dialog: &str) -> Retention {
        let mut r = self.config().retention_for(&self.root);
        if let Some(keep) = store.dialog_keep(dialog) {
            r.keep = keep;
        }
        r
    }

    /// The store's disk budget, if the configuration sets one.
    pub fn max_store_bytes(&self) -> Option<u64> {
        self.config().max_store_bytes_for(&self.root)
    }

    pub fn max_file_size(&self) -> u64 {
        self.config().max_file_size()
    }

    /// The configuration in effect (replaced by a reload).
    pub fn config(&self) -> Config {
        self.config.read().expect("config lock poisoned").clone()
    }

    /// Applies a reloaded configuration. Retention, the disk budget and `max_file_size` apply
    /// from the next operation; changed exclusions (or `max_file_size`) make the next
    /// checkpoint verify every file by stat, so the index follows the new rules exactly.
    pub async fn reconfigure(self: &Arc<Self>, config: Config) -> Result<()> {
        let old = std::mem::replace(
            &mut *self.config.write().expect("config lock poisoned"),
            config.clone(),
        );
        let rules_changed =
            old.exclusions != config.exclusions || old.max_file_size() != config.max_file_size();
        if !rules_changed || !self.is_open().await {
            return Ok(());
        }
        self.run(move |p, o| {
            let hard = vec![p.data_dir.clone(), p.store_dir.clone()];
            o.filter = Filter::new(&p.root, &config.exclusions, hard)?;
            o.force_rescan("the configuration changed");
            Ok(())
        })
        .await
    }

    /// Whether the project's store is open (without waiting for its lock to say so).
    async fn is_open(&self) -> bool {
        self.state.lock().await.is_some()
    }

    /// How the project finds changes now.
    pub fn mode(&self) -> WatchMode {
        self.mode.lock().expect("mode lock poisoned").clone()
    }

    /// Converts request paths (absolute, or relative to the root) into tree paths; a path
    /// outside the project is refused.
    pub fn tree_paths(&self, paths: &[PathBuf]) -> Result<Vec<BString>> {
        paths
            .iter()
            .map(|p| {
                let abs = normalize(&self.root.join(p));
                let rel = abs.strip_prefix(&self.root).map_err(|_| {
                    Error::invalid(format!(
                        "path `{}` is outside the project {}",
                        p.display(),
                        self.root.display()
                    ))
                })?;
                Ok(BString::from(rel.as_os_str().as_bytes()))
            })
            .collect()
    }

    /// Runs `f` on a blocking thread with this project's lock held; different projects never
    /// wait for each other. The store is opened (or created) on first use.
    pub async fn run<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Project, &mut Opened) -> Result<T> + Send + 'static,
    {
        self.run_checked(true, f).await
    }

    /// Like [`Project::run`], also on a damaged store (for `fsck`, which reports and repairs).
    pub async fn run_on_damaged<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Project, &mut Opened) -> Result<T> + Send + 'static,
    {
        self.run_checked(false, f).await
    }

    async fn run_checked<T, F>(self: &Arc<Self>, refuse_damage: bool, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Project, &mut Opened) -> Result<T> + Send + 'static,
    {
        self.ops.fetch_add(1, Ordering::Relaxed);
        let mut guard = self.state.clone().lock_owned().await;
        let me = self.clone();
        let (reply, replied) = tokio::sync::oneshot::channel();
        let task = tokio::task::spawn_blocking(move || {
            let result = me.operate(&mut guard, refuse_damage, f);
            let succeeded = result.is_ok();
            let _ = reply.send(result);
            let opened = guard.as_mut()?;
            if let (Some(dialog), true) = (opened.prune_due.take(), succeeded) {
                // After the reply, under the lock still: the next operation sees the dialog
                // pruned.
                super::timeline::auto_prune(&me, opened, &dialog);
                if let Err(e) = opened.flush() {
                    tracing::warn!(root = %me.root.display(), error = %e, "automatic prune failed");
                }
            }
            let after = AfterReply {
                urgent: opened.store.must_merge(),
                later: opened.save_due || opened.store.needs_merge(),
                load: opened.store.pack_loader().map(|l| Box::new(l) as Box<_>),
                spares: opened.store.spare_maker().map(|m| Box::new(m) as Box<_>),
                retired: opened.store.take_retired(),
                settle: opened.index.settle_due(),
            };
            succeeded.then_some(after)
        });
        let value = replied
            .await
            .map_err(|_| Error::Internal("the project's operation stopped unexpectedly".into()))?;
        // The rest once the operation's thread is done (it is free again first, so that the
        // reply is not kept waiting for a processor by the work below).
        let me = self.clone();
        tokio::spawn(async move {
            if let Ok(Some(after)) = task.await {
                me.after_reply(after);
            }
        });
        value
    }

    /// What an operation leaves to do once its reply is sent.
    fn after_reply(self: &Arc<Self>, after: AfterReply) {
        let AfterReply {
            urgent,
            later,
            load,
            spares,
            retired,
            settle,
        } = after;
        if let Some(due) = settle {
            self.settle_when_due(due);
        }
        if load.is_some() || !retired.is_empty() || spares.is_some() {
            // Loading the pack the operation wrote, freeing the files it replaced and making
            // the next publish's files wait for no one.
            tokio::task::spawn_blocking(move || {
                if let Some(load) = load {
                    load();
                }
                drop(retired);
                if let Some(make) = spares {
                    make();
                }
            });
        }
        // Upkeep comes after the reply, and when it can wait, after the project falls quiet:
        // a checkpoint never waits behind it while an agent works.
        if urgent {
            tokio::spawn(self.clone().upkeep());
        } else if later && !self.upkeep_waiting.swap(true, Ordering::AcqRel) {
            tokio::spawn(self.clone().upkeep_when_quiet());
        }
    }

    /// Opens the project's state if needed, checks the root and the store, runs `f` and makes
    /// what it left pending durable (or forgotten).
    fn operate<T>(
        self: &Arc<Self>,
        guard: &mut Option<Opened>,
        refuse_damage: bool,
        f: impl FnOnce(&Project, &mut Opened) -> Result<T>,
    ) -> Result<T> {
        if self.forgotten.load(Ordering::SeqCst) {
            return Err(Error::invalid(format!(
                "the history of {} was deleted (`ckpt forget`)",
                self.root.display()
            )));
        }
        // The root was canonical when it was watched: a symlink there now points
        // somewhere else, which is not this project. One open answers both (a folder
        // that can be read, and not through a symlink).
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if let Err(e) = rustix::fs::open(&self.root, flags, Mode::empty()) {
            let root = self.root.clone();
            if std::fs::symlink_metadata(&root).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::RootReplaced { root });
            }
            let source = std::io::Error::from(e);
            return Err(Error::Unavailable { root, source });
        }
        if guard.is_some() && std::fs::symlink_metadata(&self.store_dir).is_err() {
            // Gone whole (deleted under the daemon): start a new store, never write into
            // a half-made folder. Everything is read again into it.
            tracing::error!(store = %self.store_dir.display(), "the store vanished; creating it afresh (earlier checkpoints are gone)");
            *guard = None;
        }
        if guard.is_none() {
            if !refuse_damage {
                Store::repair_layout(&self.store_dir);
            }
            *guard = Some(self.open()?);
            if let Some(interval) = self.config().auto_checkpoint_for(&self.root) {
                // Watches are placed by a walk: do it now, not at the first checkpoint.
                let opened = guard.as_mut().expect("opened just above");
                if let Err(e) = opened.prepare(self) {
                    tracing::warn!(root = %self.root.display(), error = %e, "cannot read the project");
                }
                super::auto::start(self, interval);
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
                tracing::warn!(store = %self.store_dir.display(), error = %e, "cannot reopen the store");
            }
        }
        if refuse_damage && !damage.is_empty() {
            tracing::error!(store = %self.store_dir.display(), damage = ?damage, "refusing to use a damaged store");
            let store = self.store_dir.clone();
            return Err(Error::Damaged { store, damage });
        }
        // What the index wrote before is looked for again (someone may have removed it
        // since).
        opened.written_root = None;
        let result = f(self, opened);
        // Whatever the operation left pending is made durable (or forgotten) before the
        // project is free again.
        let flushed = opened.flush();
        let value = result?;
        flushed.map(|()| value)
    }

    /// Files read (or written by a restore) within a timestamp tick of now are racy: the next
    /// refresh reads them again. Once their window has passed they are read here, after the
    /// reply, so that the next checkpoint reads only what changed (see
    /// [`FileIndex::settle_racy`]). One task at a time; it goes on while new racy entries
    /// come due later.
    fn settle_when_due(self: &Arc<Self>, due: i64) {
        if self.settle_waiting.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut due = due;
            loop {
                let wait = due.saturating_sub(crate::safe_io::now_ns()).max(0) as u64;
                tokio::time::sleep(Duration::from_nanos(wait) + SETTLE_MARGIN).await;
                let mut guard = me.state.clone().lock_owned().await;
                let project = me.clone();
                // The flag is cleared with the lock held: an operation after this schedules
                // its own task, one before it is seen by `settle_due` here.
                let next = tokio::task::spawn_blocking(move || {
                    let next = guard.as_mut().and_then(|opened| {
                        opened.settle_racy(&project);
                        opened.index.settle_due()
                    });
                    if next.is_none() {
                        project.settle_waiting.store(false, Ordering::Release);
                    }
                    next
                })
                .await;
                match next {
                    Ok(Some(later)) => due = later,
                    Ok(None) => return,
                    Err(_) => {
                        me.settle_waiting.store(false, Ordering::Release);
                        return;
                    }
                }
            }
        });
    }

    /// Waits until no operation began for [`QUIET`], then does the upkeep.
    async fn upkeep_when_quiet(self: Arc<Self>) {
        loop {
            let seen = self.ops.load(Ordering::Relaxed);
            tokio::time::sleep(QUIET).await;
            if self.ops.load(Ordering::Relaxed) == seen {
                break;
            }
        }
        self.upkeep_waiting.store(false, Ordering::Release);
        self.upkeep().await;
    }

    /// Upkeep operations leave for later: the stat cache when it is due, and merging the
    /// store's small packs (one per checkpoint) when their turn comes.
    async fn upkeep(self: Arc<Self>) {
        let mut guard = self.state.clone().lock_owned().await;
        let _ = tokio::task::spawn_blocking(move || {
            let Some(opened) = guard.as_mut() else {
                return;
            };
            if opened.save_due {
                opened.save_index(true);
            }
            if opened.store.needs_merge() {
                if let Err(e) = opened.store.consolidate_packs() {
                    tracing::warn!(store = %opened.store.dir().display(), error = %e, "cannot merge small packs");
                }
            }
            drop(opened.store.take_retired());
        })
        .await;
    }

    /// Whether the project's lock is free right now (for status reports that must not wait).
    pub fn is_busy(&self) -> bool {
        self.state.try_lock().is_err()
    }

    fn open(&self) -> Result<Opened> {
        Store::remove_stale_files(&self.store_dir, self.started);
        if std::fs::symlink_metadata(&self.store_dir)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o077 != 0)
        {
            tracing::info!(store = %self.store_dir.display(), "making the store private to this user");
            crate::safe_io::make_private(&self.store_dir, true);
        }
        let store = Store::open_or_init(&self.store_dir, &self.root)?;
        // The data directory is never part of a project, even when it lives inside one.
        let hard = vec![self.data_dir.clone(), self.store_dir.clone()];
        let exclusions = self.config().exclusions;
        let filter = Filter::new(&self.root, &exclusions, hard.clone())?;
        let mut stale = load_stat_cache(&stat_cache_path(store.dir()));
        let repo = store.repo();
        if let Ok(Some(tree)) = store.ref_target(&repo, INDEX_REF) {
            if !repo.has_object(tree) {
                tracing::warn!(store = %store.dir().display(), "the stat cache names objects the store lost; ignoring it");
                stale = StatCache::default();
            }
        }
        drop(repo);
        let index = FileIndex::with_stat_cache(stale, self.progress.clone());
        let (tap_tx, tap_rx) = crate::watch::queue::bounded(TAP_QUEUE);
        let tap = Tap {
            tx: tap_tx,
            lost: Arc::default(),
        };
        let lost = tap.lost.clone();
        let cookie_dir = store.dir().join(SYNC_DIR);
        let watcher = match ProjectWatcher::start_with(&self.root, &cookie_dir, Some(tap)) {
            Ok(w) => {
                let pump_filter = Filter::new(&self.root, &exclusions, hard.clone())?;
                start_pump(
                    self.events.clone(),
                    tap_rx,
                    lost,
                    pump_filter,
                    self.store_dir.clone(),
                    self.max_file_size(),
                    w.handle(),
                );
                Some(w)
            }
            Err(e) => {
                tracing::warn!(root = %self.root.display(), error = %e, "cannot watch; checkpoints verify by stat");
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
        })
    }

    /// Stops the project for good before its store is deleted: every operation from now on is
    /// refused, and its opened state (watcher, store handles) is dropped once the running one
    /// is done.
    pub async fn forget(&self) {
        self.forgotten.store(true, Ordering::SeqCst);
        let mut guard = self.state.clone().lock_owned().await;
        let _ = tokio::task::spawn_blocking(move || drop(guard.take())).await;
    }

    /// At shutdown: saves the stat cache and settles the store's journal, if the project is open.
    pub async fn close(&self) {
        let mut guard = self.state.clone().lock_owned().await;
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(opened) = guard.as_mut() {
                opened.save_index(true);
                // Everything the journal holds is flushed where it belongs: the next daemon
                // has nothing to redo (and a ref someone changes in between is not set back).
                if let Err(e) = opened.store.retire_journal() {
                    tracing::warn!(store = %opened.store.dir().display(), error = %e, "cannot settle the store's journal");
                }
            }
        })
        .await;
    }
}

/// `path` if it is absolute.
pub fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Err(Error::invalid(format!(
            "path `{}` must be absolute",
            path.display()
        )))
    }
}

/// Removes `.` and resolves `..` without touching the filesystem.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_become_tree_paths() {
        let paths = Paths {
            socket: PathBuf::from("/data/ckptd.sock"),
            data_dir: PathBuf::from("/data"),
        };
        let p = Project::new(PathBuf::from("/p"), &Config::default(), &paths);
        let ok = p
            .tree_paths(&[
                PathBuf::from("/p/src/a.rs"),
                PathBuf::from("docs"),
                PathBuf::from("/p"),
            ])
            .unwrap();
        assert_eq!(
            ok,
            vec![
                BString::from("src/a.rs"),
                BString::from("docs"),
                BString::from("")
            ]
        );
        for bad in ["/etc/passwd", "../x", "/p/../q"] {
            assert!(p.tree_paths(&[PathBuf::from(bad)]).is_err(), "{bad}");
        }
    }
}
