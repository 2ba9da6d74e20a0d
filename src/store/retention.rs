//! Retention: which checkpoints a dialog keeps, and cutting the rest out of its timeline
//! without changing the id of any checkpoint that stays.
//!
//! A dialog's timeline is a chain of commits, so dropping a checkpoint from the middle cannot
//! rewrite the commits after it (their ids are what clients hold). Instead the cut is recorded
//! the way git records a shallow history: the oldest kept checkpoint of each run of kept
//! checkpoints is listed in the store's `shallow` file (git, `git fsck` and `git gc` then treat
//! it as having no parent), and each run that the dialog's ref no longer reaches gets a ref of
//! its own, `refs/ckpt/kept/<dialog>/<id>`. The pruned checkpoints are unreachable from then on
//! and [`Store::gc`](super::Store::gc) (or `git gc`) removes their objects.

use std::collections::{BTreeMap, HashSet};

use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::checkpoint::{parse_id, Checkpoint, CheckpointError, KEPT_REFS};
use super::txn::files::write_atomically;
use super::{Store, StoreError};
use crate::model::{CheckpointId, Kind, Retention};

/// What a prune did (or, with `dry_run`, would do).
#[derive(Debug, Default, Clone)]
pub struct PruneReport {
    /// Checkpoints cut from their timelines (their objects go at the next gc).
    pub pruned: Vec<CheckpointId>,
    /// The same checkpoints, described: what a person needs to see what went.
    pub pruned_checkpoints: Vec<PrunedCheckpoint>,
    /// Checkpoints that remain in the pruned dialogs.
    pub kept: usize,
    pub dry_run: bool,
}

#[derive(Debug, Clone)]
pub struct PrunedCheckpoint {
    pub id: CheckpointId,
    pub dialog: String,
    pub seq: u64,
    pub kind: Kind,
    pub created_at: String,
    /// The first line of the label.
    pub label: String,
}

/// Per-dialog retention chosen with `dialog keep`, stored beside the store's objects.
#[derive(Debug, Default, Serialize, Deserialize)]
struct DialogSettings {
    #[serde(default)]
    keep: BTreeMap<String, usize>,
}

const SETTINGS_FILE: &str = "ckpt-dialogs.json";

