//! What each method returns. The daemon encodes these and the client decodes them, so a field
//! renamed on one side and not the other does not compile. Reports the store produces whole
//! (diffs, prune, gc, fsck) are its own types.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::checkpoints::{ChangeStatus, Checkpoint, DiffResult, FileChange};
pub use super::upkeep::{FsckReport, GcReport, NotImported, PruneReport, PrunedCheckpoint};
use crate::model::{path_bytes, CheckpointId, SkippedFile, WatchMode};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub daemon: String,
    pub pid: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub daemon: String,
    pub protocol: u32,
    pub pid: u32,
    pub uptime_seconds: u64,
    pub socket: PathBuf,
    pub data_dir: PathBuf,
    pub projects: Vec<ProjectStatus>,
}

/// A registered project, as `projects` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProjectInfo {
    pub root: PathBuf,
    pub store: PathBuf,
    /// Whether the project folder is there now.
    pub available: bool,
}

/// A registered project, as `status` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProjectStatus {
    #[serde(flatten)]
    pub project: ProjectInfo,
    /// Size of the store's objects.
    pub store_bytes: u64,
    /// Whether an operation holds the project right now.
    pub busy: bool,
    pub mode: WatchMode,
    /// How far a long refresh has come.
    pub progress: Option<Progress>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Progress {
    pub phase: String,
    pub done: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Watched {
    pub root: PathBuf,
    pub store: PathBuf,
    /// Dialogs the store holds already (a project watched again keeps its history).
    pub dialogs: usize,
    /// Watched projects it holds or lies inside (watched with `nest`); each keeps its history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nested: Vec<PathBuf>,
}

/// A prompt (a `message` checkpoint, taken as it arrived) and what the agent's turn on it
/// changed: from it to the next prompt of its dialog, or to the files as they are now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Turn {
    #[serde(flatten)]
    pub prompt: Checkpoint,
    pub turn: TurnChanges,
    /// With `steps`: the turn's steps and end, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Checkpoint>,
}

pub use super::checkpoints::{TurnChanges, TurnField};

/// `file_at`: a part of a file as a checkpoint holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileContent {
    pub path: String,
    pub checkpoint: CheckpointId,
    /// The whole file's size.
    pub size: u64,
    /// Whether it holds bytes that are not text (the content is then lossy).
    pub binary: bool,
    pub offset: u64,
    /// The bytes from `offset` (UTF-8, invalid sequences replaced).
    pub content: String,
    /// Whether the file goes on after what is returned.
    pub truncated: bool,
}

/// `blame`: each line of a file and the prompt whose turn wrote it. Each prompt is listed once
/// (a prompt may be long, and name thousands of lines); a line names its prompt by its index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Blamed {
    /// The file, as the project's tree names it.
    pub path: String,
    /// The checkpoint the walk started from (the dialog's newest).
    pub head: CheckpointId,
    pub dialog: String,
    pub prompts: Vec<BlamePrompt>,
    pub lines: Vec<BlameLine>,
}

/// A prompt whose turn wrote lines: its checkpoint, text, dialog and time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlamePrompt {
    pub checkpoint: CheckpointId,
    pub label: String,
    pub dialog: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlameLine {
    /// From 1.
    pub line: u64,
    pub text: String,
    pub origin: LineOrigin,
    /// The prompt whose turn wrote the line: an index into `prompts`.
    pub prompt: Option<usize>,
    /// The first checkpoint holding the line (none: not in any checkpoint yet).
    pub first_seen: Option<CheckpointId>,
}

/// Where a line comes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LineOrigin {
    /// A prompt's turn wrote it.
    Prompt,
    /// It was there before the first checkpoint.
    BeforeFirstCheckpoint,
    /// Written after the first checkpoint, before any prompt (by a person, or a tool).
    BeforeFirstPrompt,
    /// Written while no agent's turn was running (by the user, or a tool of theirs), as the
    /// checkpoints' spans tell.
    User,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unwatched {
    pub root: PathBuf,
    pub store: PathBuf,
}

/// `forget`: the project whose history was (or, in a dry run, would be) deleted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Forgotten {
    pub root: PathBuf,
    pub store: PathBuf,
    /// The store's size on disk, deleted with it.
    pub store_bytes: u64,
    /// It was a watched project (no longer).
    pub was_watched: bool,
    pub dry_run: bool,
}

/// `show`: the checkpoint, what changed against its parent, and (when asked) its files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shown {
    #[serde(flatten)]
    pub checkpoint: Checkpoint,
    pub changes: Vec<FileChange>,
    /// How many files it changed against its parent (`changes` may hold fewer).
    #[serde(default)]
    pub changes_total: u64,
    /// Retention pruned its parent: `changes` is empty, the counts are as recorded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parent_pruned: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_list: Option<Vec<TreeFile>>,
    /// How many files the checkpoint holds, when `file_list` was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_list_total: Option<u64>,
    /// Whether a list was cut at `max_entries`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// A prompt's: what its turn changed, path by path (as `log` counts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_changes: Option<super::turns::TurnPaths>,
    /// Who made each change since the checkpoint the project recorded before this one (in any
    /// dialog), where its span says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_by: Vec<super::turns::ChangedBy>,
}

