//! The object store of one project: a bare git repository outside the project, written with gix.
//!
//! Everything here is synchronous; the daemon calls it from blocking threads while holding the
//! project's lock, so one project's store is only ever written by one operation at a time.
//!
//! Layout: checkpoints are commits whose tree is the project's tree. Each dialog's timeline is
//! a first-parent chain under `refs/ckpt/dialogs/<dialog>`; client metadata blobs are kept
//! alive by `refs/ckpt/meta/<blob id>`. An operation's new objects are written as one pack
//! ([`pending`]); ref updates are compare-and-swap transactions with a reflog. Both are made
//! durable before anything is published, by one flushed record of the store's journal
//! ([`journal`]), or (a large pack) by flushing the pack before the record.

pub mod blame;
pub mod bundle;
pub mod checkpoint;
pub mod diff;
pub mod fsck;
pub mod gc;
pub mod import;
pub(crate) mod message;
pub mod names;
pub mod pool;
pub mod retention;
mod sentinel;
pub mod share;
pub mod snapshot;
pub mod timeline;
pub mod tree;
pub mod treediff;
pub mod txn;

use std::path::{Path, PathBuf};

use crate::safe_io::Retired;

pub use checkpoint::{Checkpoint, CheckpointError, Imported, NewCheckpoint, RestoreLink};
pub use snapshot::{Snapshot, SnapshotError, SnapshotOptions};
use txn::{index, journal, merge, pending, replay, spares};

/// Pack index slots of a store handle: a store holds a few big packs, a few merged ones (each
/// larger than all smaller together) and at most [`pending::MAX_SMALL_PACKS`] new ones between
/// merges; gix fails to load packs past its slots.
const OBJECT_STORE_SLOTS: u16 = 256;

/// Refs that get no reflog: the client metadata keep-alives (`refs/ckpt/meta/<blob>`).
const UNLOGGED_REFS: &str = "refs/ckpt/meta/";

/// The store's folder for the second names of the files an operation replaces (see
/// [`Store::retire`]); emptied at open.
pub const TRASH_DIR: &str = "ckpt-trash";
/// Where the files the next publish writes into are made ahead of time (see [`pack::Spares`]).
pub const SPARE_DIR: &str = "ckpt-spare";
static TRASH_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The dialog used when a client names none.
pub const DEFAULT_DIALOG: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create store at {path}: {message}")]
    Init { path: PathBuf, message: String },
    #[error("cannot open store at {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("store {what} failed: {}", error_chain(.source.as_ref()))]
    Git {
        what: &'static str,
        /// The gix error, kept whole (its chain names the real cause).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("store I/O on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Concurrent(String),
}

impl StoreError {
    /// A git-level failure of `what`, with the whole chain of causes in the message (gix
    /// wraps the I/O error that names the real cause, e.g. "No space left on device").
    pub(crate) fn git(
        what: &'static str,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Git {
            what,
            source: Box::new(err),
        }
    }
}

