//! A checkpoint as the wire carries it, and what looking at checkpoints returns (file changes,
//! diffs). The protocol's own types, converted from the store's at the edge: the store can
//! change its types without changing what clients read.

use serde::{Deserialize, Serialize};

use crate::model::{CheckpointId, Kind, SkippedFile};

/// A checkpoint (see `docs/reference.md`, "Wire protocol").
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub id: CheckpointId,
    pub parent: Option<CheckpointId>,
    pub tree: String,
    pub dialog: String,
    pub seq: u64,
    /// The session of the dialog this checkpoint belongs to (1, 2, ...).
    pub session: u64,
    pub kind: Kind,
    pub label: String,
    pub message_id: Option<String>,
    pub created_at: String,
    pub files: u64,
    pub added: u64,
    pub modified: u64,
    pub deleted: u64,
    pub skipped: Vec<SkippedFile>,
    /// Names given with `tag`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Text attached with `note` (several notes, one per line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// For a `restore` checkpoint: what it restored to and how to undo it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreLink>,
    /// For an `imported` checkpoint: its origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<Imported>,
    /// Client metadata (JSON), when asked for and present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// Another person's checkpoint: the remote it was fetched from and who pushed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::model::Origin>,
    /// For a prompt, when asked (`list` with `turns`): what its turn changed; for a `step` or a
    /// `turn-end`: the prompt's checkpoint whose turn it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnField>,
    /// For a `step`: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// For a `step`: its place in its turn (1, 2, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// For a `step`: the files its tool named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub touched: Vec<String>,
    /// For a `step`: the agent's id of its tool call (where a rewind to it forks the
    /// conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
}

/// A checkpoint's `turn`: what a prompt's turn changed, or the turn a step belongs to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TurnField {
    Changes(TurnChanges),
    Of(CheckpointId),
}

impl Checkpoint {
    /// What a prompt's turn changed, when it was asked for.
    pub fn turn_changes(&self) -> Option<&TurnChanges> {
        match &self.turn {
            Some(TurnField::Changes(t)) => Some(t),
            _ => None,
        }
    }

    /// The turn a step or turn end belongs to.
    pub fn turn_of(&self) -> Option<CheckpointId> {
        match &self.turn {
            Some(TurnField::Of(id)) => Some(*id),
            _ => None,
        }
    }
}

/// What a prompt's turn changed: from it to the next prompt of its dialog, or to the files as
/// they are now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnChanges {
    pub added: u64,
    pub modified: u64,
    pub deleted: u64,
    /// The next prompt's checkpoint; none for the newest prompt (its turn is compared with
    /// the files now: `ckpt diff @` shows it).
    pub until: Option<CheckpointId>,
}

/// What a `restore` checkpoint links: the checkpoint restored to, and the `pre-restore`
/// checkpoint that undoes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RestoreLink {
    pub restored_to: CheckpointId,
    pub undo: CheckpointId,
}

/// Where an `imported` checkpoint came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Imported {
    /// The commit in the bundle.
    pub from: String,
    /// The original checkpoint's kind, or `commit`.
    pub kind: String,
    /// When the original was recorded (committed).
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_name: Option<String>,
}

/// How a path changed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChangeStatus {
    Added,
    Modified,
    Deleted,
    /// Only the executable bit changed.
    ModeChanged,
    /// File became symlink or the other way round.
    TypeChanged,
}

/// One changed path, with its line counts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileChange {
    /// The tree path (lossy when it is not UTF-8; see `path_bytes`).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_bytes: Option<Vec<u8>>,
    pub status: ChangeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_mode: Option<String>,
    pub binary: bool,
    pub lines_added: u64,
    pub lines_removed: u64,
}

/// The changed paths, and the unified diff when asked for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DiffResult {
    pub files: Vec<FileChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// How many files differ in all, when `files` was cut at `max_files`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_total: Option<u64>,
    /// Where the patch's next part starts, when it was cut at `max_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// Whether anything was left out (the file list or the patch).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}
