//! A fork planned in memory ([`Fork`]), written into the agent's folder ([`Fork::write`]), and
//! what a written fork reports ([`Forked`]): the new session and the command that resumes it.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::place;
use super::point::{agent_of, CannotFork};
use crate::client::agents::agent::Agent;

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
    pub(super) root: PathBuf,
    /// The new session; none when no conversation came before the prompt (the agent then
    /// simply starts a new one).
    pub(super) session: Option<NewSession>,
    /// What else makes the session the agent's.
    pub(super) then: Then,
}

/// How a new session becomes one the agent resumes, besides (or instead of) its files.
#[derive(Debug)]
pub(super) enum Then {
    /// Its files are all.
    Nothing,
    /// The agent's own `import`, run in the session's folder, writes it (OpenCode, Kilo CLI):
    /// no file is written.
    Import(PathBuf),
    /// A row in the agent's index, by this SQL, after the files (Cline CLI's `sessions.db`);
    /// the files are removed again when it fails.
    Index { db: PathBuf, sql: String },
}

#[derive(Debug)]
pub(super) struct NewSession {
    pub(super) id: String,
    pub(super) folder: PathBuf,
    pub(super) file_name: String,
    pub(super) bytes: Vec<u8>,
    /// Other files of the session, with it in a folder of its own (`folder`, new: Copilot
    /// CLI's session folders); empty where the session is one file in a shared folder.
    pub(super) beside: Vec<(String, Vec<u8>)>,
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

impl Fork {
    /// Writes the new session into the agent's folder (never over an existing file).
    pub fn write(self) -> Result<Forked, CannotFork> {
        let path = match &self.session {
            // OpenCode's and Kilo's sessions are rows of their database, written by the agent.
            Some(s) if matches!(self.then, Then::Import(_)) => {
                let Then::Import(dir) = &self.then else {
                    unreachable!("matched")
                };
                super::opencode::import(self.agent, &s.bytes, dir)?;
                None
            }
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
                let written = match s.beside.is_empty() {
                    true => place::write_new(&self.root, below, &s.file_name, &s.bytes),
                    false => {
                        let mut files = vec![(s.file_name.as_str(), s.bytes.as_slice())];
                        files.extend(s.beside.iter().map(|(n, b)| (n.as_str(), b.as_slice())));
                        place::write_new_folder(&self.root, below, &files)
                            .map(|folder| folder.join(&s.file_name))
                    }
                };
                let written = written.map_err(|e| cannot(&e))?;
                if let Then::Index { db, sql } = &self.then {
                    if let Err(e) = super::cline::register(db, sql) {
                        // Not indexed, not the agent's: nothing of the fork stays.
                        if let Some(folder) = written.parent() {
                            let _ = std::fs::remove_dir_all(folder);
                        }
                        return Err(e);
                    }
                }
                Some(written)
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
pub(super) fn resume_command(agent: Agent, id: Option<&str>) -> Vec<String> {
    let words: &[&str] = match (agent, id) {
        (Agent::ClaudeCode, Some(_)) => &["claude", "--resume"],
        (Agent::Codex, Some(_)) => &["codex", "resume"],
        (Agent::Gemini, Some(_)) => &["gemini", "--resume"],
        (Agent::Qwen, Some(_)) => &["qwen", "--resume"],
        (Agent::Qwen, None) => &["qwen"],
        (Agent::Copilot, Some(_)) => &["copilot", "--resume"],
        (Agent::Copilot, None) => &["copilot"],
        (Agent::OpenCode, Some(_)) => &["opencode", "--session"],
        (Agent::OpenCode, None) => &["opencode"],
        (Agent::Kilo, Some(_)) => &["kilo", "--session"],
        (Agent::Kilo, None) => &["kilo"],
        (Agent::Cline, Some(_)) => &["cline", "--id"],
        (Agent::Cline, None) => &["cline"],
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
