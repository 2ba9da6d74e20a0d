//! What a push sends: this store's dialogs and kept runs, as commits fit to leave the machine,
//! named by refs in a scratch repository that `git push` then sends.
//!
//! A checkpoint is sent as it is (the same id on every machine) unless it must change: a
//! prompt holding a high-confidence secret is sent with the secret replaced (see
//! [`super::secrets`]), and a checkpoint whose history retention cut is sent without its parent
//! (a remote need not accept git's shallow updates). A changed checkpoint is written to the
//! scratch repository, never to the store, and every checkpoint after it is changed too (its
//! parent changed); the change is the same on every push, so each is sent once. Client
//! metadata (the agents' transcripts, paths, models) lives in blobs only the store's own refs
//! reach: it travels only when asked for.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use gix::bstr::{BString, ByteSlice};
use gix::ObjectId;

use super::secrets::redact;
use super::{scratch_repo, ShareError};
use crate::model::CheckpointId;
use crate::store::checkpoint::{DIALOG_REFS, KEPT_REFS};
use crate::store::message::relabel;
use crate::store::{Store, StoreError};

/// A prompt that was sent with secrets replaced.
#[derive(Debug, Clone)]
pub struct Redaction {
    /// The checkpoint here (its copy on the remote has another id).
    pub id: CheckpointId,
    pub dialog: String,
    pub seq: u64,
    /// What was replaced, one entry per secret.
    pub kinds: Vec<String>,
}

/// A push made ready: the scratch repository whose `refs/ckpt/…` are to be sent.
#[derive(Debug)]
pub struct PushPlan {
    pub git_dir: PathBuf,
    /// This store's refs being pushed (`dialogs/<d>`, `kept/<d>/<id>`) and the checkpoint each
    /// names here.
    pub tips: BTreeMap<String, String>,
    /// Checkpoints the refs reach.
    pub checkpoints: usize,
    /// Checkpoints sent with another id (a secret replaced, a cut history, or a parent that
    /// changed).
    pub rewritten: usize,
    pub redactions: Vec<Redaction>,
    /// Metadata blobs sent (only with `with_metadata`).
    pub metadata: usize,
}

impl Store {
    /// Prepares a push of every dialog and kept run in a new scratch repository.
    pub fn prepare_push(
        &self,
        repo: &gix::Repository,
        with_metadata: bool,
    ) -> Result<PushPlan, ShareError> {
        let git_dir = scratch_repo(self, "push")?;
        let result = self.fill_push(repo, with_metadata, git_dir.clone());
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&git_dir);
        }
        result
    }

    fn fill_push(
        &self,
        repo: &gix::Repository,
        with_metadata: bool,
        git_dir: PathBuf,
    ) -> Result<PushPlan, ShareError> {
        let scratch = gix::open_opts(&git_dir, gix::open::Options::isolated()).map_err(|e| {
            StoreError::Open {
                path: git_dir.clone(),
                message: e.to_string(),
            }
        })?;
        // git must know where the store's history was cut: the remote's old refs may name
        // checkpoints whose parents retention removed (git stops at a shallow commit).
        let shallow = self.dir().join("shallow");
        if shallow.exists() {
            std::fs::copy(&shallow, git_dir.join("shallow")).map_err(|source| StoreError::Io {
                path: shallow.clone(),
                source,
            })?;
        }
        let mut sent = Sent {
            store: self,
            repo,
            scratch: &scratch,
            shallow: self.shallow()?,
            published: HashMap::new(),
            redactions: Vec::new(),
            rewritten: 0,
            with_metadata,
            meta_sent: HashMap::new(),
            meta_found: HashMap::new(),
        };
        let mut refs: Vec<(String, ObjectId, ObjectId)> = Vec::new();
        for (dialog, head) in self.refs_under(repo, DIALOG_REFS)? {
            refs.push((format!("dialogs/{dialog}"), head, sent.publish(head)?));
        }
        for (run, id) in self.refs_under(repo, KEPT_REFS)? {
            refs.push((format!("kept/{run}"), id, sent.publish(id)?));
        }
        let mut metadata = 0;
        if with_metadata {
            let mut blobs = HashSet::new();
            for id in sent.published.keys() {
                let c = self.checkpoint(repo, *id)?;
                if let Some(blob) = Store::meta_blob_of(&c).filter(|b| repo.has_object(*b)) {
                    blobs.insert(blob);
                }
            }
            metadata = blobs.len();
            for blob in blobs {
                let sent = sent.meta_sent.get(&blob).copied().unwrap_or(blob);
                refs.push((format!("meta/{sent}"), blob, sent));
            }
        }
        let mut tips = BTreeMap::new();
        for (name, local, published) in &refs {
            let path = git_dir.join("refs/ckpt").join(name);
            let io = |source| StoreError::Io {
                path: path.clone(),
                source,
            };
            std::fs::create_dir_all(path.parent().expect("a ref has a folder")).map_err(io)?;
            std::fs::write(&path, format!("{published}\n")).map_err(io)?;
            if !name.starts_with("meta/") {
                tips.insert(name.clone(), local.to_string());
            }
        }
        Ok(PushPlan {
            git_dir,
            tips,
            checkpoints: sent.published.len(),
            rewritten: sent.rewritten,
            redactions: sent.redactions,
            metadata,
        })
    }
}

