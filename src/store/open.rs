//! A store handle: opening (or creating) the bare repository, redoing what its journal holds,
//! and the gix handles operations read and write through.

use std::path::{Path, PathBuf};

use super::checkpoint::Checkpoint;
use super::error::StoreError;
use super::folders::{empty_folder, SPARE_DIR, TRASH_DIR};
use super::pack::index::repair_indices;
use super::sentinel;
use super::txn::durable::Durable;
use super::txn::{journal, refs, replay};
use crate::fs::Retired;

/// Pack index slots of a store handle: a store holds a few big packs, a few merged ones (each
/// larger than all smaller together) and at most `MAX_SMALL_PACKS` new ones between
/// merges; gix fails to load packs past its slots.
const OBJECT_STORE_SLOTS: u16 = 256;

/// One project's store.
pub struct Store {
    pub(crate) dir: PathBuf,
    repo: gix::ThreadSafeRepository,
    /// What makes its writes durable (see [`crate::store::txn`]).
    pub(crate) durable: Durable,
    /// Set when packs this handle checked disappeared (see [`Store::take_packs_vanished`]).
    pub(crate) packs_vanished: std::sync::atomic::AtomicBool,
    /// Second names of the files the last operations replaced (see [`Store::retire`]).
    pub(crate) retired: parking_lot::Mutex<Retired>,
    /// The checkpoint recorded last, as read back (see `Store::checkpoint_or_last`).
    pub(crate) last_recorded: parking_lot::Mutex<Option<Checkpoint>>,
    /// Handles not in use (see [`Store::repo`]).
    idle_repos: std::sync::Arc<parking_lot::Mutex<Vec<gix::Repository>>>,
    /// What changed in the store's folders since the last check (see [`Store::damage`]);
    /// None where they cannot be watched.
    pub(crate) inbox: Option<std::sync::Arc<sentinel::Inbox>>,
}

/// Handles kept for the next operations (one per thread that works at once).
const IDLE_REPOS: usize = 2;

/// A handle from [`Store::repo`]; given back to its store when dropped.
pub struct Repo {
    repo: Option<gix::Repository>,
    idle: std::sync::Arc<parking_lot::Mutex<Vec<gix::Repository>>>,
}

impl std::ops::Deref for Repo {
    type Target = gix::Repository;

