//! Watching a project: notify (inotify on Linux) with one non-recursive watch per included
//! folder, placed by the walk before it lists the folder, so nothing created afterwards is
//! missed and nothing created before is unseen.
//!
//! The notify callback folds each event into the project's dirty set where it arrives (a lock
//! held for a set insert; it never waits for anything else), so a sync's cookie wakes the
//! waiting request directly. A kernel queue overflow or a watcher error turns into a rescan
//! request; a watch that cannot be placed degrades the project to stat-only verifies.
//! [`ProjectWatcher::sync`] renames a cookie file in a folder of the store (watched by the same
//! inotify instance, whose queue is ordered) and waits for that event, so that every write
//! completed before a request is in the dirty set when the request is served. The project
//! itself is never written to (not even its root folder's modification time), and a rename
//! allocates nothing.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use std::time::Duration;

use gix::bstr::BString;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, EventKindMask, RecursiveMode, WatchPathConfig, Watcher};

use crate::filter::TEMP_PREFIX;

pub mod queue;

/// How long a sync waits for its cookie before falling back to a stat verify.
const COOKIE_TIMEOUT: Duration = Duration::from_secs(5);
/// The cookie's name carries a sequence number, so each sync waits for its own event.
const COOKIE_PREFIX: &str = "sync-";

#[derive(Default)]
struct Dirty {
    paths: BTreeSet<BString>,
    rescan: Option<String>,
    cookies: HashSet<OsString>,
}

struct Shared {
    root: PathBuf,
    /// The folder (in the store) where syncs rename their cookie.
    cookie_dir: PathBuf,
    dirty: Mutex<Dirty>,
    arrived: Condvar,
    /// Where changed paths are also reported as they arrive (for live events), if anyone asks.
    tap: Mutex<Option<Tap>>,
}

/// What the watcher reports to a tap, as it happens.
#[derive(Debug)]
pub enum WatchNote {
    /// Paths (relative to the root) that may have changed.
    Changed(Vec<BString>),
    /// The watcher cannot vouch for changes any more (overflow, error, watch limit).
    Degraded(String),
}

/// A bounded channel for notes; when it is full, notes are dropped and `lost` is set.
pub struct Tap {
    pub tx: queue::Sender<WatchNote>,
    pub lost: Arc<AtomicBool>,
}

/// What happened since the last sync.
#[derive(Debug, Default)]
pub struct Changes {
    /// Paths (relative to the root) that may have changed.
    pub paths: BTreeSet<BString>,
    /// Set when the paths cannot be trusted: the whole project must be verified.
    pub rescan: Option<String>,
}

/// Why watching stopped when the inotify watch limit stopped it (see [`watch_limit_advice`]).
pub const WATCH_LIMIT: &str = "inotify watch limit reached";

/// What to raise, and to what, so that a project of `folders` folders can be watched: the
/// smaller of the system-wide limit and this user namespace's, plus the project's folders
/// (the watches other programs hold stay theirs).
pub fn watch_limit_advice(folders: usize) -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let system = (
        "fs.inotify.max_user_watches",
        read("/proc/sys/fs/inotify/max_user_watches"),
    );
    let userns = (
        "user.max_inotify_watches",
        read("/proc/sys/user/max_inotify_watches"),
    );
    let (name, limit) = match (system, userns) {
        ((_, Some(a)), (n, Some(b))) if b < a => (n, b),
        ((n, Some(a)), _) => (n, a),
        (_, (n, Some(b))) => (n, b),
        _ => ("fs.inotify.max_user_watches", 0),
    };
    let wanted = limit + folders as u64;
    format!(
        "{WATCH_LIMIT}: {name} is {limit} and this project has {folders} folders; raise it to at \
         least {wanted} (`sudo sysctl {name}={wanted}`, and a line in /etc/sysctl.d/ to keep it), \
         then `ckpt rescan`; until then checkpoints verify every file by stat (exact, slower)"
    )
}

pub struct ProjectWatcher {
    watcher: Arc<Mutex<notify::RecommendedWatcher>>,
    shared: Arc<Shared>,
    degraded: Option<String>,
    /// Whether the root folder is watched (its events are what the cookie vouches for).
    root_watched: bool,
    /// The cookie file as the last sync left it; None until the cookie folder is watched
    /// (again: after a sync whose cookie did not arrive).
    cookie: Mutex<Option<PathBuf>>,
    /// Whether the cookie folder was ever watched: only then is its watch removed before it is
    /// placed again (a removal looks at every watch the project has: at a million files, ~2
    /// ms that the first sync after a start would wait for).
    cookie_dir_watched: AtomicBool,
}

static COOKIES: AtomicU64 = AtomicU64::new(0);

