//! The params and results of sharing through git remotes: remotes, push and fetch. A push or a
//! fetch is two calls around the `git` the client runs: the daemon makes a scratch repository
//! ready (`push_begin`, `fetch_begin`), the client's `git` sends or receives (with the user's
//! own credentials), and the daemon takes the outcome in (`push_end`, `fetch_end`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::CheckpointId;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteAddParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub name: String,
    pub url: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub name: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushBeginParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub remote: String,
    /// The name the checkpoints are pushed under, `refs/ckpt/<who>/` (a ref component).
    pub who: String,
    /// Also push the client metadata (agents' transcript paths, models, session details).
    #[serde(default)]
    pub with_metadata: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScratchParams {
    #[serde(with = "super::wire_path")]
    pub project: PathBuf,
    pub remote: String,
    /// The scratch repository `push_begin` or `fetch_begin` returned.
    pub git_dir: PathBuf,
    /// Whether the client's `git push` or `git fetch` succeeded; if not, the scratch
    /// repository is only removed.
    #[serde(default)]
    pub succeeded: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteInfo {
    pub name: String,
    pub url: String,
    /// This store's checkpoints the last push did not send (all, before a first push).
    pub unpushed: u64,
    /// Others' checkpoints fetched from it.
    pub fetched: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_as: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteRemoved {
    pub name: String,
    /// Refs of others' checkpoints fetched from it, now gone from this store.
    pub refs_removed: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RedactionInfo {
    pub id: CheckpointId,
    pub dialog: String,
    pub seq: u64,
    pub kinds: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PushReady {
    pub remote: String,
    pub url: String,
    pub git_dir: PathBuf,
    /// Where on the remote: `refs/ckpt/<who>/`.
    pub remote_prefix: String,
    pub who: String,
    /// Refs to push (dialogs and kept runs).
    pub refs: usize,
    pub checkpoints: usize,
    /// Checkpoints sent with another id (a secret replaced, a history cut by retention).
    pub rewritten: usize,
    pub redactions: Vec<RedactionInfo>,
    /// Metadata blobs sent (only with `with_metadata`).
    pub metadata: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PushEnded {
    pub remote: String,
    pub recorded: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FetchReady {
    pub remote: String,
    pub url: String,
    pub git_dir: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fetched {
    pub remote: String,
    /// Objects the store did not have.
    pub objects: u64,
    pub new_checkpoints: usize,
    /// Each person with checkpoints on the remote, and how many dialogs they pushed.
    pub people: BTreeMap<String, usize>,
    pub updated: usize,
    pub removed: usize,
    /// Refs under `refs/ckpt/` on the remote that are no person's checkpoints.
    pub ignored: Vec<String>,
}
