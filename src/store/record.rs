//! Recording a checkpoint (its commit, its metadata, the dialog's ref: one transaction) and
//! reading one back.

use std::collections::BTreeMap;

use gix::bstr::{BString, ByteSlice};
use gix::ObjectId;

use super::checkpoint::{
    parse_id, rfc3339_millis, validate_dialog, Checkpoint, CheckpointError, Header, KnownChanges,
    NewCheckpoint, APPROVED_REFS, DIALOG_REFS, HEADER, MAX_CLIENT_META_BYTES, META_REFS,
};
use super::error::StoreError;
use super::identity::signature;
use super::open::Store;
use super::tree::{read_tree, FileState};
use super::treediff::count_tree_changes;
use crate::model::{CheckpointId, SkippedFile};

impl Store {
    /// Records `tree` (whose objects are written, perhaps still pending) as a checkpoint on its
    /// dialog's timeline and returns it. The commit joins the operation's pending objects, all of
    /// them become durable with the dialog's ref change (one journal record, one flush), and
    /// the ref moves only if nobody moved it meanwhile. The handles load the new pack when the
    /// caller runs [`Store::pack_loader`].
    #[tracing::instrument(skip_all, fields(dialog = %new.dialog, kind = %new.kind))]
    pub fn record_checkpoint(
        &self,
        tree: ObjectId,
        skipped: Vec<SkippedFile>,
        new: NewCheckpoint,
    ) -> Result<Checkpoint, CheckpointError> {
        validate_dialog(&new.dialog)?;
        let ref_name = format!("{DIALOG_REFS}{}", new.dialog);
        let mut txn = self.begin();
        let (id, parent_id, meta_blob, header) =
            txn.objects(|repo| self.write_commit(repo, &ref_name, tree, skipped, &new))?;
        // Read back while it is still in memory: the new pack is not loaded yet.
        let checkpoint = txn.objects(|repo| self.checkpoint(repo, id))?;
        *self.last_recorded.lock() = Some(checkpoint.clone());
        let edited = (|| {
            if let Some(blob) = meta_blob {
                let name = format!("{META_REFS}{blob}");
                if self.ref_target(&self.repo(), &name)?.is_none() {
                    txn.update(&name, None, blob, "ckpt: client metadata")?;
                }
            }
            let log = format!("ckpt: {} #{}", header.kind, header.seq);
            txn.update(&ref_name, parent_id, id, &log)
        })();
        if let Err(e) = edited {
            // The objects are still made durable and readable.
            drop(txn);
            self.begin().commit("updating")?;
            return Err(e.into());
        }
        // The pack, the metadata's keep-alive and the dialog's ref: one journal record. The
        // new pack is loaded later (see `Store::pack_loader`): after the reply.
        txn.commit("updating")?;
        tracing::info!(id = %id, seq = header.seq, files = header.files, added = header.added,
            modified = header.modified, deleted = header.deleted,
            skipped = header.skipped.len(), "checkpoint recorded");
        Ok(checkpoint)
    }

    /// Writes (pending) the commit of a new checkpoint on `ref_name`; returns it, its parent,
    /// its metadata blob and its header.
    fn write_commit(
        &self,
        repo: &gix::Repository,
        ref_name: &str,
        tree: ObjectId,
        skipped: Vec<SkippedFile>,
        new: &NewCheckpoint,
    ) -> Result<(ObjectId, Option<ObjectId>, Option<ObjectId>, Header), CheckpointError> {
        let parent_id = self.ref_target(repo, ref_name)?;
        let parent = parent_id
            .map(|id| self.checkpoint_or_last(repo, id))
            .transpose()?;

        let meta_blob = new.meta.as_ref().map(|m| write_meta(repo, m)).transpose()?;
        let known_files = new.known_files.filter(|(t, _)| *t == tree).map(|(_, n)| n);
        let (files, added, modified, deleted) =
            counts_against(repo, parent.as_ref(), tree, new.known_changes, known_files)?;
        let created_at = jiff::Timestamp::now();
        let header = Header {
            v: 1,
            dialog: new.dialog.clone(),
            seq: parent.as_ref().map_or(1, |p| p.seq + 1),
            session: parent
                .as_ref()
                .map_or(1, |p| p.session + u64::from(p.kind.ends_session())),
            kind: new.kind,
            message_id: new.message_id.clone(),
            created_at: rfc3339_millis(created_at),
            files,
            added,
            modified,
            deleted,
            skipped,
            meta: meta_blob.map(|id| id.to_string()),
            restore: new.restore.clone(),
            imported: new.imported.clone(),
            point: new.point.clone(),
            span: new.span.clone(),
        };
        let header_json =
            serde_json::to_string(&header).map_err(|e| StoreError::git("encoding metadata", e))?;
        let message = commit_message(&header, &new.label);
        let mut sig = signature();
        sig.time = gix::date::Time::new(created_at.as_second(), 0);
        let commit = gix::objs::Commit {
            tree,
            parents: parent_id.into_iter().collect(),
            author: sig.clone(),
            committer: sig,
            encoding: None,
            message: message.into(),
            extra_headers: vec![(HEADER.into(), header_json.into())],
        };
        let id = repo
            .write_object(&commit)
            .map_err(|e| StoreError::git("writing a commit", e))?
            .detach();
        Ok((id, parent_id, meta_blob, header))
    }

