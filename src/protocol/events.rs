//! What `subscribe` streams: one `event` notification per [`Event`], its `event` field naming
//! the kind. A client that meets a kind it does not know should skip it (newer daemons may add
//! kinds).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::{CheckpointId, Kind, SkippedFile};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub project: PathBuf,
    /// When it happened (RFC 3339).
    pub time: String,
    #[serde(flatten)]
    pub what: EventKind,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// A file's content differs from what it was last seen (or from the last checkpoint).
    FileChanged {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path_bytes: Option<Vec<u8>>,
        #[serde(rename = "kind")]
        change: FileEvent,
        /// The new blob id (none for a deletion).
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<String>,
        /// A unified diff, for subscribers that asked for diffs (small text files only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    CheckpointCreated {
        id: CheckpointId,
        dialog: String,
        seq: u64,
        session: u64,
        kind: Kind,
        label: String,
        files: u64,
        added: u64,
        modified: u64,
        deleted: u64,
        skipped: usize,
    },
    Restored {
        kind: Kind,
        restored_to: CheckpointId,
        dialog: String,
        undo_checkpoint: CheckpointId,
        restore_checkpoint: Option<CheckpointId>,
        written: usize,
        deleted: usize,
        skipped: Vec<SkippedFile>,
    },
    SessionApproved {
        dialog: String,
        approved_commit: CheckpointId,
        session: u64,
        new_session: u64,
        commits_approved: usize,
    },
    SessionReset {
        dialog: String,
        reset_to: CheckpointId,
        abandoned_session: u64,
        new_session: u64,
        skipped: Vec<SkippedFile>,
    },
    /// A step of a running turn was recorded (an agent's tool call ended).
    Step {
        id: CheckpointId,
        dialog: String,
        turn: CheckpointId,
        step: u64,
        tool: Option<String>,
    },
    /// An agent's turn ended.
    TurnEnded {
        id: CheckpointId,
        dialog: String,
        turn: CheckpointId,
    },
    /// One turn's changes were taken back.
    Reverted {
        turn: CheckpointId,
        undo_checkpoint: CheckpointId,
        revert_checkpoint: Option<CheckpointId>,
        reverted: usize,
        refused: usize,
    },
    /// Changes may have been missed: the next checkpoint verifies every file by stat.
    WatchDegraded { reason: String },
    /// The last event of a stream: the subscriber fell too far behind.
    Error { reason: String },
}

/// How a file changed, in a `file_changed` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileEvent {
    Created,
    Modified,
    Deleted,
}
