//! The domain's values: checkpoint ids and kinds, why a file was skipped, retention. The store
//! records them, the engine decides with them, and the protocol carries them, so they depend
//! on nothing else in the crate.

use std::fmt;
use std::str::FromStr;

use gix::ObjectId;
use serde::{Deserialize, Serialize};

/// A checkpoint's id: the full hash of its commit. Parsed once, where it enters (a commit read
/// from the store, a reply decoded by a client); a *name* a person types (`@~1`, a tag, a
/// prefix) is resolved by the store into one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CheckpointId(ObjectId);

impl CheckpointId {
    pub fn object_id(&self) -> ObjectId {
        self.0
    }

    /// The first 12 hex digits, as lists and messages show it.
    pub fn short(&self) -> String {
        self.0.to_hex_with_len(12).to_string()
    }
}

impl From<ObjectId> for CheckpointId {
    fn from(id: ObjectId) -> CheckpointId {
        CheckpointId(id)
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for CheckpointId {
    type Err = String;

    /// Only a full 40-digit hex id; names and prefixes go through the store's resolver.
    fn from_str(s: &str) -> Result<CheckpointId, String> {
        if s.len() != 40 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("`{s}` is not a checkpoint id (40 hex digits)"));
        }
        ObjectId::from_hex(s.as_bytes())
            .map(CheckpointId)
            .map_err(|e| format!("`{s}` is not a checkpoint id: {e}"))
    }
}

impl Serialize for CheckpointId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CheckpointId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CheckpointId, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a checkpoint was recorded. The wire and the commit header carry the kebab-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A user message reached the agent (the default of `checkpoint`).
    Message,
    /// Asked for by a person (`ckpt checkpoint`).
    Manual,
    /// Recorded by the daemon after the files settled (`auto_checkpoint`).
    Auto,
    /// Starts a dialog.
    Initial,
    /// The state just before a restore: what `undo` goes back to.
    PreRestore,
    /// The state a restore left.
    Restore,
    /// A session was approved.
    Approved,
    /// A session was abandoned and the files put back to the approved state.
    Reset,
    /// Brought in from a bundle.
    Imported,
    /// An agent's tool call ended inside a turn (its after-tool hook): a point in the turn.
    Step,
    /// An agent's turn ended (its turn-end hook): what the turn left.
    TurnEnd,
    /// The state a `revert` left (one turn's changes taken back).
    Revert,
    /// Written by a newer ckpt: shown, never produced.
    #[serde(other)]
    Unknown,
}

impl Kind {
    /// Every kind a checkpoint is recorded with (all but `Unknown`).
    pub const ALL: [Kind; 12] = [
        Kind::Message,
        Kind::Manual,
        Kind::Auto,
        Kind::Initial,
        Kind::PreRestore,
        Kind::Restore,
        Kind::Approved,
        Kind::Reset,
        Kind::Imported,
        Kind::Step,
        Kind::TurnEnd,
        Kind::Revert,
    ];

    /// The kinds a client may ask `checkpoint` to record.
    pub const REQUESTABLE: [Kind; 2] = [Kind::Message, Kind::Manual];

    /// Whether a checkpoint of this kind ends its session (the next one starts a new session).
    pub fn ends_session(self) -> bool {
        matches!(self, Kind::Approved | Kind::Reset)
    }

    /// Whether a checkpoint of this kind is a point inside or at the end of a turn, listed with
    /// its turn (`--steps`) rather than on its own.
    pub fn in_turn(self) -> bool {
        matches!(self, Kind::Step | Kind::TurnEnd)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Message => "message",
            Kind::Manual => "manual",
            Kind::Auto => "auto",
            Kind::Initial => "initial",
            Kind::PreRestore => "pre-restore",
            Kind::Restore => "restore",
            Kind::Approved => "approved",
            Kind::Reset => "reset",
            Kind::Imported => "imported",
            Kind::Step => "step",
            Kind::TurnEnd => "turn-end",
            Kind::Revert => "revert",
            Kind::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown checkpoint kind `{s}`"))
    }
}