    /// [`Store::checkpoint`], from memory when `id` is the checkpoint this store recorded last
    /// (what it reads is a function of the commit, which never changes): a restore records its
    /// result on its undo point, whose pack the store's handles have not loaded yet, and
    /// reading it from there first lists the pack folder again (0.5 ms).
    fn checkpoint_or_last(
        &self,
        repo: &gix::Repository,
        id: ObjectId,
    ) -> Result<Checkpoint, CheckpointError> {
        let last = self.last_recorded.lock();
        match last.as_ref().filter(|c| c.id.object_id() == id) {
            Some(c) => Ok(c.clone()),
            None => {
                drop(last);
                self.checkpoint(repo, id)
            }
        }
    }

    /// Reads checkpoint `id`.
    pub fn checkpoint(
        &self,
        repo: &gix::Repository,
        id: ObjectId,
    ) -> Result<Checkpoint, CheckpointError> {
        let not_ckpt = |message: String| CheckpointError::NotACheckpoint { id, message };
        let object = repo.find_object(id).map_err(|e| not_ckpt(e.to_string()))?;
        let commit = object
            .try_into_commit()
            .map_err(|e| not_ckpt(e.to_string()))?;
        let decoded = commit.decode().map_err(|e| not_ckpt(e.to_string()))?;
        let raw = decoded
            .extra_headers()
            .find(HEADER)
            .ok_or_else(|| not_ckpt("no ckpt header".into()))?;
        let header: Header = serde_json::from_slice(raw).map_err(|e| not_ckpt(e.to_string()))?;
        let message = decoded.message.to_str_lossy();
        let label = match message.split_once("\n\n") {
            Some((_, body)) => body.strip_suffix('\n').unwrap_or(body).to_string(),
            None => String::new(),
        };
        let parent = decoded.parents().next().map(CheckpointId::from);
        let checkpoint = Checkpoint {
            id: id.into(),
            parent,
            tree: decoded.tree().to_string(),
            dialog: header.dialog,
            seq: header.seq,
            session: header.session,
            kind: header.kind,
            label,
            message_id: header.message_id,
            created_at: header.created_at,
            files: header.files,
            added: header.added,
            modified: header.modified,
            deleted: header.deleted,
            skipped: header.skipped,
            restore: header.restore,
            imported: header.imported,
            point: header.point,
            span: header.span,
            tags: Vec::new(),
            notes: None,
            meta: None,
            origin: None,
            meta_blob: header
                .meta
                .as_deref()
                .and_then(|m| ObjectId::from_hex(m.as_bytes()).ok()),
        };
        Ok(checkpoint)
    }

    /// The blob holding `checkpoint`'s client metadata, if it has any.
    pub(crate) fn meta_blob_of(checkpoint: &Checkpoint) -> Option<ObjectId> {
        checkpoint.meta_blob
    }

    /// The `ckpt` header of a commit (`headers`) with its metadata blob replaced by `blob`:
    /// None when the commit has no such header.
    pub(crate) fn with_meta_blob(
        headers: &[(BString, BString)],
        blob: ObjectId,
    ) -> Option<Vec<(BString, BString)>> {
        let mut out = headers.to_vec();
        let (_, json) = out.iter_mut().find(|(name, _)| name == HEADER)?;
        // As a JSON value: fields of another version are kept as they are.
        let mut header: serde_json::Value = serde_json::from_slice(json).ok()?;
        header
            .as_object_mut()?
            .insert("meta".into(), blob.to_string().into());
        *json = serde_json::to_string(&header).ok()?.into();
        Some(out)
    }

    /// Loads the client metadata of `checkpoint` into it.
    pub fn load_meta(
        &self,
        repo: &gix::Repository,
        checkpoint: &mut Checkpoint,
    ) -> Result<(), CheckpointError> {
        if let Some(blob) = checkpoint.meta_blob {
            // Another person's checkpoint arrives without its metadata unless it was pushed.
            if checkpoint.origin.is_some() && !repo.has_object(blob) {
                return Ok(());
            }
            let object = repo
                .find_object(blob)
                .map_err(|e| StoreError::git("reading metadata", e))?;
            let value = match serde_json::from_slice(&object.data) {
                Ok(value) => value,
                // Whatever someone else pushed as metadata is theirs to get wrong.
                Err(_) if checkpoint.origin.is_some() => return Ok(()),
                Err(e) => return Err(StoreError::git("decoding metadata", e).into()),
            };
            checkpoint.meta = Some(value);
        }
        Ok(())
    }