/// `err` and its causes, as one line.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// One project's store.
pub struct Store {
    dir: PathBuf,
    repo: gix::ThreadSafeRepository,
    /// Packs found whole, with the stat of their index and data file when checked.
    checked_packs: parking_lot::Mutex<std::collections::HashMap<String, PackStamp>>,
    /// The current operation's objects, not yet durable.
    pending: parking_lot::Mutex<pending::Pending>,
    /// Set when pending objects were dropped by a failed flush.
    lost: std::sync::atomic::AtomicBool,
    /// Set when packs this handle checked disappeared (see [`Store::take_packs_vanished`]).
    packs_vanished: std::sync::atomic::AtomicBool,
    /// Set once the store was seen holding objects (see `Store::holds_no_objects`): a store
    /// never loses all of them again (its refs keep some).
    holds_objects: std::sync::atomic::AtomicBool,
    /// Small packs on disk the next merge would take (see [`Store::needs_merge`]).
    small_packs: std::sync::atomic::AtomicUsize,
    /// An object of the pack written last, when the handles have not loaded that pack yet
    /// (see [`Store::pack_loader`]).
    unloaded: parking_lot::Mutex<Option<gix::ObjectId>>,
    /// The store's journal (shared by every handle of the store in this process).
    journal: std::sync::Arc<parking_lot::Mutex<journal::Journal>>,
    /// Second names of the files the last operations replaced (see [`Store::retire`]).
    retired: parking_lot::Mutex<Retired>,
    /// The checkpoint recorded last, as read back (see `Store::checkpoint_or_last`).
    last_recorded: parking_lot::Mutex<Option<Checkpoint>>,
    /// Handles not in use (see [`Store::repo`]).
    idle_repos: std::sync::Arc<parking_lot::Mutex<Vec<gix::Repository>>>,
    /// Files made ahead of time for the next publish (see [`Store::spare_maker`]).
    spares: std::sync::Arc<spares::Spares>,
    /// What changed in the store's folders since the last check (see [`Store::damage`]);
    /// None where they cannot be watched.
    inbox: Option<std::sync::Arc<sentinel::Inbox>>,
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

/// The stamps of a pack's index and of its data file.
pub(crate) type PackStamp = (Option<FileStamp>, Option<FileStamp>);
/// A file's size, modification time, inode and change time (which no one can set back: a
/// write that keeps the size and resets the modification time still changes it).
pub(crate) type FileStamp = (u64, i64, i64, u64, i64, i64);

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
                let ref_paths = txn::refs::replay_refs(dir, &local, &journaled.records)?;
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
            checked_packs: Default::default(),
            pending: Default::default(),
            lost: Default::default(),
            packs_vanished: Default::default(),
            holds_objects: Default::default(),
            small_packs: merge::merge_candidates(dir).len().into(),
            unloaded: Default::default(),
            journal,
            retired: Default::default(),
            last_recorded: Default::default(),
            idle_repos: Default::default(),
            spares: Default::default(),
            inbox: sentinel::Inbox::watch(dir),
        })
    }

    fn open_repo(dir: &Path) -> Result<gix::ThreadSafeRepository, StoreError> {
        // Before any handle reads an index: one a power cut left unfinished is rebuilt.
        index::repair_indices(&dir.join("objects").join("pack"));
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
        if !self.pending.get_mut().let_go() {
            return Ok(());
        }
        self.repo.objects = self.fresh_objects()?;
        self.idle_repos.lock().clear();
        Ok(())
    }

    /// Gives the file at `path` (a ref, or a project file on the same filesystem), which a
    /// rename is about to replace, a second name in [`TRASH_DIR`]: the rename then frees
    /// nothing, and dropping [`Store::take_retired`]'s list after the reply does (see
    /// [`Retired`]). Never where the folder is not a real one of the store; where no second
    /// name can be made, the rename pays as before.
    pub fn retire(&self, path: &Path) {
        if let Some(alias) = self.trash_name() {
            self.retired.lock().keep(path, alias);
        }
    }

    /// Removes the file at `path` (a project file a restore took out of the way), freeing its
    /// blocks after the reply where it can: it is moved into [`TRASH_DIR`] (same filesystem),
    /// else removed now. A folder that cannot be moved stays where it is.
    pub fn discard(&self, path: &Path) {
        let moved = self
            .trash_name()
            .is_some_and(|alias| self.retired.lock().take(path, alias));
        if !moved {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a file a restore replaced");
            }
        }
    }

    /// A new name in [`TRASH_DIR`]; None where the folder is not a real one of the store.
    fn trash_name(&self) -> Option<PathBuf> {
        let trash = private_folder(&self.dir, TRASH_DIR)?;
        let n = TRASH_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(trash.join(format!("{}-{n}", std::process::id())))
    }

    /// The work of making the files the next publish writes into (see [`pack::Spares`]), when
    /// they are not ready: the caller runs it after its reply. Running it late, twice or never
    /// changes no result (a publish without them makes its own).
    pub fn spare_maker(&self) -> Option<impl FnOnce() + Send + 'static> {
        if !self.spares.short() {
            return None;
        }
        let (spares, dir) = (self.spares.clone(), self.dir.clone());
        Some(move || {
            if let Some(folder) = private_folder(&dir, SPARE_DIR) {
                spares.top_up(&folder);
            }
        })
    }

    /// The second names of the files replaced since the last call, to drop (which removes
    /// them) after the reply.
    pub fn take_retired(&self) -> Retired {
        std::mem::take(&mut *self.retired.lock())
    }
}

/// The store's folder `name` ([`TRASH_DIR`], [`SPARE_DIR`]), made if missing; None where it is
/// not a real folder.
fn private_folder(dir: &Path, name: &str) -> Option<PathBuf> {
    let folder = dir.join(name);
    let ready = match std::fs::symlink_metadata(&folder) {
        Ok(m) => m.is_dir(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&folder)
                .is_ok()
        }
        Err(_) => false,
    };
    ready.then_some(folder)
}

/// Removes what a daemon that stopped left in the store's folder `name` (second names in
/// [`TRASH_DIR`], spare files in [`SPARE_DIR`]), never through a symlink in its place.
fn empty_folder(dir: &Path, name: &str) {
    use rustix::fs::{AtFlags, Dir, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(dir.join(name), flags, Mode::empty()) else {
        return;
    };
    let Ok(entries) = Dir::read_from(&fd) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name != c"." && name != c".." {
            // A folder fails (`EISDIR`): only files are ever put there.
            let _ = rustix::fs::unlinkat(&fd, name, AtFlags::empty());
        }
    }
}

/// The identity ckpt writes commits and reflogs as.
pub(crate) fn signature() -> gix::actor::Signature {
    let now = jiff::Timestamp::now();
    gix::actor::Signature {
        name: "ckpt".into(),
        email: "ckpt@localhost".into(),
        time: gix::date::Time::new(now.as_second(), 0),
    }
}
