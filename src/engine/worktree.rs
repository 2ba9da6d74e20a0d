//! The one writer of project files, and its path-safety rules: restores ([`apply`]) and edit
//! aborts write through here.
//!
//! Only paths that the undo checkpoint captured are ever replaced or deleted, so a restore
//! never destroys what the store cannot give back: ignored, excluded, oversized and unreadable
//! files stay as they are, and so does a path ignored under the rules the restore brings back.
//! Each file is replaced atomically (temp file in the same directory, then rename); parents are
//! checked component by component and never followed through a symlink; tree entries with
//! `..`, `.git` or empty components are refused. A path that cannot be written is skipped,
//! reported with its reason, and the rest goes on.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;

use crate::filter::{rel_to_abs, Filter};
use crate::index::{FileIndex, IndexEntry, Stat};
use crate::model::{SkipReason, SkippedFile};
use crate::store::tree::within;
use crate::store::tree::FileState;
use crate::store::treediff::TreeChange;
use crate::store::Store;

use super::flush::Flushing;
use super::paths::{check_parents, safe_tree_path, Skip};
use super::replace::{self, Captured, Outcome};
use super::workers::in_parallel;

/// What applying a change set did (or, in a dry run, would do).
#[derive(Debug, Default)]
pub struct Applied {
    /// Tree paths, exactly.
    pub written: Vec<BString>,
    pub deleted: Vec<BString>,
    pub skipped: Vec<SkippedFile>,
    /// The written files' data being flushed (started as each batch was written; see
    /// [`Flushing::data`]).
    pub flushing: Vec<Flushing>,
}

/// Makes the files under `filter`'s root follow `changes` (from the index's tree to
/// `target_tree`). `index` must be fresh: it is what the undo checkpoint recorded, and the only
/// files that may be replaced or deleted; it is kept up to date with every write. Nothing in
/// the project changes before `gate` passes (see [`Gate`]); should it not, nothing changes at
/// all. Replaced files are freed after the reply, through `store` (see [`Store::retire`]). What
/// it wrote is not flushed yet: that is the caller's ([`Flushing`]).
#[allow(clippy::too_many_arguments)]
pub fn apply(
    repo: &gix::Repository,
    store: &Store,
    filter: &Filter,
    index: &mut FileIndex,
    target_tree: gix::ObjectId,
    changes: &[TreeChange],
    dry_run: bool,
    gate: &Gate,
) -> Applied {
    let mut run = Run {
        repo,
        store,
        root: filter.root(),
        filter,
        target_tree,
        target_ignores: HashMap::new(),
        index,
        dry_run,
        gate,
        report: Applied::default(),
        deleted: BTreeSet::new(),
        queued: Vec::new(),
        queued_bytes: 0,
    };
    run.apply(changes);
    run.write_queued();
    run.report
}

/// What a restore's changes to the project wait for: its undo checkpoint durable. Checks,
/// reads of the store and temporary files (never part of a checkpoint, and litter that a later
/// daemon removes) go ahead meanwhile; the first deletion, new folder, second name of a
/// replaced file or rename waits for it, and where it fails nothing in the project changes.
pub struct Gate<'a> {
    wait: parking_lot::Mutex<Option<Box<dyn FnOnce() -> bool + Send + 'a>>>,
    passed: std::sync::OnceLock<bool>,
}

impl<'a> Gate<'a> {
    /// A gate that is open: nothing to wait for.
    pub fn open() -> Gate<'a> {
        Gate {
            wait: parking_lot::Mutex::new(None),
            passed: std::sync::OnceLock::from(true),
        }
    }

    /// A gate that opens once `wait` returns true (it runs once, on the first thread that
    /// reaches the gate; the others wait for its answer).
    pub fn after(wait: impl FnOnce() -> bool + Send + 'a) -> Gate<'a> {
        Gate {
            wait: parking_lot::Mutex::new(Some(Box::new(wait))),
            passed: std::sync::OnceLock::new(),
        }
    }

    /// Waits for the gate; whether the project may change.
    pub fn pass(&self) -> bool {
        *self.passed.get_or_init(|| {
            let wait = self.wait.lock().take();
            wait.is_none_or(|wait| wait())
        })
    }
}

/// A file, symlink or executable ready to be written: every check passed, its content read.
struct Job {
    path: BString,
    abs: PathBuf,
    state: FileState,
    data: Vec<u8>,
    mode: u32,
    /// What is there now, as the undo checkpoint captured it (None: nothing is there).
    replaces: Option<Captured>,
}

