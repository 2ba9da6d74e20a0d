//! Reading the timelines: which dialogs exist, their checkpoints in order (through the runs
//! retention kept), and removing a dialog.

use std::collections::{BTreeMap, HashSet};

use gix::ObjectId;

use super::checkpoint::{
    validate_dialog, Checkpoint, CheckpointError, APPROVED_REFS, DIALOG_REFS, KEPT_REFS,
};
use super::Store;

impl Store {
    /// Whether `dialog` has a timeline yet.
    pub fn dialog_exists(
        &self,
        repo: &gix::Repository,
        dialog: &str,
    ) -> Result<bool, CheckpointError> {
        validate_dialog(dialog)?;
        Ok(self
            .ref_target(repo, &format!("{DIALOG_REFS}{dialog}"))?
            .is_some())
    }

    /// Forgets `dialog`'s timeline (its ref); objects it shares with others stay.
    pub fn remove_dialog(
        &self,
        repo: &gix::Repository,
        dialog: &str,
    ) -> Result<ObjectId, CheckpointError> {
        validate_dialog(dialog)?;
        let name = format!("{DIALOG_REFS}{dialog}");
        let head = self
            .ref_target(repo, &name)?
            .ok_or_else(|| CheckpointError::UnknownDialog(dialog.to_string()))?;
        let mut txn = self.begin();
        txn.delete(&name, head)?;
        txn.commit("deleting")?;
        let approved = format!("{APPROVED_REFS}{dialog}");
        if let Some(id) = self.ref_target(repo, &approved)? {
            let mut txn = self.begin();
            txn.delete(&approved, id)?;
            txn.commit("deleting")?;
        }
        for (name, id) in self.refs_under(repo, &format!("{KEPT_REFS}{dialog}/"))? {
            let mut txn = self.begin();
            txn.delete(&format!("{KEPT_REFS}{dialog}/{name}"), id)?;
            txn.commit("deleting")?;
        }
        Ok(head)
    }

    /// The dialogs of this store and their latest checkpoint ids.
    pub fn dialogs(
        &self,
        repo: &gix::Repository,
    ) -> Result<Vec<(String, ObjectId)>, CheckpointError> {
        Ok(self.refs_under(repo, DIALOG_REFS)?)
    }

    /// The checkpoints of `dialog` (all dialogs when None), newest first. Each dialog keeps its
    /// chain order; dialogs are interleaved by creation time.
    pub fn list(
        &self,
        repo: &gix::Repository,
        dialog: Option<&str>,
    ) -> Result<Vec<Checkpoint>, CheckpointError> {
        if let Some(d) = dialog {
            validate_dialog(d)?;
        }
        let mut chains: Vec<Vec<Checkpoint>> = self
            .chains(repo, dialog)?
            .into_iter()
            .map(|(_, chain)| chain)
            .collect();
        let mut out = Vec::new();
        while let Some(newest) = chains
            .iter_mut()
            .filter(|c| !c.is_empty())
            .max_by(|a, b| a[a.len() - 1].created_at.cmp(&b[b.len() - 1].created_at))
        {
            out.push(newest.pop().expect("non-empty chain"));
        }
        Ok(out)
    }

    /// Each dialog (or only `dialog`) with its checkpoints, oldest first: the chain from the
    /// dialog's ref and the runs that retention kept, each walked back to where it was cut.
    pub(crate) fn chains(
        &self,
        repo: &gix::Repository,
        dialog: Option<&str>,
    ) -> Result<Vec<(String, Vec<Checkpoint>)>, CheckpointError> {
        let shallow = self.shallow()?;
        let mut starts: BTreeMap<String, Vec<ObjectId>> = BTreeMap::new();
        for (name, head) in self.dialogs(repo)? {
            starts.entry(name).or_default().push(head);
        }
        for (name, id) in self.refs_under(repo, KEPT_REFS)? {
            if let Some((d, _)) = name.rsplit_once('/') {
                if let Some(runs) = starts.get_mut(d) {
                    runs.push(id);
                }
            }
        }
        let mut out = Vec::new();
        for (name, heads) in starts {
            if dialog.is_some_and(|d| d != name) {
                continue;
            }
            let mut seen = HashSet::new();
            let mut chain = Vec::new();
            for head in heads {
                let mut next = Some(head);
                while let Some(id) = next.filter(|id| seen.insert(*id)) {
                    let c = match self.checkpoint(repo, id) {
                        Ok(c) => c,
                        Err(e) if !chain.is_empty() => {
                            tracing::warn!(dialog = %name, error = %e, "timeline ends at an unreadable checkpoint");
                            break;
                        }
                        Err(e) => return Err(e),
                    };
                    next = match shallow.contains(&id) {
                        true => None,
                        false => c.parent.map(|p| p.object_id()),
                    };
                    chain.push(c);
                }
            }
            chain.sort_by_key(|c| c.seq);
            out.push((name, chain));
        }
        Ok(out)
    }
}
