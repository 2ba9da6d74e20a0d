//! Parameters of each method. Unknown fields are refused, so a misspelt parameter is an
//! `invalid_params` error instead of being silently ignored.
//!
//! `project` is any absolute path inside a watched project (clients send their working
//! directory). `paths` are absolute, or relative to the project root. Every path is a JSON
//! string, or `{"path_bytes": [..]}` for a name that is not UTF-8 ([`wire_path`]).
//!
//! [`wire_path`]: super::wire_path

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloParams {
    #[serde(default)]
    pub client: Option<String>,
    #[serde(default)]
    pub protocol: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathParams {
    #[serde(with = "super::wire_path")]
    pub path: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchParams {
    #[serde(with = "super::wire_path")]
    pub path: PathBuf,
    /// Watch `/`, a folder of the system, the home folder itself, or a folder holding it
    /// (refused otherwise: one slip would copy SSH keys and every other project into the store).
    #[serde(default)]
    pub force: bool,
    /// Watch a folder that holds a watched project or lies inside one (refused otherwise):
    /// each keeps its own history, and a path belongs to the innermost project holding it.
    #[serde(default)]
    pub nest: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgetParams {
    /// The project (or a folder inside it), or the root of a project no longer watched.
    #[serde(with = "super::wire_path")]
    pub path: PathBuf,
    /// Only say what would be deleted.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub dialog: Option<String>,
    #[serde(default)]
    pub message_id: Option<String>,
    /// `message` (default) or `manual`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Arbitrary JSON kept with the checkpoint (at most 16 MiB encoded).
    #[serde(default)]
    pub meta: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    #[serde(default)]
    pub dialog: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
    /// Include approved and abandoned sessions (by default only each dialog's active one).
    #[serde(default)]
    pub all_sessions: bool,
    /// Only checkpoints whose label, notes, tags or message id contain this (any case).
    #[serde(default)]
    pub grep: Option<String>,
    /// Others' checkpoints fetched from this remote instead of this store's own.
    #[serde(default)]
    pub remote: Option<String>,
    /// This store's own checkpoints and everyone's fetched ones.
    #[serde(default)]
    pub all: bool,
    /// Each prompt of this store's with what its turn changed (`turn`), as `log` counts it.
    #[serde(default)]
    pub turns: bool,
    /// Also the turns' steps and ends (kinds `step` and `turn-end`), hidden otherwise.
    #[serde(default)]
    pub steps: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// Only this dialog's prompts (default: every dialog's).
    #[serde(default)]
    pub dialog: Option<String>,
    /// At most this many, the newest.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Include each prompt's client metadata (the hook's input: where its conversation is).
    #[serde(default)]
    pub meta: bool,
    /// Only the prompts whose turns changed these paths (files or folders), counted on them.
    #[serde(default, with = "super::wire_path::list")]
    pub paths: Vec<PathBuf>,
    /// Each turn's steps and end too.
    #[serde(default)]
    pub steps: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlameParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// The file (absolute, or relative to the project's root).
    #[serde(with = "super::wire_path")]
    pub path: PathBuf,
    /// The dialog whose checkpoints are walked (default: the newest checkpoint's).
    #[serde(default)]
    pub dialog: Option<String>,
    /// Walk back from this checkpoint (any name, also one fetched from a remote) instead of
    /// the dialog's newest.
    #[serde(default)]
    pub at: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportPatchParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub id: String,
    /// The older side; the checkpoint's parent when absent.
    #[serde(default)]
    pub against: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportBundleParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub ids: Vec<String>,
    /// Where to write the bundle (absolute).
    #[serde(with = "super::wire_path")]
    pub path: PathBuf,
    /// Replace an existing file (by default an existing path is refused).
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportBundleParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// The bundle to read (absolute).
    #[serde(with = "super::wire_path")]
    pub path: PathBuf,
    /// The dialog to add the checkpoints to (created if new); default `imported`, or
    /// `imported-2`, ... when that exists.
    #[serde(default)]
    pub dialog: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub id: String,
    pub name: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoteParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub id: String,
    pub text: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub id: String,
    #[serde(default)]
    pub dialog: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub id: String,
    /// Include the full file list of the checkpoint.
    #[serde(default)]
    pub files: bool,
    /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
    #[serde(default)]
    pub dialog: Option<String>,
    /// At most this many entries of `changes` and of `file_list` (default 10,000):
    /// `changes_total`, `file_list_total` and `truncated` say what was left out.
    #[serde(default)]
    pub max_entries: Option<usize>,
    /// Line counts of each change (default true).
    #[serde(default = "yes")]
    pub counts: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub from: String,
    /// Another checkpoint; the working tree when absent.
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default, with = "super::wire_path::list")]
    pub paths: Vec<PathBuf>,
    /// Include the unified diff text (default true).
    #[serde(default = "yes")]
    pub patch: bool,
    /// Include per-file line counts (default true).
    #[serde(default = "yes")]
    pub counts: bool,
    /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
    #[serde(default)]
    pub dialog: Option<String>,
    /// At most this many entries of `files` (all when absent): `files_total` then says how
    /// many differ.
    #[serde(default)]
    pub max_files: Option<usize>,
    /// The patch's text from this byte on (default 0) ...
    #[serde(default)]
    pub offset: u64,
    /// ... and at most this many bytes of it (all when absent): `next_offset` then says where
    /// the next part starts. The daemon stops once the page is full.
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub id: String,
    #[serde(default, with = "super::wire_path::list")]
    pub paths: Vec<PathBuf>,
    #[serde(default)]
    pub dry_run: bool,
    /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
    #[serde(default)]
    pub dialog: Option<String>,
    /// Who asked for the restore, when it was not the user (`agent`: an agent through `ckpt
    /// mcp`); the restore checkpoint's label says so.
    #[serde(default)]
    pub by: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileAtParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub id: String,
    /// The file (absolute, or relative to the project's root).
    #[serde(with = "super::wire_path")]
    pub path: PathBuf,
    #[serde(default)]
    pub dialog: Option<String>,
    /// The first byte to return.
    #[serde(default)]
    pub offset: u64,
    /// At most this many bytes (default and most: 1 MiB).
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DialogNewParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// The dialog's name; the daemon makes one up when absent.
    #[serde(default)]
    pub dialog: Option<String>,
    /// A title, kept as the label of the dialog's initial checkpoint.
    #[serde(default)]
    pub title: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DialogParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub dialog: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    #[serde(default)]
    pub dialog: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionApproveParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    #[serde(default)]
    pub dialog: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionResetParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    #[serde(default)]
    pub dialog: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditBeginParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    #[serde(with = "super::wire_path::list")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub token: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndoParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    #[serde(default)]
    pub dialog: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsckParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// Salvage damaged packs and set the damage aside (in `<store>/damaged/`).
    #[serde(default)]
    pub repair: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// Only this dialog (all dialogs when absent).
    #[serde(default)]
    pub dialog: Option<String>,
    /// Keep this many checkpoints in each active session instead of the configured number.
    #[serde(default)]
    pub keep: Option<usize>,
    /// Also run `gc` afterwards.
    #[serde(default)]
    pub gc: bool,
    /// Only report what would be pruned.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DialogKeepParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub dialog: String,
    /// Checkpoints kept in the dialog's active session; null goes back to the configured number.
    #[serde(default)]
    pub keep: Option<usize>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    /// Include a unified diff in `file_changed` events of small text files.
    #[serde(default)]
    pub diffs: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

fn yes() -> bool {
    true
}