impl Store {
    /// The commits whose parents have been cut away (git's `shallow` file).
    pub fn shallow(&self) -> Result<HashSet<ObjectId>, StoreError> {
        let path = self.dir().join("shallow");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| parse_id(l.trim()))
            .collect()
    }

    /// Replaces the `shallow` file (atomically, durably); an empty set removes it.
    pub(crate) fn write_shallow(&self, set: &HashSet<ObjectId>) -> Result<(), StoreError> {
        let path = self.dir().join("shallow");
        if set.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(StoreError::Io { path, source: e })
                }
                _ => Ok(()),
            };
        }
        let mut ids: Vec<String> = set.iter().map(ToString::to_string).collect();
        ids.sort();
        let mut text = ids.join("\n");
        text.push('\n');
        write_atomically(&path, text.as_bytes())
    }

    /// The retention `dialog` was given with `dialog keep`, if any.
    pub fn dialog_keep(&self, dialog: &str) -> Option<usize> {
        self.dialog_settings().keep.get(dialog).copied()
    }

    /// Sets (or with None, clears) how many checkpoints `dialog` keeps in its active session.
    pub fn set_dialog_keep(&self, dialog: &str, keep: Option<usize>) -> Result<(), StoreError> {
        let mut settings = self.dialog_settings();
        match keep {
            Some(n) => settings.keep.insert(dialog.to_string(), n),
            None => settings.keep.remove(dialog),
        };
        let text = serde_json::to_vec_pretty(&settings)
            .map_err(|e| StoreError::git("encoding dialog settings", e))?;
        write_atomically(&self.dir().join(SETTINGS_FILE), &text)
    }

    fn dialog_settings(&self) -> DialogSettings {
        let path = self.dir().join(SETTINGS_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable dialog settings");
                DialogSettings::default()
            }),
            Err(_) => DialogSettings::default(),
        }
    }

    /// Cuts the checkpoints that `retention` (per dialog) does not keep out of the timelines
    /// of `dialog` (all dialogs when None). Kept always: each dialog's newest and oldest
    /// checkpoint, approved states, tagged or annotated checkpoints, and the newest restore
    /// with the checkpoint that undoes it.
    #[tracing::instrument(skip_all, fields(dialog = ?dialog))]
    // Long by design: what is kept, the runs it forms, then the refs and the cut, in the one
    // order that keeps every kept checkpoint reachable if it stops half way.
    pub fn prune(
        &self,
        repo: &gix::Repository,
        dialog: Option<&str>,
        retention: &dyn Fn(&str) -> Retention,
        dry_run: bool,
    ) -> Result<PruneReport, CheckpointError> {
        let chains = self.chains(repo, dialog)?;
        let mut keep: HashSet<CheckpointId> = HashSet::new();
        for (_, id) in self.refs_under(repo, super::checkpoint::TAG_REFS)? {
            keep.insert(id.into());
        }
        for (id, _) in self.refs_under(repo, super::checkpoint::NOTE_REFS)? {
            if let Ok(id) = id.parse() {
                keep.insert(id);
            }
        }
        for (_, id) in self.refs_under(repo, super::checkpoint::APPROVED_REFS)? {
            keep.insert(id.into());
        }
        for (name, chain) in &chains {
            keep.extend(kept_by_policy(chain, retention(name)));
        }

        let mut shallow = self.shallow()?;
        let mut new_shallow = Vec::new();
        let mut wanted_refs: HashSet<String> = HashSet::new();
        let mut report = PruneReport {
            dry_run,
            ..PruneReport::default()
        };
        for (name, chain) in &chains {
            // Runs of consecutive kept checkpoints, oldest first.
            let mut runs: Vec<Vec<&Checkpoint>> = Vec::new();
            let mut previous: Option<&Checkpoint> = None;
            for c in chain {
                if !keep.contains(&c.id) {
                    report.pruned.push(c.id);
                    report.pruned_checkpoints.push(PrunedCheckpoint {
                        id: c.id,
                        dialog: c.dialog.clone(),
                        seq: c.seq,
                        kind: c.kind,
                        created_at: c.created_at.clone(),
                        label: c.label.lines().next().unwrap_or("").to_string(),
                    });
                    previous = None;
                    continue;
                }
                report.kept += 1;
                let continues = previous.is_some_and(|p| c.parent == Some(p.id))
                    && !shallow.contains(&c.id.object_id());
                match runs.last_mut() {
                    Some(run) if continues => run.push(c),
                    _ => runs.push(vec![c]),
                }
                previous = Some(c);
            }
            for (i, run) in runs.iter().enumerate() {
                let oldest = run[0];
                if oldest.parent.is_some() {
                    new_shallow.push(oldest.id.object_id());
                }
                if i + 1 < runs.len() {
                    let newest = run[run.len() - 1];
                    wanted_refs.insert(format!("{name}/{}", newest.id));
                }
            }
        }
        if report.pruned.is_empty() || dry_run {
            return Ok(report);
        }

        // Refs for the runs first, then the cut: a crash in between leaves extra refs (harmless,
        // the next prune drops them), never an unreachable run of kept checkpoints.
        let existing: HashSet<String> = self
            .refs_under(repo, KEPT_REFS)?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let touched: HashSet<&str> = chains.iter().map(|(n, _)| n.as_str()).collect();
        for name in wanted_refs.difference(&existing) {
            let id = name.rsplit('/').next().unwrap_or_default();
            let full = format!("{KEPT_REFS}{name}");
            let mut txn = self.begin();
            txn.update(&full, None, parse_id(id)?, "ckpt: kept by retention")?;
            txn.commit("updating")?;
        }
        shallow.extend(new_shallow);
        self.write_shallow(&shallow)?;
        for name in existing.difference(&wanted_refs) {
            let Some((dialog, id)) = name.rsplit_once('/') else {
                continue;
            };
            if touched.contains(dialog) {
                let mut txn = self.begin();
                txn.delete(&format!("{KEPT_REFS}{name}"), parse_id(id)?)?;
                txn.commit("deleting")?;
            }
        }
        tracing::info!(pruned = report.pruned.len(), kept = report.kept, "pruned");
        Ok(report)
    }
}

/// The ids `retention` keeps in one dialog's chain (oldest first).
fn kept_by_policy(chain: &[Checkpoint], retention: Retention) -> HashSet<CheckpointId> {
    let mut keep = HashSet::new();
    let (Some(oldest), Some(newest)) = (chain.first(), chain.last()) else {
        return keep;
    };
    keep.insert(oldest.id);
    keep.insert(newest.id);
    // The newest `keep` of the dialog whatever their session: approving a session must not
    // make its history disappear at the next prune.
    let mut in_session = 0;
    let mut autos = 0;
    let mut newest_restore = None;
    for c in chain.iter().rev() {
        if c.kind == Kind::Approved {
            keep.insert(c.id);
        }
        if c.kind.in_turn() {
            // A step or a turn's end goes with its turn (below), never counts against `keep`.
        } else if c.kind == Kind::Auto {
            autos += 1;
            if autos <= retention.auto_keep {
                keep.insert(c.id);
            }
        } else {
            in_session += 1;
            if in_session <= retention.keep {
                keep.insert(c.id);
            }
        }
        if newest_restore.is_none() {
            if let Some(link) = &c.restore {
                newest_restore = Some((c.id, link.undo));
            }
        }
    }
    if let Some((restore, undo)) = newest_restore {
        keep.insert(restore);
        keep.insert(undo);
    }
    // The points of a kept turn stay with it; those of a pruned one go with it.
    let points: Vec<CheckpointId> = chain
        .iter()
        .filter(|c| c.point.as_ref().is_some_and(|p| keep.contains(&p.turn)))
        .map(|c| c.id)
        .collect();
    keep.extend(points);
    keep
}
