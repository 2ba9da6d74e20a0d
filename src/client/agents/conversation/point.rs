//! Where a prompt is in its agent's session, as its checkpoint recorded it ([`Point`]), and
//! why a conversation cannot be forked ([`CannotFork`]).

use std::path::PathBuf;

use serde_json::Value;

use crate::client::agents::agent::Agent;

/// Why a conversation cannot be forked (the code can still be rewound).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct CannotFork(pub String);

impl CannotFork {
    pub(super) fn format(agent: Agent, what: impl std::fmt::Display) -> CannotFork {
        CannotFork(format!(
            "cannot fork this {} session (format: {what})",
            agent.name()
        ))
    }
}

/// Where a prompt is in its agent's session, as its checkpoint recorded it.
#[derive(Debug, Clone)]
pub struct Point {
    pub agent: Agent,
    /// The agent's session id.
    pub session: String,
    pub transcript: PathBuf,
    /// The prompt's text (the checkpoint's label).
    pub prompt: String,
    /// The prompt's own id in the session, where the agent sends one.
    pub message_id: Option<String>,
    /// When the agent ran the hook (Gemini CLI's `timestamp`).
    pub hook_time: Option<jiff::Timestamp>,
    /// How many earlier prompts of the dialog had the same text (for agents that give neither an
    /// id nor a time).
    pub occurrence: usize,
    /// How many prompts of the session came before it (Cline CLI's: its hook sends no text).
    pub index: Option<usize>,
    /// Fork to just after this tool call's result, in the prompt's turn, rather than to just
    /// before the prompt (a rewind to a step; Claude Code sessions).
    pub after_tool: Option<String>,
}

/// The fields of a checkpoint [`Point::of`] reads.
pub struct Recorded<'a> {
    pub label: &'a str,
    pub message_id: Option<&'a str>,
    pub meta: Option<&'a Value>,
    pub occurrence: usize,
    /// Where the checkpoint came from when another machine recorded it (a remote, a bundle):
    /// its metadata names files of that machine and is never trusted to name one here.
    pub elsewhere: Option<String>,
}

impl<'a> Recorded<'a> {
    /// What checkpoint `c` recorded, `occurrence` earlier prompts of its dialog having its text.
    pub fn of(c: &'a crate::protocol::results::Checkpoint, occurrence: usize) -> Recorded<'a> {
        let elsewhere = match (&c.origin, &c.imported) {
            (Some(o), _) => Some(format!("fetched from {} (pushed by {})", o.remote, o.who)),
            (None, Some(_)) => Some("imported from a bundle".to_string()),
            (None, None) => None,
        };
        Recorded {
            label: &c.label,
            message_id: c.message_id.as_deref(),
            meta: c.meta.as_ref(),
            occurrence,
            elsewhere,
        }
    }
}

/// The metadata key where the hook records which agent sent the prompt.
pub const AGENT_KEY: &str = "ckpt_agent";

/// The agent whose hook recorded a prompt with this metadata.
pub fn agent_of(meta: &Value) -> Option<Agent> {
    meta.get(AGENT_KEY)
        .and_then(Value::as_str)
        .and_then(Agent::from_name)
        .or_else(|| infer_agent(meta))
}

/// The agent of a checkpoint recorded before the hook named it, from the shape of its input.
pub(super) fn infer_agent(meta: &Value) -> Option<Agent> {
    let event = meta.get("hook_event_name").and_then(Value::as_str)?;
    let transcript = meta
        .get("transcript_path")
        .and_then(Value::as_str)
        .unwrap_or("");
    match event {
        "BeforeAgent" => Some(Agent::Gemini),
        "UserPromptSubmit" if transcript.contains("/sessions/") => Some(Agent::Codex),
        "UserPromptSubmit" if transcript.contains("/projects/") => Some(Agent::ClaudeCode),
        _ => None,
    }
}
