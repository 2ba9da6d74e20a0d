//! The conversation half of a checkpoint: a prompt's place in the agent's own session, and a
//! *fork* of that session holding the conversation up to just before the prompt.
//!
//! A prompt's checkpoint keeps the hook's input as its metadata (see `commands::hook`): the
//! agent, its session id, the transcript's path and the prompt's own id where the agent sends one
//! (Claude Code's `prompt_id`, Codex's `turn_id`; Gemini CLI sends the hook's time instead).
//! Nothing is read at hook time: the transcript is read when a rewind or fork asks, and the prompt
//! is found in it exactly (by its id, or by its text at or after the hook's time; by text and
//! order only when neither was recorded).
//!
//! A fork is a **new** session in the agent's own format and folder, with a new id, that the
//! agent resumes like any of its own (`claude --resume ID`, `codex resume ID`, `gemini --resume
//! ID`). The agent's files are never edited: the fork is written under a temporary name beside
//! them and renamed into place (never over a file), so an agent listing its sessions sees the
//! whole fork or nothing. Each agent's reader checks the shape it relies on, line by line, and
//! refuses anything else with [`CannotFork`] before anything is written.

mod claude;
mod codex;
mod gemini;
mod jsonl;
mod place;
#[cfg(test)]
mod robustness;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::commands::hook::agents::Agent;

/// Why a conversation cannot be forked (the code can still be rewound).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct CannotFork(pub String);

impl CannotFork {
    fn format(agent: Agent, what: impl std::fmt::Display) -> CannotFork {
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

impl Point {
    /// The point a prompt's checkpoint recorded.
    pub fn of(c: Recorded<'_>) -> Result<Point, CannotFork> {
        if let Some(elsewhere) = &c.elsewhere {
            return Err(CannotFork(format!(
                "this prompt was {elsewhere}: its conversation stays on the machine that \
                 recorded it"
            )));
        }
        let not_hook = || CannotFork("it was not recorded by an agent's prompt hook".into());
        let meta = c.meta.ok_or_else(not_hook)?;
        let text = |key: &str| meta.get(key).and_then(Value::as_str);
        let agent = agent_of(meta).ok_or_else(not_hook)?;
        if !matches!(agent, Agent::ClaudeCode | Agent::Codex | Agent::Gemini) {
            return Err(CannotFork(format!(
                "ckpt cannot fork {} conversations (Claude Code, Codex and Gemini CLI only)",
                agent.name()
            )));
        }
        let session = text("session_id")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| CannotFork(format!("the {} hook sent no session id", agent.name())))?;
        let transcript = text("transcript_path")
            .filter(|p| Path::new(p).is_absolute())
            .map(PathBuf::from)
            .or_else(|| known_transcript(agent, session, text("cwd")))
            .ok_or_else(|| CannotFork(format!("the {} hook named no transcript", agent.name())))?;
        Ok(Point {
            agent,
            session: session.to_string(),
            transcript,
            prompt: c.label.to_string(),
            message_id: c.message_id.map(String::from),
            hook_time: text("timestamp").and_then(|t| t.parse().ok()),
            occurrence: c.occurrence,
        })
    }

    /// Whether the prompt can be found in its session and every line before it read, without
    /// building a fork (what `ckpt log` shows); `sessions` keeps each session file read once.
    pub fn check(&self, sessions: &mut Sessions) -> Result<(), CannotFork> {
        let located = self.located()?;
        let read = sessions
            .entry(self.transcript.clone())
            .or_insert_with(|| {
                jsonl::read(self.agent, &located).map(|text| {
                    let first_bad = jsonl::first_bad(&text);
                    (text, first_bad)
                })
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let (text, first_bad) = (read.0.as_str(), read.1);
        let at = match self.agent {
            Agent::ClaudeCode => claude::locate(self, text).map(|(at, _)| at),
            Agent::Codex => codex::locate(self, text),
            _ => gemini::locate(self, text),
        }?;
        match first_bad {
            Some((number, index)) if index < at => Err(CannotFork::format(
                self.agent,
                format!("line {number} is not a JSON object"),
            )),
            _ => Ok(()),
        }
    }
}

impl Point {
    /// The session file inside its agent's own folder, or why it is not there.
    fn located(&self) -> Result<place::Located, CannotFork> {
        place::Located::of(self.agent, &self.transcript, &self.session)
    }
}

/// Session files read, by path: the text and its first line that is not a JSON object (its
/// number and index among the lines).
pub type Sessions =
    std::collections::HashMap<PathBuf, Result<(String, Option<(usize, usize)>), CannotFork>>;

/// Where the agent keeps session `id` when its hook did not say (Codex may send no transcript
/// path): Claude Code's `projects/<folder>/<id>.jsonl` for the hook's `cwd`, Codex's newest
/// `sessions/YYYY/MM/DD/rollout-…-<id>.jsonl`. None when it is not there.
fn known_transcript(agent: Agent, id: &str, cwd: Option<&str>) -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    if id.contains('/') || id.contains("..") {
        return None;
    }
    let found = match agent {
        Agent::ClaudeCode => {
            let config = std::env::var_os("CLAUDE_CONFIG_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".claude"));
            let folder = claude::folder_name(Path::new(cwd?)).ok()?;
            config
                .join("projects")
                .join(folder)
                .join(format!("{id}.jsonl"))
        }
        Agent::Codex => {
            let sessions = super::commands::hook::codex_trust::codex_home(&home).join("sessions");
            let suffix = format!("-{id}.jsonl");
            // Date folders, newest first; the session is in the folder of the day it began.
            let mut days = Vec::new();
            for year in sorted_dirs(&sessions) {
                for month in sorted_dirs(&year) {
                    days.extend(sorted_dirs(&month));
                }
            }
            days.sort();
            days.iter().rev().find_map(|day| {
                std::fs::read_dir(day).ok()?.flatten().find_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name.starts_with("rollout-") && name.ends_with(&suffix)).then(|| e.path())
                })
            })?
        }
        _ => return None,
    };
    std::fs::symlink_metadata(&found).is_ok().then_some(found)
}

