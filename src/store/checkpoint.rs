//! Checkpoints as git commits: what one is, and the refs they live under. Recording and reading
//! them is [`super::record`]'s.
//!
//! The commit's tree is the project tree. Its message is readable in `git log`: a subject line
//! (`[dialog] #seq kind: first line of the label`), a blank line, then the whole label. The
//! structured fields live in one extra commit header, `ckpt`, holding single-line JSON.

use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::error::StoreError;
pub use super::span::{Span, TurnPoint};
use crate::model::{CheckpointId, Kind, SkippedFile};

/// Commit header that carries a checkpoint's structured metadata.
/// The dialog used when a client names none.
pub const DEFAULT_DIALOG: &str = "default";
pub(crate) const HEADER: &str = "ckpt";
pub(crate) const DIALOG_REFS: &str = "refs/ckpt/dialogs/";
pub(crate) const META_REFS: &str = "refs/ckpt/meta/";
pub(crate) const APPROVED_REFS: &str = "refs/ckpt/approved/";
pub(crate) const TAG_REFS: &str = "refs/ckpt/tags/";
pub(crate) const NOTE_REFS: &str = "refs/ckpt/notes/";
/// Runs of checkpoints kept by retention that their dialog's ref no longer reaches.
pub(crate) const KEPT_REFS: &str = "refs/ckpt/kept/";
/// Largest client metadata document accepted with a checkpoint.
pub const MAX_CLIENT_META_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("no checkpoint matches `{0}`")]
    Unknown(String),
    #[error("`{prefix}` is ambiguous: it matches {} checkpoints: {}; give more digits", candidates.len(), candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("invalid checkpoint name `{0}`: expected an id (4 to 40 hex digits), a tag, `@` or `latest`, `@~N`, or `#SEQ`")]
    BadId(String),
    #[error("invalid dialog name `{0}`: use 1-100 characters from A-Z a-z 0-9 . _ -, not starting with . or -")]
    BadDialog(String),
    #[error("invalid tag name `{0}`: use 1-100 characters from A-Z a-z 0-9 . _ -, not starting with . or -")]
    BadTag(String),
    #[error("tag `{0}` exists already")]
    TagExists(String),
    #[error("no dialog named `{0}`")]
    UnknownDialog(String),
    #[error("client metadata is {size} bytes; the limit is {MAX_CLIENT_META_BYTES}")]
    MetaTooLarge { size: usize },
    #[error("commit {id} is not a ckpt checkpoint: {message}")]
    NotACheckpoint { id: ObjectId, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The structured part of a checkpoint, stored in the `ckpt` commit header.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) v: u32,
    pub(crate) dialog: String,
    pub(crate) seq: u64,
    #[serde(default = "first_session")]
    pub(crate) session: u64,
    pub(crate) kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) message_id: Option<String>,
    pub(crate) created_at: String,
    pub(crate) files: u64,
    pub(crate) added: u64,
    pub(crate) modified: u64,
    pub(crate) deleted: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) skipped: Vec<SkippedFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) meta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) restore: Option<RestoreLink>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) imported: Option<Imported>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) point: Option<TurnPoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) span: Option<Span>,
}

fn first_session() -> u64 {
    1
}

/// What a `restore` checkpoint links: the checkpoint restored to, and the `pre-restore`
/// checkpoint that undoes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RestoreLink {
    pub restored_to: CheckpointId,
    pub undo: CheckpointId,
}

/// Where an `imported` checkpoint came from: a commit of a bundle, either another store's
/// checkpoint (its kind and dialog are kept here) or a plain git commit (kind `commit`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Imported {
    /// The commit in the bundle.
    pub from: String,
    /// The original checkpoint's kind, or `commit`.
    pub kind: String,
    /// When the original was recorded (committed).
    pub created_at: String,
    /// The original checkpoint's dialog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<String>,
    /// The bundle's name for the commit (e.g. `refs/heads/main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_name: Option<String>,
}

/// A checkpoint as read back from the store.
#[derive(Debug, Clone)]
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
    pub tags: Vec<String>,
    /// Text attached with `note` (several notes, one per line).
    pub notes: Option<String>,
    /// For a `restore` checkpoint: what it restored to and how to undo it.
    pub restore: Option<RestoreLink>,
    /// For an `imported` checkpoint: its origin.
    pub imported: Option<Imported>,
    /// For a `step` or `turn-end`: its turn.
    pub point: Option<TurnPoint>,
    /// What changed since the project's previous checkpoint, and who was running.
    pub span: Option<Span>,
    /// Client metadata (JSON), when asked for and present.
    pub meta: Option<serde_json::Value>,
    pub(crate) meta_blob: Option<ObjectId>,
    /// Where another person's checkpoint came from (a remote's, see [`super::share`]); None for
    /// this store's own.
    pub origin: Option<crate::model::Origin>,
}

/// What a client asks to record.
#[derive(Debug, Clone)]
pub struct NewCheckpoint {
    pub dialog: String,
    pub kind: Kind,
    pub label: String,
    pub message_id: Option<String>,
    pub meta: Option<serde_json::Value>,
    pub restore: Option<RestoreLink>,
    pub imported: Option<Imported>,
    pub point: Option<TurnPoint>,
    pub span: Option<Span>,
    /// What the caller already knows of how two trees differ (a restore's plan): used for
    /// the counts when they are the parent's tree and this one.
    pub known_changes: Option<KnownChanges>,
    /// How many files a tree holds, when the caller knows (the index that wrote it): a
    /// checkpoint without a parent counts its files from it instead of reading every tree.
    pub known_files: Option<(ObjectId, u64)>,
}

/// How many files tree `new` adds, modifies and deletes against tree `old`, as
/// [`count_tree_changes`] would count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownChanges {
    pub old: ObjectId,
    pub new: ObjectId,
    pub added: u64,
    pub modified: u64,
    pub deleted: u64,
}

impl NewCheckpoint {
    /// A checkpoint of `kind` on `dialog` with `label`, no message id, metadata or restore link.
    pub fn new(dialog: impl Into<String>, kind: Kind, label: impl Into<String>) -> NewCheckpoint {
        NewCheckpoint {
            dialog: dialog.into(),
            kind,
            label: label.into(),
            message_id: None,
            meta: None,
            restore: None,
            imported: None,
            point: None,
            span: None,
            known_changes: None,
            known_files: None,
        }
    }
}

pub fn validate_dialog(name: &str) -> Result<(), CheckpointError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(CheckpointError::BadDialog(name.to_string()))
    }
}

/// RFC 3339 in UTC with exactly three fractional digits, so that the text sorts by time.
pub(crate) fn rfc3339_millis(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

pub(crate) fn parse_id(hex: &str) -> Result<ObjectId, StoreError> {
    ObjectId::from_hex(hex.as_bytes()).map_err(|e| StoreError::git("parsing an object id", e))
}
