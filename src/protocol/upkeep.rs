//! What keeping a store in shape returns, as the wire carries it: prune, gc and fsck reports,
//! and the commits an import left out. The protocol's own types, converted from the store's.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::{CheckpointId, Kind};

/// What a prune did (or, with `dry_run`, would do).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct PruneReport {
    /// Checkpoints cut from their timelines (their objects go at the next gc).
    pub pruned: Vec<CheckpointId>,
    /// The same checkpoints, described.
    pub pruned_checkpoints: Vec<PrunedCheckpoint>,
    /// Checkpoints that remain in the pruned dialogs.
    pub kept: usize,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrunedCheckpoint {
    pub id: CheckpointId,
    pub dialog: String,
    pub seq: u64,
    pub kind: Kind,
    pub created_at: String,
    /// The first line of the label.
    pub label: String,
}

/// What a gc did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GcReport {
    /// Objects kept (all now in one pack).
    pub objects: usize,
    /// Loose object files and packs removed.
    pub loose_removed: usize,
    pub packs_removed: usize,
    /// Size of `objects/` before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// What `fsck` found (and, with `repair`, did).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FsckReport {
    /// Objects read (every object some ref reaches).
    pub objects: usize,
    /// Objects a ref reaches that cannot be read (first 100).
    pub unreadable: Vec<String>,
    pub unreadable_count: usize,
    /// Packs whose file does not match its index.
    pub damaged_packs: Vec<String>,
    /// Checkpoints that cannot be restored whole (first 100).
    pub affected: Vec<Affected>,
    /// Damage found in the store's journal, in words.
    #[serde(default)]
    pub journal_damage: Vec<String>,
    pub affected_count: usize,
    /// With `repair`: what was salvaged and set aside, and where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Affected {
    pub id: String,
    /// The ref through which it was reached.
    pub ref_name: String,
    /// How many of its objects cannot be read.
    pub missing: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Repair {
    pub salvaged: usize,
    pub packs_set_aside: Vec<String>,
    pub refs_set_aside: Vec<String>,
    pub damaged_dir: PathBuf,
}

/// A commit of an imported bundle that did not become a checkpoint, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotImported {
    pub from: String,
    pub ref_name: String,
    pub reason: String,
}
