//! The store's refs: read, and moved durably. Every ref change is a compare-and-swap
//! transaction, journaled with the operation's staged pack in one record ([`Durable::move_refs`]):
//! the refs are locked and checked, the record is flushed, the pack published, and then the
//! refs move. When a store is first opened, the changes a crash lost are redone from the
//! journal ([`replay_refs`]).

use std::path::{Path, PathBuf};

use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;
use gix::ObjectId;

use super::durable::Durable;
use super::journal::Journal;
use super::records::{Old, Record, RefChange};
use super::replay::{ref_targets, Current};
use super::staged::StagedPack;
use crate::store::error::{error_chain, StoreError};
use crate::store::identity::signature;

/// Refs that get no reflog: the client metadata keep-alives (`refs/ckpt/meta/<blob id>`).
const UNLOGGED_REFS: &str = "refs/ckpt/meta/";

impl Durable {
    /// Applies `edits` as one compare-and-swap transaction, durable with the operation's staged
    /// pack in one journal record (see [`super::journal`]): the refs are locked and checked, the record
    /// is flushed, the pack published, and then the refs move. If the refs cannot be locked or
    /// moved meanwhile (a concurrent change), the staged pack is still made durable.
    /// `retire` gives a ref file about to be replaced its second name (see
    /// `Store::retire`).
    pub(crate) fn move_refs(
        &self,
        repo: &gix::Repository,
        edits: Vec<RefEdit>,
        doing: &str,
        retire: &dyn Fn(&Path),
    ) -> Result<(), StoreError> {
        let mut journal = self.journal.lock();
        journal.recover()?;
        let changes: Vec<RefChange> = edits.iter().map(ref_change).collect();
        let mut packs = Some(journal.take_staged());
        let mut journaled = false;
        let result = apply_ref_edits(repo, edits, doing, || {
            let packs = packs.take().unwrap_or_default();
            self.journal_and_publish(&mut journal, packs, changes.clone())?;
            journaled = true;
            self.keep_replaced_refs(changes.iter().map(|c| c.name.as_str()), retire);
            Ok(())
        });
        if journaled {
            let paths = changes.iter().flat_map(|c| self.ref_paths(&c.name));
            journal.unsettled(paths.collect::<Vec<_>>());
            if result.is_err() {
                // Journaled, not (wholly) applied: never redone.
                journal.set_broken();
            }
        } else if let Some(packs) = packs.take().filter(|p| !p.is_empty()) {
            if let Err(e) = self.journal_and_publish(&mut journal, packs, Vec::new()) {
                tracing::error!(error = %e, "cannot write the operation's new objects");
            }
        }
        result
    }

    /// Gives each loose ref file the transaction is about to replace or remove a second name
    /// (`retire`), so that moving the ref frees nothing (see `fs::Retired`).
    fn keep_replaced_refs<'a>(&self, names: impl Iterator<Item = &'a str>, retire: &dyn Fn(&Path)) {
        for name in names {
            let path = self.dir.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                retire(&path);
            }
        }
    }

    /// Makes the staged pack durable (one journal record) and readable; whether there was one.
    pub(crate) fn commit_staged(&self) -> Result<bool, StoreError> {
        let mut journal = self.journal.lock();
        if !journal.has_staged() {
            return Ok(false);
        }
        let packs = journal.take_staged();
        self.journal_and_publish(&mut journal, packs, Vec::new())?;
        Ok(true)
    }

    /// Writes one journal record of `packs` and `refs`, flushed, then publishes the packs.
    pub(crate) fn journal_and_publish(
        &self,
        journal: &mut Journal,
        packs: Vec<StagedPack>,
        refs: Vec<RefChange>,
    ) -> Result<(), StoreError> {
        let record = Record {
            packs: packs
                .iter()
                .map(|p| (p.name.clone(), p.pack.clone()))
                .collect(),
            refs,
        };
        if let Err(e) = journal.append(&record) {
            if !packs.is_empty() {
                self.lost.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            return Err(e);
        }
        let pack_dir = self.dir.join("objects").join("pack");
        for p in &packs {
            journal.unsettled([pack_dir.join(format!("{}.pack", p.name)), pack_dir.clone()]);
            if let Err(source) = p.publish_into(&pack_dir, false, Some(&self.spares)) {
                journal.set_broken();
                self.lost.store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(StoreError::Io {
                    path: pack_dir,
                    source,
                });
            }
            self.checked_whole(&p.name);
            *self.unloaded.lock() = Some(p.first);
            self.small_packs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Flushes everything the journal's records wrote and starts its new epoch: before packs
    /// are removed, so that no record names one (a redo would write it again).
    pub(crate) fn retire_journal(&self) -> Result<(), StoreError> {
        self.commit_staged()?;
        self.journal.lock().retire()
    }

    /// What settling a change of ref `name` flushes: the ref, its folders up to the store, and
    /// `packed-refs` (a deletion may rewrite it).
    fn ref_paths(&self, name: &str) -> Vec<PathBuf> {
        ref_paths(&self.dir, name)
    }
}

/// An edit pointing `name` at `new` if it still points at `expected` (None: must not exist).
pub(crate) fn update_edit(
    name: &str,
    expected: Option<ObjectId>,
    new: ObjectId,
    log_message: &str,
) -> Result<RefEdit, StoreError> {
    let expected = match expected {
        Some(id) => PreviousValue::MustExistAndMatch(Target::Object(id)),
        None => PreviousValue::MustNotExist,
    };
    Ok(RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: !name.starts_with(UNLOGGED_REFS),
                message: log_message.replace('\n', " ").into(),
            },
            expected,
            new: Target::Object(new),
        },
        name: name
            .try_into()
            .map_err(|e| StoreError::git("ref name", e))?,
        deref: false,
    })
}

