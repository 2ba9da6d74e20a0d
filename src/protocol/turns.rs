//! The methods of exact turns: `step` (an agent's after-tool or turn-end hook) and `revert`
//! (one turn's changes taken back, nothing else).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::checkpoints::Checkpoint;
use crate::model::{CheckpointId, SkippedFile};

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// The dialog whose turn it is (the agent's session).
    pub dialog: String,
    /// The turn ended (a turn-end hook) rather than one tool call.
    #[serde(default)]
    pub end: bool,
    /// The tool's name, as the agent calls it.
    #[serde(default)]
    pub tool: Option<String>,
    /// The paths the tool named (absolute, or relative to the project's root).
    #[serde(default, with = "super::wire_path::list")]
    pub paths: Vec<PathBuf>,
    /// The tool can have changed only `paths` (an edit or a read tool; a shell cannot say).
    #[serde(default)]
    pub declared: bool,
    /// The agent's id of the tool call.
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// Record the step even when no file changed: a point the user may come back to (an
    /// answered question, an approved plan).
    #[serde(default)]
    pub point: bool,
}

/// What a `step` recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stepped {
    /// The step's (or turn end's) checkpoint; none when nothing was recorded (no file changed,
    /// or no turn of the dialog is running).
    pub recorded: Option<Checkpoint>,
    /// The turn (its prompt's checkpoint) the event belongs to; none when the dialog has no
    /// running turn.
    pub turn: Option<CheckpointId>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevertParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// A prompt's checkpoint (its whole turn) or a step (what its turn did after it).
    pub id: String,
    /// Only these paths (files or folders).
    #[serde(default, with = "super::wire_path::list")]
    pub paths: Vec<PathBuf>,
    #[serde(default)]
    pub dry_run: bool,
    /// Also take back changes that the turn may share with another turn (ambiguous).
    #[serde(default)]
    pub force: bool,
    /// The dialog in which `@`, `@~N` and `#SEQ` count.
    #[serde(default)]
    pub dialog: Option<String>,
    /// Also every later turn of the same dialog (what `ckpt rewind` takes back in a folder
    /// others work in too), and say what a whole-tree rewind would have changed besides.
    #[serde(default)]
    pub later: bool,
}

/// A path a revert left as it is, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Refused {
    pub path: String,
    pub reason: String,
}

/// What a `revert` did (or, dry, would do).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reverted {
    /// The turn taken back (its prompt's checkpoint).
    pub turn: CheckpointId,
    /// Taken back from after this step only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_step: Option<CheckpointId>,
    /// With `later`: every turn taken back, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<CheckpointId>,
    pub dry_run: bool,
    /// Paths put back as they were before the turn (or before its changes after the step).
    pub reverted: Vec<String>,
    /// Paths (or parts of them) left alone.
    pub refused: Vec<Refused>,
    /// With `later`: the other paths a whole-tree rewind would have changed, and who changed
    /// them since (other sessions, the user, a restore); left as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_alone: Vec<Refused>,
    /// Files a restore could not write (see `restore`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedFile>,
    /// The `pre-restore` checkpoint that undoes the revert (`ckpt undo`); none for a dry run
    /// or when nothing was to be taken back.
    pub undo_checkpoint: Option<CheckpointId>,
    /// The checkpoint of the state the revert left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_checkpoint: Option<CheckpointId>,
}

/// Who made one change: a turn, the user (no turn was running, or a restore they asked for),
/// or, when only the clock could tell, one of several turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    Turn,
    User,
    Ambiguous,
}

/// One change of a checkpoint's span (what changed since the checkpoint the project recorded
/// before it), and who made it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangedBy {
    pub path: String,
    /// `A`, `M` or `D`.
    pub change: String,
    pub by: By,
    /// The turn (its prompt's checkpoint), or the turns it could be, for `turn`/`ambiguous`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<CheckpointId>,
}

/// A prompt's turn, path by path, exactly: each path as the turn left it, and the paths it may
/// share with another turn running at the same time.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TurnPaths {
    pub files: Vec<TurnPath>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ambiguous: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnPath {
    pub path: String,
    /// `A`, `M` or `D`.
    pub change: String,
}
