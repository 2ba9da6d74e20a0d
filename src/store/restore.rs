//! Making the project equal to a checkpoint, best effort and undoable.
//!
//! Before anything is touched, the current state is recorded as a `pre-restore` checkpoint
//! (the undo). Only paths that this snapshot captured are ever replaced or deleted, so a
//! restore never destroys what the store cannot give back: ignored, excluded, oversized and
//! unreadable files stay as they are. Each file is replaced atomically (temp file in the same
//! directory, then rename); parents are checked component by component and never followed
//! through a symlink; tree entries with `..`, `.git` or empty components are refused. A path
//! that cannot be written is skipped, reported, and the rest goes on.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use serde::Serialize;

use super::checkpoint::{parse_id, Checkpoint, CheckpointError, NewCheckpoint, SkippedFile};
use super::diff::within;
use super::snapshot::{FileState, SnapshotError};
use super::treediff::{diff_trees, TreeChange};
use super::Store;
use crate::filter::{rel_to_abs, Filter, TEMP_PREFIX};
use crate::index::{FileIndex, IndexEntry, Stat};

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Tree paths (files or folders) to restore; everything when empty.
    pub paths: Vec<BString>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RestoreReport {
    pub restored_to: String,
    /// The `pre-restore` checkpoint that undoes this restore (none for a dry run).
    pub undo_checkpoint: Option<String>,
    pub dry_run: bool,
    pub written: Vec<String>,
    pub deleted: Vec<String>,
    pub skipped: Vec<SkippedFile>,
}

impl Store {
    /// Restores the project under `filter` to `target`. `index` must be fresh (refreshed after
    /// syncing with the watcher): it is the state the undo checkpoint records, and the only
    /// files a restore may replace or delete. It is kept up to date with every write.
    #[tracing::instrument(skip_all, fields(target = %target.id, dry_run = options.dry_run))]
    pub fn restore(
        &self,
        filter: &Filter,
        index: &mut FileIndex,
        target: &Checkpoint,
        options: &RestoreOptions,
    ) -> Result<RestoreReport, RestoreError> {
        let repo = self.repo();
        let current_tree = index.write_tree(&repo).map_err(CheckpointError::from)?;
        let undo = if options.dry_run {
            None
        } else {
            let short = &target.id[..12];
            let undo = self.record_checkpoint(
                current_tree,
                index.skipped(),
                NewCheckpoint::new(
                    target.dialog.clone(),
                    "pre-restore",
                    format!(
                        "before restoring to {short} (#{} {})",
                        target.seq, target.kind
                    ),
                ),
            )?;
            Some(undo.id)
        };
        let target_tree = parse_id(&target.tree).map_err(CheckpointError::from)?;
        let changes = diff_trees(&repo, Some(current_tree), Some(target_tree), &options.paths)
            .map_err(CheckpointError::from)?;
        let mut run = Run {
            repo: &repo,
            root: filter.root(),
            filter,
            target_tree,
            target_ignores: HashMap::new(),
            index,
            dry_run: options.dry_run,
            report: RestoreReport {
                restored_to: target.id.clone(),
                undo_checkpoint: undo,
                dry_run: options.dry_run,
                written: Vec::new(),
                deleted: Vec::new(),
                skipped: Vec::new(),
            },
            deleted: BTreeSet::new(),
        };
        run.apply(&changes);
        if !options.dry_run {
            if let Err(e) = self.sync() {
                tracing::warn!(error = %e, "could not flush restored files");
            }
        }
        for skip in &run.report.skipped {
            tracing::warn!(path = %skip.path, reason = %skip.reason, "skipped while restoring");
        }
        tracing::info!(
            written = run.report.written.len(),
            deleted = run.report.deleted.len(),
            skipped = run.report.skipped.len(),
            "restore finished"
        );
        Ok(run.report)
    }
}

struct Run<'a> {
    repo: &'a gix::Repository,
    root: &'a Path,
    filter: &'a Filter,
    target_tree: gix::ObjectId,
    /// The `.gitignore` content of each folder in the target tree, as looked up so far.
    target_ignores: HashMap<BString, Option<Vec<u8>>>,
    index: &'a mut FileIndex,
    dry_run: bool,
    report: RestoreReport,
    /// Paths deleted so far (or that would be, in a dry run).
    deleted: BTreeSet<BString>,
}

