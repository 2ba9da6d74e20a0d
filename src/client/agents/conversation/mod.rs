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
//! ID`, `qwen --resume ID`, `copilot --resume ID`). The agent's files are never edited: the fork is written under a temporary name beside
//! them and renamed into place (never over a file), so an agent listing its sessions sees the
//! whole fork or nothing. Each agent's reader checks the shape it relies on, line by line, and
//! refuses anything else with [`CannotFork`] before anything is written.

mod child;
mod claude;
mod cline;
mod codex;
mod copilot;
mod fork;
mod gemini;
mod ids;
mod jsonl;
mod opencode;
mod place;
mod point;
mod qwen;
#[cfg(test)]
mod robustness;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::client::agents::agent::Agent;
pub use fork::{fork_note, parse_fork_note, session_of, Fork, Forked, Place};
use fork::{NewSession, Then};
use ids::{uuid_v4, uuid_v7};
pub use point::{agent_of, CannotFork, Point, Recorded, AGENT_KEY};

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
        if !matches!(
            agent,
            Agent::ClaudeCode
                | Agent::Codex
                | Agent::Gemini
                | Agent::Qwen
                | Agent::Copilot
                | Agent::OpenCode
                | Agent::Kilo
                | Agent::Cline
        ) {
            return Err(CannotFork(format!(
                "ckpt cannot fork {} conversations (Claude Code, Codex, Gemini CLI, Qwen Code, \
                 Copilot CLI, OpenCode, Kilo CLI and Cline CLI only)",
                agent.name()
            )));
        }
        // Copilot CLI's own events spell their fields in camelCase.
        let cline = (agent == Agent::Cline)
            .then(|| crate::client::agents::cline::session(meta))
            .flatten();
        let session = text("session_id")
            .or_else(|| text("sessionId"))
            .or(cline.as_deref())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| CannotFork(format!("the {} hook sent no session id", agent.name())))?;
        let transcript = text("transcript_path")
            .or_else(|| text("transcriptPath"))
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
            // A time, or (Copilot CLI's) milliseconds since 1970.
            hook_time: match meta.get("timestamp") {
                Some(Value::String(t)) => t.parse().ok(),
                Some(Value::Number(ms)) => ms
                    .as_i64()
                    .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()),
                _ => None,
            },
            occurrence: c.occurrence,
            index: meta
                .get("prompt_index")
                .and_then(Value::as_u64)
                .map(|n| n as usize),
            after_tool: None,
        })
    }

    /// Whether the prompt can be found in its session and every line before it read, without
    /// building a fork (what `ckpt log` shows); `sessions` keeps each session file read once.
    pub fn check(&self, sessions: &mut Sessions) -> Result<(), CannotFork> {
        if self.agent.is_plugin() {
            return opencode::check(self);
        }
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
            Agent::Qwen => qwen::locate(self, text),
            Agent::Copilot => copilot::locate(self, text),
            // One JSON document, not lines: nothing more to check.
            Agent::Cline => {
                cline::sqlite3()?;
                return cline::locate(self, text).map(drop);
            }
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
            let sessions = crate::client::agents::codex_trust::codex_home(&home).join("sessions");
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
        Agent::Copilot => place::sessions_root(agent)?.join(id).join("events.jsonl"),
        Agent::OpenCode | Agent::Kilo => opencode::database(agent)?,
        Agent::Cline => place::sessions_root(agent)?
            .join(id)
            .join(format!("{id}.messages.json")),
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

/// Reads the prompt's session and builds the fork in memory.
pub fn plan(point: &Point, place: &Place) -> Result<Fork, CannotFork> {
    if point.agent.is_plugin() {
        return plan_opencode(point, place);
    }
    plan_located(point, place, point.located()?)
}

/// [`plan`] of an OpenCode or Kilo CLI session: a new session for their `import`.
fn plan_opencode(point: &Point, place: &Place) -> Result<Fork, CannotFork> {
    let name = point.agent.name();
    let folder = match place {
        Place::Folder(dir) => Some(dir.as_path()),
        Place::Beside => None,
    };
    if point.after_tool.is_some() {
        return Err(CannotFork(format!(
            "ckpt forks a conversation to a step in Claude Code sessions only, not {name}'s"
        )));
    }
    let planned = opencode::plan(point, folder)?;
    let then = match &planned {
        Some(p) => Then::Import(p.directory.clone()),
        None => Then::Nothing,
    };
    let session = planned.map(|p| NewSession {
        file_name: format!("{}.json", p.id),
        folder: std::env::temp_dir(),
        bytes: p.bytes,
        beside: Vec::new(),
        id: p.id,
    });
    Ok(Fork {
        agent: point.agent,
        prompt: point.prompt.clone(),
        root: std::env::temp_dir(),
        session,
        then,
    })
}

/// [`plan`] of a Cline CLI session: a new session folder, then its row in Cline's index.
fn plan_cline(
    point: &Point,
    place: &Place,
    located: place::Located,
    text: &str,
) -> Result<Fork, CannotFork> {
    if let Place::Folder(_) = place {
        return Err(CannotFork(
            "ckpt forks Cline conversations beside the original only (a session for another \
             folder was not tried with its binary)"
                .into(),
        ));
    }
    let meta_name = format!("{}.json", point.session);
    let meta = jsonl::read_beside(point.agent, &located, &meta_name)?;
    let planned = cline::fork(point, text, &meta, &located.root)?;
    let mut then = Then::Nothing;
    let session = match planned {
        None => None,
        Some(p) => {
            cline::sqlite3()?;
            then = Then::Index {
                db: cline::index(&located.root),
                sql: p.sql,
            };
            Some(NewSession {
                folder: located.root.join(&p.id),
                file_name: format!("{}.messages.json", p.id),
                bytes: p.messages,
                beside: vec![(format!("{}.json", p.id), p.meta)],
                id: p.id,
            })
        }
    };
    Ok(Fork {
        agent: point.agent,
        prompt: point.prompt.clone(),
        root: located.root,
        session,
        then,
    })
}

/// [`plan`] of a session file found already.
fn plan_located(point: &Point, place: &Place, located: place::Located) -> Result<Fork, CannotFork> {
    let text = jsonl::read(point.agent, &located)?;
    if point.after_tool.is_some() && point.agent != Agent::ClaudeCode {
        return Err(CannotFork(format!(
            "ckpt forks a conversation to a step in Claude Code sessions only, not {}'s",
            point.agent.name()
        )));
    }
    let session = match point.agent {
        Agent::ClaudeCode => claude::fork(point, &text, place)?,
        Agent::Codex => codex::fork(point, &text, place)?,
        Agent::Qwen => qwen::fork(point, &text, place)?,
        Agent::Copilot => {
            let workspace = jsonl::read_beside(point.agent, &located, "workspace.yaml")?;
            copilot::fork(point, &text, &workspace, place)?
        }
        Agent::Cline => return plan_cline(point, place, located, &text),
        _ => gemini::fork(point, &text, place)?,
    };
    Ok(Fork {
        agent: point.agent,
        prompt: point.prompt.clone(),
        root: located.root,
        session,
        then: Then::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::point::infer_agent;
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