/// The checkpoints made ready so far.
struct Sent<'a> {
    store: &'a Store,
    repo: &'a gix::Repository,
    scratch: &'a gix::Repository,
    shallow: HashSet<ObjectId>,
    /// Each checkpoint here and the id it is sent as.
    published: HashMap<ObjectId, ObjectId>,
    redactions: Vec<Redaction>,
    rewritten: usize,
    /// Whether metadata travels; each metadata blob here, the blob sent for it, and the
    /// secrets found in it.
    with_metadata: bool,
    meta_sent: HashMap<ObjectId, ObjectId>,
    meta_found: HashMap<ObjectId, Vec<&'static str>>,
}

impl Sent<'_> {
    /// The id `id` is sent as, its history made ready first (parents before children, without
    /// recursion: a timeline may be thousands of checkpoints long).
    fn publish(&mut self, id: ObjectId) -> Result<ObjectId, ShareError> {
        let mut todo = vec![id];
        while let Some(&next) = todo.last() {
            if self.published.contains_key(&next) {
                todo.pop();
                continue;
            }
            let commit = self.read(next)?;
            let parents: Vec<ObjectId> = match self.shallow.contains(&next) {
                true => Vec::new(),
                false => commit.parents.to_vec(),
            };
            let waiting: Vec<ObjectId> = parents
                .iter()
                .filter(|p| !self.published.contains_key(*p))
                .copied()
                .collect();
            if !waiting.is_empty() {
                todo.extend(waiting);
                continue;
            }
            todo.pop();
            let sent = self.send(next, commit, &parents)?;
            self.published.insert(next, sent);
        }
        Ok(self.published[&id])
    }

    fn read(&self, id: ObjectId) -> Result<gix::objs::Commit, ShareError> {
        let object = self
            .repo
            .find_object(id)
            .map_err(|e| StoreError::git("reading a checkpoint", e))?;
        let commit = object
            .try_into_commit()
            .map_err(|e| StoreError::git("reading a checkpoint", e))?;
        let decoded = commit
            .decode()
            .map_err(|e| StoreError::git("decoding a checkpoint", e))?;
        Ok(gix::objs::Commit::try_from(decoded)
            .map_err(|e| StoreError::git("decoding a checkpoint", e))?)
    }

    /// The id checkpoint `id` is sent as, writing a changed copy to the scratch repository
    /// when it must change.
    fn send(
        &mut self,
        id: ObjectId,
        mut commit: gix::objs::Commit,
        parents: &[ObjectId],
    ) -> Result<ObjectId, ShareError> {
        let new_parents: Vec<ObjectId> = parents.iter().map(|p| self.published[p]).collect();
        let mut changed = new_parents.as_slice() != commit.parents.as_slice();
        let message = commit.message.to_str_lossy().into_owned();
        // The label is redacted first and the subject made from what is left, then the whole
        // message is scanned again (a dialog's name, a message of another shape).
        let mut kinds = Vec::new();
        let relabelled = relabel(&message, |label| {
            let (text, found) = redact(label);
            kinds = found;
            text
        });
        let (text, more) = redact(relabelled.as_deref().unwrap_or(&message));
        kinds.extend(more);
        // The metadata, when it travels, holds the prompt too (the hook's input).
        if self.with_metadata {
            if let Some(headers) = self.redacted_meta(id, &commit, &mut kinds)? {
                commit.extra_headers = headers;
                changed = true;
            }
        }
        if text != message || !kinds.is_empty() {
            let c = self.store.checkpoint(self.repo, id)?;
            self.redactions.push(Redaction {
                id: c.id,
                dialog: c.dialog,
                seq: c.seq,
                kinds: kinds.iter().map(|k| k.to_string()).collect(),
            });
            commit.message = BString::from(text);
            changed = true;
        }
        if !changed {
            return Ok(id);
        }
        commit.parents = new_parents.into();
        self.rewritten += 1;
        let written = self
            .scratch
            .write_object(&commit)
            .map_err(|e| StoreError::git("writing a checkpoint to send", e))?;
        Ok(written.detach())
    }

    /// The commit's headers pointing to a copy of its metadata with secrets replaced (written
    /// to the scratch repository), when its metadata holds any; the kinds found are added.
    fn redacted_meta(
        &mut self,
        id: ObjectId,
        commit: &gix::objs::Commit,
        kinds: &mut Vec<&'static str>,
    ) -> Result<Option<Vec<(BString, BString)>>, ShareError> {
        let c = self.store.checkpoint(self.repo, id)?;
        let Some(blob) = Store::meta_blob_of(&c).filter(|b| self.repo.has_object(*b)) else {
            return Ok(None);
        };
        let sent = match self.meta_sent.get(&blob) {
            Some(sent) => *sent,
            None => {
                let data = self
                    .repo
                    .find_object(blob)
                    .map_err(|e| StoreError::git("reading a checkpoint's metadata", e))?
                    .detach()
                    .data;
                let (redacted, found) = redact_json(&data);
                let sent = match found.is_empty() {
                    true => blob,
                    false => self
                        .scratch
                        .write_blob(&redacted)
                        .map_err(|e| StoreError::git("writing metadata to send", e))?
                        .detach(),
                };
                self.meta_found.insert(blob, found);
                self.meta_sent.insert(blob, sent);
                sent
            }
        };
        if sent == blob {
            return Ok(None);
        }
        kinds.extend(self.meta_found[&blob].iter().copied());
        Ok(Store::with_meta_blob(&commit.extra_headers, sent))
    }
}

/// Metadata (JSON) with every secret in its strings replaced, and the kinds found: the strings
/// are scanned as text, not their escaped spelling (a token after an escaped newline, `\n`,
/// would look like part of a word). Text that is not JSON is scanned as it is.
fn redact_json(data: &[u8]) -> (Vec<u8>, Vec<&'static str>) {
    fn walk(value: &mut serde_json::Value, found: &mut Vec<&'static str>) {
        match value {
            serde_json::Value::String(text) => {
                let (redacted, kinds) = redact(text);
                if !kinds.is_empty() {
                    *text = redacted;
                    found.extend(kinds);
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| walk(v, found)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(mut value) => {
            walk(&mut value, &mut found);
            let out = serde_json::to_vec(&value).unwrap_or_else(|_| data.to_vec());
            (out, found)
        }
        Err(_) => {
            let (text, kinds) = redact(&String::from_utf8_lossy(data));
            (text.into_bytes(), kinds)
        }
    }
}
