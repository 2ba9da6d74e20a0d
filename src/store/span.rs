//! What a checkpoint says about turns: for a `step` or `turn-end`, the turn it is a point of
//! ([`TurnPoint`]); for every checkpoint recorded in a project, what changed since the one
//! recorded before it in any dialog and which turns were running meanwhile ([`Span`]). Both live
//! in the checkpoint's header, so they travel with it (restarts, gc, bundles); who changed what
//! is read from them (`engine::attribution`).

use gix::bstr::ByteSlice;
use serde::{Deserialize, Serialize};

use crate::model::CheckpointId;

/// More changed paths than this in one span are not listed in the header: readers diff the two
/// trees instead ([`Span::more`]).
pub const MAX_SPAN_CHANGES: usize = 10_000;

/// For a `step` or `turn-end` checkpoint: the turn it belongs to and what the tool said.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TurnPoint {
    /// The prompt's checkpoint that started the turn.
    pub turn: CheckpointId,
    /// The step's place in its turn (1, 2, ...); none for the turn's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The tool's name, as the agent calls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The paths the tool named, relative to the project's root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Whether the tool can have changed only `paths` (an edit or a read tool); false for a
    /// shell, a subagent or an unknown tool, which may have changed anything.
    #[serde(default)]
    pub declared: bool,
    /// The agent's id of the tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
}

/// What changed in the project between the checkpoint recorded before this one (in any of its
/// dialogs) and this one, and which turns were running meanwhile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Span {
    /// The checkpoint recorded before this one.
    pub after: CheckpointId,
    /// Its tree: the state the span starts from.
    pub before: String,
    /// The turns (their prompts' checkpoints) running during the span.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<CheckpointId>,
    /// Each changed path: `A path`, `M path` or `D path`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// More than [`MAX_SPAN_CHANGES`] changed: `changes` is empty and the trees tell.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

/// How a path changed in a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

impl Change {
    pub fn letter(self) -> char {
        match self {
            Change::Added => 'A',
            Change::Modified => 'M',
            Change::Deleted => 'D',
        }
    }

    /// The change of a path that was `first` and then `then` (in a later span).
    pub fn then(self, then: Change) -> Option<Change> {
        use Change::*;
        match (self, then) {
            (Added, Deleted) => None,
            (Added, _) => Some(Added),
            (Deleted, Deleted) => Some(Deleted),
            (Deleted, _) => Some(Modified),
            (Modified, Deleted) => Some(Deleted),
            (Modified, _) => Some(Modified),
        }
    }
}

impl Span {
    /// The listed changes, as (how, path).
    pub fn listed(&self) -> impl Iterator<Item = (Change, &str)> {
        self.changes.iter().filter_map(|c| {
            let (how, path) = c.split_once(' ')?;
            let how = match how {
                "A" => Change::Added,
                "M" => Change::Modified,
                "D" => Change::Deleted,
                _ => return None,
            };
            Some((how, path))
        })
    }

    /// The listing of `changes` (from a tree diff), or none past [`MAX_SPAN_CHANGES`].
    pub fn list_changes(changes: &[super::treediff::TreeChange]) -> (Vec<String>, bool) {
        if changes.len() > MAX_SPAN_CHANGES {
            return (Vec::new(), true);
        }
        let listed = changes
            .iter()
            .map(|c| {
                let how = match (&c.old, &c.new) {
                    (None, _) => Change::Added,
                    (_, None) => Change::Deleted,
                    _ => Change::Modified,
                };
                format!("{} {}", how.letter(), c.path.to_str_lossy())
            })
            .collect();
        (listed, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_compose() {
        use Change::*;
        assert_eq!(Added.then(Modified), Some(Added));
        assert_eq!(Added.then(Deleted), None);
        assert_eq!(Deleted.then(Added), Some(Modified));
        assert_eq!(Modified.then(Deleted), Some(Deleted));
    }

    #[test]
    fn listed_changes_read_back() {
        let span = Span {
            after: "0123456789012345678901234567890123456789".parse().unwrap(),
            before: String::new(),
            running: Vec::new(),
            changes: vec!["A a b.txt".into(), "D c".into(), "?? junk".into()],
            more: false,
        };
        let listed: Vec<_> = span.listed().collect();
        assert_eq!(listed, [(Change::Added, "a b.txt"), (Change::Deleted, "c")]);
    }
}