/// A file of a checkpoint's tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TreeFile {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_bytes: Option<Vec<u8>>,
    /// The git mode, six octal digits (`100644`, `100755`, `120000`).
    pub mode: String,
    pub blob: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Diffed {
    #[serde(flatten)]
    pub diff: DiffResult,
    pub from: CheckpointId,
    /// None: against the working tree.
    pub to: Option<CheckpointId>,
}

/// What a restore, an undo or a reset did (or, in a dry run, would do).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restored {
    pub restored_to: CheckpointId,
    /// The `pre-restore` checkpoint that undoes this restore (none for a dry run).
    pub undo_checkpoint: Option<CheckpointId>,
    pub dry_run: bool,
    /// Tree paths written (lossy text when not UTF-8: those are also in `written_bytes`).
    pub written: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written_bytes: Vec<Vec<u8>>,
    pub deleted: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted_bytes: Vec<Vec<u8>>,
    /// Those of `written` that did not exist before (the rest replaced a file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<String>,
    pub skipped: Vec<SkippedFile>,
    /// The checkpoint of the state the restore left (none for a dry run).
    pub restore_checkpoint: Option<CheckpointId>,
    /// The target's client metadata (e.g. the agent's conversation), to roll back with.
    pub meta: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reset {
    #[serde(flatten)]
    pub restored: Restored,
    pub reset_to: CheckpointId,
    /// The session the dialog is in now (none for a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_session: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tagged {
    pub id: CheckpointId,
    pub tag: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Noted {
    pub id: CheckpointId,
    pub notes: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Patch {
    pub id: CheckpointId,
    pub against: Option<CheckpointId>,
    pub patch: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundleWritten {
    pub path: PathBuf,
    pub checkpoints: Vec<CheckpointId>,
    pub objects: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundleImported {
    pub path: PathBuf,
    /// The dialog the checkpoints were added to (none when nothing was imported).
    pub dialog: Option<String>,
    pub objects: u32,
    pub imported: Vec<Checkpoint>,
    pub not_imported: Vec<NotImported>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DialogStarted {
    pub dialog: String,
    pub initial: Checkpoint,
    /// For `dialog_fork`: the checkpoint the dialog starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<CheckpointId>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DialogInfo {
    pub dialog: String,
    pub checkpoints: usize,
    pub last_activity: String,
    pub head: CheckpointId,
    pub title: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DialogRemoved {
    pub dialog: String,
    pub head: CheckpointId,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DialogKept {
    pub dialog: String,
    pub keep: usize,
    pub auto_keep: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EditBegun {
    pub token: String,
    pub expires_in_seconds: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EditCommitted {
    pub token: String,
    pub committed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EditAborted {
    pub token: String,
    pub restored: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored_bytes: Vec<Vec<u8>>,
    pub skipped: Vec<SkippedFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionStatus {
    pub dialog: String,
    pub active_session: u64,
    /// Whether the files differ from the approved state.
    pub has_unapproved: bool,
    pub approved_commit: CheckpointId,
    pub last_approved_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionApproved {
    pub approved_commit: CheckpointId,
    pub session: u64,
    pub new_session: u64,
    pub commits_approved: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pruned {
    #[serde(flatten)]
    pub report: PruneReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc: Option<GcReport>,
    /// What holding the store to `max_store_bytes` did, when it was over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Budget {
    pub max_store_bytes: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub pruned: Vec<PrunedCheckpoint>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verified {
    pub index_tree: String,
    pub scan_tree: String,
    pub equal: bool,
    pub mode: WatchMode,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rescan {
    pub rescan: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reloaded {
    /// Settings that changed but apply only when ckptd starts again.
    pub restart_needed: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stopping {
    pub stopping: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subscribed {
    pub subscribed: PathBuf,
    pub diffs: bool,
}

impl AsRef<Restored> for Restored {
    fn as_ref(&self) -> &Restored {
        self
    }
}

impl AsRef<Restored> for Reset {
    fn as_ref(&self) -> &Restored {
        &self.restored
    }
}

/// Tree paths as text (lossy where not UTF-8).
pub fn lossy(paths: &[gix::bstr::BString]) -> Vec<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

/// The tree paths that are not UTF-8, exactly (the `*_bytes` lists beside the text ones).
pub fn non_utf8(paths: &[gix::bstr::BString]) -> Vec<Vec<u8>> {
    paths.iter().filter_map(|p| path_bytes(p)).collect()
}
