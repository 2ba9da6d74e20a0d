//! What a fetch brings: the packs `git fetch` wrote into a scratch repository (which borrows
//! the store's objects, so only what the store lacks arrives) are indexed into the store, made
//! durable, and then the refs of others' checkpoints under `refs/ckpt/remotes/<remote>/` are
//! set to what the remote has, in one journaled transaction. The store's own refs never move.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufReader;
use std::path::Path;

use gix::ObjectId;

use super::{own_scratch, pushed_kind, validate_who, RefKind, ShareError, REMOTE_REFS};
use crate::model::CheckpointId;
use crate::store::import::{unsafe_paths, PackError};
use crate::store::txn::refs::{delete_edit, update_edit};
use crate::store::{Store, StoreError};

/// Most refs a fetch names as ignored.
const MAX_LISTED: usize = 20;

/// What a fetch brought.
#[derive(Debug, Default)]
pub struct Received {
    /// Objects indexed into the store.
    pub objects: u64,
    /// Others' checkpoints now known that were not before.
    pub new_checkpoints: usize,
    /// Per person: how many dialogs they have on the remote.
    pub people: BTreeMap<String, usize>,
    /// Refs set, and refs removed (gone from the remote).
    pub updated: usize,
    pub removed: usize,
    /// Refs of the remote under `refs/ckpt/` that are no checkpoint of a person, with why.
    pub ignored: Vec<String>,
}

impl Store {
    /// A scratch repository for `git fetch` to write into.
    pub fn prepare_fetch(&self) -> Result<std::path::PathBuf, ShareError> {
        super::scratch_repo(self, "fetch")
    }

    /// Takes in what `git fetch` wrote into the scratch repository `git_dir` from `remote`,
    /// then removes it.
    pub fn receive_fetch(&self, remote: &str, git_dir: &Path) -> Result<Received, ShareError> {
        self.remote(remote)?;
        let git_dir = own_scratch(self, git_dir)?;
        let result = self.receive(remote, &git_dir);
        let _ = std::fs::remove_dir_all(&git_dir);
        result
    }

    fn receive(&self, remote: &str, git_dir: &Path) -> Result<Received, ShareError> {
        let mut received = Received::default();
        let wanted = fetched_refs(git_dir, &mut received.ignored)?;
        let keeps = self.take_in_objects(git_dir, &mut received)?;
        let repo = self.repo();
        let before: HashSet<_> = self
            .remote_list(&repo, Some(remote))?
            .into_iter()
            .map(|c| c.id)
            .collect();
        let prefix = format!("{REMOTE_REFS}{remote}/");
        let mut desired = BTreeMap::new();
        let mut checked = Checked {
            known: before.clone(),
            heights: HashMap::new(),
        };
        for (name, id) in wanted {
            let (who, tail) = name.split_once('/').expect("checked by fetched_refs");
            let usable = match pushed_kind(tail) {
                Some(RefKind::Meta) => repo.has_object(id),
                Some(_) => self.checkpoint(&repo, id).is_ok(),
                None => false,
            };
            if !usable {
                note(
                    &mut received.ignored,
                    format!("refs/ckpt/{name} (not a checkpoint ckpt can read)"),
                );
                continue;
            }
            if pushed_kind(tail) != Some(RefKind::Meta) {
                if let Some(bad) = checked.unsafe_tree(&repo, id)? {
                    note(
                        &mut received.ignored,
                        format!("refs/ckpt/{name} (holds paths no checkout may write: {bad})"),
                    );
                    continue;
                }
            }
            if tail.starts_with("dialogs/") {
                *received.people.entry(who.to_string()).or_default() += 1;
            }
            desired.insert(format!("{prefix}{name}"), id);
        }
        let current: BTreeMap<String, ObjectId> = self
            .refs_under(&repo, &prefix)?
            .into_iter()
            .map(|(rest, id)| (format!("{prefix}{rest}"), id))
            .collect();
        let mut edits = Vec::new();
        for (name, id) in &desired {
            let old = current.get(name).copied();
            if old != Some(*id) {
                edits.push(update_edit(name, old, *id, &format!("fetch {remote}"))?);
                received.updated += 1;
            }
        }
        for (name, id) in &current {
            if !desired.contains_key(name) {
                edits.push(delete_edit(name, *id)?);
                received.removed += 1;
            }
        }
        let moved = match edits.is_empty() {
            true => Ok(()),
            false => {
                let mut txn = self.begin();
                txn.edit(edits);
                txn.commit("fetching")
            }
        };
        // The refs reach what matters now; gc may drop the rest, and the next merge of small
        // packs takes these in (one more pack a fetch: lookups visit every pack).
        self.durable
            .small_packs
            .fetch_add(keeps.len(), std::sync::atomic::Ordering::Relaxed);
        for keep in keeps {
            let _ = std::fs::remove_file(keep);
        }
        moved?;
        self.record_fetch(remote)?;
        let repo = self.repo();
        received.new_checkpoints = self
            .remote_list(&repo, Some(remote))?
            .iter()
            .filter(|c| !before.contains(&c.id))
            .count();
        Ok(received)
    }