impl Run<'_> {
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
            if let Err(reason) = safe_tree_path(c.path.as_bstr()) {
                self.skip(&c.path, reason);
                continue;
            }
            if state.kind == EntryKind::Commit {
                self.skip(&c.path, "submodule entries are not restored".into());
                continue;
            }
            self.write(&c.path, state);
        }
    }

    fn skip(&mut self, path: &[u8], reason: String) {
        self.report
            .skipped
            .push(SkippedFile::new(path.to_str_lossy(), reason));
    }

    /// The stat the index holds for `path`, if the undo checkpoint captured it.
    fn captured(&self, path: &BString) -> Option<Stat> {
        self.index.get(path.as_bstr()).map(|e| e.stat)
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
        if let Err(reason) = self.check_parents(path.as_bstr(), false) {
            return self.skip(path, reason);
        }
        match std::fs::symlink_metadata(&abs) {
            Ok(meta) if !meta.is_dir() && self.captured(path) == Some(Stat::of(&meta)) => {}
            Ok(_) => {
                return self.skip(
                    path,
                    "changed since the restore began; left as it is".into(),
                )
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => return self.skip(path, format!("cannot stat: {e}")),
        }
        if !self.dry_run {
            if let Err(e) = std::fs::remove_file(&abs) {
                return self.skip(path, format!("cannot delete: {e}"));
            }
            self.index.remove(path.as_bstr());
        }
        self.deleted.insert(path.clone());
        self.report.deleted.push(path.to_str_lossy().into_owned());
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
        if let Err(reason) = self.check_parents(path.as_bstr(), true) {
            return self.skip(path, reason);
        }
        let existing = match std::fs::symlink_metadata(&abs) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return self.skip(path, format!("cannot stat: {e}")),
        };
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
                    return self.skip(path, "a folder is in the way that holds files the checkpoint does not capture (ignored or excluded); left as it is".into());
                }
                if !self.dry_run {
                    if let Err(e) = std::fs::remove_dir(&abs) {
                        return self
                            .skip(path, format!("cannot remove empty folder in the way: {e}"));
                    }
                    self.index.remove(path.as_bstr());
                }
            } else {
                match self.captured(path) {
                    None => return self.skip(path, "exists but the undo checkpoint could not capture it (ignored, excluded, too large or unreadable); left as it is".into()),
                    Some(stat) if stat != Stat::of(meta) => return self.skip(path, "changed since the restore began; left as it is".into()),
                    Some(_) => {}
                }
            }
        }
        if self.dry_run {
            self.report.written.push(path.to_str_lossy().into_owned());
            return;
        }
        let data = match self.repo.find_object(state.id) {
            Ok(o) => o.detach().data,
            Err(e) => return self.skip(path, format!("content missing from the store: {e}")),
        };
        let existing_mode = existing
            .filter(|m| m.is_file())
            .map(|m| m.permissions().mode() & 0o7777);
        let result = match state.kind {
            EntryKind::Link => replace_with_symlink(&abs, &data),
            EntryKind::BlobExecutable => {
                replace_with_file(&abs, &data, file_mode(existing_mode, true))
            }
            _ => replace_with_file(&abs, &data, file_mode(existing_mode, false)),
        };
        match result.and_then(|()| std::fs::symlink_metadata(&abs)) {
            Ok(meta) => {
                // Recorded directly, so the daemon's own write is never re-read as a user edit.
                self.index.insert(
                    path.as_bstr(),
                    IndexEntry {
                        state: *state,
                        stat: Stat::of(&meta),
                    },
                );
                self.report.written.push(path.to_str_lossy().into_owned());
            }
            Err(e) => self.skip(path, format!("cannot write: {e}")),
        }
    }

    /// Checks every ancestor of `path` below the root is a real folder (not a symlink), creating
    /// missing ones when `create` is set.
    fn check_parents(&self, path: &BStr, create: bool) -> Result<(), String> {
        let mut cur = PathBuf::from(self.root);
        let mut rel = BString::default();
        let components: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
        for comp in &components[..components.len().saturating_sub(1)] {
            cur.push(std::ffi::OsStr::from_bytes(comp));
            rel = crate::filter::join_rel(&rel, comp);
            match std::fs::symlink_metadata(&cur) {
                Ok(m) if m.is_dir() => {}
                Ok(_) if self.dry_run && self.deleted.contains(&rel) => return Ok(()),
                Ok(m) => {
                    let what = if m.file_type().is_symlink() {
                        "a symlink"
                    } else {
                        "not a folder"
                    };
                    return Err(format!(
                        "parent `{}` is {what}; never followed or replaced",
                        rel.to_str_lossy()
                    ));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                    if self.dry_run {
                        return Ok(());
                    }
                    crate::safe_io::create_project_dir(&cur).map_err(|e| {
                        format!("cannot create folder `{}`: {e}", rel.to_str_lossy())
                    })?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(format!("cannot stat parent `{}`: {e}", rel.to_str_lossy())),
            }
        }
        Ok(())
    }
}

/// Refuses tree paths that could escape the root or reach into a repository.
pub(crate) fn safe_tree_path(path: &BStr) -> Result<(), String> {
    for comp in path.split(|b| *b == b'/') {
        let bad = comp.is_empty()
            || comp == b"."
            || comp == b".."
            || comp.contains(&0)
            || comp.eq_ignore_ascii_case(b".git");
        if bad {
            return Err(format!(
                "unsafe path in checkpoint (component {:?}); refused",
                comp.as_bstr()
            ));
        }
    }
    Ok(())
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

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn temp_beside(abs: &Path) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    abs.with_file_name(format!("{TEMP_PREFIX}{}-{n}", std::process::id()))
}

pub(crate) fn replace_with_file(abs: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    let tmp = temp_beside(abs);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(data)?;
        // The umask may have narrowed the mode given to open.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        drop(f);
        std::fs::rename(&tmp, abs)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

pub(crate) fn replace_with_symlink(abs: &Path, target: &[u8]) -> std::io::Result<()> {
    let tmp = temp_beside(abs);
    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &tmp)?;
    std::fs::rename(&tmp, abs).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_are_refused() {
        for bad in [
            "../x",
            "a/../../x",
            "a//b",
            ".git/config",
            "sub/.GIT/hooks/x",
            "./a",
        ] {
            assert!(safe_tree_path(bad.as_bytes().as_bstr()).is_err(), "{bad}");
        }
        for good in [
            "a",
            "a/b.txt",
            ".github/workflows/ci.yml",
            "..foo",
            ".gitignore",
        ] {
            assert!(safe_tree_path(good.as_bytes().as_bstr()).is_ok(), "{good}");
        }
    }

    #[test]
    fn modes_follow_the_exec_bit() {
        assert_eq!(file_mode(None, false), 0o644);
        assert_eq!(file_mode(None, true), 0o755);
        assert_eq!(file_mode(Some(0o600), true), 0o700);
        assert_eq!(file_mode(Some(0o755), false), 0o644);
    }
}