    fn deref(&self) -> &gix::Repository {
        self.repo
            .as_ref()
            .expect("a handle is taken only when dropped")
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let Some(repo) = self.repo.take() else {
            return;
        };
        let mut idle = self.idle.lock();
        if idle.len() < IDLE_REPOS {
            idle.push(repo);
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

impl Store {
    /// Opens the store at `dir`, creating it (for the project at `root`) if it does not exist.
    pub fn open_or_init(dir: &Path, root: &Path) -> Result<Store, StoreError> {
        if !dir.join("objects").is_dir() {
            Self::init(dir, root)?;
        }
        Self::open(dir)
    }

    fn init(dir: &Path, root: &Path) -> Result<(), StoreError> {
        let init_err = |message: String| StoreError::Init {
            path: dir.to_path_buf(),
            message,
        };
        let parent = dir
            .parent()
            .ok_or_else(|| init_err("no parent directory".into()))?;
        std::fs::create_dir_all(parent).map_err(|e| init_err(e.to_string()))?;
        // Build it beside its final place and rename, so a crash never leaves half a store.
        let tmp = parent.join(format!(
            ".init-{}-{}",
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        gix::init_bare(&tmp).map_err(|e| init_err(e.to_string()))?;
        // gix writes `logallrefupdates = false`; ckpt wants reflogs, and never wants git's
        // automatic gc to run concurrently with the daemon.
        let config = format!(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n\
             \tlogallrefupdates = always\n[gc]\n\tauto = 0\n[ckpt]\n\troot = {}\n",
            root.display()
        );
        std::fs::write(tmp.join("config"), config).map_err(|e| init_err(e.to_string()))?;
        std::fs::write(
            tmp.join("description"),
            format!("ckpt checkpoints of {}\n", root.display()),
        )
        .map_err(|e| init_err(e.to_string()))?;
        match std::fs::rename(&tmp, dir) {
            Ok(()) => Ok(()),
            // Someone else finished first; theirs is as good as ours.
            Err(_) if dir.join("objects").is_dir() => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok(())
            }
            Err(e) => Err(init_err(e.to_string())),
        }
    }

    /// Removes what a killed writer left in the store: ref and config locks (which would
    /// refuse every later update of that ref) and temporary pack files, if they are older than
    /// `before` (the daemon's start: only one daemon serves a store, so they are nobody's).
    pub fn remove_stale_files(dir: &Path, before: std::time::SystemTime) {
        // `below_refs`: every folder is walked; otherwise only `refs` is entered.
        fn visit(path: &Path, before: std::time::SystemTime, below_refs: bool) {
            let Ok(entries) = std::fs::read_dir(path) else {
                return;
            };
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if meta.is_dir() {
                    if below_refs || name == "refs" {
                        visit(&entry.path(), before, true);
                    }
                    continue;
                }
                let stale = meta.modified().is_ok_and(|m| m < before);
                if stale && (name.ends_with(".lock") || name.starts_with("tmp_ckpt_")) {
                    match std::fs::remove_file(entry.path()) {
                        Ok(()) => {
                            tracing::info!(path = %entry.path().display(), "removed a lock or temporary file a stopped writer left")
                        }
                        Err(e) => {
                            tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove a stale lock or temporary file")
                        }
                    }
                }
            }
        }
        visit(dir, before, false);
        visit(&dir.join("objects").join("pack"), before, false);
    }

    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let (journal, repo, first) = journal::open(dir, |redo| {
            // Packs first: the refs name their objects, and the index repair reads them.
            let pack_paths = match &redo {
                Some((journaled, _)) => replay::replay_packs(dir, &journaled.records)?,
                None => Vec::new(),
            };
            let repo = Self::open_repo(dir)?;
            if let Some((journaled, journal)) = redo {
                let local = repo.to_thread_local();
                let made = journaled.end.cut_was_made(|name| {
                    local
                        .try_find_reference(name)
                        .ok()
                        .flatten()
                        .and_then(|r| r.target().try_id().map(|id| id.to_owned()))
                });
                replay::report_end(dir, &journaled.end, made);
                let ref_paths = refs::replay_refs(dir, &local, &journaled.records)?;
                journal.unsettled(pack_paths);
                journal.unsettled(ref_paths);
                journal.retire()?;
                tracing::info!(store = %dir.display(), records = journaled.records.len(), "redid the store's journal");
            }
            Ok(repo)
        })?;
        if first {
            // What an earlier daemon left (one that crashed). Never at a later open in this
            // process: another handle of the store (a subscriber's, a reopen) would take the
            // live handle's spare files and second names from under it.
            empty_folder(dir, TRASH_DIR);
            empty_folder(dir, SPARE_DIR);
        }
        Ok(Store {
            dir: dir.to_path_buf(),
            repo,
            durable: Durable::new(dir, journal),
            packs_vanished: Default::default(),
            retired: Default::default(),
            last_recorded: Default::default(),
            idle_repos: Default::default(),
            inbox: sentinel::Inbox::watch(dir),
        })
    }

    fn open_repo(dir: &Path) -> Result<gix::ThreadSafeRepository, StoreError> {
        // Before any handle reads an index: one a power cut left unfinished is rebuilt.
        repair_indices(&dir.join("objects").join("pack"));
        // Room for the small packs that accumulate between merges (see `pending`), whatever
        // was on disk at open.
        let options = gix::open::Options::isolated()
            .object_store_slots(gix::odb::store::init::Slots::Given(OBJECT_STORE_SLOTS))
            // Reflogs only where ckpt asks for them (every ref but the metadata keep-alives,
            // which never move: a reflog each would be one more file per prompt).
            .config_overrides(["core.logAllRefUpdates=true"]);
        let repo = gix::open_opts(dir, options).map_err(|e| StoreError::Open {
            path: dir.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(repo.into_sync())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A handle on the store's objects and refs. Handles are kept between operations with
    /// their cache of objects read (objects never change; a pack someone removed makes the
    /// whole store reopen), so the trees the operation before read or wrote are not inflated
    /// again.
    pub fn repo(&self) -> Repo {
        let pooled = self.idle_repos.lock().pop();
        let repo = pooled.unwrap_or_else(|| self.own_repo());
        Repo {
            repo: Some(repo),
            idle: self.idle_repos.clone(),
        }
    }

    /// A handle of its own, not from the pool (e.g. to keep objects in memory).
    pub(crate) fn own_repo(&self) -> gix::Repository {
        let mut repo = self.repo.to_thread_local();
        repo.object_cache_size_if_unset(4 * 1024 * 1024);
        repo
    }

    pub(crate) fn thread_safe(&self) -> &gix::ThreadSafeRepository {
        &self.repo
    }

    /// A handle like the store's own, on objects of its own: it shares no pack mapping with the
    /// store's handles, and the pages it maps go when it is dropped.
    pub(crate) fn detached_handle(&self) -> Result<gix::Repository, StoreError> {
        let mut repo = self.repo.clone();
        repo.objects = self.fresh_objects()?;
        Ok(repo.to_thread_local())
    }

    /// A new object database of the store's objects (nothing loaded or mapped yet).
    fn fresh_objects(&self) -> Result<std::sync::Arc<gix::odb::Store>, StoreError> {
        let old = &self.repo.objects;
        let options = gix::odb::store::init::Options {
            slots: gix::odb::store::init::Slots::Given(OBJECT_STORE_SLOTS),
            use_multi_pack_index: old.use_multi_pack_index(),
            current_dir: Some(self.dir.clone()),
            ..Default::default()
        };
        let mut replacements = old.replacements();
        let objects = gix::odb::Store::at_opts(
            old.path().to_path_buf(),
            old.object_hash(),
            &mut replacements,
            options,
        )
        .map_err(|source| StoreError::Io {
            path: old.path().to_path_buf(),
            source,
        })?;
        Ok(std::sync::Arc::new(objects))
    }

    /// Lets go of the pages of packs that reads mapped (an operation that read much history,
    /// a blame say, leaves megabytes of them resident), and of the handles' caches: the
    /// handles are made anew, so the next read maps only what it needs. Not while objects are
    /// pending (their handle holds them): then nothing changes.
    pub fn release_mappings(&mut self) -> Result<(), StoreError> {
        if !self.durable.pending.get_mut().let_go() {
            return Ok(());
        }
        self.repo.objects = self.fresh_objects()?;
        self.idle_repos.lock().clear();
        Ok(())
    }
}