impl ProjectWatcher {
    /// Starts a watcher for the project at `root` (no folder is watched yet) whose syncs use
    /// the folder `cookie_dir` (ckpt's own, outside the project's watched folders).
    pub fn start(root: &Path, cookie_dir: &Path) -> notify::Result<ProjectWatcher> {
        Self::start_with(root, cookie_dir, None)
    }

    /// Like [`ProjectWatcher::start`], also reporting to `tap`.
    pub fn start_with(
        root: &Path,
        cookie_dir: &Path,
        tap: Option<Tap>,
    ) -> notify::Result<ProjectWatcher> {
        let shared = Arc::new(Shared {
            root: root.to_path_buf(),
            cookie_dir: cookie_dir.to_path_buf(),
            dirty: Mutex::new(Dirty::default()),
            arrived: Condvar::new(),
            tap: Mutex::new(tap),
        });
        let folder = shared.clone();
        // Changes, and closes after writing (a write through a shared memory map makes no
        // other event); never opens: `grep -r` or a build reading every file would send one
        // event per file, each costing the daemon CPU and the queue room.
        let config = notify::Config::default()
            .with_event_kinds(EventKindMask::CORE | EventKindMask::ACCESS_CLOSE);
        let watcher = notify::RecommendedWatcher::new(move |event| folder.fold(event), config)?;
        Ok(ProjectWatcher {
            watcher: Arc::new(Mutex::new(watcher)),
            shared,
            degraded: None,
            root_watched: false,
            cookie: Mutex::new(None),
            cookie_dir_watched: AtomicBool::new(false),
        })
    }

    /// Watches each of `dirs` (not recursively), in one request to the watcher's thread. A
    /// folder that vanished meanwhile is passed over (its parent's event covers that); any
    /// other failure degrades the project to stat verifies.
    pub fn watch_dirs(&mut self, dirs: &[&Path]) {
        if self.degraded.is_some() || dirs.is_empty() {
            return;
        }
        let watch = |dir: &&Path| notify::PathOp::Watch(dir.to_path_buf(), one_folder());
        let mut ops: Vec<notify::PathOp> = dirs.iter().map(watch).collect();
        let root_asked = dirs.contains(&self.shared.root.as_path());
        let mut root_failed = false;
        while !ops.is_empty() {
            let Err(e) = self.watcher.lock().update_paths(ops) else {
                break;
            };
            let failed = e.origin.as_ref().map(|op| op.as_path().to_path_buf());
            root_failed |= failed.as_deref() == Some(self.shared.root.as_path());
            match failed {
                Some(dir) if dir.symlink_metadata().is_err() => ops = e.remaining,
                _ => {
                    let why = match e.source.kind {
                        notify::ErrorKind::MaxFilesWatch => WATCH_LIMIT.to_string(),
                        _ => match failed {
                            Some(dir) => format!("cannot watch {}: {}", dir.display(), e.source),
                            None => format!("cannot watch folders: {}", e.source),
                        },
                    };
                    tracing::warn!(root = %self.shared.root.display(), reason = %why, "watching degraded; checkpoints verify by stat");
                    self.shared.note(WatchNote::Degraded(why.clone()));
                    self.degraded = Some(why);
                    return;
                }
            }
        }
        if root_asked && !root_failed {
            self.root_watched = true;
        }
    }

    /// A handle that can add watches from another thread (best effort: the walk at the next
    /// refresh places every watch again and notices failures).
    pub fn handle(&self) -> WatchHandle {
        WatchHandle(Arc::downgrade(&self.watcher))
    }

    /// Watching, or degraded (and why).
    pub fn mode(&self) -> crate::model::WatchMode {
        match &self.degraded {
            None => crate::model::WatchMode::Watching,
            Some(why) => crate::model::WatchMode::Degraded(why.clone()),
        }
    }

    /// Marks the project for a full verify at the next sync, as if the event queue overflowed.
    /// A watcher stopped by the watch limit tries again (the limit may have been raised).
    pub fn force_rescan(&mut self, why: &str) {
        if self.degraded.as_deref() == Some(WATCH_LIMIT) {
            self.degraded = None;
        }
        self.shared.lock().rescan = Some(why.to_string());
    }

    /// Waits until every event up to now has been folded in, then hands over what changed.
    pub fn sync(&self) -> Changes {
        let mut changes = match self.wait_for_cookie() {
            Ok(()) => Changes::default(),
            Err(why) => Changes {
                rescan: Some(why),
                ..Changes::default()
            },
        };
        let mut dirty = self.shared.lock();
        changes.paths = std::mem::take(&mut dirty.paths);
        if let Some(why) = dirty.rescan.take() {
            changes.rescan.get_or_insert(why);
        }
        if let Some(why) = &self.degraded {
            changes.rescan.get_or_insert_with(|| why.clone());
        }
        changes
    }