/// Queued writes are done together (see [`Run::write_queued`]) once they hold this much.
const QUEUE_BYTES: usize = 16 << 20;
const QUEUE_FILES: usize = 512;
/// Threads that write together.
const WRITE_THREADS: usize = 4;

struct Run<'a, 'g> {
    repo: &'a gix::Repository,
    store: &'a Store,
    root: &'a Path,
    filter: &'a Filter,
    target_tree: gix::ObjectId,
    /// The `.gitignore` content of each folder in the target tree, as looked up so far.
    target_ignores: HashMap<BString, Option<Vec<u8>>>,
    index: &'a mut FileIndex,
    dry_run: bool,
    gate: &'a Gate<'g>,
    report: Applied,
    /// Paths deleted so far (or that would be, in a dry run).
    deleted: BTreeSet<BString>,
    /// Writes checked and ready, not done yet.
    queued: Vec<Job>,
    queued_bytes: usize,
}

impl Run<'_, '_> {
    fn apply(&mut self, changes: &[TreeChange]) {
        // Deletions first, deepest first, so that files can make room for folders and back.
        let mut deletions: Vec<&TreeChange> = changes
            .iter()
            .filter(|c| c.old.is_some() && c.new.is_none())
            .collect();
        deletions.sort_by(|a, b| b.path.cmp(&a.path));
        for c in deletions {
            self.delete(&c.path);
        }
        if !self.dry_run {
            self.remove_emptied_dirs();
        }
        for c in changes {
            let Some(state) = &c.new else { continue };
            if let Err(skip) = safe_tree_path(c.path.as_bstr()) {
                self.skip(&c.path, skip);
                continue;
            }
            if state.kind == EntryKind::Commit {
                let why = "submodule entries are not restored".into();
                self.skip(&c.path, (SkipReason::UnsafePath, why));
                continue;
            }
            self.write(&c.path, state);
        }
    }

    fn skip(&mut self, path: &[u8], (code, reason): Skip) {
        self.report
            .skipped
            .push(SkippedFile::new(path, code, reason));
    }

    fn parents(&self, path: &BString, create: bool) -> Result<(), Skip> {
        let would_delete = self.dry_run.then_some(&self.deleted);
        if create && !self.dry_run && !self.in_real_folder(path) && !self.gate.pass() {
            return Err(not_recorded());
        }
        check_parents(self.root, path.as_bstr(), create, would_delete)
    }

    /// Whether `path`'s folder exists as a real folder (nothing to create on the way to it).
    fn in_real_folder(&self, path: &BString) -> bool {
        let Some(slash) = path.rfind_byte(b'/') else {
            return true;
        };
        let folder = rel_to_abs(self.root, path[..slash].as_bstr());
        std::fs::symlink_metadata(folder).is_ok_and(|m| m.is_dir())
    }

    /// What the undo checkpoint captured of `path`, if anything.
    fn captured(&self, path: &BString) -> Option<Captured> {
        let entry = *self.index.get(path.as_bstr())?;
        let racy = self.index.is_racy(path.as_bstr());
        Some(Captured { entry, racy })
    }

    /// Whether `path` is ignored or excluded under the rules the restore brings back: such a
    /// file is outside the checkpoint, so it is left alone like every ignored file (an undo
    /// of a restore that had to leave it must not delete it either).
    fn ignored_after(&mut self, path: &BString) -> bool {
        let (repo, tree, cache) = (self.repo, self.target_tree, &mut self.target_ignores);
        let mut lookup = |dir: &BStr| -> Option<Vec<u8>> {
            cache
                .entry(dir.to_owned())
                .or_insert_with(|| {
                    let file = crate::filter::join_rel(&dir.to_owned(), b".gitignore");
                    let entry = repo
                        .find_tree(tree)
                        .ok()?
                        .lookup_entry_by_path(file.to_path_lossy())
                        .ok()??;
                    if !entry.mode().is_blob() {
                        return None;
                    }
                    Some(entry.object().ok()?.detach().data)
                })
                .clone()
        };
        self.filter.excludes_file_with(path.as_bstr(), &mut lookup)
    }

