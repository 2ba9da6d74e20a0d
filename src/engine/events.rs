//! Live events per project: what changed on disk (`file_changed`) and what ckpt did
//! (`checkpoint_created`, `restored`, `session_approved`, `session_reset`, `watch_degraded`).
//!
//! Events go out through a broadcast channel: publishing never waits, so a slow subscriber can
//! never slow a checkpoint. A subscriber that falls more than [`BACKLOG`] events behind is
//! dropped with a final `error` event.
//!
//! `file_changed` comes from a pump thread fed by the watcher's tap. While nobody listens it
//! only drains the tap. Otherwise it reads each changed path (honouring the exclusions, like a
//! checkpoint), hashes it as git would, and compares with what it saw last, or with the last
//! checkpoint's tree: unchanged content (a `touch`) is not an event.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;
use tokio::sync::broadcast;

use crate::filter::{Filter, RulesCache};
use crate::fs::StableRead;
use crate::model::path_bytes;
use crate::protocol::events::{Event, EventKind, FileEvent};
use crate::store::diff::{is_binary, unified};
use crate::store::Store;
use crate::watch::{WatchHandle, WatchNote};

/// Events a subscriber may fall behind by before it is dropped.
pub const BACKLOG: usize = 1024;
/// Files larger than this (either side) get no diff in `file_changed`.
pub const MAX_DIFF_BYTES: usize = 256 * 1024;
/// Text kept in memory as the "before" side of the next diff, across all files.
const MAX_REMEMBERED_TEXT: usize = 64 * 1024 * 1024;
/// Paths the pump remembers beyond those that differ from the baseline.
const MAX_SEEN: usize = 100_000;
/// How long the pump gathers notes before reading the paths (coalesces editor bursts).
const BATCH_WINDOW: Duration = Duration::from_millis(20);

/// The event stream of one project.
pub struct Events {
    root: PathBuf,
    tx: broadcast::Sender<Arc<Event>>,
    /// Subscribers that asked for diffs (the pump computes them only then).
    diff_wanted: AtomicUsize,
    /// The tree of the latest checkpoint: the "before" of a path the pump has not seen yet.
    baseline: Mutex<Option<ObjectId>>,
    /// When the watcher last reported a change (automatic checkpoints wait for it to settle).
    last_change: Mutex<Option<std::time::Instant>>,
}

impl Events {
    pub fn new(root: PathBuf) -> Events {
        Events {
            root,
            tx: broadcast::channel(BACKLOG).0,
            diff_wanted: AtomicUsize::new(0),
            baseline: Mutex::new(None),
            last_change: Mutex::new(None),
        }
    }

    /// Records that the project may have changed now.
    pub fn note_change(&self) {
        *self.last_change.lock() = Some(std::time::Instant::now());
    }

    /// When the watcher last reported a change in the project.
    pub fn last_change(&self) -> Option<std::time::Instant> {
        *self.last_change.lock()
    }

    /// Publishes an event; never waits.
    pub fn emit(&self, what: EventKind) {
        if self.tx.receiver_count() == 0 {
            return;
        }
        let event = Event {
            project: self.root.clone(),
            time: jiff::Timestamp::now().to_string(),
            what,
        };
        let _ = self.tx.send(Arc::new(event));
    }

    pub fn subscribe(self: &Arc<Self>, diffs: bool) -> Subscription {
        if diffs {
            self.diff_wanted.fetch_add(1, Ordering::SeqCst);
        }
        Subscription {
            rx: self.tx.subscribe(),
            diffs,
            events: self.clone(),
        }
    }

