//! Naming checkpoints: tags and notes, and the resolution of what a person types (an id or a
//! prefix, a tag, `@`/`latest`, `@~N`, `#SEQ`) into a checkpoint.

use std::collections::{HashMap, HashSet};

use gix::ObjectId;

use super::checkpoint::{
    validate_dialog, Checkpoint, CheckpointError, DIALOG_REFS, NOTE_REFS, TAG_REFS,
};
use super::{Store, StoreError};

/// How far back from a dialog's head a full id is looked for before the whole history is.
const RECENT_WINDOW: usize = 64;

impl Store {
    /// Names `checkpoint` with `tag` (names follow the rules of dialog names).
    pub fn add_tag(
        &self,
        repo: &gix::Repository,
        checkpoint: &Checkpoint,
        tag: &str,
    ) -> Result<(), CheckpointError> {
        validate_dialog(tag).map_err(|_| CheckpointError::BadTag(tag.to_string()))?;
        let name = format!("{TAG_REFS}{tag}");
        if self.ref_target(repo, &name)?.is_some() {
            return Err(CheckpointError::TagExists(tag.to_string()));
        }
        let mut txn = self.begin();
        txn.update(&name, None, checkpoint.id.object_id(), "ckpt: tag")?;
        txn.commit("updating")?;
        Ok(())
    }

    /// Appends a line of `text` to the notes of `checkpoint` (kept by a ref, so gc keeps it).
    pub fn add_note(
        &self,
        repo: &gix::Repository,
        checkpoint: &Checkpoint,
        text: &str,
    ) -> Result<(), CheckpointError> {
        let name = format!("{NOTE_REFS}{}", checkpoint.id);
        let previous = self.ref_target(repo, &name)?;
        let mut notes = match previous {
            Some(id) => {
                repo.find_object(id)
                    .map_err(|e| StoreError::git("reading notes", e))?
                    .detach()
                    .data
            }
            None => Vec::new(),
        };
        notes.extend_from_slice(text.trim_end().as_bytes());
        notes.push(b'\n');
        let mut txn = self.begin();
        let blob = txn.objects(|pending| {
            pending
                .write_blob(&notes)
                .map(|id| id.detach())
                .map_err(|e| StoreError::git("writing notes", e))
        })?;
        // The note and the ref naming it: one journal record.
        txn.update(&name, previous, blob, "ckpt: note")?;
        txn.commit("updating")?;
        Ok(())
    }

    /// Fills in the tags and notes of `checkpoints`.
    pub fn annotate(
        &self,
        repo: &gix::Repository,
        checkpoints: &mut [Checkpoint],
    ) -> Result<(), CheckpointError> {
        let tags = self.refs_under(repo, TAG_REFS)?;
        let notes: HashMap<String, ObjectId> =
            self.refs_under(repo, NOTE_REFS)?.into_iter().collect();
        for c in checkpoints.iter_mut() {
            let id = c.id.object_id();
            c.tags = tags
                .iter()
                .filter(|(_, t)| *t == id)
                .map(|(n, _)| n.clone())
                .collect();
            if let Some(blob) = notes.get(&c.id.to_string()) {
                let data = repo
                    .find_object(*blob)
                    .map_err(|e| StoreError::git("reading notes", e))?
                    .detach()
                    .data;
                c.notes = Some(String::from_utf8_lossy(&data).trim_end().to_string());
            }
        }
        Ok(())
    }

    /// Resolves a checkpoint name: a full id or a unique prefix (at least 4 hex digits), a
    /// tag, `@` or `latest` (the newest checkpoint), `@~N` (N before it) or `#SEQ`, the last
    /// three in the dialog of the newest checkpoint.
    pub fn resolve(
        &self,
        repo: &gix::Repository,
        text: &str,
    ) -> Result<Checkpoint, CheckpointError> {
        self.resolve_in(repo, text, None)
    }

    /// Like [`Store::resolve`], with `@`, `@~N` and `#SEQ` counted in `dialog` when given.
    pub fn resolve_in(
        &self,
        repo: &gix::Repository,
        text: &str,
        dialog: Option<&str>,
    ) -> Result<Checkpoint, CheckpointError> {
        let name = text.trim();
        let back = match name {
            "@" | "latest" => Some(0),
            _ => name
                .strip_prefix("@~")
                .map(|n| {
                    n.parse::<usize>()
                        .map_err(|_| CheckpointError::BadId(text.into()))
                })
                .transpose()?,
        };
        let seq = name
            .strip_prefix('#')
            .map(|n| {
                n.parse::<u64>()
                    .map_err(|_| CheckpointError::BadId(text.into()))
            })
            .transpose()?;
        if back.is_some() || seq.is_some() {
            let dialog = match dialog {
                Some(d) => d.to_string(),
                None => match self.list(repo, None)?.into_iter().next() {
                    Some(newest) => newest.dialog,
                    None => return Err(CheckpointError::Unknown(text.into())),
                },
            };
            let chain = self.list(repo, Some(&dialog))?;
            let found = match (back, seq) {
                (Some(n), _) => chain.into_iter().nth(n),
                (_, Some(seq)) => chain.into_iter().find(|c| c.seq == seq),
                _ => None,
            };
            return found
                .ok_or_else(|| CheckpointError::Unknown(format!("{text} (in dialog {dialog})")));
        }
        if validate_dialog(name).is_ok() {
            if let Some(id) = self.ref_target(repo, &format!("{TAG_REFS}{name}"))? {
                return self.checkpoint(repo, id);
            }
        }
        let t = name.to_ascii_lowercase();
        if t.len() < 4 || t.len() > 40 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CheckpointError::BadId(text.to_string()));
        }
        if let Ok(id) = ObjectId::from_hex(t.as_bytes()) {
            if let Some(c) = self.recent_in_own_dialog(repo, id) {
                return Ok(c);
            }
        }
        let mut seen = HashSet::new();
        let mut matches = Vec::new();
        for c in self.list(repo, None)? {
            if c.id.to_string().starts_with(&t) && seen.insert(c.id) {
                matches.push(c);
            }
        }
        match matches.len() {
            // Not one of this store's own: one a fetch brought, if any.
            0 => self.resolve_remote(repo, &t, text),
            1 => Ok(matches.pop().expect("one match")),
            _ => Err(CheckpointError::Ambiguous {
                prefix: text.to_string(),
                candidates: matches
                    .iter()
                    .map(|c| format!("{} (#{} {} {})", c.id.short(), c.seq, c.dialog, c.kind))
                    .collect(),
            }),
        }
    }

    /// The checkpoint `id` if its own dialog's chain reaches it within [`RECENT_WINDOW`] steps
    /// from the dialog's head: what a full id names almost always (a restore goes back a few
    /// prompts), found without reading the whole history. None sends the caller to the full
    /// search, which has the same answer whenever this one has one.
    fn recent_in_own_dialog(&self, repo: &gix::Repository, id: ObjectId) -> Option<Checkpoint> {
        let c = self.checkpoint(repo, id).ok()?;
        validate_dialog(&c.dialog).ok()?;
        let shallow = self.shallow().ok()?;
        let mut next = self
            .ref_target(repo, &format!("{DIALOG_REFS}{}", c.dialog))
            .ok()??;
        for _ in 0..RECENT_WINDOW {
            if next == id {
                return Some(c);
            }
            if shallow.contains(&next) {
                return None;
            }
            let step = self.checkpoint(repo, next).ok()?;
            if step.seq <= c.seq {
                return None;
            }
            next = step.parent?.object_id();
        }
        None
    }
}