    fn delete(&mut self, path: &BString) {
        if self.ignored_after(path) {
            tracing::debug!(path = %path, "left in place: ignored under the restored rules");
            return;
        }
        let abs = rel_to_abs(self.root, path);
        if let Err(skip) = self.parents(path, false) {
            return self.skip(path, skip);
        }
        let captured = match std::fs::symlink_metadata(&abs) {
            Ok(meta) => match self.captured(path) {
                Some(c) if !meta.is_dir() && c.entry.stat == Stat::of(&meta) => c,
                _ => return self.skip(path, changed_during()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => return self.skip(path, unreadable(format!("cannot stat: {e}"))),
        };
        if !self.dry_run {
            if !self.gate.pass() {
                return self.skip(path, not_recorded());
            }
            match replace::delete(self.store, &abs, &captured) {
                Ok(Outcome::Done) => {}
                Ok(Outcome::Kept) => return self.skip(path, changed_during()),
                Err(e) => return self.skip(path, unwritable(format!("cannot delete: {e}"))),
            }
            self.index.remove(path.as_bstr());
        }
        self.deleted.insert(path.clone());
        self.report.deleted.push(path.clone());
    }

    /// Removes the folders that deletions left empty (never the root).
    fn remove_emptied_dirs(&mut self) {
        let mut dirs = BTreeSet::new();
        for path in &self.deleted {
            let mut p = path.as_bstr();
            while let Some(i) = p.rfind_byte(b'/') {
                p = p[..i].as_bstr();
                dirs.insert(p.to_owned());
            }
        }
        // Deepest first: children sort after their parents.
        for dir in dirs.iter().rev() {
            if std::fs::remove_dir(rel_to_abs(self.root, dir)).is_ok() {
                self.index.remove(dir.as_bstr());
            }
        }
    }

    fn write(&mut self, path: &BString, state: &FileState) {
        let abs = rel_to_abs(self.root, path);
        if let Err(skip) = self.parents(path, true) {
            return self.skip(path, skip);
        }
        let existing = match std::fs::symlink_metadata(&abs) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return self.skip(path, unreadable(format!("cannot stat: {e}"))),
        };
        let mut replaces = None;
        if let Some(meta) = &existing {
            if self.deleted.contains(path) && self.dry_run {
                // It would have been deleted to make room.
            } else if meta.is_dir()
                && self.dry_run
                && self
                    .deleted
                    .iter()
                    .any(|d| within(d, std::slice::from_ref(path)))
            {
                // Deletions would (most likely) empty it first.
            } else if meta.is_dir() {
                let empty = std::fs::read_dir(&abs)
                    .map(|mut d| d.next().is_none())
                    .unwrap_or(false);
                if !empty {
                    return self.skip(path, folder_in_the_way());
                }
                if !self.dry_run {
                    if !self.gate.pass() {
                        return self.skip(path, not_recorded());
                    }
                    if let Err(e) = std::fs::remove_dir(&abs) {
                        let why = format!("cannot remove empty folder in the way: {e}");
                        return self.skip(path, (SkipReason::Unwritable, why));
                    }
                    self.index.remove(path.as_bstr());
                }
            } else {
                match self.captured(path) {
                    None => return self.skip(path, (SkipReason::NotCaptured, NOT_CAPTURED.into())),
                    Some(c) if c.entry.stat != Stat::of(meta) => {
                        return self.skip(path, changed_during())
                    }
                    Some(c) => replaces = Some(c),
                }
            }
        }
        if self.dry_run {
            self.report.written.push(path.clone());
            return;
        }
        let data = match self.repo.find_object(state.id) {
            Ok(o) => o.detach().data,
            Err(e) => {
                let why = format!("content missing from the store: {e}");
                return self.skip(path, (SkipReason::ContentMissing, why));
            }
        };
        let existing_mode = existing
            .as_ref()
            .filter(|m| m.is_file())
            .map(|m| m.permissions().mode() & 0o7777);
        let mode = file_mode(existing_mode, state.kind == EntryKind::BlobExecutable);
        self.queued_bytes += data.len();
        self.queued.push(Job {
            path: path.clone(),
            abs,
            state: *state,
            data,
            mode,
            replaces,
        });
        if self.queued_bytes >= QUEUE_BYTES || self.queued.len() >= QUEUE_FILES {
            self.write_queued();
        }
    }

    /// Does the queued writes, from up to [`WRITE_THREADS`] threads: each file is written
    /// under a temporary name beside its path, then, once the gate passes, renamed over it
    /// (the paths are distinct and their folders exist, so the order does not matter); then
    /// records each in the index, in order.
    fn write_queued(&mut self) {
        let jobs = std::mem::take(&mut self.queued);
        self.queued_bytes = 0;
        let threads = WRITE_THREADS.min(jobs.len() / 4);
        let mut staged = in_parallel(&jobs, threads, |job| match job.state.kind {
            EntryKind::Link => replace::symlink_beside(&job.abs, &job.data).map(|tmp| (tmp, None)),
            _ => replace::file_beside(&job.abs, &job.data, job.mode).map(|(tmp, f)| (tmp, Some(f))),
        });
        // The files' data goes to the device while the gate and the renames are waited for.
        let files = jobs.iter().zip(&mut staged).filter_map(|(job, staged)| {
            let file = staged.as_mut().ok()?.1.take()?;
            Some((job.abs.clone(), file))
        });
        self.report.flushing.push(Flushing::data(files.collect()));
        let open = self.gate.pass();
        let store = self.store;
        let moves: Vec<_> = jobs.iter().zip(staged).collect();
        let written: Vec<std::io::Result<Option<std::fs::Metadata>>> =
            in_parallel(&moves, threads, |(job, staged)| {
                let (tmp, _) = staged
                    .as_ref()
                    .map_err(|e| std::io::Error::new(e.kind(), e.to_string()))?;
                if !open {
                    let _ = std::fs::remove_file(tmp);
                    return Err(std::io::Error::other(not_recorded().1));
                }
                let ours = std::fs::symlink_metadata(tmp)?;
                // What was there goes only once it is checked again (see `replace`).
                let outcome = match &job.replaces {
                    Some(captured) => replace::replace(store, tmp, &job.abs, captured)?,
                    None => replace::create(tmp, &job.abs)?,
                };
                if outcome == Outcome::Kept {
                    return Ok(None);
                }
                // The stat of the file placed (changed by its rename), unless another process
                // replaced it since: then one that cannot match, so that it is read again.
                let now = std::fs::symlink_metadata(&job.abs);
                use std::os::unix::fs::MetadataExt;
                Ok(Some(match now {
                    Ok(now) if now.ino() == ours.ino() => now,
                    _ => ours,
                }))
            });
        for (job, result) in jobs.into_iter().zip(written) {
            match result {
                Ok(Some(meta)) => {
                    // Recorded directly, so the daemon's own write is never re-read as a user
                    // edit.
                    self.index.insert(
                        job.path.as_bstr(),
                        IndexEntry {
                            state: job.state,
                            stat: Stat::of(&meta),
                        },
                    );
                    self.report.written.push(job.path);
                }
                Ok(None) => self.skip(&job.path, changed_during()),
                Err(e) => self.skip(&job.path, unwritable(format!("cannot write: {e}"))),
            }
        }
    }
}

const NOT_CAPTURED: &str = "exists but the undo checkpoint could not capture it (ignored, \
     excluded, too large or unreadable); left as it is";

fn changed_during() -> Skip {
    let why = "changed since the restore began; left as it is";
    (SkipReason::ChangedDuringRestore, why.into())
}

fn folder_in_the_way() -> Skip {
    let why = "a folder is in the way that holds files the checkpoint does not capture \
               (ignored or excluded); left as it is";
    (SkipReason::FolderInTheWay, why.into())
}

/// The gate did not pass: the undo checkpoint could not be recorded (the restore fails).
fn not_recorded() -> Skip {
    let why = "left as it is: the undo checkpoint could not be recorded";
    (SkipReason::Unwritable, why.into())
}

fn unreadable(why: String) -> Skip {
    (SkipReason::Unreadable, why)
}

fn unwritable(why: String) -> Skip {
    (SkipReason::Unwritable, why)
}

/// The permission bits for a restored file: the existing file's, with the executable bits set
/// (where readable) or cleared; 0644/0755 for a new file.
fn file_mode(existing: Option<u32>, exec: bool) -> u32 {
    match (existing, exec) {
        (Some(m), true) => m | ((m & 0o444) >> 2),
        (Some(m), false) => m & !0o111,
        (None, true) => 0o755,
        (None, false) => 0o644,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_follow_the_exec_bit() {
        assert_eq!(file_mode(None, false), 0o644);
        assert_eq!(file_mode(None, true), 0o755);
        assert_eq!(file_mode(Some(0o600), true), 0o700);
        assert_eq!(file_mode(Some(0o755), false), 0o644);
    }
}