    /// Indexes each pack of the scratch repository into the store and copies any loose object
    /// it holds; returns the `.keep` files protecting the new packs.
    fn take_in_objects(
        &self,
        git_dir: &Path,
        received: &mut Received,
    ) -> Result<Vec<std::path::PathBuf>, ShareError> {
        let pack_dir = git_dir.join("objects/pack");
        let mut keeps = Vec::new();
        let entries = std::fs::read_dir(&pack_dir).map_err(|source| StoreError::Io {
            path: pack_dir.clone(),
            source,
        })?;
        let mut packs: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "pack"))
            .collect();
        packs.sort();
        for pack in packs {
            let file = crate::fs::open_regular(&pack).map_err(|source| StoreError::Io {
                path: pack.clone(),
                source,
            })?;
            let mut reader = BufReader::with_capacity(1 << 16, file);
            let indexed = self.index_pack(&mut reader).map_err(|e| match e {
                PackError::Store(e) => ShareError::Store(e),
                PackError::Pack(message) => {
                    ShareError::Scratch(format!("the fetched pack cannot be read: {message}"))
                }
            })?;
            received.objects += u64::from(indexed.objects);
            keeps.extend(indexed.keep_path);
        }
        let loose = loose_objects(&git_dir.join("objects"));
        if !loose.is_empty() {
            let scratch = gix::open_opts(git_dir, gix::open::Options::isolated()).map_err(|e| {
                StoreError::Open {
                    path: git_dir.to_path_buf(),
                    message: e.to_string(),
                }
            })?;
            let txn = self.begin();
            for id in &loose {
                let object = scratch
                    .find_object(*id)
                    .map_err(|e| StoreError::git("reading a fetched object", e))?;
                txn.objects(|repo| {
                    gix::objs::Write::write_buf(&repo.objects, object.kind, &object.data)
                })
                .map_err(|e| StoreError::git("writing a fetched object", e))?;
            }
            drop(txn);
            self.flush_objects()?;
            received.objects += loose.len() as u64;
        }
        Ok(keeps)
    }
}

/// The scratch repository's refs under `refs/ckpt/<who>/`, as `<who>/<rest>`; every other ref
/// is noted in `ignored`.
fn fetched_refs(
    git_dir: &Path,
    ignored: &mut Vec<String>,
) -> Result<Vec<(String, ObjectId)>, ShareError> {
    let scratch =
        gix::open_opts(git_dir, gix::open::Options::isolated()).map_err(|e| StoreError::Open {
            path: git_dir.to_path_buf(),
            message: e.to_string(),
        })?;
    let platform = scratch
        .references()
        .map_err(|e| StoreError::git("listing fetched refs", e))?;
    let iter = platform
        .prefixed("refs/ckpt/")
        .map_err(|e| StoreError::git("listing fetched refs", e))?;
    let mut out = Vec::new();
    for r in iter {
        let r = r.map_err(|e| StoreError::git("listing fetched refs", e))?;
        let name = r.name().as_bstr().to_string();
        let rest = name.trim_start_matches("refs/ckpt/");
        let Some(id) = r.target().try_id().map(|id| id.to_owned()) else {
            continue;
        };
        let good = rest
            .split_once('/')
            .is_some_and(|(who, tail)| validate_who(who).is_ok() && pushed_kind(tail).is_some());
        match good {
            true => out.push((rest.to_string(), id)),
            false => note(ignored, name),
        }
    }
    Ok(out)
}

/// The histories a fetch looked at: checkpoints known to be safe (fetched before, or looked
/// at now) and the trees looked at (see [`unsafe_paths`]).
struct Checked {
    known: HashSet<CheckpointId>,
    heights: HashMap<ObjectId, usize>,
}

impl Checked {
    /// The first paths no checkout may write in a checkpoint of the history ending at `tip`
    /// (down to checkpoints known already), as one text; None when there are none.
    fn unsafe_tree(
        &mut self,
        repo: &gix::Repository,
        tip: ObjectId,
    ) -> Result<Option<String>, ShareError> {
        let mut todo = vec![tip];
        while let Some(id) = todo.pop() {
            if self.known.contains(&id.into()) {
                continue;
            }
            let Ok(commit) = repo.find_commit(id) else {
                continue; // history cut by the remote's retention
            };
            let tree = commit
                .tree_id()
                .map_err(|e| StoreError::git("reading a fetched checkpoint", e))?
                .detach();
            let bad = unsafe_paths(repo, tree, &mut self.heights, 3)?;
            if !bad.is_empty() {
                return Ok(Some(bad.join(", ")));
            }
            self.known.insert(id.into());
            todo.extend(commit.parent_ids().map(|p| p.detach()));
        }
        Ok(None)
    }
}

fn note(ignored: &mut Vec<String>, name: String) {
    if ignored.len() < MAX_LISTED {
        ignored.push(name);
    }
}

/// The loose objects under `objects` (`xx/yyyy…`).
fn loose_objects(objects: &Path) -> Vec<ObjectId> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(objects) else {
        return out;
    };
    for dir in dirs.flatten() {
        let prefix = dir.file_name().to_string_lossy().to_string();
        if prefix.len() != 2 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        for file in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let hex = format!("{prefix}{}", file.file_name().to_string_lossy());
            if let Ok(id) = ObjectId::from_hex(hex.as_bytes()) {
                out.push(id);
            }
        }
    }
    out
}