/// Why a path was left alone by a snapshot, a restore or an edit abort: a stable code for
/// programs (`reason_code` on the wire) beside the human `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Larger than `max_file_size`.
    TooLarge,
    /// Could not be read (permissions, I/O error, vanished while listed).
    Unreadable,
    /// A socket, FIFO or device.
    SpecialFile,
    /// Rewritten during every attempt to read one version of it.
    Changing,
    /// A tree path that could escape the project or reach into a repository.
    UnsafePath,
    /// A parent is a symlink or a file: never followed or replaced.
    ParentNotFolder,
    /// A folder holding uncaptured files is where a file should go.
    FolderInTheWay,
    /// It exists, but the undo checkpoint could not capture it, so it is not replaced.
    NotCaptured,
    /// Someone else changed it while the restore ran.
    ChangedDuringRestore,
    /// Not captured before the restore (ignored or excluded then): left, or still differing.
    IgnoredThen,
    /// The store lacks its content.
    ContentMissing,
    /// Writing, replacing or deleting it failed.
    Unwritable,
    /// Recorded by an older ckpt, which gave no code.
    #[serde(other)]
    Other,
}

impl SkipReason {
    fn is_other(&self) -> bool {
        *self == SkipReason::Other
    }
}

/// The exact bytes of a tree path that is not UTF-8 (whose `path` text is lossy), carried beside
/// it on the wire so a client can name the file back; None for every UTF-8 path.
pub fn path_bytes(path: &[u8]) -> Option<Vec<u8>> {
    std::str::from_utf8(path).is_err().then(|| path.to_vec())
}

/// A path that a snapshot or a restore had to leave alone, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SkippedFile {
    /// The tree path (lossy when it is not UTF-8; see `path_bytes`).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_bytes: Option<Vec<u8>>,
    pub reason: String,
    #[serde(default = "other_reason", skip_serializing_if = "SkipReason::is_other")]
    pub reason_code: SkipReason,
}

fn other_reason() -> SkipReason {
    SkipReason::Other
}

impl SkippedFile {
    /// `path` is the tree path's bytes.
    pub fn new(path: &[u8], code: SkipReason, reason: impl Into<String>) -> SkippedFile {
        SkippedFile {
            path: String::from_utf8_lossy(path).into_owned(),
            path_bytes: path_bytes(path),
            reason: reason.into(),
            reason_code: code,
        }
    }
}

/// Default number of checkpoints kept in a dialog's active session.
pub const DEFAULT_KEEP: usize = 50;
/// Default number of automatic checkpoints kept.
pub const DEFAULT_AUTO_KEEP: usize = 20;

/// How many checkpoints of a dialog to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Checkpoints (other than automatic ones) kept in each dialog, newest first.
    pub keep: usize,
    /// Automatic checkpoints kept, newest first, whatever their session.
    pub auto_keep: usize,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            keep: DEFAULT_KEEP,
            auto_keep: DEFAULT_AUTO_KEEP,
        }
    }
}

/// How a project finds changes; on the wire, the text `status` has always shown
/// (`watching`, `degraded: <why>`, `polling`, `not opened yet`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchMode {
    /// Its store has not been opened since the daemon started.
    NotOpened,
    /// inotify reports every change: checkpoints read only what changed.
    Watching,
    /// Some watches could not be placed (or events were lost): the next checkpoint verifies
    /// every file by stat.
    Degraded(String),
    /// No watcher at all: every checkpoint verifies by stat.
    Polling,
}

impl fmt::Display for WatchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchMode::NotOpened => f.write_str("not opened yet"),
            WatchMode::Watching => f.write_str("watching"),
            WatchMode::Degraded(why) => write!(f, "degraded: {why}"),
            WatchMode::Polling => f.write_str("polling"),
        }
    }
}