/// The folders in `dir`, sorted by name (none when it cannot be read).
fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
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
fn infer_agent(meta: &Value) -> Option<Agent> {
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

/// Where the fork goes: beside the original session, or where the agent looks for sessions of
/// another folder (a worktree made by `ckpt fork`).
#[derive(Debug, Clone)]
pub enum Place {
    Beside,
    Folder(PathBuf),
}

/// A fork planned in memory: nothing is written until [`Fork::write`].
#[derive(Debug)]
pub struct Fork {
    pub agent: Agent,
    pub prompt: String,
    /// The agent's folder of sessions: the fork is written below it, never elsewhere.
    root: PathBuf,
    /// The new session; none when no conversation came before the prompt (the agent then
    /// simply starts a new one).
    session: Option<NewSession>,
}

#[derive(Debug)]
struct NewSession {
    id: String,
    folder: PathBuf,
    file_name: String,
    bytes: Vec<u8>,
}

/// A written fork, as `rewind` and `fork` report it.
#[derive(Debug, Clone, Serialize)]
pub struct Forked {
    pub agent: &'static str,
    /// The new session's id (null when the conversation before the prompt was empty).
    pub session_id: Option<String>,
    /// The command that continues the forked conversation.
    pub resume: Vec<String>,
    /// The rewound prompt, to edit and send again.
    pub prompt: String,
    /// The session file written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

/// Reads the prompt's session and builds the fork in memory.
pub fn plan(point: &Point, place: &Place) -> Result<Fork, CannotFork> {
    plan_located(point, place, point.located()?)
}

/// [`plan`] of a session file found already.
fn plan_located(point: &Point, place: &Place, located: place::Located) -> Result<Fork, CannotFork> {
    let text = jsonl::read(point.agent, &located)?;
    let session = match point.agent {
        Agent::ClaudeCode => claude::fork(point, &text, place)?,
        Agent::Codex => codex::fork(point, &text, place)?,
        _ => gemini::fork(point, &text, place)?,
    };
    Ok(Fork {
        agent: point.agent,
        prompt: point.prompt.clone(),
        root: located.root,
        session,
    })
}

impl Fork {
    /// Writes the new session into the agent's folder (never over an existing file).
    pub fn write(self) -> Result<Forked, CannotFork> {
        let path = match &self.session {
            Some(s) => {
                let cannot = |e: &dyn std::fmt::Display| {
                    CannotFork(format!(
                        "cannot write the forked session into {}: {e}",
                        s.folder.display()
                    ))
                };
                // Each session folder is found below the agent's own.
                let below = s
                    .folder
                    .strip_prefix(&self.root)
                    .map_err(|_| cannot(&"it is not in the agent's folder of sessions"))?;
                Some(
                    place::write_new(&self.root, below, &s.file_name, &s.bytes)
                        .map_err(|e| cannot(&e))?,
                )
            }
            None => None,
        };
        let id = self.session.map(|s| s.id);
        Ok(Forked {
            agent: self.agent.name(),
            resume: resume_command(self.agent, id.as_deref()),
            session_id: id,
            prompt: self.prompt,
            path,
        })
    }
}

/// The agent's session a prompt's checkpoint recorded, and the command that continues it (for
/// the files as they were when the prompt's turn went on: after an undo of a rewind, the
/// original session is the one they belong to).
pub fn session_of(meta: &Value) -> Option<Forked> {
    let agent = agent_of(meta)?;
    let id = meta.get("session_id").and_then(Value::as_str)?;
    Some(Forked {
        agent: agent.name(),
        session_id: Some(id.to_string()),
        resume: resume_command(agent, Some(id)),
        prompt: String::new(),
        path: None,
    })
}

/// What a rewind notes on its restore checkpoint when it forked the conversation, so that the
/// fork's own prompts (a dialog named by the new session) are known for a fork of that one.
pub fn fork_note(forked: &Forked, from_session: &str) -> Option<String> {
    let id = forked.session_id.as_deref()?;
    Some(format!(
        "{FORK_NOTE}{} session {id} from session {from_session}",
        forked.agent
    ))
}

const FORK_NOTE: &str = "conversation forked: ";

/// The new session and the one it was forked from, of a note [`fork_note`] wrote.
pub fn parse_fork_note(note: &str) -> Option<(&str, &str)> {
    let rest = note.strip_prefix(FORK_NOTE)?;
    let (_, rest) = rest.split_once(" session ")?;
    let (new, from) = rest.split_once(" from session ")?;
    Some((new.trim(), from.trim()))
}

/// The command that continues session `id` (or starts a new one).
fn resume_command(agent: Agent, id: Option<&str>) -> Vec<String> {
    let words: &[&str] = match (agent, id) {
        (Agent::ClaudeCode, Some(_)) => &["claude", "--resume"],
        (Agent::Codex, Some(_)) => &["codex", "resume"],
        (Agent::Gemini, Some(_)) => &["gemini", "--resume"],
        (Agent::ClaudeCode, None) => &["claude"],
        (Agent::Codex, None) => &["codex"],
        _ => &["gemini"],
    };
    words
        .iter()
        .map(|w| w.to_string())
        .chain(id.map(String::from))
        .collect()
}

/// A new random UUID (version 4), as Claude Code and Gemini CLI name sessions.
fn uuid_v4() -> String {
    let mut b = random16();
    b[6] = 0x40 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    format_uuid(&b)
}

/// A new time-ordered UUID (version 7), as Codex names sessions.
fn uuid_v7() -> String {
    let mut b = random16();
    let ms = (jiff::Timestamp::now().as_millisecond().max(0) as u64).to_be_bytes();
    b[..6].copy_from_slice(&ms[2..]);
    b[6] = 0x70 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    format_uuid(&b)
}

fn random16() -> [u8; 16] {
    let mut b = [0u8; 16];
    let mut filled = 0;
    while filled < b.len() {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            // The kernel's generator does not fail once booted; a clock-based id still differs
            // from every other session's.
            Err(_) => {
                let now = jiff::Timestamp::now().as_nanosecond() as u128;
                b = (now ^ (u128::from(std::process::id()) << 64)).to_be_bytes();
                break;
            }
        }
    }
    b
}

fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_have_their_version_and_variant() {
        let v4 = uuid_v4();
        let v7 = uuid_v7();
        for (id, version) in [(&v4, '4'), (&v7, '7')] {
            assert_eq!(id.len(), 36, "{id}");
            assert_eq!(id.chars().nth(14), Some(version), "{id}");
            assert!(
                matches!(id.chars().nth(19), Some('8' | '9' | 'a' | 'b')),
                "{id}"
            );
        }
        assert_ne!(uuid_v4(), v4);
        assert!(uuid_v7()[..13] >= v7[..13], "time-ordered");
    }

    #[test]
    fn the_agent_of_an_older_checkpoint_is_inferred_from_its_input() {
        let meta = |event: &str, path: &str| serde_json::json!({"hook_event_name": event, "transcript_path": path});
        let cases = [
            (
                meta("BeforeAgent", "/h/.gemini/tmp/p/chats/s.jsonl"),
                Some(Agent::Gemini),
            ),
            (
                meta(
                    "UserPromptSubmit",
                    "/h/.codex/sessions/2026/01/02/rollout-x.jsonl",
                ),
                Some(Agent::Codex),
            ),
            (
                meta("UserPromptSubmit", "/h/.claude/projects/-p/x.jsonl"),
                Some(Agent::ClaudeCode),
            ),
            (meta("userPromptSubmitted", "/x"), None),
        ];
        for (meta, agent) in cases {
            assert_eq!(infer_agent(&meta), agent, "{meta}");
        }
    }
}