    fn listening(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Records the tree of the latest checkpoint.
    pub fn set_baseline(&self, tree: ObjectId) {
        *self.baseline.lock() = Some(tree);
    }

    fn baseline(&self) -> Option<ObjectId> {
        *self.baseline.lock()
    }
}

/// One subscriber's view of a project's events.
pub struct Subscription {
    pub rx: broadcast::Receiver<Arc<Event>>,
    /// Whether `file_changed` events keep their `diff`.
    pub diffs: bool,
    events: Arc<Events>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.diffs {
            self.events.diff_wanted.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What the pump last saw at a path: its blob id (None: absent) and, if small text, the text.
struct Seen {
    id: Option<ObjectId>,
    text: Option<Arc<Vec<u8>>>,
}

/// Starts the pump thread for a project; it ends when the watcher (the tap's sender) goes.
pub fn start_pump(
    events: Arc<Events>,
    notes: crate::watch::queue::Receiver<WatchNote>,
    lost: Arc<AtomicBool>,
    filter: Filter,
    store_dir: PathBuf,
    max_file_size: u64,
    watch: WatchHandle,
) {
    let spawned = std::thread::Builder::new()
        .name("ckptd-events".into())
        .spawn(move || {
            let mut pump = Pump {
                events,
                filter,
                store_dir,
                store: None,
                max_file_size,
                watch,
                rules: RulesCache::default(),
                seen: HashMap::new(),
                last_baseline: None,
                remembered: 0,
            };
            while let Ok(first) = notes.recv() {
                // The rest of the window's notes are taken at its end, together: waiting for
                // each as it came woke this thread once per file event (dozens in a restore),
                // each wake competing for a processor with the watcher's thread, whose
                // delivery of the sync cookie the restore is waiting for.
                let mut batch = vec![first];
                std::thread::sleep(BATCH_WINDOW);
                while let Ok(n) = notes.try_recv() {
                    batch.push(n);
                }
                if lost.swap(false, Ordering::SeqCst) {
                    let reason = "too many changes at once: some file events were dropped";
                    pump.events.emit(EventKind::WatchDegraded {
                        reason: reason.into(),
                    });
                }
                if batch.iter().any(|n| matches!(n, WatchNote::Changed(_))) {
                    pump.events.note_change();
                }
                pump.handle(batch);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the event pump; no file_changed events");
    }
}

struct Pump {
    events: Arc<Events>,
    filter: Filter,
    store_dir: PathBuf,
    store: Option<Store>,
    max_file_size: u64,
    watch: WatchHandle,
    rules: RulesCache,
    seen: HashMap<BString, Seen>,
    /// The baseline when `seen` was last trimmed.
    last_baseline: Option<ObjectId>,
    remembered: usize,
}

impl Pump {
    /// After a checkpoint the baseline holds what the pump remembered: keep only ids (the
    /// text is read back from the store when a diff needs it), and past [`MAX_SEEN`] paths
    /// keep only those that differ from the baseline. The pump's memory so follows what
    /// changed since the last checkpoint, not how long someone has been subscribed.
    fn on_new_baseline(&mut self) {
        let baseline = self.events.baseline();
        if baseline == self.last_baseline {
            return;
        }
        self.last_baseline = baseline;
        for seen in self.seen.values_mut() {
            seen.text = None;
        }
        self.remembered = 0;
        if self.seen.len() <= MAX_SEEN {
            return;
        }
        let files = match (baseline, self.store()) {
            (Some(tree), Some(store)) => {
                crate::store::tree::read_tree(&store.repo(), tree).unwrap_or_default()
            }
            _ => Default::default(),
        };
        self.seen
            .retain(|path, seen| files.get(path).map(|f| f.id) != seen.id);
        if self.seen.len() > MAX_SEEN {
            self.seen.clear();
        }
    }

    fn handle(&mut self, batch: Vec<WatchNote>) {
        self.on_new_baseline();
        if !self.events.listening() {
            // Nobody listens: what we saw goes stale, so forget it.
            self.seen.clear();
            self.remembered = 0;
            self.rules.clear();
            return;
        }
        let mut paths = BTreeSet::new();
        for note in batch {
            match note {
                WatchNote::Changed(changed) => paths.extend(changed),
                WatchNote::Degraded(reason) => {
                    self.events.emit(EventKind::WatchDegraded { reason })
                }
            }
        }
        if paths.iter().any(|p| p.ends_with(b".gitignore")) {
            self.rules.clear();
        }
        for path in paths {
            if !path.is_empty() {
                self.rules.invalidate(path.as_bstr());
                self.path_changed(path.as_bstr());
            }
        }
    }

    // Long by design: one read-hash-compare-diff sequence per changed path, in order.
    fn path_changed(&mut self, rel: &BStr) {
        let abs = self.filter.root().join(rel.to_path_lossy());
        let meta = match std::fs::symlink_metadata(&abs) {
            Ok(m) => m,
            Err(_) => return self.gone(rel),
        };
        if meta.is_dir() {
            if self.filter.rules_for_dir(&mut self.rules, rel).is_none() {
                return;
            }
            // A new folder is not watched until the next checkpoint's walk: watch it now and
            // report what is already inside.
            self.watch.watch(&abs);
            let Ok(entries) = std::fs::read_dir(&abs) else {
                return;
            };
            let mut children: Vec<BString> = entries
                .flatten()
                .map(|e| {
                    let mut p = rel.to_owned();
                    p.push(b'/');
                    p.extend_from_slice(e.file_name().as_bytes());
                    p
                })
                .collect();
            children.sort();
            for child in children {
                self.path_changed(child.as_bstr());
            }
            return;
        }
        if !self.filter.includes_file(&mut self.rules, rel) || meta.len() > self.max_file_size {
            return;
        }
        let Ok(root) = crate::fs::open_dir(self.filter.root()) else {
            return;
        };
        let (data, mode) = if meta.file_type().is_symlink() {
            match crate::fs::read_link_beneath(root.as_fd(), rel) {
                Ok(t) => (t, "120000"),
                Err(_) => return,
            }
        } else {
            // Never blocks on a FIFO, never reads a version torn by a concurrent rewrite.
            let read = crate::fs::open_beneath(root.as_fd(), rel)
                .and_then(|f| crate::fs::read_stable(&f, self.max_file_size));
            match read {
                Ok(StableRead::Data { data, stat }) if stat.mode & 0o111 != 0 => (data, "100755"),
                Ok(StableRead::Data { data, .. }) => (data, "100644"),
                _ => return,
            }
        };
        let id = match gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &data)
        {
            Ok(id) => id,
            Err(_) => return,
        };
        let before = self.before(rel);
        if before.as_ref().is_some_and(|b| b.id == Some(id)) {
            return; // Same content (a touch, or a write of the same bytes).
        }
        let change = match before.as_ref().and_then(|b| b.id) {
            Some(_) => FileEvent::Modified,
            None => FileEvent::Created,
        };
        let text = (data.len() <= MAX_DIFF_BYTES && !is_binary(&data)).then(|| Arc::new(data));
        let diff = self.diff(
            rel,
            before.as_ref(),
            text.as_deref().map(Vec::as_slice),
            true,
        );
        self.events.emit(EventKind::FileChanged {
            path: rel.to_string(),
            path_bytes: path_bytes(rel),
            change,
            id: Some(id.to_string()),
            mode: Some(mode.into()),
            diff,
        });
        self.remember(rel, Some(id), text);
    }

    /// `rel` no longer exists: a deleted file, or a deleted folder with files inside.
    fn gone(&mut self, rel: &BStr) {
        let mut prefix = rel.to_owned();
        prefix.push(b'/');
        let mut files: BTreeSet<BString> = self
            .seen
            .iter()
            .filter(|(p, s)| s.id.is_some() && (p.as_bstr() == rel || p.starts_with(&prefix)))
            .map(|(p, _)| p.clone())
            .collect();
        files.extend(self.baseline_files(rel));
        for path in files {
            let before = self.before(path.as_bstr());
            if before.as_ref().is_none_or(|b| b.id.is_none()) {
                continue;
            }
            let diff = self.diff(path.as_bstr(), before.as_ref(), Some(&[]), false);
            self.events.emit(EventKind::FileChanged {
                path: path.to_string(),
                path_bytes: path_bytes(&path),
                change: FileEvent::Deleted,
                id: None,
                mode: None,
                diff,
            });
            self.remember(path.as_bstr(), None, None);
        }
    }

    fn remember(&mut self, rel: &BStr, id: Option<ObjectId>, text: Option<Arc<Vec<u8>>>) {
        if let Some(old) = self.seen.get(rel).and_then(|s| s.text.as_ref()) {
            self.remembered -= old.len();
        }
        let mut text = text;
        if let Some(t) = &text {
            if self.remembered + t.len() > MAX_REMEMBERED_TEXT {
                text = None;
            } else {
                self.remembered += t.len();
            }
        }
        self.seen.insert(rel.to_owned(), Seen { id, text });
    }

    /// What `rel` was before this change: as the pump last saw it, else as in the baseline.
    fn before(&mut self, rel: &BStr) -> Option<Seen> {
        if let Some(s) = self.seen.get(rel) {
            return Some(Seen {
                id: s.id,
                text: s.text.clone(),
            });
        }
        let baseline = self.events.baseline()?;
        let store = self.store()?;
        let repo = store.repo();
        let tree = repo.find_tree(baseline).ok()?;
        let entry = tree.lookup_entry_by_path(rel.to_path_lossy()).ok()??;
        if entry.mode().is_tree() {
            return None;
        }
        Some(Seen {
            id: Some(entry.object_id()),
            text: None,
        })
    }

    /// The files of the baseline at or below `rel`.
    fn baseline_files(&mut self, rel: &BStr) -> Vec<BString> {
        let Some(baseline) = self.events.baseline() else {
            return Vec::new();
        };
        let Some(store) = self.store() else {
            return Vec::new();
        };
        let repo = store.repo();
        let Ok(files) = crate::store::tree::read_tree(&repo, baseline) else {
            return Vec::new();
        };
        let mut prefix = rel.to_owned();
        prefix.push(b'/');
        files
            .into_keys()
            .filter(|p| p.as_bstr() == rel || p.starts_with(&prefix))
            .filter(|p| !self.seen.contains_key(p))
            .collect()
    }

    /// A unified diff of `rel` from `before` to `after` when someone wants diffs and both
    /// sides are small text.
    fn diff(
        &mut self,
        rel: &BStr,
        before: Option<&Seen>,
        after: Option<&[u8]>,
        exists: bool,
    ) -> Option<String> {
        if self.events.diff_wanted.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let after = after?;
        let old: Arc<Vec<u8>> = match before {
            None | Some(Seen { id: None, .. }) => Arc::new(Vec::new()),
            Some(Seen { text: Some(t), .. }) => t.clone(),
            Some(Seen { id: Some(id), .. }) => {
                let store = self.store()?;
                let data = store.repo().find_object(*id).ok()?.detach().data;
                if data.len() > MAX_DIFF_BYTES || is_binary(&data) {
                    return None;
                }
                Arc::new(data)
            }
        };
        let has_old = before.is_some_and(|b| b.id.is_some());
        let (text, _, _) = unified(&old, after, rel, has_old, exists);
        Some(text)
    }

    fn store(&mut self) -> Option<&Store> {
        if self.store.is_none() {
            self.store = Store::open(&self.store_dir).ok();
        }
        self.store.as_ref()
    }
}