impl FromStr for WatchMode {
    type Err = String;

    fn from_str(s: &str) -> Result<WatchMode, String> {
        Ok(match s {
            "not opened yet" => WatchMode::NotOpened,
            "watching" => WatchMode::Watching,
            "polling" => WatchMode::Polling,
            other => match other.strip_prefix("degraded: ") {
                Some(why) => WatchMode::Degraded(why.to_string()),
                None => return Err(format!("unknown watch mode `{other}`")),
            },
        })
    }
}

impl Serialize for WatchMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WatchMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WatchMode, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Where another person's checkpoint came from (see `store::share`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The remote it was fetched from.
    pub remote: String,
    /// Who pushed it (their `push_as`, by default user@host).
    pub who: String,
}

/// Names under `refs/ckpt/` that are a store's own, and so no person's name.
pub const RESERVED_WHO: &[&str] = &[
    "dialogs", "meta", "approved", "tags", "notes", "kept", "index", "remotes", "pool",
];

/// Whether `who` can name a person on a remote (`refs/ckpt/<who>/`): a ref component (`@`
/// allowed, for user@host) that is none of [`RESERVED_WHO`].
pub fn is_valid_who(who: &str) -> bool {
    !who.is_empty()
        && who.len() <= 100
        && !who.starts_with(['.', '-', '@'])
        && !who.ends_with(".lock")
        && !who.contains("..")
        && !who.contains("@{")
        && !RESERVED_WHO.contains(&who)
        && who
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

/// `1.5 MiB` and the like.
pub fn human_bytes(bytes: u64) -> String {
    let mut value = bytes as f64;
    for unit in ["B", "KiB", "MiB", "GiB"] {
        if value < 1024.0 || unit == "GiB" {
            return if unit == "B" {
                format!("{bytes} B")
            } else {
                format!("{value:.1} {unit}")
            };
        }
        value /= 1024.0;
    }
    unreachable!("the loop returns at GiB")
}

/// `user@host` with every character a ref cannot hold replaced by `-`.
pub fn default_who(user: &str, host: &str) -> String {
    let clean = |s: &str| -> String {
        let s: String = s
            .chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    true => c,
                    false => '-',
                },
            )
            .collect();
        let s = s.trim_start_matches(['.', '-']).replace("..", "-");
        match s.is_empty() {
            true => "someone".into(),
            false => s.chars().take(48).collect(),
        }
    };
    format!("{}@{}", clean(user), clean(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_who_is_a_name_a_ref_can_hold() {
        assert_eq!(default_who("ann lee", "box/1"), "ann-lee@box-1");
        assert_eq!(default_who("", ".."), "someone@someone");
    }

    #[test]
    fn kinds_round_trip_by_name() {
        for kind in [Kind::PreRestore, Kind::Message, Kind::Reset] {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(kind.as_str().parse::<Kind>().unwrap(), kind);
        }
        assert_eq!(
            serde_json::from_str::<Kind>("\"from-the-future\"").unwrap(),
            Kind::Unknown
        );
        assert!("from-the-future".parse::<Kind>().is_err());
        assert!(Kind::Approved.ends_session() && !Kind::Restore.ends_session());
    }

    #[test]
    fn ids_are_parsed_once() {
        let hex = "0123456789abcdef0123456789abcdef01234567";
        let id: CheckpointId = hex.parse().unwrap();
        assert_eq!(id.to_string(), hex);
        assert_eq!(id.short(), "0123456789ab");
        assert!("0123".parse::<CheckpointId>().is_err());
        assert!(serde_json::from_str::<CheckpointId>("\"zz\"").is_err());
    }

    #[test]
    fn old_skips_without_a_code_still_read() {
        let s: SkippedFile = serde_json::from_str(r#"{"path":"a","reason":"r"}"#).unwrap();
        assert_eq!(s.reason_code, SkipReason::Other);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"path":"a","reason":"r"}"#
        );
    }
}