/// An edit deleting `name` if it still points at `expected`.
pub(crate) fn delete_edit(name: &str, expected: ObjectId) -> Result<RefEdit, StoreError> {
    Ok(RefEdit {
        change: Change::Delete {
            expected: PreviousValue::MustExistAndMatch(Target::Object(expected)),
            log: RefLog::AndReference,
        },
        name: name
            .try_into()
            .map_err(|e| StoreError::git("ref name", e))?,
        deref: false,
    })
}

pub(crate) fn ref_paths(dir: &Path, name: &str) -> Vec<PathBuf> {
    let path = dir.join(name);
    let mut out = vec![path.clone(), dir.join("packed-refs")];
    out.extend(
        path.ancestors()
            .skip(1)
            .take_while(|f| f.starts_with(dir))
            .map(Path::to_path_buf),
    );
    out
}

/// Applies ref edits as one transaction, its reflog written as ckpt, calling `between` after
/// the refs are locked and checked and before they move (the journal record is written there).
/// A ref that moved meanwhile fails the compare-and-swap and is reported as a concurrent change.
pub(crate) fn apply_ref_edits(
    repo: &gix::Repository,
    edits: Vec<RefEdit>,
    doing: &str,
    between: impl FnOnce() -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    use gix::lock::acquire::Fail;
    let names: Vec<String> = edits.iter().map(|e| e.name.as_bstr().to_string()).collect();
    let concurrent = |e: &dyn std::error::Error| {
        StoreError::Concurrent(format!("{doing} {}: {}", names.join(", "), error_chain(e)))
    };
    let sig = signature();
    let mut time_buf = gix::date::parse::TimeBuf::default();
    // git's own defaults for waiting on a ref's lock and on packed-refs'.
    let prepared = repo
        .refs
        .transaction()
        .prepare(
            edits,
            Fail::AfterDurationWithBackoff(std::time::Duration::from_millis(100)),
            Fail::AfterDurationWithBackoff(std::time::Duration::from_millis(1000)),
        )
        .map_err(|e| concurrent(&e))?;
    // Dropping the prepared transaction on an error releases its locks.
    between()?;
    prepared
        .commit(Some(sig.to_ref(&mut time_buf)))
        .map_err(|e| concurrent(&e))?;
    Ok(())
}

/// Redoes the ref changes of the journal's records that were lost (see
/// [`ref_targets`]: a ref only ever moves forward); returns the paths to settle. A
/// ref that cannot be read (cut short by a power cut) is replaced.
pub(crate) fn replay_refs(
    dir: &Path,
    repo: &gix::Repository,
    records: &[Record],
) -> Result<Vec<PathBuf>, StoreError> {
    let mut paths = Vec::new();
    let mut unreadable = std::collections::BTreeSet::new();
    let targets = ref_targets(records, |name| match repo.try_find_reference(name) {
        Ok(found) => {
            Current::Holds(found.and_then(|r| r.target().try_id().map(|id| id.to_owned())))
        }
        Err(e) => {
            tracing::warn!(reference = %name, error = %error_chain(&e), "replacing an unreadable ref from the store's journal");
            unreadable.insert(name.to_string());
            Current::Unreadable
        }
    });
    for name in records.iter().flat_map(|r| &r.refs).map(|c| &c.name) {
        paths.extend(ref_paths(dir, name));
    }
    for (name, new) in targets {
        let exists = if unreadable.contains(&name) {
            let path = dir.join(&name);
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(StoreError::Io { path, source: e });
                }
            }
            false
        } else {
            repo.try_find_reference(name.as_str())
                .ok()
                .flatten()
                .is_some()
        };
        let change = match new {
            Some(id) => Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: !name.starts_with(UNLOGGED_REFS),
                    message: "ckpt: redone from the journal".into(),
                },
                expected: PreviousValue::Any,
                new: Target::Object(id),
            },
            None if !exists => continue,
            None => Change::Delete {
                expected: PreviousValue::Any,
                log: RefLog::AndReference,
            },
        };
        let edit = RefEdit {
            change,
            name: name
                .as_str()
                .try_into()
                .map_err(|e| StoreError::git("ref name", e))?,
            deref: false,
        };
        apply_ref_edits(repo, vec![edit], "redoing", || Ok(()))?;
        tracing::warn!(reference = %name, "redid a ref change from the store's journal (it was lost, e.g. in a power cut)");
    }
    Ok(paths)
}

/// What a ref edit changes, as the journal records it: every edit the store makes checks the
/// ref's previous value (a compare-and-swap), which the record keeps.
fn ref_change(edit: &RefEdit) -> RefChange {
    let (expected, new) = match &edit.change {
        Change::Update {
            expected,
            new: Target::Object(id),
            ..
        } => (expected, Some(*id)),
        Change::Update { expected, .. } => (expected, None),
        Change::Delete { expected, .. } => (expected, None),
    };
    let old = match expected {
        PreviousValue::MustNotExist => Old::Absent,
        PreviousValue::MustExistAndMatch(Target::Object(id)) => Old::At(*id),
        _ => Old::Unknown,
    };
    RefChange {
        name: edit.name.as_bstr().to_string(),
        old,
        new,
    }
}