    fn wait_for_cookie(&self) -> Result<(), String> {
        if !self.root_watched {
            return Err("not watching yet".into());
        }
        let n = COOKIES.fetch_add(1, Ordering::Relaxed);
        let name = OsString::from(format!("{COOKIE_PREFIX}{n}"));
        let path = self.shared.cookie_dir.join(&name);
        let mut cookie = self.cookie.lock();
        let renamed = cookie
            .take()
            .is_some_and(|from| std::fs::rename(from, &path).is_ok());
        if !renamed {
            self.place_cookie(&path)
                .map_err(|e| format!("cannot place the sync cookie: {e}"))?;
        }
        let mut dirty = self.shared.lock();
        let deadline = std::time::Instant::now() + COOKIE_TIMEOUT;
        loop {
            if dirty.cookies.contains(&name) {
                // Older cookies (of syncs that gave up) are behind this one.
                dirty.cookies.clear();
                *cookie = Some(path);
                return Ok(());
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                // The next sync watches the folder again and starts a new cookie.
                let _ = std::fs::remove_file(&path);
                return Err("the watcher did not deliver the sync cookie in time".to_string());
            }
            self.shared.arrived.wait_for(&mut dirty, left);
        }
    }

    /// Watches the cookie folder (made private if new) and creates the cookie at `path`,
    /// removing what an earlier daemon left there.
    fn place_cookie(&self, path: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = &self.shared.cookie_dir;
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        if !std::fs::symlink_metadata(dir)?.is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a folder",
                dir.display()
            )));
        }
        for entry in std::fs::read_dir(dir)?.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
        let mut watcher = self.watcher.lock();
        if self.cookie_dir_watched.swap(true, Ordering::SeqCst) {
            let _ = watcher.unwatch(dir);
        }
        watcher
            .watch_with(dir, one_folder())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        drop(watcher);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map(drop)
    }
}

/// How every folder is watched: alone, and never through a symlink (a folder swapped for one
/// between the walk and the watch would otherwise have a folder outside the project watched).
fn one_folder() -> WatchPathConfig {
    WatchPathConfig::new(RecursiveMode::NonRecursive).with_dereference_symlinks(false)
}

/// See [`ProjectWatcher::handle`].
/// (Weak, so that it never keeps a dropped watcher, and its taps, alive.)
#[derive(Clone)]
pub struct WatchHandle(std::sync::Weak<Mutex<notify::RecommendedWatcher>>);

impl WatchHandle {
    pub fn watch(&self, dir: &Path) {
        if let Some(watcher) = self.0.upgrade() {
            let _ = watcher.lock().watch_with(dir, one_folder());
        }
    }
}

impl Shared {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Dirty> {
        self.dirty.lock()
    }

    /// Passes `note` to the tap without ever blocking the watcher.
    fn note(&self, note: WatchNote) {
        let tap = self.tap.lock();
        if let Some(tap) = tap.as_ref() {
            if let Err(queue::SendError::Full(_)) = tap.tx.try_send(note) {
                tap.lost.store(true, Ordering::SeqCst);
            }
        }
    }

    fn fold(&self, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(e) => e,
            // A watched folder was deleted: its parent's event reports that; nothing is lost.
            Err(e) if matches!(e.kind, notify::ErrorKind::WatchNotFound) => {
                tracing::debug!(error = %e, "a watched folder went away");
                return;
            }
            Err(e) => {
                let why = format!("watcher error: {e}");
                self.lock().rescan = Some(why.clone());
                self.note(WatchNote::Degraded(why));
                return;
            }
        };
        if event.need_rescan() {
            let why = "the kernel's event queue overflowed".to_string();
            self.lock().rescan = Some(why.clone());
            self.note(WatchNote::Degraded(why));
            return;
        }
        // Opens are not asked for; a close after writing tells of a write no other event
        // told of (through a shared memory map).
        if matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write))
        {
            return;
        }
        tracing::trace!(?event, "watch event");
        let mut dirty = self.lock();
        let mut cookie = false;
        let mut changed = Vec::new();
        for path in &event.paths {
            if path.parent() == Some(self.cookie_dir.as_path()) {
                // A cookie arrives by a rename (or, the first time, a creation).
                let arrived = matches!(
                    event.kind,
                    EventKind::Create(_)
                        | EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
                );
                if let (true, Some(name)) = (arrived, path.file_name()) {
                    dirty.cookies.insert(name.to_os_string());
                    cookie = true;
                }
                continue;
            }
            let Ok(rel) = path.strip_prefix(&self.root) else {
                continue;
            };
            let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
            if name.starts_with(TEMP_PREFIX.as_bytes()) {
                continue;
            }
            let rel = BString::from(rel.as_os_str().as_bytes());
            changed.push(rel.clone());
            dirty.paths.insert(rel);
        }
        drop(dirty);
        if !changed.is_empty() {
            self.note(WatchNote::Changed(changed));
        }
        if cookie {
            self.arrived.notify_all();
        }
    }
}