    /// The approved state of `dialog`: the last `approved` checkpoint, else its first checkpoint.
    pub fn approved(
        &self,
        repo: &gix::Repository,
        dialog: &str,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        validate_dialog(dialog)?;
        if let Some(id) = self.ref_target(repo, &format!("{APPROVED_REFS}{dialog}"))? {
            return Ok(Some(self.checkpoint(repo, id)?));
        }
        Ok(self.list(repo, Some(dialog))?.pop())
    }

    /// Marks `checkpoint` (an `approved` one) as its dialog's approved state.
    pub fn set_approved(
        &self,
        repo: &gix::Repository,
        checkpoint: &Checkpoint,
    ) -> Result<(), CheckpointError> {
        let name = format!("{APPROVED_REFS}{}", checkpoint.dialog);
        let previous = self.ref_target(repo, &name)?;
        let id = checkpoint.id.object_id();
        let mut txn = self.begin();
        txn.update(&name, previous, id, "ckpt: approved")?;
        txn.commit("updating")?;
        Ok(())
    }

    /// The files of checkpoint `c`.
    pub fn files_of(
        &self,
        repo: &gix::Repository,
        c: &Checkpoint,
    ) -> Result<BTreeMap<BString, FileState>, CheckpointError> {
        Ok(read_tree(repo, parse_id(&c.tree)?)?)
    }
}

/// Writes a client's metadata document as a blob (refused over [`MAX_CLIENT_META_BYTES`]).
fn write_meta(
    repo: &gix::Repository,
    value: &serde_json::Value,
) -> Result<ObjectId, CheckpointError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StoreError::git("encoding metadata", e))?;
    if bytes.len() > MAX_CLIENT_META_BYTES {
        return Err(CheckpointError::MetaTooLarge { size: bytes.len() });
    }
    let id = repo
        .write_blob(&bytes)
        .map_err(|e| StoreError::git("writing metadata", e))?;
    Ok(id.detach())
}

/// `(files, added, modified, deleted)` of `tree` against the parent checkpoint's tree.
fn counts_against(
    repo: &gix::Repository,
    parent: Option<&Checkpoint>,
    tree: ObjectId,
    known: Option<KnownChanges>,
    known_files: Option<u64>,
) -> Result<(u64, u64, u64, u64), CheckpointError> {
    // Counts are a function of the two trees: what the caller knows of these two is exact.
    if let (Some(p), Some(k)) = (parent, known) {
        if k.new == tree && parse_id(&p.tree).is_ok_and(|old| old == k.old) {
            // Debug builds (the tests' daemons) check what callers know against the trees.
            #[cfg(debug_assertions)]
            if let Ok(read) = count_tree_changes(repo, Some(k.old), Some(tree)) {
                assert_eq!(
                    read,
                    (k.added, k.modified, k.deleted),
                    "known changes differ from the trees': {k:?}"
                );
            }
            return Ok((
                (p.files + k.added).saturating_sub(k.deleted),
                k.added,
                k.modified,
                k.deleted,
            ));
        }
    }
    let against_parent = parent.map(|p| {
        count_tree_changes(repo, Some(parse_id(&p.tree)?), Some(tree))
            .map(|counts| (p, counts))
            .map_err(CheckpointError::from)
    });
    Ok(match against_parent {
        Some(Ok((p, (a, m, d)))) => ((p.files + a).saturating_sub(d), a, m, d),
        // The parent's tree is partly unreadable (a damaged store, after fsck --repair): the
        // new checkpoint is whole; its counts are taken against nothing.
        Some(Err(e)) => {
            tracing::warn!(error = %e, "the previous checkpoint's tree is unreadable; counting every file as added");
            let (n, _, _) = count_tree_changes(repo, None, Some(tree))?;
            (n, n, 0, 0)
        }
        None => {
            // Against nothing: every file is added (a new dialog's first checkpoint reads no
            // tree when its caller knows how many there are).
            let n = match known_files {
                Some(n) => n,
                None => count_tree_changes(repo, None, Some(tree))?.0,
            };
            (n, n, 0, 0)
        }
    })
}

/// `[dialog] #seq kind: first line of the label`, a blank line, then the whole label.
fn commit_message(header: &Header, label: &str) -> String {
    super::message::message_of(
        &format!("[{}] #{} {}", header.dialog, header.seq, header.kind),
        label,
    )
}
